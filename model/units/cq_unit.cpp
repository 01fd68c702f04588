// SPDX-License-Identifier: Apache-2.0
#include "cq_unit.h"

#include <cinttypes>

namespace hcasim::model {

const char* cqe_opcode_name(hw::CqeOpcode op) {
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

static bool is_recv(hw::CqeOpcode op) { return op != hw::CqeOpcode::Req && op != hw::CqeOpcode::ReqErr; }

// Typed trace fields (built only when tracing is on).
/** A CQ's arm state after an arm or an event decision; @p event: the decision fired one. */
template <typename CqT>
static TraceFields arm_fields(uint32_t cqn, const CqT& cq, uint32_t ci = kTraceNone, bool event = false) {
  return TraceFields()
      .set_queue(cqn)
      .set_index(ci)
      .set_flag(kTfEvent, event)
      .set_flag(kTfArmed, cq.armed)
      .set_flag(kTfArmSolicited, cq.armed && cq.solicited_only);
}

/** A CQE written as number @p pi_after - 1 of CQ @p cqn. */
static TraceFields cqe_fields(uint32_t cqn, uint32_t pi_after, const CqeInfo& in) {
  return TraceFields()
      .set_queue(cqn)
      .set_index(pi_after)
      .set_wqe(in.wqe_counter)
      .set_opcode(uint16_t(in.opcode))
      .set_count(in.byte_cnt)
      .set_status(uint16_t(in.syndrome))
      .set_flag(kTfRq, is_recv(in.opcode))
      .set_flag(kTfSrq, in.flags & hw::kCqeSrq)
      .set_flag(kTfSolicited, in.flags & hw::kCqeSolicited)
      .set_flag(kTfError, in.syndrome != hw::CqeSyndrome::Ok);
}

CqUnit::CqUnit(DmaEngine& dma, BufferTableWalker& bt, EqUnit& eq, const TimingProfile& prof, Tracer& tracer)
    : dma_(dma), bt_(bt), eq_(eq), prof_(prof), tracer_(tracer), landing_("cqe", [this](Pending& p) {
        land(p);
      }) {}

bool CqUnit::create(const hw::Cqc& cqc) {
  return cqs_.emplace(cqc.cqn, Cq{cqc, 0, 0, false, false, false, 0, 0, {}}).second;
}
bool CqUnit::destroy(uint32_t cqn) { return cqs_.erase(cqn) != 0; }

CqUnit::Resize CqUnit::resize(uint32_t cqn, uint8_t log_size, const hw::BufferDesc& buf, uint32_t ci,
                              uint32_t& pi) {
  auto it = cqs_.find(cqn);
  if (it == cqs_.end()) return Resize::NoSuchCq;
  Cq& cq = it->second;
  if (cq.pi - ci > (1u << log_size)) return Resize::TooSmall;
  cq.cqc.log_size = log_size;
  cq.cqc.buf = buf;
  cq.cursor = BufferCursor{};  // the cached page walk was into the old ring
  cq.ci_seen = ci;
  pi = cq.pi;
  HCASIM_TRACE(tracer_, Cq, Command, kTraceNone, TraceFields().set_queue(cqn).set_index(pi),
               "CQ %u resized to %u CQEs (pi=%u ci=%u: %u unpolled CQE(s) move with it)", cqn, 1u << log_size,
               pi, ci, pi - ci);
  return Resize::Ok;
}

void CqUnit::arm(uint32_t cqn, uint32_t ci, uint32_t sn, bool solicited_only, uint32_t pi_at_request) {
  auto it = cqs_.find(cqn);
  if (it == cqs_.end()) return;
  Cq& cq = it->second;
  const char* was = !cq.armed ? "disarmed" : cq.solicited_only ? "solicited" : "next";
  // "next" upgrades a pending "solicited only"; never the reverse.
  const bool sol_after = cq.armed ? cq.solicited_only && solicited_only : solicited_only;
  // Traced before the state changes: a step-mode pause here shows the CQ as the unit found it.
  HCASIM_TRACE(
      tracer_, Cq, CqArm, kTraceNone,
      TraceFields().set_queue(cqn).set_index(ci).set_flag(kTfArmed).set_flag(kTfArmSolicited, sol_after),
      "CQ %u arm sn=%u ci=%u request=%s: %s -> %s", cqn, sn, ci, solicited_only ? "solicited" : "next", was,
      sol_after ? "solicited" : "next");
  cq.armed = true;
  cq.solicited_only = sol_after;
  cq.ci_seen = ci;
  // CQEs after the request that no earlier event already reported (an arm that lands while
  // the CQ is still armed from before adds nothing).
  const uint32_t from = int32_t(cq.event_pi - pi_at_request) > 0 ? cq.event_pi : pi_at_request;
  const bool missed = cq.solicited_only ? int32_t(cq.trigger_pi - from) > 0 : cq.pi != from;
  if (!missed) return;
  HCASIM_TRACE(tracer_, Cq, EventDecision, kTraceNone, arm_fields(cqn, cq, kTraceNone, true),
               "CQ %u EVENT: %u CQE(s) landed after the arm was issued -> EQ %u", cqn, cq.pi - from,
               cq.cqc.eqn);
  cq.armed = false;
  cq.event_pi = cq.pi;
  ++events_;
  eq_.post(cq.cqc.eqn, hw::EqeType::Completion, cqn);
}

void CqUnit::post(uint32_t cqn, const CqeInfo& info) {
  // Posted writes keep their order: the CQE lands after the payload written before it.
  const uint64_t at = now_ps() + dma_.write_latency_ps(hw::kCqeSize);
  landing_.push(at > dma_.posted_until() ? at : dma_.posted_until(), Pending{cqn, info});
}

uint32_t CqUnit::unpolled(uint32_t cqn) const {
  auto it = cqs_.find(cqn);
  if (it == cqs_.end() || it->second.pi == 0) return 0;
  const Cq& cq = it->second;
  hw::CqDbrec rec{};
  if (!dma_.peek(cq.cqc.dbrec_addr, &rec, sizeof rec)) return 0;
  // The record carries 24 bits of the consumer counter; the distance to pi is what counts.
  constexpr uint32_t kCiMask = (1u << 24) - 1;
  return (cq.pi - hw::cq_dbrec_ci(rec)) & kCiMask;
}

bool CqUnit::has_room(uint32_t cqn, Cq& cq, const CqeInfo& in) {
  const uint32_t size = 1u << cq.cqc.log_size;
  if (cq.overflowed) {
    // ibv_poll_cq(3): after an overrun "the CQ cannot be used"; nothing lands in it any more.
    ++overflows_;
    HCASIM_TRACE(tracer_, Cq, Error, in.qpn,
                 TraceFields().set_queue(cqn).set_index(cq.pi).set_wqe(in.wqe_counter).set_flag(kTfError),
                 "CQ %u is in error since its overflow: CQE dropped", cqn);
    return false;
  }
  if (cq.pi - cq.ci_seen >= size) {
    // Looks full: read the consumer index the driver published in the doorbell record.
    hw::CqDbrec rec{};
    if (dma_.read(cq.cqc.dbrec_addr, &rec, sizeof rec, in.qpn, "cq.dbrec")) cq.ci_seen = hw::cq_dbrec_ci(rec);
    // The doorbell record carries 24 bits; rebuild the full counter near pi.
    constexpr uint32_t kCiWrap = 1u << 24;
    cq.ci_seen = (cq.pi & ~(kCiWrap - 1)) | cq.ci_seen;
    if (cq.ci_seen > cq.pi) cq.ci_seen -= kCiWrap;
    if (cq.pi - cq.ci_seen >= size) {
      ++overflows_;
      HCASIM_TRACE(tracer_, Cq, Error, in.qpn,
                   TraceFields().set_queue(cqn).set_index(cq.pi).set_wqe(in.wqe_counter).set_flag(kTfError),
                   "CQ %u overflow: CQE dropped (pi=%u ci=%u size=%u)", cqn, cq.pi, cq.ci_seen, size);
      if (!cq.overflowed) {  // report once; the CQ is in error from now on
        cq.overflowed = true;
        eq_.post(cq.cqc.eqn, hw::EqeType::CqError, cqn);
        if (on_overflow_) on_overflow_(cqn);
      }
      return false;
    }
  }
  return true;
}

void CqUnit::land(Pending& p) {
  dma_.land_due();  // the payload before this CQE, due now too, lands first
  auto it = cqs_.find(p.cqn);
  if (it == cqs_.end()) return;
  Cq& cq = it->second;
  const CqeInfo& in = p.info;
  if (!has_room(p.cqn, cq, in)) return;
  hw::CqeFields cf;
  cf.opcode = in.opcode;
  cf.timestamp_ns = now_ps() / 1000;
  cf.byte_cnt = in.byte_cnt;
  cf.imm = in.imm;
  cf.qpn = in.qpn;
  cf.src_qp = in.src_qp;
  cf.wqe_counter = in.wqe_counter;
  cf.srqn = in.srqn;
  cf.syndrome = in.syndrome;
  cf.flags = in.flags;
  cf.req_opcode = in.req_opcode;
  const uint8_t owner = hw::cqe_owner_for(cq.pi, cq.cqc.log_size);
  hw::Cqe c;
  hw::set_cqe(c, cf, owner);
  const uint32_t index = cq.pi & ((1u << cq.cqc.log_size) - 1);
  BtResult t = bt_.translate(cq.cqc.buf, uint64_t(index) * hw::kCqeSize, cq.cursor, in.qpn, "cq");
  if (!t.ok) return;
  HCASIM_TRACE_OUTCOME(
      tracer_, Cq, CqeWrite, in.syndrome != hw::CqeSyndrome::Ok, in.qpn, cqe_fields(p.cqn, cq.pi + 1, in),
      "CQ %u CQE[%u] %s wqe=%u len=%u%s status=0x%02x owner=%u", p.cqn, index, cqe_opcode_name(in.opcode),
      in.wqe_counter, in.byte_cnt, (in.flags & hw::kCqeWithImm) ? " +imm" : "", unsigned(in.syndrome), owner);
  dma_.write(t.dma, &c, sizeof c, in.qpn, "cqe", true);
  ++cq.pi;
  ++cqes_;
  decide_event(p.cqn, cq, in);
}

void CqUnit::decide_event(uint32_t cqn, Cq& cq, const CqeInfo& in) {
  // Completion-event decision (IBTA 11.4.2.2 / ibv_req_notify_cq(3)).
  const bool is_error = in.syndrome != hw::CqeSyndrome::Ok;
  const bool recv = is_recv(in.opcode);
  const bool solicited = recv && (in.flags & hw::kCqeSolicited);
  if (solicited || is_error) cq.trigger_pi = cq.pi;
  if (!cq.armed) {
    HCASIM_TRACE(tracer_, Cq, EventDecision, in.qpn, arm_fields(cqn, cq), "CQ %u no event: not armed", cqn);
    return;
  }
  if (cq.solicited_only && !solicited && !is_error) {
    HCASIM_TRACE(tracer_, Cq, EventDecision, in.qpn, arm_fields(cqn, cq),
                 "CQ %u no event: armed solicited-only and this CQE is %s", cqn,
                 recv ? "an unsolicited receive" : "a send completion");
    return;
  }
  HCASIM_TRACE(tracer_, Cq, EventDecision, in.qpn, arm_fields(cqn, cq, kTraceNone, true),
               "CQ %u EVENT: armed %s, CQE is %s -> EQ %u", cqn,
               cq.solicited_only ? "solicited-only" : "next",
               is_error    ? "an error"
               : solicited ? "a solicited receive"
                           : "any completion",
               cq.cqc.eqn);
  cq.armed = false;
  cq.event_pi = cq.pi;
  ++events_;
  eq_.post(cq.cqc.eqn, hw::EqeType::Completion, cqn);
}

}  // namespace hcasim::model
