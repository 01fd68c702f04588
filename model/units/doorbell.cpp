// SPDX-License-Identifier: Apache-2.0
#include "doorbell.h"

#include <cinttypes>

namespace hcasim::model {

DoorbellUnit::DoorbellUnit(HcaCore& core, Requester& req)
    : c_(core), req_(req), bus_("doorbell", [this](Write& w) { land(w); }) {}

void DoorbellUnit::mmio_write(uint32_t offset, uint64_t value) {
  // A CQ arm asks for completions after *now*: remember where the CQ stood, so CQEs that land
  // while the store is still on its way to the device are not missed.
  const uint32_t cq_pi = offset == hw::kUarCqArm ? c_.cq.produced(uint32_t(value) & 0xffffff) : 0;
  bus_.push(now_ps() + c_.prof.mmio_write_ps, Write{offset, value, cq_pi});
}

void DoorbellUnit::land(Write& w) {
  ++count_;
  switch (w.offset) {
    case hw::kUarSqDoorbell: {
      const uint32_t qpn = uint32_t(w.value >> 32) & hw::kQpnMask;
      const uint16_t pi = uint16_t(w.value);
      HCASIM_TRACE(c_.tracer, Doorbell, Doorbell, qpn, [&] { TraceFields f; f.index = pi; return f; }(),
                     "UAR+0x%03x SQ doorbell: qpn=0x%x producer=%u", w.offset, qpn, pi);
      req_.doorbell(qpn, pi);
      return;
    }
    case hw::kUarCqArm: {
      const uint32_t cqn = uint32_t(w.value) & 0xffffff;
      const uint32_t hi = uint32_t(w.value >> 32);
      HCASIM_TRACE(c_.tracer, Doorbell, Doorbell, 0xffffffff,
                     [&] { TraceFields f; f.queue = cqn; f.index = hi & 0xffffff; return f; }(),
                     "UAR+0x%03x CQ arm doorbell: cqn=%u", w.offset, cqn);
      c_.cq.arm(cqn, hi & 0xffffff, hi >> 28, (hi >> 24) & 1, w.cq_pi);
      return;
    }
    case hw::kUarEqArm: {
      const uint32_t eqn = uint32_t(w.value) & 0xffffff;
      const uint32_t ci = uint32_t(w.value >> 32) & 0xffffff;
      HCASIM_TRACE(c_.tracer, Doorbell, Doorbell, 0xffffffff,
                     [&] { TraceFields f; f.queue = eqn; f.index = ci; f.flags = kTfEq; return f; }(),
                     "UAR+0x%03x EQ arm doorbell: eqn=%u ci=%u", w.offset, eqn, ci);
      c_.eq.arm(eqn, ci);
      return;
    }
    default:
      HCASIM_TRACE(c_.tracer, Doorbell, Error, 0xffffffff, TraceFields(), "write to unknown UAR offset 0x%x ignored",
                   w.offset);
  }
}

}  // namespace hcasim::model
