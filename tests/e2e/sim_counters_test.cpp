// SPDX-License-Identifier: Apache-2.0
// Simulator-only checks through the simulator's own interface (hcasim/sim_control.h): packet,
// byte and event counters of each device, and simulated time. Skipped on real devices.
#include <hcasim/sim_control.h>

#include <map>

#include "verbs_fixture.h"

namespace e2e {
namespace {

// RoCEv2 over IPv4 (GID index 1 is the IPv4-mapped GID): Ethernet 14 + IPv4 20 + UDP 8 +
// BTH 12 + ICRC 4 bytes around every payload; RETH adds 16, AETH 4, ImmDt 4.
constexpr uint64_t kFrame = 14 + 20 + 8 + 12 + 4;
constexpr uint64_t kReth = 16, kAeth = 4;
// The 17-byte tail travels padded to a multiple of 4 (BTH PadCnt = 3).
constexpr uint64_t kTail17 = 20;

const char* const kNames[] = {"doorbells",  "send_wqes",   "recv_wqes",  "tx_packets",    "rx_packets",
                              "tx_bytes",   "rx_bytes",    "acks_sent",  "acks_received", "naks",
                              "rnr_naks",   "retransmits", "duplicates", "cqes",          "cq_events",
                              "interrupts", "rx_dropped",  "bt_walks",   "dma_read_bytes"};

class SimCounters : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    if (!hcasim_sim_present()) GTEST_SKIP() << "not the simulator";
  }
  std::map<std::string, uint64_t> Snapshot(const Host& h) {
    std::map<std::string, uint64_t> m;
    for (const char* n : kNames) {
      uint64_t v = 0;
      EXPECT_EQ(hcasim_sim_counter(Dev(h), n, &v), 0) << "counter " << n;
      m[n] = v;
    }
    return m;
  }
  /** Counter deltas since @p before, only the non-zero ones. */
  std::map<std::string, uint64_t> Delta(const Host& h, const std::map<std::string, uint64_t>& before) {
    std::map<std::string, uint64_t> d;
    for (auto& [k, v] : Snapshot(h))
      if (v != before.at(k) && k != "bt_walks" && k != "dma_read_bytes") d[k] = v - before.at(k);
    return d;
  }
};

using M = std::map<std::string, uint64_t>;

// The canonical example: a 3*MTU+17 RDMA WRITE is exactly 4 request packets (FIRST, MIDDLE,
// MIDDLE, LAST) and one ACK (coalesced: only the LAST asks for one).
TEST_F(SimCounters, WriteOf3MtuPlus17IsFourPacketsAndOneAck) {
  for (ibv_mtu mtu : {IBV_MTU_1024, IBV_MTU_4096}) {
    SCOPED_TRACE("path MTU " + std::to_string(mtu_bytes(mtu)));
    TearDown();
    VerbsFixture::SetUp();
    Options o;
    o.mtu = mtu;
    o.buf_size = 64 * 1024;
    ASSERT_NO_FATAL_FAILURE(Build(o));
    const uint32_t m = mtu_bytes(mtu), len = 3 * m + 17;
    const M a0 = Snapshot(a_), b0 = Snapshot(b_);
    ASSERT_EQ(
        PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, len)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
        0);
    ibv_wc wc;
    ASSERT_TRUE(PollOne(a_.scq, wc));
    EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
    const uint64_t req_bytes = (kFrame + kReth + m) + 2 * (kFrame + m) + (kFrame + kTail17);
    const uint64_t ack_bytes = kFrame + kAeth;
    EXPECT_EQ(Delta(a_, a0), (M{{"doorbells", 1},
                                {"send_wqes", 1},
                                {"tx_packets", 4},
                                {"tx_bytes", req_bytes},
                                {"rx_packets", 1},
                                {"rx_bytes", ack_bytes},
                                {"acks_received", 1},
                                {"cqes", 1}}));
    EXPECT_EQ(Delta(b_, b0), (M{{"rx_packets", 4},
                                {"rx_bytes", req_bytes},
                                {"tx_packets", 1},
                                {"tx_bytes", ack_bytes},
                                {"acks_sent", 1}}));
  }
}

// A 3*MTU+17 READ: one request, four response packets (the first and last carry an AETH), no ACK.
TEST_F(SimCounters, ReadOf3MtuPlus17IsOneRequestAndFourResponses) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const uint32_t m = 1024, len = 3 * m + 17;
  const M a0 = Snapshot(a_), b0 = Snapshot(b_);
  ASSERT_EQ(
      PostSend(a_, 1, IBV_WR_RDMA_READ, {a_.sge(0, len)}, IBV_SEND_SIGNALED, 0, b_.addr(8192), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RDMA_READ, a_.qp->qp_num, len}));
  const uint64_t req = kFrame + kReth;
  const uint64_t resp = (kFrame + kAeth + m) + 2 * (kFrame + m) + (kFrame + kAeth + kTail17);
  EXPECT_EQ(Delta(a_, a0), (M{{"doorbells", 1},
                              {"send_wqes", 1},
                              {"tx_packets", 1},
                              {"tx_bytes", req},
                              {"rx_packets", 4},
                              {"rx_bytes", resp},
                              {"cqes", 1}}));
  EXPECT_EQ(Delta(b_, b0), (M{{"rx_packets", 1}, {"rx_bytes", req}, {"tx_packets", 4}, {"tx_bytes", resp}}));
}

// A SEND into a posted receive, and the event path: one CQE each side, one completion event,
// one EQE and one interrupt at the receiver whose CQ was armed.
TEST_F(SimCounters, SendWithEventCountsOneInterrupt) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const M a0 = Snapshot(a_), b0 = Snapshot(b_);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 4096)}), 0);
  ASSERT_EQ(ibv_req_notify_cq(b_.rcq, 0), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND_WITH_IMM, {a_.sge(0, 2000)}, IBV_SEND_SIGNALED, 7), 0);
  ibv_cq* cq;
  void* ctx;
  ASSERT_EQ(ibv_get_cq_event(b_.channel, &cq, &ctx), 0);
  ibv_ack_cq_events(cq, 1);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  const M da = Delta(a_, a0), db = Delta(b_, b0);
  EXPECT_EQ(da.at("tx_packets"), 2u);
  EXPECT_EQ(da.at("cqes"), 1u);
  EXPECT_EQ(da.count("cq_events"), 0u);
  EXPECT_EQ(db.at("cqes"), 1u);
  EXPECT_EQ(db.at("cq_events"), 1u);
  EXPECT_EQ(db.at("interrupts"), 1u);
  EXPECT_EQ(db.at("acks_sent"), 1u);
  EXPECT_EQ(db.at("recv_wqes"), 1u) << "the posted receive the SEND consumed";
  EXPECT_EQ(da.at("acks_received"), 1u);
  EXPECT_EQ(da.at("send_wqes"), 1u);
  EXPECT_EQ(db.at("doorbells"), 1u) << "the CQ arm doorbell";
}

// Simulated time: a 1 MiB WRITE cannot beat the link rate (100 Gb/s in the default profile):
// at least 1 MiB * 8 / 100e9 s of simulated time passes, and not absurdly more.
TEST_F(SimCounters, SimulatedTimeCoversTheWireTime) {
  Options o;
  o.buf_size = 2 << 20;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint64_t t0 = hcasim_sim_now_ns();
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 1 << 20)}, IBV_SEND_SIGNALED, 0, b_.addr(1 << 20),
                     b_.mr->rkey),
            0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  const uint64_t dt = hcasim_sim_now_ns() - t0;
  EXPECT_GE(dt, (1ull << 20) * 8 / 100) << "faster than the wire";
  EXPECT_LT(dt, 4 * (1ull << 20) * 8 / 100) << "far slower than the wire";
}

// Loss recovery: a dropped MIDDLE packet is answered with a PSN-sequence NAK, the requester goes
// back to it, and the message completes intact.
// BlueFlame (docs/architecture.md, the contract): a call that posts one WR rings the BlueFlame
// register, whose store carries the WQE, so the adapter reads no WQE by DMA; a list of two rings
// the plain doorbell and both WQEs are read (64 bytes each). Either way, one doorbell per call.
TEST_F(SimCounters, OneWrComesWithItsDoorbellAListIsFetched) {
  Options o;
  o.max_inline_data = 64;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_wc wc;
  // Warm up: the first WRITE walks the tables of the SQ and CQ pages used below.
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, {}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  auto a0 = Snapshot(a_);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0,
                     b_.addr(64), b_.mr->rkey),
            0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  auto a1 = Snapshot(a_);
  EXPECT_EQ(a1["doorbells"] - a0["doorbells"], 1u);
  EXPECT_EQ(a1["dma_read_bytes"] - a0["dma_read_bytes"], 0u) << "an inline WR pushed with its doorbell";
  ibv_send_wr wr[2] = {};
  for (int i = 0; i < 2; ++i) {
    wr[i].wr_id = uint64_t(3 + i);
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].wr.rdma.remote_addr = b_.addr(0);
    wr[i].wr.rdma.rkey = b_.mr->rkey;
  }
  wr[0].next = &wr[1];
  wr[1].send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, wr, &bad), 0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  auto a2 = Snapshot(a_);
  EXPECT_EQ(a2["doorbells"] - a1["doorbells"], 1u);
  EXPECT_EQ(a2["dma_read_bytes"] - a1["dma_read_bytes"] - 8 * (a2["bt_walks"] - a1["bt_walks"]), 2u * 64)
      << "two WQEs read by DMA";
}

// Inline data comes with the WQE: the adapter reads no payload, so an inline 64-byte WRITE
// completes one payload read (roce-100g: 400 ns + 64 B at 110 Gb/s) before the same WRITE sent
// from a registered buffer.
TEST_F(SimCounters, InlineDataIsNotReadByDma) {
  Options o;
  o.max_inline_data = 64;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_wc wc;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, {}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ASSERT_TRUE(PollOne(a_.scq, wc));  // warm-up: tables walked, contexts cached
  auto took = [&](unsigned flags) {
    const uint64_t t0 = hcasim_sim_now_ns();
    EXPECT_EQ(PostSend(a_, 2, IBV_WR_RDMA_WRITE, {a_.sge(0, 64)}, IBV_SEND_SIGNALED | flags, 0, b_.addr(64),
                       b_.mr->rkey),
              0);
    EXPECT_TRUE(PollOne(a_.scq, wc));
    return double(hcasim_sim_now_ns() - t0);
  };
  const double inl = took(IBV_SEND_INLINE), gathered = took(0);
  EXPECT_NEAR(gathered - inl, 404.654, 1.0);
}

TEST_F(SimCounters, DroppedPacketIsRecoveredByNakAndRetransmit) {
  Options o;
  o.buf_size = 64 * 1024;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 8 * 1024, 9);
  const uint32_t len = 8 * 1024;  // 8 packets at MTU 1024
  const M a0 = Snapshot(a_), b0 = Snapshot(b_);
  ASSERT_EQ(hcasim_sim_drop_rx(Dev(b_), b_.qp->qp_num, a_.sq_psn + 3, 1), 0);
  ASSERT_EQ(
      PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, len)}, IBV_SEND_SIGNALED, 0, b_.addr(16384), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(same_bytes(b_.buf + 16384, a_.buf, len));
  const M da = Delta(a_, a0), db = Delta(b_, b0);
  EXPECT_EQ(db.at("rx_dropped"), 1u);
  EXPECT_EQ(db.at("naks"), 1u) << "one PSN sequence NAK";
  EXPECT_GE(da.at("retransmits"), 1u);
}

// The interface rejects what does not exist.
TEST_F(SimCounters, UnknownDeviceOrCounter) {
  uint64_t v = 0;
  EXPECT_EQ(hcasim_sim_counter("hcasim99", "tx_packets", &v), -1);
  EXPECT_EQ(hcasim_sim_counter("hcasim0", "no_such_counter", &v), -1);
  EXPECT_EQ(hcasim_sim_drop_rx("hcasim99", 0xffffffff, 0xffffffff, 1), -1);
  char buf[16];
  const size_t need = hcasim_sim_stats_json(buf, sizeof buf);
  EXPECT_GT(need, sizeof buf);
  std::string json(need, '\0');
  hcasim_sim_stats_json(json.data(), json.size());
  EXPECT_NE(json.find("hcasim0"), std::string::npos) << json;
  EXPECT_NE(json.find("tx_packets"), std::string::npos) << json;
}

}  // namespace
}  // namespace e2e
