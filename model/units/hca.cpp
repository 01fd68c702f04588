// SPDX-License-Identifier: Apache-2.0
#include "hca.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace hcasim::model {

hw::HcaCaps Hca::default_caps(const TimingProfile& prof, const HcaIdentity& id) {
  hw::HcaCaps c{};
  c.node_guid = id.node_guid;
  c.sys_image_guid = id.node_guid;
  c.vendor_id = 0x1af4;  // neutral (not a NIC vendor), so tools take their generic paths
  c.vendor_part_id = 0x5ca1;
  c.hw_ver = 1;
  c.max_qp = 1 << 16;
  c.max_qp_wr = 1 << 14;
  c.max_sge = kMaxSge;
  c.max_cq = 1 << 16;
  c.max_cqe = (1 << 22) - 1;
  c.max_mr = 1 << 20;
  c.max_mr_size = ~0ull;
  c.max_pd = 1 << 16;
  c.max_qp_rd_atom = 16;
  c.atomic_cap = 1;  // IBV_ATOMIC_HCA
  c.max_qp_init_rd_atom = 16;
  c.max_inline_data = kMaxInline;
  c.max_srq = 1 << 16;
  c.max_srq_wr = 1 << 14;
  c.max_srq_sge = kMaxSge;
  c.phys_port_cnt = 1;
  c.qpc_cache_entries = prof.qpc_cache_entries;
  std::memcpy(c.port_mac, id.mac, 6);
  uint32_t mtu = prof.default_mtu, log = 0;
  while ((1u << log) < mtu) ++log;
  c.active_mtu_log = uint8_t(log);
  c.port_ipv4 = id.ipv4;
  c.link_gbps = uint32_t(prof.link_bps / 1e9);
  return c;
}

Hca::Hca(const TimingProfile& prof, const HcaIdentity& id, TraceSink* sink)
    : core_(prof, tracer_, id),
      req_(core_.transport()),
      resp_(core_.transport()),
      doorbell_(prof, tracer_, core_.cq, core_.eq, req_),
      cmd_(
          tracer_, core_.qpc, core_.srqs, core_.mrs, core_.cq, core_.eq, default_caps(prof, id),
          [this](QpContext& qp, hw::QpState from) { on_state(qp, from); }, CommandUnit::qpn_base(id.index)),
      rx_stage_("rx", [this](RxWork& w) { dispatch_rx(w); }) {
  tracer_.attach(sink, id.index);
  req_.set_error_handler([this](QpContext& qp, const char* why) { to_error(qp, why); });
  resp_.set_error_handler([this](QpContext& qp, const char* why) { to_error(qp, why); });
  core_.port.set_rx_handler([this](PacketPtr p) { on_rx(std::move(p)); });
  core_.port.set_sent_handler([this](const Packet& p, uint64_t end) { req_.on_sent(p, end); });
  // IBTA 11.6.2: a CQ overflow is a CQ error; the QPs completing into it can no longer work.
  core_.cq.set_overflow_handler([this](uint32_t cqn) {
    std::vector<QpContext*> hit;
    core_.qpc.for_each([&](QpContext& qp) {
      if (qp.qpc.send_cqn == cqn || qp.qpc.recv_cqn == cqn) hit.push_back(&qp);
    });
    for (QpContext* qp : hit) {
      core_.eq.post(core_.cq.eqn_of(qp->qpc.send_cqn), hw::EqeType::WqCatastrophic, qp->qpc.qpn);
      to_error(*qp, "CQ overflow");
    }
  });
}

void Hca::to_error(QpContext& qp, const char* why) {
  // Already in ERR: flush again. Work posted to a QP in ERR completes with a flush error
  // (IBTA 10.3.1; what ib_drain_rq/ib_drain_sq rely on), so a doorbell there lands here.
  if (hw::QpState(qp.qpc.state) != hw::QpState::Err) {
    HCASIM_TRACE(tracer_, Command, QpState, qp.qpc.qpn, TraceFields().set_flag(kTfError),
                 "QP 0x%x -> ERR (%s)", qp.qpc.qpn, why);
    qp.qpc.state = uint8_t(hw::QpState::Err);
  }
  req_.flush(qp);
  resp_.flush(qp);
}

void Hca::on_state(QpContext& qp, hw::QpState from) {
  const auto to = hw::QpState(qp.qpc.state);
  if (to == hw::QpState::Err && from != hw::QpState::Err) {
    req_.flush(qp);
    resp_.flush(qp);
  }
  if (to == hw::QpState::Sqd && from != hw::QpState::Sqd) {
    qp.sqd_notify = qp.qpc.sqd_notify != 0;
    req_.drained_check(qp);
  }
}

void Hca::function_reset() {
  HCASIM_TRACE(tracer_, Command, QpState, kTraceNone, TraceFields(),
               "function reset: owner gone, all resources destroyed");
  std::vector<uint32_t> qpns;
  core_.qpc.for_each([&](QpContext& qp) { qpns.push_back(qp.qpc.qpn); });
  for (uint32_t q : qpns) core_.qpc.destroy(q);
  for (uint32_t s : core_.srqs.ids()) core_.srqs.destroy(s);
  for (uint32_t c : core_.cq.ids()) core_.cq.destroy(c);
  for (uint32_t e : core_.eq.ids()) core_.eq.destroy(e);
  for (uint32_t k : core_.mrs.keys()) core_.mrs.remove(k);
  core_.mrs.clear_windows();
  cmd_.reset_pds();
  core_.iommu.clear();
  core_.eq.set_irq_handler(nullptr);
  core_.port.set_up(true);
  drops_.clear();
  send_left_dreqs();  // once the port is up again (a process found gone took it down)
}

void Hca::drop_rx_if(std::function<bool(const wire::ParsedFrame&)> pred, uint32_t n) {
  if (n) drops_.push_back(DropRx{std::move(pred), n});
}

bool Hca::take_drop(const wire::ParsedFrame& f) {
  for (auto it = drops_.begin(); it != drops_.end(); ++it) {
    if (!it->pred(f)) continue;
    if (--it->left == 0) drops_.erase(it);
    return true;
  }
  return false;
}

bool Hca::transport_matches(const QpContext& qp, wire::BthOpcode op) {
  if (wire::transport_of(op) != qp_transport(qp)) return false;
  // An XRC send QP only takes responses, an XRC receive QP only requests.
  const auto type = hw::QpType(qp.qpc.type);
  if (type == hw::QpType::XrcSend) return !wire::is_request(op);
  if (type == hw::QpType::XrcRecv) return wire::is_request(op);
  return true;
}

void Hca::on_rx(PacketPtr pkt) {
  wire::ParsedFrame f;
  const wire::ParseError e = wire::parse_frame(pkt->data, pkt->len, f, !pkt->pristine);
  if (e != wire::ParseError::Ok) {
    ++rx_dropped_;
    if (e == wire::ParseError::BadIcrc) ++icrc_errors_;
    HCASIM_TRACE(tracer_, Port, Error, kTraceNone, TraceFields().set_count(pkt->len).set_flag(kTfError),
                 "frame dropped: %s", wire::parse_error_name(e));
    return;
  }
  if (!drops_.empty() && take_drop(f)) {
    ++rx_dropped_;
    HCASIM_TRACE(tracer_, Port, Error, f.h.dest_qp,
                 TraceFields().set_opcode(uint16_t(f.h.opcode)).set_psn(f.h.psn).set_peer_qpn(f.h.dest_qp),
                 "frame lost (injected: psn=%u)", f.h.psn);
    if (drop_observer_) drop_observer_(*pkt);
    return;
  }
  if (f.h.dest_qp == hw::kMulticastQpn) return deliver_multicast(std::move(pkt), f);
  QpcCache::Lookup l =
      core_.qpc.lookup(f.h.dest_qp, wire::is_request(f.h.opcode) ? "rx request" : "rx response");
  if (!l.qp) {
    ++rx_dropped_;
    if (f.h.dest_qp == hw::kGsiQpn) answer_without_cm(f);
    return;
  }
  // The receive pipeline (parse, checks, buffers) before the packet is acted on, in order.
  rx_ready_ps_ = std::max(now_ps() + l.latency_ps + core_.prof.pkt_process_ps, rx_ready_ps_);
  rx_stage_.push(rx_ready_ps_, RxWork{std::move(pkt), f});
}

void Hca::dispatch_rx(RxWork& w) {
  const wire::ParsedFrame& f = w.f;
  QpContext* qp = core_.qpc.find(f.h.dest_qp);  // destroyed while its context was being read?
  if (!qp) {
    ++rx_dropped_;
    return;
  }
  if (!transport_matches(*qp, f.h.opcode)) {
    ++rx_dropped_;
    HCASIM_TRACE(tracer_, Port, Error, f.h.dest_qp,
                 TraceFields().set_opcode(uint16_t(f.h.opcode)).set_psn(f.h.psn).set_flag(kTfError),
                 "frame dropped: %s packet for a %s QP", wire::opcode_name(f.h.opcode),
                 hw::qp_type_name(hw::QpType(qp->qpc.type)));
    return;
  }
  const DmaEngine::ActingOn acting_on(core_.dma, w.pkt.get());  // payloads land from the frame
  if (wire::is_request(f.h.opcode))
    resp_.on_request(*qp, f);
  else
    req_.on_response(*qp, f);
}

HcaStats Hca::stats() const {
  HcaStats s{};
  s.doorbells = doorbell_.doorbells();
  s.qpc_hits = core_.qpc.hits();
  s.qpc_misses = core_.qpc.misses();
  s.bt_walks = core_.bt.walks();
  s.bt_cache_hits = core_.bt.cache_hits();
  s.send_wqes = req_.wqes();
  s.recv_wqes = resp_.recv_wqes();
  s.dma_read_bytes = core_.dma.bytes_read();
  s.dma_write_bytes = core_.dma.bytes_written();
  s.tx_packets = core_.port.tx_packets();
  s.rx_packets = core_.port.rx_packets();
  s.tx_bytes = core_.port.tx_bytes();
  s.rx_bytes = core_.port.rx_bytes();
  s.acks_sent = resp_.acks();
  s.acks_received = req_.acks_received();
  s.naks = resp_.naks();
  s.rnr_naks = resp_.rnr_naks();
  s.duplicates = resp_.duplicates();
  s.retransmits = req_.retransmits();
  s.cqes = core_.cq.cqes();
  s.cq_events = core_.cq.events();
  s.cq_overflows = core_.cq.overflows();
  s.eqes = core_.eq.eqes();
  s.interrupts = core_.eq.interrupts();
  s.rx_dropped = rx_dropped_;
  s.iotlb_hits = const_cast<Iommu&>(core_.iommu).iotlb_hits();
  s.iotlb_misses = const_cast<Iommu&>(core_.iommu).iotlb_misses();
  s.hazards = hazards_;
  s.unreliable_drops = resp_.unreliable_drops();
  s.qkey_violations = resp_.qkey_violations();
  s.icrc_errors = icrc_errors_;
  s.injected_losses = injected_.losses;
  s.injected_duplicates = injected_.duplicates;
  s.injected_reorders = injected_.reorders;
  s.injected_corruptions = injected_.corruptions;
  s.injected_delays = injected_.delays;
  s.link_down_losses = injected_.link_down_losses;
  s.link_changes = link_changes_;
  return s;
}

}  // namespace hcasim::model
