// SPDX-License-Identifier: Apache-2.0
// QP state machine: ibv_modify_qp(3) "required/optional attributes per transition" (RC), the
// kernel's qp_state_table, IBTA vol.1 10.3.1 / table 91. A rejected modify changes nothing.
#include "conformance.h"

namespace conformance {
namespace {

class QpStateMachine : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    Options o;
    o.connect = false;
    ASSERT_NO_FATAL_FAILURE(Build(o));
  }
  // Each required attribute of a transition, left out in turn, makes the modify fail with
  // EINVAL and leaves the QP in its current state.
  void ExpectEachRequired(Host& h, ibv_qp_attr a, int mask, std::initializer_list<int> required,
                          ibv_qp_state stays) {
    for (int bit : required) {
      errno = 0;
      EXPECT_EQ(ibv_modify_qp(h.qp, &a, mask & ~bit), EINVAL) << "missing attribute 0x" << std::hex << bit;
      EXPECT_EQ(QpState(h), stays);
    }
  }
};

// ibv_modify_qp(3): RESET->INIT requires IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_ACCESS_FLAGS.
TEST_F(QpStateMachine, ResetToInitRequiresPkeyIndexPortAccessFlags) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  const int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  ExpectEachRequired(a_, a, mask, {IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_ACCESS_FLAGS}, IBV_QPS_RESET);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, mask), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_INIT);
}

// ibv_modify_qp(3): INIT->RTR requires AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER.
TEST_F(QpStateMachine, InitToRtrRequiresAvMtuDestQpnRqPsnMaxDestRdAtomicMinRnrTimer) {
  ASSERT_EQ(ToInit(a_), 0);
  ExpectEachRequired(a_, RtrAttr(b_), kRtrMask,
                     {IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC,
                      IBV_QP_MIN_RNR_TIMER},
                     IBV_QPS_INIT);
  EXPECT_EQ(ToRtr(a_, b_), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTR);
}

// ibv_modify_qp(3): RTR->RTS requires TIMEOUT, RETRY_CNT, RNR_RETRY, SQ_PSN, MAX_QP_RD_ATOMIC.
TEST_F(QpStateMachine, RtrToRtsRequiresTimeoutRetryCntRnrRetrySqPsnMaxQpRdAtomic) {
  ASSERT_EQ(ToInit(a_), 0);
  ASSERT_EQ(ToRtr(a_, b_), 0);
  ExpectEachRequired(
      a_, RtsAttr(a_), kRtsMask,
      {IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_SQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC},
      IBV_QPS_RTR);
  EXPECT_EQ(ToRts(a_), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
}

// IBTA 10.3.1 (qp_state_table): an attribute that is neither required nor optional for the
// transition is an error.
TEST_F(QpStateMachine, AttributeNotAllowedForTransitionIsRejected) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.sq_psn = 5;
  EXPECT_EQ(
      ibv_modify_qp(a_.qp, &a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN),
      EINVAL);
  EXPECT_EQ(QpState(a_), IBV_QPS_RESET);
}

// IBTA 10.3.1: skipping a state (RESET->RTR, RESET->RTS, INIT->RTS) is not a legal transition.
TEST_F(QpStateMachine, SkippingStatesIsRejected) {
  ibv_qp_attr r = RtrAttr(b_);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &r, kRtrMask), EINVAL);
  ASSERT_EQ(ToInit(a_), 0);
  ibv_qp_attr s = RtsAttr(a_);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &s, kRtsMask), EINVAL);
  EXPECT_EQ(QpState(a_), IBV_QPS_INIT);
}

// IBTA 10.3.1: any state may go to RESET or ERR, with no other attribute.
TEST_F(QpStateMachine, AnyStateToResetOrErr) {
  ASSERT_NO_FATAL_FAILURE(Connect());
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RESET);
  // And from RESET the QP can be brought up again.
  EXPECT_EQ(ToInit(a_), 0);
}

// IBTA 10.3.1: RTS -> SQD -> RTS.
TEST_F(QpStateMachine, RtsToSqdAndBack) {
  ASSERT_NO_FATAL_FAILURE(Connect());
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_SQD;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_SQD);
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
}

// ibv_query_qp(3): reports the attributes that were set.
TEST_F(QpStateMachine, QueryQpReportsWhatWasSet) {
  ASSERT_NO_FATAL_FAILURE(Connect());
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(
      ibv_query_qp(a_.qp, &q,
                   IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN |
                       IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
                       IBV_QP_ACCESS_FLAGS | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_AV,
                   &qi),
      0);
  const ibv_qp_attr want_rtr = RtrAttr(b_);
  const ibv_qp_attr want_rts = RtsAttr(a_);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.path_mtu, want_rtr.path_mtu);
  EXPECT_EQ(q.dest_qp_num, b_.qp->qp_num);
  EXPECT_EQ(q.rq_psn, want_rtr.rq_psn);
  EXPECT_EQ(q.sq_psn, want_rts.sq_psn);
  EXPECT_EQ(q.timeout, want_rts.timeout);
  EXPECT_EQ(q.retry_cnt, want_rts.retry_cnt);
  EXPECT_EQ(q.rnr_retry, want_rts.rnr_retry);
  EXPECT_EQ(q.min_rnr_timer, want_rtr.min_rnr_timer);
  EXPECT_EQ(q.qp_access_flags, int(opts_.qp_access));
  EXPECT_EQ(q.max_rd_atomic, want_rts.max_rd_atomic);
  EXPECT_EQ(q.max_dest_rd_atomic, want_rtr.max_dest_rd_atomic);
  EXPECT_EQ(0, memcmp(q.ah_attr.grh.dgid.raw, b_.gid.raw, 16));
  EXPECT_EQ(q.ah_attr.grh.sgid_index, want_rtr.ah_attr.grh.sgid_index);
  EXPECT_EQ(qi.qp_type, IBV_QPT_RC);
  EXPECT_EQ(qi.send_cq, a_.scq);
  EXPECT_EQ(qi.recv_cq, a_.rcq);
}

// ibv_post_recv(3) / IBTA 10.8.2: receives cannot be posted in RESET.
TEST_F(QpStateMachine, PostRecvInResetFails) {
  EXPECT_EQ(PostRecv(a_, 1, {a_.sge(0, 64)}), EINVAL);
  ASSERT_EQ(ToInit(a_), 0);
  EXPECT_EQ(PostRecv(a_, 2, {a_.sge(0, 64)}), 0);  // INIT accepts receives
}

// IBTA 10.8.2: sends are accepted only from RTS on (RESET, INIT and RTR reject them).
TEST_F(QpStateMachine, PostSendBeforeRtsFails) {
  EXPECT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 8)}), EINVAL);
  ASSERT_EQ(ToInit(a_), 0);
  EXPECT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 8)}), EINVAL);
  ASSERT_EQ(ToRtr(a_, b_), 0);
  EXPECT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 8)}), EINVAL);
}

// ibv_modify_qp(3) field ranges: timeout and min_rnr_timer are 5 bits, retry counts 3 bits.
TEST_F(QpStateMachine, OutOfRangeValuesAreRejected) {
  ASSERT_EQ(ToInit(a_), 0);
  ASSERT_EQ(ToRtr(a_, b_), 0);
  ibv_qp_attr s = RtsAttr(a_);
  s.retry_cnt = 8;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &s, kRtsMask), EINVAL);
  s = RtsAttr(a_);
  s.timeout = 32;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &s, kRtsMask), EINVAL);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTR);
}

}  // namespace
}  // namespace conformance
