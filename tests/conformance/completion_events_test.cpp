// SPDX-License-Identifier: Apache-2.0
// Completion events and solicited events: ibv_req_notify_cq(3), ibv_get_cq_event(3),
// IBTA vol.1 11.4.2.2 (Request Completion Notification) and 9.2.3 (SE bit).
#include <unistd.h>

#include <atomic>
#include <thread>

#include "conformance.h"

namespace conformance {
namespace {

class CompletionEvents : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    Options o;
    o.separate_cqs = true;  // B's receive CQ sees only receive completions
    ASSERT_NO_FATAL_FAILURE(Build(o));
    const int fl = fcntl(b_.channel->fd, F_GETFL);
    ASSERT_EQ(fcntl(b_.channel->fd, F_SETFL, fl | O_NONBLOCK), 0);
  }
  // Run the device long enough for anything in flight to complete (polls on A's send CQ let
  // simulated time advance), then report whether B's channel has an event.
  bool EventArrived(ibv_cq* expect_cq, int sends_to_wait = 1) {
    std::vector<ibv_wc> w;
    EXPECT_TRUE(PollCq(a_.scq, size_t(sends_to_wait), w));
    for (int i = 0; i < 200; ++i) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      if (ibv_get_cq_event(b_.channel, &cq, &ctx) == 0) {
        EXPECT_EQ(cq, expect_cq);
        EXPECT_EQ(ctx, expect_cq->cq_context);
        ibv_ack_cq_events(cq, 1);
        return true;
      }
      EXPECT_EQ(errno, EAGAIN);
      pollfd p{b_.channel->fd, POLLIN, 0};
      poll(&p, 1, 1);
    }
    return false;
  }
  void Send(uint64_t id, unsigned flags, ibv_wr_opcode op = IBV_WR_SEND) {
    ASSERT_EQ(PostRecv(b_, 1000 + id, {b_.sge(0, 4096)}), 0);
    if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
      ASSERT_EQ(PostSend(a_, id, op, {a_.sge(0, 16)}, flags, 5, b_.addr(8192), b_.mr->rkey), 0);
    else
      ASSERT_EQ(PostSend(a_, id, op, {a_.sge(0, 16)}, flags), 0);
  }
  void DrainRecv(size_t n) {
    std::vector<ibv_wc> w;
    ASSERT_TRUE(PollCq(b_.rcq, n, w));
  }
};

// ibv_req_notify_cq(3): solicited_only=1 -> an event only for a solicited receive completion.
TEST_F(CompletionEvents, SolicitedOnlyIgnoresUnsolicitedReceive) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  Send(1, IBV_SEND_SIGNALED);
  EXPECT_FALSE(EventArrived(b_.rcq));
  DrainRecv(1);
}

TEST_F(CompletionEvents, SolicitedOnlyFiresForSolicitedSend) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  Send(2, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
  EXPECT_TRUE(EventArrived(b_.rcq));
  DrainRecv(1);
}

// IBTA 9.2.3: SE applies to SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM.
TEST_F(CompletionEvents, SolicitedOnlyFiresForSolicitedWriteWithImm) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  Send(3, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_TRUE(EventArrived(b_.rcq));
  DrainRecv(1);
}

// ibv_req_notify_cq(3): with solicited_only, error completions still generate an event.
TEST_F(CompletionEvents, SolicitedOnlyFiresForErrorCompletion) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  ASSERT_EQ(PostRecv(b_, 77, {b_.sge(0, 4)}), 0);               // too small:
  ASSERT_EQ(PostSend(a_, 4, IBV_WR_SEND, {a_.sge(0, 64)}), 0);  // IBV_WC_LOC_LEN_ERR at B
  EXPECT_TRUE(EventArrived(b_.rcq));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.status, IBV_WC_LOC_LEN_ERR);
}

// ibv_req_notify_cq(3): the request is one-shot; the next completion after an event needs a new arm.
TEST_F(CompletionEvents, ArmingIsOneShot) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  Send(5, IBV_SEND_SIGNALED);
  EXPECT_TRUE(EventArrived(b_.rcq));
  DrainRecv(1);
  Send(6, IBV_SEND_SIGNALED);
  EXPECT_FALSE(EventArrived(b_.rcq));
  DrainRecv(1);
}

// IBTA 11.4.2.2: one event per arm however many completions follow.
TEST_F(CompletionEvents, OneEventPerArmForManyCompletions) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  for (int i = 0; i < 4; ++i) Send(10 + i, IBV_SEND_SIGNALED);
  EXPECT_TRUE(EventArrived(b_.rcq, 4));
  EXPECT_FALSE(EventArrived(b_.rcq, 0));
  DrainRecv(4);
}

// IBTA 11.4.2.2: a pending "next completion" request is not downgraded by a later solicited-only one.
TEST_F(CompletionEvents, NextIsNotDowngradedBySolicitedOnly) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  Send(20, IBV_SEND_SIGNALED);  // unsolicited: still fires, "next" stands
  EXPECT_TRUE(EventArrived(b_.rcq));
  DrainRecv(1);
}

// IBTA 11.4.2.2: a "next completion" request upgrades a pending solicited-only one.
TEST_F(CompletionEvents, NextUpgradesPendingSolicitedOnly) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 1), 0);
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  Send(21, IBV_SEND_SIGNALED);
  EXPECT_TRUE(EventArrived(b_.rcq));
  DrainRecv(1);
}

// ibv_req_notify_cq(3): notification is for new CQEs; completions already in the CQ when it is
// armed do not fire.
TEST_F(CompletionEvents, CompletionsAlreadyInTheCqDoNotFire) {
  Send(30, IBV_SEND_SIGNALED);
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(a_.scq, 1, w));
  for (int i = 0; i < 100; ++i) {  // let B's receive CQE land, unpolled
    ibv_wc x;
    ibv_poll_cq(a_.scq, 1, &x);
  }
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  EXPECT_FALSE(EventArrived(b_.rcq, 0));
  DrainRecv(1);
}

// ibv_get_cq_event(3): cq_context is read when the event is delivered (set after creation here).
TEST_F(CompletionEvents, EventCarriesCqContextSetAfterCreation) {
  static int marker;
  b_.rcq->cq_context = &marker;
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  Send(40, IBV_SEND_SIGNALED);
  EXPECT_TRUE(EventArrived(b_.rcq));
  DrainRecv(1);
}

}  // namespace
}  // namespace conformance

namespace conformance {
namespace {

// ibv_get_cq_event(3): "ibv_destroy_cq() will wait for all completion events to be
// acknowledged" (ibv_ack_cq_events). A destroy from another thread blocks until the event the
// program took is acknowledged, then succeeds. (In one thread it never returns: on rxe and on
// the simulator alike; the simulator says so on stderr.)
TEST_F(CompletionEvents, DestroyCqWaitsForTheEventsToBeAcknowledged) {
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(a_.scq, 1, w));
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  for (int i = 0; i < 2000 && ibv_get_cq_event(b_.channel, &cq, &ctx) != 0; ++i) {
    ibv_wc wc;
    ibv_poll_cq(a_.scq, 1, &wc);  // lets simulated time move
    usleep(1000);
  }
  ASSERT_EQ(cq, b_.rcq) << "no completion event";
  ASSERT_TRUE(PollCq(b_.rcq, 1, w));
  ASSERT_EQ(ibv_destroy_qp(b_.qp), 0);  // the QP took no event: no wait
  b_.qp = nullptr;
  std::atomic<int> rc{-1};
  if (e2e::sim_present()) ::testing::internal::CaptureStderr();
  std::thread destroyer([&] { rc = ibv_destroy_cq(b_.rcq); });
  usleep(200 * 1000);
  EXPECT_EQ(rc.load(), -1) << "ibv_destroy_cq returned with an event unacknowledged";
  ibv_ack_cq_events(cq, 1);
  destroyer.join();
  EXPECT_EQ(rc.load(), 0);
  b_.rcq = nullptr;
  if (e2e::sim_present()) {
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("ibv_destroy_cq waits for 1 event(s) the program took and never acknowledged"),
              std::string::npos)
        << err;
  }
}

}  // namespace
}  // namespace conformance
