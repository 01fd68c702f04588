// SPDX-License-Identifier: Apache-2.0
// Every collective x data type x reduction x size on VERBS_RANKS ranks (threads, one simulated
// HCA each), checked exactly: integer inputs are arbitrary 32/64-bit values (sums and products
// wrap), float inputs are small integers or powers of two so every result is exact in any
// summation order.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <type_traits>

#include "verbs_test_util.h"

#ifndef VERBS_RANKS
#error "build with -DVERBS_RANKS=<ranks>"
#endif

using namespace verbs_test;

namespace hcasim::verbs {
// Test names and failure messages show the type by name, not as bytes.
void PrintTo(DataType t, std::ostream* os) { *os << dataTypeName(t); }
void PrintTo(BarrierAlgorithm a, std::ostream* os) { *os << barrierAlgorithmName(a); }
}  // namespace hcasim::verbs

namespace {

constexpr int P = VERBS_RANKS;
const DataType kTypes[] = {DataType::Float, DataType::Double, DataType::Int32, DataType::Int64};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod};

// Element i of rank r's input for (type, op), as the type's bit pattern in a uint64_t.
template <class T>
T input(int r, size_t i, ReduceOp op, int salt = 0) {
  const uint64_t x = uint64_t(i) + uint64_t(salt) * 1000003;
  if constexpr (std::is_floating_point_v<T>) {
    if (op == ReduceOp::Prod) {
      static const T v[] = {T(2), T(0.5), T(-1), T(1)};
      return v[(x + 2 * uint64_t(r)) % 4];
    }
    if (op == ReduceOp::Sum) return T(int64_t((x * 7 + uint64_t(r) * 3) % 23) - 11);
    return T(int64_t((x * 31 + uint64_t(r) * 17) % 101) - 50) + T(0.25);
  } else {
    if (op == ReduceOp::Prod) {
      static const T v[] = {T(1), T(-1), T(2), T(3)};
      return v[(x + uint64_t(r)) % 4];
    }
    using U = std::make_unsigned_t<T>;
    return T(U(x * 0x9E3779B97F4A7C15ull + uint64_t(r) * 0x632BE59BD9B4E019ull + (x >> 3)));
  }
}

// Independent of the library's kernels.
template <class T>
T combine(T a, T b, ReduceOp op) {
  using U = std::conditional_t<std::is_integral_v<T>,
                               std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>, T>;
  switch (op) {
    case ReduceOp::Sum:
      if constexpr (std::is_integral_v<T>)
        return T(U(a) + U(b));
      else
        return a + b;
    case ReduceOp::Prod:
      if constexpr (std::is_integral_v<T>)
        return T(U(a) * U(b));
      else
        return a * b;
    case ReduceOp::Min: return b < a ? b : a;
    case ReduceOp::Max: return a < b ? b : a;
  }
  return a;
}

template <class T>
T expected(size_t i, ReduceOp op, int salt = 0) {
  T acc = input<T>(0, i, op, salt);
  for (int r = 1; r < P; ++r) acc = combine(acc, input<T>(r, i, op, salt), op);
  return acc;
}

template <class T>
void fill(std::vector<uint8_t>& buf, int r, size_t count, ReduceOp op, int salt = 0) {
  buf.assign(count * sizeof(T), 0);
  T* p = reinterpret_cast<T*>(buf.data());
  for (size_t i = 0; i < count; ++i) p[i] = input<T>(r, i, op, salt);
}

// Throws naming the first wrong element (the rank's thread turns it into a test failure).
template <class T>
void check(const void* data, size_t count, const std::function<T(size_t)>& want, const std::string& what) {
  const T* p = static_cast<const T*>(data);
  for (size_t i = 0; i < count; ++i) {
    const T w = want(i);
    if (std::memcmp(&p[i], &w, sizeof(T)) != 0) {
      std::ostringstream os;
      os << what << ": element " << i << " of " << count << " is " << +p[i] << ", want " << +w;
      throw std::runtime_error(os.str());
    }
  }
}

template <class F>
void dispatch(DataType t, F&& f) {
  switch (t) {
    case DataType::Float: return f(float{});
    case DataType::Double: return f(double{});
    case DataType::Int32: return f(int32_t{});
    case DataType::Int64: return f(int64_t{});
  }
}

std::string name(DataType t, ReduceOp op, size_t count) {
  return std::string(dataTypeName(t)) + "/" + reduceOpName(op) + "/" + std::to_string(count);
}

// Element counts: empty, one, fewer than ranks, uneven chunks, and up to 1 MiB of data.
// @p perRank: the count is per rank (allgather, reduce-scatter), so the large ones are divided
// by the rank count to keep the whole buffer at most 1 MiB, as nccl-tests sizes it.
std::vector<size_t> counts(DataType t, bool large, bool perRank = false) {
  std::vector<size_t> c = {0, 1, size_t(P - 1), size_t(3 * P + 1), 1000};
  if (large) {
    c.push_back((65536 + 3) / (perRank ? P : 1));                   // ~256 KiB of 4-byte elements
    c.push_back((1u << 20) / dataTypeSize(t) / (perRank ? P : 1));  // 1 MiB
  }
  return c;
}

RankOptions opts(PollMode mode = PollMode::BusyPoll) {
  RankOptions o;
  o.mode = mode;
  o.ctx.pair.timeout = std::chrono::milliseconds(20000);
  return o;
}

// @p maxBytes: the few-round algorithms that send the whole vector per round or per peer
// (direct, recursive doubling) stop at ~256 KiB, well past where Auto uses them: a 1 MiB direct
// exchange over 8 ranks as threads takes most of a minute under TSan.
void allreduceSweep(const CollectiveOptions& co, DataType t, size_t maxBytes = SIZE_MAX) {
  runRanks(P, opts(), [&](Context& ctx) {
    for (ReduceOp op : kOps)
      for (size_t n : counts(t, true))
        dispatch(t, [&](auto zero) {
          if (n * dataTypeSize(t) > maxBytes) return;
          using T = decltype(zero);
          std::vector<uint8_t> buf;
          fill<T>(buf, ctx.rank(), n, op);
          Allreduce ar(ctx, buf.data(), n, t, op, co);
          ar.run();
          check<T>(
              buf.data(), n, [&](size_t i) { return expected<T>(i, op); },
              "allreduce " + std::string(allreduceAlgorithmName(ar.algorithm())) + " " + name(t, op, n));
        });
  });
}

// One test per data type: each is a quarter of the sweep, so a slow lane (TSan, eight ranks as
// threads on two cores) stays well inside the watchdog.
class AllreduceEveryOpSize : public ::testing::TestWithParam<DataType> {};

std::string typeName(const ::testing::TestParamInfo<DataType>& info) { return dataTypeName(info.param); }

}  // namespace

TEST_P(AllreduceEveryOpSize, Ring) {
  Watchdog wd(55);
  CollectiveOptions co;
  co.algorithm = AllreduceAlgorithm::Ring;
  allreduceSweep(co, GetParam());
}

TEST_P(AllreduceEveryOpSize, RingChunked) {
  Watchdog wd(55);
  CollectiveOptions co;
  co.algorithm = AllreduceAlgorithm::RingChunked;
  co.segmentBytes = 8192;  // many segments in flight even for small messages
  co.regions = 3;
  allreduceSweep(co, GetParam());
}

TEST_P(AllreduceEveryOpSize, RecursiveDoubling) {
  Watchdog wd(55);
  CollectiveOptions co;
  co.algorithm = AllreduceAlgorithm::RecursiveDoubling;
  allreduceSweep(co, GetParam(), 300 * 1024);
}

TEST_P(AllreduceEveryOpSize, HalvingDoubling) {
  Watchdog wd(55);
  CollectiveOptions co;
  co.algorithm = AllreduceAlgorithm::HalvingDoubling;
  allreduceSweep(co, GetParam());
}

TEST_P(AllreduceEveryOpSize, Direct) {
  Watchdog wd(55);
  CollectiveOptions co;
  co.algorithm = AllreduceAlgorithm::Direct;
  allreduceSweep(co, GetParam(), 300 * 1024);
}

TEST_P(AllreduceEveryOpSize, ReduceScatterAllgather) {
  Watchdog wd(55);
  CollectiveOptions co;
  co.algorithm = AllreduceAlgorithm::ReduceScatterAllgather;
  allreduceSweep(co, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Type, AllreduceEveryOpSize, ::testing::ValuesIn(kTypes), typeName);

// The few-round algorithms grant their landing regions ahead and rely on the exchange itself to
// keep a fast rank from overwriting what a slow one has not consumed (collectives.h). Here one
// instance runs many times with new inputs each run while ranks are held up at random, so some
// run ahead by a run or more; every result is checked. Landing regions that were not kept apart
// by run parity, or a one-to-all root that did not wait for its grants, give wrong elements
// here. A grant batch of 3 makes the grants run out and be topped up every few runs.
TEST(Collectives, FewRoundAlgorithmsNeverOverwriteUnconsumedData) {
  Watchdog wd(55);
  constexpr int kRuns = 60;
  runRanks(P, opts(), [&](Context& ctx) {
    const int r = ctx.rank();
    std::mt19937 rng(uint32_t(1234 + r));
    auto maybeLag = [&] {
      if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
    };
    CollectiveOptions co;
    co.grantBatch = 3;
    const size_t n = 37;  // not a multiple of any rank count here: uneven halving-doubling chunks
    for (AllreduceAlgorithm a :
         {AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::Direct,
          AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::ReduceScatterAllgather}) {
      co.algorithm = a;
      std::vector<int64_t> v(n);
      Allreduce ar(ctx, v.data(), n, DataType::Int64, ReduceOp::Sum, co);
      for (int it = 0; it < kRuns; ++it) {
        for (size_t i = 0; i < n; ++i) v[i] = input<int64_t>(r, i, ReduceOp::Sum, it);
        maybeLag();
        ar.run();
        check<int64_t>(
            v.data(), n, [&](size_t i) { return expected<int64_t>(i, ReduceOp::Sum, it); },
            std::string(allreduceAlgorithmName(a)) + " run " + std::to_string(it));
      }
    }
    for (BroadcastAlgorithm a : {BroadcastAlgorithm::OneToAll, BroadcastAlgorithm::ScatterAllgather}) {
      co.broadcast = a;
      std::vector<double> b(n);
      Broadcast bc(ctx, b.data(), n, DataType::Double, P - 1, co);
      for (int it = 0; it < kRuns; ++it) {
        for (size_t i = 0; i < n; ++i) b[i] = input<double>(r, i, ReduceOp::Min, it);
        maybeLag();
        bc.run();
        check<double>(
            b.data(), n, [&](size_t i) { return input<double>(P - 1, i, ReduceOp::Min, it); },
            std::string(broadcastAlgorithmName(a)) + " run " + std::to_string(it));
      }
    }
    co.allgather = AllgatherAlgorithm::Direct;
    std::vector<int32_t> in(n), out(n * P);
    Allgather ag(ctx, in.data(), out.data(), n, DataType::Int32, co);
    for (int it = 0; it < kRuns; ++it) {
      for (size_t i = 0; i < n; ++i) in[i] = input<int32_t>(r, i, ReduceOp::Max, it);
      maybeLag();
      ag.run();
      check<int32_t>(
          out.data(), n * P, [&](size_t i) { return input<int32_t>(int(i / n), i % n, ReduceOp::Max, it); },
          "direct allgather run " + std::to_string(it));
    }
  });
}

// Auto: a few-round algorithm for small messages, a bandwidth-optimal one for large ones, never
// "auto" itself, and the same choice on every rank (each rank's choice is compared with rank 0's).
TEST(Collectives, AutoChoosesBySizeTheSameOnEveryRank) {
  Watchdog wd(55);
  for (size_t bytes : {size_t(8), size_t(4096), size_t(65536), size_t(1) << 20, size_t(64) << 20}) {
    EXPECT_NE(autoAllreduce(bytes, P), AllreduceAlgorithm::Auto);
    EXPECT_NE(autoBroadcast(bytes, P), BroadcastAlgorithm::Auto);
    EXPECT_NE(autoAllgather(bytes, P), AllgatherAlgorithm::Auto);
  }
  EXPECT_NE(autoBarrier(P), BarrierAlgorithm::Auto);
  const AllreduceAlgorithm small = autoAllreduce(8, P), large = autoAllreduce(size_t(64) << 20, P);
  EXPECT_TRUE(small == AllreduceAlgorithm::RecursiveDoubling || small == AllreduceAlgorithm::Direct)
      << allreduceAlgorithmName(small);
  // Large: a bandwidth-optimal one (2(P-1)/P·N per rank), not one that sends the whole vector.
  EXPECT_TRUE(large == AllreduceAlgorithm::Ring || large == AllreduceAlgorithm::RingChunked ||
              large == AllreduceAlgorithm::HalvingDoubling)
      << allreduceAlgorithmName(large);
  // Large broadcasts: one whose root sends about 2·N, not (P-1)·N (a chain or scatter+allgather).
  const BroadcastAlgorithm bl = autoBroadcast(size_t(64) << 20, P);
  EXPECT_TRUE(P <= 2 || bl == BroadcastAlgorithm::Chain || bl == BroadcastAlgorithm::ScatterAllgather)
      << broadcastAlgorithmName(bl);
  EXPECT_EQ(autoAllgather(size_t(1) << 30, P), AllgatherAlgorithm::Ring);  // 1 GiB: bounded scratch
  std::vector<int> chosen(size_t(P), -1);
  runRanks(P, opts(), [&](Context& ctx) {
    std::vector<float> v(1000);
    Allreduce ar(ctx, v.data(), v.size(), DataType::Float, ReduceOp::Sum);
    chosen[size_t(ctx.rank())] = int(ar.algorithm());
    CollectiveOptions resolved;  // Auto's tuning on this device (software on rxe, hardware here)
    resolved.tuning = resolveTuning(Tuning::Auto, ctx);
    if (ar.algorithm() != autoAllreduce(v.size() * sizeof(float), P, resolved))
      throw std::runtime_error("algorithm() is not what autoAllreduce says for this device's tuning");
  });
  for (int r = 1; r < P; ++r) EXPECT_EQ(chosen[size_t(r)], chosen[0]) << "rank " << r;
}

// The two tunings' switch points (docs/verbs.md, "Choosing an algorithm"), each on both sides.
TEST(Collectives, TuningsSwitchWhereTheyWereMeasured) {
  CollectiveOptions hw, sw;
  hw.tuning = Tuning::Hardware;
  sw.tuning = Tuning::Software;
  // Allreduce: hardware keeps the direct exchange while (P-1)(P-2)·N <= 96 KiB, then reduce-scatter
  // + allgather to 4 MiB; software direct to 4 KiB, then recursive doubling.
  EXPECT_EQ(autoAllreduce(16384, 4, hw), AllreduceAlgorithm::Direct);
  EXPECT_EQ(autoAllreduce(32768, 4, hw), AllreduceAlgorithm::ReduceScatterAllgather);
  EXPECT_EQ(autoAllreduce(2048, 8, hw), AllreduceAlgorithm::Direct);
  EXPECT_EQ(autoAllreduce(4096, 8, hw), AllreduceAlgorithm::ReduceScatterAllgather);
  EXPECT_EQ(autoAllreduce(size_t(4) << 20, 8, hw), AllreduceAlgorithm::ReduceScatterAllgather);
  EXPECT_EQ(autoAllreduce(size_t(8) << 20, 8, hw), AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(autoAllreduce(size_t(1) << 20, 2, hw), AllreduceAlgorithm::Direct);   // one exchange either way
  EXPECT_EQ(autoAllreduce(4096, 16, hw), AllreduceAlgorithm::RecursiveDoubling);  // not timed beyond 8
  EXPECT_EQ(autoAllreduce(4096, 4, sw), AllreduceAlgorithm::Direct);
  EXPECT_EQ(autoAllreduce(8192, 4, sw), AllreduceAlgorithm::RecursiveDoubling);
  EXPECT_EQ(autoAllreduce(size_t(1) << 20, 8, sw), AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(autoAllreduce(16384, 4), AllreduceAlgorithm::Direct);  // unresolved Auto counts as hardware
  // Broadcast: hardware scatters once the root's (P-1)·N passes 96 KiB, software from 1 MiB.
  EXPECT_EQ(autoBroadcast(32768, 4, Tuning::Hardware), BroadcastAlgorithm::OneToAll);
  EXPECT_EQ(autoBroadcast(65536, 4, Tuning::Hardware), BroadcastAlgorithm::ScatterAllgather);
  EXPECT_EQ(autoBroadcast(8192, 8, Tuning::Hardware), BroadcastAlgorithm::OneToAll);
  EXPECT_EQ(autoBroadcast(16384, 8, Tuning::Hardware), BroadcastAlgorithm::ScatterAllgather);
  EXPECT_EQ(autoBroadcast(size_t(1) << 20, 8, Tuning::Software), BroadcastAlgorithm::OneToAll);
  EXPECT_EQ(autoBroadcast(size_t(2) << 20, 8, Tuning::Software), BroadcastAlgorithm::ScatterAllgather);
  EXPECT_EQ(autoBroadcast(size_t(64) << 20, 2, Tuning::Hardware), BroadcastAlgorithm::OneToAll);
  // Barrier: one round up to 8 ranks in hardware, to 4 in software while busy-polling (2 while
  // waiting for events); then the tree, then dissemination.
  EXPECT_EQ(autoBarrier(8, Tuning::Hardware), BarrierAlgorithm::AllToAll);
  EXPECT_EQ(autoBarrier(8, Tuning::Hardware, PollMode::Event), BarrierAlgorithm::AllToAll);
  EXPECT_EQ(autoBarrier(8, Tuning::Software), BarrierAlgorithm::Tree);
  EXPECT_EQ(autoBarrier(4, Tuning::Software), BarrierAlgorithm::AllToAll);
  EXPECT_EQ(autoBarrier(4, Tuning::Software, PollMode::Event), BarrierAlgorithm::Tree);
  EXPECT_EQ(autoBarrier(3, Tuning::Software, PollMode::Event), BarrierAlgorithm::Tree);
  EXPECT_EQ(autoBarrier(2, Tuning::Software, PollMode::Event), BarrierAlgorithm::AllToAll);
  EXPECT_EQ(autoBarrier(16, Tuning::Hardware), BarrierAlgorithm::Tree);
  EXPECT_EQ(autoBarrier(64, Tuning::Software), BarrierAlgorithm::Dissemination);
}

TEST(Collectives, AutoTuningFollowsTheDevice) {
  EXPECT_EQ(resolveTuning(Tuning::Auto, "rxe0", 0xffffff), Tuning::Software);
  EXPECT_EQ(resolveTuning(Tuning::Auto, "siw_eth0", 0x626d74), Tuning::Software);
  EXPECT_EQ(resolveTuning(Tuning::Auto, "rxe_eth1", 0), Tuning::Software);  // by name too
  EXPECT_EQ(resolveTuning(Tuning::Auto, "hcasim0", 0x1af4), Tuning::Hardware);
  EXPECT_EQ(resolveTuning(Tuning::Auto, "mlx5_0", 0x02c9), Tuning::Hardware);
  EXPECT_EQ(resolveTuning(Tuning::Software, "mlx5_0", 0x02c9), Tuning::Software);  // forced
  EXPECT_EQ(resolveTuning(Tuning::Hardware, "rxe0", 0xffffff), Tuning::Hardware);
  for (Tuning t : {Tuning::Auto, Tuning::Hardware, Tuning::Software})
    EXPECT_EQ(parseTuning(tuningName(t)), t);
  EXPECT_THROW(parseTuning("fast"), std::invalid_argument);
}

TEST(Collectives, AlgorithmNamesRoundTrip) {
  for (auto a : {AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring, AllreduceAlgorithm::RingChunked,
                 AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::HalvingDoubling,
                 AllreduceAlgorithm::Direct, AllreduceAlgorithm::ReduceScatterAllgather})
    EXPECT_EQ(parseAllreduceAlgorithm(allreduceAlgorithmName(a)), a);
  for (auto a : {BroadcastAlgorithm::Auto, BroadcastAlgorithm::Chain, BroadcastAlgorithm::OneToAll,
                 BroadcastAlgorithm::ScatterAllgather})
    EXPECT_EQ(parseBroadcastAlgorithm(broadcastAlgorithmName(a)), a);
  for (auto a : {AllgatherAlgorithm::Auto, AllgatherAlgorithm::Ring, AllgatherAlgorithm::Direct})
    EXPECT_EQ(parseAllgatherAlgorithm(allgatherAlgorithmName(a)), a);
  for (auto a : {BarrierAlgorithm::Auto, BarrierAlgorithm::Dissemination, BarrierAlgorithm::AllToAll,
                 BarrierAlgorithm::Tree})
    EXPECT_EQ(parseBarrierAlgorithm(barrierAlgorithmName(a)), a);
  try {
    parseBroadcastAlgorithm("ring");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {  // names the choices
    EXPECT_NE(std::string(e.what()).find("chain, one-to-all, scatter-allgather"), std::string::npos)
        << e.what();
  }
}

// Closing a context leaves nothing in flight: a pair that answered the peer's close message with
// a flow-control ack could have that ack reach a peer whose QP was already destroyed, which the
// simulator reports as a hazard ("QP destroyed with 1 unacknowledged SEND_WITH_IMM") on the
// acking side. Every rank closes straight after its last collective, repeatedly.
TEST(Collectives, ClosingLeavesNoUnacknowledgedSends) {
  if (!simPresent()) GTEST_SKIP() << "needs the simulator's hazard counter";
  Watchdog wd(55);
  uint64_t before = 0;
  for (int r = 0; r < P; ++r) before += simCounter(deviceFor(r), "hazards");
  RankOptions o = opts();
  o.ctx.pair.dataWr = 1;  // every data item is acked at once, the close message too
  for (int round = 0; round < 3; ++round)
    runRanks(P, o, [&](Context& ctx) {
      std::vector<int64_t> v(size_t(256) << round, ctx.rank());
      Allreduce(ctx, v.data(), v.size(), DataType::Int64, ReduceOp::Sum).run();
      ctx.close();
    });
  uint64_t after = 0;
  for (int r = 0; r < P; ++r) after += simCounter(deviceFor(r), "hazards");
  EXPECT_EQ(after - before, 0u) << "hazards reported while closing (the simulator's stderr names them)";
}

TEST(ReduceScatter, RefusesAllreduceOnlyAlgorithms) {
  Watchdog wd(55);
  runRanks(P, opts(), [&](Context& ctx) {
    std::vector<float> in(size_t(P) * 4), out(4);
    CollectiveOptions co;
    co.algorithm = AllreduceAlgorithm::RecursiveDoubling;
    try {
      ReduceScatter rs(ctx, in.data(), out.data(), 4, DataType::Float, ReduceOp::Sum, co);
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("recursive-doubling") == std::string::npos) throw;
      return;
    }
    throw std::runtime_error("reduce-scatter accepted recursive-doubling");
  });
}

TEST(Allreduce, RepeatedRunsReuseRegistrations) {
  Watchdog wd(55);
  runRanks(P, opts(), [&](Context& ctx) {
    for (AllreduceAlgorithm a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::RingChunked}) {
      CollectiveOptions co;
      co.algorithm = a;
      co.segmentBytes = 4096;
      const size_t n = 20000;
      std::vector<uint8_t> buf;
      Allreduce ar(ctx, nullptr, 0, DataType::Int64, ReduceOp::Sum, co);  // a no-op instance in between
      std::vector<int64_t> v(n);
      Allreduce ar2(ctx, v.data(), n, DataType::Int64, ReduceOp::Sum, co);
      for (int it = 0; it < 4; ++it) {
        for (size_t i = 0; i < n; ++i) v[i] = input<int64_t>(ctx.rank(), i, ReduceOp::Sum, it);
        ar.run();
        ar2.run();
        check<int64_t>(
            v.data(), n, [&](size_t i) { return expected<int64_t>(i, ReduceOp::Sum, it); },
            "run " + std::to_string(it));
      }
    }
  });
}

TEST(Allreduce, EventModeSolicited) {
  Watchdog wd(55);
  runRanks(P, opts(PollMode::Event), [&](Context& ctx) {
    for (DataType t : kTypes)
      for (size_t n : {size_t(1), size_t(1000), size_t(70000)})
        dispatch(t, [&](auto zero) {
          using T = decltype(zero);
          std::vector<uint8_t> buf;
          fill<T>(buf, ctx.rank(), n, ReduceOp::Sum);
          CollectiveOptions co;
          co.segmentBytes = 16384;
          allreduce(ctx, buf.data(), n, t, ReduceOp::Sum, co);
          check<T>(
              buf.data(), n, [&](size_t i) { return expected<T>(i, ReduceOp::Sum); },
              "event " + name(t, ReduceOp::Sum, n));
        });
    if (ctx.device().eventsHandled() == 0)
      throw std::runtime_error("event mode handled no completion events");
  });
}

// Event mode (solicited-only wake-ups) for each few-round algorithm, with the sizes Auto gives
// them and one beyond.
TEST(Collectives, FewRoundAlgorithmsInEventMode) {
  Watchdog wd(55);
  runRanks(P, opts(PollMode::Event), [&](Context& ctx) {
    const int r = ctx.rank();
    for (size_t n : {size_t(1), size_t(3 * P + 1), size_t(1000), size_t(20000)}) {
      for (AllreduceAlgorithm a :
           {AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::Direct,
            AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::ReduceScatterAllgather}) {
        std::vector<uint8_t> buf;
        fill<float>(buf, r, n, ReduceOp::Sum);
        CollectiveOptions co;
        co.algorithm = a;
        Allreduce ar(ctx, buf.data(), n, DataType::Float, ReduceOp::Sum, co);
        for (int it = 0; it < 3; ++it) {
          fill<float>(buf, r, n, ReduceOp::Sum);
          ar.run();
          check<float>(
              buf.data(), n, [&](size_t i) { return expected<float>(i, ReduceOp::Sum); },
              std::string("event ") + allreduceAlgorithmName(a) + " " +
                  name(DataType::Float, ReduceOp::Sum, n));
        }
      }
      std::vector<uint8_t> b;
      fill<double>(b, r, n, ReduceOp::Max, 2);
      CollectiveOptions co;
      for (BroadcastAlgorithm a : {BroadcastAlgorithm::OneToAll, BroadcastAlgorithm::ScatterAllgather}) {
        fill<double>(b, r, n, ReduceOp::Max, 2);
        co.broadcast = a;
        broadcast(ctx, b.data(), n, DataType::Double, 0, co);
        check<double>(
            b.data(), n, [&](size_t i) { return input<double>(0, i, ReduceOp::Max, 2); },
            std::string("event ") + broadcastAlgorithmName(a));
      }
      std::vector<uint8_t> mine, out(n * P * 4);
      fill<int32_t>(mine, r, n, ReduceOp::Max, 3);
      co.allgather = AllgatherAlgorithm::Direct;
      allgather(ctx, mine.data(), out.data(), n, DataType::Int32, co);
      check<int32_t>(
          out.data(), n * P, [&](size_t i) { return input<int32_t>(int(i / n), i % n, ReduceOp::Max, 3); },
          "event direct allgather");
    }
    CollectiveOptions bo;
    for (BarrierAlgorithm a : {BarrierAlgorithm::AllToAll, BarrierAlgorithm::Tree}) {
      bo.barrier = a;
      barrier(ctx, bo);
    }
  });
}

TEST(ReduceScatter, EveryTypeOpSize) {
  Watchdog wd(55);
  runRanks(P, opts(), [&](Context& ctx) {
    const int r = ctx.rank();
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (size_t n : counts(t, op == ReduceOp::Sum || op == ReduceOp::Max, true))
          for (AllreduceAlgorithm a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::RingChunked}) {
            if (n > 1000 && a == AllreduceAlgorithm::Ring && op != ReduceOp::Sum) continue;
            dispatch(t, [&](auto zero) {
              using T = decltype(zero);
              std::vector<uint8_t> in;
              fill<T>(in, r, n * P, op);
              const std::vector<uint8_t> orig = in;
              std::vector<uint8_t> out(n * sizeof(T) + 1, 0xee);
              CollectiveOptions co;
              co.algorithm = a;
              co.segmentBytes = 16384;
              reduceScatter(ctx, in.data(), out.data(), n, t, op, co);
              check<T>(
                  out.data(), n, [&](size_t i) { return expected<T>(size_t(r) * n + i, op); },
                  "reduce-scatter " + name(t, op, n));
              if (in != orig) throw std::runtime_error("reduce-scatter modified its input");
              if (out.back() != 0xee) throw std::runtime_error("reduce-scatter wrote past the output");
            });
          }
  });
}

void allgatherSweep(AllgatherAlgorithm a) {
  runRanks(P, opts(), [&](Context& ctx) {
    const int r = ctx.rank();
    for (DataType t : kTypes)
      for (size_t n : counts(t, true, true))
        for (bool inPlace : {false, true})
          dispatch(t, [&](auto zero) {
            using T = decltype(zero);
            std::vector<uint8_t> mine;
            fill<T>(mine, r, n, ReduceOp::Max, 5);
            std::vector<uint8_t> out(n * P * sizeof(T), 0xcd);
            const void* in = mine.data();
            if (inPlace) {
              if (n) std::memcpy(out.data() + size_t(r) * n * sizeof(T), mine.data(), mine.size());
              in = out.data() + size_t(r) * n * sizeof(T);
            }
            CollectiveOptions co;
            co.segmentBytes = 65536;
            co.allgather = a;
            allgather(ctx, in, out.data(), n, t, co);
            check<T>(
                out.data(), n * P,
                [&](size_t i) { return input<T>(int(i / (n ? n : 1)), i % (n ? n : 1), ReduceOp::Max, 5); },
                std::string("allgather ") + allgatherAlgorithmName(a) + (inPlace ? " in place " : " ") +
                    name(t, ReduceOp::Max, n));
          });
  });
}

TEST(Allgather, RingEveryTypeSizeInAndOutOfPlace) {
  Watchdog wd(55);
  allgatherSweep(AllgatherAlgorithm::Ring);
}

TEST(Allgather, DirectEveryTypeSizeInAndOutOfPlace) {
  Watchdog wd(55);
  allgatherSweep(AllgatherAlgorithm::Direct);
}

void broadcastSweep(BroadcastAlgorithm a) {
  runRanks(P, opts(), [&](Context& ctx) {
    const int r = ctx.rank();
    for (DataType t : kTypes)
      for (size_t n : counts(t, true))
        for (int root = 0; root < P; ++root) {
          if (n > 1000 && root != 0 && root != P - 1) continue;
          dispatch(t, [&](auto zero) {
            using T = decltype(zero);
            std::vector<uint8_t> buf;
            fill<T>(buf, r, n, ReduceOp::Min, 9);  // every rank starts with different data
            CollectiveOptions co;
            co.segmentBytes = 32768;
            co.broadcast = a;
            broadcast(ctx, buf.data(), n, t, root, co);
            check<T>(
                buf.data(), n, [&](size_t i) { return input<T>(root, i, ReduceOp::Min, 9); },
                std::string("broadcast ") + broadcastAlgorithmName(a) + " root " + std::to_string(root) +
                    " " + name(t, ReduceOp::Min, n));
          });
        }
  });
}

TEST(Broadcast, ChainEveryTypeSizeRoot) {
  Watchdog wd(55);
  broadcastSweep(BroadcastAlgorithm::Chain);
}

TEST(Broadcast, OneToAllEveryTypeSizeRoot) {
  Watchdog wd(55);
  broadcastSweep(BroadcastAlgorithm::OneToAll);
}

TEST(Broadcast, ScatterAllgatherEveryTypeSizeRoot) {
  Watchdog wd(55);
  broadcastSweep(BroadcastAlgorithm::ScatterAllgather);
}

class BarrierEvery : public ::testing::TestWithParam<BarrierAlgorithm> {};

TEST_P(BarrierEvery, NobodyLeavesEarly) {
  Watchdog wd(55);
  std::atomic<int> arrived{0};
  runRanks(P, opts(), [&](Context& ctx) {
    CollectiveOptions co;
    co.barrier = GetParam();
    Barrier b(ctx, co);
    if (b.algorithm() != GetParam()) throw std::runtime_error("another barrier algorithm ran");
    for (int k = 0; k < 50; ++k) {
      if (k % 7 == ctx.rank()) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a late rank
      arrived.fetch_add(1);
      b.run();
      if (arrived.load() < (k + 1) * P)
        throw std::runtime_error("left barrier " + std::to_string(k) + " before every rank arrived");
    }
    barrier(ctx);  // one-shot form
  });
}

INSTANTIATE_TEST_SUITE_P(Algorithm, BarrierEvery,
                         ::testing::Values(BarrierAlgorithm::Dissemination, BarrierAlgorithm::AllToAll,
                                           BarrierAlgorithm::Tree),
                         [](const ::testing::TestParamInfo<BarrierAlgorithm>& i) {
                           return i.param == BarrierAlgorithm::AllToAll ? std::string("AllToAll")
                                  : i.param == BarrierAlgorithm::Tree   ? std::string("Tree")
                                                                        : std::string("Dissemination");
                         });
