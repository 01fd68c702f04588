// SPDX-License-Identifier: Apache-2.0
// completion_latency: how long, in wall-clock time, a signaled RDMA_WRITE_WITH_IMM takes from
// ibv_post_send until its completion reaches the sender's completion channel, on any ibverbs
// device. This is the window Gloo's teardown race depends on (docs/verbs.md, "Gloo at
// teardown"): Gloo's device loop thread must see the completion of an algorithm's last send
// before the application destroys the algorithm, and the application does that as soon as its
// own receives are done, often a few microseconds after posting that last send.
//
// Two RC QPs, A on the first device and B on the second (or both on the only one: loopback),
// each CQ on a completion channel, like a Gloo pair. Per round: B posts a receive, A arms its
// CQ, posts a 4-byte signaled write with immediate, then waits in poll(2) on its channel fd, as
// Gloo's loop thread does. Printed: the latency percentiles, and for scale the time this CPU
// takes for the result check of gloo_algorithms (4099 floats, 4 ranks), which is about what an
// application does between its last post and the teardown.
//
//   completion_latency [--rounds N] [--gid-index I]    (simulator: hcasim run --hosts 2 -- ...)
// Exit 0 = measured, 2 = setup failed.
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Host {
  ibv_context* ctx;
  ibv_pd* pd;
  ibv_comp_channel* ch;
  ibv_cq* cq;
  ibv_qp* qp;
  ibv_mr* mr;
  char buf[64];
  ibv_gid gid;
};

int gGid = 1;  // the IPv4-mapped RoCEv2 GID on hcasim and rxe

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "completion_latency: setup failed: %s\n", what);
  std::exit(2);
}

void open(Host& h, ibv_device* d) {
  if (!(h.ctx = ibv_open_device(d))) die("ibv_open_device");
  if (!(h.pd = ibv_alloc_pd(h.ctx))) die("ibv_alloc_pd");
  if (!(h.ch = ibv_create_comp_channel(h.ctx))) die("ibv_create_comp_channel");
  if (!(h.cq = ibv_create_cq(h.ctx, 64, nullptr, h.ch, 0))) die("ibv_create_cq");
  if (!(h.mr = ibv_reg_mr(h.pd, h.buf, sizeof h.buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
    die("ibv_reg_mr");
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = h.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  if (!(h.qp = ibv_create_qp(h.pd, &ia))) die("ibv_create_qp");
  if (ibv_query_gid(h.ctx, 1, gGid, &h.gid)) die("ibv_query_gid");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(h.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("INIT");
}

void connect(Host& h, const Host& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 20;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = uint8_t(gGid);
  a.ah_attr.grh.hop_limit = 64;
  if (ibv_modify_qp(h.qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;  // Gloo's
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.max_rd_atomic = 1;
  if (ibv_modify_qp(h.qp, &r,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
}

double us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("%-44s median %9.1f us  p10 %9.1f  p90 %9.1f  max %9.1f  (n=%zu)\n", what, v[v.size() / 2],
              v[v.size() / 10], v[v.size() * 9 / 10], v.back(), v.size());
}

// One round: returns {post -> channel fd readable, post -> CQE polled}.
std::pair<double, double> round(Host& a, Host& b, int i) {
  ibv_sge rs{reinterpret_cast<uintptr_t>(b.buf), 8, b.mr->lkey};
  ibv_recv_wr rw{};
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  if (ibv_post_recv(b.qp, &rw, &rbad)) die("ibv_post_recv");
  if (ibv_req_notify_cq(a.cq, 0)) die("ibv_req_notify_cq");
  ibv_sge sge{reinterpret_cast<uintptr_t>(a.buf), 4, a.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = uint64_t(i);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = 7;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf) + 16;
  wr.wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  const double t0 = us();
  if (ibv_post_send(a.qp, &wr, &bad)) die("ibv_post_send");
  pollfd p{a.ch->fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) die("no completion event within 10 s");
  const double tEvent = us() - t0;
  ibv_cq* cq = nullptr;
  void* cctx = nullptr;
  if (ibv_get_cq_event(a.ch, &cq, &cctx)) die("ibv_get_cq_event");
  ibv_ack_cq_events(cq, 1);
  ibv_wc wc{};
  int got = 0;
  while ((got = ibv_poll_cq(a.cq, 1, &wc)) == 0) {
  }
  const double tPolled = us() - t0;
  if (got < 0 || wc.status != IBV_WC_SUCCESS) die("send completion with an error");
  // B's receive completion (B's CQ is on a channel too, never armed: polled here).
  ibv_wc wb{};
  const double deadline = us() + 10e6;
  for (;;) {
    const int n = ibv_poll_cq(b.cq, 1, &wb);
    if (n > 0 && (wb.opcode & IBV_WC_RECV)) break;
    if (n < 0 || us() > deadline) die("no receive completion");
  }
  return {tEvent, tPolled};
}

float input(int rank, size_t i) {
  return float(int64_t((i * 7 + size_t(rank) * 131) % 1001) - 500 + rank % 7);
}

// gloo_algorithms' check of an allreduce result: 4099 elements, 4 ranks.
double checkCostUs() {
  std::vector<float> buf(4099);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = input(0, i) + input(1, i) + input(2, i) + input(3, i);
  const double t0 = us();
  size_t wrong = 0;
  for (int rep = 0; rep < 20; ++rep)
    for (size_t i = 0; i < buf.size(); ++i) {
      float s = 0;
      for (int q = 0; q < 4; ++q) s += input(q, i);
      if (std::memcmp(&s, &buf[i], sizeof s) != 0) ++wrong;
    }
  return (us() - t0) / 20 + double(wrong);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::max(10, std::atoi(argv[++i]));
    else if (a == "--gid-index" && i + 1 < argc)
      gGid = std::atoi(argv[++i]);
    else
      return std::fprintf(stderr, "usage: completion_latency [--rounds N] [--gid-index I]\n"), 2;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) die("no ibverbs device");
  Host a{}, b{};
  open(a, list[0]);
  open(b, list[n > 1 ? 1 : 0]);
  connect(a, b);
  connect(b, a);
  std::printf("completion_latency: %s -> %s, %d rounds, 4-byte signaled RDMA_WRITE_WITH_IMM\n",
              ibv_get_device_name(list[0]), ibv_get_device_name(list[n > 1 ? 1 : 0]), rounds);
  std::vector<double> ev, polled;
  for (int i = 0; i < rounds; ++i) {
    const auto r = round(a, b, i);
    ev.push_back(r.first);
    polled.push_back(r.second);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  report("ibv_post_send -> completion channel readable", ev);
  report("ibv_post_send -> send CQE polled", polled);
  std::printf("%-44s %9.1f us\n", "for scale: gloo_algorithms' check (4099 x 4)", checkCostUs());
  return 0;
}
