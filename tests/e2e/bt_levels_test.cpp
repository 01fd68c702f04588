// SPDX-License-Identifier: Apache-2.0
// The same data-path workload under 1-level and 2-level buffer tables. This file is built into
// two executables: e2e_bt_levels1_test (HCASIM_BT_LEVELS=1) and e2e_bt_levels2_test
// (HCASIM_BT_LEVELS=2, every queue behind a two-level table). The variable must be set before
// the first ibv_get_device_list, so it comes from the test's environment (CMakeLists.txt).
//
// The workload wraps the send queue, receive queue and CQ rings several times, so the walks
// cross many queue pages, and moves payloads through multi-page MRs.
#include <hcasim/sim_control.h>

#include "verbs_fixture.h"

namespace e2e {
namespace {

int env_levels() {
  const char* e = getenv("HCASIM_BT_LEVELS");
  return e && atoi(e) == 2 ? 2 : 1;
}

class BufferTableLevels : public VerbsFixture {};

TEST_F(BufferTableLevels, WorkloadWrapsEveryRing) {
  Options o;
  o.max_send_wr = 64;   // SQ: 4 pages of WQE basic blocks (2 per WR with 4 SGEs)
  o.max_recv_wr = 512;  // RQ: 512 * 64 B = 8 pages
  o.cqe = 300;          // CQ: 512 entries = 8 pages
  o.buf_size = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 1 << 19, 1);
  const int rounds = 6;
  const uint32_t per_round = 60;
  uint64_t id = 0;
  for (int r = 0; r < rounds; ++r) {
    auto len_of = [&](uint32_t i) { return 1 + (r * per_round + i) * 97 % 6000; };
    auto src_of = [&](uint32_t i) { return size_t((r * per_round + i) * 1009 % ((1 << 19) - 6000)); };
    auto dst_of = [&](uint32_t i) { return size_t((1 << 19) + i * 6016); };  // disjoint within a round
    auto op_of = [](uint32_t i) {
      return i % 3 == 0 ? IBV_WR_SEND : (i % 3 == 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_RDMA_WRITE);
    };
    uint32_t sends = 0;
    for (uint32_t i = 0; i < per_round; ++i) {
      if (op_of(i) != IBV_WR_RDMA_WRITE) {
        ASSERT_EQ(PostRecv(b_, 100000 + id, {b_.sge(dst_of(i), 6016)}), 0);
        ++sends;
      }
      ASSERT_EQ(PostSend(a_, id, op_of(i), {a_.sge(src_of(i), len_of(i))}, IBV_SEND_SIGNALED, uint32_t(id),
                         b_.addr(dst_of(i)), b_.mr->rkey),
                0)
          << "round " << r << " WR " << i;
      ++id;
    }
    std::vector<ibv_wc> wcs;
    ASSERT_TRUE(PollCq(a_.scq, per_round, wcs)) << "round " << r;
    for (uint32_t i = 0; i < per_round; ++i) {
      const uint64_t want = uint64_t(r) * per_round + i;
      ASSERT_TRUE(wc_is(
          wcs[i], {want, op_of(i) == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE : IBV_WC_SEND, a_.qp->qp_num}));
    }
    wcs.clear();
    ASSERT_TRUE(PollCq(b_.rcq, sends, wcs)) << "round " << r;
    uint32_t k = 0;
    for (uint32_t i = 0; i < per_round; ++i) {
      if (op_of(i) != IBV_WR_RDMA_WRITE) {
        const uint64_t wid = uint64_t(r) * per_round + i;
        ASSERT_TRUE(wc_is(wcs[k++], {100000 + wid, IBV_WC_RECV, b_.qp->qp_num, len_of(i),
                                     op_of(i) == IBV_WR_SEND_WITH_IMM, uint32_t(wid)}));
      }
      ASSERT_TRUE(same_bytes(b_.buf + dst_of(i), a_.buf + src_of(i), len_of(i)))
          << "round " << r << " WR " << i;
    }
  }
  // READ back a large region through the multi-page MRs.
  ASSERT_EQ(PostSend(a_, 9999, IBV_WR_RDMA_READ, {a_.sge(1 << 19, 200000)}, IBV_SEND_SIGNALED, 0,
                     b_.addr(1 << 19), b_.mr->rkey),
            0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {9999, IBV_WC_RDMA_READ, a_.qp->qp_num, 200000}));
  EXPECT_TRUE(same_bytes(a_.buf + (1 << 19), b_.buf + (1 << 19), 200000));
}

// The level count really took effect: the first two zero-length RDMA WRITEs on a fresh QP,
// posted in one call (two WQEs: a plain doorbell, so the WQEs are read by DMA, not pushed by
// BlueFlame), make the requester walk two tables (SQ for the WQEs, CQ for the CQE), and each
// walk reads one 8-byte entry per level. (No payload, so no MR walk; each WQE read is one
// 64-byte basic block.)
TEST_F(BufferTableLevels, WalksReadOneEntryPerLevel) {
  if (!hcasim_sim_present()) GTEST_SKIP() << "not the simulator";
  ASSERT_NO_FATAL_FAILURE(Build());
  uint64_t walks0 = 0, bytes0 = 0, walks1 = 0, bytes1 = 0;
  ASSERT_EQ(hcasim_sim_counter(Dev(a_), "bt_walks", &walks0), 0);
  ASSERT_EQ(hcasim_sim_counter(Dev(a_), "dma_read_bytes", &bytes0), 0);
  ibv_send_wr wr[2] = {};
  for (int i = 0; i < 2; ++i) {
    wr[i].wr_id = uint64_t(i + 1);
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].wr.rdma.remote_addr = b_.addr(0);
    wr[i].wr.rdma.rkey = b_.mr->rkey;
  }
  wr[0].next = &wr[1];
  wr[1].send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, wr, &bad), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  ASSERT_EQ(hcasim_sim_counter(Dev(a_), "bt_walks", &walks1), 0);
  ASSERT_EQ(hcasim_sim_counter(Dev(a_), "dma_read_bytes", &bytes1), 0);
  ASSERT_EQ(walks1 - walks0, 2u) << "SQ and CQ walks";
  EXPECT_EQ(bytes1 - bytes0 - 2 * 64, 2u * 8 * env_levels())
      << "table bytes read for " << env_levels() << " level(s)";
}

}  // namespace
}  // namespace e2e
