// SPDX-License-Identifier: Apache-2.0
// RNR and retransmission: IBTA vol.1 9.7.5.2.8 (RNR NAK, timer table 45), 9.7.6.1.3 (local ACK
// timeout 4.096 us * 2^timeout), 9.7.5.2.2 (PSN sequence error NAK -> go back N), and
// ibv_modify_qp(3) for retry_cnt / rnr_retry (7 = infinite).
#include "conformance.h"

namespace conformance {
namespace {

class RnrAndRetry : public VerbsFixture {
 protected:
  void Make(uint8_t rnr_retry, uint8_t retry_cnt = 7, uint8_t timeout = 8) {
    Options o;
    o.rnr_retry = rnr_retry;
    o.retry_cnt = retry_cnt;
    o.timeout = timeout;  // 4.096 us * 2^8 ~= 1 ms
    o.min_rnr_timer = 1;  // 0.01 ms
    ASSERT_NO_FATAL_FAILURE(Build(o));
  }
};

// 9.7.5.2.8: a SEND with no receive posted gets an RNR NAK; the requester waits the RNR timer
// and retries; once a receive is posted it completes.
TEST_F(RnrAndRetry, SendWithoutReceiveSucceedsOnceReceivePosted) {
  ASSERT_NO_FATAL_FAILURE(Make(7));
  e2e::fill_pattern(a_.buf, 300, 5);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 300)}), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 50));  // RNR-NAKed and retrying
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(0, 4096)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{1, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{2, IBV_WC_RECV, b_.qp->qp_num, 300}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 300));
  if (e2e::sim_present()) {
    EXPECT_GE(e2e::sim_counter(Dev(b_), "rnr_naks"), 1u);
  }
}

// ibv_modify_qp(3): rnr_retry 0 -> no retry; the WR fails with IBV_WC_RNR_RETRY_EXC_ERR.
TEST_F(RnrAndRetry, RnrRetryZeroFailsWithRnrRetryExceeded) {
  ASSERT_NO_FATAL_FAILURE(Make(0));
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR) << e2e::describe(wc);
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
}

// rnr_retry 2: exactly 1 + 2 attempts, then IBV_WC_RNR_RETRY_EXC_ERR.
TEST_F(RnrAndRetry, RnrRetryCountIsHonoured) {
  ASSERT_NO_FATAL_FAILURE(Make(2));
  // Counters are per device and live as long as the process: compare differences.
  const uint64_t before = e2e::sim_present() ? e2e::sim_counter(Dev(b_), "rnr_naks") : 0;
  ASSERT_EQ(PostSend(a_, 4, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
  if (e2e::sim_present()) {
    EXPECT_EQ(e2e::sim_counter(Dev(b_), "rnr_naks") - before, 3u);
  }
}

// rnr_retry 7 = retry forever: a receive posted long after still completes the SEND.
TEST_F(RnrAndRetry, RnrRetrySevenRetriesForever) {
  ASSERT_NO_FATAL_FAILURE(Make(7));
  ASSERT_EQ(PostSend(a_, 5, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 500));
  ASSERT_EQ(PostRecv(b_, 6, {b_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// 9.7.5.2.8: the requester waits the RNR timer out even when a NAK "PSN sequence error" for the
// same PSN follows the RNR NAK (the responder sends one for the packet that was already behind
// the refused one). Resending at that NAK made thousands of RNR NAKs per RNR period (found by
// lab 9); rxe waits too (its requester's wait_for_rnr_timer).
TEST_F(RnrAndRetry, SequenceErrorNakDoesNotCutTheRnrWaitShort) {
  Options o;
  o.rnr_retry = 7;
  o.min_rnr_timer = 14;  // 1.28 ms (table 45)
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint64_t naks0 = e2e::sim_present() ? e2e::sim_counter(Dev(b_), "rnr_naks") : 0;
  e2e::fill_pattern(a_.buf, 128, 9);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(64, 64)}), 0);  // in flight behind the refused one
  const uint64_t t0 = e2e::sim_now_ns();
  EXPECT_TRUE(NoCompletion(a_.scq, 2000));
  ASSERT_EQ(PostRecv(b_, 3, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostRecv(b_, 4, {b_.sge(64, 64)}), 0);
  // Measured once the receives are there: on a loaded machine the idle advancer may move the
  // clock (and the RNR retries) on between the last poll and the posts.
  const uint64_t waited_ns = e2e::sim_now_ns() - t0;
  ibv_wc wc;
  for (uint64_t id : {1, 2}) {
    ASSERT_TRUE(PollOne(a_.scq, wc));
    EXPECT_TRUE(e2e::wc_is(wc, WcExpect{id, IBV_WC_SEND, a_.qp->qp_num})) << e2e::describe(wc);
  }
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 128));
  if (e2e::sim_present()) {
    // One RNR NAK per 1.28 ms wait at most, plus the first and one in flight at the end.
    const uint64_t naks = e2e::sim_counter(Dev(b_), "rnr_naks") - naks0;
    EXPECT_LE(naks, waited_ns / 1280000 + 2) << waited_ns << " ns waited";
    EXPECT_GE(naks, 1u);
  }
}

// 9.7.6.1.3: a lost request is resent after the local ACK timeout; data arrives once.
TEST_F(RnrAndRetry, LostRequestIsRetransmittedAfterTimeout) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7));
  ASSERT_EQ(drop_rx_hook()(Dev(b_), b_.qp->qp_num, a_.sq_psn, 1), 0);
  e2e::fill_pattern(a_.buf, 512, 9);
  ASSERT_EQ(
      PostSend(a_, 7, IBV_WR_RDMA_WRITE, {a_.sge(0, 512)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << e2e::describe(wc);
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 512));
  EXPECT_GE(e2e::sim_counter(Dev(a_), "retransmits"), 1u);
}

// 9.7.6.1.3 + ibv_modify_qp(3) retry_cnt: when every attempt is lost the WR fails with
// IBV_WC_RETRY_EXC_ERR after 1 + retry_cnt transmissions.
TEST_F(RnrAndRetry, RetryExhaustionFailsWithRetryExceeded) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7, 3));
  const uint64_t before = e2e::sim_counter(Dev(a_), "retransmits");
  ASSERT_EQ(drop_rx_hook()(Dev(b_), b_.qp->qp_num, 0xffffffff, 100), 0);
  ASSERT_EQ(
      PostSend(a_, 8, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << e2e::describe(wc);
  EXPECT_EQ(e2e::sim_counter(Dev(a_), "retransmits") - before, 3u);
  ASSERT_EQ(drop_rx_hook()(Dev(b_), 0xffffffff, 0xffffffff, 0), 0);
}

// 9.7.5.2.2: a gap in the PSN sequence (a middle packet lost) makes the responder NAK with a
// PSN sequence error and the requester resends from the missing PSN; data is intact.
TEST_F(RnrAndRetry, SequenceErrorNakCausesGoBackN) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7));
  const uint32_t mtu = e2e::mtu_bytes(opts_.mtu);
  ASSERT_EQ(drop_rx_hook()(Dev(b_), b_.qp->qp_num, (a_.sq_psn + 1) & 0xffffff, 1), 0);
  e2e::fill_pattern(a_.buf, 4 * mtu, 11);
  ASSERT_EQ(
      PostSend(a_, 9, IBV_WR_RDMA_WRITE, {a_.sge(0, 4 * mtu)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << e2e::describe(wc);
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 4 * mtu));
  EXPECT_GE(e2e::sim_counter(Dev(b_), "naks"), 1u);
}

// 9.7.5.1.x: a duplicate READ request (its response was lost) is answered again.
TEST_F(RnrAndRetry, LostReadResponseIsRecoveredByReplay) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7));
  e2e::fill_pattern(b_.buf, 2048, 13);
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn, 1), 0);  // the first response packet
  ASSERT_EQ(
      PostSend(a_, 10, IBV_WR_RDMA_READ, {a_.sge(0, 2048)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{10, IBV_WC_RDMA_READ, a_.qp->qp_num, 2048}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf, b_.buf, 2048));
  EXPECT_GE(e2e::sim_counter(Dev(b_), "duplicates"), 1u);
}

// Two READs; the first one's first response is lost, so the second READ's response arrives
// while the first is unfinished. After the local ACK timeout both are requested again; the
// replayed responses of the second READ complete it. (The requester used to drop them as
// duplicates of a READ it already had, so the second READ never completed: IBV_WC_RETRY_EXC_ERR.)
TEST_F(RnrAndRetry, ReadAnsweredBeforeAnEarlierLostReadResponseCompletesAfterTheReplay) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7));
  e2e::fill_pattern(b_.buf, 3072, 17);
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn, 1), 0);  // the first READ's first response
  ASSERT_EQ(
      PostSend(a_, 11, IBV_WR_RDMA_READ, {a_.sge(0, 2048)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ASSERT_EQ(PostSend(a_, 12, IBV_WR_RDMA_READ, {a_.sge(2048, 1024)}, IBV_SEND_SIGNALED, 0, b_.addr(2048),
                     b_.mr->rkey),
            0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs, 30));
  EXPECT_TRUE(e2e::wc_is(wcs[0], WcExpect{11, IBV_WC_RDMA_READ, a_.qp->qp_num, 2048}));
  EXPECT_TRUE(e2e::wc_is(wcs[1], WcExpect{12, IBV_WC_RDMA_READ, a_.qp->qp_num, 1024}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf, b_.buf, 3072));
}

// A READ whose sixth response (of eight) is lost is asked for again from that response on: the
// retried request carries the PSN, VA and length of the part still missing, so the responder
// sends 8 + 3 responses, not 8 + 8. IBTA lets a retried READ reread only what was not answered;
// rxe does the same (req_retry). Rereading it whole, a long READ over a lossy wire never
// completed: every attempt lost some packet.
TEST_F(RnrAndRetry, RetriedReadAsksOnlyForTheMissingPart) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7));
  e2e::fill_pattern(b_.buf, 8192, 19);
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn + 5, 1), 0);
  ASSERT_EQ(
      PostSend(a_, 13, IBV_WR_RDMA_READ, {a_.sge(0, 8192)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{13, IBV_WC_RDMA_READ, a_.qp->qp_num, 8192}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf, b_.buf, 8192));
  EXPECT_EQ(e2e::sim_counter(Dev(b_), "tx_packets"), 8u + 3u)
      << "the retried READ asked for more than the rest";
  EXPECT_EQ(e2e::sim_counter(Dev(b_), "duplicates"), 1u);
}

// Each READ response that arrives in order is progress: the retries left start again (rxe:
// check_ack resets its retry counters on every READ response). With retry_cnt 1, a READ that
// loses one response, is resumed, then loses another, still completes; counting both timeouts
// against one retry failed it with IBV_WC_RETRY_EXC_ERR.
TEST_F(RnrAndRetry, ReadResponsesInOrderRenewTheRetries) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7, /*retry_cnt=*/1));
  e2e::fill_pattern(b_.buf, 8192, 23);
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn + 2, 1), 0);
  // PSN +5 twice: first as sent (ignored anyway, behind the gap), then as resent.
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn + 5, 2), 0);
  ASSERT_EQ(
      PostSend(a_, 14, IBV_WR_RDMA_READ, {a_.sge(0, 8192)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{14, IBV_WC_RDMA_READ, a_.qp->qp_num, 8192}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf, b_.buf, 8192));
  EXPECT_EQ(e2e::sim_counter(Dev(b_), "duplicates"), 2u);
}

// A long message asks for an ACK every 64 packets (as rxe does), and a retry after the local
// ACK timeout resends from the first packet no ACK covered: a 100-packet WRITE whose last
// packet is lost is resent from packet 64, 36 packets, not 100. (Resent whole from its first
// packet, a 1 MiB WRITE over a wire losing 5 % of frames ran out of retries.)
TEST_F(RnrAndRetry, TimeoutResendsFromTheFirstPacketNotAcknowledged) {
  REQUIRE_SIM_FAULT_HOOKS();
  ASSERT_NO_FATAL_FAILURE(Make(7));
  constexpr uint32_t kLen = 100 * 1024;  // 100 packets at MTU 1024
  e2e::fill_pattern(a_.buf, kLen, 29);
  const uint64_t tx0 = e2e::sim_counter(Dev(a_), "tx_packets");
  ASSERT_EQ(drop_rx_hook()(Dev(b_), b_.qp->qp_num, a_.sq_psn + 99, 1), 0);
  ASSERT_EQ(
      PostSend(a_, 15, IBV_WR_RDMA_WRITE, {a_.sge(0, kLen)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{15, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, kLen));
  EXPECT_EQ(e2e::sim_counter(Dev(a_), "tx_packets") - tx0, 100u + 36u)
      << "the retry did not resume at packet 64";
}

}  // namespace
}  // namespace conformance
