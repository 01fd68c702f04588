// SPDX-License-Identifier: Apache-2.0
// scale_stream: all-to-all RDMA WRITE traffic over many RC QPs spread across every simulated host
// of the run (`hcasim run --hosts H -- scale_stream ...`), one thread, tracing off. Prints the
// wall cost per WRITE, the simulated time, and the memory each host and each QP costs, so that
// bench/scale.sh can put the figures for 2 ... 64 hosts side by side. Figures, not pass/fail.
//
//   scale_stream [--qps Q] [--ops N] [--size BYTES] [--window W]
//
// Q QPs in all (Q/2 connections), dealt round robin over every pair of hosts (i < j), so with
// Q >= H(H-1) every host talks to every other. Each QP writes N WRITEs of BYTES to its peer's
// buffer, W in flight, every W/2-th signaled. Only the public verbs API (and dlsym for the
// simulator's clock), like any program a user runs.
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "write_pair.h"

namespace {

using bench::die;

struct Options {
  uint32_t qps = 1024, size = 64, window = 8;
  uint64_t ops = 200;
};

struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  ibv_gid gid{};
};

struct Qp {
  uint32_t host = 0, peer_host = 0;
  ibv_qp* qp = nullptr;
  const Qp* peer = nullptr;
  uint64_t posted = 0, done = 0;
};

constexpr size_t kHostBuffer = 1 << 20;

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    char* end = nullptr;
    const unsigned long long n = v ? std::strtoull(v, &end, 10) : 0;
    const bool num = v && *v && end && *end == 0;
    if (a == "--qps" && num && n >= 2 && n <= 65536 && n % 2 == 0) {
      o.qps = uint32_t(n);
    } else if (a == "--ops" && num && n >= 1 && n <= 100'000'000) {
      o.ops = n;
    } else if (a == "--size" && num && n >= 1 && n <= 65536) {
      o.size = uint32_t(n);
    } else if (a == "--window" && num && n >= 2 && n <= 128) {
      o.window = uint32_t(n);
    } else {
      std::fprintf(stderr,
                   "scale_stream: bad option '%s%s%s' (--qps: an even number 2..65536, --ops 1..1e8, "
                   "--size 1..65536, --window 2..128)\n",
                   a.c_str(), v ? " " : "", v ? v : "");
      return false;
    }
    ++i;
  }
  return true;
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

/** @brief Top @p q's window up with WRITEs to its peer's buffer. */
void post_more(Qp& q, std::vector<Host>& hosts, const Options& o) {
  ibv_sge sge[16];
  ibv_send_wr wr[16];
  Host& h = hosts[q.host];
  const Host& peer = hosts[q.peer_host];
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
      wr[i].wr.rdma.remote_addr = uint64_t(uintptr_t(peer.buf.data() + off));
      wr[i].wr.rdma.rkey = peer.mr->rkey;
      wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(q.qp, wr, &bad)) die("ibv_post_send");
    q.posted += n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  auto* sim_now = bench::sim_function<uint64_t()>("hcasim_sim_now_ns");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 2) {
    std::fprintf(stderr, "scale_stream: needs at least two devices (hcasim run --hosts H, H >= 2)\n");
    return 2;
  }
  const uint32_t hosts_n = uint32_t(n);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (uint32_t i = 0; i < hosts_n; ++i)
    for (uint32_t j = i + 1; j < hosts_n; ++j) pairs.emplace_back(i, j);
  const uint32_t conns = o.qps / 2;
  std::vector<uint32_t> qps_on(hosts_n);  // each QP has at most window / 2 signaled WRs out
  for (uint32_t c = 0; c < conns; ++c) {
    ++qps_on[pairs[c % pairs.size()].first];
    ++qps_on[pairs[c % pairs.size()].second];
  }
  const long rss0 = bench::rss_kib();
  std::vector<Host> hosts(hosts_n);
  for (uint32_t i = 0; i < hosts_n; ++i)
    open_host(hosts[i], list[i], int(std::max(1u, qps_on[i] * o.window)));
  ibv_free_device_list(list);
  const long rss_hosts = bench::rss_kib();
  std::vector<Qp> qps(size_t(conns) * 2);
  std::unordered_map<uint32_t, Qp*> by_qpn;
  for (uint32_t c = 0; c < conns; ++c) {
    const auto [i, j] = pairs[c % pairs.size()];
    Qp& a = qps[2 * c];
    Qp& b = qps[2 * c + 1];
    a = {i, j, create_qp(hosts[i], o.window), &b};
    b = {j, i, create_qp(hosts[j], o.window), &a};
    bench::connect_qp(a.qp, hosts[j].gid, b.qp->qp_num);
    bench::connect_qp(b.qp, hosts[i].gid, a.qp->qp_num);
    by_qpn[a.qp->qp_num | (i << 24)] = &a;
    by_qpn[b.qp->qp_num | (j << 24)] = &b;
  }
  const long rss_qps = bench::rss_kib();

  const double t0 = bench::wall_now();
  const uint64_t s0 = sim_now ? sim_now() : 0;
  uint64_t done = 0;
  const uint64_t total = uint64_t(qps.size()) * o.ops;
  for (Qp& q : qps) post_more(q, hosts, o);
  ibv_wc wc[32];
  while (done < total) {
    for (uint32_t h = 0; h < hosts_n; ++h) {
      const int got = ibv_poll_cq(hosts[h].cq, 32, wc);
      if (got < 0) die("ibv_poll_cq");
      for (int k = 0; k < got; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS) {
          std::fprintf(stderr, "scale_stream: completion error %s on host %u QP 0x%x\n",
                       ibv_wc_status_str(wc[k].status), h, wc[k].qp_num);
          return 1;
        }
        Qp* q = by_qpn.at(wc[k].qp_num | (h << 24));
        done += wc[k].wr_id - q->done;
        q->done = wc[k].wr_id;
        post_more(*q, hosts, o);
      }
    }
  }
  const double wall = bench::wall_now() - t0;
  const double sim = sim_now ? double(sim_now() - s0) / 1e9 : 0;
  std::printf("scale_stream: hosts %u qps %zu ops %" PRIu64
              " size %u window %u: wall %.3f s, %.3f us per WRITE, "
              "%.0f WRITEs per wall s; simulated %.6f s; rss per host %.1f KiB, per QP %.2f KiB\n",
              hosts_n, qps.size(), total, o.size, o.window, wall, wall * 1e6 / double(total),
              double(total) / wall, sim, double(rss_hosts - rss0) / hosts_n,
              double(rss_qps - rss_hosts) / double(qps.size()));
  for (Qp& q : qps) ibv_destroy_qp(q.qp);
  for (Host& h : hosts) {
    ibv_dereg_mr(h.mr);
    ibv_destroy_cq(h.cq);
    ibv_dealloc_pd(h.pd);
    ibv_close_device(h.ctx);
  }
  return 0;
}
