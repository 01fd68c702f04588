// SPDX-License-Identifier: Apache-2.0
// gloo_allreduce: Debian's Gloo (libgloo-dev) with its ibverbs transport, unmodified, on any
// ibverbs device: hcasim's drop-in libibverbs.so.1, Soft-RoCE (rxe) or RoCE/InfiniBand hardware.
//
// Every rank connects a full mesh through a Gloo FileStore (gloo::rendezvous::Context::
// connectFullMesh), then runs gloo::AllreduceRing<float> over several sizes, each a few times,
// with per-rank inputs chosen so every sum is exact (small integers), and checks every element.
//
//   gloo_allreduce --threads 4 --store /tmp/gstore                  # ranks as threads, hcasim0..3
//   gloo_allreduce --rank R --size N --store /shared/dir [--device rxe0]   # one process per rank
//
// Nothing here is simulator-specific: the same binary runs on rxe or hardware. Only the
// optional simulated-time column looks up hcasim_sim_now_ns with dlsym (absent elsewhere).
//
// Exit status: 0 every check passed; 1 a result was wrong (rank, index, expected and got are
// printed); 2 usage error; 3 a runtime error (a Gloo exception: IoException, EnforceNotMet, ...).
#include <dlfcn.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>

#include "gloo_quiesce.h"
#include "gloo_test_cli.h"

namespace {

using namespace gloo_test;  // the shared command-line helpers and exit statuses

struct Options {
  int rank = -1, size = -1, threads = 0;
  std::string store;
  std::vector<std::string> devices;  // empty: threads -> hcasim<r>, process -> Gloo's default (first)
  int port = 1;
  int gidIndex = 0;  // Gloo's own default: index 0 (on RoCE the link-local fe80:: GID)
  int iters = 3;
  int timeoutMs = 30000;
  bool busyPoll = false;
  bool noReadyBarrier = false;
  std::vector<size_t> counts = {1, 3, 1000, 4099, 65536, 262144};
};

[[noreturn]] void usage(int rc) {
  std::fprintf(rc == 0 ? stdout : stderr,
               "usage: gloo_allreduce (--rank R --size N | --threads N) --store DIR [options]\n"
               "  --rank R --size N    this process is rank R of N (one process per rank)\n"
               "  --threads N          run N ranks as threads of this process\n"
               "  --store DIR          Gloo FileStore directory (created if missing; with --rank it must\n"
               "                       be fresh per run and shared by every rank; with --threads a fresh\n"
               "                       subdirectory DIR/gloo_allreduce.<pid> is used and removed)\n"
               "  --device NAME[,...]  ibverbs device (threads: one per rank in list order, default\n"
               "                       hcasim<r>; processes: default Gloo's choice, the first device)\n"
               "  --port N             port (default 1)\n"
               "  --gid-index I        GID index (default 0, Gloo's default: on RoCE the link-local GID)\n"
               "  --iters K            runs per size, each with fresh inputs, each checked (default 3)\n"
               "  --counts C[,C...]    element counts (default 1,3,1000,4099,65536,262144)\n"
               "  --busy-poll          Gloo sync mode with busy polling (Pair::setSync(true, true))\n"
               "  --timeout-ms MS      Gloo context timeout (default 30000)\n"
               "  --no-ready-barrier   skip the store barrier after connecting (Gloo alone has none: its\n"
               "                       first sends may reach a peer QP still in INIT and rely on retries)\n"
               "exit status: 0 ok, 1 wrong result, 2 usage error, 3 runtime (Gloo) error\n");
  std::exit(rc);
}

Options parse(int argc, char** argv) {
  Options o;
  enum {
    kRank = 256,
    kSize,
    kThreads,
    kStore,
    kDevice,
    kPort,
    kGid,
    kIters,
    kCounts,
    kBusy,
    kTimeout,
    kNoReady,
    kHelp
  };
  static const option longs[] = {{"rank", required_argument, nullptr, kRank},
                                 {"size", required_argument, nullptr, kSize},
                                 {"threads", required_argument, nullptr, kThreads},
                                 {"store", required_argument, nullptr, kStore},
                                 {"device", required_argument, nullptr, kDevice},
                                 {"port", required_argument, nullptr, kPort},
                                 {"gid-index", required_argument, nullptr, kGid},
                                 {"iters", required_argument, nullptr, kIters},
                                 {"counts", required_argument, nullptr, kCounts},
                                 {"busy-poll", no_argument, nullptr, kBusy},
                                 {"timeout-ms", required_argument, nullptr, kTimeout},
                                 {"no-ready-barrier", no_argument, nullptr, kNoReady},
                                 {"help", no_argument, nullptr, kHelp},
                                 {nullptr, 0, nullptr, 0}};
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", longs, nullptr)) != -1) {
    const std::string a = optarg ? optarg : "";
    switch (c) {
      case kRank: o.rank = parseInt("--rank", a, 0, 1 << 20); break;
      case kSize: o.size = parseInt("--size", a, 1, 1 << 20); break;
      case kThreads: o.threads = parseInt("--threads", a, 1, 256); break;
      case kStore: o.store = a; break;
      case kDevice:
        o.devices = split(a);
        for (auto& d : o.devices)
          if (d.empty()) throw UsageError("--device: empty device name in '" + a + "'");
        break;
      case kPort: o.port = parseInt("--port", a, 1, 255); break;
      case kGid: o.gidIndex = parseInt("--gid-index", a, 0, 65535); break;
      case kIters: o.iters = parseInt("--iters", a, 1, 1000000); break;
      case kCounts:
        o.counts.clear();
        // Gloo keeps the byte count in an int.
        for (auto& s : split(a)) o.counts.push_back(size_t(parseInt("--counts", s, 1, (1 << 29) - 1)));
        break;
      case kBusy: o.busyPoll = true; break;
      case kNoReady: o.noReadyBarrier = true; break;
      case kTimeout: o.timeoutMs = parseInt("--timeout-ms", a, 1, 3600 * 1000); break;
      case 'h':
      case kHelp: usage(0);
      case '?':
      default:
        throw UsageError(optopt > 0 && optopt < 256
                             ? std::string("unknown option or missing value: -") + char(optopt)
                             : std::string("unknown option or missing value: ") + argv[optind - 1]);
    }
  }
  if (optind < argc) throw UsageError(std::string("unexpected argument '") + argv[optind] + "'");
  if (o.store.empty()) throw UsageError("--store DIR is required");
  if (o.threads > 0) {
    if (o.rank >= 0 || o.size >= 0) throw UsageError("--threads excludes --rank/--size");
    if (!o.devices.empty() && o.devices.size() != 1 && int(o.devices.size()) < o.threads)
      throw UsageError("--device lists " + std::to_string(o.devices.size()) + " devices for " +
                       std::to_string(o.threads) + " threads (give one, or one per rank)");
  } else {
    if (o.rank < 0 || o.size < 0) throw UsageError("give --rank R --size N, or --threads N");
    if (o.rank >= o.size) throw UsageError("--rank must be below --size");
    if (o.devices.size() > 1) throw UsageError("--device: one device per process");
  }
  return o;
}

// ---- clocks ------------------------------------------------------------------------------

double wallUs() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) /
         1e3;
}
// hcasim's simulated clock when the ibverbs library is the simulator's; absent elsewhere.
using SimNowFn = uint64_t (*)();
SimNowFn simNow() {
  static SimNowFn f = reinterpret_cast<SimNowFn>(dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns"));
  return f;
}

// ---- data --------------------------------------------------------------------------------

// Small integers: every partial sum of up to 2^13 ranks is exact in a float (|x| < 2^24).
float input(int rank, size_t i, int iter) {
  return float(int64_t((i * 7 + size_t(rank) * 131 + size_t(iter) * 17) % 1001) - 500 + rank % 7);
}

// ---- one rank ----------------------------------------------------------------------------

std::mutex gPrintMu;

template <class... A>
void say(const char* fmt, A... a) {
  std::lock_guard<std::mutex> g(gPrintMu);
  std::printf(fmt, a...);
  std::fflush(stdout);
}

struct RankResult {
  int status = kExitOk;
  std::string error;
};

// Flushes an algorithm's last sends before it is destroyed (Gloo 0.5.0; see gloo_quiesce.h).
using Quiesce = hcasim::gloo_compat::Quiesce;

// Everything Gloo of one rank. On an exception it is deliberately leaked: Gloo's destructors
// throw (std::terminate) when a send is still pending, which would hide the first error.
struct RankState {
  std::shared_ptr<gloo::transport::Device> dev;
  std::unique_ptr<gloo::rendezvous::FileStore> fileStore;
  std::unique_ptr<gloo::rendezvous::PrefixStore> store;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  int wrongAll = 0;
  std::unique_ptr<gloo::AllreduceRing<int>> verdict;
  std::unique_ptr<gloo::BarrierAllToAll> barrier;
  std::unique_ptr<Quiesce> quiesce;
  std::vector<float> buf;
  std::unique_ptr<gloo::AllreduceRing<float>> ar;

  ~RankState() {  // algorithms before the context, the context before the device
    ar.reset();
    quiesce.reset();
    barrier.reset();
    verdict.reset();
    ctx.reset();
    dev.reset();
  }
};

// Rank `rank` of `size`, start to finish. Rank 0 prints the summary lines.
RankResult runRank(const Options& o, int rank, int size, const std::string& storeDir,
                   const std::string& devName) {
  RankResult res;
  RankState* st = new RankState;  // leaked if anything throws (see RankState)
  gloo::transport::ibverbs::attr attr;
  attr.name = devName;
  attr.port = o.port;
  attr.index = o.gidIndex;
  st->dev = gloo::transport::ibverbs::CreateDevice(attr);

  st->fileStore = std::make_unique<gloo::rendezvous::FileStore>(storeDir);
  st->store = std::make_unique<gloo::rendezvous::PrefixStore>("gloo_allreduce", *st->fileStore);
  st->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  auto& ctx = st->ctx;
  ctx->setTimeout(std::chrono::milliseconds(o.timeoutMs));
  const double tc0 = wallUs();
  ctx->connectFullMesh(*st->store, st->dev);
  if (!o.noReadyBarrier) {
    // Gloo posts its first sends (memory regions of receive buffers) as soon as this rank is
    // connected, while a slower peer's QP may still be in INIT, where packets are dropped; Gloo
    // then relies on RC retransmission (7 retries). On a simulator whose clock is driven by
    // whichever rank waits in verbs, those retries can run out in a few wall milliseconds.
    // Everything through the store: every rank says it is connected and waits for all.
    st->store->set("ready/" + std::to_string(rank), std::vector<char>{'1'});
    std::vector<std::string> keys;
    for (int i = 0; i < size; ++i) keys.push_back("ready/" + std::to_string(i));
    st->store->wait(keys, std::chrono::milliseconds(o.timeoutMs));
  }
  if (o.busyPoll)
    for (int i = 0; i < size; ++i)
      if (i != rank) ctx->getPair(i)->setSync(true, true);
  if (rank == 0)
    say("# gloo_allreduce: %d ranks%s, %s, gid index %d, %s; full mesh connected in %.1f ms\n", size,
        o.threads ? " (threads)" : "", st->dev->str().c_str(), o.gidIndex,
        o.busyPoll ? "sync mode (busy poll)" : "async mode (device loop thread)", (wallUs() - tc0) / 1e3);

  // One counter of wrong elements per size, summed over ranks with Gloo itself.
  st->verdict = std::make_unique<gloo::AllreduceRing<int>>(ctx, std::vector<int*>{&st->wrongAll}, 1);
  st->barrier = std::make_unique<gloo::BarrierAllToAll>(ctx);
  st->quiesce = std::make_unique<Quiesce>(ctx);

  for (size_t count : o.counts) {
    auto& buf = st->buf;
    buf.assign(count, 0.0f);
    st->ar = std::make_unique<gloo::AllreduceRing<float>>(ctx, std::vector<float*>{buf.data()}, int(count));
    double wallSum = 0, simSum = 0;
    int wrong = 0;
    for (int it = 0; it < o.iters; ++it) {
      for (size_t i = 0; i < count; ++i) buf[i] = input(rank, i, it);
      st->barrier->run();
      const double w0 = wallUs();
      const uint64_t s0 = simNow() ? simNow()() : 0;
      st->ar->run();
      wallSum += wallUs() - w0;
      if (simNow()) simSum += double(simNow()() - s0) / 1e3;
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int q = 0; q < size; ++q) want += input(q, i, it);
        if (std::memcmp(&buf[i], &want, sizeof want) != 0) {
          if (wrong < 5)
            say("gloo_allreduce: WRONG rank %d count %zu iter %d index %zu: expected %.1f got %.9g\n", rank,
                count, it, i, double(want), double(buf[i]));
          ++wrong;
        }
      }
    }
    st->wrongAll = wrong;
    st->verdict->run();
    st->quiesce->run();  // flushes pending sends before the algorithm goes
    st->ar.reset();
    if (wrong) {
      res.status = kExitWrong;
      if (res.error.empty())
        res.error = std::to_string(wrong) + " wrong elements at count " + std::to_string(count);
    }
    if (rank == 0) {
      const double bytes = double(count * sizeof(float));
      const double wall = wallSum / o.iters, sim = simSum / o.iters;
      char simCol[64] = "";
      if (simNow()) std::snprintf(simCol, sizeof simCol, "  sim %10.2f us/op", sim);
      say("count %9zu (%10.0f B): %d iters  wall %10.2f us/op%s  %s\n", count, bytes, o.iters, wall, simCol,
          st->wrongAll ? ("FAIL (" + std::to_string(st->wrongAll) + " wrong elements over all ranks)").c_str()
                       : "ok (every rank, every element)");
    }
    if (st->wrongAll && res.status == kExitOk)
      res.status = kExitWrong, res.error = "another rank saw wrong data";
  }
  // Every rank's last sends acknowledged before any rank destroys its QPs: a rank's quiesce
  // returns once its own sends are acknowledged and its peers' messages arrived, but a peer's ACK
  // for that rank's message may be lost on a lossy wire (--faults); the peer then resends, and a
  // rank that had already destroyed its QP would never answer (IBV_WC_RETRY_EXC_ERR on the
  // peer). The same holds on hardware. A store barrier closes it.
  st->store->set("teardown/" + std::to_string(rank), std::vector<char>{1});
  std::vector<std::string> all;
  for (int r = 0; r < size; ++r) all.push_back("teardown/" + std::to_string(r));
  st->store->wait(all);
  if (o.busyPoll) {
    delete st;
  } else {
    // Debian's Gloo (0.5.0, 2022) destroys a Pair without taking the pair mutex its device loop
    // thread holds while it handles completions: tearing the context down can race with the
    // loop thread finishing the last completion (a use-after-free in Pair::postReceive, seen on
    // the simulator). Later Gloo locks there. In async mode keep it all until the process exits.
    static std::mutex mu;
    static auto* keep = new std::vector<RankState*>;  // never destroyed: reachable at exit, no leak report
    std::lock_guard<std::mutex> lock(mu);
    keep->push_back(st);
  }
  return res;
}

std::string storeCleanup;  // the threads mode's private store directory

// Catches Gloo's exceptions and says which kind they are.
RankResult guarded(const Options& o, int rank, int size, const std::string& storeDir,
                   const std::string& dev) {
  RankResult r;
  try {
    return runRank(o, rank, size, storeDir, dev);
  } catch (...) {
    r.error = gloo_test::currentError();
  }
  r.status = kExitError;
  std::lock_guard<std::mutex> g(gPrintMu);
  std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", rank, r.error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // Ranks as threads: the other ranks would only wait for this one until Gloo's timeout, and
  // Gloo's objects cannot be torn down safely mid-operation. Stop here (still holding the lock:
  // one thread cleans up and exits).
  if (o.threads > 0) {
    std::error_code ec;
    if (!storeCleanup.empty()) std::filesystem::remove_all(storeCleanup, ec);
    std::_Exit(kExitError);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gloo_allreduce: %s (see --help)\n", e.what());
    return kExitUsage;
  }

  // Devices: say clearly when a name does not exist (Gloo's message is terse).
  const std::vector<std::string> have = deviceNames();
  const int n = o.threads > 0 ? o.threads : 1;
  std::vector<std::string> devs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (!o.devices.empty())
      devs[size_t(r)] = o.devices[o.devices.size() == 1 ? 0 : size_t(r)];
    else if (o.threads > 0)
      devs[size_t(r)] = "hcasim" + std::to_string(r);
    else
      devs[size_t(r)] = "";  // Gloo picks the first device
    if (!devs[size_t(r)].empty() && std::find(have.begin(), have.end(), devs[size_t(r)]) == have.end()) {
      std::fprintf(
          stderr, "gloo_allreduce: no ibverbs device '%s' (available: %s)%s\n", devs[size_t(r)].c_str(),
          join(have).c_str(),
          o.threads > 0 && o.devices.empty() ? "; on the simulator set HCASIM_HOSTS to the rank count" : "");
      return kExitUsage;
    }
  }
  if (have.empty()) {
    std::fprintf(stderr, "gloo_allreduce: no ibverbs devices\n");
    return kExitError;
  }

  // The store directory: Gloo's FileStore needs it to exist.
  std::error_code ec;
  std::string dir = o.store;
  if (o.threads > 0) dir += "/gloo_allreduce." + std::to_string(getpid());
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "gloo_allreduce: cannot create store directory %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return kExitUsage;
  }

  int status = kExitOk;
  if (o.threads > 0) {
    storeCleanup = dir;
    std::vector<RankResult> results(size_t(o.threads));
    std::vector<std::thread> ts;
    for (int r = 0; r < o.threads; ++r)
      ts.emplace_back([&, r] { results[size_t(r)] = guarded(o, r, o.threads, dir, devs[size_t(r)]); });
    for (auto& t : ts) t.join();
    for (int r = 0; r < o.threads; ++r) {
      const RankResult& res = results[size_t(r)];
      if (res.status == kExitWrong)
        std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", r, res.error.c_str());
      status = std::max(status, res.status);
    }
    std::filesystem::remove_all(dir, ec);
  } else {
    const RankResult res = guarded(o, o.rank, o.size, dir, devs[0]);
    if (res.status == kExitWrong)
      std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", o.rank, res.error.c_str());
    status = res.status;
  }
  if (status == kExitOk) std::printf("gloo_allreduce: PASS\n");
  return status;
}
