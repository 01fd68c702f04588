// SPDX-License-Identifier: Apache-2.0
// Unreliable Connection rules: IBTA vol.1 9.7.6.1 / 9.8 (UC carries SEND and RDMA WRITE with no
// acknowledgement and no retry; a lost packet loses its whole message and the next message is
// received normally), ibv_post_send(3) (no RDMA READ or atomics on UC), ibv_modify_qp(3) (UC's
// state table: no READ/atomic or retry attributes).
#include "conformance.h"

namespace conformance {
namespace {

class Uc : public VerbsFixture {
 protected:
  void BuildUc(Options o = Options()) {
    o.qp_type = IBV_QPT_UC;
    ASSERT_NO_FATAL_FAILURE(Build(o));
  }
};

TEST_F(Uc, SendAndWriteWithImmDeliverWithoutAcks) {
  ASSERT_NO_FATAL_FAILURE(BuildUc());
  const uint32_t n = 3000;  // three packets at MTU 1024
  e2e::fill_pattern(a_.buf, n, 5);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, n)}), 0);
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(8192, 16)}), 0);
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, n)}), 0);
  ASSERT_EQ(PostSend(a_, 4, IBV_WR_RDMA_WRITE_WITH_IMM, {a_.sge(0, n)}, IBV_SEND_SIGNALED, 77, b_.addr(16384),
                     b_.mr->rkey),
            0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(b_.rcq, 2, wcs));
  EXPECT_TRUE(e2e::wc_is(wcs[0], WcExpect{1, IBV_WC_RECV, b_.qp->qp_num, n}));
  EXPECT_TRUE(e2e::wc_is(wcs[1], WcExpect{2, IBV_WC_RECV_RDMA_WITH_IMM, b_.qp->qp_num, n, true, 77}));
  const auto want = e2e::make_pattern(n, 5);
  EXPECT_TRUE(e2e::same_bytes(b_.buf, want.data(), n));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 16384, want.data(), n));
  wcs.clear();
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs));
  EXPECT_TRUE(e2e::wc_is(wcs[0], WcExpect{3, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(e2e::wc_is(wcs[1], WcExpect{4, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  if (e2e::sim_present()) {
    EXPECT_EQ(e2e::sim_counter(Dev(b_), "acks_sent"), 0u);
  }
}

// ibv_post_send(3): UC has no RDMA READ and no atomics.
TEST_F(Uc, ReadAndAtomicsAreRejectedAtPost) {
  ASSERT_NO_FATAL_FAILURE(BuildUc());
  EXPECT_EQ(PostSend(a_, 1, IBV_WR_RDMA_READ, {a_.sge(0, 8)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
            EINVAL);
  EXPECT_EQ(PostAtomic(a_, 2, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, b_.addr(0), b_.mr->rkey, 1, 0), EINVAL);
}

// IBTA 9.8: no receive WQE on UC is no RNR: the message is dropped and the sender completes.
TEST_F(Uc, NoReceiveWqeDropsTheMessage) {
  ASSERT_NO_FATAL_FAILURE(BuildUc());
  a_.buf[0] = 0xa1;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 1)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  // The send completes when its packet has left (UC: no ACK), not when B has taken it: give B
  // the time to receive (and drop) it before a receive is posted.
  EXPECT_TRUE(NoCompletion(b_.rcq));
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(0, 64)}), 0);
  EXPECT_TRUE(NoCompletion(b_.rcq));
  a_.buf[1] = 0xb2;
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(1, 1)}), 0);
  ASSERT_TRUE(PollOne(b_.rcq, wc));  // the second message, into the WQE the first never took
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(b_.buf[0], 0xb2);
}

// IBTA 9.7.6.1: a UC responder that misses a packet drops the rest of that message, without a
// NAK or a retransmission, and takes the next message that starts afresh.
TEST_F(Uc, LostPacketLosesItsMessageOnly) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(BuildUc());
  const uint32_t n = 3000;  // PSNs a, a+1, a+2
  e2e::fill_pattern(a_.buf, n, 8);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, n)}), 0);
  ASSERT_EQ(drop_rx_hook()(Dev(b_), b_.qp->qp_num, a_.sq_psn + 1, 1), 0);  // the middle packet
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, n)}), 0);
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 100)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{1, IBV_WC_RECV, b_.qp->qp_num, 100}));  // only the second
  EXPECT_TRUE(NoCompletion(b_.rcq));
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs));  // both succeed at the sender
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(e2e::sim_counter(Dev(a_), "retransmits"), 0u);
  EXPECT_EQ(e2e::sim_counter(Dev(b_), "naks"), 0u);
}

// ibv_query_port(3): the port's rate is its width times its lane speed (Gb/s).
double port_gbps(ibv_context* ctx) {
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, 1, &pa) != 0) return 0;
  const double lanes = pa.active_width == 1 ? 1 : pa.active_width == 2 ? 4 : pa.active_width == 4 ? 8 : 12;
  double lane = 0;
  switch (pa.active_speed) {
    case 1: lane = 2.5; break;
    case 2: lane = 5; break;
    case 4:
    case 8: lane = 10; break;
    case 16: lane = 14; break;
    case 32: lane = 25; break;
    case 64: lane = 50; break;
    case 128: lane = 100; break;
  }
  return lanes * lane;
}

// IBTA 9.8 (UC has no acknowledgements): a UC send completes once the message has been sent,
// so a stream's completions cannot outrun the port. 2 MiB of WRITEs, each signaled, take at
// least 2 MiB's time on the wire before the last completion.
TEST_F(Uc, CompletionsDoNotOutrunTheWire) {
  Options o;
  o.buf_size = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(BuildUc(o));
  const uint32_t n = 64 * 1024, count = 32;
  const double gbps = port_gbps(a_.ctx);
  ASSERT_GT(gbps, 0) << "ibv_query_port gave no rate";
  const uint64_t t0 = e2e::sim_now_ns();
  for (uint32_t i = 0; i < count; ++i)
    ASSERT_EQ(
        PostSend(a_, i, IBV_WR_RDMA_WRITE, {a_.sge(0, n)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, count, wcs));
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << e2e::describe(wc);
  if (!e2e::sim_present()) return;                      // the timing is the simulator's to show
  const double wire_ns = double(n) * count * 8 / gbps;  // payload alone, headers not counted
  EXPECT_GE(double(e2e::sim_now_ns() - t0), wire_ns) << "at " << gbps << " Gb/s";
}

// A WRITE with a bad rkey is dropped at the responder; neither side's QP changes state.
TEST_F(Uc, WriteWithBadRkeyIsDroppedSilently) {
  ASSERT_NO_FATAL_FAILURE(BuildUc());
  a_.buf[0] = 0x5a;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 1)}, IBV_SEND_SIGNALED, 0, b_.addr(0),
                     b_.mr->rkey ^ 0x80),
            0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_RDMA_WRITE, {a_.sge(0, 1)}, IBV_SEND_SIGNALED, 0, b_.addr(1), b_.mr->rkey),
            0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  // Unacknowledged: wait for the second WRITE to land rather than for a completion.
  for (int i = 0; i < 100000 && b_.buf[1] != 0x5a; ++i) ibv_poll_cq(b_.rcq, 1, &wc);
  EXPECT_EQ(b_.buf[1], 0x5a);
  EXPECT_EQ(b_.buf[0], 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
  EXPECT_EQ(QpState(b_), IBV_QPS_RTS);
}

// ibv_modify_qp(3): UC's INIT->RTR takes no MAX_DEST_RD_ATOMIC/MIN_RNR_TIMER and RTR->RTS only
// the SQ PSN (no TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC).
TEST_F(Uc, StateMachineHasNoReadOrRetryAttributes) {
  Options o;
  o.qp_type = IBV_QPT_UC;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ASSERT_EQ(ToInit(a_), 0);
  ibv_qp_attr r = RtrAttr(b_);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &r, kRtrMask), EINVAL);
  ASSERT_EQ(ibv_modify_qp(a_.qp, &r, kUcRtrMask), 0);
  ibv_qp_attr s = RtsAttr(a_);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &s, kRtsMask), EINVAL);
  ASSERT_EQ(ibv_modify_qp(a_.qp, &s, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
}

}  // namespace
}  // namespace conformance
