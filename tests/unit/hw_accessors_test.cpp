// SPDX-License-Identifier: Apache-2.0
/**
 * @file hw_accessors_test.cpp
 * @brief The contract's accessors (hca_hw.h): every setter writes the byte image the device
 *        expects, and every getter reads back exactly what its setter wrote — including values
 *        at the edges of each field's width, so a mask or shift off by one bit fails here.
 *
 * The driver encodes with these and the model decodes with them (and the other way round for
 * CQEs and EQEs), so a round trip through the bytes is the whole contract.
 */
#include <hcasim/hca_hw.h>

#include <gtest/gtest.h>

#include "byte_image.h"

#include <cstring>
#include <vector>

namespace hcasim::hw {
namespace {

TEST(HwAccessors, CtrlSegRoundTripAtFieldEdges) {
  CtrlSeg c;
  set_ctrl_seg(c, 0xffff, WqeOpcode::AtomicFetchAdd, 0xffffff, 0x3f, kCtrlCqUpdate | kCtrlFence, 0x11223344);
  EXPECT_EQ(ctrl_wqe_index(c), 0xffff);
  EXPECT_EQ(ctrl_opcode(c), WqeOpcode::AtomicFetchAdd);
  EXPECT_EQ(ctrl_qpn(c), 0xffffffu);
  EXPECT_EQ(ctrl_ds(c), 0x3fu);
  EXPECT_EQ(ctrl_flags(c), kCtrlCqUpdate | kCtrlFence);
  EXPECT_EQ(ctrl_imm(c), 0x11223344u);
  // Byte image: index 0xffff and opcode 0x12 in the first word, big-endian.
  const auto b = bytes_of(c);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0xff);
  EXPECT_EQ(b[2], 0xff);
  EXPECT_EQ(b[3], 0x12);
  EXPECT_EQ(b[7], 0x3f);
  EXPECT_EQ(b[11], kCtrlCqUpdate | kCtrlFence);

  set_ctrl_seg(c, 1, WqeOpcode::Send, 0x12, 2, 0, 0);
  EXPECT_EQ(ctrl_wqe_index(c), 1);
  EXPECT_EQ(ctrl_qpn(c), 0x12u);
  EXPECT_EQ(ctrl_ds(c), 2u);
  EXPECT_EQ(ctrl_flags(c), 0);
}

TEST(HwAccessors, DsTooLargeForTheFieldIsMaskedNotSpilledIntoTheQpn) {
  CtrlSeg c;
  set_ctrl_seg(c, 0, WqeOpcode::Send, 0x11, 0x40 | 3, 0, 0);
  EXPECT_EQ(ctrl_ds(c), 3u);
  EXPECT_EQ(ctrl_qpn(c), 0x11u);
}

TEST(HwAccessors, SegmentCountsAndWqebbs) {
  EXPECT_EQ(wqe_bbs_for_segments(1), 1u);
  EXPECT_EQ(wqe_bbs_for_segments(4), 1u);
  EXPECT_EQ(wqe_bbs_for_segments(5), 2u);
  EXPECT_EQ(wqe_bbs_for_segments(16), 4u);
  EXPECT_EQ(inline_segments(0), 1u);
  EXPECT_EQ(inline_segments(12), 1u);
  EXPECT_EQ(inline_segments(13), 2u);
  uint8_t wqe[64];
  EXPECT_EQ(wqe_segment(wqe, 3), wqe + 48);
}

TEST(HwAccessors, RaddrAtomicDataSegRoundTrip) {
  RaddrSeg r;
  set_raddr_seg(r, 0x0123456789abcdefull, 0xdeadbeef);
  EXPECT_EQ(raddr_seg_addr(r), 0x0123456789abcdefull);
  EXPECT_EQ(raddr_seg_rkey(r), 0xdeadbeefu);
  EXPECT_EQ(bytes_of(r)[0], 0x01);
  EXPECT_EQ(bytes_of(r)[8], 0xde);

  AtomicSeg a;
  set_atomic_seg(a, ~0ull, 1);
  EXPECT_EQ(atomic_seg_swap_add(a), ~0ull);
  EXPECT_EQ(atomic_seg_compare(a), 1ull);
  EXPECT_EQ(bytes_of(a)[15], 0x01);

  DataSeg d;
  set_data_seg(d, 0x1000, 0x80000000u - 1, 0x42);
  EXPECT_EQ(data_seg_addr(d), 0x1000ull);
  EXPECT_EQ(data_seg_length(d), 0x7fffffffu);
  EXPECT_EQ(data_seg_lkey(d), 0x42u);
  EXPECT_FALSE(seg_is_inline(reinterpret_cast<const uint8_t*>(&d)));
  EXPECT_FALSE(data_seg_is_terminator(d));
  set_recv_terminator(d);
  EXPECT_TRUE(data_seg_is_terminator(d));
  EXPECT_EQ(data_seg_length(d), 0u);
}

TEST(HwAccessors, InlineSegIsTellableFromADataSeg) {
  InlineSeg s;
  set_inline_seg(s, 220);
  EXPECT_TRUE(seg_is_inline(reinterpret_cast<const uint8_t*>(&s)));
  EXPECT_EQ(inline_seg_length(s), 220u);
  EXPECT_EQ(bytes_of(s)[0], 0x80);  // the flag is the top bit of the big-endian count
}

TEST(HwAccessors, CqeRoundTripEveryField) {
  CqeFields in;
  in.opcode = CqeOpcode::RespSendImm;
  in.timestamp_ns = 0x0102030405060708ull;
  in.byte_cnt = 0xfffffffe;
  in.imm = 0xa1b2c3d4;
  in.qpn = 0xfffffe;
  in.src_qp = 0x123456;
  in.wqe_counter = 0xfffe;
  in.syndrome = CqeSyndrome::RemoteAccessErr;
  in.vendor_syndrome = 7;
  in.flags = kCqeWithImm | kCqeSolicited;
  in.req_opcode = WqeOpcode::RdmaRead;
  Cqe c;
  set_cqe(c, in, 1);
  const CqeFields out = get_cqe(c);
  EXPECT_EQ(out.opcode, in.opcode);
  EXPECT_EQ(out.timestamp_ns, in.timestamp_ns);
  EXPECT_EQ(out.byte_cnt, in.byte_cnt);
  EXPECT_EQ(out.imm, in.imm);
  EXPECT_EQ(out.qpn, in.qpn);
  EXPECT_EQ(out.src_qp, in.src_qp);
  EXPECT_EQ(out.wqe_counter, in.wqe_counter);
  EXPECT_EQ(out.syndrome, in.syndrome);
  EXPECT_EQ(out.vendor_syndrome, in.vendor_syndrome);
  EXPECT_EQ(out.flags, in.flags);
  EXPECT_EQ(out.req_opcode, in.req_opcode);
  EXPECT_EQ(c.op_own, 0x31);  // opcode 3 in the high nibble, owner 1
  EXPECT_EQ(cqe_owner(c.op_own), 1);
}

TEST(HwAccessors, CqeQpnKeepsOnly24Bits) {
  CqeFields in;
  in.qpn = 0xff000011;
  Cqe c;
  set_cqe(c, in, 0);
  EXPECT_EQ(get_cqe(c).qpn, 0x11u);
}

TEST(HwAccessors, CqeReadyFollowsTheOwnerBitAcrossWraps) {
  // A ring of 4 CQEs: pass 0 is written with owner 0, pass 1 with owner 1, ...
  const uint32_t log = 2;
  uint8_t ring[4 * kCqeSize];
  for (uint32_t i = 0; i < 4; ++i) cqe_init(ring + i * kCqeSize);
  for (uint32_t ci = 0; ci < 16; ++ci)
    EXPECT_FALSE(cqe_ready(cqe_load_op_own(ring + (ci & 3) * kCqeSize), ci, log)) << "initial CQE " << ci;
  for (uint32_t pi = 0; pi < 12; ++pi) {
    Cqe c;
    set_cqe(c, CqeFields{}, cqe_owner_for(pi, log));
    std::memcpy(ring + (pi & 3) * kCqeSize, &c, sizeof c);
    EXPECT_TRUE(cqe_ready(cqe_load_op_own(ring + (pi & 3) * kCqeSize), pi, log)) << pi;
    // The same slot read as the next pass's CQE is stale.
    EXPECT_FALSE(cqe_ready(cqe_load_op_own(ring + (pi & 3) * kCqeSize), pi + 4, log)) << pi;
  }
}

TEST(HwAccessors, EqeRoundTripAndOwnership) {
  Eqe e;
  set_eqe(e, EqeType::SrqLimit, 0xabcdef, 12345, eqe_owner_for(8, 3));
  EXPECT_EQ(eqe_type(e), EqeType::SrqLimit);
  EXPECT_EQ(eqe_resource(e), 0xabcdefu);
  EXPECT_EQ(eqe_timestamp_ns(e), 12345u);
  EXPECT_EQ(e.owner, 1);
  EXPECT_TRUE(eqe_ready(e.owner, 8, 3));
  EXPECT_FALSE(eqe_ready(e.owner, 0, 3));
  uint8_t raw[kEqeSize];
  eqe_init(raw);
  EXPECT_FALSE(eqe_ready(eqe_load_owner(raw), 0, 3));  // hardware owns a fresh ring
}

TEST(HwAccessors, DoorbellValuesDecodeToWhatWasEncoded) {
  const uint64_t sq = sq_doorbell_value(0xabcdef, 0xfffe);
  EXPECT_EQ(sq_doorbell_qpn(sq), 0xabcdefu);
  EXPECT_EQ(sq_doorbell_pi(sq), 0xfffe);

  const uint64_t arm = cq_arm_value(0xfffff0, 0xfffff1, 0xf, true);
  EXPECT_EQ(cq_arm_cqn(arm), 0xfffff0u);
  EXPECT_EQ(cq_arm_ci(arm), 0xfffff1u);
  EXPECT_EQ(cq_arm_sn(arm), 0xfu);
  EXPECT_TRUE(cq_arm_solicited(arm));
  const uint64_t next = cq_arm_value(5, 6, 0x12, false);  // sn wraps at 4 bits
  EXPECT_EQ(cq_arm_sn(next), 2u);
  EXPECT_FALSE(cq_arm_solicited(next));
  EXPECT_EQ(cq_arm_cqn(next), 5u);
  EXPECT_EQ(cq_arm_ci(next), 6u);
  EXPECT_EQ(cq_arm_word(next), uint32_t(next >> 32));

  const uint64_t eq = eq_arm_value(0x31, 0x1000001);
  EXPECT_EQ(eq_arm_eqn(eq), 0x31u);
  EXPECT_EQ(eq_arm_ci(eq), 1u);  // consumer index is 24 bits
}

TEST(HwAccessors, DoorbellRecords) {
  QpDbrec q{};
  qp_dbrec_set_sq(q, 0x1234);
  qp_dbrec_set_rq(q, 0xffff);
  EXPECT_EQ(qp_dbrec_sq(q), 0x1234);
  EXPECT_EQ(qp_dbrec_rq(q), 0xffff);
  EXPECT_EQ(bytes_of(q)[7], 0x34);  // sq_counter, big-endian, second word

  CqDbrec c{};
  cq_dbrec_set_ci(c, 0x1abcdef);
  EXPECT_EQ(cq_dbrec_ci(c), 0xabcdefu);
  cq_dbrec_set_arm(c, cq_arm_value(1, 2, 3, true));
  EXPECT_EQ(from_be32(c.arm), cq_arm_word(cq_arm_value(1, 2, 3, true)));
}

TEST(HwAccessors, PortGidsAsTheKernelDerivesThem) {
  const uint8_t mac[6] = {0x02, 0x00, 0xc0, 0x00, 0x02, 0x01};
  uint8_t g[16];
  port_gid(0, mac, 0xc0000201, g);
  const uint8_t link_local[16] = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                                  0x00, 0x00, 0xc0, 0xff, 0xfe, 0x00, 0x02, 0x01};
  EXPECT_EQ(0, std::memcmp(g, link_local, 16));
  port_gid(1, mac, 0xc0000201, g);
  const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  EXPECT_EQ(0, std::memcmp(g, mapped, 16));
}

TEST(HwAccessors, CommandMailboxCarriesItsInputAndOutputStructures) {
  Qpc in{};
  in.qpn = 0x123;
  in.dest_qpn = 0x456;
  in.path.dgid[15] = 9;
  CmdMailbox mb = make_cmd_with(CmdOpcode::ModifyQp, in, 0x123, 0x81);
  EXPECT_EQ(mb.opcode, uint16_t(CmdOpcode::ModifyQp));
  EXPECT_EQ(mb.arg0, 0x123u);
  EXPECT_EQ(mb.arg1, 0x81u);
  const Qpc seen = cmd_in<Qpc>(mb);  // what the device reads
  EXPECT_EQ(seen.dest_qpn, 0x456u);
  EXPECT_EQ(seen.path.dgid[15], 9);
  HcaCaps caps{};
  caps.max_qp = 77;
  set_cmd_out(mb, caps);
  EXPECT_EQ(cmd_out<HcaCaps>(mb).max_qp, 77u);  // what the driver reads back
  const CmdMailbox bare = make_cmd(CmdOpcode::DestroyCq, 5);
  EXPECT_EQ(bare.arg0, 5u);
  EXPECT_EQ(bare.arg1, 0u);
  EXPECT_EQ(bare.in[0], 0);
}

}  // namespace
}  // namespace hcasim::hw
