/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 5: completion queues. Host A's QP completes into a deliberately small CQ (4 entries asked
 * for), so its ring wraps and the owner bit of the CQEs flips on each pass. Then:
 *   1. four batches of 5 signaled RDMA WRITEs A -> B, each batch collected by a polling loop
 *      (20 completions: the ring wraps twice);
 *   2. cq->cqe + 2 signaled WRITEs posted without polling: the CQ overflows. The program waits
 *      for the asynchronous event IBV_EVENT_CQ_ERR (ibv_get_async_event(3)), then checks what
 *      happened to the QP and polls the completions that did fit.
 * Every WRITE's bytes are verified at B. Exit status 0 means every check passed.
 *
 * On overflow, IBTA 11.6.2 puts the QPs that complete into the broken CQ in the error state
 * (IBV_EVENT_QP_FATAL); the simulator does so. rxe reports only the CQ error and leaves the QP
 * in RTS. The program accepts either, says which one it saw, and fails on anything else.
 *
 * Lab 5 handout: tutorials/lab05-completion-queues/README.md. This is the STARTER: the places
 * marked "LAB GAP" are yours to fill in (README.md, steps 2 and 4).
 *
 * Nothing here knows about the simulator: it runs on RoCE hardware, on rxe, or under
 * `hcasim run`.
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MSG_SIZE 64
#define MAX_WRS 16 /* send queue depth; also the most WRITEs in flight at once */
#define BUF_SIZE (MAX_WRS * MSG_SIZE)
#define BATCH 5
#define BATCHES 4
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "completion_queues: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                                      \
      exit(1);                                                    \
    }                                                             \
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

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */

static void open_host(struct host* h, struct ibv_device* dev, int cqe) {
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  h->cq = ibv_create_cq(h->ctx, cqe, NULL, NULL, 0);
  CHECK(h->cq, "ibv_create_cq(%d): %s", cqe, strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq,
      .recv_cq = h->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = MAX_WRS, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

/* RESET -> INIT -> RTR -> RTS, the attributes ibv_modify_qp(3) requires at each step. */
static void connect_qp(struct host* h, const struct host* peer) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
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

static void fill(uint8_t* p, uint32_t len, uint32_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed * 31 + i * 7);
}

/* Post `count` signaled 64-byte RDMA WRITEs A -> B, wr_ids first_id, first_id + 1, ...; WRITE k
 * goes from A's slot k to B's slot k. Nothing is polled here. */
static void post_writes(struct host* a, const struct host* b, int count, uint64_t first_id) {
  for (int k = 0; k < count; ++k) {
    uint8_t* src = a->buf + k * MSG_SIZE;
    fill(src, MSG_SIZE, (uint32_t)(first_id + k));
    struct ibv_sge sge = {.addr = (uintptr_t)src, .length = MSG_SIZE, .lkey = a->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = first_id + k,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.rdma.remote_addr = (uintptr_t)b->buf + k * MSG_SIZE;
    wr.wr.rdma.rkey = b->mr->rkey;
    CHECK(ibv_post_send(a->qp, &wr, &bad) == 0, "ibv_post_send (wr_id %llu): %s",
          (unsigned long long)(first_id + k), strerror(errno));
  }
}

/* The completion of WRITE `k` of a batch whose first wr_id is first_id: successful, in posting
 * order, and the bytes are at B. */
static void check_wc(const struct ibv_wc* wc, int k, uint64_t first_id, const struct host* a,
                     const struct host* b) {
  CHECK(wc->status == IBV_WC_SUCCESS, "wr_id %llu: completion status %s", (unsigned long long)wc->wr_id,
        ibv_wc_status_str(wc->status));
  CHECK(wc->wr_id == first_id + k && wc->opcode == IBV_WC_RDMA_WRITE && wc->qp_num == a->qp->qp_num,
        "completion wr_id %llu opcode %d, expected wr_id %llu (RDMA_WRITE, in posting order)",
        (unsigned long long)wc->wr_id, wc->opcode, (unsigned long long)(first_id + k));
  CHECK(memcmp(a->buf + k * MSG_SIZE, b->buf + k * MSG_SIZE, MSG_SIZE) == 0, "wr_id %llu: bytes differ at B",
        (unsigned long long)wc->wr_id);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The next async event of `ctx`, waiting at most `timeout_ms` of wall time; 0 if none came.
 * Non-blocking reads, so a device that never reports cannot hang the program. */
static int next_async_event(struct ibv_context* ctx, struct ibv_async_event* ev, int timeout_ms) {
  const int flags = fcntl(ctx->async_fd, F_GETFL);
  CHECK(flags >= 0 && fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl: %s", strerror(errno));
  const double deadline = now_s() + timeout_ms / 1000.0;
  int got = 0;
  while (!got && now_s() < deadline) {
    if (ibv_get_async_event(ctx, ev) == 0) {
      got = 1;
    } else {
      CHECK(errno == EAGAIN, "ibv_get_async_event: %s", strerror(errno));
      struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
      poll(&p, 1, 10);
    }
  }
  CHECK(fcntl(ctx->async_fd, F_SETFL, flags) == 0, "fcntl: %s", strerror(errno));
  return got;
}

static enum ibv_qp_state qp_state(struct ibv_qp* qp) {
  struct ibv_qp_attr attr;
  struct ibv_qp_init_attr init;
  CHECK(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0, "ibv_query_qp: %s", strerror(errno));
  return attr.qp_state;
}

/* After IBV_EVENT_CQ_ERR: take every further async event (each must be acknowledged before the
 * CQ or QP can be destroyed), then check the QP is in one of the two states devices leave it in. */
static void check_qp_after_overflow(struct host* a) {
  int qp_fatal = 0, more_cq_err = 0;
  struct ibv_async_event ev;
  while (next_async_event(a->ctx, &ev, 100)) {
    if (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == a->qp) {
      ++qp_fatal;
    } else {
      CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == a->cq, "unexpected async event %s",
            ibv_event_type_str(ev.event_type));
      ++more_cq_err;
    }
    ibv_ack_async_event(&ev);
  }
  const enum ibv_qp_state s = qp_state(a->qp);
  if (qp_fatal == 1 && s == IBV_QPS_ERR) {
    printf("   then IBV_EVENT_QP_FATAL: A's QP is in the error state (IBTA 11.6.2)\n");
  } else {
    CHECK(qp_fatal == 0 && s == IBV_QPS_RTS, "after the CQ error: %d QP_FATAL event(s), QP state %d",
          qp_fatal, s);
    printf(
        "   note: no IBV_EVENT_QP_FATAL and A's QP is still in RTS (%d more CQ_ERR event(s)): this device "
        "reports only the CQ error, as rxe does\n",
        more_cq_err);
  }
}

/* What is left in the overflowed CQ: the completions that fitted, in order, all successful. */
static void drain_after_overflow(struct host* a, const struct host* b, int posted, uint64_t first_id) {
  struct ibv_wc wc;
  int got = 0, n;
  while ((n = ibv_poll_cq(a->cq, 1, &wc)) == 1) check_wc(&wc, got++, first_id, a, b);
  CHECK(n == 0, "ibv_poll_cq returned %d", n);
  CHECK(got >= a->cq->cqe && got < posted, "%d completions left in the CQ (cqe %d, %d posted)", got,
        a->cq->cqe, posted);
  /* The WRITEs whose completions were lost did their work all the same: the bytes are at B. */
  for (int k = got; k < posted; ++k)
    CHECK(memcmp(a->buf + k * MSG_SIZE, b->buf + k * MSG_SIZE, MSG_SIZE) == 0, "WRITE %d: bytes differ at B",
          k);
  printf("   %d of the %d completions were in the CQ, %d lost; all %d WRITEs reached B\n", got, posted,
         posted - got, posted);
}

int main(void) {
  int num_devices = 0;
  struct ibv_device** list = ibv_get_device_list(&num_devices);
  CHECK(list && num_devices > 0, "no RDMA devices found");
  struct host a, b;
  open_host(&a, list[0], 4); /* small on purpose: the ring wraps */
  open_host(&b, list[num_devices > 1 ? 1 : 0], 16);
  connect_qp(&a, &b);
  connect_qp(&b, &a);
  printf("A = %s qp 0x%x, B = %s qp 0x%x; A's CQ: asked for 4 entries, got cqe = %d\n", a.name, a.qp->qp_num,
         b.name, b.qp->qp_num, a.cq->cqe);

  /* 1. Batches of WRITEs, each collected by a polling loop: 20 CQEs through a small ring. */
  uint64_t id = 1;
  for (int i = 0; i < BATCHES; ++i, id += BATCH) {
    post_writes(&a, &b, BATCH, id);
    /* ibv_poll_cq(3) never blocks: it returns what is there now (up to 4 here), 0 if nothing. */
    /* LAB GAP 1: the polling loop. Collect the BATCH completions of this batch from A's CQ into
     * an array of 4 struct ibv_wc, calling ibv_poll_cq(a.cq, 4, wc) until you have all of them;
     * hand each to check_wc(&wc[j], k, id, &a, &b), where k counts the completions of the batch
     * from 0. Give up with an error after 5 s without one (now_s() reads the clock). Set
     * gap1_done to 1 when done. */
    int gap1_done = 0;
    CHECK(gap1_done, "LAB GAP 1 is not filled in: write the polling loop (README step 2)");
  }
  printf("1. %d batches of %d signaled RDMA WRITEs, each polled to the end: %d completions, ok\n", BATCHES,
         BATCH, BATCHES * BATCH);

  /* 2. More signaled WRITEs than the CQ holds, none polled: the CQ overflows. */
  const int posted = a.cq->cqe + 2;
  CHECK(posted <= MAX_WRS, "A's CQ has cqe = %d: too big for this lab's send queue", a.cq->cqe);
  post_writes(&a, &b, posted, id);
  /* The overflow is reported as an asynchronous event of the device, not in the CQ. */
  /* LAB GAP 2: wait for A's next async event with next_async_event(a.ctx, &ev, 5000) (fail if
   * none came), check that it is IBV_EVENT_CQ_ERR and names A's CQ (ev.element.cq), and
   * acknowledge it (ibv_get_async_event(3)). Set gap2_done to 1 when done. */
  int gap2_done = 0;
  CHECK(gap2_done, "LAB GAP 2 is not filled in: wait for the CQ error event (README step 4)");
  printf("2. %d signaled RDMA WRITEs, not polled: IBV_EVENT_CQ_ERR on A's CQ\n", posted);
  check_qp_after_overflow(&a);
  drain_after_overflow(&a, &b, posted, id);

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
