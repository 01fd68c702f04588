// SPDX-License-Identifier: Apache-2.0
// Completion notification: polling without a channel, and event mode through the completion
// channel (ibv_req_notify_cq, ibv_get_cq_event, ibv_ack_cq_events), including solicited-only
// arming and the channel fd in poll(2) and epoll.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "verbs_fixture.h"

namespace e2e {
namespace {

/** How long "no event" is watched for; the simulation runs meanwhile (idle advance). */
constexpr int kQuietMs = 300;
constexpr int kEventMs = 5000;

void set_nonblocking(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  ASSERT_GE(fl, 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}
/** poll(2) for readability; returns poll's result (1 readable, 0 timeout). */
int wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r;
}

class Events : public VerbsFixture {
 protected:
  /** A sends @p len bytes to B (B posts the receive first). */
  void Send(uint64_t wr_id, uint32_t len, unsigned flags, ibv_wr_opcode op = IBV_WR_SEND, uint32_t imm = 0) {
    if (op != IBV_WR_RDMA_WRITE) {
      ASSERT_EQ(PostRecv(b_, wr_id + 1000, {b_.sge(8192, 4096)}), 0);
    }
    ASSERT_EQ(PostSend(a_, wr_id, op, {a_.sge(0, len)}, flags, imm, b_.addr(0), b_.mr->rkey), 0);
  }
  /** One blocking ibv_get_cq_event; checks the CQ and its context, acks it. */
  void ExpectEvent(Host& h, ibv_cq* want_cq, void* want_ctx) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(h.channel, &cq, &ctx), 0) << strerror(errno);
    EXPECT_EQ(cq, want_cq) << "event for the wrong CQ";
    EXPECT_EQ(ctx, want_ctx) << "event carries the wrong cq_context";
    ibv_ack_cq_events(cq, 1);
  }
  /** No event within kQuietMs: the channel fd stays unreadable and get_cq_event says EAGAIN. */
  void ExpectNoEvent(Host& h) {
    ASSERT_NO_FATAL_FAILURE(set_nonblocking(h.channel->fd));
    EXPECT_EQ(wait_readable(h.channel->fd, kQuietMs), 0) << "unexpected completion event";
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(h.channel, &cq, &ctx), -1);
    EXPECT_EQ(errno, EAGAIN);
  }
};

// Pure polling: CQs without a channel.
TEST_F(Events, PollingWithoutChannel) {
  Options o;
  o.channel = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  EXPECT_EQ(a_.scq->channel, nullptr);
  fill_pattern(a_.buf, 3000, 1);
  ASSERT_NO_FATAL_FAILURE(Send(1, 3000, IBV_SEND_SIGNALED));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1001, IBV_WC_RECV, b_.qp->qp_num, 3000}));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(same_bytes(b_.buf + 8192, a_.buf, 3000));
}

// The event names the CQ that got the completion, with the cq_context the program set after
// ibv_create_cq; the other CQ on the same channel gets none.
TEST_F(Events, EventNamesTheRightCqAndItsContext) {
  Options o;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  int recv_marker = 0, send_marker = 0, a_marker = 0;
  b_.rcq->cq_context = &recv_marker;
  b_.scq->cq_context = &send_marker;
  a_.scq->cq_context = &a_marker;
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(b_.scq, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(a_.scq, 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(7, 100, IBV_SEND_SIGNALED));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &recv_marker));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1007, IBV_WC_RECV, b_.qp->qp_num, 100}));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(a_, a_.scq, &a_marker));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {7, IBV_WC_SEND, a_.qp->qp_num}));
  // B's send CQ is armed but got no completion: no event on B's channel.
  ASSERT_NO_FATAL_FAILURE(ExpectNoEvent(b_));
}

// Arming is one-shot: one event, then none until ibv_req_notify_cq again.
TEST_F(Events, ArmingIsOneShot) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(1, 10, 0));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1001, IBV_WC_RECV, b_.qp->qp_num, 10}));

  ASSERT_NO_FATAL_FAILURE(Send(2, 20, 0));  // not re-armed
  ASSERT_NO_FATAL_FAILURE(ExpectNoEvent(b_));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1002, IBV_WC_RECV, b_.qp->qp_num, 20}));

  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);  // re-armed
  ASSERT_NO_FATAL_FAILURE(Send(3, 30, 0));
  ASSERT_EQ(wait_readable(b_.channel->fd, kEventMs), 1);
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1003, IBV_WC_RECV, b_.qp->qp_num, 30}));
}

// Solicited-only arming: an unsolicited SEND makes no event (but is delivered); a SEND with
// IBV_SEND_SOLICITED does. Send completions never count as solicited.
TEST_F(Events, SolicitedOnly) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_NO_FATAL_FAILURE(set_nonblocking(b_.channel->fd));
  ASSERT_NO_FATAL_FAILURE(set_nonblocking(a_.channel->fd));
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  ASSERT_EQ(ibv_req_notify_cq(a_.scq, 1), 0);
  fill_pattern(a_.buf, 64, 2);

  const uint64_t cqes0 = sim_present() ? sim_counter(Dev(b_), "cqes") : 0;
  const uint64_t events0 = sim_present() ? sim_counter(Dev(b_), "cq_events") : 0;
  ASSERT_NO_FATAL_FAILURE(Send(1, 64, IBV_SEND_SIGNALED));
  EXPECT_EQ(wait_readable(b_.channel->fd, kQuietMs), 0) << "event for an unsolicited SEND";
  if (sim_present()) {  // the receive completed while we waited: the "no event" was decided
    EXPECT_EQ(sim_counter(Dev(b_), "cqes"), cqes0 + 1) << "the simulation did not advance during poll(2)";
    EXPECT_EQ(sim_counter(Dev(b_), "cq_events"), events0);
  }
  EXPECT_EQ(wait_readable(a_.channel->fd, 0), 0) << "event for a send completion under solicited-only";
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1001, IBV_WC_RECV, b_.qp->qp_num, 64}));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_SEND, a_.qp->qp_num}));

  ASSERT_NO_FATAL_FAILURE(Send(2, 64, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  ASSERT_EQ(wait_readable(b_.channel->fd, kEventMs), 1) << "no event for a solicited SEND";
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1002, IBV_WC_RECV, b_.qp->qp_num, 64}));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_EQ(wait_readable(a_.channel->fd, 0), 0) << "event for a send completion under solicited-only";

  // RDMA WRITE with immediate and the solicited flag also wakes a solicited-only CQ.
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  ASSERT_NO_FATAL_FAILURE(Send(3, 64, IBV_SEND_SIGNALED, IBV_WR_RDMA_WRITE_WITH_IMM, 0x5a5a));
  EXPECT_EQ(wait_readable(b_.channel->fd, kQuietMs), 0) << "event for an unsolicited WRITE_WITH_IMM";
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1003, IBV_WC_RECV_RDMA_WITH_IMM, b_.qp->qp_num, 64, true, 0x5a5a}));
  ASSERT_NO_FATAL_FAILURE(
      Send(4, 64, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, IBV_WR_RDMA_WRITE_WITH_IMM, 0xa5a5));
  ASSERT_EQ(wait_readable(b_.channel->fd, kEventMs), 1) << "no event for a solicited WRITE_WITH_IMM";
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1004, IBV_WC_RECV_RDMA_WITH_IMM, b_.qp->qp_num, 64, true, 0xa5a5}));
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs));
}

// "A CQE is solicited if it is a receive completion for a message with the SE bit set, or if
// the status is not successful" (ibv_req_notify_cq(3)): an error wakes a solicited-only CQ.
TEST_F(Events, SolicitedOnlyStillWakesOnError) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_NO_FATAL_FAILURE(set_nonblocking(b_.channel->fd));
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  ASSERT_EQ(PostRecv(b_, 5, {b_.sge(0, 10)}), 0);  // too small for the message
  ASSERT_EQ(PostSend(a_, 6, IBV_WR_SEND, {a_.sge(0, 100)}), 0);
  ASSERT_EQ(wait_readable(b_.channel->fd, kEventMs), 1) << "no event for an error completion";
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {5, IBV_WC_RECV, b_.qp->qp_num, -1, false, 0, IBV_WC_LOC_LEN_ERR}));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {6, IBV_WC_SEND, a_.qp->qp_num, -1, false, 0, IBV_WC_REM_INV_REQ_ERR}));
}

// A "next completion" request upgrades an outstanding solicited-only one (never the reverse).
TEST_F(Events, NextCompletionOverridesSolicitedOnly) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(1, 8, 0));
  ASSERT_EQ(wait_readable(b_.channel->fd, kEventMs), 1);
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1001, IBV_WC_RECV, b_.qp->qp_num, 8}));
}

// The channel fd in epoll: readable once the armed CQ gets a completion.
TEST_F(Events, ChannelFdWorksWithEpoll) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0x5eed;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, b_.channel->fd, &ev), 0);
  epoll_event out{};
  EXPECT_EQ(epoll_wait(ep, &out, 1, 50), 0) << "readable before anything happened";

  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(1, 500, IBV_SEND_SIGNALED));
  int n;
  do {
    n = epoll_wait(ep, &out, 1, kEventMs);
  } while (n < 0 && errno == EINTR);
  ASSERT_EQ(n, 1) << "epoll_wait: no event";
  EXPECT_EQ(out.data.u64, 0x5eedu);
  EXPECT_TRUE(out.events & EPOLLIN);
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1001, IBV_WC_RECV, b_.qp->qp_num, 500}));
  EXPECT_EQ(epoll_wait(ep, &out, 1, 0), 0) << "still readable after the event was read";
  close(ep);
  ASSERT_TRUE(PollOne(a_.scq, wc));
}

// The channel fd in poll(2) with a timeout, blocking fd: readable when the event is there, and
// ibv_get_cq_event then returns at once. Several events, acknowledged together.
TEST_F(Events, ChannelFdWorksWithPollAndEventsAckTogether) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
    ASSERT_NO_FATAL_FAILURE(Send(i, 16 + i, 0));
    ASSERT_EQ(wait_readable(b_.channel->fd, kEventMs), 1) << "event " << i;
    ASSERT_EQ(ibv_get_cq_event(b_.channel, &cq, &ctx), 0);
    EXPECT_EQ(cq, b_.rcq);
    EXPECT_EQ(ctx, &b_);
    ibv_wc wc;
    ASSERT_TRUE(PollOne(b_.rcq, wc));
    EXPECT_TRUE(wc_is(wc, {uint64_t(1000 + i), IBV_WC_RECV, b_.qp->qp_num, uint32_t(16 + i)}));
  }
  ibv_ack_cq_events(b_.rcq, 3);  // acknowledged together before the CQ is destroyed
}

// Blocking ibv_get_cq_event without poll(2): the simulation progresses while the program
// sleeps in the call; the completion then polls out.
TEST_F(Events, BlockingGetCqEvent) {
  ASSERT_NO_FATAL_FAILURE(Build());
  fill_pattern(a_.buf, 2500, 3);
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(9, 2500, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent(b_, b_.rcq, &b_));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1009, IBV_WC_RECV, b_.qp->qp_num, 2500}));
  EXPECT_TRUE(same_bytes(b_.buf + 8192, a_.buf, 2500));
  ASSERT_TRUE(PollOne(a_.scq, wc));
}

}  // namespace
}  // namespace e2e
