// SPDX-License-Identifier: Apache-2.0
// The rdma_cm bootstrap (Context::connectFullMesh(const CmBootstrap&)) with ranks as threads
// in one process: the in-process world's hosts hcasim0..3 (HCASIM_HOSTS=4) are 192.0.2.1..4,
// each rank opens its own, and the drop-in librdmacm connects them over the simulated wire.
// Then what goes wrong: wrong group sizes, wrong address lists, addresses nobody answers for.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cm_bootstrap_util.h"
#include "hcasim/verbs/error.h"
#include "verbs_test_util.h"

namespace {

using namespace verbs_cm_test;
using std::chrono::milliseconds;

// Every test takes its own ports: ids of an earlier test may still be in time wait.
uint16_t freshPort() {
  static std::atomic<uint16_t> next{21000};
  return next.fetch_add(16);
}

/** Runs fn(rank) on @p n threads; returns each rank's exception text ("" if none). */
std::vector<std::string> onThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(size_t(n), "");
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

void collectivesOver(int n, PollMode mode) {
  verbs_test::Watchdog wd(120, "CmBootstrap collectives");
  const CmBootstrap cm = simHosts(n, freshPort());
  const auto errors = onThreads(n, [&](int r) {
    auto ctx = connectCm(r, n, "hcasim" + std::to_string(r), cm, milliseconds(30000), mode);
    for (int peer = 0; peer < n; ++peer) {
      if (peer != r) {
        EXPECT_TRUE(ctx->pair(peer).connected()) << "rank " << r << " pair to " << peer;
      }
    }
    for (size_t count : {size_t(1), size_t(n) * 3 + 1, size_t(1000), size_t(65537)})
      EXPECT_EQ(checkCollectives(*ctx, count), 0u) << "rank " << r << ", " << count << " elements";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

TEST(CmBootstrap, CollectivesTwoRanksAsThreads) { collectivesOver(2, PollMode::BusyPoll); }
TEST(CmBootstrap, CollectivesFourRanksAsThreads) { collectivesOver(4, PollMode::BusyPoll); }
TEST(CmBootstrap, CollectivesFourRanksAsThreadsEventMode) { collectivesOver(4, PollMode::Event); }

// The QP numbers the CM carried are the pairs' own: each pair's peer is the other's QP.
TEST(CmBootstrap, PairsNameEachOthersQps) {
  const CmBootstrap cm = simHosts(2, freshPort());
  std::vector<std::unique_ptr<Context>> ctx(2);
  const auto errors =
      onThreads(2, [&](int r) { ctx[size_t(r)] = connectCm(r, 2, "hcasim" + std::to_string(r), cm); });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_EQ(ctx[0]->pair(1).peer().qpn, ctx[1]->pair(0).address().qpn);
  EXPECT_EQ(ctx[1]->pair(0).peer().qpn, ctx[0]->pair(1).address().qpn);
  EXPECT_EQ(ctx[0]->pair(1).peer().psn, ctx[1]->pair(0).address().psn);
  EXPECT_EQ(ctx[1]->pair(0).peer().psn, ctx[0]->pair(1).address().psn);
  onThreads(2, [&](int r) { ctx[size_t(r)].reset(); });  // close() is collective: both at once
}

// Rank 1 believes in a group of 3: rank 0 refuses its request, naming the field, and rank 1
// learns why from the REJ's private data.
TEST(CmBootstrap, WrongGroupSizeIsRefusedOnBothSides) {
  verbs_test::Watchdog wd(60, "WrongGroupSize");
  const uint16_t port = freshPort();
  std::vector<std::string> fields(2);
  const auto errors = onThreads(2, [&](int r) {
    const int size = r == 0 ? 2 : 3;
    try {
      connectCm(r, size, "hcasim" + std::to_string(r), simHosts(size, port), milliseconds(10000));
    } catch (const AddressError& e) {
      fields[size_t(r)] = e.field();
      throw;
    }
  });
  for (int r = 0; r < 2; ++r) {
    std::printf("rank %d: %s\n", r, errors[size_t(r)].c_str());  // what a user would see
    EXPECT_EQ(fields[size_t(r)], "size") << "rank " << r << ": " << errors[size_t(r)];
    EXPECT_NE(errors[size_t(r)].find("field 'size'"), std::string::npos) << errors[size_t(r)];
    EXPECT_NE(errors[size_t(r)].find("group has 3 ranks, this one 2"), std::string::npos)
        << errors[size_t(r)];
  }
  EXPECT_NE(errors[1].find("refused the connection"), std::string::npos) << errors[1];
}

// Two groups on the same addresses and ports are told apart by their prefix.
TEST(CmBootstrap, AnotherGroupsRequestIsRefused) {
  verbs_test::Watchdog wd(60, "AnotherGroup");
  const CmBootstrap cm = simHosts(2, freshPort());
  std::vector<std::string> fields(2);
  const auto errors = onThreads(2, [&](int r) {
    DeviceAttr da;
    da.name = "hcasim" + std::to_string(r);
    ContextOptions co;
    co.pair.timeout = milliseconds(10000);
    co.prefix = r == 0 ? "job-a" : "job-b";
    Context ctx(r, 2, Device::open(da), co);
    try {
      ctx.connectFullMesh(cm);
    } catch (const AddressError& e) {
      fields[size_t(r)] = e.field();
      throw;
    }
  });
  EXPECT_EQ(fields[0], "group") << errors[0];
  EXPECT_EQ(fields[1], "group") << errors[1];
}

TEST(CmBootstrap, AddressListOfTheWrongLengthIsRefusedBeforeAnythingRuns) {
  DeviceAttr da;
  da.name = "hcasim0";
  Context ctx(0, 3, Device::open(da));
  try {
    ctx.connectFullMesh(simHosts(2, freshPort()));
    FAIL() << "no error";
  } catch (const AddressError& e) {
    EXPECT_EQ(e.field(), "addresses");
    EXPECT_NE(std::string(e.what()).find("2 addresses for a group of 3"), std::string::npos) << e.what();
  }
}

TEST(CmBootstrap, OwnAddressOnAnotherDeviceIsAnError) {
  CmBootstrap cm = simHosts(2, freshPort());
  std::swap(cm.addresses[0], cm.addresses[1]);  // rank 0 on hcasim0 told it is 192.0.2.2 (hcasim1)
  DeviceAttr da;
  da.name = "hcasim0";
  Context ctx(0, 2, Device::open(da));
  try {
    ctx.connectFullMesh(cm);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is on hcasim1 port 1, but this rank's Device is hcasim0"),
              std::string::npos)
        << e.what();
  }
}

// Rank 1 alone: rank 0's host exists but nobody listens there. The CM rejects every request
// (REJ reason 8); the bootstrap retries until the pair timeout and then says so.
TEST(CmBootstrap, PeerThatNeverListensIsATimeoutError) {
  verbs_test::Watchdog wd(60, "NeverListens");
  const CmBootstrap cm = simHosts(2, freshPort());
  const auto start = std::chrono::steady_clock::now();
  try {
    connectCm(1, 2, "hcasim1", cm, milliseconds(2000));
    FAIL() << "no error";
  } catch (const TimeoutError& e) {
    const std::string w = e.what();
    std::printf("%s\n", w.c_str());
    EXPECT_NE(w.find("not connected within 2000 ms"), std::string::npos) << w;
    EXPECT_NE(w.find("rank 0 at " + cm.endpoint(0)), std::string::npos) << w;
    EXPECT_NE(w.find("nobody listens there yet"), std::string::npos) << w;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// An address in the simulated subnet that no host owns: address resolution times out, again
// and again, until the pair timeout.
TEST(CmBootstrap, AddressNobodyOwnsIsATimeoutError) {
  verbs_test::Watchdog wd(60, "NobodyOwns");
  CmBootstrap cm = simHosts(2, freshPort());
  cm.addresses[0] = "192.0.2.77";
  try {
    connectCm(1, 2, "hcasim1", cm, milliseconds(3000));
    FAIL() << "no error";
  } catch (const TimeoutError& e) {
    const std::string w = e.what();
    std::printf("%s\n", w.c_str());
    EXPECT_NE(w.find("rank 0 at 192.0.2.77:"), std::string::npos) << w;
    EXPECT_NE(w.find("RDMA_CM_EVENT_ADDR_ERROR"), std::string::npos) << w;
  }
}

// An address outside every simulated subnet cannot become reachable: an IoError at once.
TEST(CmBootstrap, UnroutableAddressIsAnIoErrorAtOnce) {
  verbs_test::Watchdog wd(60, "Unroutable");
  CmBootstrap cm = simHosts(2, freshPort());
  cm.addresses[0] = "10.9.8.7";
  const auto start = std::chrono::steady_clock::now();
  try {
    connectCm(1, 2, "hcasim1", cm, milliseconds(20000));
    FAIL() << "no error";
  } catch (const IoError& e) {
    const std::string w = e.what();
    std::printf("%s\n", w.c_str());
    EXPECT_NE(w.find("cannot reach rank 0 at 10.9.8.7:"), std::string::npos) << w;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// ---- a hand-made peer: rdma_cm directly, private data of its own -------------------------

/** An rdma_cm client on hcasim1 that says in its requests whatever it is told to. */
class RawPeer {
 public:
  RawPeer() : ch_(rdma_create_event_channel()) {}
  ~RawPeer() {
    for (rdma_cm_id* id : ids_) rdma_destroy_id(id);
    rdma_destroy_event_channel(ch_);
  }
  /**
   * Connects to @p dst:@p port with @p pd (retrying while nobody listens, up to 10 s). Returns
   * the REP's private data after rdma_establish, or throws the REJ's field as a string.
   */
  std::vector<uint8_t> connect(const std::string& dst, uint16_t port, const std::vector<uint8_t>& pd) {
    for (int attempt = 0; attempt < 200; ++attempt) {
      rdma_cm_id* id = start(dst, port, pd);
      rdma_cm_event* e = next();
      const auto type = e->event;
      const int status = e->status;
      const auto* d = static_cast<const uint8_t*>(e->param.conn.private_data);
      std::vector<uint8_t> data(d, d ? d + e->param.conn.private_data_len : d);
      rdma_ack_cm_event(e);
      if (type == RDMA_CM_EVENT_CONNECT_RESPONSE) {
        EXPECT_EQ(rdma_establish(id), 0);
        return data;
      }
      std::string field, reason;
      if (type == RDMA_CM_EVENT_REJECTED && CmHello::parseReject(data.data(), data.size(), field, reason))
        throw field;
      EXPECT_TRUE(type == RDMA_CM_EVENT_REJECTED && status == 8) << rdma_event_str(type) << " " << status;
      std::this_thread::sleep_for(milliseconds(50));
    }
    throw std::string("nobody listened");
  }

 private:
  rdma_cm_id* start(const std::string& dst, uint16_t port, const std::vector<uint8_t>& pd) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    ids_.push_back(id);
    sockaddr_in src{}, to{};
    src.sin_family = to.sin_family = AF_INET;
    inet_pton(AF_INET, hostAddress(1).c_str(), &src.sin_addr);
    inet_pton(AF_INET, dst.c_str(), &to.sin_addr);
    to.sin_port = htons(port);
    EXPECT_EQ(
        rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&to), 2000), 0);
    expect(RDMA_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(rdma_resolve_route(id, 2000), 0);
    expect(RDMA_CM_EVENT_ROUTE_RESOLVED);
    rdma_conn_param cp{};
    cp.private_data = pd.data();
    cp.private_data_len = uint8_t(pd.size());
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = cp.rnr_retry_count = 7;
    cp.qp_num = 0x777;  // no QP behind it: nothing is ever sent to it
    EXPECT_EQ(rdma_connect(id, &cp), 0);
    return id;
  }
  rdma_cm_event* next() {
    rdma_cm_event* e = nullptr;
    EXPECT_EQ(rdma_get_cm_event(ch_, &e), 0);
    return e;
  }
  void expect(rdma_cm_event_type t) {
    rdma_cm_event* e = next();
    EXPECT_EQ(e->event, t) << rdma_event_str(e->event);
    rdma_ack_cm_event(e);
  }

  rdma_event_channel* ch_;
  std::vector<rdma_cm_id*> ids_;
};

/** Rank 0 of a group of 3 on hcasim0, connecting through @p cm; returns its error's field. */
std::thread rankZero(const CmBootstrap& cm, std::string& field, std::string& what) {
  return std::thread([&cm, &field, &what] {
    try {
      connectCm(0, 3, "hcasim0", cm, milliseconds(15000));
      field = "(connected)";
    } catch (const AddressError& e) {
      field = e.field();
      what = e.what();
    } catch (const std::exception& e) {
      what = e.what();
    }
  });
}

CmHello requestFromRankOne() {
  CmHello h;
  h.kind = CmHello::kRequest;
  h.size = 3;
  h.rank = 1;
  h.peer = 0;
  h.group = CmHello::groupTag(ContextOptions().prefix);
  return h;
}

// A second request naming a rank that is already connected is refused, both sides naming 'rank'.
TEST(CmBootstrap, DuplicateRankIsRefused) {
  verbs_test::Watchdog wd(60, "DuplicateRank");
  const CmBootstrap cm = simHosts(3, freshPort());
  std::string field, what, rawField;
  std::thread t = rankZero(cm, field, what);
  {
    RawPeer raw;
    const auto rep = raw.connect(cm.addresses[0], cm.port(0), requestFromRankOne().bytes());
    const CmHello accept = CmHello::fromBytes(rep.data(), rep.size());  // the first one is accepted
    EXPECT_EQ(accept.kind, CmHello::kAccept);
    EXPECT_EQ(accept.rank, 0u);
    EXPECT_EQ(accept.peer, 1u);
    try {
      raw.connect(cm.addresses[0], cm.port(0), requestFromRankOne().bytes());
    } catch (const std::string& f) {
      rawField = f;
    }
    t.join();
  }
  EXPECT_EQ(rawField, "rank");
  EXPECT_EQ(field, "rank") << what;
  EXPECT_NE(what.find("rank 1 is already connected or accepted"), std::string::npos) << what;
}

// Private data that is not ours (a foreign program on the port), and a rank out of range.
TEST(CmBootstrap, ForeignOrOutOfRangeRequestsAreRefused) {
  verbs_test::Watchdog wd(60, "ForeignRequest");
  CmHello outOfRange = requestFromRankOne();
  outOfRange.rank = 7;
  const std::vector<std::pair<std::vector<uint8_t>, std::string>> cases = {
      {std::vector<uint8_t>(24, 0x5a), "magic"}, {outOfRange.bytes(), "rank"}};
  for (const auto& [pd, want] : cases) {
    const CmBootstrap cm = simHosts(3, freshPort());
    std::string field, what, rawField;
    std::thread t = rankZero(cm, field, what);
    {
      RawPeer raw;
      try {
        raw.connect(cm.addresses[0], cm.port(0), pd);
      } catch (const std::string& f) {
        rawField = f;
      }
      t.join();
    }
    EXPECT_EQ(rawField, want);
    EXPECT_EQ(field, want) << what;
  }
}

}  // namespace
