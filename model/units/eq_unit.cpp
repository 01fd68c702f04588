// SPDX-License-Identifier: Apache-2.0
#include "eq_unit.h"

#include <cinttypes>

namespace hcasim::model {

EqUnit::EqUnit(DmaEngine& dma, BufferTableWalker& bt, const TimingProfile& prof, Tracer& tracer)
    : dma_(dma), bt_(bt), prof_(prof), tracer_(tracer), irq_line_("irq", [this](uint32_t& vec) {
        ++irqs_;
        note_host_visible();
        HCASIM_TRACE(tracer_, Eq, Interrupt, kTraceNone, TraceFields().set_queue(vec),
                     "MSI-X vector %u -> driver", vec);
        if (irq_) irq_(vec);
      }) {}

bool EqUnit::create(const hw::Eqc& eqc) { return eqs_.emplace(eqc.eqn, Eq{eqc, 0, 0, true, {}}).second; }
bool EqUnit::destroy(uint32_t eqn) { return eqs_.erase(eqn) != 0; }

void EqUnit::post(uint32_t eqn, hw::EqeType type, uint32_t resource) {
  auto it = eqs_.find(eqn);
  if (it == eqs_.end()) return;
  hw::Eqe e;
  hw::set_eqe(e, type, resource, now_ps() / 1000, hw::eqe_owner_for(it->second.pi, it->second.eqc.log_size));
  write(eqn, it->second, e, type, resource, kTraceNone16);
}

void EqUnit::post_port_change(uint32_t eqn, hw::PortChangeSubtype what, uint32_t port) {
  auto it = eqs_.find(eqn);
  if (it == eqs_.end()) return;
  hw::Eqe e;
  hw::set_eqe_port_change(e, what, port, now_ps() / 1000,
                          hw::eqe_owner_for(it->second.pi, it->second.eqc.log_size));
  write(eqn, it->second, e, hw::EqeType::PortChange, port, uint16_t(what));
}

void EqUnit::write(uint32_t eqn, Eq& eq, const hw::Eqe& e, hw::EqeType type, uint32_t resource,
                   uint16_t sub_type) {
  const uint32_t size = 1u << eq.eqc.log_size;
  const uint8_t owner = hw::eqe_owner_for(eq.pi, eq.eqc.log_size);
  BtResult t =
      bt_.translate(eq.eqc.buf, uint64_t(eq.pi & (size - 1)) * hw::kEqeSize, eq.cursor, kTraceNone, "eq");
  if (!t.ok) return;
  HCASIM_TRACE(tracer_, Eq, EqeWrite, kTraceNone,
               TraceFields()
                   .set_queue(eqn)
                   .set_index(eq.pi + 1)
                   .set_opcode(uint16_t(type))
                   .set_peer_qpn(resource)
                   .set_status(sub_type),
               "EQ %u EQE[%u] type=0x%02x resource=0x%x owner=%u", eqn, eq.pi & (size - 1), unsigned(type),
               resource, owner);
  dma_.write(t.dma, &e, sizeof e, kTraceNone, "eqe", true);
  ++eq.pi;
  ++eqes_;
  raise(eq);
}

void EqUnit::raise(Eq& eq) {
  if (!eq.armed || eq.pi == eq.ci) return;
  eq.armed = false;
  irq_line_.push(now_ps() + prof_.irq_ps, eq.eqc.irq_vector);
}

void EqUnit::arm(uint32_t eqn, uint32_t ci) {
  auto it = eqs_.find(eqn);
  if (it == eqs_.end()) return;
  it->second.ci = ci;
  it->second.armed = true;
  raise(it->second);
}

}  // namespace hcasim::model
