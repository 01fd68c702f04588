/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 8: errors and flush. Host A (first device) and host B (second device; the same device twice
 * if there is only one) share one RC connection. Five scenarios each make one work request fail
 * on purpose, and the program checks what both ends see:
 *   1. A SENDs from memory with a wrong lkey              (local protection error at A);
 *   2. A WRITEs to B with a wrong rkey                    (remote access error);
 *   3. A WRITEs into memory B registered without IBV_ACCESS_REMOTE_WRITE;
 *   4. A WRITEs to B's QP, whose qp_access_flags lack IBV_ACCESS_REMOTE_WRITE;
 *   5. A SENDs 100 bytes into B's 64-byte receive        (length error at B, invalid request at A).
 * In each, A posts the faulty WR and a good unsignaled SEND behind it; B has two receives posted.
 * The program checks the failed WR's status, that the QPs went to the error state
 * (ibv_query_qp(3)), that every other WR still posted completes with IBV_WC_WR_FLUSH_ERR (the
 * unsignaled SEND and B's receives too), and any asynchronous events. Then it recovers: both QPs
 * back to RESET and through INIT, RTR and RTS again, and a 64-byte SEND proves the connection
 * works. Exit status 0 means every check passed.
 *
 * Some devices report some of these errors with other statuses; the scenario table lists what
 * Soft-RoCE (rxe, Linux 6.1) reports where it departs from IBTA (tests/rxe/
 * conformance_rxe_failures.txt). The program accepts both, says which it saw, and fails on
 * anything else.
 *
 * Lab 8 handout: tutorials/lab08-errors-and-flush/README.md. This is the reference solution;
 * starter/errors.c is the same program with three parts left out (LAB GAP 1-3).
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

#define BUF_SIZE 4096
#define MSG_SIZE 64    /* every good message */
#define LONG_SIZE 100  /* scenario 5's SEND */
#define SMALL_RECV 64  /* scenario 5's receives */
#define RECV_SIZE 256  /* every other receive */
#define RECV_OFF 1024  /* B's receive buffers start here in B's buffer */
#define WRITE_OFF 3072 /* the WRITEs aim here in B's buffer */
#define CHECK(cond, ...)                               \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "errors: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                           \
      exit(1);                                         \
    }                                                  \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* scq; /* send completions */
  struct ibv_cq* rcq; /* receive completions */
  struct ibv_qp* qp;
  struct ibv_mr* mr;    /* the buffer, LOCAL_WRITE | REMOTE_WRITE */
  struct ibv_mr* ro_mr; /* the same buffer again, LOCAL_WRITE | REMOTE_READ: no remote writes */
  uint8_t* buf;
  union ibv_gid gid;
};

enum fault { BAD_LKEY, BAD_RKEY, MR_NO_REMOTE_WRITE, QP_NO_REMOTE_WRITE, RECV_TOO_SMALL };

/* One scenario and the statuses each end must see: the status of A's faulty WR, the status of B's
 * first receive, and whether the error moves B's QP to the error state too. a_rxe and b_rxe are what
 * Soft-RoCE (rxe, Linux 6.1) reports instead where it departs from IBTA (the handout's table). */
struct scenario {
  const char* what;
  enum fault fault;
  enum ibv_wc_status a_status, b_status; /* IBTA vol. 1 10.8.3, ibv_poll_cq(3) */
  int b_to_err;
  enum ibv_wc_status a_rxe, b_rxe;
};

// clang-format off
static const struct scenario kScenarios[] = {
    /* what                                          fault
     *   a_status                 b_status             b_to_err  a_rxe                   b_rxe */
    {"SEND with a wrong lkey",                       BAD_LKEY,
       IBV_WC_LOC_PROT_ERR,     IBV_WC_WR_FLUSH_ERR, 0,        IBV_WC_LOC_QP_OP_ERR,   IBV_WC_WR_FLUSH_ERR},
    {"RDMA WRITE with a wrong rkey",                 BAD_RKEY,
       IBV_WC_REM_ACCESS_ERR,   IBV_WC_WR_FLUSH_ERR, 1,        IBV_WC_REM_ACCESS_ERR,  IBV_WC_WR_FLUSH_ERR},
    {"RDMA WRITE into an MR without REMOTE_WRITE",   MR_NO_REMOTE_WRITE,
       IBV_WC_REM_ACCESS_ERR,   IBV_WC_WR_FLUSH_ERR, 1,        IBV_WC_REM_ACCESS_ERR,  IBV_WC_WR_FLUSH_ERR},
    {"RDMA WRITE to a QP without REMOTE_WRITE",      QP_NO_REMOTE_WRITE,
       IBV_WC_REM_INV_REQ_ERR,  IBV_WC_WR_FLUSH_ERR, 1,        IBV_WC_REM_INV_REQ_ERR, IBV_WC_WR_FLUSH_ERR},
    {"SEND of 100 bytes into a 64-byte receive",     RECV_TOO_SMALL,
       IBV_WC_REM_INV_REQ_ERR,  IBV_WC_LOC_LEN_ERR,  1,        IBV_WC_REM_OP_ERR,      IBV_WC_LOC_QP_OP_ERR},
};
// clang-format on
#define NUM_SCENARIOS (int)(sizeof kScenarios / sizeof kScenarios[0])

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */

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
  h->scq = ibv_create_cq(h->ctx, 16, NULL, NULL, 0);
  h->rcq = ibv_create_cq(h->ctx, 16, NULL, NULL, 0);
  CHECK(h->scq && h->rcq, "ibv_create_cq: %s", strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  h->ro_mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(h->ro_mr, "ibv_reg_mr (read-only): %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = h->scq,
      .recv_cq = h->rcq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

/* ibv_modify_qp(3), checked. Like ibv_post_send(3) and ibv_post_recv(3), it returns an errno value
 * on failure (errno itself need not be set). */
static void modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask, const char* who,
                      const char* what) {
  const int rc = ibv_modify_qp(qp, attr, mask);
  CHECK(rc == 0, "%s: %s: %s", who, what, strerror(rc));
}

/* RESET -> INIT -> RTR -> RTS. access is what the QP lets its peer do to it (qp_access_flags). */
static void connect_qp(struct host* h, const struct host* peer, uint32_t sq_psn, uint32_t rq_psn,
                       int access) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = access};
  modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, h->name, "INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer->qp->qp_num;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  modify_qp(h->qp, &a,
            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
            h->name, "RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = sq_psn;
  a.max_rd_atomic = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  modify_qp(h->qp, &a,
            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                IBV_QP_MAX_QP_RD_ATOMIC,
            h->name, "RTS");
}

/* Scenario k's PSNs: A's requests from 1000 * k, B's from 1000 * k + 500. */
static void connect_both(struct host* a, struct host* b, int k, int b_access) {
  const uint32_t psn_a = 1000u * (uint32_t)k, psn_b = psn_a + 500;
  connect_qp(a, b, psn_a, psn_b, IBV_ACCESS_REMOTE_WRITE);
  connect_qp(b, a, psn_b, psn_a, b_access);
}

static enum ibv_qp_state qp_state(struct ibv_qp* qp) {
  struct ibv_qp_attr attr;
  struct ibv_qp_init_attr init;
  const int rc = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
  CHECK(rc == 0, "ibv_query_qp: %s", strerror(rc));
  return attr.qp_state;
}

/* Whether qp reaches the error state within 1 s: the error completion and the state change are
 * two steps for a device, and a program may see the first an instant before the second. */
static int reaches_error_state(struct ibv_qp* qp) {
  const double deadline = now_s() + 1.0;
  while (qp_state(qp) != IBV_QPS_ERR)
    if (now_s() > deadline) return 0;
  return 1;
}

/* The enum name of a status, as the verbs header and the man pages spell it. */
static const char* status_name(enum ibv_wc_status st) {
  switch (st) {
    case IBV_WC_SUCCESS: return "IBV_WC_SUCCESS";
    case IBV_WC_LOC_LEN_ERR: return "IBV_WC_LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR: return "IBV_WC_LOC_QP_OP_ERR";
    case IBV_WC_LOC_PROT_ERR: return "IBV_WC_LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR: return "IBV_WC_WR_FLUSH_ERR";
    case IBV_WC_REM_INV_REQ_ERR: return "IBV_WC_REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR: return "IBV_WC_REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR: return "IBV_WC_REM_OP_ERR";
    case IBV_WC_LOC_ACCESS_ERR: return "IBV_WC_LOC_ACCESS_ERR";
    case IBV_WC_RETRY_EXC_ERR: return "IBV_WC_RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "IBV_WC_RNR_RETRY_EXC_ERR";
    default: return ibv_wc_status_str(st);
  }
}

/* The next completion on cq, waiting at most 5 s of wall time. */
static void next_wc(struct ibv_cq* cq, struct ibv_wc* wc, const char* what) {
  const double deadline = now_s() + 5.0;
  int n;
  while ((n = ibv_poll_cq(cq, 1, wc)) == 0) CHECK(now_s() < deadline, "%s: no completion within 5 s", what);
  CHECK(n == 1, "%s: ibv_poll_cq returned %d", what, n);
}

/* Nothing completes on cq for 100 ms. */
static void expect_no_wc(struct ibv_cq* cq, const char* what) {
  struct ibv_wc wc;
  const double deadline = now_s() + 0.1;
  while (now_s() < deadline) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    CHECK(n == 0, "%s: unexpected completion (wr_id %llu, %s)", what, (unsigned long long)wc.wr_id,
          status_name(wc.status));
  }
}

/* The completion of wr_id on cq, with status `want` (or `alt`, another device's reading of the same
 * error). Returns the status seen. On an error completion only wr_id, status, qp_num and vendor_err
 * are valid (ibv_poll_cq(3)): nothing else is looked at. */
static enum ibv_wc_status expect_wc(struct ibv_cq* cq, uint64_t wr_id, uint32_t qp_num,
                                    enum ibv_wc_status want, enum ibv_wc_status alt, const char* what) {
  struct ibv_wc wc;
  next_wc(cq, &wc, what);
  CHECK(wc.wr_id == wr_id && wc.qp_num == qp_num,
        "%s: completion of wr_id %llu on QP 0x%x, expected %llu on 0x%x", what, (unsigned long long)wc.wr_id,
        wc.qp_num, (unsigned long long)wr_id, qp_num);
  CHECK(wc.status == want || wc.status == alt, "%s: status %s, expected %s", what, status_name(wc.status),
        status_name(want));
  return wc.status;
}

/* The completions of n work requests flushed from one queue of qp, wr_ids first .. first + n - 1:
 * a queue flushes in the order its WRs were posted, each with IBV_WC_WR_FLUSH_ERR, signaled or not. */
static void drain_flushed(struct ibv_cq* cq, uint32_t qp_num, uint64_t first, int n, const char* what) {
  for (int i = 0; i < n; ++i)
    expect_wc(cq, first + i, qp_num, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR, what);
}

/* Recovery after an error: both QPs to RESET (a QP in ERR accepts only RESET or ERR), then INIT,
 * RTR and RTS again with fresh PSNs. Every flushed completion has been polled before: some
 * providers remove a QP's completions from its CQs when it is reset. */
static void recover(struct host* a, struct host* b, int k, int b_access) {
  struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
  modify_qp(a->qp, &reset, IBV_QP_STATE, "A", "to RESET");
  modify_qp(b->qp, &reset, IBV_QP_STATE, "B", "to RESET");
  CHECK(qp_state(a->qp) == IBV_QPS_RESET && qp_state(b->qp) == IBV_QPS_RESET, "a QP is not in RESET");
  connect_both(a, b, k, b_access);
}

static void fill(uint8_t* p, uint32_t len, uint8_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed + i * 7);
}

static void post_recv(struct host* h, uint64_t wr_id, uint32_t offset, uint32_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
  const int rc = ibv_post_recv(h->qp, &wr, &bad);
  CHECK(rc == 0, "ibv_post_recv (wr_id %llu): %s", (unsigned long long)wr_id, strerror(rc));
}

/* A SEND (rkey 0) or RDMA WRITE (to raddr with rkey) of len bytes from A's buffer at offset 0. */
static void post_send(struct host* h, uint64_t wr_id, uint32_t lkey, uint32_t len, uint64_t raddr,
                      uint32_t rkey, int signaled) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf, .length = len, .lkey = lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = rkey ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
                           .send_flags = signaled ? IBV_SEND_SIGNALED : 0},
                     *bad;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  const int rc = ibv_post_send(h->qp, &wr, &bad);
  CHECK(rc == 0, "ibv_post_send (wr_id %llu): %s", (unsigned long long)wr_id, strerror(rc));
}

/* The next async event of ctx, waiting at most timeout_ms of wall time; 0 if none came. */
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

/* "" when a device reported the status IBTA asks for, else a note naming both. */
static const char* departs(enum ibv_wc_status got, enum ibv_wc_status ibta) {
  static char note[128];
  if (got == ibta) return "";
  snprintf(note, sizeof note, " (as rxe reports it; IBTA: %s)", status_name(ibta));
  return note;
}

/* Every async event of h (A or B): a responder that refused a request may also report it as an
 * event of its QP (IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR), or only through the NAK and its
 * completions. Any other event fails the program. Each is acknowledged (ibv_ack_async_event(3)). */
static void check_async(struct host* h, const char* who, int responder_error) {
  struct ibv_async_event ev;
  int n = 0;
  while (next_async_event(h->ctx, &ev, 50)) {
    const int ok = responder_error && ev.element.qp == h->qp &&
                   (ev.event_type == IBV_EVENT_QP_REQ_ERR || ev.event_type == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(ok, "%s: unexpected async event %s", who, ibv_event_type_str(ev.event_type));
    printf("   %s: async event %s\n", who, ibv_event_type_str(ev.event_type));
    ibv_ack_async_event(&ev);
    ++n;
  }
  if (responder_error && n == 0) printf("   %s: no async event\n", who);
}

/* Scenario k (1-based): post B's two receives, then A's faulty WR and a good unsignaled SEND behind
 * it; check what each end sees. */
static void run_scenario(struct host* a, struct host* b, int k, const struct scenario* s) {
  const uint64_t ida = 10u * (uint64_t)k + 1, idb = 100 + ida; /* A's WRs ida, ida+1; B's idb, idb+1 */
  const uint32_t recv_len = s->fault == RECV_TOO_SMALL ? SMALL_RECV : RECV_SIZE;
  printf("%d. %s\n", k, s->what);
  memset(b->buf, 0, BUF_SIZE);
  fill(a->buf, LONG_SIZE, (uint8_t)k);
  post_recv(b, idb, RECV_OFF, recv_len);
  post_recv(b, idb + 1, RECV_OFF + RECV_SIZE, recv_len);

  const uintptr_t target = (uintptr_t)b->buf + WRITE_OFF;
  switch (s->fault) {
    /* A key is an index (bits 8-31) and a key byte. Changing the byte keeps the index, so the key
     * names this region with the wrong byte and can never be valid; a flipped index bit could name
     * the region registered just before or after it (ro_mr) with, by chance, the same byte. */
    case BAD_LKEY: post_send(a, ida, a->mr->lkey ^ 0x80, MSG_SIZE, 0, 0, 1); break;
    case BAD_RKEY: post_send(a, ida, a->mr->lkey, MSG_SIZE, target, b->mr->rkey ^ 0x80, 1); break;
    case MR_NO_REMOTE_WRITE: post_send(a, ida, a->mr->lkey, MSG_SIZE, target, b->ro_mr->rkey, 1); break;
    case QP_NO_REMOTE_WRITE: post_send(a, ida, a->mr->lkey, MSG_SIZE, target, b->mr->rkey, 1); break;
    case RECV_TOO_SMALL: post_send(a, ida, a->mr->lkey, LONG_SIZE, 0, 0, 1); break;
  }
  post_send(a, ida + 1, a->mr->lkey, MSG_SIZE, 0, 0, 0); /* good, unsignaled */

  /* A: the faulty WR fails, A's QP goes to ERR, the SEND behind it is flushed. */
  const enum ibv_wc_status ga = expect_wc(a->scq, ida, a->qp->qp_num, s->a_status, s->a_rxe, "A's faulty WR");
  CHECK(reaches_error_state(a->qp), "A's QP is not in the error state after %s", status_name(ga));
  drain_flushed(a->scq, a->qp->qp_num, ida + 1, 1, "A's unsignaled SEND");
  printf("   A: wr_id %llu %s%s; QP in IBV_QPS_ERR; wr_id %llu (unsignaled) IBV_WC_WR_FLUSH_ERR\n",
         (unsigned long long)ida, status_name(ga), departs(ga, s->a_status), (unsigned long long)ida + 1);

  if (s->fault == BAD_LKEY) {
    /* Posting to a QP in ERR is allowed, and the WR completes at once, flushed. */
    post_send(a, ida + 2, a->mr->lkey, MSG_SIZE, 0, 0, 1);
    drain_flushed(a->scq, a->qp->qp_num, ida + 2, 1, "SEND posted in ERR");
    printf("   A: wr_id %llu posted in ERR: IBV_WC_WR_FLUSH_ERR\n", (unsigned long long)ida + 2);
    /* Nothing reached B: its QP is still in RTS with both receives posted. */
    expect_no_wc(b->rcq, "B (nothing was sent)");
    CHECK(qp_state(b->qp) == IBV_QPS_RTS, "B's QP left RTS, though nothing reached it");
    /* B learns of the broken connection from its application, not its adapter: move it to ERR. */
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    modify_qp(b->qp, &err, IBV_QP_STATE, "B", "to ERR");
    printf("   B: nothing arrived, QP still in IBV_QPS_RTS; the program moves it to ERR\n");
  } else {
    CHECK(reaches_error_state(b->qp), "B's QP is not in the error state");
  }
  /* B: the first receive (flushed, or failed if the message reached it), then the second, flushed. */
  const enum ibv_wc_status gb =
      expect_wc(b->rcq, idb, b->qp->qp_num, s->b_status, s->b_rxe, "B's first receive");
  drain_flushed(b->rcq, b->qp->qp_num, idb + 1, 1, "B's second receive");
  printf("   B: wr_id %llu %s%s, wr_id %llu IBV_WC_WR_FLUSH_ERR; QP in IBV_QPS_ERR\n",
         (unsigned long long)idb, status_name(gb), departs(gb, s->b_status), (unsigned long long)idb + 1);
  check_async(a, "A", 0);
  check_async(b, "B", s->b_to_err);
  if (s->fault != RECV_TOO_SMALL)
    for (int i = 0; i < MSG_SIZE; ++i)
      CHECK(b->buf[WRITE_OFF + i] == 0, "the refused WRITE changed B's memory");
}

/* After a recovery: a 64-byte SEND A -> B arrives intact. */
static void check_connection(struct host* a, struct host* b, uint64_t id) {
  struct ibv_wc wc;
  fill(a->buf, MSG_SIZE, (uint8_t)id);
  post_recv(b, id + 100, RECV_OFF, RECV_SIZE);
  post_send(a, id, a->mr->lkey, MSG_SIZE, 0, 0, 1);
  expect_wc(a->scq, id, a->qp->qp_num, IBV_WC_SUCCESS, IBV_WC_SUCCESS, "SEND after recovery (A)");
  next_wc(b->rcq, &wc, "receive after recovery (B)");
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == id + 100 && wc.byte_len == MSG_SIZE,
        "receive after recovery: %s, wr_id %llu, %u bytes", status_name(wc.status),
        (unsigned long long)wc.wr_id, wc.byte_len);
  CHECK(memcmp(b->buf + RECV_OFF, a->buf, MSG_SIZE) == 0, "SEND after recovery: payload differs");
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  struct host a, b;
  open_host(&a, list[0]);
  open_host(&b, list[n > 1 ? 1 : 0]);
  connect_both(&a, &b, 1, IBV_ACCESS_REMOTE_WRITE);
  printf("A = %s qp 0x%x, B = %s qp 0x%x\n", a.name, a.qp->qp_num, b.name, b.qp->qp_num);

  for (int i = 0; i < NUM_SCENARIOS; ++i) {
    const int k = i + 1;
    run_scenario(&a, &b, k, &kScenarios[i]);
    /* Scenario 4 needs B's QP without remote write access: the recovery before it sets that. */
    const int next_access = k + 1 == 4 ? 0 : IBV_ACCESS_REMOTE_WRITE;
    recover(&a, &b, k + 1, next_access);
    check_connection(&a, &b, 10u * (uint64_t)k + 9);
    printf("   recovered: both QPs RESET -> INIT -> RTR -> RTS, a SEND goes through\n");
  }

  CHECK(ibv_destroy_qp(a.qp) == 0 && ibv_destroy_qp(b.qp) == 0, "ibv_destroy_qp: %s", strerror(errno));
  struct host* hs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    struct host* h = hs[i];
    CHECK(ibv_dereg_mr(h->ro_mr) == 0 && ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->scq) == 0 &&
              ibv_destroy_cq(h->rcq) == 0 && ibv_dealloc_pd(h->pd) == 0 && ibv_close_device(h->ctx) == 0,
          "teardown: %s", strerror(errno));
    free(h->buf);
  }
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
