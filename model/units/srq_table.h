// SPDX-License-Identifier: Apache-2.0
/**
 * @file srq_table.h
 * @brief Shared receive queues as the HCA holds them: the programmed SRQ context plus the
 *        running consumer index. The responder fetches an SRQ's WQEs through the WQE-fetch unit
 *        exactly as it fetches a QP's receive queue (a ring behind a buffer table, a producer
 *        counter in a doorbell record), for every QP attached to it.
 */
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"
#include "wqe_fetch.h"

namespace hcasim::model {

/** @brief One SRQ: its context and what the responder has consumed of it. */
struct SrqContext {
  hw::Srqc srqc{};
  uint16_t ci = 0;       ///< next WQE to hand to a QP
  uint16_t pi_seen = 0;  ///< producer counter last read from the doorbell record
  BufferCursor cursor;   ///< the ring's translation cache
};

/** @brief The receive queue of @p srq as a WorkQueue (@p qpn: the QP fetching, for the trace). */
WorkQueue srq_queue(SrqContext& srq, uint32_t qpn);

/** @brief Every SRQ of one HCA, by number. */
class SrqTable {
 public:
  /** @brief Add an SRQ with the context @p c (its srqn set); false if the number is taken. */
  bool create(const hw::Srqc& c);
  bool destroy(uint32_t srqn);
  SrqContext* find(uint32_t srqn);
  const SrqContext* peek(uint32_t srqn) const;
  /** @brief Numbers of every SRQ (function reset). */
  std::vector<uint32_t> ids() const;

 private:
  std::map<uint32_t, std::unique_ptr<SrqContext>> table_;
};

}  // namespace hcasim::model
