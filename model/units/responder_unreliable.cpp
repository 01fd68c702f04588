// SPDX-License-Identifier: Apache-2.0
// The responder's unreliable transports. UC and UD never acknowledge: what cannot be received
// is dropped and counted, and the sender never learns of it (IBTA 9.7.6.1, 9.8; rxe does the
// same). A UC message that loses a packet is lost whole; the next message starts afresh.
#include <cstring>

#include "ib_mad.h"
#include "responder.h"

namespace hcasim::model {
namespace {

/**
 * The 40 bytes a UD receive buffer starts with (IBTA 11.4.1.1, RoCE v2 as rxe and mlx5 give
 * it): the IPv6 header as received, or 20 unused bytes then the IPv4 header as received.
 */
void network_header(const wire::ParsedFrame& f, uint8_t out[wire::kGrhLen]) {
  std::memset(out, 0, wire::kGrhLen);
  const uint8_t* ip = f.frame + wire::kEthHeaderLen;
  if (f.h.ipv6)
    std::memcpy(out, ip, wire::kIpv6HeaderLen);
  else
    std::memcpy(out + wire::kGrhLen - wire::kIpv4HeaderLen, ip, wire::kIpv4HeaderLen);
}

}  // namespace

void Responder::ud_drop(QpContext& qp, const wire::Headers& h, const char* why) {
  ++unreliable_drops_;
  HCASIM_TRACE(u_.tracer, Responder, Error, qp.qpc.qpn,
               TraceFields().set_psn(h.psn).set_opcode(uint16_t(h.opcode)).set_peer_qpn(h.deth.src_qp),
               "UD packet from qp 0x%x dropped: %s", h.deth.src_qp, why);
}

void Responder::on_ud_request(QpContext& qp, const wire::ParsedFrame& f) {
  const wire::Headers& h = f.h;
  if (h.deth.qkey != qp.qpc.qkey) {
    ++qkey_violations_;
    return ud_drop(qp, h, "Q_Key mismatch");
  }
  if (!take_recv(qp)) return ud_drop(qp, h, "no receive WQE posted");
  if (hw::QpType(qp.qpc.type) == hw::QpType::Gsi) note_mad(qp, f);
  HCASIM_TRACE(u_.tracer, Responder, Note, qp.qpc.qpn,
               TraceFields().set_psn(h.psn).set_peer_qpn(h.deth.src_qp).set_wqe(qp.recv.index),
               "%s from qp 0x%x, Q_Key 0x%x matches: 40-byte network header, then %zu B, into %s WQE %u",
               wire::opcode_name(h.opcode), h.deth.src_qp, h.deth.qkey, f.payload_len,
               qp.recv.srq ? "SRQ" : "RQ", qp.recv.index);
  uint8_t grh[wire::kGrhLen];
  network_header(f, grh);
  const uint32_t len = uint32_t(f.payload_len);
  uint32_t left = 0, left2 = 0;
  if (!place(qp, 0, grh, wire::kGrhLen, left) || !place(qp, wire::kGrhLen, f.payload, len, left2)) {
    ud_drop(qp, h, "receive buffer protection error");
    return recv_error(qp, hw::CqeSyndrome::LocalProtErr);
  }
  if (left || left2) {
    // The WQE completes in error; a UD QP keeps working (mlx5 does this; rxe drops silently).
    ud_drop(qp, h, "receive WQE shorter than 40 + message bytes");
    return recv_error(qp, hw::CqeSyndrome::LocalLengthErr);
  }
  completion(qp, wire::has_imm(h.opcode) ? hw::CqeOpcode::RespSendImm : hw::CqeOpcode::RespSend,
             wire::kGrhLen + len, h, h.deth.src_qp, hw::kCqeGrh);
}

void Responder::note_mad(QpContext& qp, const wire::ParsedFrame& f) {
  // The GSI QP's payload is a management datagram: name it (a CM REQ, REP, ...) for the reader.
  if (!u_.tracer.on() || !u_.tracer.wants(trace::TraceUnit::Responder, trace::TraceKind::Note)) return;
  char what[192];
  wire::mad::describe(f.payload, f.payload_len, what, sizeof what);
  HCASIM_TRACE(u_.tracer, Responder, Note, qp.qpc.qpn, TraceFields().set_peer_qpn(f.h.deth.src_qp),
               "GSI QP receives a MAD: %s", what);
}

void Responder::uc_drop(QpContext& qp, const wire::Headers& h, const char* why) {
  ++unreliable_drops_;
  qp.uc_dropping = !wire::ends_message(h.opcode);
  qp.epsn = wire::psn_add(h.psn, 1);
  qp.write_active = false;
  // rxe's class D1: a receive WQE partly filled by the lost message is used again from its
  // start; on a shared receive queue it cannot be handed back, so it completes in error.
  if (qp.recv.active && qp.recv.srq)
    recv_error(qp, hw::CqeSyndrome::RemoteInvalReqErr);
  else
    qp.recv.offset = 0;
  HCASIM_TRACE(u_.tracer, Responder, Error, qp.qpc.qpn,
               TraceFields().set_psn(h.psn).set_opcode(uint16_t(h.opcode)).set_flag(kTfError),
               "UC message dropped at psn=%u: %s", h.psn, why);
}

void Responder::on_uc_request(QpContext& qp, const wire::ParsedFrame& f) {
  const wire::Headers& h = f.h;
  if (qp.uc_dropping || h.psn != qp.epsn) {
    if (!wire::starts_message(h.opcode)) {
      if (qp.uc_dropping) {  // the rest of a message already lost
        ++unreliable_drops_;
        qp.epsn = wire::psn_add(h.psn, 1);
        qp.uc_dropping = !wire::ends_message(h.opcode);
        return;
      }
      return uc_drop(qp, h, "PSN gap inside a message");
    }
    if (h.psn != qp.epsn)
      HCASIM_TRACE(u_.tracer, Responder, Note, qp.qpc.qpn, TraceFields().set_psn(h.psn),
                   "UC: new message at psn=%u (expected %u): packets between were lost", h.psn, qp.epsn);
    qp.uc_dropping = false;
    qp.write_active = false;
    if (qp.recv.active && qp.recv.offset) qp.recv.offset = 0;  // the partial message is lost
    qp.epsn = h.psn;
  }
  const auto rc_op = wire::rc_equivalent(h.opcode);
  if (rc_op <= wire::BthOpcode::SEND_ONLY_WITH_IMMEDIATE) return uc_send(qp, f);
  uc_write(qp, f);
}

void Responder::uc_send(QpContext& qp, const wire::ParsedFrame& f) {
  const wire::Headers& h = f.h;
  const uint32_t len = uint32_t(f.payload_len);
  if (wire::starts_message(h.opcode) && !take_recv(qp)) return uc_drop(qp, h, "no receive WQE posted");
  if (!qp.recv.active) return uc_drop(qp, h, "SEND middle/last without first");
  uint32_t left = 0;
  if (!place(qp, qp.recv.offset, f.payload, len, left))
    return uc_drop(qp, h, "receive buffer protection error");
  if (left) return uc_drop(qp, h, "message longer than the receive WQE");
  qp.recv.offset += len;
  qp.epsn = wire::psn_add(h.psn, 1);
  if (!wire::ends_message(h.opcode)) return;
  ++qp.msn;
  completion(qp, wire::has_imm(h.opcode) ? hw::CqeOpcode::RespSendImm : hw::CqeOpcode::RespSend,
             qp.recv.offset, h, qp.qpc.dest_qpn);
}

void Responder::uc_write(QpContext& qp, const wire::ParsedFrame& f) {
  const wire::Headers& h = f.h;
  const uint32_t len = uint32_t(f.payload_len), qpn = qp.qpc.qpn;
  if (wire::starts_message(h.opcode)) {
    wire::NakCode nak;  // UC answers nothing: the message is dropped either way
    const std::string refused =
        remote_access_refusal(qp, h.reth.rkey, h.reth.va, h.reth.dma_len, hw::kAccessRemoteWrite, nak);
    if (!refused.empty()) return uc_drop(qp, h, refused.c_str());
    qp.write_active = true;
    qp.write_va = h.reth.va;
    qp.write_rkey = h.reth.rkey;
    qp.write_len = h.reth.dma_len;
    qp.write_done = 0;
  }
  if (!qp.write_active || uint64_t(qp.write_done) + len > qp.write_len)
    return uc_drop(qp, h, "WRITE length mismatch");
  const bool ends = wire::ends_message(h.opcode);
  if (ends && wire::has_imm(h.opcode) && !take_recv(qp))
    return uc_drop(qp, h, "WRITE_WITH_IMM needs a receive WQE");
  if (len && u_.mrs.write(qp.write_rkey, qp.write_va + qp.write_done, f.payload, len, qpn) < 0)
    return uc_drop(qp, h, "DMA fault");
  qp.write_done += len;
  qp.epsn = wire::psn_add(h.psn, 1);
  if (!ends) return;
  if (qp.write_done != qp.write_len) return uc_drop(qp, h, "WRITE shorter than RETH");
  qp.write_active = false;
  ++qp.msn;
  if (wire::has_imm(h.opcode)) completion(qp, hw::CqeOpcode::RespWriteImm, qp.write_len, h, qp.qpc.dest_qpn);
}

}  // namespace hcasim::model
