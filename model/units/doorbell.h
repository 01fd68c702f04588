// SPDX-License-Identifier: Apache-2.0
/**
 * @file doorbell.h
 * @brief The UAR doorbell unit: 64-bit MMIO writes to the UAR page, each stamped with the
 *        simulated time of the store and seen by the HCA after the MMIO write latency.
 */
#pragma once

#include <cstdint>

#include "cq_unit.h"
#include "eq_unit.h"
#include "requester.h"

namespace hcasim::model {

class DoorbellUnit {
 public:
  DoorbellUnit(const TimingProfile& prof, Tracer& tracer, CqUnit& cq, EqUnit& eq, Requester& req);

  /** @brief A store of @p value at @p offset in the UAR page, now. */
  void mmio_write(uint32_t offset, uint64_t value);

  uint64_t doorbells() const { return count_; }

 private:
  struct Write {
    uint32_t offset;
    uint64_t value;
    uint32_t cq_pi;  ///< CQ arm: the CQ's producer count when the store was issued
  };
  void land(Write& w);

  const TimingProfile& prof_;
  Tracer& tracer_;
  CqUnit& cq_;
  EqUnit& eq_;
  Requester& req_;
  TimedQueue<Write> bus_;
  uint64_t count_ = 0;
};

}  // namespace hcasim::model
