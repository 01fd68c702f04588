// SPDX-License-Identifier: Apache-2.0
// Error model: IBTA vol.1 9.7.5.2.4-6 (NAK codes), 10.8.3 (error completions; QP to ERR; flush),
// ibv_poll_cq(3) ("only wr_id, status, qp_num and vendor_err are valid" on error), and
// resource rules of ibv_dealloc_pd(3) / ibv_destroy_cq(3) (EBUSY while in use).
#include "conformance.h"

namespace conformance {
namespace {

class ErrorSemantics : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    ASSERT_NO_FATAL_FAILURE(Build());
  }
  // After a fatal error on A's QP: the failed WR, then every later WR flushed, in order.
  void ExpectFailedThenFlushed(ibv_wc_status first, uint64_t first_id, std::vector<uint64_t> flushed) {
    std::vector<ibv_wc> w;
    ASSERT_TRUE(PollCq(a_.scq, 1 + flushed.size(), w));
    EXPECT_EQ(w[0].status, first) << e2e::describe(w[0]);
    EXPECT_EQ(w[0].wr_id, first_id);
    EXPECT_EQ(w[0].qp_num, a_.qp->qp_num);
    for (size_t i = 0; i < flushed.size(); ++i) {
      EXPECT_EQ(w[1 + i].status, IBV_WC_WR_FLUSH_ERR) << e2e::describe(w[1 + i]);
      EXPECT_EQ(w[1 + i].wr_id, flushed[i]);
    }
    EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  }
};

// 9.7.5.2.5: an invalid rkey -> NAK remote access error -> IBV_WC_REM_ACCESS_ERR; the
// requester QP goes to ERR and later WRs are flushed; the responder QP goes to ERR too.
TEST_F(ErrorSemantics, BadRkeyIsRemoteAccessErrorAndFlushesLaterWrs) {
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(0),
                     b_.mr->rkey ^ 0x100),
            0);
  ASSERT_EQ(
      PostSend(a_, 2, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 64)}, 0), 0);  // unsignaled: flushed all the same
  ExpectFailedThenFlushed(IBV_WC_REM_ACCESS_ERR, 1, {2, 3});
  EXPECT_EQ(QpState(b_), IBV_QPS_ERR);
}

TEST_F(ErrorSemantics, OutOfBoundsIsRemoteAccessError) {
  ASSERT_EQ(PostSend(a_, 4, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(b_.size - 32),
                     b_.mr->rkey),
            0);
  ExpectFailedThenFlushed(IBV_WC_REM_ACCESS_ERR, 4, {});
}

TEST_F(ErrorSemantics, MissingRemoteAccessFlagIsRemoteAccessError) {
  ibv_mr* ro = ibv_reg_mr(b_.pd, b_.buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(ro, nullptr);
  ASSERT_EQ(PostSend(a_, 5, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(0), ro->rkey),
            0);
  ExpectFailedThenFlushed(IBV_WC_REM_ACCESS_ERR, 5, {});
  EXPECT_EQ(ibv_dereg_mr(ro), 0);
}

// An RDMA operation the responder's QP does not enable in qp_access_flags (ibv_modify_qp(3)) is
// an invalid request, not a key violation: NAK invalid request -> IBV_WC_REM_INV_REQ_ERR, both
// QPs to ERR, nothing written. rxe answers so (check_op_valid), and so do qib and hfi1; the
// rkey check, and with it IBV_WC_REM_ACCESS_ERR, comes only for operations the QP enables.
class QpAccessSemantics : public VerbsFixture {
 protected:
  void Expect(ibv_wr_opcode op, unsigned qp_access) {
    Options o;
    o.qp_access = qp_access;
    ASSERT_NO_FATAL_FAILURE(Build(o));
    e2e::fill_pattern(a_.buf, 64, 3);
    std::memset(b_.buf, 0x5c, 64);
    ASSERT_EQ(PostSend(a_, 9, op, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
    ibv_wc wc;
    ASSERT_TRUE(PollOne(a_.scq, wc));
    EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << e2e::describe(wc);
    EXPECT_EQ(wc.wr_id, 9u);
    EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
    EXPECT_EQ(QpState(b_), IBV_QPS_ERR);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(b_.buf[i], 0x5c) << "byte " << i << " of the target changed";
  }
};

TEST_F(QpAccessSemantics, WriteToQpWithoutRemoteWriteIsInvalidRequest) {
  Expect(IBV_WR_RDMA_WRITE, IBV_ACCESS_REMOTE_READ);
}

TEST_F(QpAccessSemantics, ReadFromQpWithoutRemoteReadIsInvalidRequest) {
  Expect(IBV_WR_RDMA_READ, IBV_ACCESS_REMOTE_WRITE);
}

// 10.8.3: a bad lkey -> IBV_WC_LOC_PROT_ERR, even for an unsignaled WR.
TEST_F(ErrorSemantics, BadLkeyIsLocalProtectionErrorEvenUnsignaled) {
  ibv_sge bad = a_.sge(0, 64);
  bad.lkey ^= 0x100;
  ASSERT_EQ(PostSend(a_, 6, IBV_WR_SEND, {bad}, 0), 0);
  ExpectFailedThenFlushed(IBV_WC_LOC_PROT_ERR, 6, {});
}

// An MR of another PD is a protection error (IBTA 10.6.3.1: the MR and QP must share the PD).
TEST_F(ErrorSemantics, MrOfAnotherPdIsLocalProtectionError) {
  ibv_pd* other = ibv_alloc_pd(a_.ctx);
  ASSERT_NE(other, nullptr);
  ibv_mr* mr = ibv_reg_mr(other, a_.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge s{a_.addr(0), 64, mr->lkey};
  ASSERT_EQ(PostSend(a_, 7, IBV_WR_RDMA_WRITE, {s}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ExpectFailedThenFlushed(IBV_WC_LOC_PROT_ERR, 7, {});
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

// 9.7.5.2.4 / 10.8.3: a message longer than the posted receive -> IBV_WC_LOC_LEN_ERR at the
// responder, NAK invalid request -> IBV_WC_REM_INV_REQ_ERR at the requester.
TEST_F(ErrorSemantics, MessageLongerThanReceiveIsLengthErrorAndInvalidRequest) {
  ASSERT_EQ(PostRecv(b_, 50, {b_.sge(0, 100)}), 0);
  ASSERT_EQ(PostRecv(b_, 51, {b_.sge(0, 100)}), 0);
  ASSERT_EQ(PostSend(a_, 8, IBV_WR_SEND, {a_.sge(0, 101)}), 0);
  ExpectFailedThenFlushed(IBV_WC_REM_INV_REQ_ERR, 8, {});
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(b_.rcq, 2, w));
  EXPECT_EQ(w[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(w[0].wr_id, 50u);
  EXPECT_EQ(w[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(w[1].wr_id, 51u);
}

// 10.8.3.x / ibv_post_send(3): WRs posted to a QP in ERR complete with IBV_WC_WR_FLUSH_ERR.
TEST_F(ErrorSemantics, PostsInErrorStateCompleteFlushed) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  ASSERT_EQ(PostRecv(a_, 60, {a_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 61, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(a_.scq, 2, w));
  for (auto& wc : w) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << e2e::describe(wc);
  std::vector<uint64_t> ids = {w[0].wr_id, w[1].wr_id};
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint64_t>{60, 61}));
}

// Moving a QP to ERR flushes every posted receive.
TEST_F(ErrorSemantics, ModifyToErrFlushesPostedReceives) {
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(PostRecv(b_, 70 + i, {b_.sge(0, 64)}), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b_.qp, &a, IBV_QP_STATE), 0);
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(b_.rcq, 3, w));
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(w[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(w[i].wr_id, 70 + i);
    EXPECT_EQ(w[i].qp_num, b_.qp->qp_num);
  }
}

// ibv_dealloc_pd(3), ibv_destroy_cq(3), ibv_destroy_comp_channel(3): EBUSY while in use.
TEST_F(ErrorSemantics, ResourcesInUseCannotBeDestroyed) {
  EXPECT_EQ(ibv_dealloc_pd(a_.pd), EBUSY);
  EXPECT_EQ(ibv_destroy_cq(a_.scq), EBUSY);
  EXPECT_EQ(ibv_destroy_comp_channel(a_.channel), EBUSY);
}

}  // namespace
}  // namespace conformance
