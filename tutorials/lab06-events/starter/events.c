/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 6: completion events. Host A (first device) sends 64-byte messages to host B (second
 * device; the same device twice if there is only one) over one RC connection. B does not spin on
 * its CQ: it sleeps on a completion channel, whose file descriptor is non-blocking and watched
 * with epoll(7), and asks for events with ibv_req_notify_cq(3).
 *   1. B arms its CQ for solicited completions only. A sends 3 SENDs without and 1 with
 *      IBV_SEND_SOLICITED: the 3 raise no event, the 4th does; B then polls all 4.
 *   2. The arm-then-poll race, made to happen: B polls (empty), a message arrives, and only
 *      then does B arm. No event comes for a completion that is already in the CQ, so a program
 *      that slept now would sleep for ever. Polling once more after arming finds it.
 *   3. An event loop: wait for an event, count it, re-arm, poll until empty; two bursts of 3
 *      messages. One event per arm, however many completions follow it. Every event taken is
 *      acknowledged (ibv_ack_cq_events) before the CQ is destroyed.
 * Every message's completion (status, wr_id, order, length) and bytes are checked. Exit status 0
 * means every check passed.
 *
 * Lab 6 handout: tutorials/lab06-events/README.md. This is the STARTER: the places marked
 * "LAB GAP" are yours to fill in (README.md, steps 2 to 5).
 *
 * Nothing here knows about the simulator: it runs on RoCE hardware, on rxe, or under
 * `hcasim run`.
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define MSG_SIZE 64
#define BURST 3                      /* messages in each of part 3's two bursts */
#define MESSAGES (4 + 1 + 2 * BURST) /* part 1, part 2, part 3 */
#define BUF_SIZE (MESSAGES * MSG_SIZE)
_Static_assert(MESSAGES <= 16, "B posts a receive for every message up front, into a queue of 16");
#define CHECK(cond, ...)                               \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "events: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                           \
      exit(1);                                         \
    }                                                  \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_comp_channel* channel; /* B only: A's CQ is polled, never armed */
  int epfd;                         /* B only: the epoll set that watches the channel's fd */
  struct ibv_cq* cq;                /* the QP's send and receive completions */
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* buf; /* message k (1..MESSAGES) lives at offset (k - 1) * MSG_SIZE */
  union ibv_gid gid;
};

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void open_host(struct host* h, struct ibv_device* dev, int with_channel) {
  memset(h, 0, sizeof *h);
  h->epfd = -1;
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  if (with_channel) {
    h->channel = ibv_create_comp_channel(h->ctx);
    CHECK(h->channel, "ibv_create_comp_channel: %s", strerror(errno));
  }
  /* The CQ reports its events to the channel (NULL: no events, polling only). */
  h->cq = ibv_create_cq(h->ctx, 32, h, h->channel, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq,
      .recv_cq = h->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

/* RESET -> INIT -> RTR -> RTS, the attributes ibv_modify_qp(3) requires at each step. */
static void connect_qp(struct host* h, const struct host* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = 0};
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

/* Make the channel's fd non-blocking and watch it with an epoll set, so that waiting for an
 * event can have a timeout and can sit in the same loop as the program's other fds. */
static void watch_channel(struct host* h) {
  /* LAB GAP 1: the channel's file descriptor is h->channel->fd. Add O_NONBLOCK to its flags
   * (fcntl(2) F_GETFL, then F_SETFL), create an epoll set with epoll_create1(EPOLL_CLOEXEC) into
   * h->epfd, and add the fd to it for EPOLLIN (epoll_ctl(2), EPOLL_CTL_ADD). Check every call.
   * Then set gap1_done to 1. */
  (void)h; /* unused until the gap is filled in */
  int gap1_done = 0;
  CHECK(gap1_done,
        "LAB GAP 1 is not filled in: make the channel fd non-blocking, watch it with epoll (README step 2)");
}

/* The next completion event of h's channel, waiting at most timeout_ms of wall time: 1 and the
 * CQ it is about in *cq, or 0 if none came. The fd is non-blocking, so ibv_get_cq_event returns
 * at once (EAGAIN) when there is nothing to take; epoll_wait sleeps until the fd is readable,
 * in slices of at most 10 ms so the deadline is checked. The caller acknowledges the event. */
static int wait_cq_event(struct host* h, int timeout_ms, struct ibv_cq** cq) {
  const double deadline = now_s() + timeout_ms / 1000.0;
  for (;;) {
    void* cq_context;
    if (ibv_get_cq_event(h->channel, cq, &cq_context) == 0) {
      CHECK(cq_context == h, "the event's cq_context is not the one given to ibv_create_cq");
      return 1;
    }
    CHECK(errno == EAGAIN, "ibv_get_cq_event: %s", strerror(errno));
    if (now_s() >= deadline) return 0;
    struct epoll_event ev;
    const int n = epoll_wait(h->epfd, &ev, 1, 10);
    CHECK(n >= 0 || errno == EINTR, "epoll_wait: %s", strerror(errno));
  }
}

/* Message k's pattern: the bytes A sends and B must receive. */
static void fill(uint8_t* p, int k) {
  for (int i = 0; i < MSG_SIZE; ++i) p[i] = (uint8_t)(k * 29 + i * 7);
}

/* B's receive for message k: wr_id 100 + k, into B's slot k. */
static void post_recv(struct host* b, int k) {
  struct ibv_sge sge = {
      .addr = (uintptr_t)b->buf + (k - 1) * MSG_SIZE, .length = MSG_SIZE, .lkey = b->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = 100 + k, .sg_list = &sge, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(b->qp, &wr, &bad) == 0, "ibv_post_recv: %s", strerror(errno));
}

/* A's SEND of message k (wr_id k) from A's slot k; flags: IBV_SEND_SOLICITED or 0. */
static void post_send(struct host* a, int k, unsigned flags) {
  uint8_t* src = a->buf + (k - 1) * MSG_SIZE;
  fill(src, k);
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = MSG_SIZE, .lkey = a->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = k,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED | flags},
                     *bad;
  CHECK(ibv_post_send(a->qp, &wr, &bad) == 0, "ibv_post_send (message %d): %s", k, strerror(errno));
}

/* A's completions of messages first .. first + count - 1, in order and successful. A polls: its
 * CQ has no channel. When they are in, B has the messages (RC: B acknowledged them). */
static void await_sends(struct host* a, int first, int count) {
  const double deadline = now_s() + 5.0;
  for (int k = first; k < first + count;) {
    struct ibv_wc wc;
    const int n = ibv_poll_cq(a->cq, 1, &wc);
    CHECK(n >= 0, "ibv_poll_cq (A) returned %d", n);
    if (n == 0) {
      CHECK(now_s() < deadline, "A: no completion of message %d within 5 s", k);
      continue;
    }
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == (uint64_t)k,
          "A: completion of wr_id %llu (%s), expected the SEND of message %d", (unsigned long long)wc.wr_id,
          ibv_wc_status_str(wc.status), k);
    ++k;
  }
}

/* B's completion of message k: successful, in order, 64 bytes, the bytes A sent. */
static void check_recv(const struct ibv_wc* wc, int k, const struct host* a, const struct host* b) {
  CHECK(wc->status == IBV_WC_SUCCESS, "B: wr_id %llu: status %s", (unsigned long long)wc->wr_id,
        ibv_wc_status_str(wc->status));
  CHECK(wc->opcode == IBV_WC_RECV && wc->wr_id == (uint64_t)(100 + k) && wc->byte_len == MSG_SIZE,
        "B: completion wr_id %llu opcode %d len %u, expected the receive of message %d (wr_id %d)",
        (unsigned long long)wc->wr_id, wc->opcode, wc->byte_len, k, 100 + k);
  CHECK(memcmp(a->buf + (k - 1) * MSG_SIZE, b->buf + (k - 1) * MSG_SIZE, MSG_SIZE) == 0,
        "message %d: the bytes at B differ from A's", k);
}

/* Poll B's CQ until it is empty; the completions are messages *next, *next + 1, ... Returns how
 * many there were. */
static int drain(struct host* b, const struct host* a, int* next) {
  int got = 0, n;
  struct ibv_wc wc;
  while ((n = ibv_poll_cq(b->cq, 1, &wc)) == 1) {
    check_recv(&wc, (*next)++, a, b);
    ++got;
  }
  CHECK(n == 0, "ibv_poll_cq (B) returned %d", n);
  return got;
}

int main(void) {
  int num_devices = 0;
  struct ibv_device** list = ibv_get_device_list(&num_devices);
  CHECK(list && num_devices > 0, "no RDMA devices found");
  struct host a, b;
  open_host(&a, list[0], 0);
  open_host(&b, list[num_devices > 1 ? 1 : 0], 1);
  connect_qp(&a, &b);
  connect_qp(&b, &a);
  watch_channel(&b);
  printf("A = %s qp 0x%x, B = %s qp 0x%x; B sleeps on a completion channel (its fd non-blocking, in epoll)\n",
         a.name, a.qp->qp_num, b.name, b.qp->qp_num);
  for (int k = 1; k <= MESSAGES; ++k) post_recv(&b, k);
  int next = 1; /* the message B's next receive completion must be */
  struct ibv_cq* ev_cq;

  /* 1. Solicited-only: only a receive completion of a message with the SE bit raises the event. */
  /* LAB GAP 2 (two places): arm B's CQ here, before A sends, so that only a solicited
   * completion raises an event (ibv_req_notify_cq(3); check its return value). The second place
   * is the flags of message 4's SEND, below. Then set gap2_done to 1. */
  int gap2_done = 0;
  for (int k = 1; k <= 3; ++k) post_send(&a, k, 0);
  await_sends(&a, 1, 3);
  CHECK(!wait_cq_event(&b, 100, &ev_cq), "an event came for unsolicited SENDs under a solicited-only arm");
  CHECK(gap2_done,
        "LAB GAP 2 is not filled in: arm B's CQ solicited-only, send message 4 solicited (README step 3)");
  printf("1. 3 unsolicited SENDs delivered to B: no event within 100 ms (armed solicited-only)\n");
  post_send(&a, 4, 0); /* LAB GAP 2, second place: the flag that sets the SE bit */
  CHECK(wait_cq_event(&b, 5000, &ev_cq), "no event within 5 s of the solicited SEND");
  CHECK(ev_cq == b.cq, "the event is not about B's CQ");
  ibv_ack_cq_events(ev_cq, 1);
  const int part1 = drain(&b, &a, &next);
  CHECK(part1 == 4, "B polled %d completions after the event, expected all 4", part1);
  await_sends(&a, 4, 1);
  printf("   the solicited SEND raised 1 event; B then polled all 4 receive completions\n");

  /* 2. The race: a completion that lands after the last poll and before the arm. */
  CHECK(drain(&b, &a, &next) == 0, "B's CQ is not empty before part 2");
  post_send(&a, 5, 0);
  await_sends(&a, 5, 1); /* message 5 is now in B's CQ: after B's last poll, before its arm */
  CHECK(ibv_req_notify_cq(b.cq, 0) == 0, "ibv_req_notify_cq(0): %s", strerror(errno));
  if (wait_cq_event(&b, 100, &ev_cq)) {
    /* Allowed: ibv_get_cq_event(3) warns that events may come with nothing new in the CQ. */
    ibv_ack_cq_events(ev_cq, 1);
    printf(
        "2. note: this device raised an event for the completion that was already in the CQ; rxe and the "
        "simulator do not, so do not count on it\n");
  } else {
    printf(
        "2. message 5 arrived between B's last poll and its arm: no event within 100 ms (B would sleep)\n");
  }
  /* LAB GAP 3: the fix. After arming, poll once more before sleeping: drain(&b, &a, &next) polls
   * B's CQ until it is empty, checks each completion and returns how many it found. Check that
   * it found exactly 1 (message 5). Then set gap3_done to 1. */
  int gap3_done = 0;
  CHECK(gap3_done, "LAB GAP 3 is not filled in: poll B's CQ again after arming it (README step 4)");
  printf("   the poll after the arm found message 5\n");

  /* 3. An event loop: one event per arm, re-arm, poll until empty; ack every event at the end.
   * B's CQ may still be armed from part 2: arming again changes nothing. */
  CHECK(ibv_req_notify_cq(b.cq, 0) == 0, "ibv_req_notify_cq(0): %s", strerror(errno));
  CHECK(drain(&b, &a, &next) == 0, "B's CQ is not empty before part 3");
  unsigned events = 0;
  for (int burst = 0; burst < 2; ++burst) {
    const int first = next;
    for (int k = first; k < first + BURST; ++k) post_send(&a, k, 0);
    while (next < first + BURST) {
      /* LAB GAP 4 (two places): one turn of B's event loop. Wait for the next event with
       * wait_cq_event(&b, 5000, &ev_cq) and fail if none came; check that it is about b.cq; count
       * it in `events`; arm B's CQ again for the next completion; then poll it until it is empty
       * with drain(&b, &a, &next). The second place is after the loop. Set gap4_done to 1. */
      int gap4_done = 0;
      CHECK(gap4_done, "LAB GAP 4 is not filled in: wait, count, re-arm, poll until empty (README step 5)");
    }
    await_sends(&a, first, BURST);
  }
  /* LAB GAP 4, second place: acknowledge the events B took in this part, all in one call
   * (ibv_get_cq_event(3)): ibv_destroy_cq waits until every event taken has been acknowledged. */
  CHECK(events >= 2 && events <= 2 * BURST, "%u events for 2 bursts of %d messages", events, BURST);
  printf("3. 2 bursts of %d SENDs, armed for the next completion: %u events for %d completions%s\n", BURST,
         events, 2 * BURST, events == 2 ? " (one per arm: re-armed after each)" : "");
  CHECK(next == MESSAGES + 1, "B received %d messages, expected %d", next - 1, MESSAGES);

  struct host* hs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    struct host* h = hs[i];
    CHECK(ibv_destroy_qp(h->qp) == 0 && ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->cq) == 0,
          "teardown: %s", strerror(errno));
    if (h->channel) {
      CHECK(close(h->epfd) == 0 && ibv_destroy_comp_channel(h->channel) == 0, "teardown: %s",
            strerror(errno));
    }
    CHECK(ibv_dealloc_pd(h->pd) == 0 && ibv_close_device(h->ctx) == 0, "teardown: %s", strerror(errno));
    free(h->buf);
  }
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
