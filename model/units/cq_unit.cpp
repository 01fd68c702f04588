// SPDX-License-Identifier: Apache-2.0
#include "cq_unit.h"

#include <cinttypes>

namespace hcasim::model {

static const char* cqe_opcode_name(hw::CqeOpcode op) {
  switch (op) {
    case hw::CqeOpcode::Req: return "REQ";
    case hw::CqeOpcode::RespWriteImm: return "RESP_WRITE_IMM";
    case hw::CqeOpcode::RespSend: return "RESP_SEND";
    case hw::CqeOpcode::RespSendImm: return "RESP_SEND_IMM";
    case hw::CqeOpcode::ReqErr: return "REQ_ERR";
    case hw::CqeOpcode::RespErr: return "RESP_ERR";
    default: return "INVALID";
  }
}

// Typed trace fields (built only when tracing is on).
template <typename CqT>
static TraceFields arm_fields(uint32_t cqn, const CqT& cq, uint32_t ci = kTraceNone, uint16_t extra = 0) {
  TraceFields f;
  f.queue = cqn;
  f.index = ci;
  f.flags = uint16_t(extra | (cq.armed ? kTfArmed : 0) | (cq.armed && cq.solicited_only ? kTfArmSolicited : 0));
  return f;
}

static TraceFields cqe_fields(uint32_t cqn, uint32_t pi_after, const CqeInfo& in) {
  TraceFields f;
  f.queue = cqn;
  f.index = pi_after;
  f.wqe = in.wqe_counter;
  f.opcode = uint16_t(in.opcode);
  f.count = in.byte_cnt;
  const bool recv = in.opcode != hw::CqeOpcode::Req && in.opcode != hw::CqeOpcode::ReqErr;
  f.flags = uint16_t((recv ? kTfRq : 0) | ((in.flags & hw::kCqeSolicited) ? kTfSolicited : 0) |
                     (in.syndrome != hw::CqeSyndrome::Ok ? kTfError : 0));
  return f;
}

CqUnit::CqUnit(DmaEngine& dma, BufferTableWalker& bt, EqUnit& eq, const TimingProfile& prof,
               Tracer& tracer)
    : dma_(dma), bt_(bt), eq_(eq), prof_(prof), tracer_(tracer),
      landing_("cqe", [this](Pending& p) { land(p); }) {}

bool CqUnit::create(const hw::Cqc& cqc) { return cqs_.emplace(cqc.cqn, Cq{cqc, 0, 0, false, false, false, 0, 0, {}}).second; }
bool CqUnit::destroy(uint32_t cqn) { return cqs_.erase(cqn) != 0; }

void CqUnit::arm(uint32_t cqn, uint32_t ci, uint32_t sn, bool solicited_only, uint32_t pi_at_request) {
  auto it = cqs_.find(cqn);
  if (it == cqs_.end()) return;
  Cq& cq = it->second;
  const char* was = !cq.armed ? "disarmed" : cq.solicited_only ? "solicited" : "next";
  if (!cq.armed) {
    cq.armed = true;
    cq.solicited_only = solicited_only;
  } else if (!solicited_only) {
    cq.solicited_only = false;  // "next" upgrades a pending "solicited only"; never the reverse
  }
  cq.ci_seen = ci;
  HCASIM_TRACE(tracer_, Cq, CqArm, 0xffffffff, arm_fields(cqn, cq, ci),
                 "CQ %u arm sn=%u ci=%u request=%s: %s -> %s", cqn, sn, ci, solicited_only ? "solicited" : "next", was,
               cq.solicited_only ? "solicited" : "next");
  // CQEs after the request that no earlier event already reported (an arm that lands while
  // the CQ is still armed from before adds nothing).
  const uint32_t from = int32_t(cq.event_pi - pi_at_request) > 0 ? cq.event_pi : pi_at_request;
  const bool missed = cq.solicited_only ? int32_t(cq.trigger_pi - from) > 0 : cq.pi != from;
  if (!missed) return;
  HCASIM_TRACE(tracer_, Cq, EventDecision, 0xffffffff, arm_fields(cqn, cq, kTraceNone, kTfEvent),
                 "CQ %u EVENT: %u CQE(s) landed after the arm was issued -> EQ %u", cqn, cq.pi - from,
                 cq.cqc.eqn);
  cq.armed = false;
  cq.event_pi = cq.pi;
  ++events_;
  eq_.post(cq.cqc.eqn, hw::EqeType::Completion, cqn);
}

void CqUnit::post(uint32_t cqn, const CqeInfo& info) {
  landing_.push(now_ps() + dma_.write_latency_ps(hw::kCqeSize), Pending{cqn, info});
}

void CqUnit::land(Pending& p) {
  auto it = cqs_.find(p.cqn);
  if (it == cqs_.end()) return;
  Cq& cq = it->second;
  const CqeInfo& in = p.info;
  const uint32_t size = 1u << cq.cqc.log_size;
  if (cq.pi - cq.ci_seen >= size) {
    // Looks full: read the consumer index the driver published in the doorbell record.
    hw::CqDbrec rec{};
    if (dma_.read(cq.cqc.dbrec_addr, &rec, sizeof rec, in.qpn, "cq.dbrec"))
      cq.ci_seen = hw::from_be32(rec.set_ci) & 0xffffff;
    // The doorbell record carries 24 bits; rebuild the full counter near pi.
    cq.ci_seen = (cq.pi & ~0xffffffu) | cq.ci_seen;
    if (cq.ci_seen > cq.pi) cq.ci_seen -= 0x1000000;
    if (cq.pi - cq.ci_seen >= size) {
      ++overflows_;
      HCASIM_TRACE(tracer_, Cq, Error, in.qpn, TraceFields(), "CQ %u overflow: CQE dropped (pi=%u ci=%u size=%u)",
                   p.cqn, cq.pi, cq.ci_seen, size);
      if (!cq.overflowed) {  // report once; the CQ is in error from now on
        cq.overflowed = true;
        eq_.post(cq.cqc.eqn, hw::EqeType::CqError, p.cqn);
        if (on_overflow_) on_overflow_(p.cqn);
      }
      return;
    }
  }
  hw::Cqe c{};
  c.timestamp = hw::to_be64(now_ps() / 1000);
  c.byte_cnt = hw::to_be32(in.byte_cnt);
  c.imm = in.imm;
  c.qpn = hw::to_be32(in.qpn & hw::kQpnMask);
  c.src_qp = hw::to_be32(in.src_qp);
  c.wqe_counter = hw::to_be16(in.wqe_counter);
  c.syndrome = uint8_t(in.syndrome);
  c.flags = in.flags;
  c.req_opcode = uint8_t(in.req_opcode);
  const uint8_t owner = hw::cqe_owner_for(cq.pi, cq.cqc.log_size);
  c.op_own = uint8_t(uint8_t(in.opcode) << 4) | owner;
  const uint32_t index = cq.pi & (size - 1);
  BtResult t = bt_.translate(cq.cqc.buf, uint64_t(index) * hw::kCqeSize, cq.cursor, in.qpn, "cq");
  if (!t.ok) return;
  HCASIM_TRACE(tracer_, Cq, CqeWrite, in.qpn, cqe_fields(p.cqn, cq.pi + 1, in),
               "CQ %u CQE[%u] %s wqe=%u len=%u%s status=0x%02x owner=%u", p.cqn, index,
               cqe_opcode_name(in.opcode), in.wqe_counter, in.byte_cnt,
               (in.flags & hw::kCqeWithImm) ? " +imm" : "", unsigned(in.syndrome), owner);
  dma_.write(t.dma, &c, sizeof c, in.qpn, "cqe", true);
  ++cq.pi;
  ++cqes_;

  // Completion-event decision (IBTA 11.4.2.2 / ibv_req_notify_cq(3)).
  const bool is_error = in.syndrome != hw::CqeSyndrome::Ok;
  const bool is_recv = in.opcode != hw::CqeOpcode::Req && in.opcode != hw::CqeOpcode::ReqErr;
  const bool solicited = is_recv && (in.flags & hw::kCqeSolicited);
  if (solicited || is_error) cq.trigger_pi = cq.pi;
  if (!cq.armed) {
    HCASIM_TRACE(tracer_, Cq, EventDecision, in.qpn, arm_fields(p.cqn, cq), "CQ %u no event: not armed", p.cqn);
    return;
  }
  if (cq.solicited_only && !solicited && !is_error) {
    HCASIM_TRACE(tracer_, Cq, EventDecision, in.qpn, arm_fields(p.cqn, cq),
                 "CQ %u no event: armed solicited-only and this CQE is %s", p.cqn,
                 is_recv ? "an unsolicited receive" : "a send completion");
    return;
  }
  HCASIM_TRACE(tracer_, Cq, EventDecision, in.qpn, arm_fields(p.cqn, cq, kTraceNone, kTfEvent),
                 "CQ %u EVENT: armed %s, CQE is %s -> EQ %u",
               p.cqn, cq.solicited_only ? "solicited-only" : "next",
               is_error ? "an error" : solicited ? "a solicited receive" : "any completion",
               cq.cqc.eqn);
  cq.armed = false;
  cq.event_pi = cq.pi;
  ++events_;
  eq_.post(cq.cqc.eqn, hw::EqeType::Completion, p.cqn);
}

}  // namespace hcasim::model
