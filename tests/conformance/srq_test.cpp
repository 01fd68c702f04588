// SPDX-License-Identifier: Apache-2.0
// Shared receive queue rules: ibv_create_srq(3) (actual sizes returned), ibv_post_srq_recv(3),
// ibv_modify_srq(3) (the limit fires IBV_EVENT_SRQ_LIMIT_REACHED once, then is disarmed; a
// limit above max_wr is EINVAL), ibv_query_srq(3), ibv_destroy_srq(3) (EBUSY while a QP uses it),
// ibv_post_recv(3) (a QP with an SRQ takes no receives of its own), IBTA vol.1 10.2.9 and 11.6.3
// (the SRQ's WQEs are not flushed with a QP; IBV_EVENT_QP_LAST_WQE_REACHED when an attached QP
// goes to the error state), 9.7.5.2.8 (an empty SRQ is RNR NAKed on RC, as an empty RQ is).
#include "conformance.h"

namespace conformance {
namespace {

class Srq : public VerbsFixture {
 protected:
  void BuildSrq(Options o = Options()) {
    o.srq = true;
    ASSERT_NO_FATAL_FAILURE(Build(o));
  }
  int Arm(Host& h, uint32_t limit) {
    ibv_srq_attr a{};
    a.srq_limit = limit;
    return ibv_modify_srq(h.srq, &a, IBV_SRQ_LIMIT);
  }
};

TEST_F(Srq, CreateReturnsTheActualSizes) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 100;
  sa.attr.max_sge = 3;
  ibv_srq* s = ibv_create_srq(a_.pd, &sa);
  ASSERT_NE(s, nullptr) << strerror(errno);
  EXPECT_GE(sa.attr.max_wr, 100u);
  EXPECT_GE(sa.attr.max_sge, 3u);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(s, &q), 0);
  EXPECT_EQ(q.max_wr, sa.attr.max_wr);
  EXPECT_EQ(q.max_sge, sa.attr.max_sge);
  EXPECT_EQ(q.srq_limit, 0u);
  EXPECT_EQ(ibv_destroy_srq(s), 0);
}

TEST_F(Srq, MessagesTakeSrqWqesInPostingOrder) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(PostRecv(b_, 100 + i, {b_.sge(1024 * i, 1024)}), 0);
  for (uint32_t i = 0; i < 3; ++i) {
    e2e::fill_pattern(a_.buf + 4096 * i, 500 + i, 20 + i);
    ASSERT_EQ(PostSend(a_, i, IBV_WR_SEND, {a_.sge(4096 * i, 500 + i)}), 0);
  }
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(b_.rcq, 3, wcs));
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(e2e::wc_is(wcs[i], WcExpect{100 + i, IBV_WC_RECV, b_.qp->qp_num, 500 + i}));
    const auto want = e2e::make_pattern(500 + i, 20 + i);
    EXPECT_TRUE(e2e::same_bytes(b_.buf + 1024 * i, want.data(), 500 + i));
  }
}

// Two QPs on one SRQ: each message takes the next WQE, whichever QP it arrives on.
TEST_F(Srq, TwoQpsShareOneQueue) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  // A second QP pair: a2 on A, b2 on B attached to B's SRQ.
  auto make = [&](Host& h) {
    ibv_qp_init_attr ia{};
    ia.send_cq = h.scq;
    ia.recv_cq = h.rcq;
    ia.srq = h.srq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 8;
    ia.cap.max_send_sge = 1;
    return ibv_create_qp(h.pd, &ia);
  };
  Host a2 = a_, b2 = b_;
  a2.qp = make(a_);
  b2.qp = make(b_);
  ASSERT_NE(a2.qp, nullptr);
  ASSERT_NE(b2.qp, nullptr);
  ASSERT_EQ(ToInit(a2), 0);
  ASSERT_EQ(ToInit(b2), 0);
  ASSERT_EQ(ToRtr(a2, b2), 0);
  ASSERT_EQ(ToRtr(b2, a2), 0);
  ASSERT_EQ(ToRts(a2), 0);
  ASSERT_EQ(ToRts(b2), 0);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(64, 64)}), 0);
  a_.buf[0] = 0x11;
  a_.buf[1] = 0x22;
  ASSERT_EQ(PostSend(a2, 10, IBV_WR_SEND, {a_.sge(1, 1)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{1, IBV_WC_RECV, b2.qp->qp_num, 1}));
  ASSERT_EQ(PostSend(a_, 11, IBV_WR_SEND, {a_.sge(0, 1)}), 0);
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{2, IBV_WC_RECV, b_.qp->qp_num, 1}));
  EXPECT_EQ(b_.buf[0], 0x22);
  EXPECT_EQ(b_.buf[64], 0x11);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs));
  EXPECT_EQ(ibv_destroy_qp(a2.qp), 0);
  EXPECT_EQ(ibv_destroy_qp(b2.qp), 0);
}

// ibv_post_recv(3): a QP attached to an SRQ has no receive queue of its own.
TEST_F(Srq, PostRecvToAQpWithAnSrqFails) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  ibv_sge sge = b_.sge(0, 64);
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_NE(ibv_post_recv(b_.qp, &wr, &bad), 0);
  EXPECT_EQ(bad, &wr);
}

TEST_F(Srq, LimitEventFiresOnceWhenFewerWqesThanTheLimitRemain) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(PostRecv(b_, i, {b_.sge(64 * i, 64)}), 0);
  ASSERT_EQ(Arm(b_, 4), 0);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(b_.srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 4u);
  ibv_async_event ev{};
  for (int i = 0; i < 4; ++i) {  // 8 -> 4 left: not below the limit yet
    ASSERT_EQ(PostSend(a_, i, IBV_WR_SEND, {a_.sge(0, 8)}), 0);
    ibv_wc wc;
    ASSERT_TRUE(PollOne(b_.rcq, wc));
  }
  EXPECT_FALSE(GetAsyncEvent(b_.ctx, ev, 0.2)) << "event " << ev.event_type << " too early";
  ASSERT_EQ(PostSend(a_, 4, IBV_WR_SEND, {a_.sge(0, 8)}), 0);  // 3 left
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_TRUE(GetAsyncEvent(b_.ctx, ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, b_.srq);
  ibv_ack_async_event(&ev);
  ASSERT_EQ(ibv_query_srq(b_.srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u);                                  // disarmed
  ASSERT_EQ(PostSend(a_, 5, IBV_WR_SEND, {a_.sge(0, 8)}), 0);  // 2 left: no second event
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_FALSE(GetAsyncEvent(b_.ctx, ev, 0.2));
}

TEST_F(Srq, LimitAboveMaxWrIsEinval) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(b_.srq, &q), 0);
  EXPECT_EQ(Arm(b_, q.max_wr + 1), EINVAL);
}

TEST_F(Srq, DestroyWhileAQpUsesItIsEbusy) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  EXPECT_EQ(ibv_destroy_srq(b_.srq), EBUSY);
}

// IBTA 11.6.3: a QP attached to an SRQ that enters the error state raises
// IBV_EVENT_QP_LAST_WQE_REACHED; the SRQ's WQEs are not flushed (other QPs may still take them).
TEST_F(Srq, QpInErrorRaisesLastWqeReachedAndFlushesNoSrqWqe) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 64)}), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b_.qp, &a, IBV_QP_STATE), 0);
  ibv_async_event ev{};
  ASSERT_TRUE(GetAsyncEvent(b_.ctx, ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, b_.qp);
  ibv_ack_async_event(&ev);
  EXPECT_TRUE(NoCompletion(b_.rcq));
}

// An empty SRQ behind an RC QP is RNR NAKed like an empty RQ; the retry lands once a WQE is posted.
TEST_F(Srq, EmptySrqIsRnrNakedThenRetried) {
  ASSERT_NO_FATAL_FAILURE(BuildSrq());
  a_.buf[0] = 0x77;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 1)}), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 200));
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{2, IBV_WC_RECV, b_.qp->qp_num, 1}));
  EXPECT_EQ(b_.buf[0], 0x77);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  if (e2e::sim_present()) {
    EXPECT_GE(e2e::sim_counter(Dev(b_), "rnr_naks"), 1u);
  }
}

// SRQ over UD: the datagram path takes its receives from the SRQ as well.
TEST_F(Srq, UdQpTakesItsReceivesFromTheSrq) {
  Options o;
  o.qp_type = IBV_QPT_UD;
  ASSERT_NO_FATAL_FAILURE(BuildSrq(o));
  ASSERT_EQ(PostRecv(b_, 9, {b_.sge(0, 40 + 16)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 1, {a_.sge(0, 16)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 56u);
}

}  // namespace
}  // namespace conformance
