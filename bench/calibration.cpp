// SPDX-License-Identifier: Apache-2.0
// The roce-100g profile's calibration run (docs/calibration.md): perftest's latency and
// bandwidth tests, done the way perftest does them, timed in *simulated* time, beside published
// figures of ConnectX-5/6 Dx 100 GbE cards.
//
// perftest itself times with the CPU's cycle counter, which on a simulator is wall time, so its
// printed figures are the simulator's speed, not the modelled hardware's. This program repeats
// what each test does, step for step (linux-rdma/perftest, src/perftest_resources.c:
// run_iter_lat_write, run_iter_lat, run_iter_lat_send, run_iter_bw; defaults from
// src/perftest_parameters.[ch]), and reads the clock with the simulator's hcasim_sim_now_ns:
//   - latency tests: one RC QP each way, tx depth 1, every send signaled; WRITE and SEND inline
//     up to 220 and 236 bytes (DEF_INLINE_WRITE, DEF_INLINE_SEND_RC_UC), READ never inline;
//     ib_write_lat's receiver spins on the last byte of its buffer, ib_send_lat's polls its
//     receive CQ (512 receives posted ahead), each side then waits for its own send completion;
//     the figure is the median gap between two posts of the client, halved for WRITE and SEND
//     (one way), whole for READ (perftest's rtt_factor);
//   - ib_write_bw: N QPs from one host to the other, 128 WRITEs outstanding per QP, one in 100
//     signaled (every one above 8 KiB: MSG_SIZE_CQ_MOD_LIMIT), no inline, 5,000 per QP; the
//     figure is bytes (or messages) over the time from the first post to the last completion.
// Both "programs" of a two-sided test run in this one thread as two state machines: in the
// lockstep clock software takes no simulated time, so interleaving them here changes nothing the
// device sees. An empty poll of a CQ no QP uses lets the model run to the next thing software
// can observe (a host-memory write), which is when a spinning program would notice it.
//
// Run it under the simulator's lockstep clock (bench/calibration.sh does):
//   hcasim run --clock lockstep --idle-us 0 -- calibration [--iters N] [--test NAME]
// A plain ibverbs program: <infiniband/verbs.h> and dlsym for hcasim_sim_now_ns, nothing else.
#include <infiniband/verbs.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "write_pair.h"

namespace {

uint64_t (*sim_now_ns)() = nullptr;

constexpr uint32_t kInlineWrite = 220;  // perftest DEF_INLINE_WRITE (latency tests)
constexpr uint32_t kInlineSend = 236;   // perftest DEF_INLINE_SEND_RC_UC
constexpr uint32_t kTxDepthBw = 128;    // DEF_TX_BW
constexpr uint32_t kCqModBw = 100;      // DEF_CQ_MOD
constexpr uint32_t kCqModLimit = 8192;  // MSG_SIZE_CQ_MOD_LIMIT: above it every WRITE is signaled
constexpr uint32_t kRxDepthSend = 512;  // DEF_RX_SEND
constexpr size_t kRegion = 1 << 20;     // per QP and side: room for any message of the table
// The model's QPs take at most 172 inline bytes (kMaxInline), fewer than perftest's thresholds;
// every inline message of the table (2 and 64 bytes) fits.
constexpr uint32_t kQpInline = 160;

/** @brief One simulated host: its device, a PD, one registered buffer, CQs. */
struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  ibv_cq* idle_cq = nullptr;  ///< no QP uses it: polling it only lets simulated time run
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  ibv_gid gid{};
};

void open_host(Host& h, ibv_device* dev, size_t qps) {
  h.ctx = ibv_open_device(dev);
  if (!h.ctx) bench::die("ibv_open_device");
  h.pd = ibv_alloc_pd(h.ctx);
  h.send_cq = ibv_create_cq(h.ctx, int(kTxDepthBw * qps + 16), nullptr, nullptr, 0);
  h.recv_cq = ibv_create_cq(h.ctx, int(kRxDepthSend + 16), nullptr, nullptr, 0);
  h.idle_cq = ibv_create_cq(h.ctx, 1, nullptr, nullptr, 0);
  h.buf.assign(2 * kRegion * qps, 0);
  h.mr = ibv_reg_mr(h.pd, h.buf.data(), h.buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!h.pd || !h.send_cq || !h.recv_cq || !h.idle_cq || !h.mr) bench::die("resources");
  if (ibv_query_gid(h.ctx, 1, 1, &h.gid)) bench::die("ibv_query_gid");
}

void close_host(Host& h) {
  ibv_dereg_mr(h.mr);
  ibv_destroy_cq(h.idle_cq);
  ibv_destroy_cq(h.recv_cq);
  ibv_destroy_cq(h.send_cq);
  ibv_dealloc_pd(h.pd);
  ibv_close_device(h.ctx);
}

ibv_qp* create_qp(Host& h) {
  ibv_qp_init_attr ia{};
  ia.send_cq = h.send_cq;
  ia.recv_cq = h.recv_cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = kTxDepthBw;
  ia.cap.max_recv_wr = kRxDepthSend;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = kQpInline;
  ibv_qp* qp = ibv_create_qp(h.pd, &ia);
  if (!qp) bench::die("ibv_create_qp");
  return qp;
}

/** @brief INIT, RTR and RTS towards @p peer: perftest's timeout and retry counts, 16 READs
 * outstanding each way (perftest asks for the device's maximum). */
void connect_qp(ibv_qp* qp, const Host& peer, uint32_t peer_qpn) {
  bench::connect_qp(qp, peer.gid, peer_qpn, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 16);
}

/** @brief Two hosts with @p n RC QPs between them: a.qps[i] is connected to b.qps[i]. */
struct Pair {
  Host a, b;
  std::vector<ibv_qp*> qa, qb;
  uint8_t* region(Host& h, size_t qp, int half) { return h.buf.data() + (2 * qp + half) * kRegion; }
};

void open_pair(Pair& p, ibv_device** list, size_t n) {
  open_host(p.a, list[0], n);
  open_host(p.b, list[1], n);
  for (size_t i = 0; i < n; ++i) {
    p.qa.push_back(create_qp(p.a));
    p.qb.push_back(create_qp(p.b));
    connect_qp(p.qa[i], p.b, p.qb[i]->qp_num);
    connect_qp(p.qb[i], p.a, p.qa[i]->qp_num);
  }
}

void close_pair(Pair& p) {
  for (ibv_qp* q : p.qa) ibv_destroy_qp(q);
  for (ibv_qp* q : p.qb) ibv_destroy_qp(q);
  close_host(p.a);
  close_host(p.b);
}

/** @brief Let the model run to the next effect software can see (what a spinning loop waits for). */
void let_time_run(Host& h) {
  ibv_wc wc;
  if (ibv_poll_cq(h.idle_cq, 1, &wc) != 0) bench::die("idle CQ");
}

void post(ibv_qp* qp, ibv_wr_opcode op, uint8_t* src, uint32_t len, uint32_t lkey, uint8_t* dst,
          uint32_t rkey, unsigned flags) {
  ibv_sge sge{uint64_t(uintptr_t(src)), len, lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.wr.rdma.remote_addr = uint64_t(uintptr_t(dst));
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp, &wr, &bad)) bench::die("ibv_post_send");
}

void post_recv(ibv_qp* qp, uint8_t* dst, uint32_t len, uint32_t lkey) {
  ibv_sge sge{uint64_t(uintptr_t(dst)), len, lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (ibv_post_recv(qp, &wr, &bad)) bench::die("ibv_post_recv");
}

/** @brief Set by an empty poll: in lockstep it let simulated time run to the next visible effect. */
bool g_time_ran = false;

/** @brief One completion from @p cq if there is one (true); an error completion ends the run. */
bool take_completion(ibv_cq* cq) {
  ibv_wc wc;
  const int n = ibv_poll_cq(cq, 1, &wc);
  if (n < 0) bench::die("ibv_poll_cq");
  if (n == 0) g_time_ran = true;
  if (n == 1 && wc.status != IBV_WC_SUCCESS) {
    std::fprintf(stderr, "calibration: completion error: %s\n", ibv_wc_status_str(wc.status));
    std::exit(1);
  }
  return n == 1;
}

/** perftest's "typical" latency: the median gap between consecutive posts (two largest left out). */
double typical_us(std::vector<uint64_t> posted, int rtt_factor) {
  std::vector<uint64_t> d;
  for (size_t i = 0; i + 1 < posted.size(); ++i) d.push_back(posted[i + 1] - posted[i]);
  std::sort(d.begin(), d.end());
  d.resize(d.size() > 2 ? d.size() - 2 : d.size());  // LAT_MEASURE_TAIL
  const size_t n = d.size();
  const double median = n % 2 ? double(d[n / 2]) : (double(d[n / 2 - 1]) + double(d[n / 2])) / 2;
  return median / 1000.0 / rtt_factor;
}

}  // namespace

namespace {

/**
 * @brief One side of ib_write_lat (run_iter_lat_write): wait until the peer's WRITE has changed
 * the last byte of this side's receive buffer, WRITE back (that byte set to the count), wait for
 * the own WRITE's completion; the server starts without waiting.
 */
struct WriteLatSide {
  ibv_qp* qp;
  ibv_cq* cq;
  uint32_t lkey, rkey;
  uint8_t* src;            ///< what this side writes (its last byte is the count)
  volatile uint8_t* seen;  ///< last byte of where the peer writes to
  uint8_t* dst;            ///< where this side writes in the peer
  uint32_t size;
  bool server;
  uint64_t iters, scnt = 0, rcnt = 0, ccnt = 0;
  enum { Top, WaitData, Post, WaitCqe } stage = Top;
  std::vector<uint64_t> posted{};

  bool done() const { return scnt >= iters && rcnt >= iters && ccnt >= iters; }
  /** @brief Advance while nothing must be waited for; true if anything happened. */
  bool step() {
    switch (stage) {
      case Top:
        if (done()) return false;
        if (rcnt < iters && !(scnt < 1 && server)) {
          ++rcnt;
          stage = WaitData;
        } else {
          stage = Post;
        }
        return true;
      case WaitData:
        if (*seen != uint8_t(rcnt)) return false;
        stage = Post;
        return true;
      case Post:
        if (scnt < iters) {
          posted.push_back(sim_now_ns());
          src[size - 1] = uint8_t(++scnt);
          const bool inl = size <= kInlineWrite && size <= kQpInline;
          const unsigned flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
          post(qp, IBV_WR_RDMA_WRITE, src, size, lkey, dst, rkey, flags);
        }
        stage = ccnt < iters ? WaitCqe : Top;
        return true;
      case WaitCqe:
        if (!take_completion(cq)) return false;
        ++ccnt;
        stage = Top;
        return true;
    }
    return false;
  }
};

/**
 * @brief One side of ib_send_lat (run_iter_lat_send): take a receive completion (and post the
 * receive again while more will come), SEND back, wait for the own SEND's completion; the client
 * starts by sending.
 */
struct SendLatSide {
  ibv_qp* qp;
  ibv_cq* send_cq;
  ibv_cq* recv_cq;
  uint32_t lkey;
  uint8_t* src;
  uint8_t* rx;
  uint32_t size;
  bool client;
  uint64_t iters, rx_depth, scnt = 0, rcnt = 0;
  enum { Top, WaitRecv, Post, WaitCqe } stage = Top;
  std::vector<uint64_t> posted{};

  bool done() const { return scnt >= iters && rcnt >= iters; }
  bool step() {
    switch (stage) {
      case Top:
        if (done()) return false;
        stage = rcnt < iters && !(scnt < 1 && client) ? WaitRecv : Post;
        return true;
      case WaitRecv:
        if (!take_completion(recv_cq)) return false;
        if (++rcnt + rx_depth <= iters) post_recv(qp, rx, size, lkey);
        stage = Post;
        return true;
      case Post:
        if (scnt >= iters) {
          stage = Top;
          return true;
        }
        posted.push_back(sim_now_ns());
        ++scnt;
        post(qp, IBV_WR_SEND, src, size, lkey, nullptr, 0,
             IBV_SEND_SIGNALED | (size <= kInlineSend && size <= kQpInline ? IBV_SEND_INLINE : 0));
        stage = WaitCqe;
        return true;
      case WaitCqe:
        if (!take_completion(send_cq)) return false;
        stage = Top;
        return true;
    }
    return false;
  }
};

/**
 * @brief Run two sides until both are done. Time runs only in empty polls, each to the next
 * effect software can see; after one, both sides look again before time may run further (a
 * side spinning on memory must see the other's data the moment it lands).
 */
template <typename Side>
void run_pair(Side& x, Side& y, Host& clock_host) {
  while (!x.done() || !y.done()) {
    g_time_ran = false;
    bool moved = false;
    while (x.step()) moved = true;
    while (y.step()) moved = true;
    if (!moved && !g_time_ran) let_time_run(clock_host);
  }
}

double write_lat(ibv_device** list, uint32_t size, uint64_t iters) {
  Pair p;
  open_pair(p, list, 1);
  auto side = [&](Host& me, Host& peer, ibv_qp* qp, bool server) {
    return WriteLatSide{qp,
                        me.send_cq,
                        me.mr->lkey,
                        peer.mr->rkey,
                        p.region(me, 0, 0),
                        p.region(me, 0, 1) + size - 1,
                        p.region(peer, 0, 1),
                        size,
                        server,
                        iters};
  };
  WriteLatSide client = side(p.a, p.b, p.qa[0], false), server = side(p.b, p.a, p.qb[0], true);
  run_pair(client, server, p.a);
  close_pair(p);
  return typical_us(client.posted, 2);
}

double send_lat(ibv_device** list, uint32_t size, uint64_t iters) {
  Pair p;
  open_pair(p, list, 1);
  const uint64_t rx_depth = std::min<uint64_t>(kRxDepthSend, iters);
  auto side = [&](Host& me, ibv_qp* qp, bool client) {
    for (uint64_t i = 0; i < rx_depth; ++i) post_recv(qp, p.region(me, 0, 1), size, me.mr->lkey);
    return SendLatSide{qp,   me.send_cq, me.recv_cq, me.mr->lkey, p.region(me, 0, 0), p.region(me, 0, 1),
                       size, client,     iters,      rx_depth};
  };
  SendLatSide client = side(p.a, p.qa[0], true), server = side(p.b, p.qb[0], false);
  run_pair(client, server, p.a);
  close_pair(p);
  return typical_us(client.posted, 2);
}

/** @brief ib_read_lat (run_iter_lat): READ, wait for its completion, again; the round trip. */
double read_lat(ibv_device** list, uint32_t size, uint64_t iters) {
  Pair p;
  open_pair(p, list, 1);
  std::vector<uint64_t> posted;
  for (uint64_t i = 0; i < iters; ++i) {
    posted.push_back(sim_now_ns());
    post(p.qa[0], IBV_WR_RDMA_READ, p.region(p.a, 0, 1), size, p.a.mr->lkey, p.region(p.b, 0, 0),
         p.b.mr->rkey, IBV_SEND_SIGNALED);
    while (!take_completion(p.a.send_cq)) {
    }
  }
  close_pair(p);
  return typical_us(posted, 1);
}

struct BwResult {
  double gbps, mpps;
};

/**
 * @brief ib_write_bw (run_iter_bw): @p qps QPs, each kept at 128 WRITEs outstanding, posted one
 * per ibv_post_send and round robin over the QPs, one in 100 signaled (each completion retires
 * 100), every one above 8 KiB; from the first post to the last completion.
 */
BwResult write_bw(ibv_device** list, uint32_t size, uint32_t qps, uint64_t iters) {
  Pair p;
  open_pair(p, list, qps);
  const uint32_t cq_mod = size > kCqModLimit ? 1 : kCqModBw;
  std::vector<uint64_t> scnt(qps, 0), ccnt(qps, 0);
  uint64_t done = 0, t0 = 0, t1 = 0;
  const uint64_t total = iters * qps;
  while (done < total) {
    for (uint32_t q = 0; q < qps; ++q) {
      while (scnt[q] < iters && scnt[q] + 1 <= kTxDepthBw + ccnt[q]) {
        const uint64_t k = scnt[q];
        const bool signaled = cq_mod == 1 || k % cq_mod == cq_mod - 1 || k == iters - 1;
        if (done == 0 && t0 == 0 && k == 0 && q == 0) t0 = sim_now_ns();
        ibv_sge sge{uint64_t(uintptr_t(p.region(p.a, q, 0))), size, p.a.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = q;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
        wr.wr.rdma.remote_addr = uint64_t(uintptr_t(p.region(p.b, q, 1)));
        wr.wr.rdma.rkey = p.b.mr->rkey;
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(p.qa[q], &wr, &bad)) bench::die("ibv_post_send");
        ++scnt[q];
      }
    }
    ibv_wc wc[16];
    const int n = ibv_poll_cq(p.a.send_cq, 16, wc);
    if (n < 0) bench::die("ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "calibration: completion error: %s\n", ibv_wc_status_str(wc[i].status));
        std::exit(1);
      }
      const uint64_t fill = std::min<uint64_t>(cq_mod, iters - ccnt[wc[i].wr_id]);
      ccnt[wc[i].wr_id] += fill;
      done += fill;
      t1 = sim_now_ns();
    }
  }
  close_pair(p);
  const double secs = double(t1 - t0) / 1e9;
  return BwResult{double(total) * size * 8 / secs / 1e9, double(total) / secs / 1e6};
}

}  // namespace

namespace {

/** @brief One row of the table: a perftest test, its published figure (0: none found) and source. */
struct Cell {
  const char* test;
  uint32_t size;
  uint32_t qps;
  const char* unit;  ///< us (latency), Mpps (64 B message rate) or Gb/s
  double published;
  const char* source;  ///< a tag of docs/calibration.md's source list
};

// Published figures of 100 Gb/s Mellanox/NVIDIA cards (perftest's, but for Ponsard20, whose
// tool is not named); the sources, their set-ups and why each was picked are in
// docs/calibration.md. A tag ending in '*' is a proxy: another ConnectX generation or link layer
// (no ConnectX-5/6 RoCE figure was found). 0: no source found.
const Cell kCells[] = {
    {"ib_write_lat", 2, 1, "us", 0.99, "CX5-lab"},
    {"ib_write_lat", 64, 1, "us", 0, "-"},
    {"ib_write_lat", 4096, 1, "us", 0, "-"},
    {"ib_read_lat", 2, 1, "us", 1.91, "pt#131"},
    {"ib_read_lat", 64, 1, "us", 0, "-"},
    {"ib_read_lat", 4096, 1, "us", 0, "-"},
    {"ib_send_lat", 2, 1, "us", 0.92, "CX5-lab"},
    {"ib_send_lat", 64, 1, "us", 0, "-"},
    {"ib_send_lat", 4096, 1, "us", 2.28, "Potter18*"},
    {"ib_write_bw", 64, 1, "Mpps", 0, "-"},
    {"ib_write_bw", 64, 8, "Mpps", 0, "-"},
    {"ib_write_bw", 4096, 1, "Gb/s", 97.5, "Ponsard20*"},
    {"ib_write_bw", 4096, 8, "Gb/s", 0, "-"},
    {"ib_write_bw", 65536, 1, "Gb/s", 97.0, "MLNX-fm*"},
    {"ib_write_bw", 65536, 8, "Gb/s", 0, "-"},
};

double simulate(const Cell& c, ibv_device** list, uint64_t lat_iters, uint64_t bw_iters) {
  const std::string t = c.test;
  if (t == "ib_write_lat") return write_lat(list, c.size, lat_iters);
  if (t == "ib_read_lat") return read_lat(list, c.size, lat_iters);
  if (t == "ib_send_lat") return send_lat(list, c.size, lat_iters);
  const BwResult r = write_bw(list, c.size, c.qps, bw_iters);
  return std::strcmp(c.unit, "Mpps") == 0 ? r.mpps : r.gbps;
}

int usage() {
  std::fprintf(stderr,
               "usage: calibration [--iters N] [--bw-iters N] [--test NAME]\n"
               "  run under: hcasim run --clock lockstep --idle-us 0 -- calibration\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t lat_iters = 1000, bw_iters = 5000;  // perftest's DEF_ITERS and DEF_ITERS_WB
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      lat_iters = std::strtoull(argv[++i], nullptr, 0);
    } else if (!std::strcmp(argv[i], "--bw-iters") && i + 1 < argc) {
      bw_iters = std::strtoull(argv[++i], nullptr, 0);
    } else if (!std::strcmp(argv[i], "--test") && i + 1 < argc) {
      only = argv[++i];
    } else {
      return usage();
    }
  }
  if (lat_iters < 8 || bw_iters < kCqModBw) return usage();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  auto* present = bench::sim_function<int()>("hcasim_sim_present");
  sim_now_ns = bench::sim_function<uint64_t()>("hcasim_sim_now_ns");
  if (!list || n < 2 || !present || !present() || !sim_now_ns) {
    std::fprintf(stderr, "calibration: needs two simulated devices (run it under hcasim run)\n");
    return 1;
  }
  std::printf("%-13s %7s %4s %11s %10s %-5s %-10s %7s\n", "test", "size", "QPs", "simulated", "published",
              "unit", "source", "dev.%");
  for (const Cell& c : kCells) {
    if (only && std::strcmp(only, c.test) != 0) continue;
    const double sim = simulate(c, list, lat_iters, bw_iters);
    char pub[32] = "-", dev[32] = "-";
    if (c.published > 0) {
      std::snprintf(pub, sizeof pub, "%.2f", c.published);
      std::snprintf(dev, sizeof dev, "%+.1f", (sim - c.published) / c.published * 100);
    }
    std::printf("%-13s %7u %4u %11.2f %10s %-5s %-10s %7s\n", c.test, c.size, c.qps, sim, pub, c.unit,
                c.source, dev);
    std::fflush(stdout);
  }
  ibv_free_device_list(list);
  return 0;
}
