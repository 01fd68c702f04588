// SPDX-License-Identifier: Apache-2.0
// Every RC opcode at the lengths that stress segmentation (0, 1, MTU-1, MTU, MTU+1, 3*MTU+17,
// 1 MiB) and path MTUs 1024 and 4096: payload verified byte for byte (and the bytes around it
// untouched), every work-completion field checked, and, on the simulator, the packet count.
#include "verbs_fixture.h"

namespace e2e {
namespace {

enum class Op { Send, SendImm, Write, WriteImm, Read };
enum class Len { Zero, One, MtuMinus1, Mtu, MtuPlus1, ThreeMtuPlus17, OneMiB };

const char* op_name(Op op) {
  switch (op) {
    case Op::Send: return "SEND";
    case Op::SendImm: return "SEND_WITH_IMM";
    case Op::Write: return "RDMA_WRITE";
    case Op::WriteImm: return "RDMA_WRITE_WITH_IMM";
    case Op::Read: return "RDMA_READ";
  }
  return "?";
}
const char* len_name(Len l) {
  switch (l) {
    case Len::Zero: return "0";
    case Len::One: return "1";
    case Len::MtuMinus1: return "MTUminus1";
    case Len::Mtu: return "MTU";
    case Len::MtuPlus1: return "MTUplus1";
    case Len::ThreeMtuPlus17: return "3MTUplus17";
    case Len::OneMiB: return "1MiB";
  }
  return "?";
}
uint32_t length_of(Len l, uint32_t mtu) {
  switch (l) {
    case Len::Zero: return 0;
    case Len::One: return 1;
    case Len::MtuMinus1: return mtu - 1;
    case Len::Mtu: return mtu;
    case Len::MtuPlus1: return mtu + 1;
    case Len::ThreeMtuPlus17: return 3 * mtu + 17;
    case Len::OneMiB: return 1u << 20;
  }
  return 0;
}
ibv_wr_opcode wr_opcode(Op op) {
  switch (op) {
    case Op::Send: return IBV_WR_SEND;
    case Op::SendImm: return IBV_WR_SEND_WITH_IMM;
    case Op::Write: return IBV_WR_RDMA_WRITE;
    case Op::WriteImm: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case Op::Read: return IBV_WR_RDMA_READ;
  }
  return IBV_WR_SEND;
}
ibv_wc_opcode send_wc_opcode(Op op) {
  switch (op) {
    case Op::Send:
    case Op::SendImm: return IBV_WC_SEND;
    case Op::Write:
    case Op::WriteImm: return IBV_WC_RDMA_WRITE;
    case Op::Read: return IBV_WC_RDMA_READ;
  }
  return IBV_WC_SEND;
}
bool has_imm(Op op) { return op == Op::SendImm || op == Op::WriteImm; }
bool consumes_recv(Op op) { return op == Op::Send || op == Op::SendImm || op == Op::WriteImm; }

using Param = std::tuple<Op, ibv_mtu, Len>;

class Opcodes : public VerbsFixture, public ::testing::WithParamInterface<Param> {};

// A's buffer and B's buffer each hold a source region and a destination region. Regions start
// at odd offsets so nothing is conveniently aligned; a canary band surrounds every target.
constexpr size_t kSrcOff = 4096 + 7;
constexpr size_t kGuard = 64;
constexpr uint8_t kCanary = 0xa5;

TEST_P(Opcodes, Transfer) {
  const auto [op, mtu_enum, len_kind] = GetParam();
  const uint32_t mtu = mtu_bytes(mtu_enum);
  const uint32_t len = length_of(len_kind, mtu);
  const size_t dst_off = kSrcOff + len + 2 * kGuard + 4096 + 3;  // B's landing zone
  Options o;
  o.mtu = mtu_enum;
  o.buf_size = dst_off + len + kGuard + 4096;
  ASSERT_NO_FATAL_FAILURE(Build(o));

  // Who holds the data and who receives it: READ pulls B's bytes into A.
  const bool is_read = op == Op::Read;
  Host& src = is_read ? b_ : a_;
  Host& dst = is_read ? a_ : b_;
  const uint32_t seed = 0x100u * uint32_t(op) + uint32_t(len_kind) + mtu;
  const std::vector<uint8_t> want = make_pattern(len, seed);
  if (len) memcpy(src.buf + kSrcOff, want.data(), len);  // (an empty vector's data() may be null)
  memset(dst.buf, kCanary, dst.size);

  const uint64_t wr_id = 0xabc0000000000000ull | (uint64_t(seed) << 8) | 1;
  const uint64_t recv_id = 0x5eed000000000000ull | seed;
  const uint32_t imm = 0xfeed0000u ^ seed ^ len;
  const uint64_t pkts = len == 0 ? 1 : (len + mtu - 1) / mtu;
  const bool sim = sim_present();
  uint64_t tx_a0 = 0, tx_b0 = 0;
  if (sim) {
    tx_a0 = sim_counter(Dev(a_), "tx_packets");
    tx_b0 = sim_counter(Dev(b_), "tx_packets");
  }

  if (consumes_recv(op)) {
    // SEND lands in the receive buffer (given room to spare: byte_len must be the message,
    // not the buffer); WRITE_WITH_IMM only consumes the WQE, so it posts none.
    std::vector<ibv_sge> rs;
    if (op != Op::WriteImm) rs.push_back(b_.sge(dst_off, len + 100));
    ASSERT_EQ(PostRecv(b_, recv_id, rs), 0);
  }
  std::vector<ibv_sge> ss;
  if (len) ss.push_back(a_.sge(is_read ? dst_off : kSrcOff, len));
  const uint64_t raddr = is_read ? b_.addr(kSrcOff) : b_.addr(dst_off);
  ASSERT_EQ(PostSend(a_, wr_id, wr_opcode(op), ss, IBV_SEND_SIGNALED, imm, raddr, b_.mr->rkey), 0)
      << strerror(errno);

  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_.scq, wc));
  WcExpect ws{wr_id, send_wc_opcode(op), a_.qp->qp_num};
  if (is_read) ws.byte_len = len;
  EXPECT_TRUE(wc_is(wc, ws));
  if (consumes_recv(op)) {
    ASSERT_TRUE(PollOne(b_.rcq, wc));
    WcExpect wr{recv_id,       op == Op::WriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
                b_.qp->qp_num, len,
                has_imm(op),   imm};
    EXPECT_TRUE(wc_is(wc, wr));
  }
  EXPECT_TRUE(NoCompletion(a_.scq, 20));
  EXPECT_TRUE(NoCompletion(b_.rcq, 20));

  EXPECT_TRUE(same_bytes(dst.buf + dst_off, want.data(), len));
  EXPECT_TRUE(all_bytes(dst.buf, dst_off, kCanary, "bytes before the target"));
  EXPECT_TRUE(
      all_bytes(dst.buf + dst_off + len, dst.size - dst_off - len, kCanary, "bytes after the target"));

  if (sim) {
    // SEND/WRITE: ceil(len/MTU) request packets (1 for len 0) and one coalesced ACK for every
    // 64 of them (the requester asks for one every 64th packet and at the end, as rxe does about
    // every 66th). READ: one request, ceil(len/MTU) response packets.
    const uint64_t acks = (pkts + 63) / 64;
    EXPECT_EQ(sim_counter(Dev(a_), "tx_packets") - tx_a0, is_read ? 1 : pkts);
    EXPECT_EQ(sim_counter(Dev(b_), "tx_packets") - tx_b0, is_read ? pkts : acks);
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& p) {
  return std::string(op_name(std::get<0>(p.param))) + "_len_" + len_name(std::get<2>(p.param));
}

const auto kOps = ::testing::Values(Op::Send, Op::SendImm, Op::Write, Op::WriteImm, Op::Read);
const auto kLens = ::testing::Values(Len::Zero, Len::One, Len::MtuMinus1, Len::Mtu, Len::MtuPlus1,
                                     Len::ThreeMtuPlus17, Len::OneMiB);
INSTANTIATE_TEST_SUITE_P(Mtu1024, Opcodes, ::testing::Combine(kOps, ::testing::Values(IBV_MTU_1024), kLens),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Mtu4096, Opcodes, ::testing::Combine(kOps, ::testing::Values(IBV_MTU_4096), kLens),
                         param_name);

// ---------------------------------------------------------------- PSNs across the 24-bit wrap

class PsnWrap : public VerbsFixture {};

TEST_F(PsnWrap, MessagesCrossPsnZero) {
  Options o;
  o.mtu = IBV_MTU_1024;
  o.buf_size = 3 << 20;
  o.psn_a = 0xfffffe;  // the first message's third packet carries PSN 0
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint32_t n = 3 * 1024 + 17;
  fill_pattern(a_.buf, n, 1);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, n)}), 0);
  ASSERT_EQ(PostSend(a_, 10, IBV_WR_SEND, {a_.sge(0, n)}), 0);
  // A 1 MiB write and read both crossing nothing but following the wrap.
  fill_pattern(a_.buf + (1 << 20), 1 << 20, 2);
  ASSERT_EQ(PostSend(a_, 11, IBV_WR_RDMA_WRITE, {a_.sge(1 << 20, 1 << 20)}, IBV_SEND_SIGNALED, 0,
                     b_.addr(1 << 20), b_.mr->rkey),
            0);
  ASSERT_EQ(PostSend(a_, 12, IBV_WR_RDMA_READ, {a_.sge(2 << 20, 1 << 20)}, IBV_SEND_SIGNALED, 0,
                     b_.addr(1 << 20), b_.mr->rkey),
            0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 3, wcs));
  EXPECT_TRUE(wc_is(wcs[0], {10, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[1], {11, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(wc_is(wcs[2], {12, IBV_WC_RDMA_READ, a_.qp->qp_num, 1 << 20}));
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RECV, b_.qp->qp_num, n}));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, n));
  EXPECT_TRUE(same_bytes(b_.buf + (1 << 20), a_.buf + (1 << 20), 1 << 20, "written"));
  EXPECT_TRUE(same_bytes(a_.buf + (2 << 20), a_.buf + (1 << 20), 1 << 20, "read back"));
  // Both sides agree on where the PSNs are now: 4 + 1024 + 1024 packets after 0xfffffe.
  ibv_qp_attr qa{};
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(a_.qp, &qa, IBV_QP_SQ_PSN, &ia), 0);
  EXPECT_EQ(qa.sq_psn, (0xfffffeu + 4 + 1024 + 1024) & 0xffffff);
}

}  // namespace
}  // namespace e2e
