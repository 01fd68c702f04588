// SPDX-License-Identifier: Apache-2.0
// Simulator repro: destroying a CQ that has a completion event queued on its channel (not yet
// taken with ibv_get_cq_event) must drop that event: the channel fd must not stay readable,
// and a non-blocking ibv_get_cq_event must return -1/EAGAIN ("If the completion channel is
// non-blocking, ibv_get_cq_event returns -1 with errno EAGAIN when no event is available",
// ibv_get_cq_event(3); the kernel removes a destroyed CQ's events from the event file).
//
// Found by the verbs/ library: a Pair destroyed with an unfetched event left the device's
// loop thread spinning forever in ibv_get_cq_event (the eventfd kept its count while the
// pending queue was empty, so wait_readable() said "readable" and get_cq_event re-checked an
// empty queue, for ever). Exit 0 = as specified, 1 = bug, 2 = setup failed.
#include <infiniband/verbs.h>

#include <fcntl.h>
#include <poll.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

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

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "setup failed: %s: %s\n", what, std::strerror(errno));
  std::exit(2);
}

void open(Host& h, ibv_device* d) {
  if (!(h.ctx = ibv_open_device(d))) die("ibv_open_device");
  if (!(h.pd = ibv_alloc_pd(h.ctx))) die("ibv_alloc_pd");
  if (!(h.ch = ibv_create_comp_channel(h.ctx))) die("ibv_create_comp_channel");
  if (!(h.cq = ibv_create_cq(h.ctx, 16, nullptr, h.ch, 0))) die("ibv_create_cq");
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
  r.timeout = 14;
  r.retry_cnt = 7;
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

  // A's CQ armed; one signaled SEND A -> B completes on A's CQ and queues an event on A's
  // channel. We never take it.
  ibv_sge rs{reinterpret_cast<uintptr_t>(b.buf), sizeof b.buf, b.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  if (ibv_post_recv(b.qp, &rwr, &rbad)) die("ibv_post_recv");
  if (ibv_req_notify_cq(a.cq, 0)) die("ibv_req_notify_cq");
  ibv_sge sge{reinterpret_cast<uintptr_t>(a.buf), 8, a.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(a.qp, &wr, &bad)) die("ibv_post_send");
  ibv_wc wc;
  int got = 0;
  for (int i = 0; i < 1000000 && !got; ++i) got = ibv_poll_cq(a.cq, 1, &wc);
  if (got != 1 || wc.status != IBV_WC_SUCCESS) die("SEND did not complete");
  pollfd pf{a.ch->fd, POLLIN, 0};
  for (int i = 0; i < 200 && poll(&pf, 1, 10) == 0; ++i) {
  }
  if (!(pf.revents & POLLIN)) die("no completion event was queued (the channel fd never became readable)");

  // Destroy the QP and the CQ with the event still queued.
  if (ibv_destroy_qp(a.qp)) die("ibv_destroy_qp");
  if (ibv_destroy_cq(a.cq)) die("ibv_destroy_cq");

  int failures = 0;
  pf.revents = 0;
  if (poll(&pf, 1, 0) != 0) {
    std::printf("FAIL: after ibv_destroy_cq the channel fd is still readable, but no event can be taken\n");
    ++failures;
  }
  const int fl = fcntl(a.ch->fd, F_GETFL);
  fcntl(a.ch->fd, F_SETFL, fl | O_NONBLOCK);
  std::atomic<bool> returned{false};
  int rc = 0, err = 0;
  std::thread t([&] {
    ibv_cq* cq;
    void* ctx;
    rc = ibv_get_cq_event(a.ch, &cq, &ctx);
    err = errno;
    returned = true;
  });
  const auto start = std::chrono::steady_clock::now();
  while (!returned && std::chrono::steady_clock::now() - start < std::chrono::seconds(3))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!returned) {
    std::printf(
        "FAIL: non-blocking ibv_get_cq_event has not returned after 3 s (it spins: the channel's "
        "eventfd still counts the destroyed CQ's event)\n");
    std::fflush(stdout);
    std::_Exit(1);
  }
  t.join();
  if (rc != -1 || err != EAGAIN) {
    std::printf("FAIL: non-blocking ibv_get_cq_event returned %d (errno %s), want -1/EAGAIN\n", rc,
                std::strerror(err));
    ++failures;
  }
  if (failures) return 1;
  std::printf("OK: the destroyed CQ's event was dropped; ibv_get_cq_event says EAGAIN\n");
  return 0;
}
