// SPDX-License-Identifier: Apache-2.0
// gloo_algorithms: one of Debian's Gloo (libgloo-dev, unmodified) collectives used the way an
// application uses it, with its ibverbs transport on any ibverbs device (hcasim's drop-in
// libibverbs.so.1, Soft-RoCE (rxe) or hardware). Nothing here is simulator-specific.
//
// Every rank: connect a full mesh through a Gloo FileStore (nothing added after connecting:
// no store barrier, no extra messages), build the algorithm once, run() it once, check every
// element of the result and use it (print a checksum), then destroy the algorithm, the context
// and the device, and exit. Gloo's default (async) mode: a device loop thread handles the
// completions. No quiesce helper: whether the algorithm's last sends have completed when it is
// destroyed is left to Gloo, as in any application (docs/verbs.md, "Gloo at teardown").
//
//   gloo_algorithms --algo AllreduceRing --threads 4 --store /tmp/gs       # ranks as threads
//   gloo_algorithms --algo AllgatherRing --rank R --size 4 --store DIR [--device rxe0]
//
// --teardown checked (default): check the result, then destroy. --teardown immediate: destroy
// the algorithm right after run() returns, then check (the data lives in this program's own
// vectors). Destroying an algorithm whose last send has not yet been handled makes Gloo 0.5.0
// abort in ibverbs::Buffer's destructor (std::terminate, SIGABRT).
//
// One summary line per rank: "gloo_algorithms: PASS algo=... rank=R ..." (after the teardown),
// "gloo_algorithms: WRONG ..." or "gloo_algorithms: ERROR ...".
// Exit status: 0 pass; 1 a wrong result; 2 usage error; 3 a Gloo exception (IoException,
// EnforceNotMet, ...). An abort inside a Gloo destructor ends the process with SIGABRT.
#include <getopt.h>
#include <infiniband/verbs.h>
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
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gloo/algorithm.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>

#include "gloo_test_cli.h"

namespace {

using namespace gloo_test;  // the shared command-line helpers and exit statuses
constexpr const char* kProg = "gloo_algorithms";

const std::vector<std::string> kAlgos = {"AllreduceRing",  "AllreduceRingChunked", "AllreduceHalvingDoubling",
                                         "AllreduceBcube", "BroadcastOneToAll",    "AllgatherRing",
                                         "BarrierAllToAll"};

struct Options {
  std::string algo;
  int rank = -1, size = -1, threads = 0;
  std::string store;
  std::vector<std::string> devices;  // empty: threads -> hcasim<r>, process -> Gloo's default (first)
  int port = 1;
  int gidIndex = 0;  // Gloo's own default
  int count = 4099;
  bool immediate = false;
  int timeoutMs = 30000;
  int lingerUs = 0;  // a pause before the teardown (diagnosis: how late the last completions come)
};

[[noreturn]] void usage(int rc) {
  std::fprintf(rc == 0 ? stdout : stderr,
               "usage: gloo_algorithms --algo NAME (--rank R --size N | --threads N) --store DIR [options]\n"
               "  --algo NAME          AllreduceRing, AllreduceRingChunked, AllreduceHalvingDoubling,\n"
               "                       AllreduceBcube, BroadcastOneToAll (root 0), AllgatherRing,\n"
               "                       BarrierAllToAll\n"
               "  --rank R --size N    this process is rank R of N (one process per rank)\n"
               "  --threads N          run N ranks as threads of this process\n"
               "  --store DIR          Gloo FileStore directory (created if missing; with --rank it must\n"
               "                       be fresh per run and shared by every rank; with --threads a fresh\n"
               "                       subdirectory DIR/gloo_algorithms.<pid> is used and removed)\n"
               "  --device NAME[,...]  ibverbs device (threads: one per rank in list order, default\n"
               "                       hcasim<r>; processes: default Gloo's choice, the first device)\n"
               "  --port N             port (default 1)\n"
               "  --gid-index I        GID index (default 0, Gloo's default)\n"
               "  --count C            elements (float) per rank (default 4099)\n"
               "  --teardown MODE      checked (default): check the result, then destroy the algorithm;\n"
               "                       immediate: destroy the algorithm right after run(), then check\n"
               "  --timeout-ms MS      Gloo context timeout (default 30000)\n"
               "  --linger-us US       sleep US microseconds before destroying the algorithm (default 0;\n"
               "                       a diagnosis aid, no application does this)\n"
               "exit status: 0 pass, 1 wrong result, 2 usage error, 3 Gloo exception\n");
  std::exit(rc);
}

void validate(const Options& o) {
  if (o.algo.empty()) throw UsageError("--algo NAME is required");
  if (std::find(kAlgos.begin(), kAlgos.end(), o.algo) == kAlgos.end())
    throw UsageError("--algo: unknown algorithm '" + o.algo + "'");
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
}

Options parse(int argc, char** argv) {
  Options o;
  enum {
    kAlgo = 256,
    kRank,
    kSize,
    kThreads,
    kStore,
    kDevice,
    kPort,
    kGid,
    kCount,
    kTeardown,
    kTimeout,
    kLinger,
    kHelp
  };
  static const option longs[] = {{"algo", required_argument, nullptr, kAlgo},
                                 {"rank", required_argument, nullptr, kRank},
                                 {"size", required_argument, nullptr, kSize},
                                 {"threads", required_argument, nullptr, kThreads},
                                 {"store", required_argument, nullptr, kStore},
                                 {"device", required_argument, nullptr, kDevice},
                                 {"port", required_argument, nullptr, kPort},
                                 {"gid-index", required_argument, nullptr, kGid},
                                 {"count", required_argument, nullptr, kCount},
                                 {"teardown", required_argument, nullptr, kTeardown},
                                 {"timeout-ms", required_argument, nullptr, kTimeout},
                                 {"linger-us", required_argument, nullptr, kLinger},
                                 {"help", no_argument, nullptr, kHelp},
                                 {nullptr, 0, nullptr, 0}};
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", longs, nullptr)) != -1) {
    const std::string a = optarg ? optarg : "";
    switch (c) {
      case kAlgo: o.algo = a; break;
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
      case kCount: o.count = parseInt("--count", a, 1, (1 << 24)); break;
      case kTeardown:
        if (a != "checked" && a != "immediate")
          throw UsageError("--teardown: expected checked or immediate, got '" + a + "'");
        o.immediate = a == "immediate";
        break;
      case kTimeout: o.timeoutMs = parseInt("--timeout-ms", a, 1, 3600 * 1000); break;
      case kLinger: o.lingerUs = parseInt("--linger-us", a, 0, 60 * 1000 * 1000); break;
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
  validate(o);
  return o;
}

double nowMs() {
  return double(std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) /
         1e3;
}

std::mutex gPrintMu;

template <class... A>
void say(FILE* f, const char* fmt, A... a) {
  std::lock_guard<std::mutex> g(gPrintMu);
  std::fprintf(f, fmt, a...);
  std::fflush(f);
}

// ---- data and checks ---------------------------------------------------------------------

// Small integers: every sum of up to 2^13 ranks is exact in a float (|x| < 2^24).
float input(int rank, size_t i) {
  return float(int64_t((i * 7 + size_t(rank) * 131) % 1001) - 500 + rank % 7);
}
// What a receive buffer holds before the collective: never a valid result.
float sentinel(size_t i) { return -1.0e6f - float(i % 1000); }

// FNV-1a over the result's bytes: the "use" of the result, printed by every rank.
uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

struct Verdict {
  size_t checked = 0, wrong = 0;
  uint64_t checksum = 0;
  std::string first;  // the first wrong element, said in words
};

// Compares got[i] with want(i) bit for bit.
Verdict compare(const std::vector<float>& got, const std::function<float(size_t)>& want) {
  Verdict v;
  v.checked = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = want(i);
    if (std::memcmp(&got[i], &w, sizeof w) == 0) continue;
    if (v.wrong++ == 0) {
      char b[160];
      std::snprintf(b, sizeof b, "index %zu expected %.1f got %.9g", i, double(w), double(got[i]));
      v.first = b;
    }
  }
  v.checksum = fnv1a(got.data(), got.size() * sizeof(float));
  return v;
}

// One algorithm of one rank: its data, how to build it, how to check its result.
class Job {
 public:
  virtual ~Job() = default;
  // Fills the inputs and builds the algorithm (it takes its slots from the context).
  virtual std::unique_ptr<gloo::Algorithm> build(const std::shared_ptr<gloo::Context>& ctx) = 0;
  virtual void beforeRun() {}
  virtual Verdict check() = 0;
};

template <template <typename> class Allreduce>
class AllreduceJob : public Job {
 public:
  AllreduceJob(int rank, int size, int count) : rank_(rank), size_(size), buf_(size_t(count)) {}
  std::unique_ptr<gloo::Algorithm> build(const std::shared_ptr<gloo::Context>& ctx) override {
    for (size_t i = 0; i < buf_.size(); ++i) buf_[i] = input(rank_, i);
    return std::make_unique<Allreduce<float>>(ctx, std::vector<float*>{buf_.data()}, int(buf_.size()));
  }
  Verdict check() override {
    return compare(buf_, [&](size_t i) {
      float s = 0;
      for (int q = 0; q < size_; ++q) s += input(q, i);
      return s;
    });
  }

 private:
  int rank_, size_;
  std::vector<float> buf_;
};

class BroadcastJob : public Job {  // root 0
 public:
  BroadcastJob(int rank, int count) : rank_(rank), buf_(size_t(count)) {}
  std::unique_ptr<gloo::Algorithm> build(const std::shared_ptr<gloo::Context>& ctx) override {
    for (size_t i = 0; i < buf_.size(); ++i) buf_[i] = rank_ == 0 ? input(0, i) : sentinel(i);
    return std::make_unique<gloo::BroadcastOneToAll<float>>(ctx, std::vector<float*>{buf_.data()},
                                                            buf_.size(), 0, 0);
  }
  Verdict check() override {
    return compare(buf_, [](size_t i) { return input(0, i); });
  }

 private:
  int rank_;
  std::vector<float> buf_;
};

class AllgatherJob : public Job {
 public:
  AllgatherJob(int rank, int size, int count)
      : rank_(rank), count_(size_t(count)), in_(count_), out_(count_ * size_t(size)) {}
  std::unique_ptr<gloo::Algorithm> build(const std::shared_ptr<gloo::Context>& ctx) override {
    for (size_t i = 0; i < count_; ++i) in_[i] = input(rank_, i);
    for (size_t i = 0; i < out_.size(); ++i) out_[i] = sentinel(i);
    return std::make_unique<gloo::AllgatherRing<float>>(ctx, std::vector<const float*>{in_.data()},
                                                        out_.data(), int(count_));
  }
  Verdict check() override {
    return compare(out_, [&](size_t i) { return input(int(i / count_), i % count_); });
  }

 private:
  int rank_;
  size_t count_;
  std::vector<float> in_, out_;
};

// A barrier's result is an ordering: no rank leaves before every rank has arrived. Rank r
// arrives r*10 ms late and publishes its arrival time (CLOCK_MONOTONIC, one clock for every
// process of a machine) in the store before entering; after the barrier every rank reads all
// arrival times and checks they are not later than its own departure.
class BarrierJob : public Job {
 public:
  BarrierJob(int rank, int size, gloo::rendezvous::Store& store) : rank_(rank), size_(size), store_(store) {}
  std::unique_ptr<gloo::Algorithm> build(const std::shared_ptr<gloo::Context>& ctx) override {
    return std::make_unique<gloo::BarrierAllToAll>(ctx);
  }
  void beforeRun() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * rank_));
    const std::string t = std::to_string(nowMs());
    store_.set("arrived/" + std::to_string(rank_), std::vector<char>(t.begin(), t.end()));
    // The departure is taken when run() returns: check() is called right after (checked
    // teardown) or after the destruction; both are later than the departure, so both err
    // only on the safe side.
  }
  Verdict check() override {
    const double left = nowMs();
    std::vector<float> seen(size_t(size_), 0.0f);  // 1 per rank that arrived before we left
    for (int q = 0; q < size_; ++q) {
      const std::vector<char> v = store_.get("arrived/" + std::to_string(q));
      const double arrived = std::strtod(std::string(v.begin(), v.end()).c_str(), nullptr);
      seen[size_t(q)] = arrived <= left ? 1.0f : 0.0f;
    }
    return compare(seen, [](size_t) { return 1.0f; });
  }

 private:
  int rank_, size_;
  gloo::rendezvous::Store& store_;
};

std::unique_ptr<Job> makeJob(const Options& o, int rank, int size, gloo::rendezvous::Store& store) {
  const std::string& a = o.algo;
  if (a == "AllreduceRing") return std::make_unique<AllreduceJob<gloo::AllreduceRing>>(rank, size, o.count);
  if (a == "AllreduceRingChunked")
    return std::make_unique<AllreduceJob<gloo::AllreduceRingChunked>>(rank, size, o.count);
  if (a == "AllreduceHalvingDoubling")
    return std::make_unique<AllreduceJob<gloo::AllreduceHalvingDoubling>>(rank, size, o.count);
  if (a == "AllreduceBcube") return std::make_unique<AllreduceJob<gloo::AllreduceBcube>>(rank, size, o.count);
  if (a == "BroadcastOneToAll") return std::make_unique<BroadcastJob>(rank, o.count);
  if (a == "AllgatherRing") return std::make_unique<AllgatherJob>(rank, size, o.count);
  return std::make_unique<BarrierJob>(rank, size, store);
}

// ---- one rank ----------------------------------------------------------------------------

struct RankResult {
  int status = kExitOk;
  std::string error;
};

// Everything Gloo of one rank. If anything throws it is deliberately leaked: destroying
// Gloo's objects mid-operation aborts in a destructor (std::terminate), hiding the first error.
struct RankState {
  std::shared_ptr<gloo::transport::Device> dev;
  std::unique_ptr<gloo::rendezvous::FileStore> fileStore;
  std::unique_ptr<gloo::rendezvous::PrefixStore> store;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::unique_ptr<Job> job;
  std::unique_ptr<gloo::Algorithm> algo;
};

// Rank `rank` of `size`, start to finish: connect, build, run, check, tear down.
RankResult runRank(const Options& o, int rank, int size, const std::string& storeDir,
                   const std::string& devName) {
  auto* st = new RankState;  // leaked if anything throws (see RankState)
  gloo::transport::ibverbs::attr attr;
  attr.name = devName;
  attr.port = o.port;
  attr.index = o.gidIndex;
  st->dev = gloo::transport::ibverbs::CreateDevice(attr);
  st->fileStore = std::make_unique<gloo::rendezvous::FileStore>(storeDir);
  st->store = std::make_unique<gloo::rendezvous::PrefixStore>(kProg, *st->fileStore);
  st->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  st->ctx->setTimeout(std::chrono::milliseconds(o.timeoutMs));
  st->ctx->connectFullMesh(*st->store, st->dev);

  st->job = makeJob(o, rank, size, *st->store);
  st->algo = st->job->build(st->ctx);
  st->job->beforeRun();
  const double t0 = nowMs();
  st->algo->run();
  const double runMs = nowMs() - t0;
  if (o.lingerUs) std::this_thread::sleep_for(std::chrono::microseconds(o.lingerUs));
  if (o.immediate) st->algo.reset();  // Gloo's own race: the last sends may not be handled yet
  const Verdict v = st->job->check();
  // The teardown, as an application's scope exit would do it: the algorithm, the context (its
  // pairs: QPs, CQs), the device (its loop thread).
  st->algo.reset();
  st->ctx.reset();
  st->dev.reset();
  delete st;

  const char* td = o.immediate ? "immediate" : "checked";
  RankResult res;
  if (v.wrong) {
    res.status = kExitWrong;
    res.error =
        std::to_string(v.wrong) + " of " + std::to_string(v.checked) + " elements wrong, first " + v.first;
    say(stdout, "%s: WRONG algo=%s rank=%d size=%d count=%d teardown=%s: %s\n", kProg, o.algo.c_str(), rank,
        size, o.count, td, res.error.c_str());
  } else {
    say(stdout,
        "%s: PASS algo=%s rank=%d size=%d count=%d teardown=%s checked=%zu checksum=%016" PRIx64
        " run_ms=%.2f\n",
        kProg, o.algo.c_str(), rank, size, o.count, td, v.checked, v.checksum, runMs);
  }
  return res;
}

std::string storeCleanup;  // the threads mode's private store directory

// Catches Gloo's exceptions and says which kind they are.
// On one the process ends at once with kExitError.
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
  std::printf("%s: ERROR algo=%s rank=%d size=%d: %s\n", kProg, o.algo.c_str(), rank, size, r.error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // Gloo's objects of this rank are leaked, its device loop thread still runs, and as threads
  // the other ranks would only wait for this one until Gloo's timeout: stop here, still holding
  // the lock (one thread cleans up and exits).
  std::error_code ec;
  if (!storeCleanup.empty()) std::filesystem::remove_all(storeCleanup, ec);
  std::_Exit(kExitError);
}

// The device of each rank this process runs; an empty name is Gloo's default (the first).
// Returns false (after saying why) if a named device does not exist.
bool pickDevices(const Options& o, std::vector<std::string>& devs) {
  const std::vector<std::string> have = deviceNames();
  if (have.empty()) {
    std::fprintf(stderr, "%s: no ibverbs devices\n", kProg);
    return false;
  }
  const int n = o.threads > 0 ? o.threads : 1;
  devs.assign(size_t(n), "");
  for (size_t r = 0; r < size_t(n); ++r) {
    if (!o.devices.empty())
      devs[r] = o.devices[o.devices.size() == 1 ? 0 : r];
    else if (o.threads > 0)
      devs[r] = "hcasim" + std::to_string(r);
    if (!devs[r].empty() && std::find(have.begin(), have.end(), devs[r]) == have.end()) {
      std::fprintf(
          stderr, "%s: no ibverbs device '%s' (available: %s)%s\n", kProg, devs[r].c_str(),
          join(have).c_str(),
          o.threads > 0 && o.devices.empty() ? "; on the simulator set HCASIM_HOSTS to the rank count" : "");
      return false;
    }
  }
  return true;
}

int runThreads(const Options& o, const std::string& dir, const std::vector<std::string>& devs) {
  storeCleanup = dir;
  std::vector<RankResult> results(size_t(o.threads));
  std::vector<std::thread> ts;
  for (int r = 0; r < o.threads; ++r)
    ts.emplace_back([&, r] { results[size_t(r)] = guarded(o, r, o.threads, dir, devs[size_t(r)]); });
  for (auto& t : ts) t.join();
  int status = kExitOk;
  for (const RankResult& res : results) status = std::max(status, res.status);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s (see --help)\n", kProg, e.what());
    return kExitUsage;
  }
  std::vector<std::string> devs;
  if (!pickDevices(o, devs)) return kExitUsage;

  // The store directory: Gloo's FileStore needs it to exist.
  std::error_code ec;
  std::string dir = o.store;
  if (o.threads > 0) dir += "/gloo_algorithms." + std::to_string(getpid());
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "%s: cannot create store directory %s: %s\n", kProg, dir.c_str(),
                 ec.message().c_str());
    return kExitUsage;
  }
  if (o.threads > 0) return runThreads(o, dir, devs);
  return guarded(o, o.rank, o.size, dir, devs[0]).status;
}
