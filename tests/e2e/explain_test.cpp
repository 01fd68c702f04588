// SPDX-License-Identifier: Apache-2.0
// `hcasim run --explain` (on by default): each class of error gives one plain-words line on
// stderr naming the host and the unit that decided it (sim/trace/explain.h). Each case provokes
// the error in-process and reads what the simulator printed meanwhile.
#include <fcntl.h>

#include "../conformance/conformance.h"
#include "verbs_fixture.h"

namespace e2e {
namespace {

class Explain : public VerbsFixture {
 protected:
  void StartCapture() { ::testing::internal::CaptureStderr(); }
  std::string StopCapture() { return ::testing::internal::GetCapturedStderr(); }
  /** Post one signaled RDMA WRITE A -> B and poll its (error) completion; returns what was printed. */
  std::string WriteAndPoll(uint32_t rkey, ibv_wc_status want = IBV_WC_REM_ACCESS_ERR) {
    StartCapture();
    EXPECT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(0), rkey), 0);
    ibv_wc wc{};
    EXPECT_TRUE(PollOne(a_.scq, wc));
    EXPECT_EQ(wc.status, want);
    return StopCapture();
  }
  /** "QP 0x0000NN" as the explanations name @p h's QP. */
  static std::string Qp(const Host& h) {
    char b[32];
    snprintf(b, sizeof b, "QP 0x%06x", h.qp->qp_num);
    return b;
  }
  static size_t Count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  }
};

// A QP created without IBV_ACCESS_REMOTE_WRITE: the responder's QP check refuses, and says so
// (not "rkey check failed": the key is fine); the NAK is Invalid Request, as rxe, qib and hfi1
// answer, so the requester sees IBV_WC_REM_INV_REQ_ERR.
TEST_F(Explain, QpAccessRefusalIsNotAKeyFailure) {
  Options o;
  o.qp_access = IBV_ACCESS_REMOTE_READ;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const std::string err = WriteAndPoll(b_.mr->rkey, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_NE(err.find("hcasim: hcasim1 responder, " + Qp(b_) +
                     ": QP access check failed: RDMA WRITE refused, the QP's qp_access_flags lack "
                     "IBV_ACCESS_REMOTE_WRITE"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("rkey check failed"), std::string::npos) << err;
  EXPECT_NE(
      err.find("hcasim: hcasim0 CQ unit, " + Qp(a_) + ": send WQE 0 completed with IBV_WC_REM_INV_REQ_ERR"),
      std::string::npos)
      << err;
  char moved[64];
  snprintf(moved, sizeof moved, ": QP 0x%x -> ERR (", b_.qp->qp_num);
  EXPECT_NE(err.find("hcasim1 firmware, " + Qp(b_) + moved), std::string::npos) << err;
}

// Memory registered without IBV_ACCESS_REMOTE_WRITE: the rkey check refuses, naming the key.
TEST_F(Explain, MrAccessRefusalNamesTheKey) {
  Options o;
  o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const std::string err = WriteAndPoll(b_.mr->rkey);
  char want[160];
  snprintf(want, sizeof want,
           "rkey check failed: RDMA WRITE refused, rkey 0x%x's memory was registered without "
           "IBV_ACCESS_REMOTE_WRITE",
           b_.mr->rkey);
  EXPECT_NE(err.find(want), std::string::npos) << err;
  EXPECT_EQ(err.find("QP access check failed"), std::string::npos) << err;
}

TEST_F(Explain, BadRkey) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const std::string err = WriteAndPoll(b_.mr->rkey ^ 0x5500);
  EXPECT_NE(err.find("rkey check failed: RDMA WRITE refused, rkey 0x"), std::string::npos) << err;
  EXPECT_NE(err.find(": invalid key"), std::string::npos) << err;
}

// A bad lkey: the requester's own check; the WRs behind it are flushed, explained once.
TEST_F(Explain, BadLkeyThenOneFlushLine) {
  ASSERT_NO_FATAL_FAILURE(Build());
  StartCapture();
  ibv_sge bad = a_.sge(0, 64);
  bad.lkey ^= 0x5500;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {bad}), 0);
  for (uint64_t id = 2; id <= 4; ++id) ASSERT_EQ(PostSend(a_, id, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 4, wcs));
  const std::string err = StopCapture();
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_NE(err.find("hcasim0 CQ unit, " + Qp(a_) +
                     ": send WQE 0 completed with IBV_WC_LOC_PROT_ERR: an lkey check failed"),
            std::string::npos)
      << err;
  EXPECT_EQ(Count(err, "completed with IBV_WC_WR_FLUSH_ERR"), 1u) << err;
  EXPECT_NE(err.find("(further flushed WQEs of this QP are not listed)"), std::string::npos) << err;
}

// A SEND longer than the receive: the responder's length error and the requester's invalid request.
TEST_F(Explain, SendLongerThanTheReceive) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 100)}), 0);
  StartCapture();
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 500)}), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_.scq, wc));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  const std::string err = StopCapture();
  EXPECT_NE(err.find("hcasim1 CQ unit, " + Qp(b_) + ": receive WQE 0 completed with IBV_WC_LOC_LEN_ERR"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("hcasim0 CQ unit, " + Qp(a_) + ": send WQE 0 completed with IBV_WC_REM_INV_REQ_ERR"),
            std::string::npos)
      << err;
}

// No receive and rnr_retry 0: RNR retries exhausted at once.
TEST_F(Explain, RnrRetryExhausted) {
  Options o;
  o.rnr_retry = 0;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  StartCapture();
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_.scq, wc));
  const std::string err = StopCapture();
  EXPECT_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_NE(err.find("completed with IBV_WC_RNR_RETRY_EXC_ERR: the responder had no receive posted"),
            std::string::npos)
      << err;
}

// More signaled completions than the CQ holds: the CQ's overflow, the CQ_ERR and QP_FATAL events.
TEST_F(Explain, CqOverflow) {
  Options o;
  o.cqe = 4;
  o.max_send_wr = 16;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  StartCapture();
  for (int i = 0; i < a_.scq->cqe + 3; ++i)
    ASSERT_EQ(
        PostSend(a_, i, IBV_WR_RDMA_WRITE, {a_.sge(0, 8)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_async_event ev{};
  ASSERT_TRUE(conformance::GetAsyncEvent(a_.ctx, ev, 5.0));
  ibv_ack_async_event(&ev);
  ASSERT_TRUE(conformance::GetAsyncEvent(a_.ctx, ev, 5.0));
  ibv_ack_async_event(&ev);
  const std::string err = StopCapture();
  EXPECT_NE(err.find("hcasim0 CQ unit"), std::string::npos) << err;
  EXPECT_NE(err.find("overflow"), std::string::npos) << err;
  EXPECT_NE(err.find("hcasim0 EQ unit: asynchronous event IBV_EVENT_CQ_ERR: a CQ overflowed"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("hcasim0 EQ unit: asynchronous event IBV_EVENT_QP_FATAL"), std::string::npos) << err;
}

// Waiting for a completion event when no CQ of the channel is armed: the wait cannot end.
// (Non-blocking, so the test itself does not hang: the explanation comes before EAGAIN. One
// such call is how a drain of a non-blocking channel ends; the second in a row is explained.)
TEST_F(Explain, WaitOnAnUnarmedChannel) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const int fl = fcntl(a_.channel->fd, F_GETFL);
  ASSERT_EQ(fcntl(a_.channel->fd, F_SETFL, fl | O_NONBLOCK), 0);
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  StartCapture();
  EXPECT_EQ(ibv_get_cq_event(a_.channel, &cq, &ctx), -1);
  std::string err = StopCapture();
  EXPECT_EQ(err.find("none of its CQs is armed"), std::string::npos) << err;
  StartCapture();
  EXPECT_EQ(ibv_get_cq_event(a_.channel, &cq, &ctx), -1);
  err = StopCapture();
  EXPECT_NE(err.find("hcasim0 driver: ibv_get_cq_event waits on completion channel fd"), std::string::npos)
      << err;
  EXPECT_NE(err.find("none of its CQs is armed: no completion event can come"), std::string::npos) << err;
  // Said once: a program polling the non-blocking channel in a loop is not flooded.
  StartCapture();
  EXPECT_EQ(ibv_get_cq_event(a_.channel, &cq, &ctx), -1);
  err = StopCapture();
  EXPECT_EQ(err.find("none of its CQs is armed"), std::string::npos) << err;
  // Armed: no explanation.
  ASSERT_EQ(ibv_req_notify_cq(a_.scq, 0), 0);
  StartCapture();
  EXPECT_EQ(ibv_get_cq_event(a_.channel, &cq, &ctx), -1);
  err = StopCapture();
  EXPECT_EQ(err.find("none of its CQs is armed"), std::string::npos) << err;
}

// A clean exchange explains nothing.
TEST_F(Explain, NothingForACleanRun) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 1000)}), 0);
  StartCapture();
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 500)}), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_.scq, wc));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(StopCapture(), "");
}

}  // namespace
}  // namespace e2e
