/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 2: doorbells. How work requests become WQEs in the send queue, how many 64-byte basic
 * blocks (WQEBBs) each takes, and how many doorbells a program rings to hand them to the HCA.
 *
 * Host A (first device) and host B (second device; the same device twice if there is only
 * one) each get an RC QP. Then A does:
 *   1. four RDMA WRITEs of 512 bytes, each posted with its own ibv_post_send call;
 *   2. the same four RDMA WRITEs as one linked list, posted with a single ibv_post_send call;
 *   3. one list of four RDMA WRITEs of different shapes: 1 SGE, 4 SGEs, 100 bytes inline,
 *      160 bytes inline (each takes a different number of WQEBBs);
 *   4. B posts two receives as one list, A sends two SENDs as one list.
 * Every payload is verified byte for byte. Exit status 0 means every check passed.
 *
 * Lab 2 handout: tutorials/lab02-doorbells/README.md. This is the STARTER: the places
 * marked "LAB GAP" are yours to fill in (README.md, steps 2 and 3).
 *
 * Nothing here knows about the simulator: build it with `cc doorbells.c -libverbs` and run it
 * on RoCE hardware, on rxe, or under `hcasim run` (which adds the step trace).
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE 8192
#define NWR 4 /* work requests per step */
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "doorbells: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      exit(1);                                            \
    }                                                     \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* buf;
  union ibv_gid gid;
};

static const int kGidIndex = 1;      /* the IPv4-mapped RoCEv2 GID */
static const uint32_t kInline = 160; /* the largest inline WR of step 3 */

static void open_host(struct host* h, struct ibv_device* dev) {
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  h->cq = ibv_create_cq(h->ctx, 32, NULL, NULL, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  /* Up to 4 SGEs and 160 inline bytes per WR: the ring is sized for the largest such WQE. */
  struct ibv_qp_init_attr ia = {.send_cq = h->cq,
                                .recv_cq = h->cq,
                                .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 16,
                                        .max_recv_wr = 8,
                                        .max_send_sge = 4,
                                        .max_recv_sge = 1,
                                        .max_inline_data = kInline}};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ia.cap.max_inline_data >= kInline, "max_inline_data %u", ia.cap.max_inline_data);
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

/* Poll @p n successful completions of opcode @p op, in wr_id order from @p first_id. */
static void wait_n(struct host* h, int n, enum ibv_wc_opcode op, uint64_t first_id, const char* what) {
  for (int i = 0; i < n; ++i) {
    struct ibv_wc wc;
    int got;
    do {
      got = ibv_poll_cq(h->cq, 1, &wc);
    } while (got == 0);
    CHECK(got == 1, "%s: ibv_poll_cq returned %d", what, got);
    CHECK(wc.status == IBV_WC_SUCCESS, "%s: completion status %s", what, ibv_wc_status_str(wc.status));
    CHECK(wc.opcode == op && wc.wr_id == first_id + (uint64_t)i, "%s: completion %d: opcode %d wr_id %llu",
          what, i, wc.opcode, (unsigned long long)wc.wr_id);
  }
}

static void fill(uint8_t* p, uint32_t len, uint8_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed + i * 7);
}

/* A signaled RDMA WRITE of A's bytes [offset, offset + len) to the same offset of B's buffer. */
static void make_write(struct ibv_send_wr* wr, struct ibv_sge* sge, const struct host* a,
                       const struct host* b, uint64_t wr_id, uint32_t offset, uint32_t len) {
  *sge = (struct ibv_sge){.addr = (uintptr_t)a->buf + offset, .length = len, .lkey = a->mr->lkey};
  *wr = (struct ibv_send_wr){.wr_id = wr_id,
                             .sg_list = sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
  wr->wr.rdma.remote_addr = (uintptr_t)b->buf + offset;
  wr->wr.rdma.rkey = b->mr->rkey;
}

static void post(struct host* h, struct ibv_send_wr* wr) {
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(h->qp, wr, &bad) == 0, "ibv_post_send: %s (bad WR %llu)", strerror(errno),
        bad ? (unsigned long long)bad->wr_id : 0ull);
}

static void expect_same(const struct host* a, const struct host* b, uint32_t offset, uint32_t len,
                        const char* what) {
  CHECK(memcmp(a->buf + offset, b->buf + offset, len) == 0, "%s: payload differs", what);
}

/* 1. Four WRITEs, four ibv_post_send calls. */
static void one_at_a_time(struct host* a, struct host* b) {
  struct ibv_send_wr wr[NWR];
  struct ibv_sge sge[NWR];
  fill(a->buf, NWR * 512, 1);
  for (int i = 0; i < NWR; ++i) {
    make_write(&wr[i], &sge[i], a, b, 10 + i, i * 512, 512);
    post(a, &wr[i]);
  }
  wait_n(a, NWR, IBV_WC_RDMA_WRITE, 10, "one at a time");
  expect_same(a, b, 0, NWR * 512, "one at a time");
  printf("1. %d RDMA WRITEs, %d ibv_post_send calls: ok\n", NWR, NWR);
}

/* 2. The same four WRITEs as one linked list, one ibv_post_send call. */
static void as_a_list(struct host* a, struct host* b) {
  struct ibv_send_wr wr[NWR];
  struct ibv_sge sge[NWR];
  fill(a->buf + 2048, NWR * 512, 2);
  for (int i = 0; i < NWR; ++i) make_write(&wr[i], &sge[i], a, b, 20 + i, 2048 + i * 512, 512);
  /* LAB GAP 1: make_write() left every WR's next pointer NULL. Link wr[0] -> wr[1] -> wr[2] ->
   * wr[3] into one list and hand the whole list to the HCA with a SINGLE call of post() (it
   * calls ibv_post_send(3), which takes the first WR of a list). Set gap1_done to 1 when done. */
  int gap1_done = 0;
  CHECK(gap1_done, "LAB GAP 1 is not filled in: post the four WRITEs as one list (README step 2)");
  wait_n(a, NWR, IBV_WC_RDMA_WRITE, 20, "as a list");
  expect_same(a, b, 2048, NWR * 512, "as a list");
  printf("2. %d RDMA WRITEs, 1 ibv_post_send call: ok\n", NWR);
}

/*
 * 3. Four WRITEs of different shapes in one list, at offset 4096: 64 bytes (1 SGE), 4 x 64
 * bytes (4 SGEs, gathered from every other 64 bytes of A), 100 bytes inline, 160 bytes inline.
 */
static void shapes(struct host* a, struct host* b) {
  struct ibv_send_wr wr[NWR];
  struct ibv_sge sge[NWR + 3];
  const uint32_t at = 4096;
  fill(a->buf + at, 2048, 3);
  make_write(&wr[0], &sge[0], a, b, 30, at, 64);
  make_write(&wr[1], &sge[1], a, b, 31, at + 256, 64);
  make_write(&wr[2], &sge[5], a, b, 32, at + 1024, 100);
  make_write(&wr[3], &sge[6], a, b, 33, at + 1536, kInline);
  /* LAB GAP 2: (a) make wr[1] (wr_id 31) gather FOUR pieces of 64 bytes, A's bytes at
   * at + 256, at + 384, at + 512 and at + 640: make_write() filled sge[1] with the first piece;
   * fill sge[2], sge[3], sge[4] (same lkey) and set wr[1]'s num_sge. (b) Send wr[2] and wr[3]
   * inline (a send flag, see ibv_post_send(3)). Set gap2_done to 1 when done. */
  int gap2_done = 0;
  CHECK(gap2_done, "LAB GAP 2 is not filled in: the 4-SGE WR and the two inline WRs (README step 3)");
  for (int i = 0; i + 1 < NWR; ++i) wr[i].next = &wr[i + 1];
  post(a, &wr[0]);
  wait_n(a, NWR, IBV_WC_RDMA_WRITE, 30, "shapes");
  expect_same(a, b, at, 64, "1 SGE");
  for (int s = 0; s < 4; ++s)
    CHECK(memcmp(a->buf + at + 256 + s * 128, b->buf + at + 256 + s * 64, 64) == 0, "4 SGEs: piece %d", s);
  expect_same(a, b, at + 1024, 100, "inline 100");
  expect_same(a, b, at + 1536, kInline, "inline 160");
  printf("3. RDMA WRITEs of 1 SGE, 4 SGEs, 100 B inline, %u B inline, 1 ibv_post_send call: ok\n", kInline);
}

/* 4. Two receives posted as one list on B; two SENDs as one list on A. */
static void receives(struct host* a, struct host* b) {
  struct ibv_sge rsge[2], ssge[2];
  struct ibv_recv_wr rwr[2], *rbad = NULL;
  struct ibv_send_wr swr[2];
  const uint32_t at = 6144;
  for (int i = 0; i < 2; ++i) {
    rsge[i] =
        (struct ibv_sge){.addr = (uintptr_t)b->buf + at + i * 1024, .length = 1024, .lkey = b->mr->lkey};
    rwr[i] = (struct ibv_recv_wr){.wr_id = 40 + i, .sg_list = &rsge[i], .num_sge = 1};
  }
  rwr[0].next = &rwr[1];
  CHECK(ibv_post_recv(b->qp, &rwr[0], &rbad) == 0, "ibv_post_recv: %s", strerror(errno));
  fill(a->buf + at, 2048, 4);
  for (int i = 0; i < 2; ++i) {
    make_write(&swr[i], &ssge[i], a, b, 50 + i, at + i * 1024, 1024);
    swr[i].opcode = IBV_WR_SEND;
  }
  swr[0].next = &swr[1];
  post(a, &swr[0]);
  wait_n(a, 2, IBV_WC_SEND, 50, "SEND (sender)");
  wait_n(b, 2, IBV_WC_RECV, 40, "SEND (receiver)");
  expect_same(a, b, at, 2048, "SEND");
  printf("4. 2 receives in 1 ibv_post_recv call, 2 SENDs in 1 ibv_post_send call: ok\n");
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
  one_at_a_time(&a, &b);
  as_a_list(&a, &b);
  shapes(&a, &b);
  receives(&a, &b);

  struct host* hs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    struct host* h = hs[i];
    CHECK(ibv_destroy_qp(h->qp) == 0 && ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->cq) == 0 &&
              ibv_dealloc_pd(h->pd) == 0 && ibv_close_device(h->ctx) == 0,
          "teardown: %s", strerror(errno));
    free(h->buf);
  }
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
