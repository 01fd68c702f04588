// SPDX-License-Identifier: Apache-2.0
#include "responder.h"

#include "strprintf.h"

#include <cinttypes>
#include <cstring>

namespace hcasim::model {

void Responder::send_ack(QpContext& qp, uint32_t psn, uint8_t syndrome) {
  wire::Headers h;
  if (!u_.frames.headers_for(qp, wire::BthOpcode::ACKNOWLEDGE, psn, h)) return;
  h.aeth.syndrome = syndrome;
  h.aeth.msn = qp.msn & wire::kMsnMask;
  switch (wire::aeth_kind(syndrome)) {
    case wire::AethKind::Ack: ++acks_; break;
    case wire::AethKind::RnrNak: ++rnr_naks_; break;
    default: ++naks_; break;
  }
  // The request went through the receive pipeline already (Hca::on_rx): the ACK goes out now.
  u_.frames.send_frame(h, nullptr, 0, stream_ready(qp, true, now_ps()));
}

bool Responder::take_recv(QpContext& qp) {
  if (qp.recv.active) return true;
  // An XRC receive QP takes from the XRC SRQ its request names (xrc_target checked it).
  const uint32_t srqn = hw::QpType(qp.qpc.type) == hw::QpType::XrcRecv ? qp.xrc_srqn : qp.qpc.srqn;
  if (srqn != hw::kNoSrq) return take_srq_recv(qp, srqn);
  const uint32_t qpn = qp.qpc.qpn;
  if (qp.rq_ci == qp.rq_pi_seen) {
    // Nothing known to be posted: look at the doorbell record the driver updates.
    if (!u_.fetch.recv_producer(qp.qpc.dbrec_addr, qpn, qp.rq_pi_seen)) return false;
    if (qp.rq_ci == qp.rq_pi_seen) return false;
  }
  RecvInProgress r;
  if (!u_.fetch.fetch_recv(recv_queue(qp), qp.rq_ci, r.sge, r.nsge)) return false;
  r.active = true;
  r.pdn = qp.qpc.pdn;
  r.index = qp.rq_ci;
  qp.recv = r;
  ++qp.rq_ci;
  ++recv_wqes_;
  HCASIM_TRACE(u_.tracer, WqeFetch, WqeFetch, qpn,
               TraceFields().set_wqe(r.index).set_count(r.nsge).set_flag(kTfRq), "RQ WQE %u: %u SGE(s)",
               r.index, r.nsge);
  return true;
}

bool Responder::take_srq_recv(QpContext& qp, uint32_t srqn) {
  const uint32_t qpn = qp.qpc.qpn;
  SrqContext* srq = u_.srqs.find(srqn);
  if (!srq) return false;
  if (srq->ci == srq->pi_seen) {
    if (!u_.fetch.recv_producer(srq->srqc.dbrec_addr, qpn, srq->pi_seen, "srq.dbrec")) return false;
    if (srq->ci == srq->pi_seen) return false;
  }
  RecvInProgress r;
  if (!u_.fetch.fetch_recv(srq_queue(*srq, qpn), srq->ci, r.sge, r.nsge)) return false;
  r.active = true;
  r.srq = true;
  r.srqn = srqn;
  r.cqn = srq->srqc.xrcdn ? srq->srqc.cqn : 0;
  r.pdn = srq->srqc.pdn;
  r.index = srq->ci;
  qp.recv = r;
  ++srq->ci;
  ++recv_wqes_;
  HCASIM_TRACE(u_.tracer, WqeFetch, WqeFetch, qpn,
               TraceFields()
                   .set_wqe(r.index)
                   .set_count(r.nsge)
                   .set_queue(srq->srqc.srqn)
                   .set_flag(kTfRq)
                   .set_flag(kTfSrq),
               "SRQ 0x%x WQE %u: %u SGE(s)", srq->srqc.srqn, r.index, r.nsge);
  check_srq_limit(*srq, qpn);
  return true;
}

void Responder::check_srq_limit(SrqContext& srq, uint32_t qpn) {
  if (srq.srqc.limit == 0) return;
  // Count against what is posted now, not what was last read.
  if (!u_.fetch.recv_producer(srq.srqc.dbrec_addr, qpn, srq.pi_seen, "srq.dbrec")) return;
  const uint32_t left = uint16_t(srq.pi_seen - srq.ci);
  if (left >= srq.srqc.limit) return;
  HCASIM_TRACE(u_.tracer, Responder, Note, qpn, TraceFields().set_queue(srq.srqc.srqn).set_count(left),
               "SRQ 0x%x: %u WQE(s) left, below its limit %u: limit event, limit disarmed", srq.srqc.srqn,
               left, srq.srqc.limit);
  srq.srqc.limit = 0;  // ibv_modify_srq(3): the limit fires once, then must be armed again
  u_.eq.post(srq.srqc.eqn, hw::EqeType::SrqLimit, srq.srqc.srqn);
}

bool Responder::place(QpContext& qp, uint32_t offset, const uint8_t* src, uint32_t len, uint32_t& left) {
  const uint32_t qpn = qp.qpc.qpn;
  RecvInProgress& r = qp.recv;
  return walk_sges(r.sge, r.nsge, offset, len, left, [&](const Sge& s, uint64_t va, uint32_t n) {
    if (u_.mrs.check(s.lkey, r.pdn, va, n, hw::kAccessLocalWrite, qpn, "recv lkey") != MrCheck::Ok ||
        u_.mrs.write(s.lkey, va, src, n, qpn) < 0)
      return false;
    src += n;
    return true;
  });
}

void Responder::completion(QpContext& qp, hw::CqeOpcode op, uint32_t len, const wire::Headers& h,
                           uint32_t src_qp, uint8_t flags) {
  CqeInfo ci;
  ci.opcode = op;
  ci.qpn = qp.qpc.qpn;
  ci.src_qp = src_qp;
  ci.wqe_counter = qp.recv.index;
  ci.byte_cnt = len;
  ci.flags = uint8_t(flags | (qp.recv.srq ? hw::kCqeSrq : 0));
  ci.srqn = qp.recv.srqn;
  if (wire::has_imm(h.opcode)) {
    ci.imm = h.imm_data;
    ci.flags |= hw::kCqeWithImm;
  }
  if (wire::has_ieth(h.opcode)) ci.imm = h.ieth_rkey;  // the invalidated rkey (host order)
  if (h.se) ci.flags |= hw::kCqeSolicited;
  qp.recv.active = false;
  u_.cq.post(recv_cqn(qp), ci);
}

void Responder::recv_error(QpContext& qp, hw::CqeSyndrome status) {
  if (!qp.recv.active) return;
  CqeInfo ci;
  ci.opcode = hw::CqeOpcode::RespErr;
  ci.syndrome = status;
  ci.qpn = qp.qpc.qpn;
  ci.wqe_counter = qp.recv.index;
  ci.flags = qp.recv.srq ? hw::kCqeSrq : 0;
  ci.srqn = qp.recv.srqn;
  qp.recv.active = false;
  u_.cq.post(recv_cqn(qp), ci);
}

std::string Responder::remote_access_refusal(QpContext& qp, uint32_t rkey, uint64_t va, uint64_t len,
                                             uint32_t access, wire::NakCode& nak) {
  const char* op = access == hw::kAccessRemoteWrite  ? "RDMA WRITE"
                   : access == hw::kAccessRemoteRead ? "RDMA READ"
                                                     : "atomic";
  const char* flag = access == hw::kAccessRemoteWrite  ? "IBV_ACCESS_REMOTE_WRITE"
                     : access == hw::kAccessRemoteRead ? "IBV_ACCESS_REMOTE_READ"
                                                       : "IBV_ACCESS_REMOTE_ATOMIC";
  // The QP's own remote access enables are checked before any key is looked at: an operation
  // the QP does not enable is an invalid request, not a key violation.
  nak = wire::NakCode::InvalidRequest;
  if (!(qp.qpc.access_flags & access))
    return strprintf("QP access check failed: %s refused, the QP's qp_access_flags lack %s", op, flag);
  nak = wire::NakCode::RemoteAccessError;
  const MrCheck c = u_.mrs.check(rkey, request_pdn(qp), va, len, access, qp.qpc.qpn, "rkey");
  if (c == MrCheck::Ok) return {};
  if (c == MrCheck::NoAccess)
    return strprintf("rkey check failed: %s refused, rkey 0x%x's memory was registered without %s", op, rkey,
                     flag);
  return strprintf("rkey check failed: %s refused, rkey 0x%x: %s", op, rkey, mr_check_name(c));
}

void Responder::fatal(QpContext& qp, uint32_t psn, wire::NakCode nak, hw::CqeSyndrome recv_status,
                      const char* why) {
  HCASIM_TRACE(u_.tracer, Responder, Error, qp.qpc.qpn,
               TraceFields().set_psn(psn).set_status(wire::aeth_nak(nak)).set_flag(kTfError),
               "%s: NAK %s psn=%u, QP to ERR", why, wire::nak_code_name(nak), psn);
  send_ack(qp, psn, wire::aeth_nak(nak));
  if (recv_status != hw::CqeSyndrome::Ok) recv_error(qp, recv_status);
  to_error_(qp, why);
}

void Responder::flush(QpContext& qp) {
  recv_error(qp, hw::CqeSyndrome::WrFlushErr);
  if (hw::QpType(qp.qpc.type) == hw::QpType::XrcRecv) return;  // no queues of its own
  if (qp.qpc.srqn != hw::kNoSrq) {
    // The SRQ's WQEs belong to every QP attached to it: none is flushed. IBTA 10.3.1 / 11.6.3:
    // this QP will take no more of them, which its owner learns from the last-WQE-reached event.
    if (!qp.last_wqe_reached) {
      qp.last_wqe_reached = true;
      HCASIM_TRACE(u_.tracer, Responder, Note, qp.qpc.qpn, TraceFields().set_queue(qp.qpc.srqn),
                   "QP in ERR takes no more WQEs from SRQ 0x%x: last WQE reached", qp.qpc.srqn);
      u_.eq.post(u_.cq.eqn_of(qp.qpc.recv_cqn), hw::EqeType::SrqLastWqe, qp.qpc.qpn);
    }
    return;
  }
  u_.fetch.recv_producer(qp.qpc.dbrec_addr, qp.qpc.qpn, qp.rq_pi_seen);
  while (qp.rq_ci != qp.rq_pi_seen) {
    CqeInfo ci;
    ci.opcode = hw::CqeOpcode::RespErr;
    ci.syndrome = hw::CqeSyndrome::WrFlushErr;
    ci.qpn = qp.qpc.qpn;
    ci.wqe_counter = qp.rq_ci++;
    u_.cq.post(qp.qpc.recv_cqn, ci);
  }
}

void Responder::read_response(QpContext& qp, uint32_t psn, const wire::Reth& reth) {
  const uint32_t mtu = mtu_of(qp);
  const wire::SegmentPlan plan = wire::plan_segments(wire::MessageKind::ReadResponse, reth.dma_len, mtu);
  uint64_t ready = now_ps() + u_.prof.pcie_read_ps;
  for (uint32_t i = 0; i < plan.num_packets; ++i) {
    const wire::Segment s = plan.segment(i);
    wire::Headers h;
    if (!u_.frames.headers_for(qp, s.opcode, wire::psn_add(psn, i), h)) return;
    h.aeth.syndrome = wire::aeth_ack(wire::kAethCreditInvalid);
    h.aeth.msn = qp.msn & wire::kMsnMask;
    PacketPtr pkt = make_packet();
    uint8_t* slot = pkt->data + wire::header_length(h);
    if (s.length && u_.mrs.read(reth.rkey, reth.va + s.offset, slot, s.length, qp.qpc.qpn) < 0) return;
    pkt->len = uint32_t(wire::build_frame(h, slot, s.length, pkt->data, sizeof pkt->data));
    ready += u_.prof.pcie_xfer_ps(s.length);
    u_.port.transmit(std::move(pkt), stream_ready(qp, true, ready));
  }
}

void Responder::on_request(QpContext& qp, const wire::ParsedFrame& f) {
  const auto st = hw::QpState(qp.qpc.state);
  const uint32_t qpn = qp.qpc.qpn;
  if (st != hw::QpState::Rtr && st != hw::QpState::Rts && st != hw::QpState::Sqd) {
    HCASIM_TRACE(u_.tracer, Responder, Error, qpn,
                 TraceFields().set_psn(f.h.psn).set_opcode(uint16_t(f.h.opcode)).set_flag(kTfError),
                 "packet dropped: QP state %u", unsigned(st));
    return;
  }
  const wire::Headers& h = f.h;
  const auto op = wire::rc_equivalent(h.opcode);  // UC's and XRC's requests are RC's
  const auto type = hw::QpType(qp.qpc.type);
  if (hw::is_datagram(type)) return on_ud_request(qp, f);
  if (type == hw::QpType::XrcRecv && !xrc_target(qp, h)) return;
  // (An XRC receive QP has no CQ, hence no event queue, to report it on.)
  if (st == hw::QpState::Rtr && !qp.comm_est && type != hw::QpType::XrcRecv) {
    // IBTA 11.6.3: the first packet received in RTR establishes communication.
    qp.comm_est = true;
    u_.eq.post(u_.cq.eqn_of(qp.qpc.recv_cqn), hw::EqeType::CommEstablished, qpn);
  }
  if (hw::QpType(qp.qpc.type) == hw::QpType::Uc) return on_uc_request(qp, f);
  const int32_t d = wire::psn_diff(h.psn, qp.epsn);
  if (d < 0) return on_duplicate(qp, h);
  if (d > 0) {  // a gap: NAK once, then drop until the requester goes back
    if (!qp.nak_pending) {
      qp.nak_pending = true;
      HCASIM_TRACE(u_.tracer, Responder, Nak, qpn,
                   TraceFields().set_psn(h.psn).set_status(wire::aeth_nak(wire::NakCode::PsnSequenceError)),
                   "PSN gap: got %u expected %u", h.psn, qp.epsn);
      send_ack(qp, qp.epsn, wire::aeth_nak(wire::NakCode::PsnSequenceError));
    }
    return;
  }
  qp.nak_pending = false;
  if (op <= wire::BthOpcode::SEND_ONLY_WITH_IMMEDIATE || wire::has_ieth(op)) return on_send(qp, f);
  if (op >= wire::BthOpcode::RDMA_WRITE_FIRST && op <= wire::BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE)
    return on_write(qp, f);
  if (op == wire::BthOpcode::RDMA_READ_REQUEST) return on_read(qp, h);
  if (wire::has_atomic_eth(op)) return atomic(qp, h);
  fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::Ok, "unsupported opcode");
}

void Responder::on_duplicate(QpContext& qp, const wire::Headers& h) {
  // The ACK was lost; acknowledge again (READs are replayed).
  ++dups_;
  HCASIM_TRACE(u_.tracer, Responder, Ack, qp.qpc.qpn, TraceFields().set_psn(h.psn),
               "duplicate psn=%u (expected %u)", h.psn, qp.epsn);
  if (wire::rc_equivalent(h.opcode) == wire::BthOpcode::RDMA_READ_REQUEST) {
    read_response(qp, h.psn, h.reth);
  } else if (wire::has_atomic_eth(h.opcode)) {  // answered again from the replay cache, never re-executed
    for (const auto& r : qp.atomic_replay)
      if (r.valid && r.psn == h.psn) return atomic_ack(qp, h.psn, r.orig);
  } else {
    send_ack(qp, wire::psn_add(qp.epsn, -1), wire::aeth_ack(wire::kAethCreditInvalid));
  }
}

void Responder::rnr_nak(QpContext& qp, uint32_t psn, const char* why) {
  HCASIM_TRACE(u_.tracer, Responder, Nak, qp.qpc.qpn,
               TraceFields().set_psn(psn).set_status(wire::aeth_rnr_nak(qp.qpc.min_rnr_timer)),
               "%s: RNR NAK psn=%u", why, psn);
  send_ack(qp, psn, wire::aeth_rnr_nak(qp.qpc.min_rnr_timer));
}

void Responder::on_send(QpContext& qp, const wire::ParsedFrame& f) {
  const wire::Headers& h = f.h;
  const auto op = h.opcode;
  const bool ends = wire::ends_message(op);
  const uint32_t len = uint32_t(f.payload_len);
  if (wire::starts_message(op) && !take_recv(qp)) return rnr_nak(qp, h.psn, "no receive WQE posted");
  if (!qp.recv.active)
    return fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::Ok,
                 "SEND middle/last without first");
  RecvInProgress& r = qp.recv;
  uint32_t left = 0;
  const bool ok = place(qp, r.offset, f.payload, len, left);
  if (!ok)
    return fatal(qp, h.psn, wire::NakCode::RemoteOperationalError, hw::CqeSyndrome::LocalProtErr,
                 "receive buffer protection error");
  if (left)
    return fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::LocalLengthErr,
                 "message longer than the receive WQE");
  r.offset += len;
  if (wire::has_ieth(op) && !remote_invalidate(qp, h)) return;
  qp.epsn = wire::psn_add(qp.epsn, 1);
  if (ends) {
    ++qp.msn;
    completion(qp, wire::has_imm(op) ? hw::CqeOpcode::RespSendImm : hw::CqeOpcode::RespSend, r.offset, h,
               qp.qpc.dest_qpn, wire::has_ieth(op) ? hw::kCqeWithInv : 0);
  }
  if (h.ackreq || ends) send_ack(qp, h.psn, wire::aeth_ack(wire::kAethCreditInvalid));
}

uint32_t Responder::request_pdn(const QpContext& qp) const {
  return hw::QpType(qp.qpc.type) == hw::QpType::XrcRecv ? qp.xrc_pdn : qp.qpc.pdn;
}

uint32_t Responder::recv_cqn(const QpContext& qp) const {
  return qp.recv.cqn ? qp.recv.cqn : qp.qpc.recv_cqn;
}

bool Responder::xrc_target(QpContext& qp, const wire::Headers& h) {
  SrqContext* srq = u_.srqs.find(h.xrc_srqn);
  if (!srq || srq->srqc.xrcdn == 0 || srq->srqc.xrcdn != qp.qpc.xrcdn) {
    fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::Ok,
          "XRCETH names no XRC SRQ of this QP's XRC domain");
    return false;
  }
  // IBTA 9.2.x (XRC): the request is executed in the context of the XRC SRQ it names: its
  // receive WQEs, and its PD for every key check.
  qp.xrc_srqn = h.xrc_srqn;
  qp.xrc_pdn = srq->srqc.pdn;
  return true;
}

bool Responder::remote_invalidate(QpContext& qp, const wire::Headers& h) {
  const MwOp r = u_.mrs.invalidate(h.ieth_rkey, request_pdn(qp), qp.qpc.qpn);
  HCASIM_TRACE(u_.tracer, Responder, Note, qp.qpc.qpn,
               TraceFields().set_psn(h.psn).set_key(h.ieth_rkey).set_flag(kTfError, r != MwOp::Ok),
               "SEND with invalidate: window 0x%x -> %s", h.ieth_rkey, mw_op_name(r));
  if (r == MwOp::Ok) return true;
  // rxe's class J: the receive completes with a remote invalid request error, the QP goes to ERR.
  fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::RemoteInvalReqErr,
        "SEND with invalidate of a window that cannot be invalidated");
  return false;
}

void Responder::on_write(QpContext& qp, const wire::ParsedFrame& f) {
  const wire::Headers& h = f.h;
  const auto op = h.opcode;
  const uint32_t len = uint32_t(f.payload_len), qpn = qp.qpc.qpn;
  const bool ends = wire::ends_message(op);
  if (wire::starts_message(op)) {
    wire::NakCode nak;
    const std::string refused =
        remote_access_refusal(qp, h.reth.rkey, h.reth.va, h.reth.dma_len, hw::kAccessRemoteWrite, nak);
    if (!refused.empty()) return fatal(qp, h.psn, nak, hw::CqeSyndrome::Ok, refused.c_str());
    qp.write_active = true;
    qp.write_va = h.reth.va;
    qp.write_rkey = h.reth.rkey;
    qp.write_len = h.reth.dma_len;
    qp.write_done = 0;
  }
  if (!qp.write_active || uint64_t(qp.write_done) + len > qp.write_len)
    return fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::Ok, "WRITE length mismatch");
  if (ends && wire::has_imm(op) && !take_recv(qp))
    return rnr_nak(qp, h.psn, "WRITE_WITH_IMM needs a receive WQE");
  if (len && u_.mrs.write(qp.write_rkey, qp.write_va + qp.write_done, f.payload, len, qpn) < 0)
    return fatal(qp, h.psn, wire::NakCode::RemoteAccessError, hw::CqeSyndrome::Ok, "DMA fault");
  qp.write_done += len;
  qp.epsn = wire::psn_add(qp.epsn, 1);
  if (ends) {
    if (qp.write_done != qp.write_len)
      return fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::Ok, "WRITE shorter than RETH");
    qp.write_active = false;
    ++qp.msn;
    if (wire::has_imm(op)) completion(qp, hw::CqeOpcode::RespWriteImm, qp.write_len, h, qp.qpc.dest_qpn);
  }
  if (h.ackreq || ends) send_ack(qp, h.psn, wire::aeth_ack(wire::kAethCreditInvalid));
}

void Responder::on_read(QpContext& qp, const wire::Headers& h) {
  wire::NakCode nak;
  const std::string refused =
      remote_access_refusal(qp, h.reth.rkey, h.reth.va, h.reth.dma_len, hw::kAccessRemoteRead, nak);
  if (!refused.empty()) return fatal(qp, h.psn, nak, hw::CqeSyndrome::Ok, refused.c_str());
  ++qp.msn;
  read_response(qp, h.psn, h.reth);
  const uint32_t n =
      wire::plan_segments(wire::MessageKind::ReadResponse, h.reth.dma_len, mtu_of(qp)).num_packets;
  qp.epsn = wire::psn_add(qp.epsn, n);
}

void Responder::atomic_ack(QpContext& qp, uint32_t psn, uint64_t orig) {
  wire::Headers a;
  if (!u_.frames.headers_for(qp, wire::BthOpcode::ATOMIC_ACKNOWLEDGE, psn, a)) return;
  a.aeth.syndrome = wire::aeth_ack(wire::kAethCreditInvalid);
  a.aeth.msn = qp.msn & wire::kMsnMask;
  a.atomic_ack_eth.orig_data = orig;
  ++acks_;
  u_.frames.send_frame(a, nullptr, 0, stream_ready(qp, true, now_ps() + u_.prof.pcie_read_ps));
}

void Responder::atomic(QpContext& qp, const wire::Headers& h) {
  const uint32_t qpn = qp.qpc.qpn;
  const auto& ae = h.atomic_eth;
  // IBTA o9-23: 8-byte aligned, else an invalid request.
  if (ae.va % 8)
    return fatal(qp, h.psn, wire::NakCode::InvalidRequest, hw::CqeSyndrome::Ok, "misaligned atomic");
  wire::NakCode nak;
  const std::string refused = remote_access_refusal(qp, ae.rkey, ae.va, 8, hw::kAccessRemoteAtomic, nak);
  if (!refused.empty()) return fatal(qp, h.psn, nak, hw::CqeSyndrome::Ok, refused.c_str());
  // Read-modify-write in the responder's host byte order (rxe's behaviour; docs/conformance.md).
  // The model runs under one lock, so no other device access interleaves.
  uint64_t orig = 0;
  if (u_.mrs.read(ae.rkey, ae.va, &orig, 8, qpn) < 0)
    return fatal(qp, h.psn, wire::NakCode::RemoteAccessError, hw::CqeSyndrome::Ok, "atomic DMA fault");
  uint64_t next = orig;
  if (wire::rc_equivalent(h.opcode) == wire::BthOpcode::COMPARE_SWAP) {
    if (orig == ae.compare) next = ae.swap_add;
  } else {
    next = orig + ae.swap_add;
  }
  if (next != orig && u_.mrs.write(ae.rkey, ae.va, &next, 8, qpn) < 0)
    return fatal(qp, h.psn, wire::NakCode::RemoteAccessError, hw::CqeSyndrome::Ok, "atomic DMA fault");
  HCASIM_TRACE(u_.tracer, Responder, Note, qpn,
               TraceFields().set_psn(h.psn).set_opcode(uint16_t(h.opcode)).set_key(ae.rkey).set_addr(ae.va),
               "%s va=0x%llx: 0x%llx -> 0x%llx", wire::opcode_name(h.opcode),
               static_cast<unsigned long long>(ae.va), static_cast<unsigned long long>(orig),
               static_cast<unsigned long long>(next));
  auto& slot = qp.atomic_replay[qp.atomic_replay_next++ % 16];
  slot = {h.psn, orig, true};
  qp.epsn = wire::psn_add(qp.epsn, 1);
  ++qp.msn;
  atomic_ack(qp, h.psn, orig);
}

}  // namespace hcasim::model
