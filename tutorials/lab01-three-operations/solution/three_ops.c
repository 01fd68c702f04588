/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 1: three RDMA operations between two hosts, written against the plain ibverbs API.
 *
 * Host A (first device) and host B (second device; the same device twice if there is only
 * one) each get an RC QP. Then:
 *   1. SEND of 2500 bytes A -> B (3 packets at path MTU 1024) into a posted receive;
 *   2. RDMA_WRITE_WITH_IMM of 3000 bytes A -> B; B waits for it with a completion event
 *      (ibv_req_notify_cq + ibv_get_cq_event) and checks the immediate;
 *   3. RDMA_READ of 4096 bytes: A reads B's buffer.
 * Every payload is verified byte for byte. Exit status 0 means every check passed.
 *
 * Lab 1 handout: tutorials/lab01-three-operations/README.md. This is the reference solution;
 * starter/three_ops.c is the same program with the work requests of steps 2 and 3 left out.
 *
 * Nothing here knows about the simulator: build it with `cc three_ops.c -libverbs` and run it
 * on RoCE hardware, on rxe, or under `hcasim run` (which adds the step trace).
 */
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE 8192
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "three_ops: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      exit(1);                                            \
    }                                                     \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_comp_channel* channel;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* buf;
  union ibv_gid gid;
};

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */

static void open_host(struct host* h, struct ibv_device* dev) {
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  h->channel = ibv_create_comp_channel(h->ctx);
  CHECK(h->channel, "ibv_create_comp_channel: %s", strerror(errno));
  h->cq = ibv_create_cq(h->ctx, 16, h, h->channel, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq,
      .recv_cq = h->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 2}};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

/* RESET -> INIT -> RTR -> RTS, the attributes ibv_modify_qp(3) requires at each step. */
static void connect_qp(struct host* h, const struct host* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  CHECK(ibv_modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer->qp->qp_num;
  a.rq_psn = 1000;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(h->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "RTR: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 1000;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(h->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

static void wait_one(struct host* h, struct ibv_wc* wc, enum ibv_wc_opcode op, const char* what) {
  int n;
  do {
    n = ibv_poll_cq(h->cq, 1, wc);
  } while (n == 0);
  CHECK(n == 1, "%s: ibv_poll_cq returned %d", what, n);
  CHECK(wc->status == IBV_WC_SUCCESS, "%s: completion status %s", what, ibv_wc_status_str(wc->status));
  CHECK(wc->opcode == op, "%s: completion opcode %d, expected %d", what, wc->opcode, op);
}

static void post_recv(struct host* h, uint64_t wr_id, uint32_t offset, uint32_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(h->qp, &wr, &bad) == 0, "ibv_post_recv: %s", strerror(errno));
}

static void post_send(struct host* h, uint64_t wr_id, enum ibv_wr_opcode op, uint32_t offset, uint32_t len,
                      uint64_t raddr, uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(imm)},
                     *bad;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  CHECK(ibv_post_send(h->qp, &wr, &bad) == 0, "ibv_post_send: %s", strerror(errno));
}

static void fill(uint8_t* p, uint32_t len, uint8_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed + i * 7);
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  struct host a, b;
  open_host(&a, list[0]);
  open_host(&b, list[n > 1 ? 1 : 0]);
  connect_qp(&a, &b);
  connect_qp(&b, &a);
  printf("A = %s qp 0x%x, B = %s qp 0x%x\n", a.name, a.qp->qp_num, b.name, b.qp->qp_num);
  struct ibv_wc wc;

  /* 1. SEND 2500 bytes into a posted receive. */
  fill(a.buf, 2500, 1);
  post_recv(&b, 101, 0, 4096);
  post_send(&a, 1, IBV_WR_SEND, 0, 2500, 0, 0, 0);
  wait_one(&a, &wc, IBV_WC_SEND, "SEND (sender)");
  wait_one(&b, &wc, IBV_WC_RECV, "SEND (receiver)");
  CHECK(wc.wr_id == 101 && wc.byte_len == 2500, "SEND: wr_id %llu byte_len %u", (unsigned long long)wc.wr_id,
        wc.byte_len);
  CHECK(memcmp(a.buf, b.buf, 2500) == 0, "SEND: payload differs");
  printf("1. SEND 2500 B: ok\n");

  /* 2. RDMA_WRITE_WITH_IMM of 3000 bytes; B sleeps on a completion event. */
  fill(a.buf + 4096, 3000, 2);
  post_recv(&b, 102, 0, 0);
  CHECK(ibv_req_notify_cq(b.cq, 0) == 0, "ibv_req_notify_cq");
  post_send(&a, 2, IBV_WR_RDMA_WRITE_WITH_IMM, 4096, 3000, (uintptr_t)b.buf + 4096, b.mr->rkey, 0xC0FFEE);
  struct ibv_cq* ev_cq;
  void* ev_ctx;
  CHECK(ibv_get_cq_event(b.channel, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event: %s", strerror(errno));
  CHECK(ev_cq == b.cq && ev_ctx == &b, "event for the wrong CQ");
  ibv_ack_cq_events(ev_cq, 1);
  wait_one(&b, &wc, IBV_WC_RECV_RDMA_WITH_IMM, "WRITE_WITH_IMM (receiver)");
  CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xC0FFEE && wc.byte_len == 3000,
        "WRITE_WITH_IMM: imm 0x%x byte_len %u", ntohl(wc.imm_data), wc.byte_len);
  CHECK(memcmp(a.buf + 4096, b.buf + 4096, 3000) == 0, "WRITE_WITH_IMM: payload differs");
  wait_one(&a, &wc, IBV_WC_RDMA_WRITE, "WRITE_WITH_IMM (sender)");
  printf("2. RDMA_WRITE_WITH_IMM 3000 B, imm 0x%x, woken by a completion event: ok\n", 0xC0FFEE);

  /* 3. RDMA_READ 4096 bytes of B's buffer into A. */
  fill(b.buf, 4096, 3);
  post_send(&a, 3, IBV_WR_RDMA_READ, 0, 4096, (uintptr_t)b.buf, b.mr->rkey, 0);
  wait_one(&a, &wc, IBV_WC_RDMA_READ, "READ");
  CHECK(wc.byte_len == 4096, "READ byte_len %u", wc.byte_len);
  CHECK(memcmp(a.buf, b.buf, 4096) == 0, "READ: payload differs");
  printf("3. RDMA_READ 4096 B: ok\n");

  struct host* hs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    struct host* h = hs[i];
    CHECK(ibv_destroy_qp(h->qp) == 0 && ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->cq) == 0 &&
              ibv_destroy_comp_channel(h->channel) == 0 && ibv_dealloc_pd(h->pd) == 0 &&
              ibv_close_device(h->ctx) == 0,
          "teardown: %s", strerror(errno));
    free(h->buf);
  }
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
