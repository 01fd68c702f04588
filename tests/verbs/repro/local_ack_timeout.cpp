// SPDX-License-Identifier: Apache-2.0
// Simulator repro: the requester must honour the local ACK timeout. (Found while building
// verbs/; the requester has had an ACK timer since commit 84fcb5f. Kept as a regression test.)
//
// ibv_modify_qp(3): "timeout - Local ack timeout for primary path ... 4.096 usec * 2^timeout",
// "retry_cnt - ... the total number of times that the QP will try to resend the packets before
// reporting an error because the remote side doesn't answer". After retry_cnt retries the WR
// completes with IBV_WC_RETRY_EXC_ERR (IBTA 9.7.6.1.3, C9-140..). Real HCAs and rxe do this.
//
// Here host B's QP is destroyed, so B's HCA drops A's SEND ("no such QP"); A's QP has
// timeout 10 (4.2 ms) and retry_cnt 2, so within ~13 ms of simulated time the SEND must
// complete with IBV_WC_RETRY_EXC_ERR. Before the fix the simulator never retransmitted and the
// SEND never completed (likewise for a frame lost on the wire), so a transport library that
// waits for its last send completions at shutdown hung for ever.
// Exit 0 = as specified, 1 = bug, 2 = setup failed.
#include <infiniband/verbs.h>

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Host {
  ibv_context* ctx;
  ibv_pd* pd;
  ibv_cq* cq;
  ibv_qp* qp;
  ibv_mr* mr;
  char buf[64];
  ibv_gid gid;
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "setup failed: %s\n", what);
  std::exit(2);
}

void open(Host& h, ibv_device* d) {
  if (!(h.ctx = ibv_open_device(d))) die("ibv_open_device");
  if (!(h.pd = ibv_alloc_pd(h.ctx))) die("ibv_alloc_pd");
  if (!(h.cq = ibv_create_cq(h.ctx, 16, nullptr, nullptr, 0))) die("ibv_create_cq");
  if (!(h.mr = ibv_reg_mr(h.pd, h.buf, sizeof h.buf, IBV_ACCESS_LOCAL_WRITE))) die("ibv_reg_mr");
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = h.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  if (!(h.qp = ibv_create_qp(h.pd, &ia))) die("ibv_create_qp");
  if (ibv_query_gid(h.ctx, 1, 1, &h.gid)) die("ibv_query_gid");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (ibv_modify_qp(h.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("INIT");
}

void connect(Host& h, const Host& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  if (ibv_modify_qp(h.qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 10;   // 4.096 us * 2^10 = 4.2 ms
  r.retry_cnt = 2;  // then IBV_WC_RETRY_EXC_ERR
  r.rnr_retry = 7;
  r.max_rd_atomic = 1;
  if (ibv_modify_qp(h.qp, &r,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
}

}  // namespace

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 2) die("need two devices (HCASIM_HOSTS=2)");
  Host a{}, b{};
  open(a, list[0]);
  open(b, list[1]);
  connect(a, b);
  connect(b, a);
  if (ibv_destroy_qp(b.qp)) die("destroy B's QP");

  ibv_sge sge{reinterpret_cast<uintptr_t>(a.buf), 8, a.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 42;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(a.qp, &wr, &bad)) die("ibv_post_send");

  using NowFn = uint64_t (*)();
  auto now = reinterpret_cast<NowFn>(dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns"));
  const auto start = std::chrono::steady_clock::now();
  ibv_wc wc{};
  int got = 0;
  while (!got && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    got = ibv_poll_cq(a.cq, 1, &wc);
  const double sim_ms = now ? double(now()) / 1e6 : -1;
  if (!got) {
    std::printf(
        "FAIL: no completion after 5 s of wall time (simulated time %.3f ms); expected "
        "IBV_WC_RETRY_EXC_ERR after ~13 ms simulated\n",
        sim_ms);
    return 1;
  }
  if (wc.status != IBV_WC_RETRY_EXC_ERR || wc.wr_id != 42) {
    std::printf("FAIL: completion status %s wr_id %llu, expected IBV_WC_RETRY_EXC_ERR wr_id 42\n",
                ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
    return 1;
  }
  std::printf("OK: IBV_WC_RETRY_EXC_ERR at %.3f ms simulated\n", sim_ms);
  return 0;
}
