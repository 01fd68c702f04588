// SPDX-License-Identifier: Apache-2.0
/**
 * @file hw_layout_test.cpp
 * @brief Pins the hardware/software contract (model/hw_interface/hcasim/hca_hw.h): the byte
 *        offset of every field the driver and the model exchange, the big-endian byte images
 *        the encoders produce, and the CQE owner-bit rule.
 *
 * A change that moves a field or flips a byte order breaks the wire between driver and model
 * silently (both sides compile against the same header); these tests make it loud.
 */
#include <hcasim/hca_hw.h>

#include <gtest/gtest.h>

#include "byte_image.h"

#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

namespace hcasim::hw {
namespace {

template <typename T>
std::vector<uint8_t> be_bytes(T host_value) {
  std::vector<uint8_t> b(sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = uint8_t(host_value >> (8 * (sizeof(T) - 1 - i)));
  return b;
}

// ------------------------------------------------------------------ offsets and sizes

TEST(HwLayout, CtrlSegOffsets) {
  EXPECT_EQ(sizeof(CtrlSeg), 16u);
  EXPECT_EQ(offsetof(CtrlSeg, opmod_idx_opcode), 0u);
  EXPECT_EQ(offsetof(CtrlSeg, qpn_ds), 4u);
  EXPECT_EQ(offsetof(CtrlSeg, signature), 8u);
  EXPECT_EQ(offsetof(CtrlSeg, rsvd), 9u);
  EXPECT_EQ(offsetof(CtrlSeg, fm_ce_se), 11u);
  EXPECT_EQ(offsetof(CtrlSeg, imm), 12u);
}

TEST(HwLayout, RaddrAtomicDataInlineSegOffsets) {
  EXPECT_EQ(sizeof(RaddrSeg), 16u);
  EXPECT_EQ(offsetof(RaddrSeg, raddr), 0u);
  EXPECT_EQ(offsetof(RaddrSeg, rkey), 8u);
  EXPECT_EQ(offsetof(RaddrSeg, rsvd), 12u);

  EXPECT_EQ(sizeof(AtomicSeg), 16u);
  EXPECT_EQ(offsetof(AtomicSeg, swap_add), 0u);
  EXPECT_EQ(offsetof(AtomicSeg, compare), 8u);

  EXPECT_EQ(sizeof(DataSeg), 16u);
  EXPECT_EQ(offsetof(DataSeg, byte_count), 0u);
  EXPECT_EQ(offsetof(DataSeg, lkey), 4u);
  EXPECT_EQ(offsetof(DataSeg, addr), 8u);

  EXPECT_EQ(sizeof(InlineSeg), 4u);
  EXPECT_EQ(offsetof(InlineSeg, byte_count), 0u);
  EXPECT_EQ(kInlineFlag, 0x80000000u);
}

TEST(HwLayout, CqeOffsets) {
  EXPECT_EQ(sizeof(Cqe), 64u);
  EXPECT_EQ(offsetof(Cqe, timestamp), 0u);
  EXPECT_EQ(offsetof(Cqe, byte_cnt), 8u);
  EXPECT_EQ(offsetof(Cqe, imm), 12u);
  EXPECT_EQ(offsetof(Cqe, qpn), 16u);
  EXPECT_EQ(offsetof(Cqe, src_qp), 20u);
  EXPECT_EQ(offsetof(Cqe, wqe_counter), 24u);
  EXPECT_EQ(offsetof(Cqe, syndrome), 26u);
  EXPECT_EQ(offsetof(Cqe, vendor_syndrome), 27u);
  EXPECT_EQ(offsetof(Cqe, flags), 28u);
  EXPECT_EQ(offsetof(Cqe, req_opcode), 29u);
  EXPECT_EQ(offsetof(Cqe, rsvd0), 30u);
  EXPECT_EQ(offsetof(Cqe, srqn), 32u);
  EXPECT_EQ(offsetof(Cqe, rsvd1), 36u);
  EXPECT_EQ(sizeof(Cqe::rsvd1), 27u);
  EXPECT_EQ(offsetof(Cqe, op_own), 63u);
  EXPECT_EQ(kCqeSize, sizeof(Cqe));
}

TEST(HwLayout, EqeOffsets) {
  EXPECT_EQ(sizeof(Eqe), 64u);
  EXPECT_EQ(offsetof(Eqe, type), 0u);
  EXPECT_EQ(offsetof(Eqe, sub_type), 1u);
  EXPECT_EQ(offsetof(Eqe, rsvd0), 2u);
  EXPECT_EQ(offsetof(Eqe, resource), 4u);
  EXPECT_EQ(offsetof(Eqe, timestamp), 8u);
  EXPECT_EQ(offsetof(Eqe, rsvd1), 16u);
  EXPECT_EQ(sizeof(Eqe::rsvd1), 47u);
  EXPECT_EQ(offsetof(Eqe, owner), 63u);
  EXPECT_EQ(kEqeSize, sizeof(Eqe));
}

TEST(HwLayout, DoorbellRecordAndBufferDescOffsets) {
  EXPECT_EQ(sizeof(QpDbrec), 8u);
  EXPECT_EQ(offsetof(QpDbrec, rq_counter), 0u);
  EXPECT_EQ(offsetof(QpDbrec, sq_counter), 4u);

  EXPECT_EQ(sizeof(CqDbrec), 8u);
  EXPECT_EQ(offsetof(CqDbrec, set_ci), 0u);
  EXPECT_EQ(offsetof(CqDbrec, arm), 4u);

  EXPECT_EQ(sizeof(BufferDesc), 24u);
  EXPECT_EQ(offsetof(BufferDesc, bt_root), 0u);
  EXPECT_EQ(offsetof(BufferDesc, npages), 8u);
  EXPECT_EQ(offsetof(BufferDesc, levels), 12u);
  EXPECT_EQ(offsetof(BufferDesc, log_page_size), 13u);
  EXPECT_EQ(offsetof(BufferDesc, rsvd), 14u);
  EXPECT_EQ(offsetof(BufferDesc, first_page_offset), 16u);
}

TEST(HwLayout, GeometryAndUarConstants) {
  EXPECT_EQ(kMinPageShift, 12u);
  EXPECT_EQ(kWqeBasicBlock, 64u);
  EXPECT_EQ(kSegmentSize, 16u);
  EXPECT_EQ(kWqeBasicBlock / kSegmentSize, 4u);
  EXPECT_EQ(kMaxSendWqeBbs, 4u);
  EXPECT_EQ(kInvalidLkey, 0x100u);
  EXPECT_EQ(kUarCqArm, 0x20u);
  EXPECT_EQ(kUarEqArm, 0x40u);
  EXPECT_EQ(kUarSqDoorbell, 0x800u);
  EXPECT_EQ(kUarSqBlueFlame, 0x900u);
  EXPECT_EQ(kBlueFlameBytes, 4 * kWqeBasicBlock);
  EXPECT_EQ(kUarPageSize, 4096u);
  // mlx5 opcode values the driver and model both rely on.
  EXPECT_EQ(uint8_t(WqeOpcode::RdmaWrite), 0x08);
  EXPECT_EQ(uint8_t(WqeOpcode::Send), 0x0a);
  EXPECT_EQ(uint8_t(WqeOpcode::RdmaRead), 0x10);
  EXPECT_EQ(uint8_t(WqeOpcode::AtomicFetchAdd), 0x12);
  EXPECT_EQ(uint8_t(CqeOpcode::ReqErr), 0x0d);
  EXPECT_EQ(uint8_t(CqeOpcode::RespErr), 0x0e);
}

// ------------------------------------------------------------------ byte images

TEST(HwLayout, EndianHelpersProduceBigEndianBytes) {
  const uint16_t s = to_be16(0x1234);
  const uint32_t w = to_be32(0x12345678);
  const uint64_t d = to_be64(0x0102030405060708ull);
  EXPECT_EQ(bytes_of(s), (std::vector<uint8_t>{0x12, 0x34}));
  EXPECT_EQ(bytes_of(w), (std::vector<uint8_t>{0x12, 0x34, 0x56, 0x78}));
  EXPECT_EQ(bytes_of(d), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(from_be16(s), 0x1234);
  EXPECT_EQ(from_be32(w), 0x12345678u);
  EXPECT_EQ(from_be64(d), 0x0102030405060708ull);
}

TEST(HwLayout, CtrlSegByteImage) {
  CtrlSeg c{};
  c.opmod_idx_opcode = to_be32(ctrl_opmod_idx_opcode(0x1234, WqeOpcode::RdmaWrite));
  c.qpn_ds = to_be32(ctrl_qpn_ds(0xabcdef, 3));
  c.fm_ce_se = kCtrlCqUpdate | kCtrlSolicited;
  c.imm = to_be32(0xdeadbeef);
  const std::vector<uint8_t> expect = {0x00, 0x12, 0x34, 0x08,   // opmod 0, WQE index 0x1234, opcode
                                       0xab, 0xcd, 0xef, 0x03,   // QPN, ds = 3
                                       0x00, 0x00, 0x00, 0x0a,   // signature, rsvd, CE|SE
                                       0xde, 0xad, 0xbe, 0xef};  // imm as on the wire
  EXPECT_EQ(bytes_of(c), expect);
}

TEST(HwLayout, CtrlEncodersMaskTheirFields) {
  EXPECT_EQ(ctrl_opmod_idx_opcode(0, WqeOpcode::Nop), 0u);
  EXPECT_EQ(ctrl_opmod_idx_opcode(0xffff, WqeOpcode::AtomicCmpSwap), 0x00ffff11u);
  EXPECT_EQ(ctrl_opmod_idx_opcode(0x0102, WqeOpcode::SendImm), 0x0001020bu);
  EXPECT_EQ(ctrl_qpn_ds(0x123456, 4), 0x12345604u);
  EXPECT_EQ(ctrl_qpn_ds(0x123456, 0x41), 0x12345601u);  // ds is 6 bits
  EXPECT_EQ(ctrl_qpn_ds(0x123456, 0x3f), 0x1234563fu);
  EXPECT_EQ(ctrl_qpn_ds(0xff123456, 1), 0x12345601u);  // QPN is 24 bits
}

TEST(HwLayout, RaddrAtomicDataSegByteImages) {
  RaddrSeg r{};
  r.raddr = to_be64(0x00007f0011223344ull);
  r.rkey = to_be32(0xa1b2c3d4);
  EXPECT_EQ(bytes_of(r), (std::vector<uint8_t>{0x00, 0x00, 0x7f, 0x00, 0x11, 0x22, 0x33, 0x44, 0xa1, 0xb2,
                                               0xc3, 0xd4, 0, 0, 0, 0}));
  AtomicSeg a{};
  a.swap_add = to_be64(0x1122334455667788ull);
  a.compare = to_be64(0x99aabbccddeeff00ull);
  EXPECT_EQ(bytes_of(a), (std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
                                               0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00}));
  DataSeg d{};
  d.byte_count = to_be32(0x100);
  d.lkey = to_be32(0x1234);
  d.addr = to_be64(0x0102030405060708ull);
  EXPECT_EQ(bytes_of(d),
            (std::vector<uint8_t>{0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x12, 0x34, 1, 2, 3, 4, 5, 6, 7, 8}));
  InlineSeg in{to_be32(kInlineFlag | 5)};
  EXPECT_EQ(bytes_of(in), (std::vector<uint8_t>{0x80, 0x00, 0x00, 0x05}));
}

TEST(HwLayout, CqeByteImage) {
  Cqe c{};
  c.timestamp = to_be64(0x0000000123456789ull);
  c.byte_cnt = to_be32(0x00001000);
  c.imm = to_be32(0xcafef00d);
  c.qpn = to_be32(0x00abcdef);
  c.src_qp = to_be32(0x00123456);
  c.wqe_counter = to_be16(0xbeef);
  c.syndrome = uint8_t(CqeSyndrome::RemoteAccessErr);
  c.vendor_syndrome = 0x77;
  c.flags = kCqeWithImm | kCqeSolicited;
  c.req_opcode = uint8_t(WqeOpcode::SendImm);
  c.op_own = uint8_t(uint8_t(CqeOpcode::RespSendImm) << 4) | 1;
  std::vector<uint8_t> expect(64, 0);
  const uint8_t head[] = {0x00, 0x00, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89,  // timestamp
                          0x00, 0x00, 0x10, 0x00,                          // byte_cnt
                          0xca, 0xfe, 0xf0, 0x0d,                          // imm
                          0x00, 0xab, 0xcd, 0xef,                          // qpn
                          0x00, 0x12, 0x34, 0x56,                          // src_qp
                          0xbe, 0xef,                                      // wqe_counter
                          0x13, 0x77, 0x03, 0x0b};  // syndrome, vendor, flags, req_opcode
  std::memcpy(expect.data(), head, sizeof head);
  expect[63] = 0x31;  // RESP_SEND_IMM, owner 1
  EXPECT_EQ(bytes_of(c), expect);
}

TEST(HwLayout, EqeByteImage) {
  Eqe e{};
  e.type = uint8_t(EqeType::CqError);
  e.sub_type = 0x5a;
  e.resource = to_be32(0x00000105);
  e.timestamp = to_be64(0x0a0b0c0d0e0f1011ull);
  e.owner = 1;
  std::vector<uint8_t> expect(64, 0);
  const uint8_t head[] = {0x04, 0x5a, 0x00, 0x00, 0x00, 0x00, 0x01, 0x05,
                          0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11};
  std::memcpy(expect.data(), head, sizeof head);
  expect[63] = 0x01;
  EXPECT_EQ(bytes_of(e), expect);
}

TEST(HwLayout, DoorbellRecordByteImages) {
  QpDbrec q{to_be32(0x0102), to_be32(0xa0b0c)};
  EXPECT_EQ(bytes_of(q), (std::vector<uint8_t>{0x00, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x0b, 0x0c}));
  CqDbrec c{to_be32(0x00fedcba), to_be32(0x31000007)};
  EXPECT_EQ(bytes_of(c), (std::vector<uint8_t>{0x00, 0xfe, 0xdc, 0xba, 0x31, 0x00, 0x00, 0x07}));
}

// ------------------------------------------------------------------ doorbells

TEST(HwLayout, SqDoorbellValue) {
  EXPECT_EQ(sq_doorbell_value(0x123456, 0xbeef), 0x001234560000beefull);
  EXPECT_EQ(sq_doorbell_value(0xff123456, 0xbeef), 0x001234560000beefull);  // QPN 24 bits
  EXPECT_EQ(sq_doorbell_value(1, 0), 0x0000000100000000ull);
  EXPECT_EQ(be_bytes(sq_doorbell_value(0x000102, 0x0304)),
            (std::vector<uint8_t>{0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x03, 0x04}));
}

TEST(HwLayout, CqArmValue) {
  // [63:60] sn, [56] solicited-only, [55:32] ci, [23:0] cqn
  EXPECT_EQ(cq_arm_value(0xabcdef, 0x123456, 3, true), 0x3112345600abcdefull);
  EXPECT_EQ(cq_arm_value(0xabcdef, 0x123456, 3, false), 0x3012345600abcdefull);
  EXPECT_EQ(cq_arm_value(0x01abcdef, 0x01123456, 0x13, false), 0x3012345600abcdefull);  // masks
  EXPECT_EQ(cq_arm_value(7, 0, 0xf, false), 0xf000000000000007ull);
  EXPECT_EQ(cq_arm_value(0, 0, 0, true), 0x0100000000000000ull);
}

TEST(HwLayout, EqArmValue) {
  EXPECT_EQ(eq_arm_value(0x12, 0x345), 0x0000034500000012ull);
  EXPECT_EQ(eq_arm_value(0xff000012, 0xff000345), 0x0000034500000012ull);
}

// ------------------------------------------------------------------ buffer-table entries

TEST(HwLayout, BufferTableEntryByteImage) {
  const uint64_t e = bte_make(0x123456789abcull);
  // Address bits [63:12] kept, low 12 bits replaced by the valid bit; stored big-endian.
  EXPECT_EQ(bytes_of(e), (std::vector<uint8_t>{0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x90, 0x01}));
  EXPECT_TRUE(bte_valid(e));
  EXPECT_EQ(bte_addr(e), 0x123456789000ull);

  const uint64_t z = bte_make(0);
  EXPECT_TRUE(bte_valid(z));
  EXPECT_EQ(bte_addr(z), 0u);
  EXPECT_FALSE(bte_valid(0));
  EXPECT_FALSE(bte_valid(to_be64(0x123456789000ull)));  // no valid bit
  EXPECT_EQ(bte_addr(to_be64(0xfedcba9876543ffeull)), 0xfedcba9876543000ull);
  EXPECT_FALSE(bte_valid(to_be64(0xfedcba9876543ffeull)));
  EXPECT_EQ(bte_addr(bte_make(0xffffffffffffffffull)), 0xfffffffffffff000ull);
}

// ------------------------------------------------------------------ CQE owner bit

TEST(HwLayout, CqeOwnerFlipsOnEveryWrap) {
  // Ring of 4: passes 0,1,2,3,... alternate owner 0,1,0,1.
  const uint8_t expect4[] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1};
  for (uint32_t i = 0; i < sizeof expect4; ++i) EXPECT_EQ(cqe_owner_for(i, 2), expect4[i]) << i;
  // Ring of 1 flips on every CQE.
  for (uint32_t i = 0; i < 6; ++i) EXPECT_EQ(cqe_owner_for(i, 0), i & 1) << i;
  // Large ring, and the 32-bit counter wrapping back to 0.
  EXPECT_EQ(cqe_owner_for(1023, 10), 0);
  EXPECT_EQ(cqe_owner_for(1024, 10), 1);
  EXPECT_EQ(cqe_owner_for(2047, 10), 1);
  EXPECT_EQ(cqe_owner_for(2048, 10), 0);
  EXPECT_EQ(cqe_owner_for(0xffffffffu, 2), 1);
  EXPECT_EQ(cqe_owner_for(0xffffffffu + 1u, 2), 0);
}

// The segments of UD, XRC and memory-window WQEs: byte images pinned, and every accessor pair
// round-trips.
TEST(HwLayout, DatagramSegByteImage) {
  DatagramAddr a;
  for (int i = 0; i < 16; ++i) a.dgid[i] = uint8_t(0xa0 + i);
  a.dqpn = 0x1abcdef;  // 24 bits kept
  a.qkey = 0x80000011;
  a.sgid_index = 1;
  a.hop_limit = 64;
  a.traffic_class = 0x28;
  a.flow_label = 0x1fffff;  // 20 bits kept
  DatagramSeg d;
  set_datagram_seg(d, a);
  std::vector<uint8_t> expect(32, 0);
  for (int i = 0; i < 16; ++i) expect[i] = uint8_t(0xa0 + i);
  const uint8_t tail[16] = {0x00, 0xab, 0xcd, 0xef, 0x80, 0x00, 0x00, 0x11,
                            1,    64,   0x28, 0,    0x00, 0x0f, 0xff, 0xff};
  std::memcpy(expect.data() + 16, tail, 16);
  EXPECT_EQ(bytes_of(d), expect);
  const DatagramAddr b = get_datagram_seg(d);
  EXPECT_EQ(b.dqpn, 0xabcdefu);
  EXPECT_EQ(b.qkey, a.qkey);
  EXPECT_EQ(b.flow_label, 0xfffffu);
  EXPECT_EQ(std::memcmp(b.dgid, a.dgid, 16), 0);
  EXPECT_EQ(b.hop_limit, 64);
}

TEST(HwLayout, BindAndXrcSegByteImages) {
  BindInfo i;
  i.new_rkey = 0x00123456;
  i.mr_lkey = 0x0000abcd;
  i.addr = 0x1122334455667788ull;
  i.length = 0x1000;
  i.access = kAccessRemoteWrite | kAccessRemoteRead;
  i.flags = kBindZeroBased | kBindType2;
  BindSeg b;
  set_bind_seg(b, i);
  const std::vector<uint8_t> expect = {0x00, 0x12, 0x34, 0x56, 0x00, 0x00, 0xab, 0xcd,  // new key, MR lkey
                                       0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // address
                                       0,    0,    0,    0,    0,    0,    0x10, 0x00,  // length
                                       0,    0,    0,    6,    3,    0,    0,    0};    // access, flags
  EXPECT_EQ(bytes_of(b), expect);
  const BindInfo j = get_bind_seg(b);
  EXPECT_EQ(j.new_rkey, i.new_rkey);
  EXPECT_EQ(j.mr_lkey, i.mr_lkey);
  EXPECT_EQ(j.addr, i.addr);
  EXPECT_EQ(j.length, i.length);
  EXPECT_EQ(j.access, i.access);
  EXPECT_EQ(j.flags, i.flags);
  EXPECT_EQ(key_index(0x00123456), 0x1234u);
  EXPECT_EQ(key_tag(0x00123456), 0x56);
  XrcSeg x;
  set_xrc_seg(x, 0xff000102);  // 24 bits kept
  std::vector<uint8_t> xe(16, 0);
  xe[2] = 0x01;
  xe[3] = 0x02;
  EXPECT_EQ(bytes_of(x), xe);
  EXPECT_EQ(xrc_seg_srqn(x), 0x102u);
}

TEST(HwLayout, CqeCarriesItsSrqNumber) {
  CqeFields f;
  f.opcode = CqeOpcode::RespSend;
  f.srqn = 0x00c0ffee;
  f.flags = kCqeSrq | kCqeGrh;
  Cqe c;
  set_cqe(c, f, 1);
  EXPECT_EQ(bytes_of(c)[32], 0x00);
  EXPECT_EQ(bytes_of(c)[33], 0xc0);
  EXPECT_EQ(bytes_of(c)[35], 0xee);
  EXPECT_EQ(get_cqe(c).srqn, 0xc0ffeeu);
  EXPECT_EQ(get_cqe(c).flags, kCqeSrq | kCqeGrh);
}

}  // namespace
}  // namespace hcasim::hw
