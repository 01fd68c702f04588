// SPDX-License-Identifier: Apache-2.0
// Data-path rules: ibv_post_send(3) (IBV_SEND_INLINE up to max_inline_data, unsignaled WRs,
// SGE lists up to max_send_sge, IBV_SEND_FENCE), IBTA vol.1 9.4.4 (READ responses over several PSNs) and
// 9.7.5.1.1 (a duplicate request is acknowledged again, never delivered twice).
#include "conformance.h"

namespace conformance {
namespace {

class DataPathRules : public VerbsFixture {};

TEST_F(DataPathRules, InlineSendUpToMaxInlineData) {
  Options o;
  o.max_inline_data = 64;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint32_t n = a_.cap.max_inline_data;
  ASSERT_GE(n, 64u);
  e2e::fill_pattern(a_.buf, n, 3);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 4096)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, n)}, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  memset(a_.buf, 0, n);  // inline data was copied at post time
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{1, IBV_WC_RECV, b_.qp->qp_num, n}));
  const auto want = e2e::make_pattern(n, 3);
  EXPECT_TRUE(e2e::same_bytes(b_.buf, want.data(), n));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// ibv_create_qp(3) returns caps at least as large as asked. Asked for no inline data, a QP
// still holds 16 bytes inline per gather entry, as rxe's (rxe_qp.c sizes the WQE for
// max(max_send_sge × 16, max_inline_data)) and mlx5's do; rdma-core's rdma_xclient relies on it
// (16 bytes IBV_SEND_INLINE on a QP created with max_inline_data 0).
TEST_F(DataPathRules, InlineOf16BytesPerSgeWithoutAsking) {
  Options o;
  o.max_send_sge = 1;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  EXPECT_GE(a_.cap.max_inline_data, 16u);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 4096)}), 0);
  e2e::fill_pattern(a_.buf, 16, 5);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 16)}, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{1, IBV_WC_RECV, b_.qp->qp_num, 16}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 16));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  for (uint32_t sges : {2u, 4u, 8u}) {  // more gather entries, more inline bytes
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = a_.scq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = sges;
    ia.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(a_.pd, &ia);
    ASSERT_NE(qp, nullptr) << sges << " SGEs: " << strerror(errno);
    EXPECT_GE(ia.cap.max_inline_data, 16 * sges) << sges << " SGEs";
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
  }
}

TEST_F(DataPathRules, InlineAboveMaxInlineDataIsRejected) {
  Options o;
  o.max_inline_data = 64;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  EXPECT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, a_.cap.max_inline_data + 1)},
                     IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            EINVAL);
}

// ibv_post_send(3): an unsignaled WR that succeeds generates no completion; a later signaled
// one completes (and retires the unsignaled ones before it).
TEST_F(DataPathRules, UnsignaledSuccessGeneratesNoCompletion) {
  ASSERT_NO_FATAL_FAILURE(Build());
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(PostSend(a_, 10 + i, IBV_WR_RDMA_WRITE, {a_.sge(0, 32)}, 0, 0, b_.addr(0), b_.mr->rkey), 0);
  ASSERT_EQ(
      PostSend(a_, 13, IBV_WR_RDMA_WRITE, {a_.sge(0, 32)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.wr_id, 13u);
  EXPECT_TRUE(NoCompletion(a_.scq, 50));
}

TEST_F(DataPathRules, SgeListUpToMaxSendSge) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const uint32_t n = a_.cap.max_send_sge;
  std::vector<ibv_sge> sges;
  for (uint32_t i = 0; i < n; ++i) sges.push_back(a_.sge(1000 * i, 100 + i));
  e2e::fill_pattern(a_.buf, 1000 * n, 4);
  ASSERT_EQ(PostRecv(b_, 20, {b_.sge(0, 8192)}), 0);
  ASSERT_EQ(PostSend(a_, 21, IBV_WR_SEND, sges), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  uint32_t off = 0;
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_TRUE(e2e::same_bytes(b_.buf + off, a_.buf + 1000 * i, 100 + i, "gathered SGE"));
    off += 100 + i;
  }
  EXPECT_EQ(wc.byte_len, off);
  std::vector<ibv_sge> too_many(n + 1, a_.sge(0, 8));
  EXPECT_EQ(PostSend(a_, 22, IBV_WR_SEND, too_many), EINVAL);
}

// C9-88 (IBTA vol.1 9.4.4): an RDMA WRITE of zero bytes needs no valid R_Key or address at the
// responder; it completes successfully with nothing written (the verbs transport's liveness probe
// relies on it). rxe says so in check_rkey() (rxe_resp.c, "A zero-byte op is not required to
// set an addr or rkey").
TEST_F(DataPathRules, ZeroByteWriteNeedsNoKeyOrAddress) {
  ASSERT_NO_FATAL_FAILURE(Build());
  memset(b_.buf, 0x5a, 64);
  ASSERT_EQ(PostSend(a_, 25, IBV_WR_RDMA_WRITE, {}, IBV_SEND_SIGNALED, 0, 0, 0), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 25u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_TRUE(NoCompletion(b_.rcq, 20));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(b_.buf[i], 0x5a) << "byte " << i;
}

// 9.4.4: a READ longer than the path MTU comes back as FIRST/MIDDLE.../LAST responses.
TEST_F(DataPathRules, ReadResponseSpansManyPsns) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const uint32_t len = 7 * e2e::mtu_bytes(opts_.mtu) + 5;
  e2e::fill_pattern(b_.buf, len, 6);
  ASSERT_EQ(
      PostSend(a_, 30, IBV_WR_RDMA_READ, {a_.sge(0, len)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{30, IBV_WC_RDMA_READ, a_.qp->qp_num, len}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf, b_.buf, len));
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a_.qp, &q, IBV_QP_SQ_PSN, &qi), 0);
  EXPECT_EQ(q.sq_psn, (a_.sq_psn + 8) & 0xffffff) << "the READ should occupy 8 PSNs";
}

// ibv_post_send(3) IBV_SEND_FENCE; IBTA 10.8.3.3: a fenced WR starts only after every earlier
// READ/atomic on the send queue has completed, so a fenced SEND of a buffer a READ just filled
// carries the data read, not what the buffer held before.
TEST_F(DataPathRules, FencedSendCarriesTheDataOfTheReadBeforeIt) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const uint32_t len = 4096;
  e2e::fill_pattern(b_.buf + 16384, len, 90);  // what the READ brings
  e2e::fill_pattern(a_.buf, len, 91);          // what the buffer holds before
  ASSERT_EQ(PostRecv(b_, 40, {b_.sge(0, len)}), 0);
  ASSERT_EQ(
      PostSend(a_, 41, IBV_WR_RDMA_READ, {a_.sge(0, len)}, IBV_SEND_SIGNALED, 0, b_.addr(16384), b_.mr->rkey),
      0);
  ASSERT_EQ(PostSend(a_, 42, IBV_WR_SEND, {a_.sge(0, len)}, IBV_SEND_SIGNALED | IBV_SEND_FENCE), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{40, IBV_WC_RECV, b_.qp->qp_num, len}));
  const auto want = e2e::make_pattern(len, 90);
  EXPECT_TRUE(e2e::same_bytes(b_.buf, want.data(), len))
      << "the fenced SEND went out before the READ completed";
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(a_.scq, 2, w));
  EXPECT_EQ(w[0].wr_id, 41u);
  EXPECT_EQ(w[1].wr_id, 42u);
}

// 9.7.5.1.1: the ACK of a SEND is lost; the requester resends after its ACK timeout; the
// responder recognises the duplicate PSN, ACKs again and does not consume a second receive.
TEST_F(DataPathRules, DuplicateSendIsAcknowledgedNotRedelivered) {
  REQUIRE_SIM_FAULT_HOOKS();
  Options o;
  o.timeout = 8;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn, 1), 0);  // the ACK
  ASSERT_EQ(PostRecv(b_, 40, {b_.sge(0, 256)}), 0);
  ASSERT_EQ(PostRecv(b_, 41, {b_.sge(256, 256)}), 0);
  ASSERT_EQ(PostSend(a_, 42, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.wr_id, 40u);
  EXPECT_TRUE(NoCompletion(b_.rcq, 50)) << "the duplicate consumed a second receive";
}

}  // namespace
}  // namespace conformance
