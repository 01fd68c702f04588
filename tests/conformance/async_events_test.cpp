// SPDX-License-Identifier: Apache-2.0
// Asynchronous events: ibv_get_async_event(3) — IBV_EVENT_CQ_ERR on CQ overflow (the QPs of
// that CQ go to ERR, IBTA 11.6.2 / 10.10.1), IBV_EVENT_COMM_EST when a QP in RTR receives its
// first packet, IBV_EVENT_SQ_DRAINED after RTS->SQD with IBV_QP_EN_SQD_ASYNC_NOTIFY.
#include "conformance.h"

namespace conformance {
namespace {

class AsyncEvents : public VerbsFixture {};

TEST_F(AsyncEvents, CqOverflowRaisesCqErrAndQpsGoToErr) {
  Options o;
  o.cqe = 4;
  o.max_send_wr = 16;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const int n = a_.scq->cqe + 3;  // more signaled completions than the CQ holds, never polled
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(
        PostSend(a_, i, IBV_WR_RDMA_WRITE, {a_.sge(0, 8)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_async_event ev{};
  ASSERT_TRUE(GetAsyncEvent(a_.ctx, ev, 5.0)) << "no async event";
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, a_.scq);
  ibv_ack_async_event(&ev);
  // The QP that completes into the broken CQ can no longer work: a QP fatal error.
  ibv_async_event qev{};
  ASSERT_TRUE(GetAsyncEvent(a_.ctx, qev, 5.0)) << "no QP fatal event";
  EXPECT_EQ(qev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(qev.element.qp, a_.qp);
  ibv_ack_async_event(&qev);
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
}

TEST_F(AsyncEvents, FirstPacketInRtrRaisesCommEst) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ASSERT_EQ(ToInit(a_), 0);
  ASSERT_EQ(ToInit(b_), 0);
  ASSERT_EQ(ToRtr(a_, b_), 0);
  ASSERT_EQ(ToRtr(b_, a_), 0);
  ASSERT_EQ(ToRts(a_), 0);  // B stays in RTR
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  ibv_async_event ev{};
  ASSERT_TRUE(GetAsyncEvent(b_.ctx, ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
  EXPECT_EQ(ev.element.qp, b_.qp);
  ibv_ack_async_event(&ev);
}

TEST_F(AsyncEvents, SqdWithAsyncNotifyRaisesSqDrained) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_SQD;
  a.en_sqd_async_notify = 1;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
  ibv_async_event ev{};
  ASSERT_TRUE(GetAsyncEvent(a_.ctx, ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(ev.element.qp, a_.qp);
  ibv_ack_async_event(&ev);
}

}  // namespace
}  // namespace conformance
