/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 7: reliability of an RC connection. Host A (first device) sends to host B (second device;
 * the same device twice if there is only one) over three RC connections:
 *   1. connection 1: three SENDs (2, 1 and 3 packets at path MTU 1024) into posted receives;
 *   2. connection 1: two SENDs (4 and 2 packets). Run with `hcasim run --drop 'host=1;psn=1007'`
 *      and B loses the second packet: B answers the gap with a NAK (PSN sequence error) and A
 *      goes back to PSN 1007 and sends everything from there again (go-back-N);
 *   3. connection 1: a SEND while B has no receive posted. B answers with an RNR NAK; A waits
 *      min_rnr_timer and tries again. B posts its receive only after finishing an RDMA WRITE of
 *      its own to A (on the simulator, after A's first attempt); A's retry then succeeds;
 *   4. connection 2 (rnr_retry 0): the same SEND without a receive fails at once with
 *      IBV_WC_RNR_RETRY_EXC_ERR;
 *   5. connection 3 (timeout 8, retry_cnt 2): B's QP is destroyed, so nothing answers A's RDMA
 *      WRITE; after three local ACK timeouts it fails with IBV_WC_RETRY_EXC_ERR.
 * Every payload and every completion is checked. Exit status 0 means every check passed.
 *
 * A lost packet (part 2) is repaired by the hardware: the program sees the same completions
 * with or without --drop, and so runs unchanged on rxe and RoCE hardware, where nothing is lost
 * on purpose. Parts 4 and 5 fail the same way on every device.
 *
 * Lab 7 handout: tutorials/lab07-reliability/README.md. This is the reference solution;
 * starter/reliability.c is the same program with three parts left out (LAB GAP 1-3).
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_SIZE 16384
#define RECV_SIZE 4096
#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "reliability: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                                \
      exit(1);                                              \
    }                                                       \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq; /* every QP of the host completes here, send and receive */
  struct ibv_mr* mr;
  uint8_t* buf;
  union ibv_gid gid;
};

/* One RC connection: A's QP and B's QP. */
struct conn {
  struct ibv_qp* a;
  struct ibv_qp* b;
};

/* The attributes that make RC reliable (ibv_modify_qp(3)). */
struct retry_params {
  uint8_t min_rnr_timer; /* responder: the wait an RNR NAK asks for (code, IBTA table 45) */
  uint8_t timeout;       /* requester: local ACK timeout, 4.096 us * 2^timeout */
  uint8_t retry_cnt;     /* requester: resends after a timeout before giving up */
  uint8_t rnr_retry;     /* requester: retries after an RNR NAK (7 = for ever) */
};

static const int kGidIndex = 1;                   /* the IPv4-mapped RoCEv2 GID */
static const uint32_t kPsnA = 1000, kPsnB = 5000; /* first PSN of A's and of B's requests */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

static struct ibv_qp* create_qp(struct host* h) {
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq,
      .recv_cq = h->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(h->pd, &ia);
  CHECK(qp, "ibv_create_qp: %s", strerror(errno));
  return qp;
}

/* RESET -> INIT -> RTR -> RTS. RTR sets what this QP does as a responder (the PSN it expects,
 * min_rnr_timer), RTS what it does as a requester (its first PSN, timeout, the retry counts). */
static void connect_qp(struct ibv_qp* qp, const struct host* peer, uint32_t peer_qpn, uint32_t sq_psn,
                       uint32_t rq_psn, const struct retry_params* r) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = r->min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "RTR: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = sq_psn;
  a.max_rd_atomic = 1;
  a.timeout = r->timeout;
  a.retry_cnt = r->retry_cnt;
  a.rnr_retry = r->rnr_retry;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

static struct conn make_conn(struct host* a, struct host* b, const struct retry_params* r) {
  struct conn c = {create_qp(a), create_qp(b)};
  connect_qp(c.a, b, c.b->qp_num, kPsnA, kPsnB, r);
  connect_qp(c.b, a, c.a->qp_num, kPsnB, kPsnA, r);
  return c;
}

/* The next completion on h's CQ. Waits at most 5 s of wall time, so a completion that never
 * comes fails the program instead of hanging it. */
static void next_wc(struct host* h, struct ibv_wc* wc, const char* what) {
  const double deadline = now_s() + 5.0;
  int n;
  while ((n = ibv_poll_cq(h->cq, 1, wc)) == 0)
    CHECK(now_s() < deadline, "%s: no completion within 5 s", what);
  CHECK(n == 1, "%s: ibv_poll_cq returned %d", what, n);
}

/* Waits for the completion of work request wr_id on h and checks its status. */
static void expect_wc(struct host* h, struct ibv_wc* wc, uint64_t wr_id, enum ibv_wc_status status,
                      const char* what) {
  next_wc(h, wc, what);
  CHECK(wc->wr_id == wr_id, "%s: completion of wr_id %llu, expected %llu", what,
        (unsigned long long)wc->wr_id, (unsigned long long)wr_id);
  CHECK(wc->status == status, "%s: status %s, expected %s", what, ibv_wc_status_str(wc->status),
        ibv_wc_status_str(status));
}

static void post_recv(struct host* h, struct ibv_qp* qp, uint64_t wr_id, uint32_t offset) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = RECV_SIZE, .lkey = h->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(qp, &wr, &bad) == 0, "ibv_post_recv: %s", strerror(errno));
}

/* A signaled SEND (raddr 0) or RDMA WRITE (raddr, rkey) of len bytes at offset of h's buffer. */
static void post_send(struct host* h, struct ibv_qp* qp, uint64_t wr_id, uint32_t offset, uint32_t len,
                      uint64_t raddr, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = raddr ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  CHECK(ibv_post_send(qp, &wr, &bad) == 0, "ibv_post_send: %s", strerror(errno));
}

static void fill(uint8_t* p, uint32_t len, uint8_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed + i * 7);
}

/* Parts 1 and 2: n SENDs of len[i] bytes A -> B (wr_id id + i) into n posted receives (wr_id
 * id + 100 + i); each is checked. */
static void send_messages(struct host* a, struct host* b, struct conn* c, const uint32_t* len, int n,
                          uint64_t id) {
  struct ibv_wc wc;
  for (int i = 0; i < n; ++i) {
    fill(a->buf + i * RECV_SIZE, len[i], (uint8_t)(id + i));
    post_recv(b, c->b, id + 100 + i, i * RECV_SIZE);
  }
  for (int i = 0; i < n; ++i) post_send(a, c->a, id + i, i * RECV_SIZE, len[i], 0, 0);
  for (int i = 0; i < n; ++i) expect_wc(a, &wc, id + i, IBV_WC_SUCCESS, "SEND (A)");
  for (int i = 0; i < n; ++i) {
    expect_wc(b, &wc, id + 100 + i, IBV_WC_SUCCESS, "receive (B)");
    CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == len[i], "receive %d: opcode %d, %u bytes", i, wc.opcode,
          wc.byte_len);
    CHECK(memcmp(b->buf + i * RECV_SIZE, a->buf + i * RECV_SIZE, len[i]) == 0, "SEND %d: payload differs", i);
  }
}

/* Part 3: A's SEND reaches B before B has a receive for it (RNR NAK); B posts one after its own
 * RDMA WRITE to A has completed, and A's retry goes through. */
static void rnr_then_receive(struct host* a, struct host* b, struct conn* c) {
  struct ibv_wc wc;
  fill(a->buf, 500, 30);
  fill(b->buf + 2 * RECV_SIZE, 64, 31);
  post_send(a, c->a, 30, 0, 500, 0, 0);
  /* B is busy with work of its own: a 64-byte RDMA WRITE into A's buffer. */
  post_send(b, c->b, 31, 2 * RECV_SIZE, 64, (uintptr_t)a->buf + 3 * RECV_SIZE, a->mr->rkey);
  expect_wc(b, &wc, 31, IBV_WC_SUCCESS, "B's RDMA WRITE");
  post_recv(b, c->b, 130, 0);
  expect_wc(a, &wc, 30, IBV_WC_SUCCESS, "SEND after RNR (A)");
  expect_wc(b, &wc, 130, IBV_WC_SUCCESS, "receive after RNR (B)");
  CHECK(wc.byte_len == 500 && memcmp(b->buf, a->buf, 500) == 0, "SEND after RNR: payload differs");
  CHECK(memcmp(a->buf + 3 * RECV_SIZE, b->buf + 2 * RECV_SIZE, 64) == 0, "B's RDMA WRITE: payload differs");
}

/* Whether qp reaches the error state within 1 s: the error completion and the state change are
 * two steps for a device, and a program may see the first an instant before the second. */
static int reaches_error_state(struct ibv_qp* qp) {
  const double deadline = now_s() + 1.0;
  for (;;) {
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    CHECK(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0, "ibv_query_qp: %s", strerror(errno));
    if (attr.qp_state == IBV_QPS_ERR) return 1;
    if (now_s() > deadline) return 0;
  }
}

/* Part 4: rnr_retry 0: the first RNR NAK ends the SEND, and A's QP goes to the error state. */
static void rnr_exhausted(struct host* a, struct conn* c) {
  struct ibv_wc wc;
  post_send(a, c->a, 40, 0, 64, 0, 0);
  expect_wc(a, &wc, 40, IBV_WC_RNR_RETRY_EXC_ERR, "SEND with rnr_retry 0");
  CHECK(reaches_error_state(c->a), "A's QP is not in the error state after RNR_RETRY_EXC_ERR");
}

/* Part 5: B's QP is gone, so nothing answers A's RDMA WRITE: the local ACK timer expires
 * 1 + retry_cnt times, then the WRITE fails. */
static void retry_exhausted(struct host* a, struct host* b, struct conn* c) {
  struct ibv_wc wc;
  CHECK(ibv_destroy_qp(c->b) == 0, "ibv_destroy_qp (B): %s", strerror(errno));
  c->b = NULL;
  post_send(a, c->a, 50, 0, 64, (uintptr_t)b->buf, b->mr->rkey);
  expect_wc(a, &wc, 50, IBV_WC_RETRY_EXC_ERR, "RDMA WRITE to a destroyed QP");
  CHECK(reaches_error_state(c->a), "A's QP is not in the error state after RETRY_EXC_ERR");
}

static void close_host(struct host* h) {
  CHECK(ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->cq) == 0 && ibv_dealloc_pd(h->pd) == 0 &&
            ibv_close_device(h->ctx) == 0,
        "teardown: %s", strerror(errno));
  free(h->buf);
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  struct host a, b;
  open_host(&a, list[0]);
  open_host(&b, list[n > 1 ? 1 : 0]);
  const struct retry_params patient = {.min_rnr_timer = 1, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7};
  const struct retry_params no_rnr_retry = {
      .min_rnr_timer = 1, .timeout = 14, .retry_cnt = 7, .rnr_retry = 0};
  const struct retry_params short_timeout = {
      .min_rnr_timer = 1, .timeout = 8, .retry_cnt = 2, .rnr_retry = 7};
  struct conn c[3] = {make_conn(&a, &b, &patient), make_conn(&a, &b, &no_rnr_retry),
                      make_conn(&a, &b, &short_timeout)};
  for (int i = 0; i < 3; ++i)
    printf("connection %d: A = %s qp 0x%x, B = %s qp 0x%x\n", i + 1, a.name, c[i].a->qp_num, b.name,
           c[i].b->qp_num);

  const uint32_t part1[] = {2000, 1000, 3000}, part2[] = {4000, 2000};
  send_messages(&a, &b, &c[0], part1, 3, 10);
  printf("1. 3 SENDs (2 + 1 + 3 packets, PSN 1000..1005): ok\n");
  send_messages(&a, &b, &c[0], part2, 2, 20);
  printf("2. 2 SENDs (4 + 2 packets, PSN 1006..1011): ok\n");
  rnr_then_receive(&a, &b, &c[0]);
  printf("3. SEND before B's receive was posted: delivered once B posted it\n");
  rnr_exhausted(&a, &c[1]);
  printf("4. SEND with rnr_retry 0 and no receive: IBV_WC_RNR_RETRY_EXC_ERR, A's QP in ERR\n");
  retry_exhausted(&a, &b, &c[2]);
  printf("5. RDMA WRITE to a destroyed QP, retry_cnt 2: IBV_WC_RETRY_EXC_ERR, A's QP in ERR\n");

  for (int i = 0; i < 3; ++i) {
    CHECK(ibv_destroy_qp(c[i].a) == 0, "ibv_destroy_qp: %s", strerror(errno));
    CHECK(!c[i].b || ibv_destroy_qp(c[i].b) == 0, "ibv_destroy_qp: %s", strerror(errno));
  }
  close_host(&a);
  close_host(&b);
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
