// SPDX-License-Identifier: Apache-2.0
/**
 * @file eq_unit.h
 * @brief Event queues and the interrupt line: EQEs written into an EQ ring in host memory,
 *        then an MSI-X interrupt to the driver if the EQ is armed.
 *
 * An EQ raises one interrupt and stays quiet until the driver re-arms it with the EQ arm
 * doorbell (after consuming EQEs), as real EQs do; arming with unconsumed EQEs fires again.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"
#include "timed_queue.h"

namespace hcasim::model {

class EqUnit {
 public:
  using IrqHandler = std::function<void(uint32_t vector)>;

  EqUnit(DmaEngine& dma, BufferTableWalker& bt, const TimingProfile& prof, Tracer& tracer);

  bool create(const hw::Eqc& eqc);
  bool destroy(uint32_t eqn);
  bool exists(uint32_t eqn) const { return eqs_.count(eqn) != 0; }
  /** @brief Numbers of all EQs (function reset). */
  std::vector<uint32_t> ids() const {
    std::vector<uint32_t> v;
    for (auto& [n, e] : eqs_) v.push_back(n);
    return v;
  }
  void set_irq_handler(IrqHandler h) { irq_ = std::move(h); }

  /** @brief Write an EQE now and raise the EQ's interrupt if armed. */
  void post(uint32_t eqn, hw::EqeType type, uint32_t resource);
  /** @brief Write a port-change EQE (@p what the port @p port became) now; interrupt if armed. */
  void post_port_change(uint32_t eqn, hw::PortChangeSubtype what, uint32_t port);
  /** @brief EQ arm doorbell: record the consumer index and re-enable the interrupt. */
  void arm(uint32_t eqn, uint32_t ci);

  /** @brief An EQ's state, for inspection (step mode); no side effects. */
  struct EqView {
    hw::Eqc eqc;
    uint32_t pi;  ///< EQEs written
    uint32_t ci;  ///< consumer index from the last EQ arm doorbell
    bool armed;   ///< the next EQE raises the interrupt
    BufferCursor cursor;
  };
  bool peek(uint32_t eqn, EqView& out) const {
    auto it = eqs_.find(eqn);
    if (it == eqs_.end()) return false;
    out = EqView{it->second.eqc, it->second.pi, it->second.ci, it->second.armed, it->second.cursor};
    return true;
  }

  uint64_t eqes() const { return eqes_; }
  uint64_t interrupts() const { return irqs_; }

 private:
  struct Eq {
    hw::Eqc eqc;
    uint32_t pi = 0;
    uint32_t ci = 0;
    bool armed = true;
    BufferCursor cursor;
  };
  void raise(Eq& eq);
  /** @brief Write EQE @p e (of @p type, about @p resource; port changes: @p sub_type) into @p eq's ring and
   * raise it. */
  void write(uint32_t eqn, Eq& eq, const hw::Eqe& e, hw::EqeType type, uint32_t resource, uint16_t sub_type);

  DmaEngine& dma_;
  BufferTableWalker& bt_;
  const TimingProfile& prof_;
  Tracer& tracer_;
  std::unordered_map<uint32_t, Eq> eqs_;
  IrqHandler irq_;
  TimedQueue<uint32_t> irq_line_;  // vector numbers, delivered after the MSI-X latency
  uint64_t eqes_ = 0, irqs_ = 0;
};

}  // namespace hcasim::model
