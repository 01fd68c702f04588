// SPDX-License-Identifier: Apache-2.0
//
// Lab 12: ring allreduce on verbs/' pairs: reduce-scatter, then allgather; algorithm and bus
// bandwidth; comparison with the library's own allreduce algorithms.
//
// Every rank holds `count` floats; afterwards every rank holds the element-wise sum over all
// ranks. Rank r sends only to its right neighbour r+1 and receives only from its left neighbour
// r-1 (mod P), with RDMA writes into registered memory the receiver has granted (verbs/' slot
// buffers, docs/verbs.md):
//   reduce-scatter, P-1 steps: at step s rank r writes chunk (r-s-1) mod P into its right
//     neighbour's scratch buffer; the neighbour adds it into its own copy of that chunk. After
//     the last step rank r holds the full sum of chunk r.
//   allgather, P-1 steps: at step t rank r writes chunk (r-t) mod P straight into its right
//     neighbour's data at the chunk's place; each rank forwards what it received.
//
// One thread plays every rank, step by step: all ranks post their writes of a step, then all
// wait for the write from the left. That keeps the run repeatable (the step trace is the same
// on every run); it also means a wait must keep every rank's device going (await_writes).
//
//   1. A ring of P ranks, two connections per rank, built by hand; one allreduce of 1024 floats
//      per rank, checked against the sum computed here.
//   2. The library's full mesh (Context); for a few sizes, time your ring and the library's
//      Allreduce (Ring and RingChunked, ranks as threads); every result is checked against the
//      library's. Prints algbw = bytes / time and busbw = algbw * 2(P-1)/P, as nccl-tests do.
//
// Lab 12 handout: tutorials/lab12-ring-allreduce/README.md. This is the reference solution;
// starter/ring_allreduce.cpp is the same program with the parts marked LAB GAP left out.
//
// Only <infiniband/verbs.h> below verbs/: it runs on RoCE hardware, on rxe (every rank on the
// one device) and under `hcasim run --hosts 4` (one simulated HCA per rank).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hcasim/verbs/buffer.h"
#include "hcasim/verbs/collectives.h"
#include "hcasim/verbs/context.h"
#include "hcasim/verbs/device.h"
#include "hcasim/verbs/pair.h"
#include "hcasim/verbs/reduce.h"
#include "hcasim/verbs/store.h"

namespace hv = hcasim::verbs;

namespace {

// verbs/' own collectives take slots 4 and up (4 * tag + role, tags from 1): 0 and 1 are free.
constexpr uint32_t kSlotScratch = 0;  // reduce-scatter writes land in the receiver's scratch
constexpr uint32_t kSlotData = 1;     // allgather writes land in the receiver's data

struct Options {
  int ranks = 4;
  std::vector<std::string> devices;  // --device: rank r uses devices[r % size]
  int iters = 3;
  std::vector<size_t> sizes = {64 << 10, 1 << 20, 4 << 20};  // bytes per rank, part 2
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: ring_allreduce [--ranks N] [--device NAME[,NAME...]] [--iters N] [--sizes B[,B...]]\n"
               "  --ranks N     ranks in the ring (default 4; run under `hcasim run --hosts N`)\n"
               "  --device L    rank r uses the (r mod |L|)th device of L (default: every device, in order)\n"
               "  --iters N     timed runs per size and algorithm in part 2 (default 3)\n"
               "  --sizes L     bytes per rank in part 2, K and M suffixes (default 64K,1M,4M)\n");
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  size_t start = 0;
  for (size_t c; (c = s.find(',', start)) != std::string::npos; start = c + 1)
    v.push_back(s.substr(start, c - start));
  v.push_back(s.substr(start));
  return v;
}

size_t parse_size(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  const std::string suffix = end;
  const size_t mul = suffix == "K" ? 1024 : suffix == "M" ? 1024 * 1024 : suffix.empty() ? 1 : 0;
  if (end == s.c_str() || mul == 0 || v == 0) usage();
  return size_t(v) * mul;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage();
    const std::string v = argv[++i];
    if (a == "--ranks") {
      o.ranks = std::atoi(v.c_str());
    } else if (a == "--device") {
      o.devices = split(v);
    } else if (a == "--iters") {
      o.iters = std::atoi(v.c_str());
    } else if (a == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(v)) o.sizes.push_back(parse_size(s));
    } else {
      usage();
    }
  }
  if (o.ranks < 2 || o.iters < 1) usage();
  if (o.devices.empty())
    for (const hv::DeviceInfo& d : hv::Device::list()) o.devices.push_back(d.name);
  if (o.devices.empty()) throw std::runtime_error("no RDMA devices found");
  return o;
}

// Busy polling, no completion channel and no loop thread: threads that wait poll.
std::shared_ptr<hv::Device> open_device(const Options& o, int rank) {
  hv::DeviceAttr da;
  da.name = o.devices[size_t(rank) % o.devices.size()];
  da.mode = hv::PollMode::BusyPoll;
  return hv::Device::open(da);
}

// Under the simulator, the modelled network's time (its libibverbs exports hcasim_sim_now_ns);
// the wall clock there would measure how fast the simulation runs. Elsewhere the wall clock.
double now_us() {
  using NowFn = uint64_t (*)();
  static const auto sim = reinterpret_cast<NowFn>(dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns"));
  if (sim) return double(sim()) / 1e3;
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The starter calls this where a LAB GAP is still open: it stops before anything could wait.
[[maybe_unused]] [[noreturn]] void lab_gap(int n, const char* what) {
  throw std::logic_error("LAB GAP " + std::to_string(n) + " is not filled in: " + what);
}

int mod(int a, int p) { return ((a % p) + p) % p; }

// Small integers: every sum is exact in float, whatever order the ranks add in.
float input(int rank, size_t i) { return float(int((i * 7 + size_t(rank) * 3) % 23) - 11); }

void fill_input(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = input(rank, i);
}

// The index of the first element of v that is not the sum over `ranks` ranks, or v.size().
size_t first_wrong(const std::vector<float>& v, int ranks) {
  for (size_t i = 0; i < v.size(); ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += input(r, i);
    if (v[i] != want) return i;
  }
  return v.size();
}

// ---- the ring ----------------------------------------------------------------------------

// One rank's two connections: `left` to rank r-1 (writes come in), `right` to rank r+1 (go out).
struct RankEnds {
  std::shared_ptr<hv::Device> dev;
  hv::Pair* left;
  hv::Pair* right;
};

enum Phase { kReduceScatter = 0, kAllgather = 1 };

// An allreduce of `count` floats per rank over a ring. Like verbs/' collectives, it registers
// its memory once (constructor) and may run() any number of times.
class RingAllreduce {
 public:
  RingAllreduce(const std::vector<RankEnds>& ring, size_t count);
  std::vector<float>& data(int r) { return ranks_[size_t(r)]->data; }
  void run() {
    reduce_scatter();
    allgather();
  }

 private:
  struct Rank {
    int rank;
    RankEnds ends;
    std::vector<float> data, scratch;         // scratch: one chunk, written by the left neighbour
    std::unique_ptr<hv::SendBuffer> send[2];  // per phase: writes to the right neighbour
    std::unique_ptr<hv::RecvBuffer> recv[2];  // per phase: writes from the left neighbour
  };
  struct Chunk {
    size_t off, cnt;  // in elements
  };

  int size() const { return p_; }
  // Chunk c (mod P) of the data: P nearly equal parts.
  Chunk chunk(int c) const {
    const size_t p = size_t(p_), i = size_t(mod(c, p_));
    return {count_ * i / p, count_ * (i + 1) / p - count_ * i / p};
  }
  // Waits until every rank has taken one write from its left neighbour in `phase`.
  [[maybe_unused]] void await_writes(Phase phase);
  // Waits until every rank's writes of `phase` have completed (the data is at the neighbour).
  [[maybe_unused]] void await_sends(Phase phase);
  template <class Done>
  void progress_until(Done done, const char* what);

  void reduce_scatter();
  void allgather();

  std::vector<std::unique_ptr<Rank>> ranks_;
  int p_;
  size_t count_;
};

RingAllreduce::RingAllreduce(const std::vector<RankEnds>& ring, size_t count)
    : p_(int(ring.size())), count_(count) {
  for (size_t r = 0; r < ring.size(); ++r) {
    auto me = std::make_unique<Rank>();
    me->rank = int(r);
    me->ends = ring[r];
    me->data.assign(count, 0);
    me->scratch.assign(std::max<size_t>(1, chunk(p_ - 1).cnt), 0);  // the last chunk is the largest
    auto data = std::make_shared<hv::MemoryRegion>(me->ends.dev, me->data.data(), count * sizeof(float));
    auto scratch = std::make_shared<hv::MemoryRegion>(me->ends.dev, me->scratch.data(),
                                                      me->scratch.size() * sizeof(float));
    // Both phases read from our data. Nothing is granted yet (0): grants are given per run.
    me->send[kReduceScatter] = me->ends.right->createSendBuffer(kSlotScratch, data, 0, data->size());
    me->send[kAllgather] = me->ends.right->createSendBuffer(kSlotData, data, 0, data->size());
    me->recv[kReduceScatter] = me->ends.left->createRecvBuffer(kSlotScratch, scratch, 0, scratch->size(), 0);
    me->recv[kAllgather] = me->ends.left->createRecvBuffer(kSlotData, data, 0, data->size(), 0);
    ranks_.push_back(std::move(me));
  }
}

// One thread plays every rank, so a wait must poll every rank's device: rank r's write may sit
// in its queue until rank r's own completion queue delivers the grant it needs.
template <class Done>
void RingAllreduce::progress_until(Done done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    for (auto& me : ranks_) me->ends.dev->progressAll();
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(std::string("timed out waiting for ") + what +
                               "; rank 0's connections: to the right " + ranks_[0]->ends.right->state() +
                               "; from the left " + ranks_[0]->ends.left->state());
  }
}

void RingAllreduce::await_writes(Phase phase) {
  progress_until(
      [&] {
        for (auto& me : ranks_)
          if (me->recv[phase]->ready() == 0) return false;
        return true;
      },
      "the writes from the left neighbours");
  for (auto& me : ranks_) me->recv[phase]->waitRecv();  // there: returns at once
}

void RingAllreduce::await_sends(Phase phase) {
  progress_until(
      [&] {
        for (auto& me : ranks_)
          if (me->send[phase]->outstanding() > 0) return false;
        return true;
      },
      "the writes to the right neighbours to complete");
}

// After P-1 steps rank r's chunk r holds the sum of every rank's chunk r.
void RingAllreduce::reduce_scatter() {
  const int p = size();
  const size_t es = sizeof(float);
  for (auto& me : ranks_) me->recv[kReduceScatter]->grant(1);  // the left neighbour may write our scratch
  for (int s = 0; s + 1 < p; ++s) {
    for (auto& me : ranks_) {
      const Chunk c = chunk(me->rank - s - 1);
      me->send[kReduceScatter]->send(c.off * es, c.cnt * es, 0);
    }
    await_writes(kReduceScatter);
    for (auto& me : ranks_) {
      const Chunk c = chunk(me->rank - s - 2);
      hv::reduceInto(&me->data[c.off], me->scratch.data(), c.cnt, hv::DataType::Float, hv::ReduceOp::Sum);
      if (s + 2 < p) me->recv[kReduceScatter]->grant(1);  // scratch is free again for the next step
    }
  }
  // The allgather overwrites the chunks these writes were reading.
  await_sends(kReduceScatter);
}

// Every rank's complete chunk travels once around the ring, to its place in every data.
void RingAllreduce::allgather() {
  const int p = size();
  const size_t es = sizeof(float);
  for (auto& me : ranks_) me->recv[kAllgather]->grant(uint32_t(p - 1));  // P-1 writes, each to its own place
  for (int t = 0; t + 1 < p; ++t) {
    for (auto& me : ranks_) {
      const Chunk c = chunk(me->rank - t);
      me->send[kAllgather]->send(c.off * es, c.cnt * es, c.off * es);
    }
    await_writes(kAllgather);
  }
  // The next run rewrites the data these writes were reading.
  await_sends(kAllgather);
}

// nccl-tests' bus bandwidth factor for allreduce: each rank sends and receives 2(P-1)/P of the
// buffer, so busbw = algbw * factor is what each link carried, comparable across P.
double bus_factor(int p) { return 2.0 * (p - 1) / p; }

// ---- part 1: a ring built by hand ----------------------------------------------------------

struct HandRing {
  std::vector<std::shared_ptr<hv::Device>> devs;
  std::vector<std::unique_ptr<hv::Pair>> left, right;
  std::vector<RankEnds> ends;
};

// Rank r's `right` connects to rank r+1's `left`: P connections, not the P(P-1)/2 of a full
// mesh. Fixed PSNs keep the trace the same from run to run.
HandRing build_ring(const Options& o) {
  const int p = o.ranks;
  HandRing h;
  hv::PairOptions po;
  for (int r = 0; r < p; ++r) {
    h.devs.push_back(open_device(o, r));
    po.psn = 0x1000 * (r + 1);
    h.right.push_back(
        std::make_unique<hv::Pair>(h.devs[size_t(r)], po, "ring " + std::to_string(r) + "->right"));
    h.left.push_back(
        std::make_unique<hv::Pair>(h.devs[size_t(r)], po, "ring " + std::to_string(r) + "<-left"));
  }
  for (int r = 0; r < p; ++r) {
    hv::Pair& out = *h.right[size_t(r)];
    hv::Pair& in = *h.left[size_t(mod(r + 1, p))];
    out.connect(in.addressBytes());
    in.connect(out.addressBytes());
  }
  for (int r = 0; r < p; ++r)
    h.ends.push_back({h.devs[size_t(r)], h.left[size_t(r)].get(), h.right[size_t(r)].get()});
  return h;
}

bool part1(const Options& o) {
  const size_t count = 1024;
  HandRing h = build_ring(o);
  std::printf("part 1: a ring of %d ranks, built by hand\n", o.ranks);
  for (int r = 0; r < o.ranks; ++r) {
    const int right = mod(r + 1, o.ranks), left = mod(r - 1, o.ranks);
    std::printf("  rank %d on %s: QP 0x%x writes to rank %d's QP 0x%x; QP 0x%x is written by rank %d\n", r,
                h.devs[size_t(r)]->name().c_str(), h.right[size_t(r)]->qp()->qp_num, right,
                h.left[size_t(right)]->qp()->qp_num, h.left[size_t(r)]->qp()->qp_num, left);
  }
  bool ok = true;
  {
    RingAllreduce ring(h.ends, count);
    for (int r = 0; r < o.ranks; ++r) fill_input(ring.data(r), r);
    ring.run();
    for (int r = 0; r < o.ranks; ++r) {
      const size_t bad = first_wrong(ring.data(r), o.ranks);
      if (bad < count) {
        std::printf("  rank %d element %zu is %g, not the sum\n", r, bad, double(ring.data(r)[bad]));
        ok = false;
      }
    }
    std::printf("  allreduce of %zu floats (%zu B) per rank, %d chunks of %zu B: %s\n", count,
                count * sizeof(float), o.ranks, count / size_t(o.ranks) * sizeof(float),
                ok ? "every rank has the sum, ok" : "WRONG");
  }
  // Every pair settles its last flow-control acks before its QP goes (Pair's destructor).
  return ok;
}

// ---- part 2: the library's mesh; your ring against its algorithms ---------------------------

// Runs fn(rank) on a thread per rank; rethrows the first failure.
void on_every_rank(int p, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(p));
  std::vector<std::thread> ts;
  for (int r = 0; r < p; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < p; ++r)
    if (!errors[size_t(r)].empty())
      throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[size_t(r)]);
}

// The library's full mesh: one Context per rank. close() waits for every peer's "done", so the
// ranks close at the same time, on threads, however part 2 ends.
struct Mesh {
  std::vector<std::unique_ptr<hv::Context>> ctx;
  ~Mesh() {
    try {
      on_every_rank(int(ctx.size()), [&](int r) { ctx[size_t(r)].reset(); });
    } catch (...) {
    }
  }
};

struct Result {
  double us = 0;                         // mean time of one allreduce (slowest rank)
  std::vector<std::vector<float>> data;  // every rank's result of a run on fresh inputs
};

Result time_ring(const std::vector<RankEnds>& ends, size_t count, int iters) {
  const int p = int(ends.size());
  RingAllreduce ring(ends, count);
  Result res;
  ring.run();  // warm-up
  const double t0 = now_us();
  for (int i = 0; i < iters; ++i) ring.run();
  res.us = (now_us() - t0) / iters;
  for (int r = 0; r < p; ++r) fill_input(ring.data(r), r);
  ring.run();
  for (int r = 0; r < p; ++r) res.data.push_back(ring.data(r));
  return res;
}

Result time_library(Mesh& mesh, size_t count, int iters, hv::AllreduceAlgorithm algo) {
  const int p = int(mesh.ctx.size());
  Result res;
  res.data.resize(size_t(p));
  std::vector<double> us(static_cast<size_t>(p));
  on_every_rank(p, [&](int r) {
    std::vector<float>& d = res.data[size_t(r)];
    d.assign(count, 0);
    hv::CollectiveOptions co;
    co.algorithm = algo;
    hv::Context& ctx = *mesh.ctx[size_t(r)];
    hv::Allreduce ar(ctx, d.data(), count, hv::DataType::Float, hv::ReduceOp::Sum, co);
    hv::Barrier barrier(ctx);
    ar.run();  // warm-up
    barrier.run();
    const double t0 = now_us();
    for (int i = 0; i < iters; ++i) ar.run();
    us[size_t(r)] = (now_us() - t0) / iters;
    fill_input(d, r);
    barrier.run();
    ar.run();
    barrier.run();  // every rank's last writes are acknowledged before any rank deregisters
  });
  res.us = *std::max_element(us.begin(), us.end());
  return res;
}

void print_row(size_t bytes, const char* name, const Result& r, double factor, const char* check) {
  const double algbw = double(bytes) / (r.us * 1e3);  // bytes / us / 1e3 = GB/s
  std::printf("  %8zu KiB  %-21s %10.1f %11.2f %11.2f%s%s\n", bytes >> 10, name, r.us, algbw, algbw * factor,
              *check ? "   " : "", check);
}

bool part2(const Options& o) {
  const int p = o.ranks;
  const double factor = bus_factor(p);
  HandRing h = build_ring(o);  // your ring, on connections of its own
  hv::HashStore store;         // ranks are threads of this process
  Mesh mesh;
  mesh.ctx.resize(size_t(p));
  on_every_rank(p, [&](int r) {
    hv::ContextOptions co;
    co.pair.timeout = std::chrono::seconds(10);
    mesh.ctx[size_t(r)] = std::make_unique<hv::Context>(r, p, open_device(o, r), co);
    mesh.ctx[size_t(r)]->connectFullMesh(store);
  });
  std::printf("part 2: your ring again, and the library's full mesh (P(P-1)/2 = %d connection%s)\n",
              p * (p - 1) / 2, p == 2 ? "" : "s");
  std::printf("  busbw = algbw * 2(P-1)/P = algbw * %.2f; ", factor);
  std::printf("clock: %s; mean of %d runs after a warm-up\n",
              dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns") ? "simulated time" : "wall clock", o.iters);
  std::printf("  %12s  %-21s %10s %11s %11s   %s\n", "size/rank", "algorithm", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)", "check");
  bool ok = true;
  for (size_t bytes : o.sizes) {
    const size_t count = bytes / sizeof(float);
    const Result mine = time_ring(h.ends, count, o.iters);
    const Result ring = time_library(mesh, count, o.iters, hv::AllreduceAlgorithm::Ring);
    const Result chunked = time_library(mesh, count, o.iters, hv::AllreduceAlgorithm::RingChunked);
    for (const Result* r : {&mine, &ring, &chunked})
      for (int k = 0; k < p; ++k) ok = ok && first_wrong(r->data[size_t(k)], p) == count;
    const bool same = mine.data == ring.data;  // bit for bit, on every rank
    ok = ok && same;
    print_row(bytes, "your ring", mine, factor, same ? "= library's result" : "DIFFERS from the library's");
    print_row(bytes, "library Ring", ring, factor, "");
    print_row(bytes, "library RingChunked", chunked, factor, "");
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const bool ok = part1(o) && part2(o);
    std::printf(ok ? "all checks passed\n" : "a check FAILED\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_allreduce: %s\n", e.what());
    return 1;
  }
}
