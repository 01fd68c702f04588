// SPDX-License-Identifier: Apache-2.0
/**
 * @file wqe_fetch_test.cpp
 * @brief Unit tests of the WQE-fetch unit (model/units/wqe_fetch.h): send WQEs of one and
 *        several WQEBBs (also across the ring's wrap), inline data, atomics, malformed WQEs,
 *        receive WQEs with a terminator, the RQ doorbell record, and faults. WQEs are written
 *        with the contract's encoders (hca_hw.h), as the driver writes them.
 */
#include <gtest/gtest.h>

#include <cstring>

#include <hcasim/hca_hw.h>

#include "model_fixture.h"
#include "wqe_fetch.h"

// libsystemc references sc_main; gtest_main provides main() and never calls it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

using test::DmaRig;
using test::HandTable;

class WqeFetchTest : public ::testing::Test {
 protected:
  DmaRig rig;
  WqeFetchUnit fetch{rig.bt, rig.dma, default_profile()};
  HandTable table = rig.build(1, 1);  // one 4 KiB page
  BufferCursor cursor;

  /** A send queue of 2^log_bbs WQEBBs in the table's page. */
  WorkQueue sq(uint32_t log_bbs) { return WorkQueue{&table.desc, log_bbs, 6, &cursor, 0x11, "sq", "wqe"}; }
  uint8_t* bb(uint32_t slot) { return table.pages[0] + slot * hw::kWqeBasicBlock; }
  template <typename Seg>
  Seg& seg(uint8_t* wqe, uint32_t i) {
    return *reinterpret_cast<Seg*>(hw::wqe_segment(wqe, i));
  }
};

TEST_F(WqeFetchTest, MultiBlockWriteAcrossTheRingWrap) {
  // A 4-WQEBB ring; WQE counter 7 sits in slot 3, its second WQEBB wraps to slot 0.
  uint8_t wqe[2 * hw::kWqeBasicBlock] = {};
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(wqe, 0), 7, hw::WqeOpcode::RdmaWriteImm, 0x11, 6,
                   hw::kCtrlCqUpdate | hw::kCtrlFence, 0x12345678);
  hw::set_raddr_seg(seg<hw::RaddrSeg>(wqe, 1), 0xabcdef0000ull, 0x4242);
  for (uint32_t i = 0; i < 4; ++i)
    hw::set_data_seg(seg<hw::DataSeg>(wqe, 2 + i), 0x1000 * (i + 1), 100 + i, 0x77);
  std::memcpy(bb(3), wqe, hw::kWqeBasicBlock);
  std::memcpy(bb(0), wqe + hw::kWqeBasicBlock, hw::kWqeBasicBlock);

  SendWqe w;
  uint32_t reads = 0;
  ASSERT_EQ(fetch.fetch_send(sq(2), 7, w, reads), 2u);
  EXPECT_EQ(reads, 1u);  // one page: one table walk, then the translation cache
  EXPECT_EQ(w.index, 7u);
  EXPECT_EQ(w.nbb, 2u);
  EXPECT_EQ(w.op, hw::WqeOpcode::RdmaWriteImm);
  EXPECT_EQ(w.flags, hw::kCtrlCqUpdate | hw::kCtrlFence);
  EXPECT_EQ(w.imm, 0x12345678u);
  EXPECT_EQ(w.raddr, 0xabcdef0000ull);
  EXPECT_EQ(w.rkey, 0x4242u);
  ASSERT_EQ(w.nsge, 4u);
  EXPECT_EQ(w.sge[3].addr, 0x4000u);
  EXPECT_EQ(w.sge[3].len, 103u);
  EXPECT_EQ(w.sge[3].lkey, 0x77u);
  EXPECT_EQ(w.length, 100u + 101 + 102 + 103);
  EXPECT_FALSE(w.is_inline);
}

TEST_F(WqeFetchTest, InlineSendAndAtomic) {
  const char msg[] = "inline payload of forty bytes, or so...";
  const uint32_t len = sizeof msg;
  uint8_t* w0 = bb(0);
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(w0, 0), 0, hw::WqeOpcode::Send, 0x11, 1 + hw::inline_segments(len), 0, 0);
  hw::set_inline_seg(seg<hw::InlineSeg>(w0, 1), len);
  std::memcpy(hw::wqe_segment(w0, 1) + sizeof(hw::InlineSeg), msg, len);
  SendWqe w;
  uint32_t reads = 0;
  ASSERT_EQ(fetch.fetch_send(sq(6), 0, w, reads), 1u);
  EXPECT_TRUE(w.is_inline);
  EXPECT_EQ(w.length, len);
  EXPECT_EQ(std::memcmp(w.inline_buf, msg, len), 0);
  EXPECT_EQ(w.nsge, 0u);

  uint8_t* w1 = bb(1);
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(w1, 0), 1, hw::WqeOpcode::AtomicCmpSwap, 0x11, 4, hw::kCtrlCqUpdate, 0);
  hw::set_raddr_seg(seg<hw::RaddrSeg>(w1, 1), 0x8000, 0x99);
  hw::set_atomic_seg(seg<hw::AtomicSeg>(w1, 2), 0x1111222233334444ull, 0x5555666677778888ull);
  hw::set_data_seg(seg<hw::DataSeg>(w1, 3), 0x9000, 8, 0x55);
  ASSERT_EQ(fetch.fetch_send(sq(6), 1, w, reads), 1u);
  EXPECT_EQ(w.op, hw::WqeOpcode::AtomicCmpSwap);
  EXPECT_EQ(w.raddr, 0x8000u);
  EXPECT_EQ(w.swap_add, 0x1111222233334444ull);
  EXPECT_EQ(w.compare, 0x5555666677778888ull);
  ASSERT_EQ(w.nsge, 1u);
  EXPECT_EQ(w.length, 8u);
}

TEST_F(WqeFetchTest, MalformedWqesAreFaults) {
  SendWqe w;
  uint32_t reads = 0;
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::Send, 0x11, 0, 0, 0);  // no segments
  EXPECT_EQ(fetch.fetch_send(sq(6), 0, w, reads), 0u);
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::Send, 0x11, 17, 0, 0);  // 5 WQEBBs
  EXPECT_EQ(fetch.fetch_send(sq(6), 0, w, reads), 0u);
  // Inline data longer than the WQE's segments hold.
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::Send, 0x11, 2, 0, 0);
  hw::set_inline_seg(seg<hw::InlineSeg>(bb(0), 1), 40);
  EXPECT_EQ(fetch.fetch_send(sq(6), 0, w, reads), 0u);
  // The decoder alone says the same.
  EXPECT_FALSE(decode_send_wqe(bb(0), 1, 0, w));
}

// A remote-address or atomic segment the control segment's ds does not cover is malformed, not
// read from beyond the WQE (found by the send_wqe fuzz harness: a FETCH_ADD whose ds stopped
// before its atomic segment, on a UD QP, read past the WQEBB fetched).
TEST_F(WqeFetchTest, SegmentsBeyondTheDsAreMalformed) {
  SendWqe w;
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::RdmaWrite, 0x11, 1, 0, 0);  // no raddr
  EXPECT_FALSE(decode_send_wqe(bb(0), 1, 0, w));
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::AtomicFetchAdd, 0x11, 2, 0, 0);  // no atomic
  EXPECT_FALSE(decode_send_wqe(bb(0), 1, 0, w));
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::AtomicFetchAdd, 0x11, 3, 0, 0);
  EXPECT_TRUE(decode_send_wqe(bb(0), 1, 0, w));  // ctrl, raddr, atomic: no gather entry, length 0
  EXPECT_EQ(w.nsge, 0u);
  // UD: the datagram segment first, then the atomic would need two more than ds = 4 gives.
  hw::set_ctrl_seg(seg<hw::CtrlSeg>(bb(0), 0), 0, hw::WqeOpcode::AtomicFetchAdd, 0x11, 1 + hw::kDatagramSegs,
                   0, 0);
  EXPECT_FALSE(decode_send_wqe(bb(0), hw::wqe_bbs_for_segments(1 + hw::kDatagramSegs), 0, w, true));
}

TEST_F(WqeFetchTest, ReceiveWqeTerminatorAndProducer) {
  // Receive WQEs of 64 bytes (4 data segments); WQE 2 has two SGEs, then a terminator.
  auto* r = reinterpret_cast<hw::DataSeg*>(table.pages[0] + 2 * 64);
  hw::set_data_seg(r[0], 0x10000, 512, 0x21);
  hw::set_data_seg(r[1], 0x20000, 256, 0x22);
  hw::set_recv_terminator(r[2]);
  hw::set_data_seg(r[3], 0x30000, 1, 0x23);  // after the terminator: not part of the list
  const WorkQueue rq{&table.desc, 4, 6, &cursor, 0x11, "rq", "rq.wqe"};
  Sge sge[kMaxSge];
  uint32_t n = 99;
  ASSERT_TRUE(fetch.fetch_recv(rq, 2 + 16, sge, n));  // the counter wraps onto the ring
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(sge[0].addr, 0x10000u);
  EXPECT_EQ(sge[0].len, 512u);
  EXPECT_EQ(sge[1].lkey, 0x22u);

  uint64_t db_iova = 0;
  auto* db = reinterpret_cast<hw::QpDbrec*>(rig.mapped_page(db_iova));
  hw::qp_dbrec_set_rq(*db, 0x10005);  // the counter is 16 bits on the device
  uint16_t pi = 0;
  ASSERT_TRUE(fetch.recv_producer(db_iova, 0x11, pi));
  EXPECT_EQ(pi, 5u);
}

TEST_F(WqeFetchTest, UnmappedQueueIsAFault) {
  HandTable unbacked = rig.build(1, 1, 12, false);  // entries point at unmapped IOVAs
  BufferCursor c;
  const WorkQueue q{&unbacked.desc, 6, 6, &c, 0x11, "sq", "wqe"};
  SendWqe w;
  uint32_t reads = 0;
  EXPECT_EQ(fetch.fetch_send(q, 0, w, reads), 0u);
  Sge sge[kMaxSge];
  uint32_t n = 0;
  EXPECT_FALSE(fetch.fetch_recv(q, 0, sge, n));
  uint16_t pi = 0;
  EXPECT_FALSE(fetch.recv_producer(0xdead0000, 0x11, pi));
}

TEST_F(WqeFetchTest, FetchCostPipelines) {
  const TimingProfile& p = default_profile();
  EXPECT_EQ(fetch.send_cost_ps(2, 0, false), rig.dma.read_latency_ps(128));
  EXPECT_EQ(fetch.send_cost_ps(2, 0, true), p.pcie_xfer_ps(128));
  EXPECT_EQ(fetch.send_cost_ps(1, 2, true), p.pcie_xfer_ps(64) + 2 * p.pcie_read_ps);
}

}  // namespace
}  // namespace hcasim::model
