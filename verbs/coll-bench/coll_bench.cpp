// SPDX-License-Identifier: Apache-2.0
// coll-bench: collective bandwidth and latency over the verbs/ transport, reported the way
// nccl-tests does (algbw = bytes / time; busbw = algbw * the collective's bus factor).
//
//   coll-bench --op allreduce -b 8 -e 256M -f 2 --rank R --size N --store tcp:HOST:PORT
//   coll-bench --op allreduce --rank R --size N --bootstrap cm:ADDR0,ADDR1,...   (rdma_cm)
//   hcasim run --hosts 4 -- coll-bench --op allreduce --ranks-as-threads 4 -e 1M
//   hcasim run --hosts 4 -- coll-bench --op allreduce --ranks-as-threads 4 --mode busy --compare-gloo
//
// --compare-gloo (built when Debian's Gloo, libgloo-dev, is found: HCASIM_HAVE_GLOO) also runs
// Gloo's algorithms for the op with its ibverbs transport on the same device, sizes and clock:
// every one that applies at each size (allreduce: AllreduceRing, AllreduceRingChunked,
// AllreduceHalvingDoubling, AllreduceBcube), and reports the fastest with its name.
//
// Run `coll-bench --help` for every option.
#include <dlfcn.h>
#include <getopt.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "hcasim/verbs/cm_bootstrap.h"
#include "hcasim/verbs/collectives.h"
#include "hcasim/verbs/context.h"
#include "hcasim/verbs/device.h"
#include "hcasim/verbs/error.h"
#include "hcasim/verbs/launcher.h"
#include "hcasim/verbs/store.h"

#if HCASIM_HAVE_GLOO
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/ibverbs/device.h>
#include "gloo_quiesce.h"
#endif

using namespace hcasim::verbs;

namespace {

enum class Op { Allreduce, Broadcast, Allgather, ReduceScatter, Barrier };

struct Options {
  Op op = Op::Allreduce;
  std::string opName = "allreduce";
  int rank = -1, size = -1, threads = 0;
  std::string store;
  std::string bootstrap = "store";  // "store", or "cm:ADDR[,ADDR...]" (checked: cmList)
  std::string cmList;               // the addresses of cm:..., one per rank
  int cmPort = CmBootstrap::kDefaultBasePort;
  std::string device;  // name, or comma-separated names for --ranks-as-threads
  int gidIndex = -1;
  int port = 1;
  size_t minBytes = 8, maxBytes = 8 << 20;
  double factor = 2;
  size_t stepBytes = 0;
  int iters = 20, warmup = 5;
  DataType type = DataType::Float;
  ReduceOp redop = ReduceOp::Sum;
  int root = 0;
  CollectiveOptions coll;
  std::string algo = "auto";  // --algo, checked against --op once every option is read
  PollMode mode = PollMode::Event;
  bool check = true;
  std::string clock = "auto";
  int timeoutMs = 60000;
  uint32_t dataWr = 32, ackWr = 8;
  bool compareGloo = false;
  std::string glooAlgo = "best";  // best, or one of glooAlgos(op)
};

// Our algorithms per op, as --algo takes them.
std::vector<std::string> ourAlgos(Op op) {
  switch (op) {
    case Op::Allreduce:
      return {"auto",
              "ring",
              "ring-chunked",
              "recursive-doubling",
              "halving-doubling",
              "direct",
              "reduce-scatter-allgather"};
    case Op::ReduceScatter: return {"auto", "ring", "ring-chunked"};
    case Op::Broadcast: return {"auto", "chain", "one-to-all", "scatter-allgather"};
    case Op::Allgather: return {"auto", "ring", "direct"};
    case Op::Barrier: return {"auto", "dissemination", "all-to-all", "tree"};
  }
  return {};
}

// Gloo's algorithms per op (--gloo-algo), and the Gloo class each name stands for.
std::vector<std::string> glooAlgos(Op op) {
  switch (op) {
    case Op::Allreduce: return {"ring", "ring-chunked", "halving-doubling", "bcube"};
    case Op::Broadcast: return {"one-to-all"};
    case Op::Allgather: return {"ring"};
    case Op::Barrier: return {"all-to-all"};
    case Op::ReduceScatter: return {};
  }
  return {};
}
const char* glooClass(Op op, const std::string& a) {
  if (op == Op::Allreduce)
    return a == "ring"               ? "AllreduceRing"
           : a == "ring-chunked"     ? "AllreduceRingChunked"
           : a == "halving-doubling" ? "AllreduceHalvingDoubling"
                                     : "AllreduceBcube";
  if (op == Op::Broadcast) return "BroadcastOneToAll";
  if (op == Op::Allgather) return "AllgatherRing";
  return "BarrierAllToAll";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// --algo and --gloo-algo against the op: an invalid_argument naming the option and the choices.
void checkAlgorithms(Options& o) {
  const auto ours = ourAlgos(o.op);
  if (std::find(ours.begin(), ours.end(), o.algo) == ours.end())
    throw std::invalid_argument("--algo '" + o.algo + "' does not apply to --op " + o.opName + " (" +
                                o.opName + ": " + join(ours) + ")");
  switch (o.op) {
    case Op::Allreduce:
    case Op::ReduceScatter: o.coll.algorithm = parseAllreduceAlgorithm(o.algo); break;
    case Op::Broadcast: o.coll.broadcast = parseBroadcastAlgorithm(o.algo); break;
    case Op::Allgather: o.coll.allgather = parseAllgatherAlgorithm(o.algo); break;
    case Op::Barrier: o.coll.barrier = parseBarrierAlgorithm(o.algo); break;
  }
  const auto gloo = glooAlgos(o.op);
  if (o.glooAlgo != "best" && std::find(gloo.begin(), gloo.end(), o.glooAlgo) == gloo.end())
    throw std::invalid_argument("--gloo-algo '" + o.glooAlgo + "' does not apply to --op " + o.opName + " (" +
                                (gloo.empty() ? std::string("Gloo has none") : "best, " + join(gloo)) + ")");
}

[[noreturn]] void usage(int rc) {
  std::printf(
      "usage: coll-bench [options]\n"
      "  --op OP               allreduce | broadcast | allgather | reduce-scatter | barrier (default "
      "allreduce)\n"
      "  -b, --minbytes SIZE   smallest message (default 8); K, M, G suffixes\n"
      "  -e, --maxbytes SIZE   largest message (default 8M)\n"
      "  -f, --stepfactor F    multiply the size by F each step (default 2)\n"
      "  -i, --stepbytes SIZE  add SIZE each step instead\n"
      "  -n, --iters N         timed iterations per size (default 20)\n"
      "  -w, --warmup N        untimed iterations per size (default 5)\n"
      "  -d, --datatype T      float | double | int32 | int64 (default float)\n"
      "  -o, --redop OP        sum | min | max | prod (default sum)\n"
      "  -r, --root R          broadcast root (default 0)\n"
      "  -c, --check 0|1       verify results exactly after timing (default 1)\n"
      "  --algo A              the algorithm (default auto: chosen per size and rank count; the algo column\n"
      "                        says which ran). allreduce: ring | ring-chunked | recursive-doubling |\n"
      "                        halving-doubling | direct | reduce-scatter-allgather; reduce-scatter: ring |\n"
      "                        ring-chunked; broadcast:\n"
      "                        chain | one-to-all | scatter-allgather; allgather: ring | direct; barrier:\n"
      "                        dissemination | all-to-all | tree\n"
      "  --tuning T            auto | hardware | software: the switch points auto uses (default auto:\n"
      "                        software on rxe and siw, hardware on others; docs/verbs.md)\n"
      "  --segment SIZE        pipelining segment (default 256K)\n"
      "  --regions N           scratch regions of ring-chunked (default 4)\n"
      "  --rank R --size N     this process's rank and the group size (else OMPI_COMM_WORLD_*,\n"
      "                        SLURM_PROCID/SLURM_NTASKS, PMI_RANK/PMI_SIZE)\n"
      "  --store SPEC          file:DIR | tcp:HOST:PORT (rank 0 serves) | redis:HOST:PORT | hash\n"
      "  --bootstrap store|cm:ADDR[,ADDR...]\n"
      "                        connect through the store (default) or through rdma_cm: one IPv4 address per\n"
      "                        rank in rank order; rank i listens on ADDR_i, port --cm-port + i\n"
      "  --cm-port P           rdma_cm base port (default %d)\n"
      "  --ranks-as-threads N  run N ranks as threads of this process (in-process store, device i = ith)\n"
      "  --device NAME[,NAME]  RDMA device(s) (default: first active; with threads, one each in list order)\n"
      "  --port N              port (default 1)\n"
      "  --gid-index I         GID index (default: the IPv4-mapped RoCEv2 GID on Ethernet, 0 on IB)\n"
      "  --mode event|busy     completion handling (default event)\n"
      "  --data-wr N --ack-wr N  flow-control budgets per connection (default 32, 8)\n"
      "  --clock auto|wall|sim times from the wall clock or the simulator's clock (auto: sim if present)\n"
      "  --timeout-ms MS       bound on every wait (default 60000)\n"
      "  --compare-gloo        also run Gloo's algorithms for the op (ibverbs transport) on the same "
      "device,\n"
      "                        GID, sizes and clock, and report the fastest at each size; --mode event uses\n"
      "                        Gloo's default (a device loop thread), --mode busy its sync mode with busy\n"
      "                        polling (not for reduce-scatter)%s\n"
      "  --gloo-algo A         best (default: every one that applies) or one: allreduce ring | ring-chunked "
      "|\n"
      "                        halving-doubling | bcube (gloo::AllreduceRing, AllreduceRingChunked,\n"
      "                        AllreduceHalvingDoubling, AllreduceBcube); broadcast one-to-all\n"
      "                        (BroadcastOneToAll); allgather ring (AllgatherRing); barrier all-to-all\n"
      "                        (BarrierAllToAll)\n"
      "Sizes are bytes of the largest buffer involved (allgather: the output, reduce-scatter: the input),\n"
      "as in nccl-tests. busbw factors: allreduce 2(n-1)/n, allgather and reduce-scatter (n-1)/n, broadcast "
      "1.\n",
      int(CmBootstrap::kDefaultBasePort),
#if HCASIM_HAVE_GLOO
      ""
#else
      "\n                        (not in this build: Gloo was not found; apt-get install libgloo-dev)"
#endif
  );
  std::exit(rc);
}

size_t parseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suf(end);
  size_t mul = 1;
  if (suf == "K" || suf == "k")
    mul = 1024;
  else if (suf == "M" || suf == "m")
    mul = 1024 * 1024;
  else if (suf == "G" || suf == "g")
    mul = size_t(1) << 30;
  else if (!suf.empty())
    throw std::invalid_argument("bad size '" + s + "'");
  if (s.empty() || v < 0) throw std::invalid_argument("bad size '" + s + "'");
  return size_t(v * double(mul));
}

// --bootstrap store | cm:ADDR[,ADDR...]: the list's syntax here, its length once the group
// size is known (cmBootstrap), both before any device is opened.
void parseBootstrap(Options& o, const std::string& a) {
  if (a == "store") {
    o.bootstrap = a;
    return;
  }
  if (a.rfind("cm:", 0) != 0)
    throw std::invalid_argument("--bootstrap '" + a + "': expected store or cm:ADDR[,ADDR...]");
  try {
    CmBootstrap::parse(a.substr(3));
  } catch (const AddressError& e) {
    throw std::invalid_argument(std::string("--bootstrap: ") + e.what());
  }
  o.bootstrap = "cm";
  o.cmList = a.substr(3);
}

// The rdma_cm bootstrap for a group of @p size, or an invalid_argument naming --bootstrap.
CmBootstrap cmBootstrap(const Options& o, int size) {
  try {
    CmBootstrap cm = CmBootstrap::parse(o.cmList, uint16_t(o.cmPort));
    cm.validate(size);
    return cm;
  } catch (const AddressError& e) {
    throw std::invalid_argument(std::string("--bootstrap: ") + e.what() +
                                (e.field() == "basePort" ? " (--cm-port)" : ""));
  }
}

Options parse(int argc, char** argv) {
  Options o;
  enum {
    kOp = 256,
    kRank,
    kSize,
    kStore,
    kThreads,
    kDevice,
    kGid,
    kPort,
    kAlgo,
    kTuning,
    kSegment,
    kRegions,
    kMode,
    kClock,
    kTimeout,
    kDataWr,
    kAckWr,
    kGloo,
    kGlooAlgo,
    kBootstrap,
    kCmPort,
    kHelp
  };
  static const option longs[] = {{"op", required_argument, nullptr, kOp},
                                 {"rank", required_argument, nullptr, kRank},
                                 {"size", required_argument, nullptr, kSize},
                                 {"store", required_argument, nullptr, kStore},
                                 {"bootstrap", required_argument, nullptr, kBootstrap},
                                 {"cm-port", required_argument, nullptr, kCmPort},
                                 {"ranks-as-threads", required_argument, nullptr, kThreads},
                                 {"device", required_argument, nullptr, kDevice},
                                 {"gid-index", required_argument, nullptr, kGid},
                                 {"port", required_argument, nullptr, kPort},
                                 {"algo", required_argument, nullptr, kAlgo},
                                 {"tuning", required_argument, nullptr, kTuning},
                                 {"segment", required_argument, nullptr, kSegment},
                                 {"regions", required_argument, nullptr, kRegions},
                                 {"mode", required_argument, nullptr, kMode},
                                 {"clock", required_argument, nullptr, kClock},
                                 {"timeout-ms", required_argument, nullptr, kTimeout},
                                 {"data-wr", required_argument, nullptr, kDataWr},
                                 {"ack-wr", required_argument, nullptr, kAckWr},
                                 {"compare-gloo", no_argument, nullptr, kGloo},
                                 {"gloo-algo", required_argument, nullptr, kGlooAlgo},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"warmup", required_argument, nullptr, 'w'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"redop", required_argument, nullptr, 'o'},
                                 {"root", required_argument, nullptr, 'r'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"help", no_argument, nullptr, kHelp},
                                 {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:d:o:r:c:h", longs, nullptr)) != -1) {
    const std::string a = optarg ? optarg : "";
    switch (c) {
      case kOp:
        o.opName = a;
        if (a == "allreduce")
          o.op = Op::Allreduce;
        else if (a == "broadcast")
          o.op = Op::Broadcast;
        else if (a == "allgather")
          o.op = Op::Allgather;
        else if (a == "reduce-scatter" || a == "reducescatter")
          o.op = Op::ReduceScatter, o.opName = "reduce-scatter";
        else if (a == "barrier")
          o.op = Op::Barrier;
        else
          throw std::invalid_argument("unknown --op '" + a + "'");
        break;
      case kRank: o.rank = std::stoi(a); break;
      case kSize: o.size = std::stoi(a); break;
      case kStore: o.store = a; break;
      case kBootstrap: parseBootstrap(o, a); break;
      case kCmPort:
        o.cmPort = std::stoi(a);
        if (o.cmPort < 1 || o.cmPort > 65535) throw std::invalid_argument("--cm-port must be 1..65535");
        break;
      case kThreads: o.threads = std::stoi(a); break;
      case kDevice: o.device = a; break;
      case kGid: o.gidIndex = std::stoi(a); break;
      case kPort: o.port = std::stoi(a); break;
      case kAlgo: o.algo = a; break;
      case kTuning: try { o.coll.tuning = parseTuning(a);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string("--tuning: ") + e.what());
        }
        break;
      case kSegment: o.coll.segmentBytes = parseSize(a); break;
      case kRegions: o.coll.regions = uint32_t(std::stoul(a)); break;
      case kMode:
        if (a == "event")
          o.mode = PollMode::Event;
        else if (a == "busy")
          o.mode = PollMode::BusyPoll;
        else
          throw std::invalid_argument("unknown --mode '" + a + "'");
        break;
      case kClock:
        if (a != "auto" && a != "wall" && a != "sim")
          throw std::invalid_argument("unknown --clock '" + a + "'");
        o.clock = a;
        break;
      case kTimeout: o.timeoutMs = std::stoi(a); break;
      case kDataWr: o.dataWr = uint32_t(std::stoul(a)); break;
      case kAckWr: o.ackWr = uint32_t(std::stoul(a)); break;
      case kGloo: o.compareGloo = true; break;
      case kGlooAlgo: o.glooAlgo = a; break;
      case 'b': o.minBytes = parseSize(a); break;
      case 'e': o.maxBytes = parseSize(a); break;
      case 'f': o.factor = std::stod(a); break;
      case 'i': o.stepBytes = parseSize(a); break;
      case 'n': o.iters = std::stoi(a); break;
      case 'w': o.warmup = std::stoi(a); break;
      case 'd': o.type = parseDataType(a); break;
      case 'o': o.redop = parseReduceOp(a); break;
      case 'r': o.root = std::stoi(a); break;
      case 'c': o.check = std::stoi(a) != 0; break;
      case 'h':
      case kHelp: usage(0);
      default: usage(2);
    }
  }
  if (optind < argc) throw std::invalid_argument(std::string("unexpected argument '") + argv[optind] + "'");
  if (o.iters < 1 || o.warmup < 0) throw std::invalid_argument("-n must be >= 1 and -w >= 0");
  if (o.stepBytes == 0 && o.factor <= 1) throw std::invalid_argument("-f must be > 1 (or use -i)");
  if (o.minBytes > o.maxBytes) throw std::invalid_argument("-b is larger than -e");
  checkAlgorithms(o);
  if (o.compareGloo) {
#if !HCASIM_HAVE_GLOO
    throw std::invalid_argument(
        "--compare-gloo: this coll-bench was built without Gloo (apt-get install libgloo-dev, then "
        "re-run cmake with HCASIM_WITH_GLOO=ON)");
#endif
    if (o.op == Op::ReduceScatter)
      throw std::invalid_argument("--compare-gloo: Gloo has no reduce-scatter to compare with (--op " +
                                  o.opName + ")");
  }
  return o;
}

// ---- clock -------------------------------------------------------------------------------

using SimNowFn = uint64_t (*)();
SimNowFn simNow() {
  static SimNowFn f = reinterpret_cast<SimNowFn>(dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns"));
  return f;
}
bool useSimClock(const Options& o) { return o.clock == "sim" || (o.clock == "auto" && simNow()); }
double nowUs(bool sim) {
  if (sim) return double(simNow()()) / 1e3;
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) /
         1e3;
}

// ---- data --------------------------------------------------------------------------------

// Inputs whose results are exact for every reduction (see tests/verbs/collectives_test.cpp).
template <class T>
T input(int r, size_t i, ReduceOp op) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == ReduceOp::Prod) {
      static const T v[] = {T(2), T(0.5), T(-1), T(1)};
      return v[(i + 2 * size_t(r)) % 4];
    }
    return T(int64_t((i * 7 + size_t(r) * 3) % 23) - 11);
  } else {
    if (op == ReduceOp::Prod) {
      static const T v[] = {T(1), T(-1), T(2), T(3)};
      return v[(i + size_t(r)) % 4];
    }
    using U = std::make_unsigned_t<T>;
    return T(U(uint64_t(i) * 0x9E3779B97F4A7C15ull + uint64_t(r) * 0x632BE59BD9B4E019ull));
  }
}

template <class T>
T combine(T a, T b, ReduceOp op) {
  T c = a;
  reduceInto(&c, &b, 1,
             std::is_same_v<T, float>     ? DataType::Float
             : std::is_same_v<T, double>  ? DataType::Double
             : std::is_same_v<T, int32_t> ? DataType::Int32
                                          : DataType::Int64,
             op);
  return c;
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

// ---- one size ----------------------------------------------------------------------------

// Gloo's result at one size: one algorithm (glooAlgos), or the best of several.
struct GlooRun {
  std::string name;
  std::vector<double> us;  // per iteration, max over ranks
  double meanUs = 0;       // the slowest rank's mean (the time column)
  bool checked = false, ok = true;
  std::string error;
};

struct Row {
  size_t bytes = 0, count = 0;
  std::string algo;        // what ran (Auto resolved)
  std::vector<double> us;  // per iteration, max over ranks
  double meanUs = 0;       // the slowest rank's mean (the time column)
  bool checked = false, ok = true;
  std::string error;
  // --compare-gloo: every Gloo algorithm that ran at this size (none: e.g. count 0)
  std::vector<GlooRun> gloo;
  bool glooOk() const {
    for (const auto& g : gloo)
      if (!g.ok) return false;
    return true;
  }
};

double busFactor(Op op, int n) {
  switch (op) {
    case Op::Allreduce: return 2.0 * (n - 1) / n;
    case Op::Allgather:
    case Op::ReduceScatter: return double(n - 1) / n;
    case Op::Broadcast: return 1;
    case Op::Barrier: return 0;
  }
  return 0;
}

double mean(const std::vector<double>& v) {
  double avg = 0;
  for (double x : v) avg += x;
  return v.empty() ? 0 : avg / double(v.size());
}

/**
 * Timed runs of one algorithm, on every rank at once. The time column is the slowest rank's
 * mean over the iterations, as nccl-tests reports it: where a run may start before the last
 * one has reached every rank (a broadcast root runs ahead), one rank's iteration i and
 * another's are not the same moment, and the mean of per-iteration maxima would count each
 * rank's slow iterations and none of its fast ones. The percentiles are per iteration, over
 * the slowest rank.
 */
struct Timing {
  std::vector<double> us;
  double meanUs = 0;
};
Timing timeRuns(Context& ctx, int iters, bool sim, const std::function<void()>& run) {
  std::vector<double> us(size_t(iters), 0);
  for (int i = 0; i < iters; ++i) {
    const double t0 = nowUs(sim);
    run();
    us[size_t(i)] = nowUs(sim) - t0;
  }
  us.push_back(mean(us));  // reduced with the rest: one collective
  Allreduce(ctx, us.data(), us.size(), DataType::Double, ReduceOp::Max).run();
  Timing t;
  t.meanUs = us.back();
  us.pop_back();
  t.us = std::move(us);
  return t;
}

// The Gloo algorithms compared with at each size: --gloo-algo, or every one that applies (Gloo
// 0.5.0's AllreduceBcube needs a rank count that is a power of its base, 2).
std::vector<std::string> glooCandidates(const Options& o, int ranks) {
  if (o.glooAlgo != "best") return {o.glooAlgo};
  std::vector<std::string> v;
  for (const auto& a : glooAlgos(o.op))
    if (a != "bcube" || (ranks & (ranks - 1)) == 0) v.push_back(a);
  return v;
}

std::string glooWhich(const Options& o) {
  std::string s;
  for (const auto& a : glooAlgos(o.op))
    if (o.glooAlgo == "best" || o.glooAlgo == a)
      s += (s.empty() ? "" : ", ") + std::string(glooClass(o.op, a)) + " (" + a + ")";
  return (o.glooAlgo == "best" && glooAlgos(o.op).size() > 1 ? "the fastest of " : "") + s + " <" +
         dataTypeName(o.type) + ">";
}

// ---- the expected results (every rank checks every element) --------------------------------

// Checks rank r's result of the op for `count` elements: `a` in place (allreduce, broadcast) or
// `b` (allgather, reduce-scatter). Returns an empty string or what was wrong.
std::string checkResult(const Options& o, int p, int r, size_t count, const std::vector<uint8_t>& a,
                        const std::vector<uint8_t>& b) {
  std::string err;
  dispatch(o.type, [&](auto zero) {
    using T = decltype(zero);
    auto reduceAll = [&](size_t i) {
      T acc = input<T>(0, i, o.redop);
      for (int q = 1; q < p; ++q) acc = combine(acc, input<T>(q, i, o.redop), o.redop);
      return acc;
    };
    const size_t n = o.op == Op::Allgather ? count * size_t(p) : count;
    for (size_t i = 0; i < n && err.empty(); ++i) {
      T got, want;
      switch (o.op) {
        case Op::Allreduce:
          got = reinterpret_cast<const T*>(a.data())[i];
          want = reduceAll(i);
          break;
        case Op::Broadcast:
          got = reinterpret_cast<const T*>(a.data())[i];
          want = input<T>(o.root, i, o.redop);
          break;
        case Op::ReduceScatter:
          got = reinterpret_cast<const T*>(b.data())[i];
          want = reduceAll(size_t(r) * count + i);
          break;
        case Op::Allgather:
          got = reinterpret_cast<const T*>(b.data())[i];
          want = input<T>(int(i / count), i % count, o.redop);
          break;
        default: got = want = T{};
      }
      if (std::memcmp(&got, &want, sizeof(T)) != 0)
        err = "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
    }
  });
  return err;
}

// Every rank's verdict: true if all are fine.
bool everyRankOk(Context& ctx, bool ok) {
  int32_t bad = ok ? 0 : 1;
  Allreduce(ctx, &bad, 1, DataType::Int32, ReduceOp::Max).run();
  return bad == 0;
}

// ---- Gloo comparison ----------------------------------------------------------------------

#if HCASIM_HAVE_GLOO
// Gloo's rendezvous over our store (any kind: hash, file, TCP, Redis), under its own prefix.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(const std::shared_ptr<hcasim::verbs::Store>& inner, std::chrono::milliseconds timeout)
      : inner_(std::make_shared<hcasim::verbs::PrefixStore>("coll-bench-gloo", inner)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    inner_->set(key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const Bytes b = inner_->get(key, timeout_);
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    inner_->wait(keys, t);
  }

 private:
  std::shared_ptr<hcasim::verbs::Store> inner_;
  std::chrono::milliseconds timeout_;
};

// Flushes an algorithm's last sends before it is destroyed (Gloo 0.5.0; see gloo_quiesce.h).
using GlooQuiesce = hcasim::gloo_compat::Quiesce;

// One rank's Gloo: device, context (full mesh) and the flush helper. On an exception it is
// leaked on purpose (Gloo's destructors may terminate the process mid-operation).
struct GlooRank {
  std::shared_ptr<gloo::transport::Device> dev;
  std::unique_ptr<GlooStore> store;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::unique_ptr<GlooQuiesce> quiesce;
  std::string describe;
  ~GlooRank() {
    quiesce.reset();
    ctx.reset();
    dev.reset();
  }
};

// Connects Gloo on the device, port and GID index our Device uses. Collective: every rank.
GlooRank* glooConnect(Context& ctx, const Options& o, const std::shared_ptr<hcasim::verbs::Store>& store) {
  std::unique_ptr<GlooRank> g(new GlooRank);
  try {
    gloo::transport::ibverbs::attr attr;
    attr.name = ctx.device().name();
    attr.port = ctx.device().port();
    attr.index = ctx.device().gidIndex();
    g->dev = gloo::transport::ibverbs::CreateDevice(attr);
    g->store = std::make_unique<GlooStore>(store, std::chrono::milliseconds(o.timeoutMs));
    g->ctx = std::make_shared<gloo::rendezvous::Context>(ctx.rank(), ctx.size());
    g->ctx->setTimeout(std::chrono::milliseconds(o.timeoutMs));
    g->ctx->connectFullMesh(*g->store, g->dev);
    if (o.mode == PollMode::BusyPoll)
      for (int i = 0; i < ctx.size(); ++i)
        if (i != ctx.rank()) g->ctx->getPair(i)->setSync(true, true);
    // Gloo sends (memory regions) as soon as a rank is connected, while a peer's QP may still be
    // in INIT and drop them; Gloo then relies on retransmission. Wait until every rank is connected.
    Barrier(ctx).run();
    g->quiesce = std::make_unique<GlooQuiesce>(g->ctx);
    g->describe =
        "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
        std::to_string(GLOO_VERSION_PATCH) + " " + glooWhich(o) + ", ibverbs transport on " + attr.name +
        " port " + std::to_string(attr.port) + " gid index " + std::to_string(attr.index) + ", " +
        (o.mode == PollMode::BusyPoll ? "sync mode (busy poll)" : "async mode (device loop thread)");
  } catch (...) {
    g.release();  // leaked: see GlooRank
    throw;
  }
  return g.release();
}

// Debian's Gloo (0.5.0, 2022) destroys a Pair without taking the pair mutex its device loop
// thread holds while it handles completions, so in async mode tearing a context down can race
// with the loop thread finishing the last completion (a use-after-free in Pair::postReceive,
// seen in about 1 of 3 runs on the simulator). Later Gloo locks there. In async mode the rank's
// Gloo therefore stays until the process exits; sync (busy-poll) mode tears down normally.
void glooRelease(GlooRank* g, const Options& o) {
  if (!g) return;
  if (o.mode == PollMode::BusyPoll) {
    delete g;
    return;
  }
  static std::mutex mu;
  static auto* keep = new std::vector<GlooRank*>;  // never destroyed: reachable at exit, no leak report
  std::lock_guard<std::mutex> lock(mu);
  keep->push_back(g);
}

template <class T>
const gloo::ReductionFunction<T>* glooReduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return gloo::ReductionFunction<T>::sum;
    case ReduceOp::Prod: return gloo::ReductionFunction<T>::product;
    case ReduceOp::Min: return gloo::ReductionFunction<T>::min;
    case ReduceOp::Max: return gloo::ReductionFunction<T>::max;
  }
  return gloo::ReductionFunction<T>::sum;
}

// Builds Gloo's algorithm `name` for the op over a (in place, or allgather's input) and b
// (allgather's output). Collective: every rank, same order (it takes context slots).
std::unique_ptr<gloo::Algorithm> glooBuild(GlooRank* g, const Options& o, const std::string& name,
                                           size_t count, std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
  std::unique_ptr<gloo::Algorithm> alg;
  if (o.op == Op::Barrier) return std::make_unique<gloo::BarrierAllToAll>(g->ctx);
  dispatch(o.type, [&](auto zero) {
    using T = decltype(zero);
    T* pa = reinterpret_cast<T*>(a.data());
    const std::vector<T*> ptrs{pa};
    const int n = int(count);
    if (o.op == Op::Broadcast)
      alg = std::make_unique<gloo::BroadcastOneToAll<T>>(g->ctx, ptrs, count, o.root, 0);
    else if (o.op == Op::Allgather)
      alg = std::make_unique<gloo::AllgatherRing<T>>(g->ctx, std::vector<const T*>{pa},
                                                     reinterpret_cast<T*>(b.data()), n);
    else if (name == "ring")
      alg = std::make_unique<gloo::AllreduceRing<T>>(g->ctx, ptrs, n, glooReduction<T>(o.redop));
    else if (name == "ring-chunked")
      alg = std::make_unique<gloo::AllreduceRingChunked<T>>(g->ctx, ptrs, n, glooReduction<T>(o.redop));
    else if (name == "halving-doubling")
      alg = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(g->ctx, ptrs, n, glooReduction<T>(o.redop));
    else
      alg = std::make_unique<gloo::AllreduceBcube<T>>(g->ctx, ptrs, n, glooReduction<T>(o.redop));
  });
  return alg;
}
#else
struct GlooRank {};
#endif

// Gloo's algorithm `name` at one size: same inputs, warm-up, iterations, clock and check as ours.
GlooRun runGlooAlgo(Context& ctx, GlooRank* g, const Options& o, const std::string& name, size_t count,
                    const std::function<void(std::vector<uint8_t>&, std::vector<uint8_t>&)>& init, bool sim) {
  GlooRun run;
  run.name = name;
#if HCASIM_HAVE_GLOO
  std::vector<uint8_t> a, b;
  std::unique_ptr<gloo::Algorithm> alg;
  try {
    init(a, b);
    alg = glooBuild(g, o, name, count, a, b);
    Barrier sync(ctx);
    for (int i = 0; i < o.warmup; ++i) alg->run();
    sync.run();
    Timing t = timeRuns(ctx, o.iters, sim, [&] { alg->run(); });
    run.us = std::move(t.us);
    run.meanUs = t.meanUs;
    if (o.check && o.op != Op::Barrier) {
      init(a, b);
      // Gloo's algorithms make a run's first write without the receiver's leave (the last
      // notification of the run before is it), so a fast rank's write could land before a slow
      // one has reset its buffers: every rank resets first. (Ours need no such barrier: their
      // writes land in landing regions, or after a grant given in the run.)
      sync.run();
      alg->run();
      run.checked = true;
      run.error = checkResult(o, ctx.size(), ctx.rank(), count, a, b);
      run.ok = run.error.empty();
      if (!everyRankOk(ctx, run.ok) && run.ok) {
        run.ok = false;
        run.error = "another rank saw wrong data";
      }
      if (!run.ok) run.error = "Gloo " + name + ": " + run.error;
    }
    g->quiesce->run();  // its last sends are done before it is destroyed (gloo_quiesce.h)
  } catch (...) {
    alg.release();  // leaked: Gloo's destructors may terminate with sends in flight
    throw;
  }
#else
  (void)ctx, (void)g, (void)o, (void)count, (void)init, (void)sim;
#endif
  return run;
}

// One size on one rank; returns its per-iteration times (us), the check and Gloo's runs.
Row runSize(Context& ctx, const Options& o, size_t bytes, bool sim, GlooRank* gloo) {
  const int p = ctx.size(), r = ctx.rank();
  const size_t es = dataTypeSize(o.type);
  Row row;
  size_t count = bytes / es;
  if (o.op == Op::Allgather || o.op == Op::ReduceScatter) count = bytes / es / size_t(p);
  row.count = count;
  row.bytes = (o.op == Op::Allgather || o.op == Op::ReduceScatter) ? count * es * size_t(p) : count * es;
  if (o.op == Op::Barrier) row.bytes = row.count = 0;

  // Inputs (a) and output (b) of the op, as fresh as before the first run.
  auto init = [&](std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
    dispatch(o.type, [&](auto zero) {
      using T = decltype(zero);
      const size_t n = (o.op == Op::ReduceScatter) ? count * size_t(p) : count;
      a.resize(n * sizeof(T));
      T* x = reinterpret_cast<T*>(a.data());
      for (size_t i = 0; i < n; ++i) x[i] = input<T>(r, i, o.redop);
    });
    if (o.op == Op::Allgather) b.assign(count * es * size_t(p), 0);
    if (o.op == Op::ReduceScatter) b.assign(count * es, 0);
  };
  std::vector<uint8_t> a, b;
  init(a, b);
  std::unique_ptr<Collective> coll;
  switch (o.op) {
    case Op::Allreduce: {
      auto c = std::make_unique<Allreduce>(ctx, a.data(), count, o.type, o.redop, o.coll);
      row.algo = allreduceAlgorithmName(c->algorithm());
      coll = std::move(c);
      break;
    }
    case Op::Broadcast: {
      auto c = std::make_unique<Broadcast>(ctx, a.data(), count, o.type, o.root, o.coll);
      row.algo = broadcastAlgorithmName(c->algorithm());
      coll = std::move(c);
      break;
    }
    case Op::Allgather: {
      auto c = std::make_unique<Allgather>(ctx, a.data(), b.data(), count, o.type, o.coll);
      row.algo = allgatherAlgorithmName(c->algorithm());
      coll = std::move(c);
      break;
    }
    case Op::ReduceScatter:
      coll = std::make_unique<ReduceScatter>(ctx, a.data(), b.data(), count, o.type, o.redop, o.coll);
      row.algo = o.coll.algorithm == AllreduceAlgorithm::RingChunked ||
                         (o.coll.algorithm == AllreduceAlgorithm::Auto && count * es > o.coll.segmentBytes)
                     ? "ring-chunked"
                     : "ring";
      break;
    case Op::Barrier: {
      auto c = std::make_unique<Barrier>(ctx, o.coll);
      row.algo = barrierAlgorithmName(c->algorithm());
      coll = std::move(c);
      break;
    }
  }
  Barrier sync(ctx);
  for (int i = 0; i < o.warmup; ++i) coll->run();
  sync.run();
  Timing t = timeRuns(ctx, o.iters, sim, [&] { coll->run(); });
  row.us = std::move(t.us);
  row.meanUs = t.meanUs;

  if (o.check && o.op != Op::Barrier) {
    init(a, b);
    coll->run();
    row.checked = true;
    row.error = checkResult(o, p, r, count, a, b);
    row.ok = row.error.empty();
    if (!everyRankOk(ctx, row.ok) && row.ok) {
      row.ok = false;
      row.error = "another rank saw wrong data";
    }
  }
  // Gloo keeps byte counts in an int, and a zero-length buffer cannot be registered.
  const size_t glooBytes = o.op == Op::Allgather ? count * es * size_t(p) : count * es;
  if (gloo && (o.op == Op::Barrier || (count > 0 && glooBytes <= size_t(INT32_MAX))))
    for (const auto& name : glooCandidates(o, p))
      row.gloo.push_back(runGlooAlgo(ctx, gloo, o, name, count, init, sim));
  return row;
}

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0));
  return v[i];
}

// The simulator's time model as `hcasim run --clock` hands it down (HCASIM_CLOCK; unset: auto,
// which is realtime as soon as a second thread or process uses the device).
std::string simClock() {
  const char* c = std::getenv("HCASIM_CLOCK");
  return c && *c ? c : "auto";
}

void printHeader(const Options& o, const Context& ctx, bool sim, const std::string& where,
                 const std::string& gloo) {
  std::printf(
      "# coll-bench: %s, %d ranks%s, %s, data type %s, reduction %s, algorithm %s%s, tuning %s, segment %zu "
      "B\n",
      o.opName.c_str(), ctx.size(), o.threads ? " (threads)" : "", where.c_str(), dataTypeName(o.type),
      reduceOpName(o.redop), o.algo.c_str(), o.algo == "auto" ? " (per size: column algo)" : "",
      tuningName(resolveTuning(o.coll.tuning, ctx)), o.coll.segmentBytes);
  const std::string model = sim ? simClock() : "";
  std::printf(
      "# clock: %s%s%s; %d warm-up + %d timed iterations per size; time = the slowest rank's mean, pNN = per "
      "iteration the slowest rank\n",
      sim ? "simulated time (hcasim_sim_now_ns, hcasim clock " : "wall clock", model.c_str(), sim ? ")" : "",
      o.warmup, o.iters);
  if (sim && model != "lockstep" && ctx.size() > 1)
    std::printf(
        "# note: in the realtime clock software time counts: these times include how fast the host runs\n"
        "#       the ranks and the model (the --stats clock line gives the slip; docs/verbs.md).\n");
  if (!gloo.empty()) {
    std::printf(
        "# compare: %s; same inputs, warm-up, iterations and clock; gloo(us) is the fastest one's mean,\n"
        "#          named in gloo_algo; speedup = Gloo time / hcasim-verbs time (above 1: hcasim-verbs "
        "faster)\n",
        gloo.c_str());
    if (sim && model == "lockstep" && o.mode == PollMode::Event)
      std::printf(
          "# note: Gloo's async mode waits outside verbs calls (poll(2), condition variables): in the\n"
          "#       lockstep clock time then moves while its software runs only after a quiet period, so\n"
          "#       its simulated times are optimistic for small sizes (docs/verbs.md).\n");
  }
  std::printf("#%12s %12s %7s %6s %11s %11s %11s %10s %10s %10s %10s %18s %6s", "size(B)", "count", "type",
              "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "p50(us)", "p90(us)", "p99(us)", "max(us)",
              "algo", "check");
  if (!gloo.empty())
    std::printf(" %11s %11s %10s %16s %7s %6s", "gloo(us)", "gloo_busbw", "gloo_p50", "gloo_algo", "speedup",
                "gcheck");
  std::printf("\n");
  std::fflush(stdout);
}

void printRow(const Options& o, int p, const Row& row) {
  const double avg = row.meanUs;
  const double algbw = avg > 0 ? double(row.bytes) / (avg * 1e3) : 0;  // bytes/us/1e3 = GB/s
  const double busbw = algbw * busFactor(o.op, p);
  std::printf(" %12zu %12zu %7s %6s %11.2f %11.3f %11.3f %10.2f %10.2f %10.2f %10.2f %18s %6s", row.bytes,
              row.count, dataTypeName(o.type),
              o.op == Op::Allreduce || o.op == Op::ReduceScatter ? reduceOpName(o.redop) : "-", avg, algbw,
              busbw, pct(row.us, 0.5), pct(row.us, 0.9), pct(row.us, 0.99), pct(row.us, 1.0),
              row.algo.c_str(),
              !row.checked ? "-"
              : row.ok     ? "ok"
                           : "FAIL");
  if (o.compareGloo) {
    const GlooRun* best = nullptr;
    for (const auto& g : row.gloo)
      if (!best || g.meanUs < best->meanUs) best = &g;
    if (best) {
      const double g = best->meanUs;
      const double gbus = g > 0 ? double(row.bytes) / (g * 1e3) * busFactor(o.op, p) : 0;
      char speedup[16] = "-";
      if (g > 0 && avg > 0) std::snprintf(speedup, sizeof speedup, "%.3f", g / avg);
      bool checked = false;
      for (const auto& r : row.gloo) checked = checked || r.checked;
      std::printf(" %11.2f %11.3f %10.2f %16s %7s %6s", g, gbus, pct(best->us, 0.5), best->name.c_str(),
                  speedup,
                  !checked       ? "-"
                  : row.glooOk() ? "ok"
                                 : "FAIL");
    } else {
      std::printf(" %11s %11s %10s %16s %7s %6s", "-", "-", "-", "-", "-", "-");
    }
  }
  std::printf("\n");
  if (row.gloo.size() > 1) {  // every candidate, for the record
    std::printf("#   gloo mean(us):");
    for (const auto& g : row.gloo) std::printf(" %s %.2f", g.name.c_str(), g.meanUs);
    std::printf("\n");
  }
  if (!row.ok) std::printf("#   check failed: %s\n", row.error.c_str());
  for (const auto& g : row.gloo)
    if (!g.ok) std::printf("#   check failed: %s\n", g.error.c_str());
  std::fflush(stdout);
}

std::vector<size_t> sizes(const Options& o) {
  std::vector<size_t> v;
  if (o.op == Op::Barrier) return {0};
  for (size_t s = o.minBytes;;) {
    v.push_back(s);
    size_t next =
        o.stepBytes ? s + o.stepBytes : size_t(std::max<double>(double(s) * o.factor, double(s + 1)));
    if (next > o.maxBytes || next <= s) break;
    s = next;
  }
  return v;
}

// One rank, start to finish. Returns false if any check failed.
bool runRank(const Options& o, int rank, int size, const std::shared_ptr<Store>& store, const CmBootstrap* cm,
             const std::string& devName) {
  DeviceAttr da;
  da.name = devName;
  da.port = uint8_t(o.port);
  da.gidIndex = o.gidIndex;
  da.mode = o.mode;
  auto dev = Device::open(da);
  ContextOptions co;
  co.pair.timeout = std::chrono::milliseconds(o.timeoutMs);
  co.pair.dataWr = o.dataWr;
  co.pair.ackWr = o.ackWr;
  co.prefix = "coll-bench";
  Context ctx(rank, size, dev, co);
  if (cm)
    ctx.connectFullMesh(*cm);
  else
    ctx.connectFullMesh(*store);
  const bool sim = useSimClock(o);
  if (sim && !simNow()) throw std::invalid_argument("--clock sim: not running on the simulator");
  GlooRank* gloo = nullptr;  // on an exception left alone (see GlooRank)
#if HCASIM_HAVE_GLOO
  if (o.compareGloo) gloo = glooConnect(ctx, o, store);
#endif
  if (rank == 0) {
    std::string where = dev->describe();
    if (o.threads)
      where = "devices " + dev->name() + ".. (one per rank)," + where.substr(where.find(" port"));
    std::string glooWhat;
#if HCASIM_HAVE_GLOO
    if (gloo) {
      glooWhat = gloo->describe;
      if (o.threads) glooWhat.replace(glooWhat.find(" on ") + 4, dev->name().size(), dev->name() + "..");
    }
#endif
    printHeader(o, ctx, sim, where, glooWhat);
  }
  bool ok = true;
  for (size_t bytes : sizes(o)) {
    Row row = runSize(ctx, o, bytes, sim, gloo);
    ok = ok && row.ok && row.glooOk();
    if (rank == 0) printRow(o, size, row);
  }
#if HCASIM_HAVE_GLOO
  glooRelease(gloo, o);  // before ctx: its destructor closes our connections
#endif
  return ok;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t c = s.find(',', start);
    v.push_back(s.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.threads > 0) {
      // N ranks in this process: device i for rank i (given list, else every device in order).
      std::vector<std::string> devs = o.device.empty() ? std::vector<std::string>{} : split(o.device);
      if (devs.empty())
        for (const auto& d : Device::list()) devs.push_back(d.name);
      if (devs.empty())
        throw IoError("no RDMA devices (on the simulator: hcasim run --hosts N -- coll-bench ...)");
      if (int(devs.size()) < o.threads && !o.device.empty())
        throw std::invalid_argument("--device lists fewer devices than --ranks-as-threads");
      const std::optional<CmBootstrap> cm =
          o.bootstrap == "cm" ? std::optional<CmBootstrap>(cmBootstrap(o, o.threads)) : std::nullopt;
      auto store = o.store.empty() ? std::make_shared<HashStore>() : makeStore(o.store, 0);
      std::vector<std::string> errors(static_cast<size_t>(o.threads));
      std::atomic<bool> ok{true};
      std::vector<std::thread> ts;
      for (int r = 0; r < o.threads; ++r)
        ts.emplace_back([&, r] {
          try {
            if (!runRank(o, r, o.threads, store, cm ? &*cm : nullptr, devs[size_t(r) % devs.size()]))
              ok = false;
          } catch (const std::exception& e) {
            errors[size_t(r)] = e.what();
            ok = false;
          }
        });
      for (auto& t : ts) t.join();
      for (int r = 0; r < o.threads; ++r)
        if (!errors[size_t(r)].empty())
          std::fprintf(stderr, "coll-bench: rank %d: %s\n", r, errors[size_t(r)].c_str());
      return ok ? 0 : 1;
    }
    const RankInfo ri = resolveRank(o.rank, o.size);
    const std::optional<CmBootstrap> cm =
        o.bootstrap == "cm" ? std::optional<CmBootstrap>(cmBootstrap(o, ri.size)) : std::nullopt;
    if (o.store.empty() && ri.size > 1 && !cm)
      throw std::invalid_argument("--store (or --bootstrap cm:...) is needed with more than one process");
    if (o.store.empty() && ri.size > 1 && o.compareGloo)
      throw std::invalid_argument(
          "--compare-gloo needs --store with more than one process (Gloo's rendezvous)");
    auto store = o.store.empty() ? std::make_shared<HashStore>()
                                 : makeStore(o.store, ri.rank, std::chrono::milliseconds(o.timeoutMs));
    return runRank(o, ri.rank, ri.size, store, cm ? &*cm : nullptr, o.device) ? 0 : 1;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "coll-bench: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coll-bench: %s\n", e.what());
    return 1;
  }
}
