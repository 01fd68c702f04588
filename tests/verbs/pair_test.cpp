// SPDX-License-Identifier: Apache-2.0
// Device, Pair, messages, buffers, errors, flow control and solicited events on two simulated
// HCAs (HCASIM_HOSTS=2). Each rank is a thread with its own device, as on two hosts.
#include <arpa/inet.h>

#include <cstring>
#include <numeric>

#include "hcasim/verbs/error.h"
#include "verbs_test_util.h"

using namespace verbs_test;
using namespace std::chrono_literals;

namespace {

RankOptions busy(std::chrono::milliseconds timeout = 10000ms) {
  RankOptions o;
  o.ctx.pair.timeout = timeout;
  return o;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = uint8_t(x);
  }
  return v;
}

template <class T>
std::vector<uint8_t> bytesOf(T v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

}  // namespace

// ---- device ------------------------------------------------------------------------------

TEST(Device, DefaultsToTheIpv4MappedRoceGid) {
  auto dev = Device::open();  // first active device
  EXPECT_EQ(dev->name(), "hcasim0");
  EXPECT_TRUE(dev->ethernet());
  EXPECT_EQ(dev->gidIndex(), 1) << "GID 0 is the link-local one; RoCE needs the routable IPv4-mapped GID";
  EXPECT_EQ(gidString(dev->gid().raw), "::ffff:192.0.2.1");
  EXPECT_NE(dev->describe().find("gid[1] ::ffff:192.0.2.1"), std::string::npos) << dev->describe();
  DeviceAttr a;
  a.name = "hcasim1";
  a.gidIndex = 0;
  a.mode = PollMode::BusyPoll;
  auto d1 = Device::open(a);
  EXPECT_EQ(d1->gidIndex(), 0);
  EXPECT_EQ(d1->gid().raw[0], 0xfe);
  EXPECT_EQ(d1->channel(), nullptr) << "busy-poll mode needs no completion channel";
}

TEST(Device, ClearErrors) {
  DeviceAttr a;
  a.name = "mlx5_9";
  try {
    Device::open(a);
    ADD_FAILURE() << "opened a device that does not exist";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("hcasim0"), std::string::npos)
        << "should list what exists: " << e.what();
  }
  a.name = "hcasim0";
  a.gidIndex = 99;
  EXPECT_THROW(Device::open(a), IoError);
  a.gidIndex = -1;
  a.port = 2;
  EXPECT_THROW(Device::open(a), IoError);
}

// ---- connecting --------------------------------------------------------------------------

TEST(Connect, AddressesExchangedAndValidated) {
  runRanks(2, busy(), [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    if (!p.connected()) throw std::runtime_error("not connected");
    const Address& self = p.address();
    if (!self.global || self.mtu != 5 || self.qpn < 2)
      throw std::runtime_error("odd self address " + self.str());
    // Each side's peer address is the other side's own address.
    const auto mine = p.addressBytes();
    ctx.pair(1 - ctx.rank()).send(1, mine.data(), mine.size());
    const auto theirs = p.recv(1);
    if (!(Address::fromBytes(theirs) == p.peer())) throw std::runtime_error("peer address mismatch");
    if (p.label() != "pair " + std::to_string(ctx.rank()) + "->" + std::to_string(1 - ctx.rank()))
      throw std::runtime_error("label " + p.label());
  });
}

TEST(Connect, RejectsBadPeerBytes) {
  DeviceAttr a;
  a.mode = PollMode::BusyPoll;
  auto dev = Device::open(a);
  Pair p(dev);
  EXPECT_THROW(p.connect(std::vector<uint8_t>(36, 0)), AddressError);
  Address noGrh = p.address();
  noGrh.global = false;
  noGrh.lid = 7;
  try {
    p.connect(noGrh);
    ADD_FAILURE() << "connected without a GRH on RoCE";
  } catch (const AddressError& e) {
    EXPECT_EQ(e.field(), "flags");
  }
  EXPECT_FALSE(p.connected());
}

TEST(Connect, StaleStoreEntryNamesRankAndField) {
  DeviceAttr a;
  a.mode = PollMode::BusyPoll;
  HashStore store;
  std::vector<uint8_t> garbage(2 * Address::kSize, 0);
  garbage[Address::kSize] = 'X';  // rank 1's entry for rank 0: bad magic
  store.set("hcasim-verbs/addr/1", garbage);
  Context ctx(0, 2, Device::open(a));
  try {
    ctx.connectFullMesh(store);
    ADD_FAILURE() << "connected to garbage";
  } catch (const AddressError& e) {
    EXPECT_EQ(e.field(), "magic");
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  store.set("hcasim-verbs/addr/1", std::vector<uint8_t>(10, 1));
  Context ctx2(0, 2, Device::open(a));
  EXPECT_THROW(ctx2.connectFullMesh(store), AddressError);  // wrong size
}

// The store holds no address for a peer (it never started), an entry cut short, or one
// written by another version of the library: a TimeoutError naming the key, an AddressError
// for field "length" naming the key, an AddressError for field "version" naming the rank.
TEST(Connect, MissingTruncatedOrOtherVersionStoreEntries) {
  DeviceAttr a;
  a.mode = PollMode::BusyPoll;
  ContextOptions quick;
  quick.pair.timeout = 200ms;
  HashStore store;
  try {
    Context(0, 2, Device::open(a), quick).connectFullMesh(store);
    ADD_FAILURE() << "connected to a peer that never published its address";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'hcasim-verbs/addr/1' did not appear within 200 ms"),
              std::string::npos)
        << e.what();
  }
  store.set("hcasim-verbs/addr/1", std::vector<uint8_t>(2 * Address::kSize - 1, 0));  // truncated
  try {
    Context(0, 2, Device::open(a), quick).connectFullMesh(store);
    ADD_FAILURE() << "connected to a truncated entry";
  } catch (const AddressError& e) {
    EXPECT_EQ(e.field(), "length");
    EXPECT_NE(
        std::string(e.what()).find("store key 'hcasim-verbs/addr/1' holds 71 bytes, expected 2 addresses"),
        std::string::npos)
        << e.what();
  }
  // Rank 1's entry as another library version would write it: a good address, version byte 2.
  Pair peer(Device::open(a));
  std::vector<uint8_t> entry(2 * Address::kSize, 0);
  const auto good = peer.addressBytes();
  std::copy(good.begin(), good.end(), entry.begin());
  entry[2] = 2;
  store.set("hcasim-verbs/addr/1", entry);
  try {
    Context(0, 2, Device::open(a), quick).connectFullMesh(store);
    ADD_FAILURE() << "connected to an address of another version";
  } catch (const AddressError& e) {
    EXPECT_EQ(e.field(), "version");
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("field 'version' invalid: 2, this library reads version 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(Connect, OverTcpAndFileStores) {
  char tmpl[] = "/tmp/hcasim-verbs-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  TcpStoreServer server("127.0.0.1", 0);
  for (const std::string& spec : {"tcp:127.0.0.1:" + std::to_string(server.port()), "file:" + dir}) {
    std::vector<std::string> errors(2);
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        try {
          DeviceAttr da;
          da.name = "hcasim" + std::to_string(r);
          da.mode = PollMode::BusyPoll;
          auto store = makeStore(spec, r + 1 /* the server already runs */, 5000ms);
          Context ctx(r, 2, Device::open(da));
          ctx.connectFullMesh(*store);
          int32_t v = r + 10;
          allreduce(ctx, &v, 1, DataType::Int32, ReduceOp::Sum);
          if (v != 21) throw std::runtime_error("allreduce gave " + std::to_string(v));
        } catch (const std::exception& e) {
          errors[size_t(r)] = e.what();
        }
      });
    for (auto& t : ts) t.join();
    EXPECT_EQ(errors, std::vector<std::string>(2)) << spec;
  }
  std::system(("rm -rf " + dir).c_str());
}

// ---- messages ----------------------------------------------------------------------------

TEST(Messages, OrderTagsAndSizes) {
  RankOptions o = busy();
  o.ctx.pair.maxMessageBytes = 512;
  runRanks(2, o, [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    if (ctx.rank() == 0) {
      for (size_t n : {size_t(0), size_t(1), size_t(511), size_t(512)}) {
        auto b = pattern(n, uint32_t(n));
        p.send(uint32_t(n), b.data(), b.size());
      }
      for (uint32_t i = 0; i < 10; ++i) p.send(100 + i % 2, &i, sizeof i);
      bool threw = false;
      try {
        std::vector<uint8_t> big(513);
        p.send(1, big.data(), big.size());
      } catch (const std::invalid_argument&) {
        threw = true;
      }
      if (!threw) throw std::runtime_error("a message over maxMessageBytes was accepted");
    } else {
      for (size_t n : {size_t(512), size_t(0), size_t(511), size_t(1)})  // any tag order
        if (p.recv(uint32_t(n)) != pattern(n, uint32_t(n)))
          throw std::runtime_error("payload " + std::to_string(n));
      // Same tag: in order. Different tags: independent.
      for (uint32_t want : {1u, 3u, 5u, 7u, 9u})
        if (p.recv(101) != bytesOf(want)) throw std::runtime_error("tag 101 out of order");
      std::vector<uint8_t> m;
      if (!p.tryRecv(100, m) || m != bytesOf(0u)) throw std::runtime_error("tryRecv");
      for (uint32_t want : {2u, 4u, 6u, 8u})
        if (p.recv(100) != bytesOf(want)) throw std::runtime_error("tag 100 out of order");
      if (p.tryRecv(100, m)) throw std::runtime_error("an extra message");
    }
  });
}

// ---- buffers -----------------------------------------------------------------------------

TEST(Buffers, GrantsWritesAndCompletions) {
  runRanks(2, busy(), [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    const size_t n = 64 * 1024;
    if (ctx.rank() == 1) {
      std::vector<uint8_t> dst(3 * n, 0);
      auto rb = p.createRecvBuffer(7, dst.data(), dst.size(), 0);
      rb->grant(3);
      for (int i = 0; i < 3; ++i) {
        const uint32_t len = rb->waitRecv();
        if (len != n) throw std::runtime_error("byte_len " + std::to_string(len));
      }
      if (rb->ready() != 0) throw std::runtime_error("extra arrival");
      for (int i = 0; i < 3; ++i)
        if (std::memcmp(dst.data() + size_t(i) * n, pattern(n, 10 + i).data(), n) != 0)
          throw std::runtime_error("data of write " + std::to_string(i));
      p.send(2, "done", 4);
    } else {
      std::vector<uint8_t> src(3 * n);
      for (int i = 0; i < 3; ++i) {
        auto pt = pattern(n, 10 + i);
        std::memcpy(src.data() + size_t(i) * n, pt.data(), n);
      }
      auto sb = p.createSendBuffer(7, src.data(), src.size());
      // Written in reverse order of offsets: the grant says where, the send says which part.
      for (int i = 2; i >= 0; --i) sb->send(size_t(i) * n, n, size_t(i) * n);
      sb->waitSend();
      if (sb->outstanding() != 0) throw std::runtime_error("outstanding after waitSend");
      p.recv(2);
    }
  });
}

TEST(Buffers, WritesOverTheLimitAreChunked) {
  RankOptions o = busy();
  o.ctx.pair.maxWriteBytes = 4096;  // stands in for the 1 GiB default
  runRanks(2, o, [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    const size_t n = 100 * 1024 + 1;  // 25 full WRs + 1 byte
    if (ctx.rank() == 1) {
      std::vector<uint8_t> dst(n + 16, 0xaa);
      auto rb = p.createRecvBuffer(3, dst.data(), dst.size(), 1);
      const uint32_t last = rb->waitRecv();
      if (last != 1) throw std::runtime_error("last chunk length " + std::to_string(last));
      if (std::memcmp(dst.data() + 16, pattern(n, 5).data(), n) != 0)
        throw std::runtime_error("chunked data");
      for (int i = 0; i < 16; ++i)
        if (dst[size_t(i)] != 0xaa) throw std::runtime_error("write before the remote offset");
      if (p.stats().writesReceived != 1) throw std::runtime_error("one completion per send expected");
    } else {
      auto src = pattern(n, 5);
      auto sb = p.createSendBuffer(3, src.data(), src.size());
      sb->send(0, n, 16);
      sb->waitSend();
      if (p.stats().writeWrsPosted != 26)
        throw std::runtime_error("WRs " + std::to_string(p.stats().writeWrsPosted));
    }
  });
}

TEST(Buffers, ZeroLengthAndGrantBeforeSendBuffer) {
  runRanks(2, busy(), [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    if (ctx.rank() == 1) {
      uint8_t dst[8] = {};
      auto rb = p.createRecvBuffer(9, dst, sizeof dst, 2);  // granted before the sender has a buffer
      p.send(1, "go", 2);
      if (rb->waitRecv() != 0) throw std::runtime_error("zero-length write has length");
      rb->waitRecv();
      if (dst[7] != 42) throw std::runtime_error("second write");
    } else {
      p.recv(1);  // the grant is there already
      uint8_t src[8] = {0, 0, 0, 0, 0, 0, 0, 42};
      auto sb = p.createSendBuffer(9, src, sizeof src);
      sb->send(0, 0, 0);
      sb->send(7, 1, 7);
      sb->waitSend();
    }
  });
}

TEST(Buffers, SendPastThePeersBufferFailsThatSend) {
  runRanks(2, busy(), [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    if (ctx.rank() == 1) {
      uint8_t dst[16];
      auto rb = p.createRecvBuffer(4, dst, sizeof dst, 2);
      rb->waitRecv();  // the good one; the bad one never comes
      p.recv(9);
    } else {
      uint8_t src[64] = {};
      auto sb = p.createSendBuffer(4, src, sizeof src);
      sb->send(0, 17, 0);  // 17 > 16
      try {
        sb->waitSend();
        throw std::runtime_error("an overrunning send completed");
      } catch (const Error& e) {
        if (std::string(e.what()).find("overruns") == std::string::npos) throw;
      }
      sb->send(0, 16, 0);  // the pair is still fine
      sb->waitSend();
      p.send(9, "ok", 2);
    }
  });
}

// ---- errors and timeouts -----------------------------------------------------------------

TEST(Errors, TimeoutsSayWhatWasAwaited) {
  runRanks(2, busy(), [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    const auto t0 = std::chrono::steady_clock::now();
    try {
      p.recv(77, 100ms);
      throw std::runtime_error("recv returned");
    } catch (const TimeoutError& e) {
      if (std::string(e.what()).find("tag 77") == std::string::npos) throw std::runtime_error(e.what());
    }
    uint8_t buf[4];
    auto rb = p.createRecvBuffer(11, buf, sizeof buf, 0);
    try {
      rb->waitRecv(50ms);
      throw std::runtime_error("waitRecv returned");
    } catch (const TimeoutError& e) {
      if (std::string(e.what()).find("slot 11") == std::string::npos) throw std::runtime_error(e.what());
    }
    if (std::chrono::steady_clock::now() - t0 > 5s) throw std::runtime_error("timeouts took too long");
  });
}

TEST(Errors, ErrorCompletionIsCheckedBeforeItsOpcode) {
  // The receiver grants, then breaks the contract and deregisters its buffer; the write hits
  // an invalid rkey. The sender must report the completion's status (only wr_id, status and
  // qp_num are valid on an error completion), not misread it as a normal opcode.
  runRanks(2, busy(3000ms), [](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    if (ctx.rank() == 1) {
      {
        uint8_t dst[64];
        auto rb = p.createRecvBuffer(5, dst, sizeof dst, 1);
        p.send(1, "granted", 7);
        p.recv(2);  // the sender has the grant
      }             // deregistered here
      p.send(3, "go", 2);
      try {
        p.recv(4, 1500ms);  // never comes: the QPs are in error
      } catch (const Error&) {
      }
    } else {
      p.recv(1);
      uint8_t src[64] = {};
      auto sb = p.createSendBuffer(5, src, sizeof src);
      // Wait until the grant is matched: send once it is there.
      p.send(2, "have it", 7);
      p.recv(3);
      sb->send(0, 64, 0);
      try {
        sb->waitSend();
        throw std::runtime_error("a write to a deregistered buffer completed");
      } catch (const IoError& e) {
        const std::string w = e.what();
        if (w.find("remote access error") == std::string::npos && w.find("REM_ACCESS") == std::string::npos)
          throw std::runtime_error("unexpected: " + w);
        if (w.find("RDMA write") == std::string::npos || w.find("qpn") == std::string::npos)
          throw std::runtime_error("error does not say which WR / QP: " + w);
      }
      if (p.error().empty()) throw std::runtime_error("pair not marked failed");
    }
  });
}

// ---- flow control ------------------------------------------------------------------------

namespace {

// @p n small messages each way with the smallest queues; returns wall seconds.
double exchange(uint64_t n, PollMode mode, bool solicited) {
  RankOptions o = busy(60000ms);
  o.mode = mode;
  o.ctx.pair.dataWr = 2;  // two data sends in flight
  o.ctx.pair.ackWr = 4;   // the minimum
  o.ctx.pair.maxMessageBytes = 16;
  o.ctx.pair.solicited = solicited;
  const auto t0 = std::chrono::steady_clock::now();
  runRanks(2, o, [n](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    // Sender and receiver on separate threads of the rank, so both directions stay busy.
    std::string err;
    std::thread sender([&] {
      try {
        for (uint64_t i = 0; i < n; ++i) {
          p.send(1, &i, sizeof i);  // queued behind the credits
        }
        p.drain();
      } catch (const std::exception& e) {
        err = e.what();
      }
    });
    for (uint64_t i = 0; i < n; ++i) {
      const auto m = p.recv(1);
      uint64_t v;
      std::memcpy(&v, m.data(), sizeof v);
      if (m.size() != sizeof v || v != i)
        throw std::runtime_error("message " + std::to_string(i) + " lost or reordered (got " +
                                 std::to_string(v) + ")");
    }
    sender.join();
    if (!err.empty()) throw std::runtime_error(err);
    const auto s = p.stats();
    // (+1: the peer's close message may already be in.)
    if (s.messagesSent != n || s.messagesReceived < n || s.messagesReceived > n + 1)
      throw std::runtime_error("counts: sent " + std::to_string(s.messagesSent) + " received " +
                               std::to_string(s.messagesReceived));
    // Acks never cause acks one for one: with a data threshold of 1 (dataWr 2) and an ack
    // threshold of 2 (ackWr 4) there are at most n + n/2 + n/4 + ... < 2n + 2 of them.
    if (s.acksSent > 2 * n + 2) throw std::runtime_error("too many acks: " + std::to_string(s.acksSent));
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(FlowControl, HundredThousandMessagesEachWayTinyQueuesNoRnr) {
  Watchdog wd(55);
  // 100,000 each way takes 4-8 s here; sanitizer builds run 3-5x slower, so they do 20,000.
  // VERBS_FC_MESSAGES overrides.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  uint64_t n = 20000;
#else
  uint64_t n = 100000;
#endif
  if (const char* e = std::getenv("VERBS_FC_MESSAGES")) n = std::strtoull(e, nullptr, 10);
  const double s = exchange(n, PollMode::BusyPoll, true);
  RecordProperty("messages_each_way", std::to_string(n));
  RecordProperty("wall_seconds", std::to_string(s));
  std::printf("%llu messages each way (dataWr 2, ackWr 4): %.2f s wall\n", (unsigned long long)n, s);
  for (const char* d : {"hcasim0", "hcasim1"}) {
    EXPECT_EQ(simCounter(d, "rnr_naks"), 0u) << d;
    EXPECT_EQ(simCounter(d, "retransmits"), 0u) << d;
  }
}

TEST(FlowControl, EventModeNoRnr) {
  Watchdog wd(55);
  const double s = exchange(3000, PollMode::Event, true);
  std::printf("3000 messages each way, event mode: %.2f s wall\n", s);
  for (const char* d : {"hcasim0", "hcasim1"}) EXPECT_EQ(simCounter(d, "rnr_naks"), 0u) << d;
}

// ---- solicited events --------------------------------------------------------------------

TEST(Solicited, ReceiverIsWokenOnlyForWhatItWaitsFor) {
  // A streams messages to B; B only receives. With solicited-only arming B's CQ raises an
  // event only for the (solicited) messages, never for its own ack completions or A's acks.
  Watchdog wd(55);
  const uint64_t n = 300;
  RankOptions o = busy();
  o.mode = PollMode::Event;
  uint64_t cqesB = 0, eventsB = 0;
  runRanks(2, o, [&](Context& ctx) {
    Pair& p = ctx.pair(1 - ctx.rank());
    if (ctx.rank() == 0) {
      p.recv(3);  // B has read its counters (with the device running on, they must come first)
      for (uint64_t i = 0; i < n; ++i) p.send(1, &i, sizeof i);
      p.drain();
      p.recv(2);
    } else {
      const uint64_t c0 = simCounter("hcasim1", "cqes"), e0 = simCounter("hcasim1", "cq_events");
      p.send(3, "go", 2);
      for (uint64_t i = 0; i < n; ++i) p.recv(1);
      cqesB = simCounter("hcasim1", "cqes") - c0;
      eventsB = simCounter("hcasim1", "cq_events") - e0;
      p.send(2, "bye", 3);
    }
  });
  std::printf("receiver: %llu CQEs, %llu completion events for %llu messages\n", (unsigned long long)cqesB,
              (unsigned long long)eventsB, (unsigned long long)n);
  EXPECT_GT(cqesB, n) << "acks were sent (their completions are CQEs too)";
  EXPECT_LE(eventsB, n + 1) << "an event for something that was not solicited (the n messages, and 'go')";
  EXPECT_GT(eventsB, 0u);
}
