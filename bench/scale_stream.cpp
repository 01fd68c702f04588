// SPDX-License-Identifier: Apache-2.0
// scale_stream: all-to-all RDMA WRITE traffic over many RC QPs spread across every simulated HCA
// of the run, one thread per process, tracing off. Prints the wall cost per WRITE, the simulated
// time, and the memory each host and each QP costs, so that bench/scale.sh can put the figures
// for 2 ... 64 hosts side by side. Figures, not pass/fail. Two ways to run it:
//
//   in-process: one process opens every host's device
//     hcasim run --hosts H -- scale_stream [--qps Q] [--ops N] [--size BYTES] [--window W]
//   fabric: P processes, each opening only the K HCAs it sees; "host" g is HCA k of rank r,
//   g = r*K + k. The ranks exchange QP numbers, GIDs, rkeys and buffer addresses through files
//   in DIR (an empty directory per run) and meet at barriers there:
//     hcasim run --hosts P --hcas-per-host K -- scale_stream --rank 0 --ranks P --store DIR ...
//         ::: scale_stream --rank 1 --ranks P --store DIR ... ::: ...
//   [--timeout S]: how long a rank waits for another at a barrier (default 300 s).
//
// Q QPs in all (Q/2 connections), dealt round robin over every pair of hosts (i < j), so with
// Q >= H(H-1) every host talks to every other. Each QP writes N WRITEs of BYTES to its peer's
// buffer, W in flight, every W/2-th signaled. On a fabric the wall time runs from the moment
// the last rank is connected to the end of the slowest rank, and the memory figures add the
// fabric's device process (which holds the model) to the programs'; rank 0 prints them. Only the
// public verbs API (and dlsym for the simulator's clock), like any program a user runs.
#include <dirent.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "write_pair.h"

namespace {

using bench::die;

struct Options {
  uint32_t qps = 1024, size = 64, window = 8;
  uint64_t ops = 200;
  int32_t rank = -1;  ///< -1: in-process, one process opens every device
  uint32_t ranks = 0, timeout_s = 300;
  std::string store;
};

struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  ibv_gid gid{};
};

/** @brief What a QP needs of the host at its other end (published through the store on a fabric). */
struct Peer {
  ibv_gid gid{};
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

struct Qp {
  uint32_t host = 0;       ///< this process's host (index into its hosts)
  uint32_t slot = 0;       ///< 2c + side: connection c's QP on host i (side 0) or on host j (1)
  uint32_t peer_host = 0;  ///< the global number of the host at the other end
  ibv_qp* qp = nullptr;
  uint64_t remote_buf = 0;
  uint32_t rkey = 0;
  uint64_t posted = 0, done = 0;
};

/** @brief The connections dealt round robin over every pair of hosts i < j. */
struct Deal {
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<uint32_t> qps_on;  ///< QPs per host (its CQ holds window CQEs for each)
  uint32_t conns = 0;
  std::pair<uint32_t, uint32_t> of(uint32_t c) const { return pairs[c % pairs.size()]; }
};

constexpr size_t kHostBuffer = 1 << 20;

Deal make_deal(uint32_t hosts, uint32_t qps) {
  Deal d;
  for (uint32_t i = 0; i < hosts; ++i)
    for (uint32_t j = i + 1; j < hosts; ++j) d.pairs.emplace_back(i, j);
  d.conns = qps / 2;
  d.qps_on.assign(hosts, 0);
  for (uint32_t c = 0; c < d.conns; ++c) {
    ++d.qps_on[d.of(c).first];
    ++d.qps_on[d.of(c).second];
  }
  return d;
}

bool bad_option(const std::string& a, const char* v, const char* why) {
  std::fprintf(stderr, "scale_stream: bad option '%s%s%s': %s\n", a.c_str(), v ? " " : "", v ? v : "", why);
  return false;
}

/** @brief The multi-process options hang together, and the store is a directory we can write. */
bool check_ranked(const Options& o) {
  const bool any = o.rank >= 0 || o.ranks || !o.store.empty();
  if (!any) return true;
  const char* missing = o.rank < 0 ? "--rank" : !o.ranks ? "--ranks" : o.store.empty() ? "--store" : nullptr;
  if (missing) {
    std::fprintf(stderr, "scale_stream: %s missing: --rank, --ranks and --store go together\n", missing);
    return false;
  }
  if (uint32_t(o.rank) >= o.ranks) {
    std::fprintf(stderr, "scale_stream: --rank %d: must be below --ranks %u\n", o.rank, o.ranks);
    return false;
  }
  struct stat st {};
  if (stat(o.store.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(o.store.c_str(), W_OK | X_OK) != 0) {
    std::fprintf(stderr, "scale_stream: --store %s: not a directory this process can write\n",
                 o.store.c_str());
    return false;
  }
  return true;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    char* end = nullptr;
    const unsigned long long n = v ? std::strtoull(v, &end, 10) : 0;
    const bool num = v && *v && end && *end == 0;
    if (a == "--store") {
      if (!v || !*v) return bad_option(a, v, "a directory, empty at the start of each run");
      o.store = v;
    } else if (a == "--qps") {
      if (!num || n < 2 || n > 65536 || n % 2) return bad_option(a, v, "an even number from 2 to 65536");
      o.qps = uint32_t(n);
    } else if (a == "--ops") {
      if (!num || n < 1 || n > 100'000'000) return bad_option(a, v, "a number from 1 to 100000000");
      o.ops = n;
    } else if (a == "--size") {
      if (!num || n < 1 || n > 65536) return bad_option(a, v, "a number from 1 to 65536");
      o.size = uint32_t(n);
    } else if (a == "--window") {
      if (!num || n < 2 || n > 128) return bad_option(a, v, "a number from 2 to 128");
      o.window = uint32_t(n);
    } else if (a == "--rank") {
      if (!num || n > 63) return bad_option(a, v, "a number from 0 to 63");
      o.rank = int32_t(n);
    } else if (a == "--ranks") {
      if (!num || n < 1 || n > 64) return bad_option(a, v, "a number from 1 to 64");
      o.ranks = uint32_t(n);
    } else if (a == "--timeout") {
      if (!num || n < 1 || n > 86400) return bad_option(a, v, "seconds, from 1 to 86400");
      o.timeout_s = uint32_t(n);
    } else {
      return bad_option(a, v,
                        "options are --qps, --ops, --size, --window, and on a fabric --rank, --ranks, "
                        "--store, --timeout, each with a value");
    }
  }
  return check_ranked(o);
}

void open_host(Host& h, ibv_device* dev, int cqe) {
  h.ctx = ibv_open_device(dev);
  if (!h.ctx) die("ibv_open_device");
  h.pd = ibv_alloc_pd(h.ctx);
  h.cq = ibv_create_cq(h.ctx, cqe, nullptr, nullptr, 0);
  h.buf.assign(kHostBuffer, 0x5a);
  h.mr = ibv_reg_mr(h.pd, h.buf.data(), h.buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!h.pd || !h.cq || !h.mr) die("host resources");
  if (ibv_query_gid(h.ctx, 1, 1, &h.gid)) die("ibv_query_gid");
}

/** @brief Open @p list's devices as hosts first, first + 1, ... of the deal. */
std::vector<Host> open_hosts(ibv_device** list, uint32_t n, uint32_t first, const Deal& d, const Options& o) {
  std::vector<Host> hosts(n);
  for (uint32_t k = 0; k < n; ++k)
    open_host(hosts[k], list[k], int(std::max(1u, d.qps_on[first + k] * o.window)));
  return hosts;
}

ibv_qp* create_qp(Host& h, uint32_t window) {
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = h.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = window;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(h.pd, &ia);
  if (!qp) die("ibv_create_qp");
  return qp;
}

/** @brief Create the deal's QPs that live on hosts first ... first + hosts.size() - 1. */
std::vector<Qp> create_qps(std::vector<Host>& hosts, uint32_t first, const Deal& d, const Options& o) {
  std::vector<Qp> qps;
  for (uint32_t c = 0; c < d.conns; ++c) {
    const auto [i, j] = d.of(c);
    for (uint32_t side = 0; side < 2; ++side) {
      const uint32_t g = side ? j : i;
      if (g < first || g >= first + hosts.size()) continue;
      Qp q;
      q.host = g - first;
      q.slot = 2 * c + side;
      q.peer_host = side ? i : j;
      q.qp = create_qp(hosts[q.host], o.window);
      qps.push_back(q);
    }
  }
  return qps;
}

/** @brief Take every QP to RTS towards its peer (@p qpns by slot) and aim it at the peer's buffer. */
void connect_all(std::vector<Qp>& qps, const std::vector<Peer>& peers, const std::vector<uint32_t>& qpns) {
  for (Qp& q : qps) {
    const Peer& p = peers[q.peer_host];
    bench::connect_qp(q.qp, p.gid, qpns[q.slot ^ 1]);
    q.remote_buf = p.addr;
    q.rkey = p.rkey;
  }
}

/** @brief Top @p q's window up with WRITEs to its peer's buffer. */
void post_more(Qp& q, Host& h, const Options& o) {
  ibv_sge sge[16];
  ibv_send_wr wr[16];
  const uint32_t signal_every = o.window / 2;
  while (q.posted < o.ops && q.posted - q.done + 1 <= o.window) {
    const uint32_t n = uint32_t(std::min<uint64_t>({16, o.ops - q.posted, o.window - (q.posted - q.done)}));
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t k = q.posted + i;
      const uint64_t off = (k * o.size) % (kHostBuffer - o.size);
      sge[i] = {uint64_t(uintptr_t(h.buf.data() + off)), o.size, h.mr->lkey};
      wr[i] = {};
      wr[i].wr_id = k + 1;  // how many this completion retires, with the ones before it
      wr[i].sg_list = &sge[i];
      wr[i].num_sge = 1;
      wr[i].opcode = IBV_WR_RDMA_WRITE;
      wr[i].send_flags = ((k + 1) % signal_every == 0 || k + 1 == o.ops) ? IBV_SEND_SIGNALED : 0;
      wr[i].wr.rdma.remote_addr = q.remote_buf + off;
      wr[i].wr.rdma.rkey = q.rkey;
      wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(q.qp, wr, &bad)) die("ibv_post_send");
    q.posted += n;
  }
}

/** @brief Keep every QP's window full until all its WRITEs completed; false on a completion error. */
bool stream(std::vector<Host>& hosts, std::vector<Qp>& qps, const Options& o) {
  std::unordered_map<uint64_t, Qp*> by_qpn;  // (host, QPN): QPNs repeat across HCAs
  for (Qp& q : qps) by_qpn[uint64_t(q.host) << 32 | q.qp->qp_num] = &q;
  uint64_t done = 0;
  const uint64_t total = uint64_t(qps.size()) * o.ops;
  for (Qp& q : qps) post_more(q, hosts[q.host], o);
  ibv_wc wc[32];
  while (done < total) {
    for (uint32_t h = 0; h < hosts.size(); ++h) {
      const int got = ibv_poll_cq(hosts[h].cq, 32, wc);
      if (got < 0) die("ibv_poll_cq");
      for (int k = 0; k < got; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS) {
          std::fprintf(stderr, "scale_stream: completion error %s on %s QP 0x%x\n",
                       ibv_wc_status_str(wc[k].status), ibv_get_device_name(hosts[h].ctx->device),
                       wc[k].qp_num);
          return false;
        }
        Qp* q = by_qpn.at(uint64_t(h) << 32 | wc[k].qp_num);
        done += wc[k].wr_id - q->done;
        q->done = wc[k].wr_id;
        post_more(*q, hosts[h], o);
      }
    }
  }
  return true;
}

void close_all(std::vector<Host>& hosts, std::vector<Qp>& qps) {
  for (Qp& q : qps) ibv_destroy_qp(q.qp);
  for (Host& h : hosts) {
    ibv_dereg_mr(h.mr);
    ibv_destroy_cq(h.cq);
    ibv_dealloc_pd(h.pd);
    ibv_close_device(h.ctx);
  }
}

struct Figures {
  uint32_t hosts = 0;
  size_t qps = 0;
  uint64_t writes = 0;
  double wall = 0, sim = 0, kib_hosts = 0, kib_qps = 0;  ///< memory: totals over all hosts / QPs
};

void print_figures(const Figures& f, const Options& o, const std::string& extra) {
  std::printf("scale_stream: hosts %u qps %zu ops %" PRIu64
              " size %u window %u: wall %.3f s, %.3f us per WRITE, "
              "%.0f WRITEs per wall s; simulated %.6f s; rss per host %.1f KiB, per QP %.2f KiB%s\n",
              f.hosts, f.qps, f.writes, o.size, o.window, f.wall, f.wall * 1e6 / double(f.writes),
              double(f.writes) / f.wall, f.sim, f.kib_hosts / f.hosts, f.kib_qps / double(f.qps),
              extra.c_str());
}

int run_in_process(const Options& o, uint64_t (*sim_now)()) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 2) {
    std::fprintf(stderr, "scale_stream: needs at least two devices (hcasim run --hosts H, H >= 2)\n");
    return 2;
  }
  const Deal d = make_deal(uint32_t(n), o.qps);
  const long rss0 = bench::rss_kib();
  std::vector<Host> hosts = open_hosts(list, uint32_t(n), 0, d, o);
  ibv_free_device_list(list);
  const long rss_hosts = bench::rss_kib();
  std::vector<Qp> qps = create_qps(hosts, 0, d, o);
  std::vector<Peer> peers;
  for (const Host& h : hosts) peers.push_back({h.gid, uint64_t(uintptr_t(h.buf.data())), h.mr->rkey});
  std::vector<uint32_t> qpns(2 * size_t(d.conns));
  for (const Qp& q : qps) qpns[q.slot] = q.qp->qp_num;
  connect_all(qps, peers, qpns);
  const long rss_qps = bench::rss_kib();

  const double t0 = bench::wall_now();
  const uint64_t s0 = sim_now ? sim_now() : 0;
  if (!stream(hosts, qps, o)) return 1;
  Figures f{uint32_t(n),
            qps.size(),
            uint64_t(qps.size()) * o.ops,
            bench::wall_now() - t0,
            sim_now ? double(sim_now() - s0) / 1e9 : 0,
            double(rss_hosts - rss0),
            double(rss_qps - rss_hosts)};
  print_figures(f, o, "");
  close_all(hosts, qps);
  return 0;
}

// ---- several processes: a store of files in one directory ----

/**
 * @brief Files in the --store directory: each written to a temporary name and renamed, so a
 * reader sees a whole file or none; read by polling with a bounded wait.
 */
class Store {
 public:
  explicit Store(const Options& o)
      : dir_(o.store), rank_(uint32_t(o.rank)), ranks_(o.ranks), timeout_(o.timeout_s) {}

  std::string path(const std::string& phase, uint32_t r) const {
    return dir_ + "/" + phase + "." + std::to_string(r);
  }

  void put(const std::string& phase, const std::string& text) const {
    const std::string tmp = dir_ + "/." + phase + "." + std::to_string(rank_) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0)
      die(("scale_stream: writing " + tmp).c_str());
    if (std::rename(tmp.c_str(), path(phase, rank_).c_str()) != 0)
      die(("scale_stream: renaming " + tmp).c_str());
  }

  /** @brief Rank @p r's file for @p phase, once it exists; exits naming the rank after the timeout. */
  std::string get(const std::string& phase, uint32_t r) const {
    const double deadline = bench::wall_now() + timeout_;
    // Back off to 5 ms: ranks done early wait here while others still stream on the same cores.
    for (uint32_t pause_us = 50;; pause_us = std::min(2 * pause_us, 5000u)) {
      std::ifstream in(path(phase, r));
      if (in) return std::string(std::istreambuf_iterator<char>(in), {});
      if (bench::wall_now() > deadline) {
        std::fprintf(
            stderr,
            "scale_stream: rank %u: no '%s' from rank %u after %u s (%s missing): did rank %u start, "
            "or fail?%s\n",
            rank_, phase.c_str(), r, timeout_, path(phase, r).c_str(), r,
            r == 0 ? " (rank 0 goes on once every rank has arrived: see its own message)" : "");
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    }
  }

  /**
   * @brief Barrier @p phase. Rank 0 arrives last: it waits for every other rank's file, calls
   * @p at_all with all the texts (every rank has arrived, none has left), then publishes what
   * it returns, which every rank gets back.
   */
  std::string barrier(
      const std::string& phase, const std::string& mine,
      const std::function<std::string(const std::vector<std::string>&)>& at_all = nullptr) const {
    if (rank_ != 0) {
      put(phase, mine);
      return get(phase, 0);
    }
    std::vector<std::string> all{mine};
    for (uint32_t r = 1; r < ranks_; ++r) all.push_back(get(phase, r));
    const std::string out = at_all ? at_all(all) : mine;
    put(phase, out);
    return out;
  }

 private:
  std::string dir_;
  uint32_t rank_, ranks_, timeout_;
};

/**
 * @brief The pid of the fabric device this process is connected to, or "": the peer, named
 * hcasim-device, of one of our Unix sockets (SO_PEERCRED), as bench/resource_growth finds it.
 */

std::string hex(const ibv_gid& g) {
  char s[33];
  for (int i = 0; i < 16; ++i) std::snprintf(s + 2 * i, 3, "%02x", g.raw[i]);
  return s;
}

ibv_gid unhex(const std::string& s) {
  ibv_gid g{};
  for (size_t i = 0; i < 16 && 2 * i + 1 < s.size(); ++i)
    g.raw[i] = uint8_t(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return g;
}

std::string run_key(const Options& o, uint32_t k) {
  std::ostringstream s;
  s << "ranks " << o.ranks << " hcas " << k << " qps " << o.qps << " ops " << o.ops << " size " << o.size
    << " window " << o.window;
  return s.str();
}

/** @brief What this rank publishes: the run's parameters, its hosts' GIDs and buffers, its QPNs. */
std::string describe(const Options& o, const std::vector<Host>& hosts, const std::vector<Qp>& qps) {
  std::ostringstream s;
  s << run_key(o, uint32_t(hosts.size())) << "\n";
  for (uint32_t k = 0; k < hosts.size(); ++k)
    s << "hca " << uint32_t(o.rank) * hosts.size() + k << " " << hex(hosts[k].gid) << " "
      << uintptr_t(hosts[k].buf.data()) << " " << hosts[k].mr->rkey << "\n";
  for (const Qp& q : qps) s << "qp " << q.slot << " " << q.qp->qp_num << "\n";
  return s.str();
}

/** @brief Read rank @p r's description into @p peers and @p qpns; exits if its run differs from ours. */
void absorb(const std::string& text, uint32_t r, const std::string& key, std::vector<Peer>& peers,
            std::vector<uint32_t>& qpns) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  if (line != key) {
    std::fprintf(stderr,
                 "scale_stream: rank %u runs '%s', this rank '%s': give every rank the same options\n", r,
                 line.c_str(), key.c_str());
    std::exit(2);
  }
  for (std::string word; in >> word;) {
    if (word == "hca") {
      uint32_t g = 0, rkey = 0;
      uint64_t addr = 0;
      std::string gid;
      in >> g >> gid >> addr >> rkey;
      peers.at(g) = {unhex(gid), addr, rkey};
    } else {
      uint32_t slot = 0, qpn = 0;
      in >> slot >> qpn;
      qpns.at(slot) = qpn;
    }
  }
}

/** @brief Rank 0's memory and time readings of the device process and the run, in the ranks' files. */
struct Ranked {
  std::string dev;
  long dev_rss[3] = {0, 0, 0};  ///< the device process before opening, after opening, when connected
  double t0 = 0;
  uint64_t s0 = 0;
};

/** @brief Rank 0, every rank done: the slowest rank's end against the common start, and the memory. */
std::string report(const std::vector<std::string>& done, const Ranked& rk, const Options& o, uint32_t k,
                   uint64_t (*sim_now)()) {
  Figures f;
  f.hosts = o.ranks * k;
  double end = rk.t0, kib_h = 0, kib_q = 0;
  uint64_t s_end = rk.s0;
  for (const std::string& t : done) {
    double e = 0, h = 0, q = 0;
    uint64_t s = 0, n = 0, w = 0;
    std::istringstream(t) >> e >> s >> h >> q >> n >> w;
    end = std::max(end, e), s_end = std::max(s_end, s);
    kib_h += h, kib_q += q, f.qps += n, f.writes += w;
  }
  f.wall = end - rk.t0;
  f.sim = sim_now ? double(s_end - rk.s0) / 1e9 : 0;
  const double dev_h = double(rk.dev_rss[1] - rk.dev_rss[0]), dev_q = double(rk.dev_rss[2] - rk.dev_rss[1]);
  f.kib_hosts = kib_h + dev_h;
  f.kib_qps = kib_q + dev_q;
  char extra[200];
  std::snprintf(extra, sizeof extra,
                " (%u processes x %u HCAs; programs %.1f / %.2f KiB, hcasim-device %.1f / %.2f KiB)", o.ranks,
                k, kib_h / f.hosts, kib_q / double(f.qps), dev_h / f.hosts, dev_q / double(f.qps));
  print_figures(f, o, extra);
  std::fflush(stdout);
  return done[0];
}

/** @brief Rank 0 reads the device process's memory when every rank has reached a barrier. */
std::function<std::string(const std::vector<std::string>&)> note_device(const Ranked& rk, long& into) {
  return [&rk, &into](const std::vector<std::string>& all) {
    into = rk.dev.empty() ? 0 : bench::rss_kib(rk.dev);
    return all[0];
  };
}

int run_ranked(const Options& o, uint64_t (*sim_now)()) {
  const Store st(o);
  if (std::ifstream(st.path("listed", uint32_t(o.rank)))) {
    std::fprintf(stderr,
                 "scale_stream: --store %s already holds rank %d's files: give each run an empty directory\n",
                 o.store.c_str(), o.rank);
    return 2;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1 || o.ranks * uint32_t(n) < 2) {
    std::fprintf(stderr, "scale_stream: rank %d sees %d devices: the ranks need at least two HCAs in all\n",
                 o.rank, n);
    return 2;
  }
  const uint32_t k = uint32_t(n), first = uint32_t(o.rank) * k;
  const Deal d = make_deal(o.ranks * k, o.qps);
  Ranked rk;
  rk.dev = o.rank == 0 ? bench::device_pid() : "";
  const long rss0 = bench::rss_kib();
  st.barrier("listed", "", note_device(rk, rk.dev_rss[0]));
  std::vector<Host> hosts = open_hosts(list, k, first, d, o);
  ibv_free_device_list(list);
  const long rss_hosts = bench::rss_kib();
  st.barrier("opened", "", note_device(rk, rk.dev_rss[1]));
  std::vector<Qp> qps = create_qps(hosts, first, d, o);
  const std::string key = run_key(o, k);
  st.barrier("qps", describe(o, hosts, qps));
  std::vector<Peer> peers(o.ranks * k);
  std::vector<uint32_t> qpns(2 * size_t(d.conns));
  for (uint32_t r = 0; r < o.ranks; ++r) absorb(st.get("qps", r), r, key, peers, qpns);
  connect_all(qps, peers, qpns);
  const long rss_qps = bench::rss_kib();
  // The common start: the moment the last rank is connected, on the machine-wide steady clock.
  const std::string go = st.barrier("ready", "", [&](const std::vector<std::string>&) {
    rk.dev_rss[2] = rk.dev.empty() ? 0 : bench::rss_kib(rk.dev);
    rk.s0 = sim_now ? sim_now() : 0;
    rk.t0 = bench::wall_now();
    char s[64];
    std::snprintf(s, sizeof s, "%.9f %" PRIu64, rk.t0, rk.s0);
    return std::string(s);
  });
  std::istringstream(go) >> rk.t0 >> rk.s0;
  const bool ok = stream(hosts, qps, o);
  std::ostringstream mine;
  mine.precision(9);
  mine << std::fixed << bench::wall_now() << " " << (sim_now ? sim_now() : 0) << " " << rss_hosts - rss0
       << " " << rss_qps - rss_hosts << " " << qps.size() << " " << qps.size() * o.ops;
  if (!ok) return 1;
  // Nobody tears down before every rank is done: a peer may still be writing into our buffers.
  st.barrier("done", mine.str(),
             [&](const std::vector<std::string>& all) { return report(all, rk, o, k, sim_now); });
  close_all(hosts, qps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  auto* sim_now = bench::sim_function<uint64_t()>("hcasim_sim_now_ns");
  return o.rank < 0 ? run_in_process(o, sim_now) : run_ranked(o, sim_now);
}
