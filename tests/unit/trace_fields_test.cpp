// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace_fields_test.cpp
 * @brief The typed trace fields the model's units fill, on real work through one HCA: an RDMA
 *        WRITE of two WQEBBs and three packets, and a SEND into a posted receive, between two
 *        QPs of the same HCA (frames to the port's own MAC loop back inside it).
 *
 * The timeline, VCD and step-mode sinks read only these fields (never the text), so each
 * assertion here stands for something a sink would get wrong if the field were missing.
 */
#include <gtest/gtest.h>

#include <infiniband/verbs.h>  // attribute-mask bits (hw::QpAttrMask equals them)

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <hcasim/hca_hw.h>

#include "hca.h"
#include "model_fixture.h"
#include "roce_packet.h"

// libsystemc references sc_main; gtest_main provides main() and never calls it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

using test::kPage;

constexpr uint32_t kAnyQp = 0xfffffffe;  // RecordingSink::of: events of every QPN (kTraceNone too)

/** Keeps every event, in order. */
class RecordingSink : public TraceSink {
 public:
  void record(const TraceEvent& ev) override { events.push_back(ev); }
  std::vector<TraceEvent> events;

  std::vector<const TraceEvent*> of(TraceUnit u, TraceKind k, uint32_t qpn = kAnyQp) const {
    std::vector<const TraceEvent*> v;
    for (const auto& e : events)
      if (e.unit == u && e.kind == k && (qpn == kAnyQp || e.qpn == qpn)) v.push_back(&e);
    return v;
  }
};

/** Host memory the HCA reaches through its IOMMU, and buffer tables over it. */
class Memory {
 public:
  explicit Memory(Hca& hca) : hca_(hca) {}
  struct Region {
    uint8_t* hva;
    uint64_t iova;
  };
  Region alloc(uint64_t bytes) {
    const uint64_t len = (bytes + kPage - 1) & ~(kPage - 1);
    uint8_t* p = pages_.alloc(len);
    next_ -= len + kPage;  // a hole between regions: no access runs into the next one
    EXPECT_TRUE(hca_.iommu_map(next_, p, len));
    return Region{p, next_};
  }
  /** A one-level table describing @p r's pages. */
  hw::BufferDesc table(const Region& r, uint32_t npages) {
    Region root = alloc(kPage);
    auto* e = reinterpret_cast<uint64_t*>(root.hva);
    for (uint32_t i = 0; i < npages; ++i) e[i] = hw::bte_make(r.iova + i * kPage);
    hw::BufferDesc d{};
    d.bt_root = root.iova;
    d.npages = npages;
    d.levels = 1;
    d.log_page_size = 12;
    return d;
  }

 private:
  Hca& hca_;
  test::HostPages pages_;
  uint64_t next_ = 0x100000000ull;
};

HcaIdentity identity() {
  HcaIdentity id;
  id.name = "hcasim0";
  const uint8_t mac[6] = {0x02, 0x48, 0x43, 0x41, 0x00, 0x01};
  std::memcpy(id.mac, mac, 6);
  id.ipv4 = 0xc0000201;
  derive_gids(id);
  return id;
}

uint32_t command(Hca& hca, hw::CmdOpcode op, const void* in, size_t len, uint32_t arg0 = 0,
                 uint32_t arg1 = 0) {
  hw::CmdMailbox mb{};
  mb.opcode = uint16_t(op);
  mb.arg0 = arg0;
  mb.arg1 = arg1;
  if (in) std::memcpy(mb.in, in, len);
  hca.execute(mb);
  EXPECT_EQ(mb.status, uint8_t(hw::CmdStatus::Ok)) << "command 0x" << std::hex << unsigned(op);
  return mb.arg0;
}

struct Qp {
  uint32_t qpn;
  Memory::Region sq, rq, dbrec;
};

constexpr uint32_t kMtuLog = 10;  // 1024-byte packets
constexpr uint32_t kSqPsn = 1000;

TEST(TraceFieldsTest, OneWriteAndOneSendThroughTheModel) {
  RecordingSink sink;
  Hca hca(default_profile(), identity(), &sink);
  const HcaIdentity id = hca.identity();
  hca.set_resolver([&](const uint8_t*, uint8_t mac[6]) {
    std::memcpy(mac, id.mac, 6);  // every destination is this port: internal loopback
    return true;
  });
  Memory mem(hca);

  // EQ, CQ, PD.
  Memory::Region eq_ring = mem.alloc(kPage);
  hw::Eqc eqc{};
  eqc.irq_vector = 0;
  eqc.log_size = 4;
  eqc.buf = mem.table(eq_ring, 1);
  const uint32_t eqn = command(hca, hw::CmdOpcode::CreateEq, &eqc, sizeof eqc);
  Memory::Region cq_ring = mem.alloc(kPage);
  Memory::Region cq_db = mem.alloc(kPage);
  hw::Cqc cqc{};
  cqc.eqn = eqn;
  cqc.log_size = 6;
  cqc.buf = mem.table(cq_ring, 1);
  cqc.dbrec_addr = cq_db.iova;
  const uint32_t cqn = command(hca, hw::CmdOpcode::CreateCq, &cqc, sizeof cqc);
  const uint32_t pdn = command(hca, hw::CmdOpcode::AllocPd, nullptr, 0);

  // One MR holding both the source (first page) and the target (second page).
  Memory::Region buf = mem.alloc(2 * kPage);
  for (uint32_t i = 0; i < 4096; ++i) buf.hva[i] = uint8_t(i * 7);
  hw::MkeyCtx mk{};
  mk.pdn = pdn;
  mk.start = buf.iova;
  mk.length = 2 * kPage;
  mk.access = hw::kAccessLocalWrite | hw::kAccessRemoteWrite;
  mk.pages = mem.table(buf, 2);
  const uint32_t key = command(hca, hw::CmdOpcode::CreateMkey, &mk, sizeof mk);

  // Two QPs, connected to each other, straight to RTS.
  auto make_qp = [&]() {
    Qp q;
    q.sq = mem.alloc(kPage);
    q.rq = mem.alloc(kPage);
    q.dbrec = mem.alloc(kPage);
    hw::Qpc c{};
    c.pdn = pdn;
    c.send_cqn = c.recv_cqn = cqn;
    c.sq_log_size = 6;  // 64 WQEBBs: one page
    c.rq_log_size = 4;
    c.rq_log_stride = 6;  // 4 data segments per receive WQE
    c.srqn = hw::kNoSrq;
    c.type = uint8_t(hw::QpType::Rc);
    c.sq_buf = mem.table(q.sq, 1);
    c.rq_buf = mem.table(q.rq, 1);
    c.dbrec_addr = q.dbrec.iova;
    q.qpn = command(hca, hw::CmdOpcode::CreateQp, &c, sizeof c);
    return q;
  };
  Qp a = make_qp(), b = make_qp();
  auto connect = [&](const Qp& q, const Qp& peer) {
    hw::Qpc c{};
    c.state = uint8_t(hw::QpState::Rts);
    c.port = 1;
    c.path_mtu_log = kMtuLog;
    c.dest_qpn = peer.qpn;
    c.sq_psn = kSqPsn;
    c.rq_psn = kSqPsn;
    c.access_flags = hw::kAccessRemoteWrite;
    c.retry_cnt = 7;
    c.rnr_retry = 7;
    c.max_rd_atomic = 1;
    std::memcpy(c.path.dgid, id.gid[1], 16);
    c.path.sgid_index = 1;
    c.path.hop_limit = 64;
    command(hca, hw::CmdOpcode::ModifyQp, &c, sizeof c, q.qpn,
            IBV_QP_STATE | IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_SQ_PSN |
                IBV_QP_RQ_PSN | IBV_QP_ACCESS_FLAGS | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                IBV_QP_MAX_QP_RD_ATOMIC);
  };
  connect(a, b);
  connect(b, a);

  // B posts one receive: up to 1024 bytes into the second page, after the WRITE's target.
  auto* rseg = reinterpret_cast<hw::DataSeg*>(b.rq.hva);
  hw::set_data_seg(rseg[0], buf.iova + kPage + 3072, 1024, key);
  hw::set_recv_terminator(rseg[1]);
  hw::qp_dbrec_set_rq(*reinterpret_cast<hw::QpDbrec*>(b.dbrec.hva), 1);

  // A's WQE 0: a signaled RDMA WRITE of 3000 bytes gathered from four SGEs (ctrl + raddr + 4
  // data segments = 6 segments = 2 WQEBBs), into the second page: 3 packets at MTU 1024.
  uint8_t* w0 = a.sq.hva;
  hw::set_ctrl_seg(*reinterpret_cast<hw::CtrlSeg*>(hw::wqe_segment(w0, 0)), 0, hw::WqeOpcode::RdmaWrite,
                   a.qpn, 6, hw::kCtrlCqUpdate, 0);
  hw::set_raddr_seg(*reinterpret_cast<hw::RaddrSeg*>(hw::wqe_segment(w0, 1)), buf.iova + kPage, key);
  for (uint32_t i = 0; i < 4; ++i)
    hw::set_data_seg(*reinterpret_cast<hw::DataSeg*>(hw::wqe_segment(w0, 2 + i)), buf.iova + i * 750, 750,
                     key);
  // A's WQE 2 (after the two WQEBBs): a signaled, solicited SEND of 100 bytes, one WQEBB.
  uint8_t* w2 = a.sq.hva + 2 * hw::kWqeBasicBlock;
  hw::set_ctrl_seg(*reinterpret_cast<hw::CtrlSeg*>(hw::wqe_segment(w2, 0)), 2, hw::WqeOpcode::Send, a.qpn, 2,
                   hw::kCtrlCqUpdate | hw::kCtrlSolicited, 0);
  hw::set_data_seg(*reinterpret_cast<hw::DataSeg*>(hw::wqe_segment(w2, 1)), buf.iova, 100, key);

  hca.mmio_write(hw::kUarSqDoorbell, hw::sq_doorbell_value(a.qpn, 3));
  test::run_until_idle();

  // The data arrived (the run did what the trace says).
  EXPECT_EQ(std::memcmp(buf.hva + kPage, buf.hva, 3000), 0);
  EXPECT_EQ(std::memcmp(buf.hva + kPage + 3072, buf.hva, 100), 0);

  // Doorbell: the new producer counter.
  auto db = sink.of(TraceUnit::Doorbell, TraceKind::Doorbell, a.qpn);
  ASSERT_EQ(db.size(), 1u);
  EXPECT_EQ(db[0]->f.index, 3u);

  // SQ fetch: WQE index, size in WQEBBs, signaled/solicited; not the RQ.
  auto fetch = sink.of(TraceUnit::WqeFetch, TraceKind::WqeFetch, a.qpn);
  ASSERT_EQ(fetch.size(), 2u);
  EXPECT_EQ(fetch[0]->f.wqe, 0u);
  EXPECT_EQ(fetch[0]->f.count, 2u);
  EXPECT_TRUE(fetch[0]->f.has(kTfSignaled));
  EXPECT_FALSE(fetch[0]->f.has(kTfSolicited));
  EXPECT_FALSE(fetch[0]->f.has(kTfRq));
  EXPECT_EQ(fetch[0]->text.rfind("SQ WQE 0 (2 WQEBB): RDMA_WRITE len=3000 sge=4 signaled", 0), 0u)
      << fetch[0]->text;
  EXPECT_EQ(fetch[1]->f.wqe, 2u);
  EXPECT_EQ(fetch[1]->f.count, 1u);
  EXPECT_TRUE(fetch[1]->f.has(kTfSolicited));

  // Decode: packets and the PSN range.
  auto dec = sink.of(TraceUnit::Requester, TraceKind::WqeDecode, a.qpn);
  ASSERT_EQ(dec.size(), 2u);
  EXPECT_EQ(dec[0]->f.wqe, 0u);
  EXPECT_EQ(dec[0]->f.count, 3u);
  EXPECT_EQ(dec[0]->f.psn, kSqPsn);
  EXPECT_EQ(dec[0]->f.psn_last, kSqPsn + 2);
  EXPECT_EQ(dec[1]->f.wqe, 2u);
  EXPECT_EQ(dec[1]->f.psn, kSqPsn + 3);
  EXPECT_EQ(dec[1]->f.psn_last, kSqPsn + 3);

  // The requester's start of each message: WQE, peer QP, first PSN.
  auto start = sink.of(TraceUnit::Requester, TraceKind::PktTx, a.qpn);
  ASSERT_EQ(start.size(), 2u);
  EXPECT_EQ(start[0]->f.wqe, 0u);
  EXPECT_EQ(start[0]->f.peer_qpn, b.qpn);
  EXPECT_EQ(start[0]->f.psn, kSqPsn);
  EXPECT_EQ(start[1]->f.wqe, 2u);
  EXPECT_EQ(start[1]->f.psn, kSqPsn + 3);

  // The port: every frame's BTH opcode, PSN, destination QP, flags; size on the wire when sent.
  auto tx = sink.of(TraceUnit::Port, TraceKind::PktTx);
  auto rx = sink.of(TraceUnit::Port, TraceKind::PktRx);
  std::vector<const TraceEvent*> requests, acks;
  for (const TraceEvent* e : tx) {
    EXPECT_EQ(e->qpn, kTraceNone);
    ASSERT_NE(e->f.opcode, kTraceNone16) << e->text;
    ASSERT_NE(e->f.count, kTraceNone) << e->text;
    // The text is rendered from the same frame.
    char psn[32];
    std::snprintf(psn, sizeof psn, "psn=%-8u dqp=0x%06x", e->f.psn, e->f.peer_qpn);
    EXPECT_NE(e->text.find(psn), std::string::npos) << e->text;
    EXPECT_NE(e->text.find("(" + std::to_string(e->f.count) + " B on wire)"), std::string::npos) << e->text;
    (wire::is_request(wire::BthOpcode(e->f.opcode)) ? requests : acks).push_back(e);
  }
  ASSERT_EQ(requests.size(), 4u);
  const wire::BthOpcode want[4] = {wire::BthOpcode::RDMA_WRITE_FIRST, wire::BthOpcode::RDMA_WRITE_MIDDLE,
                                   wire::BthOpcode::RDMA_WRITE_LAST, wire::BthOpcode::SEND_ONLY};
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(requests[i]->f.opcode, uint16_t(want[i])) << requests[i]->text;
    EXPECT_EQ(requests[i]->f.psn, kSqPsn + i);
    EXPECT_EQ(requests[i]->f.peer_qpn, b.qpn);
    EXPECT_EQ(requests[i]->f.has(kTfAckReq), i >= 2) << requests[i]->text;
    EXPECT_EQ(requests[i]->f.has(kTfSe), i == 3) << requests[i]->text;
  }
  EXPECT_GT(requests[0]->f.count, 1024u);  // payload plus headers
  ASSERT_FALSE(acks.empty());
  for (const TraceEvent* e : acks) {
    EXPECT_EQ(e->f.opcode, uint16_t(wire::BthOpcode::ACKNOWLEDGE));
    EXPECT_EQ(e->f.peer_qpn, a.qpn);
  }
  EXPECT_EQ(acks.back()->f.psn, kSqPsn + 3);
  ASSERT_EQ(rx.size(), tx.size());  // loopback: every frame sent comes back in
  for (const TraceEvent* e : rx) {
    EXPECT_NE(e->f.opcode, kTraceNone16) << e->text;
    EXPECT_NE(e->f.psn, kTraceNone) << e->text;
    EXPECT_NE(e->f.peer_qpn, kTraceNone) << e->text;
  }

  // The requester sees the ACKs: their PSNs.
  auto ack = sink.of(TraceUnit::Requester, TraceKind::Ack, a.qpn);
  ASSERT_FALSE(ack.empty());
  EXPECT_EQ(ack.back()->f.psn, kSqPsn + 3);

  // The WQE-fetch unit fetches B's receive WQE for the responder.
  auto rfetch = sink.of(TraceUnit::WqeFetch, TraceKind::WqeFetch, b.qpn);
  ASSERT_EQ(rfetch.size(), 1u);
  EXPECT_EQ(rfetch[0]->f.wqe, 0u);
  EXPECT_EQ(rfetch[0]->f.count, 1u);
  EXPECT_TRUE(rfetch[0]->f.has(kTfRq));

  // CQEs: CQN, counter, WQE, opcode, status, direction.
  auto cqe = sink.of(TraceUnit::Cq, TraceKind::CqeWrite);
  ASSERT_EQ(cqe.size(), 3u);
  const TraceEvent *write_cqe = nullptr, *send_cqe = nullptr, *recv_cqe = nullptr;
  for (const TraceEvent* e : cqe) {
    EXPECT_EQ(e->f.queue, cqn);
    EXPECT_EQ(e->f.status, uint16_t(hw::CqeSyndrome::Ok));
    EXPECT_FALSE(e->f.has(kTfError));
    if (e->qpn == b.qpn)
      recv_cqe = e;
    else if (e->f.wqe == 0)
      write_cqe = e;
    else
      send_cqe = e;
  }
  ASSERT_TRUE(write_cqe && send_cqe && recv_cqe);
  EXPECT_EQ(write_cqe->qpn, a.qpn);
  EXPECT_EQ(write_cqe->f.opcode, uint16_t(hw::CqeOpcode::Req));
  EXPECT_EQ(write_cqe->f.count, 3000u);
  EXPECT_FALSE(write_cqe->f.has(kTfRq));
  EXPECT_EQ(send_cqe->f.wqe, 2u);
  EXPECT_EQ(recv_cqe->f.opcode, uint16_t(hw::CqeOpcode::RespSend));
  EXPECT_EQ(recv_cqe->f.wqe, 0u);
  EXPECT_EQ(recv_cqe->f.count, 100u);
  EXPECT_TRUE(recv_cqe->f.has(kTfRq));
  EXPECT_TRUE(recv_cqe->f.has(kTfSolicited));
  EXPECT_EQ(cqe.back()->f.index, 3u);  // the CQ's producer counter after the third CQE

  // DMA and MR checks carry their address and length.
  for (const TraceEvent* e : sink.of(TraceUnit::Dma, TraceKind::DmaRead)) {
    EXPECT_NE(e->f.addr, kTraceNone64) << e->text;
    EXPECT_NE(e->f.count, kTraceNone) << e->text;
  }
  auto xl = sink.of(TraceUnit::Mr, TraceKind::MrXlate, a.qpn);
  ASSERT_FALSE(xl.empty());
  EXPECT_EQ(xl[0]->f.key, key);
  EXPECT_EQ(xl[0]->f.addr, buf.iova);
  EXPECT_EQ(xl[0]->f.count, 750u);

  // Hazards. Destroying the QPs (everything acknowledged) and the MR (no WRITE in flight)
  // reports nothing; destroying the CQ with its three CQEs never consumed (the doorbell
  // record's consumer index is still 0) is one hazard, and reading that record is silent.
  const size_t before = sink.events.size();
  command(hca, hw::CmdOpcode::DestroyQp, nullptr, 0, a.qpn);
  command(hca, hw::CmdOpcode::DestroyQp, nullptr, 0, b.qpn);
  command(hca, hw::CmdOpcode::DestroyMkey, nullptr, 0, key);
  EXPECT_TRUE(sink.of(TraceUnit::Command, TraceKind::Error).empty());
  EXPECT_EQ(hca.stats().hazards, 0u);
  command(hca, hw::CmdOpcode::DestroyCq, nullptr, 0, cqn);
  auto hz = sink.of(TraceUnit::Command, TraceKind::Error);
  ASSERT_EQ(hz.size(), 1u);
  EXPECT_EQ(hz[0]->f.queue, cqn);
  EXPECT_EQ(hz[0]->f.count, 3u);  // CQEs never polled
  EXPECT_EQ(hz[0]->f.index, 3u);  // the producer counter
  EXPECT_TRUE(hz[0]->f.has(kTfError));
  EXPECT_EQ(hz[0]->text, "hazard: CQ " + std::to_string(cqn) + " destroyed with 3 CQEs never polled");
  EXPECT_EQ(hca.stats().hazards, 1u);
  for (size_t i = before; i < sink.events.size(); ++i)
    EXPECT_NE(sink.events[i].kind, TraceKind::DmaRead) << sink.events[i].text;
}

}  // namespace
}  // namespace hcasim::model
