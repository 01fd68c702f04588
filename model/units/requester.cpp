// SPDX-License-Identifier: Apache-2.0
#include "requester.h"

#include <cinttypes>
#include <cstring>

namespace hcasim::model {

const char* wqe_opcode_name(hw::WqeOpcode op) {
  switch (op) {
    case hw::WqeOpcode::Nop: return "NOP";
    case hw::WqeOpcode::RdmaWrite: return "RDMA_WRITE";
    case hw::WqeOpcode::RdmaWriteImm: return "RDMA_WRITE_WITH_IMM";
    case hw::WqeOpcode::Send: return "SEND";
    case hw::WqeOpcode::SendImm: return "SEND_WITH_IMM";
    case hw::WqeOpcode::RdmaRead: return "RDMA_READ";
    case hw::WqeOpcode::AtomicCmpSwap: return "ATOMIC_CMP_AND_SWP";
    case hw::WqeOpcode::AtomicFetchAdd: return "ATOMIC_FETCH_AND_ADD";
    case hw::WqeOpcode::SendInv: return "SEND_WITH_INV";
    case hw::WqeOpcode::BindMw: return "BIND_MW";
    case hw::WqeOpcode::LocalInv: return "LOCAL_INV";
  }
  return "?";
}

uint32_t last_psn(const InflightMsg& m) { return wire::psn_add(m.first_psn, int64_t(m.npkts) - 1); }

namespace {

bool message_kind(hw::WqeOpcode op, wire::MessageKind& k) {
  switch (op) {
    case hw::WqeOpcode::Send: k = wire::MessageKind::Send; return true;
    case hw::WqeOpcode::SendImm: k = wire::MessageKind::SendImm; return true;
    case hw::WqeOpcode::SendInv: k = wire::MessageKind::SendInv; return true;
    case hw::WqeOpcode::RdmaWrite: k = wire::MessageKind::Write; return true;
    case hw::WqeOpcode::RdmaWriteImm: k = wire::MessageKind::WriteImm; return true;
    default: return false;
  }
}

/** Bind and local invalidate: work on this HCA's memory keys, no packet. */
bool is_memory_op(hw::WqeOpcode op) { return op == hw::WqeOpcode::BindMw || op == hw::WqeOpcode::LocalInv; }

bool is_atomic(hw::WqeOpcode op) {
  return op == hw::WqeOpcode::AtomicCmpSwap || op == hw::WqeOpcode::AtomicFetchAdd;
}
/** RC and XRC are acknowledged; UC and UD are not. */
bool reliable(const QpContext& qp) {
  const auto t = qp_transport(qp);
  return t == wire::Transport::RC || t == wire::Transport::XRC;
}

/** READs and atomics complete on their response, not on an ACK. */
bool needs_response(const InflightMsg& m) { return m.w.op == hw::WqeOpcode::RdmaRead || is_atomic(m.w.op); }

/**
 * The response bytes a READ asked for again need not cover: those already placed, unless the
 * READ is answered in full (a go-back-N behind it replays it whole, as first sent).
 */
uint32_t read_resume_bytes(const InflightMsg& m) {
  return m.w.op == hw::WqeOpcode::RdmaRead && !m.responded ? m.read_bytes : 0;
}

/**
 * A long RC message asks for an ACK every this many packets, not only at its end (IBTA lets a
 * requester set AckReq on any packet; rxe does it about every 66 packets, RXE_MAX_PKT_PER_ACK):
 * each ACK is progress the requester keeps, so a retry after a timeout resends from the first
 * packet not acknowledged rather than from the message's start.
 */
constexpr uint32_t kAckReqEvery = 64;

/** The request headers a message's packet @p op (number @p pkt of it) carries beyond the
 * connection's (flags, RETH, ImmDt, AtomicETH). */
void fill_request_headers(const QpContext& qp, const InflightMsg& m, uint32_t pkt, wire::BthOpcode op,
                          wire::Headers& h) {
  const bool ends = wire::ends_message(op);
  h.ackreq = (ends || (pkt + 1) % kAckReqEvery == 0) && reliable(qp);  // UC and UD are never acknowledged
  h.se = ends && (m.w.flags & hw::kCtrlSolicited) && m.w.op != hw::WqeOpcode::RdmaWrite &&
         m.w.op != hw::WqeOpcode::RdmaRead;
  if (wire::has_reth(op)) {
    // A READ asked again asks only for what has not arrived (read_resume_bytes): IBTA lets a
    // retried READ reread just the part not yet answered, its PSN, VA and length moved on
    // alike; rxe does the same (req_retry advances the iova by the PSNs already answered).
    h.reth.va = m.w.raddr + read_resume_bytes(m);
    h.reth.rkey = m.w.rkey;
    h.reth.dma_len = m.w.length - read_resume_bytes(m);
  }
  if (wire::has_imm(op)) h.imm_data = m.w.imm;
  if (wire::has_ieth(op)) h.ieth_rkey = m.w.imm;  // SEND_WITH_INV: the WQE carries the rkey there
  h.xrc_srqn = m.w.xrc_srqn;
  if (is_atomic(m.w.op)) {
    h.atomic_eth.va = m.w.raddr;
    h.atomic_eth.rkey = m.w.rkey;
    h.atomic_eth.swap_add = m.w.swap_add;
    h.atomic_eth.compare = m.w.compare;
  }
}

}  // namespace

Requester::Requester(const TransportUnits& units)
    : u_(units),
      jobs_("requester", [this](Job& j) { run(j); }),
      ack_timer_("ack_timer", [this](uint32_t qpn) { on_timeout(qpn); }) {}

void Requester::schedule(QpContext& qp, Stage stage, uint64_t at_ps, uint32_t psn) {
  jobs_.push(at_ps, Job{qp.qpc.qpn, stage, psn});
}

void Requester::on_sent(const Packet& pkt, uint64_t tx_end_ps) {
  if (QpContext* qp = u_.qpc.find(pkt.report_qpn)) schedule(*qp, Stage::Complete, tx_end_ps, pkt.report_psn);
}

namespace {

/** Whether the WQE at WQEBB counter @p index came with a BlueFlame store (and forget it). */
bool take_pushed(QpContext& qp, uint16_t index) {
  while (!qp.pushed.empty() && int16_t(uint16_t(qp.pushed.front() - index)) < 0) qp.pushed.pop_front();
  if (qp.pushed.empty() || qp.pushed.front() != index) return false;
  qp.pushed.pop_front();
  return true;
}

}  // namespace

void Requester::doorbell(uint32_t qpn, uint16_t pi, bool pushed) {
  QpcCache::Lookup l = u_.qpc.lookup(qpn, "SQ doorbell");
  if (!l.qp) return;
  // The producer counter only moves forward. A doorbell that arrives after a later one (two
  // threads posting to one QP, their stores reaching the device out of order, as they may
  // across a fabric's per-thread connections) carries no new WQEs; taking its counter would
  // move it back and make the next fetch run 64K WQEs ahead. It still makes the QP look at
  // itself (the provider rings the same counter after posting receives to a QP in ERR, so
  // they get flushed).
  if (int16_t(uint16_t(pi - l.qp->sq_pi)) > 0) {
    // BlueFlame: the one WQE from the old counter to this one reached the device with the store.
    if (pushed) {
      if (l.qp->pushed.size() >= 64) l.qp->pushed.pop_front();  // never fetched (QP stopped)
      l.qp->pushed.push_back(l.qp->sq_pi);
    }
    l.qp->sq_pi = pi;
  } else if (pi != l.qp->sq_pi)
    HCASIM_TRACE(u_.tracer, Doorbell, Note, qpn, TraceFields().set_index(pi),
                 "SQ doorbell producer=%u is behind %u: stale, counter kept", pi, l.qp->sq_pi);
  schedule(*l.qp, Stage::Fetch, now_ps() + l.latency_ps);
}

void Requester::run(Job& job) {
  QpContext* qp = u_.qpc.find(job.qpn);
  if (!qp) return;
  const auto st = hw::QpState(qp->qpc.state);
  if (st == hw::QpState::Err) {  // flush what was posted since: send and receive queue
    to_error_(*qp, "doorbell in ERR");
    return;
  }
  if (st != hw::QpState::Rts && st != hw::QpState::Sqd) return;
  switch (job.stage) {
    case Stage::Fetch:
      if (st == hw::QpState::Sqd) return;  // SQD: finish what started, begin nothing new
      fetch(*qp);
      break;
    case Stage::Decode: decode(*qp); break;
    case Stage::Tx: tx(*qp); break;
    case Stage::Complete: complete_through(*qp, job.psn); break;
  }
}

void Requester::fetch(QpContext& qp) {
  const uint64_t now = now_ps();
  uint64_t ready = now;
  uint32_t fetched = 0, read = 0;
  while (qp.sq_fetch != qp.sq_pi && qp.inflight.size() + qp.fetched.size() < 1024) {
    SendWqe& w = qp.fetched.push_back_slot();  // decoded in place (the decoder resets it)
    uint32_t reads = 0;
    const bool pushed = take_pushed(qp, qp.sq_fetch);
    const uint32_t nbb = pushed ? u_.fetch.take_pushed_send(send_queue(qp), qp.sq_fetch, w)
                                : u_.fetch.fetch_send(send_queue(qp), qp.sq_fetch, w, reads);
    if (nbb == 0) {
      qp.fetched.pop_back();
      HCASIM_TRACE(u_.tracer, WqeFetch, Error, qp.qpc.qpn,
                   TraceFields().set_wqe(qp.sq_fetch).set_flag(kTfError), "WQE %u: fetch/decode fault",
                   qp.sq_fetch);
      to_error_(qp, "WQE fetch fault");
      return;
    }
    // Reads are pipelined: the first WQE pays the round trip (plus the table walk, if any),
    // later ones only their transfer time. A WQE pushed with its doorbell is not read at all.
    if (!pushed) ready += u_.fetch.send_cost_ps(nbb, reads, read++ != 0);
    HCASIM_TRACE(u_.tracer, WqeFetch, WqeFetch, qp.qpc.qpn,
                 TraceFields()
                     .set_wqe(w.index)
                     .set_count(nbb)
                     .set_flag(kTfSignaled, w.flags & hw::kCtrlCqUpdate)
                     .set_flag(kTfSolicited, w.flags & hw::kCtrlSolicited)
                     .set_flag(kTfBlueFlame, pushed),
                 "SQ WQE %u (%u WQEBB%s): %s len=%u sge=%u%s%s%s, ready in %.1f ns", w.index, nbb,
                 pushed ? ", BlueFlame" : "", wqe_opcode_name(w.op), w.length, w.nsge,
                 w.is_inline ? " inline" : "", (w.flags & hw::kCtrlCqUpdate) ? " signaled" : " unsignaled",
                 (w.flags & hw::kCtrlSolicited) ? " solicited" : "", double(ready - now) / 1000.0);
    qp.sq_fetch = uint16_t(qp.sq_fetch + nbb);
    ++fetched;
  }
  if (fetched) schedule(qp, Stage::Decode, ready);
}

void Requester::decode(QpContext& qp) {
  const uint32_t mtu = mtu_of(qp);
  bool any = false;
  while (!qp.fetched.empty()) {
    // Built in its slot: a WQE is hundreds of bytes (inline data, SGEs), copied once.
    InflightMsg& m = qp.inflight.push_back_slot();
    m.start(qp.fetched.front(), qp.next_psn);
    qp.fetched.pop_front();
    ++wqes_;
    wire::MessageKind kind;
    if (m.w.op == hw::WqeOpcode::RdmaRead) {
      m.npkts = wire::plan_segments(wire::MessageKind::ReadResponse, m.w.length, mtu).num_packets;
    } else if (message_kind(m.w.op, kind)) {
      m.npkts = wire::plan_segments(kind, m.w.length, mtu).num_packets;
    } else if (m.w.op == hw::WqeOpcode::Nop || is_memory_op(m.w.op)) {
      m.npkts = 0;  // nothing on the wire: done by this HCA in its turn (tx)
    } else if (is_atomic(m.w.op) && m.w.nsge == 1 && m.w.length == 8) {
      m.npkts = 1;
    } else {
      HCASIM_TRACE(u_.tracer, WqeFetch, Error, qp.qpc.qpn,
                   TraceFields().set_wqe(m.w.index).set_flag(kTfError), "WQE %u: unsupported opcode 0x%02x",
                   m.w.index, unsigned(m.w.op));
      fail_front(qp, hw::CqeSyndrome::LocalQpOpErr, "unsupported opcode");
      return;
    }
    if (!transport_allows(qp, m, mtu)) {  // queued to fail in its turn
      any = true;
      continue;
    }
    qp.next_psn = wire::psn_add(qp.next_psn, m.npkts);
    const uint32_t psn_last = m.npkts ? last_psn(m) : m.first_psn;
    HCASIM_TRACE(u_.tracer, Requester, WqeDecode, qp.qpc.qpn,
                 TraceFields().set_wqe(m.w.index).set_count(m.npkts).set_psn_range(m.first_psn, psn_last),
                 "WQE %u %s: %u packet(s) at MTU %u, PSN %u..%u", m.w.index, wqe_opcode_name(m.w.op), m.npkts,
                 mtu, m.first_psn, psn_last);
    any = true;
  }
  if (any) schedule(qp, Stage::Tx, now_ps() + u_.prof.wqe_decode_ps);
}

bool Requester::memory_op(QpContext& qp, InflightMsg& m) {
  const bool bind = m.w.op == hw::WqeOpcode::BindMw;
  const MwOp r = bind ? u_.mrs.bind(m.w.bind, qp.qpc.pdn, qp.qpc.qpn)
                      : u_.mrs.invalidate(m.w.imm, qp.qpc.pdn, qp.qpc.qpn);
  const uint32_t key = bind ? m.w.bind.new_rkey : m.w.imm;
  HCASIM_TRACE(u_.tracer, Requester, Note, qp.qpc.qpn,
               TraceFields().set_wqe(m.w.index).set_key(key).set_flag(kTfError, r != MwOp::Ok),
               bind ? "WQE %u BIND_MW: window 0x%x -> %s" : "WQE %u LOCAL_INV: window 0x%x -> %s", m.w.index,
               key, mw_op_name(r));
  if (r == MwOp::Ok) return true;
  // IBTA 10.6.7.2.1: a failed bind completes with a bind error; a failed invalidate is an
  // invalid local operation (rxe reports both the same way). The QP goes to ERR.
  local_fail(qp, m, bind ? hw::CqeSyndrome::MwBindErr : hw::CqeSyndrome::LocalQpOpErr, mw_op_name(r));
  return false;
}

bool Requester::transport_allows(QpContext& qp, InflightMsg& m, uint32_t mtu) {
  const auto type = hw::QpType(qp.qpc.type);
  const bool send = m.w.op == hw::WqeOpcode::Send || m.w.op == hw::WqeOpcode::SendImm;
  const bool write = m.w.op == hw::WqeOpcode::RdmaWrite || m.w.op == hw::WqeOpcode::RdmaWriteImm;
  const char* why = nullptr;
  hw::CqeSyndrome status = hw::CqeSyndrome::LocalQpOpErr;
  if (hw::is_datagram(type) && !send) {
    why = "UD sends only SEND and SEND_WITH_IMM";
  } else if (type == hw::QpType::Uc && !send && !write && !is_memory_op(m.w.op)) {
    why = "UC has no RDMA READ, atomics or SEND_WITH_INV";
  } else if (hw::is_datagram(type) && m.w.length > mtu) {
    why = "UD message longer than the path MTU";  // IBTA 9.8.2: a UD message is one packet
    status = hw::CqeSyndrome::LocalLengthErr;
  }
  if (!why) return true;
  // It completes in error in its turn, after every earlier message (local_fail).
  m.npkts = 0;
  local_fail(qp, m, status, why);
  return false;
}

bool Requester::gather(QpContext& qp, const InflightMsg& m, uint32_t offset, uint32_t len, uint8_t* dst) {
  if (m.w.is_inline) {
    std::memcpy(dst, m.w.inline_buf + offset, len);
    return true;
  }
  uint32_t left = 0;
  const bool ok = walk_sges(m.w.sge, m.w.nsge, offset, len, left, [&](const Sge& s, uint64_t va, uint32_t n) {
    if (u_.mrs.read(s.lkey, va, dst, n, qp.qpc.qpn, ReadFor::PostedPayload) < 0) return false;
    dst += n;
    return true;
  });
  return ok && left == 0;
}

bool Requester::must_wait(QpContext& qp, const InflightMsg& m) {
  if ((m.w.flags & hw::kCtrlFence) && qp.tx_pkt == 0 && !m.sent) {
    // IBV_SEND_FENCE (ibv_post_send(3); IBTA 10.8.3.3): this WR starts only once every earlier
    // READ/atomic has its response, so it sees (and sends) what they brought back.
    bool behind = false;
    for (size_t i = 0; i < qp.tx_msg && !behind; ++i)
      behind = needs_response(qp.inflight[i]) && !qp.inflight[i].responded;
    if (behind) {
      HCASIM_TRACE(u_.tracer, Requester, Note, qp.qpc.qpn, TraceFields().set_wqe(m.w.index),
                   "WQE %u waits: fenced behind an outstanding READ/atomic", m.w.index);
      return true;
    }
  }
  if (needs_response(m)) {
    // ibv_modify_qp(3) max_rd_atomic: READs/atomics outstanding at the responder at once.
    uint32_t outstanding = 0;
    for (size_t i = 0; i < qp.tx_msg; ++i)
      if (needs_response(qp.inflight[i]) && !qp.inflight[i].responded) ++outstanding;
    const uint32_t limit = qp.qpc.max_rd_atomic ? qp.qpc.max_rd_atomic : 1;
    if (outstanding >= limit) {
      HCASIM_TRACE(
          u_.tracer, Requester, Note, qp.qpc.qpn, TraceFields().set_wqe(m.w.index).set_count(outstanding),
          "WQE %u waits: %u READ/atomic outstanding (max_rd_atomic %u)", m.w.index, outstanding, limit);
      return true;
    }
  }
  return false;
}

bool Requester::lkeys_ok(QpContext& qp, const InflightMsg& m) {
  // Local protection checks on the whole gather (or, for READ/atomic, scatter) list.
  const uint32_t need = needs_response(m) ? uint32_t(hw::kAccessLocalWrite) : 0u;
  for (uint32_t i = 0; !m.w.is_inline && i < m.w.nsge; ++i) {
    const Sge& s = m.w.sge[i];
    if (u_.mrs.check(s.lkey, qp.qpc.pdn, s.addr, s.len, need, qp.qpc.qpn, "lkey") != MrCheck::Ok)
      return false;
  }
  return true;
}

bool Requester::send_packet(QpContext& qp, InflightMsg& m, TxBatch& batch) {
  wire::BthOpcode op;
  uint32_t off = 0, len = 0;
  // decode() admits only SEND/WRITE (with or without immediate), READ, atomics and NOP here.
  wire::MessageKind kind = wire::MessageKind::Send;
  if (m.w.op == hw::WqeOpcode::RdmaRead) {
    op = wire::BthOpcode::RDMA_READ_REQUEST;
  } else if (is_atomic(m.w.op)) {
    op = m.w.op == hw::WqeOpcode::AtomicCmpSwap ? wire::BthOpcode::COMPARE_SWAP : wire::BthOpcode::FETCH_ADD;
  } else {
    message_kind(m.w.op, kind);
    wire::Segment s = wire::plan_segments(kind, m.w.length, batch.mtu).segment(qp.tx_pkt);
    op = s.opcode;
    off = s.offset;
    len = s.length;
  }
  // A READ resumed after a lost response starts at the PSN of the first response missing.
  const uint32_t psn = wire::psn_add(m.first_psn, qp.tx_pkt + read_resume_bytes(m) / batch.mtu);
  op = wire::in_transport(op, qp_transport(qp));
  const bool ud = hw::is_datagram(hw::QpType(qp.qpc.type));
  wire::Headers h;
  if (ud && !u_.frames.datagram_headers(qp, m.w.av, op, psn, h)) return lose_datagram(qp, m, psn, batch);
  if (!ud && !u_.frames.headers_for(qp, op, psn, h)) {
    local_fail(qp, m, hw::CqeSyndrome::TransportRetryExcErr, "no route to destination GID");
    return false;
  }
  fill_request_headers(qp, m, qp.tx_pkt, op, h);
  PacketPtr pkt = make_packet();
  // UC/UD: nothing will acknowledge the message; it completes once its last packet has left.
  if (!reliable(qp) && qp.tx_pkt + 1 >= m.npkts) {
    pkt->report_sent = true;
    pkt->report_qpn = qp.qpc.qpn;
    pkt->report_psn = psn;
  }
  uint8_t* slot = pkt->data + wire::header_length(h);
  if (len && !gather(qp, m, off, len, slot)) {
    local_fail(qp, m, hw::CqeSyndrome::LocalProtErr, "gather fault");
    return false;
  }
  pkt->len = uint32_t(wire::build_frame(h, slot, len, pkt->data, sizeof pkt->data));
  // Payload reads overlap: the first pays the PCIe round trip, the next only their transfer.
  // Inline data came with the WQE: there is nothing to read.
  const bool read = len && !m.w.is_inline;
  if (read)
    batch.ready =
        (batch.first_read ? batch.now + u_.prof.pcie_read_ps : batch.ready) + u_.prof.pcie_xfer_ps(len);
  batch.first_read = batch.first_read && !read;
  if (qp.tx_pkt == 0)
    HCASIM_TRACE(u_.tracer, Requester, PktTx, qp.qpc.qpn,
                 TraceFields().set_wqe(m.w.index).set_peer_qpn(h.dest_qp).set_psn(psn),
                 "WQE %u: start %s to qp 0x%x, first PSN %u%s", m.w.index, wqe_opcode_name(m.w.op), h.dest_qp,
                 psn, ud ? " (UD)" : "");
  u_.port.transmit(std::move(pkt), stream_ready(qp, false, batch.ready));
  return true;
}

bool Requester::lose_datagram(QpContext& qp, InflightMsg& m, uint32_t psn, const TxBatch& batch) {
  // Nothing on the fabric owns the GID. A datagram is not acknowledged, so it completes as sent
  // and is lost, as a UD send to a vanished host is on hardware: only a connected QP's retries
  // find out. (A GSI QP in ERR would end the device's connection management.)
  HCASIM_TRACE(u_.tracer, Requester, Error, qp.qpc.qpn, TraceFields().set_wqe(m.w.index).set_psn(psn),
               "WQE %u: no route to destination GID: the datagram is lost", m.w.index);
  if (qp.tx_pkt + 1 >= m.npkts) schedule(qp, Stage::Complete, batch.now, psn);  // as on_sent would
  return true;
}

void Requester::tx(QpContext& qp) {
  // After an RNR NAK the requester waits out the timer the responder asked for, whatever else
  // arrives meanwhile (IBTA 9.7.5.2.8): the NAK sequence error that the responder sends for the
  // packets behind the refused one, or a doorbell. The job scheduled for the end of the wait resends.
  if (now_ps() < qp.rnr_wait_until) return;
  TxBatch batch;
  batch.now = now_ps();
  batch.mtu = mtu_of(qp);
  batch.ready = batch.now;
  const uint64_t lookahead = 2 * u_.prof.wire_ps(batch.mtu + 128);
  while (qp.tx_msg < qp.inflight.size()) {
    if (u_.port.busy_until() > batch.now + lookahead) {  // back-pressure from the port
      schedule(qp, Stage::Tx, u_.port.busy_until() - lookahead);
      return;
    }
    InflightMsg& m = qp.inflight[qp.tx_msg];
    if (m.local_error != hw::CqeSyndrome::Ok) return;  // waits for earlier messages, then fails
    if (m.npkts == 0) {                                // NOP, bind, local invalidate: nothing on the wire
      if (is_memory_op(m.w.op) && !memory_op(qp, m)) return;
      m.sent = true;
      ++qp.tx_msg;
      complete_through(qp, wire::psn_add(qp.next_psn, -1));
      continue;
    }
    if (must_wait(qp, m)) break;  // resumes when a response arrives
    if (qp.tx_pkt == 0 && !m.sent && !lkeys_ok(qp, m))
      return local_fail(qp, m, hw::CqeSyndrome::LocalProtErr, "lkey check failed");
    if (!send_packet(qp, m, batch)) return;
    if (needs_response(m) || ++qp.tx_pkt >= m.npkts) {  // a READ/atomic request is one packet
      m.sent = true;
      ++qp.tx_msg;
      qp.tx_pkt = 0;
    }
    if (reliable(qp) && !ack_timer_.armed(qp.qpc.qpn)) restart_timer(qp);
  }
}

void Requester::restart_timer(QpContext& qp) {
  const uint64_t t_ns = wire::ack_timeout_ns(qp.qpc.timeout);
  // Messages go out in order, so something is unacknowledged iff the oldest one was sent.
  const bool outstanding = !qp.inflight.empty() && qp.inflight.front().sent;
  if (t_ns == 0 || !outstanding || hw::QpState(qp.qpc.state) == hw::QpState::Err) {
    ack_timer_.cancel(qp.qpc.qpn);
    return;
  }
  ack_timer_.arm(qp.qpc.qpn, now_ps() + t_ns * 1000);
}

void Requester::on_timeout(uint32_t qpn) {
  QpContext* qp = u_.qpc.find(qpn);
  if (!qp || qp->inflight.empty() || hw::QpState(qp->qpc.state) == hw::QpState::Err) return;
  InflightMsg& front = qp->inflight.front();
  if (qp->retry_left == 0) {
    HCASIM_TRACE(u_.tracer, Requester, Error, qpn,
                 TraceFields().set_wqe(front.w.index).set_psn(front.first_psn).set_flag(kTfError),
                 "local ACK timeout: retries exhausted");
    qp->tx_msg = 0;
    return fail_front(*qp, hw::CqeSyndrome::TransportRetryExcErr, "transport retries exhausted");
  }
  --qp->retry_left;
  HCASIM_TRACE(
      u_.tracer, Requester, Retransmit, qpn, TraceFields().set_wqe(front.w.index).set_psn(front.first_psn),
      "local ACK timeout (%.3f us): resend from PSN %u, %u retries left",
      double(wire::ack_timeout_ns(qp->qpc.timeout)) / 1000.0, front.first_psn, unsigned(qp->retry_left));
  // A READ is asked for again from its first missing byte (send_packet); the responder replays
  // that part. A SEND or WRITE resumes after the packets an ACK already covered.
  rewind(*qp, wire::psn_add(front.first_psn, front.acked_pkts));
  schedule(*qp, Stage::Tx, now_ps());
  restart_timer(*qp);
}

void Requester::check_drained(QpContext& qp) {
  if (!qp.sqd_notify || hw::QpState(qp.qpc.state) != hw::QpState::Sqd) return;
  if (!qp.inflight.empty() || !qp.fetched.empty()) return;
  qp.sqd_notify = false;
  HCASIM_TRACE(u_.tracer, Requester, Note, qp.qpc.qpn, TraceFields(), "SQ drained");
  u_.eq.post(u_.cq.eqn_of(qp.qpc.send_cqn), hw::EqeType::SqDrained, qp.qpc.qpn);
}

void Requester::complete(QpContext& qp, const InflightMsg& m, hw::CqeSyndrome status) {
  const bool ok = status == hw::CqeSyndrome::Ok;
  if (ok && !(m.w.flags & hw::kCtrlCqUpdate)) return;  // unsignaled success: no CQE
  CqeInfo ci;
  ci.opcode = ok ? hw::CqeOpcode::Req : hw::CqeOpcode::ReqErr;
  ci.syndrome = status;
  ci.qpn = qp.qpc.qpn;
  ci.src_qp = qp.qpc.dest_qpn;
  ci.wqe_counter = m.w.index;
  ci.byte_cnt = m.w.length;
  ci.req_opcode = m.w.op;
  u_.cq.post(qp.qpc.send_cqn, ci);
}

void Requester::local_fail(QpContext& qp, InflightMsg& m, hw::CqeSyndrome status, const char* why) {
  HCASIM_TRACE(u_.tracer, Requester, Error, qp.qpc.qpn,
               TraceFields().set_wqe(m.w.index).set_status(uint16_t(status)).set_flag(kTfError), "WQE %u: %s",
               m.w.index, why);
  m.local_error = status;
  m.sent = true;
  // Completions stay in order: the error surfaces once every earlier message has completed.
  if (&m == &qp.inflight.front()) complete_through(qp, m.first_psn);
}

void Requester::complete_through(QpContext& qp, uint32_t psn) {
  bool progressed = false;
  while (!qp.inflight.empty()) {
    InflightMsg& m = qp.inflight.front();
    if (m.local_error != hw::CqeSyndrome::Ok) {
      qp.tx_msg = 0;
      return fail_front(qp, m.local_error, "local error");
    }
    if (!m.sent) break;
    if (m.npkts && wire::psn_diff(psn, last_psn(m)) < 0) break;
    if (needs_response(m) && !m.responded) break;
    complete(qp, m, hw::CqeSyndrome::Ok);
    qp.inflight.pop_front();
    if (qp.tx_msg) --qp.tx_msg;
    qp.rnr_left = qp.qpc.rnr_retry;
    qp.retry_left = qp.qpc.retry_cnt;
    progressed = true;
  }
  if (!qp.inflight.empty() && partly_acked(qp.inflight.front(), psn)) {
    qp.retry_left = qp.qpc.retry_cnt;  // progress, as a whole message's ACK is
    progressed = true;
  }
  if (progressed) {
    restart_timer(qp);
    check_drained(qp);
  }
}

bool Requester::partly_acked(InflightMsg& m, uint32_t psn) {
  if (needs_response(m) || m.npkts == 0) return false;
  const int32_t d = wire::psn_diff(psn, m.first_psn);
  if (d < 0 || d >= int32_t(m.npkts) || uint32_t(d) < m.acked_pkts) return false;
  m.acked_pkts = uint32_t(d) + 1;
  return true;
}

void Requester::fail_front(QpContext& qp, hw::CqeSyndrome status, const char* why) {
  const uint32_t wqe = qp.inflight.empty() ? 0 : qp.inflight.front().w.index;
  HCASIM_TRACE(u_.tracer, Requester, Error, qp.qpc.qpn,
               TraceFields()
                   .set_wqe(qp.inflight.empty() ? kTraceNone : wqe)
                   .set_status(uint16_t(status))
                   .set_flag(kTfError),
               "%s: WQE %u completes in error 0x%02x", why, wqe, unsigned(status));
  // The failing WQE is the oldest outstanding one: everything before it has completed.
  if (!qp.inflight.empty()) {
    complete(qp, qp.inflight.front(), status);
    qp.inflight.pop_front();
  }
  to_error_(qp, why);
}

void Requester::flush(QpContext& qp) {
  ack_timer_.cancel(qp.qpc.qpn);
  // Everything fetched, decoded or still in the ring completes with WR_FLUSH_ERR, in order.
  for (auto& m : qp.inflight) complete(qp, m, hw::CqeSyndrome::WrFlushErr);
  qp.inflight.clear();
  for (auto& w : qp.fetched) {
    InflightMsg m;
    m.w = w;
    complete(qp, m, hw::CqeSyndrome::WrFlushErr);
  }
  qp.fetched.clear();
  while (qp.sq_fetch != qp.sq_pi) {
    InflightMsg m;
    uint32_t reads = 0;
    const uint32_t nbb = u_.fetch.fetch_send(send_queue(qp), qp.sq_fetch, m.w, reads);
    if (nbb == 0) break;
    complete(qp, m, hw::CqeSyndrome::WrFlushErr);
    qp.sq_fetch = uint16_t(qp.sq_fetch + nbb);
  }
  qp.sq_fetch = qp.sq_pi;
  qp.pushed.clear();
  qp.tx_msg = 0;
  qp.tx_pkt = 0;
}

void Requester::rewind(QpContext& qp, uint32_t psn) {
  for (size_t i = 0; i < qp.inflight.size(); ++i) {
    InflightMsg& m = qp.inflight[i];
    const int32_t d = wire::psn_diff(psn, m.first_psn);
    if (d >= 0 && (m.npkts == 0 || d < int32_t(m.npkts))) {
      qp.tx_msg = i;
      qp.tx_pkt = m.w.op == hw::WqeOpcode::RdmaRead ? 0 : uint32_t(d);
      for (size_t j = i; j < qp.inflight.size(); ++j) qp.inflight[j].sent = false;
      ++retransmits_;
      HCASIM_TRACE(u_.tracer, Requester, Retransmit, qp.qpc.qpn,
                   TraceFields().set_psn(psn).set_wqe(m.w.index), "go back to PSN %u (WQE %u, packet %u)",
                   psn, m.w.index, qp.tx_pkt);
      return;
    }
  }
}

void Requester::on_response(QpContext& qp, const wire::ParsedFrame& f) {
  const auto op = wire::rc_equivalent(f.h.opcode);  // XRC's responses are RC's
  const bool ack = op == wire::BthOpcode::ACKNOWLEDGE || op == wire::BthOpcode::ATOMIC_ACKNOWLEDGE;
  if (ack && wire::aeth_kind(f.h.aeth.syndrome) == wire::AethKind::Ack) ++acks_received_;
  if (op == wire::BthOpcode::ACKNOWLEDGE)
    on_ack(qp, f.h);
  else if (op >= wire::BthOpcode::RDMA_READ_RESPONSE_FIRST && op <= wire::BthOpcode::RDMA_READ_RESPONSE_ONLY)
    on_read_response(qp, f);
  else if (op == wire::BthOpcode::ATOMIC_ACKNOWLEDGE)
    on_atomic_ack(qp, f.h);
}

void Requester::on_ack(QpContext& qp, const wire::Headers& h) {
  const uint32_t psn = h.psn;
  const uint8_t syn = h.aeth.syndrome;
  switch (wire::aeth_kind(syn)) {
    case wire::AethKind::Ack:
      HCASIM_TRACE(u_.tracer, Requester, Ack, qp.qpc.qpn, TraceFields().set_psn(psn), "ACK psn=%u msn=%u",
                   psn, h.aeth.msn);
      complete_through(qp, psn);
      return;
    case wire::AethKind::RnrNak: {
      complete_through(qp, wire::psn_add(psn, -1));
      if (qp.rnr_left == 0) return fail_front(qp, hw::CqeSyndrome::RnrRetryExcErr, "RNR retries exhausted");
      if (qp.rnr_left != 7) --qp.rnr_left;
      const uint64_t wait = wire::rnr_timer_ns(wire::aeth_value(syn)) * 1000;
      HCASIM_TRACE(u_.tracer, Requester, Nak, qp.qpc.qpn, TraceFields().set_psn(psn).set_status(syn),
                   "RNR NAK psn=%u: retry in %.2f us (%u left)", psn, double(wait) / 1e6,
                   unsigned(qp.rnr_left));
      rewind(qp, psn);
      ack_timer_.cancel(qp.qpc.qpn);  // re-armed when the retry goes out
      qp.rnr_wait_until = now_ps() + wait;
      schedule(qp, Stage::Tx, qp.rnr_wait_until);
      return;
    }
    case wire::AethKind::Nak: return on_nak(qp, psn, syn);
    default: return;
  }
}

void Requester::on_nak(QpContext& qp, uint32_t psn, uint8_t syn) {
  const auto code = wire::aeth_nak_code(syn);
  HCASIM_TRACE(u_.tracer, Requester, Nak, qp.qpc.qpn, TraceFields().set_psn(psn).set_status(syn),
               "NAK %s psn=%u", wire::nak_code_name(code), psn);
  complete_through(qp, wire::psn_add(psn, -1));
  switch (code) {
    case wire::NakCode::PsnSequenceError:
      rewind(qp, psn);
      if (now_ps() < qp.rnr_wait_until) {  // the job at the end of the RNR wait resends
        HCASIM_TRACE(u_.tracer, Requester, Note, qp.qpc.qpn, TraceFields().set_psn(psn),
                     "go back to psn=%u after the RNR wait (%.2f us left)", psn,
                     double(qp.rnr_wait_until - now_ps()) / 1e6);
        return;
      }
      schedule(qp, Stage::Tx, now_ps());
      return;
    case wire::NakCode::InvalidRequest:
      qp.tx_msg = 0;
      return fail_front(qp, hw::CqeSyndrome::RemoteInvalReqErr, "remote invalid request");
    case wire::NakCode::RemoteAccessError:
      qp.tx_msg = 0;
      return fail_front(qp, hw::CqeSyndrome::RemoteAccessErr, "remote access error");
    default: qp.tx_msg = 0; return fail_front(qp, hw::CqeSyndrome::RemoteOpErr, "remote operational error");
  }
}

bool Requester::scatter(QpContext& qp, const InflightMsg& m, uint32_t offset, const uint8_t* src,
                        uint32_t len) {
  uint32_t left = 0;
  return walk_sges(m.w.sge, m.w.nsge, offset, len, left, [&](const Sge& s, uint64_t va, uint32_t n) {
    if (u_.mrs.write(s.lkey, va, src, n, qp.qpc.qpn) < 0) return false;
    src += n;
    return true;
  });
}

void Requester::on_read_response(QpContext& qp, const wire::ParsedFrame& f) {
  const auto op = f.h.opcode;
  const uint32_t psn = f.h.psn;
  // The READ a response answers is the one whose PSN range holds its PSN (a zero-length READ
  // has one response PSN and nothing to count in read_bytes, so "unfinished" cannot be told
  // from read_bytes alone). A READ leaves inflight as soon as its last response landed.
  for (size_t i = 0; i < qp.inflight.size() && i < qp.tx_msg; ++i) {
    InflightMsg& m = qp.inflight[i];
    if (m.w.op != hw::WqeOpcode::RdmaRead) continue;
    const int32_t d = wire::psn_diff(psn, m.first_psn);
    if (d < 0 || d >= int32_t(m.npkts)) continue;
    // A duplicate of a READ already answered: it was answered ahead of an earlier READ or atomic
    // whose response was lost, and the go-back-N that recovered that one resent this one too.
    // The replay acknowledges it again, so it can complete now (dropping it left it incomplete
    // until the retries ran out).
    if (m.responded) return complete_through(qp, last_psn(m));
    const uint32_t mtu = mtu_of(qp);
    const uint32_t expect = wire::psn_add(m.first_psn, m.read_bytes / mtu);
    if (psn != expect) return;  // duplicate or out of order: go-back-N will resend
    if (wire::starts_message(op)) complete_through(qp, wire::psn_add(m.first_psn, -1));
    if (!scatter(qp, m, m.read_bytes, f.payload, uint32_t(f.payload_len)))
      return fail_front(qp, hw::CqeSyndrome::LocalProtErr, "READ scatter fault");
    m.read_bytes += uint32_t(f.payload_len);
    // Every response in order is progress: the retries left start again, as in rxe
    // (check_ack resets its retry counters on each READ response). A long READ over a lossy
    // wire would otherwise run out of retries while it keeps making progress.
    qp.retry_left = qp.qpc.retry_cnt;
    if (wire::ends_message(op)) {
      m.read_bytes = m.w.length;
      m.responded = true;  // also marks zero-length READs done
      complete_through(qp, psn);
      schedule(qp, Stage::Tx, now_ps());
    } else {
      restart_timer(qp);  // progress
    }
    return;
  }
}

void Requester::on_atomic_ack(QpContext& qp, const wire::Headers& h) {
  const uint32_t psn = h.psn;
  for (size_t i = 0; i < qp.inflight.size() && i < qp.tx_msg; ++i) {
    InflightMsg& m = qp.inflight[i];
    if (!is_atomic(m.w.op) || m.first_psn != psn) continue;
    if (m.responded) return complete_through(qp, psn);  // a replay: as for a READ's (above)
    complete_through(qp, wire::psn_add(psn, -1));
    // The original remote value lands in the local buffer in host order (as rxe does).
    const uint64_t orig = h.atomic_ack_eth.orig_data;
    const Sge& s = m.w.sge[0];
    if (u_.mrs.write(s.lkey, s.addr, &orig, 8, qp.qpc.qpn) < 0)
      return fail_front(qp, hw::CqeSyndrome::LocalProtErr, "atomic result scatter fault");
    HCASIM_TRACE(u_.tracer, Requester, Ack, qp.qpc.qpn, TraceFields().set_psn(psn).set_wqe(m.w.index),
                 "ATOMIC ACK psn=%u original=0x%llx", psn, static_cast<unsigned long long>(orig));
    m.responded = true;
    complete_through(qp, psn);
    schedule(qp, Stage::Tx, now_ps());
    return;
  }
}

}  // namespace hcasim::model
