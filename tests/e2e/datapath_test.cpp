// SPDX-License-Identifier: Apache-2.0
// Data-path features beyond one WR at a time: gather/scatter lists on both sides, inline
// sends up to max_inline_data, unsignaled WRs, a full send queue (ENOMEM) and completion order.
#include <numeric>

#include "verbs_fixture.h"

namespace e2e {
namespace {

constexpr uint8_t kCanary = 0x3c;

/** Pieces of A's buffer: odd sizes at odd, scattered offsets (gaps between them). */
struct Piece {
  size_t off;
  uint32_t len;
};
std::vector<ibv_sge> sges_of(const Host& h, const std::vector<Piece>& ps) {
  std::vector<ibv_sge> v;
  for (auto& p : ps) v.push_back(h.sge(p.off, p.len));
  return v;
}
uint32_t total(const std::vector<Piece>& ps) {
  return std::accumulate(ps.begin(), ps.end(), 0u, [](uint32_t s, const Piece& p) { return s + p.len; });
}
/** The bytes of @p ps in order (what a gather produces). */
std::vector<uint8_t> gather(const Host& h, const std::vector<Piece>& ps) {
  std::vector<uint8_t> v;
  for (auto& p : ps) v.insert(v.end(), h.buf + p.off, h.buf + p.off + p.len);
  return v;
}
/** Checks that @p msg was scattered over @p ps in order and every other byte kept the canary. */
::testing::AssertionResult scattered(const Host& h, const std::vector<Piece>& ps,
                                     const std::vector<uint8_t>& msg) {
  std::vector<bool> covered(h.size, false);
  size_t at = 0;
  for (auto& p : ps) {
    const size_t n = std::min<size_t>(p.len, msg.size() - at);
    auto r = same_bytes(h.buf + p.off, msg.data() + at, n, "scattered piece");
    if (!r) return r << " (piece at offset " << p.off << ")";
    for (size_t i = 0; i < n; ++i) covered[p.off + i] = true;
    at += n;
  }
  if (at != msg.size()) return ::testing::AssertionFailure() << "receive list shorter than message";
  for (size_t i = 0; i < h.size; ++i)
    if (!covered[i] && h.buf[i] != kCanary)
      return ::testing::AssertionFailure() << "byte " << i << " outside the scatter list was written";
  return ::testing::AssertionSuccess();
}

class DataPath : public VerbsFixture {};

// ---------------------------------------------------------------- gather/scatter lists

// 3 send SGEs (7 + 1000 + 333 = 1340 B) into 3 receive SGEs (100 + 513 + 900): SGE boundaries
// fall inside packets and packet boundaries inside SGEs (path MTU 256 and 1024).
class MultiSge : public VerbsFixture, public ::testing::WithParamInterface<ibv_mtu> {};

TEST_P(MultiSge, SendGathersAndReceiveScatters) {
  Options o;
  o.mtu = GetParam();
  o.buf_size = 64 * 1024;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const std::vector<Piece> send = {{11, 7}, {4099, 1000}, {9001, 333}};
  const std::vector<Piece> recv = {{20001, 100}, {17, 513}, {30000 + 3, 900}};
  for (auto& p : send) fill_pattern(a_.buf + p.off, p.len, uint32_t(p.off));
  memset(b_.buf, kCanary, b_.size);
  const std::vector<uint8_t> msg = gather(a_, send);
  ASSERT_EQ(msg.size(), 1340u);

  ASSERT_EQ(PostRecv(b_, 77, sges_of(b_, recv)), 0);
  ASSERT_EQ(PostSend(a_, 7, IBV_WR_SEND_WITH_IMM, sges_of(a_, send), IBV_SEND_SIGNALED, 0x01020304), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {7, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {77, IBV_WC_RECV, b_.qp->qp_num, 1340, true, 0x01020304}));
  EXPECT_TRUE(scattered(b_, recv, msg));
}

TEST_P(MultiSge, WriteGathersAndReadScatters) {
  Options o;
  o.mtu = GetParam();
  o.buf_size = 64 * 1024;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const std::vector<Piece> src = {{5, 999}, {3001, 1}, {7777, 1500}};  // 2500 B
  for (auto& p : src) fill_pattern(a_.buf + p.off, p.len, uint32_t(p.off) * 3);
  const std::vector<uint8_t> msg = gather(a_, src);
  memset(b_.buf, kCanary, b_.size);
  const size_t remote = 40000 + 1;

  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, sges_of(a_, src), IBV_SEND_SIGNALED, 0, b_.addr(remote),
                     b_.mr->rkey),
            0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(scattered(b_, {{remote, uint32_t(msg.size())}}, msg));

  // Read it back into three other pieces of A.
  const std::vector<Piece> dst = {{50001, 3}, {20000, 1234}, {60000 + 7, 1263}};
  for (auto& p : dst) memset(a_.buf + p.off, kCanary, p.len);
  ASSERT_EQ(
      PostSend(a_, 2, IBV_WR_RDMA_READ, sges_of(a_, dst), IBV_SEND_SIGNALED, 0, b_.addr(remote), b_.mr->rkey),
      0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_RDMA_READ, a_.qp->qp_num, int64_t(msg.size())}));
  size_t at = 0;
  for (auto& p : dst) {
    EXPECT_TRUE(same_bytes(a_.buf + p.off, msg.data() + at, p.len, "read piece"));
    at += p.len;
  }
  EXPECT_TRUE(NoCompletion(b_.rcq, 20)) << "RDMA WRITE/READ must not consume receives";
}

INSTANTIATE_TEST_SUITE_P(Mtu, MultiSge, ::testing::Values(IBV_MTU_256, IBV_MTU_1024),
                         [](const ::testing::TestParamInfo<ibv_mtu>& p) {
                           return "mtu" + std::to_string(mtu_bytes(p.param));
                         });

// A zero-length SGE in the middle of both lists is skipped; the message continues in the next.
TEST_F(DataPath, ZeroLengthSgesAreSkipped) {
  ASSERT_NO_FATAL_FAILURE(Build());
  fill_pattern(a_.buf, 4096, 9);
  memset(b_.buf, kCanary, b_.size);
  const std::vector<Piece> send = {{0, 10}, {100, 0}, {200, 20}};
  const std::vector<Piece> recv = {{1000, 15}, {2000, 0}, {3000, 40}};
  ASSERT_EQ(PostRecv(b_, 1, sges_of(b_, recv)), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, sges_of(a_, send)), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RECV, b_.qp->qp_num, 30}));
  EXPECT_TRUE(scattered(b_, recv, gather(a_, send)));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_SEND, a_.qp->qp_num}));
}

// Zero-length messages without any SGE (num_sge = 0) on either side.
TEST_F(DataPath, ZeroLengthWithoutSges) {
  ASSERT_NO_FATAL_FAILURE(Build());
  memset(b_.buf, kCanary, b_.size);
  ASSERT_EQ(PostRecv(b_, 1, {}), 0);
  ASSERT_EQ(PostRecv(b_, 2, {}), 0);
  ASSERT_EQ(PostSend(a_, 10, IBV_WR_SEND, {}), 0);
  ASSERT_EQ(PostSend(a_, 11, IBV_WR_RDMA_WRITE_WITH_IMM, {}, IBV_SEND_SIGNALED, 0xdeadbeef, 0, 0), 0);
  ASSERT_EQ(PostSend(a_, 12, IBV_WR_RDMA_WRITE, {}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ASSERT_EQ(PostSend(a_, 13, IBV_WR_RDMA_READ, {}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 4, wcs));
  EXPECT_TRUE(wc_is(wcs[0], {10, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[1], {11, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[2], {12, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[3], {13, IBV_WC_RDMA_READ, a_.qp->qp_num, 0}));
  wcs.clear();
  ASSERT_TRUE(PollCq(b_.rcq, 2, wcs));
  EXPECT_TRUE(wc_is(wcs[0], {1, IBV_WC_RECV, b_.qp->qp_num, 0}));
  EXPECT_TRUE(wc_is(wcs[1], {2, IBV_WC_RECV_RDMA_WITH_IMM, b_.qp->qp_num, 0, true, 0xdeadbeef}));
  EXPECT_TRUE(all_bytes(b_.buf, b_.size, kCanary));
}

// ---------------------------------------------------------------- inline

class Inline : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    Options o;
    o.max_inline_data = 128;
    o.buf_size = 64 * 1024;
    ASSERT_NO_FATAL_FAILURE(Build(o));
    max_inline_ = a_.cap.max_inline_data;
    ASSERT_GE(max_inline_, 128u);
  }
  uint32_t max_inline_ = 0;
};

// The data is copied at post time: the buffer may change right after ibv_post_send returns,
// and the lkey is not checked (ibv_post_send(3)).
TEST_F(Inline, SendAndWriteUpToMaxInlineData) {
  const std::vector<uint32_t> lens = {0, 1, 12, 15, 16, 17, 100, max_inline_};
  uint64_t id = 100;
  for (uint32_t len : lens) {
    SCOPED_TRACE("inline length " + std::to_string(len));
    for (ibv_wr_opcode op :
         {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM}) {
      const std::vector<uint8_t> want = make_pattern(len, len * 31 + op);
      if (len) memcpy(a_.buf, want.data(), len);
      memset(b_.buf, kCanary, b_.size);
      const bool recv = op != IBV_WR_RDMA_WRITE;
      if (recv) {
        ASSERT_EQ(PostRecv(b_, id + 1, {b_.sge(4096, 1024)}), 0);
      }
      ibv_sge sge{a_.addr(0), len, 0xdeadbeef /* ignored for inline */};
      ASSERT_EQ(PostSend(a_, id, op, {sge}, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0xabc000 + len,
                         b_.addr(4096), b_.mr->rkey),
                0)
          << strerror(errno);
      memset(a_.buf, 0xee, len);  // reuse the buffer at once
      ibv_wc wc;
      ASSERT_TRUE(PollOne(a_.scq, wc));
      const bool is_send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
      EXPECT_TRUE(wc_is(wc, {id, is_send ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
      if (recv) {
        ASSERT_TRUE(PollOne(b_.rcq, wc));
        const bool imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
        EXPECT_TRUE(
            wc_is(wc, {id + 1, op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
                       b_.qp->qp_num, len, imm, 0xabc000 + len}));
      }
      EXPECT_TRUE(same_bytes(b_.buf + 4096, want.data(), len));
      EXPECT_TRUE(all_bytes(b_.buf + 4096 + len, 1024, kCanary));
      id += 2;
    }
  }
}

// Inline data gathered from several SGEs.
TEST_F(Inline, GathersSeveralSges) {
  fill_pattern(a_.buf, 8192, 5);
  const std::vector<Piece> ps = {{3, 5}, {1000, 60}, {5000, 63}};
  ASSERT_LE(total(ps), max_inline_);
  const std::vector<uint8_t> msg = gather(a_, ps);
  memset(b_.buf, kCanary, b_.size);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(100, 500)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, sges_of(a_, ps), IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RECV, b_.qp->qp_num, total(ps)}));
  EXPECT_TRUE(same_bytes(b_.buf + 100, msg.data(), msg.size()));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_SEND, a_.qp->qp_num}));
}

// One byte over max_inline_data is an invalid WR: EINVAL, bad_wr names it, nothing is posted,
// and the QP keeps working.
TEST_F(Inline, OverMaxInlineDataIsRejected) {
  ibv_sge sge = a_.sge(0, max_inline_ + 1);
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a_.qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  EXPECT_TRUE(NoCompletion(a_.scq, 50));
  ASSERT_EQ(PostRecv(b_, 3, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 64)}, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {3, IBV_WC_RECV, b_.qp->qp_num, 64}));
}

// ---------------------------------------------------------------- signaling

// Unsignaled WRs produce no CQE; the signaled one after them produces exactly one, with its
// own wr_id, and (RC completes in order) all the data of the earlier ones is in place.
TEST_F(DataPath, UnsignaledThenSignaled) {
  Options o;
  o.max_send_wr = 16;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 8 * 1024, 3);
  memset(b_.buf, kCanary, b_.size);
  ASSERT_EQ(PostRecv(b_, 500, {b_.sge(60000, 2000)}), 0);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(PostSend(a_, 10 + i, IBV_WR_RDMA_WRITE, {a_.sge(i * 1500, 1500)}, 0, 0, b_.addr(i * 1500),
                       b_.mr->rkey),
              0);
  ASSERT_EQ(PostSend(a_, 99, IBV_WR_SEND, {a_.sge(6000, 2000)}, IBV_SEND_SIGNALED), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {99, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(NoCompletion(a_.scq, 200)) << "unsignaled WRs must not complete";
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {500, IBV_WC_RECV, b_.qp->qp_num, 2000}));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, 6000, "unsignaled writes"));
  EXPECT_TRUE(same_bytes(b_.buf + 60000, a_.buf + 6000, 2000, "send"));
}

// The signaled CQE frees the send-queue slots of the unsignaled WRs before it: many rounds
// of (7 unsignaled + 1 signaled) through a queue of 8 never see ENOMEM.
TEST_F(DataPath, SignaledCompletionFreesUnsignaledSlots) {
  Options o;
  o.max_send_wr = 8;
  o.max_send_sge = 1;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 64 * 1024, 4);
  const uint32_t depth = a_.cap.max_send_wr;
  for (uint32_t round = 0; round < 20; ++round) {
    for (uint32_t i = 0; i + 1 < depth; ++i) {
      const size_t off = (round * depth + i) * 64 % (64 * 1024 - 64);
      ASSERT_EQ(PostSend(a_, 1000 * round + i, IBV_WR_RDMA_WRITE, {a_.sge(off, 64)}, 0, 0, b_.addr(off),
                         b_.mr->rkey),
                0)
          << "round " << round << " WR " << i << ": " << strerror(errno);
    }
    ASSERT_EQ(PostSend(a_, 1000 * round + 999, IBV_WR_RDMA_WRITE, {a_.sge(0, 8)}, IBV_SEND_SIGNALED, 0,
                       b_.addr(0), b_.mr->rkey),
              0)
        << "round " << round;
    ibv_wc wc;
    ASSERT_TRUE(PollOne(a_.scq, wc));
    ASSERT_TRUE(wc_is(wc, {1000 * round + 999, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  }
  EXPECT_TRUE(NoCompletion(a_.scq, 20));
}

// sq_sig_all = 1: every WR completes, IBV_SEND_SIGNALED or not.
TEST_F(DataPath, SqSigAllSignalsEveryWr) {
  Options o;
  o.sq_sig_all = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(PostSend(a_, 40 + i, IBV_WR_RDMA_WRITE, {a_.sge(0, 100)}, 0, 0, b_.addr(0), b_.mr->rkey), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 3, wcs));
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(wc_is(wcs[i], {uint64_t(40 + i), IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
}

// ---------------------------------------------------------------- queue depth and order

// Fill the send queue: max_send_wr WRs go in, the next gets ENOMEM with bad_wr pointing at
// it; all complete in posting order; then the queue takes WRs again.
TEST_F(DataPath, FullSendQueueGivesEnomemAndCompletesInOrder) {
  Options o;
  o.max_send_wr = 64;
  // One WQEBB per WR in a ring sized for two (room for 16 bytes inline): the queue still holds
  // exactly max_send_wr WRs, as mlx5's (it counts WRs, not blocks).
  o.max_send_sge = 1;
  o.cqe = 256;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint32_t depth = a_.cap.max_send_wr;
  ASSERT_EQ(depth, 64u);
  fill_pattern(a_.buf, 64 * 1024, 6);
  memset(b_.buf, kCanary, b_.size);
  // One chained list of depth + 1 WRs.
  std::vector<ibv_sge> sge(depth + 1);
  std::vector<ibv_send_wr> wr(depth + 1);
  for (uint32_t i = 0; i <= depth; ++i) {
    sge[i] = a_.sge(i * 1000, 1000);
    wr[i] = ibv_send_wr{};
    wr[i].wr_id = 0x7000 + i;
    wr[i].sg_list = &sge[i];
    wr[i].num_sge = 1;
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].send_flags = IBV_SEND_SIGNALED;
    wr[i].wr.rdma.remote_addr = b_.addr(i * 1000);
    wr[i].wr.rdma.rkey = b_.mr->rkey;
    wr[i].next = i < depth ? &wr[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a_.qp, &wr[0], &bad), ENOMEM);
  EXPECT_EQ(bad, &wr[depth]) << "bad_wr must be the first WR not posted";
  // Still full until something completes (nothing was polled yet).
  ibv_send_wr one = wr[depth];
  one.next = nullptr;
  EXPECT_EQ(ibv_post_send(a_.qp, &one, &bad), ENOMEM);
  EXPECT_EQ(bad, &one);

  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, depth, wcs));
  for (uint32_t i = 0; i < depth; ++i)
    EXPECT_TRUE(wc_is(wcs[i], {0x7000 + i, IBV_WC_RDMA_WRITE, a_.qp->qp_num})) << "completion " << i;
  EXPECT_TRUE(NoCompletion(a_.scq, 50));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, depth * 1000, "written"));
  EXPECT_TRUE(all_bytes(b_.buf + depth * 1000, 1000, kCanary));

  // Room again.
  ASSERT_EQ(ibv_post_send(a_.qp, &one, &bad), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {0x7000 + depth, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(same_bytes(b_.buf + depth * 1000, a_.buf + depth * 1000, 1000));
}

// The receive queue holds max_recv_wr receives; one more is ENOMEM.
TEST_F(DataPath, FullReceiveQueueGivesEnomem) {
  Options o;
  o.max_recv_wr = 16;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint32_t depth = b_.cap.max_recv_wr;
  for (uint32_t i = 0; i < depth; ++i) ASSERT_EQ(PostRecv(b_, i, {b_.sge(i * 64, 64)}), 0) << i;
  EXPECT_EQ(PostRecv(b_, depth, {b_.sge(0, 64)}), ENOMEM);
  // Consume them all, in order.
  fill_pattern(a_.buf, 64 * depth, 8);
  for (uint32_t i = 0; i < depth; ++i) ASSERT_EQ(PostSend(a_, 100 + i, IBV_WR_SEND, {a_.sge(i * 64, 64)}), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(b_.rcq, depth, wcs));
  for (uint32_t i = 0; i < depth; ++i) EXPECT_TRUE(wc_is(wcs[i], {i, IBV_WC_RECV, b_.qp->qp_num, 64}));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, 64 * depth));
  wcs.clear();
  ASSERT_TRUE(PollCq(a_.scq, depth, wcs));
  EXPECT_EQ(PostRecv(b_, 99, {b_.sge(0, 64)}), 0);
}

// Mixed opcodes in one list: send completions come back in posting order (a READ's completion
// waits for its response even if later WRs were acknowledged), receives in posting order.
TEST_F(DataPath, MixedOpcodesCompleteInPostingOrder) {
  Options o;
  o.buf_size = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 1 << 19, 11);
  fill_pattern(b_.buf + (1 << 19), 1 << 19, 12);
  struct W {
    ibv_wr_opcode op;
    uint32_t len;
  };
  const std::vector<W> ws = {{IBV_WR_RDMA_READ, 70000},       {IBV_WR_SEND, 10},
                             {IBV_WR_RDMA_WRITE, 5000},       {IBV_WR_RDMA_READ, 1},
                             {IBV_WR_SEND_WITH_IMM, 3000},    {IBV_WR_RDMA_READ, 0},
                             {IBV_WR_RDMA_WRITE_WITH_IMM, 1}, {IBV_WR_SEND, 0},
                             {IBV_WR_RDMA_READ, 4096}};
  uint32_t recvs = 0;
  for (auto& w : ws)
    if (w.op == IBV_WR_SEND || w.op == IBV_WR_SEND_WITH_IMM || w.op == IBV_WR_RDMA_WRITE_WITH_IMM) ++recvs;
  for (uint32_t i = 0; i < recvs; ++i) ASSERT_EQ(PostRecv(b_, 900 + i, {b_.sge(200000 + i * 8192, 8192)}), 0);
  // Sources of SEND/WRITE at A[0..), their targets at B[100000..); READs from B[2^19..) into A[600000..).
  size_t a_src = 0, b_dst = 100000, b_src = 1 << 19, a_dst = 600000;
  std::vector<size_t> a_offs, b_offs;
  for (size_t i = 0; i < ws.size(); ++i) {
    const bool rd = ws[i].op == IBV_WR_RDMA_READ;
    size_t& a_cur = rd ? a_dst : a_src;
    size_t& b_cur = rd ? b_src : b_dst;
    a_offs.push_back(a_cur);
    b_offs.push_back(b_cur);
    ASSERT_EQ(PostSend(a_, i, ws[i].op, {a_.sge(a_cur, ws[i].len)}, IBV_SEND_SIGNALED, 0x1110 + uint32_t(i),
                       b_.addr(b_cur), b_.mr->rkey),
              0);
    a_cur += ws[i].len + 1;
    b_cur += ws[i].len + 1;
  }
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, ws.size(), wcs));
  for (size_t i = 0; i < ws.size(); ++i) {
    const ibv_wc_opcode want = ws[i].op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                               : (ws[i].op == IBV_WR_SEND || ws[i].op == IBV_WR_SEND_WITH_IMM)
                                   ? IBV_WC_SEND
                                   : IBV_WC_RDMA_WRITE;
    WcExpect e{i, want, a_.qp->qp_num};
    if (ws[i].op == IBV_WR_RDMA_READ) e.byte_len = ws[i].len;
    EXPECT_TRUE(wc_is(wcs[i], e)) << "send completion " << i;
  }
  wcs.clear();
  ASSERT_TRUE(PollCq(b_.rcq, recvs, wcs));
  uint32_t r = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const ibv_wr_opcode op = ws[i].op;
    if (op == IBV_WR_RDMA_READ) {
      EXPECT_TRUE(same_bytes(a_.buf + a_offs[i], b_.buf + b_offs[i], ws[i].len, "read"));
    } else if (op == IBV_WR_RDMA_WRITE) {
      EXPECT_TRUE(same_bytes(b_.buf + b_offs[i], a_.buf + a_offs[i], ws[i].len, "write"));
    } else {
      const bool imm = op != IBV_WR_SEND;
      EXPECT_TRUE(
          wc_is(wcs[r], {900 + r, op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
                         b_.qp->qp_num, ws[i].len, imm, 0x1110 + uint32_t(i)}))
          << "receive completion " << r;
      const size_t land = op == IBV_WR_RDMA_WRITE_WITH_IMM ? b_offs[i] : 200000 + r * 8192;
      EXPECT_TRUE(same_bytes(b_.buf + land, a_.buf + a_offs[i], ws[i].len, "send/write_imm"));
      ++r;
    }
  }
}

// A SEND right behind a long READ: its ACK must not overtake the READ responses (responses go
// back in PSN order), or the requester, still waiting for READ data, drops the ACK and the
// SEND never completes.
TEST_F(DataPath, SendBehindLongReadCompletes) {
  Options o;
  o.buf_size = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(b_.buf, 100000, 41);
  fill_pattern(a_.buf + 500000, 64, 42);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(600000, 64)}), 0);
  ASSERT_EQ(
      PostSend(a_, 10, IBV_WR_RDMA_READ, {a_.sge(0, 100000)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ASSERT_EQ(PostSend(a_, 11, IBV_WR_SEND, {a_.sge(500000, 64)}), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs));
  EXPECT_TRUE(wc_is(wcs[0], {10, IBV_WC_RDMA_READ, a_.qp->qp_num, 100000}));
  EXPECT_TRUE(wc_is(wcs[1], {11, IBV_WC_SEND, a_.qp->qp_num}));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RECV, b_.qp->qp_num, 64}));
  EXPECT_TRUE(same_bytes(a_.buf, b_.buf, 100000, "read"));
  EXPECT_TRUE(same_bytes(b_.buf + 600000, a_.buf + 500000, 64, "send"));
}

// A short WR posted while a long one is still on the wire goes after it (PSN order), without
// sequence-error NAKs or retransmissions on the simulator.
TEST_F(DataPath, ShortWrPostedDuringLongOneStaysInOrder) {
  Options o;
  o.buf_size = 3 << 20;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 1 << 20, 31);
  fill_pattern(a_.buf + (2 << 20), 4096, 32);
  const bool sim = sim_present();
  const uint64_t naks0 = sim ? sim_counter(Dev(b_), "naks") : 0;
  const uint64_t retx0 = sim ? sim_counter(Dev(a_), "retransmits") : 0;
  const uint64_t tx0 = sim ? sim_counter(Dev(a_), "tx_packets") : 0;
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(2 << 20, 4096)}), 0);
  ASSERT_EQ(PostSend(a_, 10, IBV_WR_RDMA_WRITE, {a_.sge(0, 1 << 20)}, IBV_SEND_SIGNALED, 0, b_.addr(0),
                     b_.mr->rkey),
            0);
  ibv_wc wc;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ibv_poll_cq(a_.scq, 1, &wc), 0);  // let the WRITE get going
  ASSERT_EQ(PostSend(a_, 11, IBV_WR_SEND, {a_.sge(2 << 20, 100)}), 0);
  ASSERT_EQ(PostSend(a_, 12, IBV_WR_RDMA_WRITE, {a_.sge(2 << 20, 4096)}, IBV_SEND_SIGNALED, 0,
                     b_.addr(1 << 20), b_.mr->rkey),
            0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 3, wcs));
  EXPECT_TRUE(wc_is(wcs[0], {10, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[1], {11, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[2], {12, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RECV, b_.qp->qp_num, 100}));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, 1 << 20));
  EXPECT_TRUE(same_bytes(b_.buf + (1 << 20), a_.buf + (2 << 20), 4096));
  if (sim) {
    EXPECT_EQ(sim_counter(Dev(b_), "naks") - naks0, 0u) << "requests left out of PSN order";
    EXPECT_EQ(sim_counter(Dev(a_), "retransmits") - retx0, 0u);
    EXPECT_EQ(sim_counter(Dev(a_), "tx_packets") - tx0, 1024u + 1 + 4);
  }
}

// Both directions at once on one connection, with a shared CQ per host.
TEST_F(DataPath, BothDirectionsAtOnce) {
  Options o;
  o.buf_size = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 200000, 21);
  fill_pattern(b_.buf, 200000, 22);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(PostRecv(a_, 10 + i, {a_.sge(500000 + i * 50000, 50000)}), 0);
    ASSERT_EQ(PostRecv(b_, 20 + i, {b_.sge(500000 + i * 50000, 50000)}), 0);
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(PostSend(a_, 30 + i, IBV_WR_SEND, {a_.sge(i * 50000, 50000)}), 0);
    ASSERT_EQ(PostSend(b_, 40 + i, IBV_WR_SEND, {b_.sge(i * 50000, 50000)}), 0);
  }
  for (Host* h : {&a_, &b_}) {
    std::vector<ibv_wc> wcs;
    ASSERT_TRUE(PollCq(h->scq, 8, wcs));
    int s = 0, r = 0;
    for (auto& wc : wcs) {
      if (wc.opcode == IBV_WC_SEND) {
        EXPECT_TRUE(wc_is(wc, {uint64_t((h == &a_ ? 30 : 40) + s++), IBV_WC_SEND, h->qp->qp_num}));
      } else {
        EXPECT_TRUE(wc_is(wc, {uint64_t((h == &a_ ? 10 : 20) + r++), IBV_WC_RECV, h->qp->qp_num, 50000}));
      }
    }
    EXPECT_EQ(s, 4);
    EXPECT_EQ(r, 4);
  }
  EXPECT_TRUE(same_bytes(b_.buf + 500000, a_.buf, 200000, "A to B"));
  EXPECT_TRUE(same_bytes(a_.buf + 500000, b_.buf, 200000, "B to A"));
}

}  // namespace
}  // namespace e2e
