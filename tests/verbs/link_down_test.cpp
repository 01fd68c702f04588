// SPDX-License-Identifier: Apache-2.0
// The collective transport when a link goes down for longer than the retry budget in the middle
// of allreduces (--faults link-down; here HCASIM_FAULTS, set before the world starts): four ranks
// as threads, hcasim1's link gone for good after 200 ms of simulated time (set-up must be over by
// then; with 50 ms a TSan build under load once was not, and rank 0 waited in vain for rank 1's
// address in the store). Every rank must end
// with a clear error naming a peer, never hang and never return a wrong result: the ranks whose
// sends cross the dead link get an IoError with the WC status (retry exceeded); a rank whose own
// link is fine learns it from the abort message a failed rank sends over every pair still
// working (PairGroup), and ends with an IoError carrying that same WC status. Only hcasim1
// itself, cut off from everyone, may end with a TimeoutError (saying its port is down) if it had
// nothing in flight. A rank with nothing in flight over the dead link, waiting on a healthy peer
// that waits on the broken one, learns it from its liveness probe (PairOptions::probeInterval).
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "hcasim/verbs/error.h"
#include "verbs_test_util.h"

using namespace verbs_test;

namespace {

constexpr int kRanks = 4;
constexpr int kDownRank = 1;  // hcasim1
constexpr size_t kCount = 32768;
constexpr int kMaxIterations = 5000;

int64_t input(int rank, size_t i, int it) { return int64_t(i * 2654435761u) + rank * 1000003 + it; }
int64_t expected(size_t i, int it) {
  int64_t s = 0;
  for (int r = 0; r < kRanks; ++r) s += input(r, i, it);
  return s;
}

struct Outcome {
  std::string kind;  ///< "IoError", "TimeoutError", another class, or "" (no error)
  std::string what;
  int iterations = 0;  ///< allreduces completed, each with the right result
  bool wrong = false;  ///< an allreduce returned a wrong result
};

/** @brief Pair options for a link that goes down: a short retry budget, a timeout well beyond it. */
ContextOptions linkDownOptions() {
  ContextOptions co;
  co.pair.qpTimeout = 10;  // 4.096 us * 2^10 = 4.2 ms; retry budget 4 x 4.2 ms
  co.pair.retryCnt = 3;
  co.pair.timeout = std::chrono::milliseconds(10000);  // a peer that stopped answering (and the setup)
  return co;
}

/** @brief Run @p body; the error it ends with goes to @p out (its class and text). */
template <class Body>
void recordError(Outcome& out, Body&& body) {
  try {
    body();
  } catch (const IoError& e) {
    out.kind = "IoError";
    out.what = e.what();
  } catch (const TimeoutError& e) {
    out.kind = "TimeoutError";
    out.what = e.what();
  } catch (const std::exception& e) {
    out.kind = "other";
    out.what = e.what();
  }
}

Outcome runRank(int r, HashStore& store) {
  Outcome out;
  recordError(out, [&] {
    DeviceAttr da;
    da.name = deviceFor(r);
    Context ctx(r, kRanks, Device::open(da), linkDownOptions());
    ctx.connectFullMesh(store);
    std::vector<int64_t> v(kCount);
    for (int it = 0; it < kMaxIterations; ++it) {
      for (size_t i = 0; i < kCount; ++i) v[i] = input(r, i, it);
      allreduce(ctx, v.data(), kCount, DataType::Int64, ReduceOp::Sum);
      for (size_t i = 0; i < kCount; ++i)
        if (v[i] != expected(i, it)) {
          out.wrong = true;
          out.what = "allreduce " + std::to_string(it) + ": element " + std::to_string(i) + " is wrong";
          return;
        }
      ++out.iterations;
    }
  });
  return out;
}

}  // namespace

TEST(LinkDown, AllreduceGivesEveryRankAClearErrorNamingThePeer) {
  if (!simPresent()) GTEST_SKIP() << "needs the simulator's link faults";
  ASSERT_EQ(setenv("HCASIM_FAULTS", "link-down=hcasim1@200ms", 1), 0);
  Watchdog wd(55, "allreduce under a link-down");
  HashStore store;
  std::vector<Outcome> outs(kRanks);
  std::vector<std::thread> ts;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRanks; ++r) ts.emplace_back([&, r] { outs[size_t(r)] = runRank(r, store); });
  for (auto& t : ts) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string retryExceeded = ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR);
  const std::regex names_pair("^pair ([0-9]+)->([0-9]+)(: | \\()");
  int retry_errors = 0;
  for (int r = 0; r < kRanks; ++r) {
    const Outcome& o = outs[size_t(r)];
    std::printf("rank %d: %d allreduces, then %s: %s\n", r, o.iterations, o.kind.c_str(), o.what.c_str());
    EXPECT_FALSE(o.wrong) << "rank " << r << ": " << o.what;
    ASSERT_TRUE(o.kind == "IoError" || o.kind == "TimeoutError")
        << "rank " << r << " ended with " << (o.kind.empty() ? "no error" : o.kind) << ": " << o.what;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(o.what, m, names_pair)) << "rank " << r << ": names no pair: " << o.what;
    EXPECT_EQ(std::stoi(m[1]), r) << o.what;
    EXPECT_NE(std::stoi(m[2]), r) << o.what;
    if (r != kDownRank) {
      EXPECT_EQ(o.kind, "IoError") << "rank " << r << ": " << o.what;
    }
    if (o.kind == "IoError") {
      EXPECT_NE(o.what.find("work completion error: "), std::string::npos) << o.what;
      EXPECT_NE(o.what.find(retryExceeded), std::string::npos) << o.what;
      retry_errors += o.what.find(retryExceeded) != std::string::npos;
    } else {
      EXPECT_NE(o.what.find("timed out after"), std::string::npos) << o.what;
    }
  }
  // hcasim1 itself can reach nobody: its own sends run out of retries, or, if it had nothing in
  // flight, its wait times out and says its port is down.
  const Outcome& down = outs[kDownRank];
  if (down.kind == "IoError")
    EXPECT_NE(down.what.find(retryExceeded), std::string::npos) << down.what;
  else
    EXPECT_NE(down.what.find("; hcasim1 port 1 is down"), std::string::npos) << down.what;
  // Which other ranks see a retry-exceeded completion of their own depends on what they had in
  // flight when the link went down; the others hear it from a peer ("the peer gave up: ...").
  std::printf("every rank ended with an error %.1f s (wall) after the start; %d with a WC status\n", secs,
              retry_errors);
}

// The case the liveness probe exists for: two ranks that both wait to receive, with nothing in
// flight, when hcasim1's link goes down. No send of theirs can fail, so without a probe both
// would wait out their 10 s timeout; with one (PairOptions::probeInterval, 200 ms here) each
// rank's probe runs out of retries (4 x 4.2 ms) and the wait ends with an IoError carrying the
// WC status, long before the timeout.
TEST(LinkDown, IdleWaitsLearnItFromTheirProbes) {
  if (!simPresent()) GTEST_SKIP() << "needs the simulator's link faults";
  ASSERT_EQ(setenv("HCASIM_FAULTS", "link-down=hcasim1@200ms", 1), 0);
  Watchdog wd(55, "idle waits under a link-down");
  HashStore store;
  std::vector<Outcome> outs(2);
  std::vector<uint64_t> probes(2);
  std::vector<std::thread> ts;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      recordError(outs[size_t(r)], [&] {
        DeviceAttr da;
        da.name = deviceFor(r);
        ContextOptions co = linkDownOptions();
        co.pair.probeInterval = std::chrono::milliseconds(200);
        Context ctx(r, 2, Device::open(da), co);
        ctx.connectFullMesh(store);
        Pair& p = ctx.pair(1 - r);
        try {
          p.recv(77);  // nobody sends it
        } catch (...) {
          probes[size_t(r)] = p.stats().probesSent;
          throw;
        }
      });
    });
  for (auto& t : ts) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = outs[size_t(r)];
    std::printf("rank %d (%" PRIu64 " probes): %s: %s\n", r, probes[size_t(r)], o.kind.c_str(),
                o.what.c_str());
    EXPECT_EQ(o.kind, "IoError") << "rank " << r << ": " << o.what;
    EXPECT_NE(o.what.find(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)), std::string::npos) << o.what;
    EXPECT_NE(o.what.find("liveness probe"), std::string::npos) << o.what;
    EXPECT_GE(probes[size_t(r)], 1u) << "rank " << r;
  }
  std::printf("both waits ended %.2f s (wall) after the start\n", secs);
}
