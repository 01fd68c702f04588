/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 9: credit-based flow control. Host A (first device) streams 16 SENDs of 512 bytes to host B
 * (second device; the same device twice if there is only one), which keeps only 4 receives posted
 * for them and posts each one again once it has taken the message out of it. Two parts, each on
 * a connection of its own:
 *   1. without credits: A posts all 16 SENDs at once. Most of them reach B before it has a
 *      receive for them, and B's adapter answers those with RNR NAKs ("receiver not ready"):
 *      A's adapter waits min_rnr_timer and sends them again (rnr_retry 7: for ever);
 *   2. with credits: A may send only while it holds a credit, one per receive B has posted for
 *      it. B gives credits back in batches with a zero-length SEND_WITH_IMM whose 32-bit
 *      immediate packs two 16-bit counters: receives posted again for A's data messages, and
 *      receives posted again for A's own credit messages (acknowledgements of acknowledgements).
 *      No SEND can then arrive before its receive: there is nothing to RNR NAK.
 * Every message is checked (in order, every byte), every completion's status too. Because both
 * hosts live in this one process, the program also counts, as it posts each SEND, whether B
 * already had a receive posted for it: in part 2 that must hold for every SEND (checked); in
 * part 1 the program reports how often it did not. Exit status 0 means every check passed.
 *
 * The program cannot see RNR NAKs (the adapter retries on its own): the step trace and the
 * simulator's counters show them. Run it with `2` or `1` as argument to run only that part.
 *
 * Lab 9 handout: tutorials/lab09-credit-flow-control/README.md. This is the reference solution;
 * starter/credits.c is the same program with three parts left out (LAB GAP 1-3).
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_MSGS 16        /* data messages A sends to B in each part */
#define MSG_SIZE 512     /* bytes per data message */
#define DATA_CREDITS 4   /* receives B keeps posted for A's data messages */
#define ACK_CREDITS 4    /* receives each side keeps posted for the other's credit messages */
#define DATA_THRESHOLD 2 /* B returns data credits once it has this many to return */
#define ACK_THRESHOLD 2  /* a side returns ack credits once it has this many to return */
#define RECV_SLOTS (DATA_CREDITS + ACK_CREDITS)
#define BUF_SIZE ((N_MSGS + RECV_SLOTS) * MSG_SIZE)
#define CREDIT_WR_ID 1000u /* wr_id of a credit message: 1000 + its number (data messages: 0..15) */

#define CHECK(cond, ...)                                \
  do {                                                  \
    if (!(cond)) {                                      \
      fprintf(stderr, "credits: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                            \
      exit(1);                                          \
    }                                                   \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_mr* mr;
  uint8_t* buf; /* A: the 16 messages, then the receive slots; B: the receive slots */
  union ibv_gid gid;
};

/* One end of the connection, with its flow-control state. */
struct end {
  const char* who; /* "A" or "B" */
  struct host* h;
  struct ibv_cq* cq; /* this end's send and receive completions */
  struct ibv_qp* qp;
  struct end* peer;
  int use_credits;
  /* Credits: receives the peer has posted for us and not yet used. */
  uint32_t data_credits; /* for our data messages */
  uint32_t ack_credits;  /* for our credit messages */
  /* What we took out of receives and posted again, but have not yet told the peer. */
  uint32_t unacked_data; /* receives posted again after one of the peer's data messages */
  uint32_t unacked_acks; /* receives posted again after one of the peer's credit messages */
  /* Counts. */
  uint32_t recvs_posted;  /* receives ever posted on this QP */
  uint32_t sends_posted;  /* SENDs ever posted to the peer: each takes one of its receives */
  uint32_t sends_unready; /* of those, posted while the peer had no receive waiting for it */
  uint32_t sends_pending; /* SENDs not yet completed */
  uint32_t data_total;    /* data messages this end has to send: A N_MSGS, B none */
  uint32_t data_sent, data_received, credits_sent, credits_received;
  uint32_t sent_imm[64]; /* the immediates of the first 64 credit messages sent, for the printout */
};

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
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

static void create_end(struct end* e, const char* who, struct host* h, int use_credits) {
  memset(e, 0, sizeof *e);
  e->who = who;
  e->h = h;
  e->use_credits = use_credits;
  e->cq = ibv_create_cq(h->ctx, 64, NULL, NULL, 0);
  CHECK(e->cq, "ibv_create_cq: %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = N_MSGS, .max_recv_wr = RECV_SLOTS, .max_send_sge = 1, .max_recv_sge = 1}};
  e->qp = ibv_create_qp(h->pd, &ia);
  CHECK(e->qp, "ibv_create_qp: %s", strerror(errno));
}

/* RESET -> INIT -> RTR -> RTS. min_rnr_timer 1 (0.01 ms) is the wait B's RNR NAKs ask for;
 * rnr_retry 7 makes A retry for ever, so part 1 ends however many RNR NAKs it meets. */
static void connect_qp(struct ibv_qp* qp, const struct host* peer, uint32_t peer_qpn, uint32_t sq_psn,
                       uint32_t rq_psn) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = 0};
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
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
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

/* The receive slots start after A's 16 messages (A and B use the same layout). */
static uint8_t* slot_addr(struct end* e, uint32_t slot) { return e->h->buf + (N_MSGS + slot) * MSG_SIZE; }

static void post_recv(struct end* e, uint32_t slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)slot_addr(e, slot), .length = MSG_SIZE, .lkey = e->h->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(e->qp, &wr, &bad) == 0, "ibv_post_recv (%s): %s", e->who, strerror(errno));
  ++e->recvs_posted;
}

/* Every SEND goes through here: count whether the peer had a receive posted for it. SENDs and
 * receives are matched in order, so SEND number n (from 0) takes the peer's receive number n. */
static void post_send(struct end* e, struct ibv_send_wr* wr) {
  struct ibv_send_wr* bad;
  if (e->sends_posted >= e->peer->recvs_posted) ++e->sends_unready;
  CHECK(ibv_post_send(e->qp, wr, &bad) == 0, "ibv_post_send (%s): %s", e->who, strerror(errno));
  ++e->sends_posted;
  ++e->sends_pending;
}

static void fill_message(uint8_t* p, uint32_t i) {
  memcpy(p, &i, sizeof i); /* the message's number first, then a pattern */
  for (uint32_t k = sizeof i; k < MSG_SIZE; ++k) p[k] = (uint8_t)(i * 31 + k * 7);
}

/* Post the next data message (a 512-byte SEND, wr_id = its number). */
static void send_data(struct end* a) {
  const uint32_t i = a->data_sent;
  struct ibv_sge sge = {
      .addr = (uintptr_t)a->h->buf + i * MSG_SIZE, .length = MSG_SIZE, .lkey = a->h->mr->lkey};
  struct ibv_send_wr wr = {
      .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
  post_send(a, &wr);
  ++a->data_sent;
}

/* Post every data message we may. Without credits, all of them; with credits, one per credit. */
static void send_what_we_may(struct end* a) {
  while (a->data_sent < a->data_total) {
    if (a->use_credits) {
      if (a->data_credits == 0) return;
      --a->data_credits;
    }
    send_data(a);
  }
}

/* The immediate of a credit message: two 16-bit counters in one 32-bit value. */
static uint32_t pack_credits(uint32_t data, uint32_t acks) { return (data << 16) | acks; }

/* Send a credit message if one is due and allowed. It is due when enough data receives, or
 * enough receives for the peer's credit messages, have been posted again since the last one.
 * It needs a credit of its own (a receive at the peer): the last ack credit is kept for a message
 * that returns ack credits, so that one can always go out and unblock the peer. */
static void send_credits(struct end* e) {
  const int acks_due = e->unacked_acks >= ACK_THRESHOLD;
  if (!acks_due && e->unacked_data < DATA_THRESHOLD) return;
  if (e->ack_credits < (acks_due ? 1u : 2u)) return;
  --e->ack_credits;
  const uint32_t imm = pack_credits(e->unacked_data, e->unacked_acks);
  struct ibv_send_wr wr = {.wr_id = CREDIT_WR_ID + e->credits_sent,
                           .sg_list = NULL,
                           .num_sge = 0, /* zero length: the immediate is the whole message */
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(imm)};
  post_send(e, &wr);
  e->unacked_data = 0;
  e->unacked_acks = 0;
  if (e->credits_sent < 64) e->sent_imm[e->credits_sent] = imm;
  ++e->credits_sent;
}

/* A credit message arrived: take back the credits it returns. */
static void credits_received(struct end* e, uint32_t imm) {
  const uint32_t data = imm >> 16, acks = imm & 0xffff;
  CHECK(e->data_credits + data <= DATA_CREDITS && e->ack_credits + acks <= ACK_CREDITS,
        "%s: credit message (data %u, acks %u) returns more than was used (holding data %u, acks %u)", e->who,
        data, acks, e->data_credits, e->ack_credits);
  e->data_credits += data;
  e->ack_credits += acks;
  ++e->unacked_acks; /* its receive is posted again: the peer gets that credit back later */
  ++e->credits_received;
}

/* B: a data message arrived in a receive slot: check it. */
static void data_received(struct end* b, const struct ibv_wc* wc) {
  const uint8_t* p = slot_addr(b, (uint32_t)wc->wr_id);
  uint8_t want[MSG_SIZE];
  fill_message(want, b->data_received);
  CHECK(wc->byte_len == MSG_SIZE, "B: data message %u has %u bytes, expected %d", b->data_received,
        wc->byte_len, MSG_SIZE);
  CHECK(memcmp(p, want, MSG_SIZE) == 0, "B: data message %u differs from what A sent (number in it: %u)",
        b->data_received, *(const uint32_t*)p);
  ++b->data_received;
}

static void handle(struct end* e, const struct ibv_wc* wc) {
  CHECK(wc->status == IBV_WC_SUCCESS, "%s: completion of wr_id %llu: %s", e->who,
        (unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status));
  if (wc->opcode == IBV_WC_SEND) {
    CHECK(e->sends_pending > 0, "%s: a send completion with no SEND outstanding", e->who);
    --e->sends_pending;
    return;
  }
  CHECK(wc->opcode == IBV_WC_RECV && wc->wr_id < RECV_SLOTS,
        "%s: unexpected completion (opcode %d, wr_id %llu)", e->who, wc->opcode,
        (unsigned long long)wc->wr_id);
  if (wc->wc_flags & IBV_WC_WITH_IMM) {
    CHECK(e->use_credits && wc->byte_len == 0, "%s: unexpected SEND with immediate (%u bytes)", e->who,
          wc->byte_len);
    credits_received(e, ntohl(wc->imm_data));
  } else {
    CHECK(e->peer->data_sent > e->data_received, "%s: a data message nobody sent", e->who);
    data_received(e, wc);
    ++e->unacked_data;
  }
  post_recv(e, (uint32_t)wc->wr_id); /* the slot is free again */
}

/* One look at e's CQ: handle what is there, then at once send what the credits now allow (data
 * first, then a credit message). Reacting before the next poll matters: an empty poll is where
 * time passes. */
static void progress(struct end* e) {
  struct ibv_wc wc[16];
  const int n = ibv_poll_cq(e->cq, 16, wc);
  CHECK(n >= 0, "%s: ibv_poll_cq returned %d", e->who, n);
  for (int i = 0; i < n; ++i) handle(e, &wc[i]);
  send_what_we_may(e);
  if (e->use_credits) send_credits(e);
}

/* Every message has arrived, every SEND (credit messages too) has completed, and every credit
 * message has been taken by its receiver, which then had nothing more to send: nothing is in
 * flight, and nothing will be. */
static int quiet(const struct end* a, const struct end* b) {
  return b->data_received == N_MSGS && a->sends_pending == 0 && b->sends_pending == 0 &&
         a->credits_received == b->credits_sent && b->credits_received == a->credits_sent;
}

/* One part: A streams N_MSGS to B over a new connection, with or without credits. */
static void run_part(struct host* ha, struct host* hb, int use_credits, uint32_t psn_a, uint32_t psn_b,
                     struct end* a, struct end* b) {
  create_end(a, "A", ha, use_credits);
  create_end(b, "B", hb, use_credits);
  a->peer = b;
  b->peer = a;
  a->data_total = N_MSGS;
  connect_qp(a->qp, hb, b->qp->qp_num, psn_a, psn_b);
  connect_qp(b->qp, ha, a->qp->qp_num, psn_b, psn_a);
  for (uint32_t i = 0; i < N_MSGS; ++i) fill_message(ha->buf + i * MSG_SIZE, i);
  memset(hb->buf + N_MSGS * MSG_SIZE, 0, RECV_SLOTS * MSG_SIZE);
  /* B: receives for A's data messages (and, with credits, for A's credit messages); A: with
   * credits, receives for B's credit messages. Both sides know these numbers in advance: they are
   * the credits each side starts with. */
  for (uint32_t s = 0; s < (use_credits ? RECV_SLOTS : DATA_CREDITS); ++s) post_recv(b, s);
  if (use_credits) {
    for (uint32_t s = 0; s < ACK_CREDITS; ++s) post_recv(a, s);
    a->data_credits = DATA_CREDITS;
    a->ack_credits = ACK_CREDITS;
    b->ack_credits = ACK_CREDITS; /* B sends no data: no data credits */
  }
  const double deadline = now_s() + 10.0;
  for (;;) {
    progress(a);
    progress(b);
    if (quiet(a, b)) break;
    CHECK(now_s() < deadline,
          "part %d: stuck after 10 s: A sent %u, B received %u; A holds data %u ack %u credits, B holds ack "
          "%u; "
          "SENDs outstanding A %u, B %u",
          use_credits ? 2 : 1, a->data_sent, b->data_received, a->data_credits, a->ack_credits,
          b->ack_credits, a->sends_pending, b->sends_pending);
  }
  CHECK(a->data_sent == N_MSGS && b->data_received == N_MSGS, "part %d: %u of %d messages arrived",
        use_credits ? 2 : 1, b->data_received, N_MSGS);
}

/* "B sent 3 credit messages (data, acks): (4,0) (2,0) (2,1)" */
static void print_credit_messages(const struct end* e) {
  printf("   %s sent %u credit messages (data, acks):", e->who, e->credits_sent);
  for (uint32_t i = 0; i < e->credits_sent && i < 64; ++i)
    printf(" (%u,%u)", e->sent_imm[i] >> 16, e->sent_imm[i] & 0xffff);
  printf("\n");
}

static void destroy_end(struct end* e) {
  CHECK(ibv_destroy_qp(e->qp) == 0, "ibv_destroy_qp: %s", strerror(errno));
  CHECK(ibv_destroy_cq(e->cq) == 0, "ibv_destroy_cq: %s", strerror(errno));
}

static void close_host(struct host* h) {
  CHECK(ibv_dereg_mr(h->mr) == 0 && ibv_dealloc_pd(h->pd) == 0 && ibv_close_device(h->ctx) == 0,
        "teardown: %s", strerror(errno));
  free(h->buf);
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : 0;
  CHECK(argc <= 2 && only >= 0 && only <= 2, "usage: credits [1|2] (run only part 1 or part 2)");
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  struct host ha, hb;
  open_host(&ha, list[0]);
  open_host(&hb, list[n > 1 ? 1 : 0]);
  struct end a, b;

  if (only != 2) {
    run_part(&ha, &hb, 0, 1000, 5000, &a, &b);
    printf("1. without credits: A = %s qp 0x%x, B = %s qp 0x%x\n", ha.name, a.qp->qp_num, hb.name,
           b.qp->qp_num);
    printf(
        "   %d SENDs of %d bytes, B keeping %d receives posted: all delivered in order, every byte checked\n",
        N_MSGS, MSG_SIZE, DATA_CREDITS);
    printf("   %u of the %d SENDs were posted before B had a receive for them\n", a.sends_unready, N_MSGS);
    destroy_end(&a);
    destroy_end(&b);
  }
  if (only != 1) {
    run_part(&ha, &hb, 1, 2000, 6000, &a, &b);
    printf("2. with credits: A = %s qp 0x%x, B = %s qp 0x%x\n", ha.name, a.qp->qp_num, hb.name, b.qp->qp_num);
    printf("   %d SENDs of %d bytes, %d data credits: all delivered in order, every byte checked\n", N_MSGS,
           MSG_SIZE, DATA_CREDITS);
    CHECK(a.sends_unready == 0 && b.sends_unready == 0,
          "part 2: %u of A's and %u of B's SENDs were posted before the peer had a receive for them",
          a.sends_unready, b.sends_unready);
    printf("   every SEND, data or credit message, was posted after its receive (none could be RNR NAKed)\n");
    print_credit_messages(&b);
    print_credit_messages(&a);
    destroy_end(&a);
    destroy_end(&b);
  }
  close_host(&ha);
  close_host(&hb);
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
