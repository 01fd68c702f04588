// SPDX-License-Identifier: Apache-2.0
#include "doorbell.h"

#include <cinttypes>

namespace hcasim::model {

DoorbellUnit::DoorbellUnit(const TimingProfile& prof, Tracer& tracer, CqUnit& cq, EqUnit& eq, Requester& req)
    : prof_(prof), tracer_(tracer), cq_(cq), eq_(eq), req_(req), bus_("doorbell", [this](Write& w) {
        land(w);
      }) {}

void DoorbellUnit::mmio_write(uint32_t offset, uint64_t value) {
  // A CQ arm asks for completions after *now*: remember where the CQ stood, so CQEs that land
  // while the store is still on its way to the device are not missed.
  const uint32_t cq_pi = offset == hw::kUarCqArm ? cq_.produced(hw::cq_arm_cqn(value)) : 0;
  // A BlueFlame store also carries the WQE: at least one 64-byte write-combined block more.
  const uint64_t wc = offset == hw::kUarSqBlueFlame ? prof_.pcie_xfer_ps(hw::kWqeBasicBlock) : 0;
  bus_.push(now_ps() + prof_.mmio_write_ps + wc, Write{offset, value, cq_pi});
}

void DoorbellUnit::land(Write& w) {
  ++count_;
  switch (w.offset) {
    case hw::kUarSqDoorbell: {
      const uint32_t qpn = hw::sq_doorbell_qpn(w.value);
      const uint16_t pi = hw::sq_doorbell_pi(w.value);
      HCASIM_TRACE(tracer_, Doorbell, Doorbell, qpn, TraceFields().set_index(pi),
                   "UAR+0x%03x SQ doorbell: qpn=0x%x producer=%u", w.offset, qpn, pi);
      req_.doorbell(qpn, pi);
      return;
    }
    case hw::kUarSqBlueFlame: {
      const uint32_t qpn = hw::sq_doorbell_qpn(w.value);
      const uint16_t pi = hw::sq_doorbell_pi(w.value);
      HCASIM_TRACE(tracer_, Doorbell, Doorbell, qpn, TraceFields().set_index(pi).set_flag(kTfBlueFlame),
                   "UAR+0x%03x SQ BlueFlame doorbell (the WQE came with it): qpn=0x%x producer=%u", w.offset,
                   qpn, pi);
      req_.doorbell(qpn, pi, true);
      return;
    }
    case hw::kUarCqArm: {
      const uint32_t cqn = hw::cq_arm_cqn(w.value);
      const uint32_t ci = hw::cq_arm_ci(w.value);
      HCASIM_TRACE(tracer_, Doorbell, Doorbell, kTraceNone, TraceFields().set_queue(cqn).set_index(ci),
                   "UAR+0x%03x CQ arm doorbell: cqn=%u", w.offset, cqn);
      cq_.arm(cqn, ci, hw::cq_arm_sn(w.value), hw::cq_arm_solicited(w.value), w.cq_pi);
      return;
    }
    case hw::kUarEqArm: {
      const uint32_t eqn = hw::eq_arm_eqn(w.value);
      const uint32_t ci = hw::eq_arm_ci(w.value);
      HCASIM_TRACE(tracer_, Doorbell, Doorbell, kTraceNone,
                   TraceFields().set_queue(eqn).set_index(ci).set_flag(kTfEq),
                   "UAR+0x%03x EQ arm doorbell: eqn=%u ci=%u", w.offset, eqn, ci);
      eq_.arm(eqn, ci);
      return;
    }
    default:
      HCASIM_TRACE(tracer_, Doorbell, Error, kTraceNone, TraceFields().set_addr(w.offset).set_flag(kTfError),
                   "write to unknown UAR offset 0x%x ignored", w.offset);
  }
}

}  // namespace hcasim::model
