// SPDX-License-Identifier: Apache-2.0
/**
 * @file frame_loss.h
 * @brief The frames the world loses on purpose: the `--drop` rules (drop_rule.h) and step
 *        mode's `drop next`. Each HCA asks it, for every frame it receives, whether the wire
 *        lost that frame; a lost frame is traced (`port error ... frame lost`) and counted in
 *        `rx_dropped`, and the transports react as to any loss.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "drop_rule.h"

namespace hcasim::model {
class Hca;
}

namespace hcasim::sim {

class FrameLoss {
 public:
  /** @brief Ask every HCA of @p hcas (host index = position) about its received frames. */
  void attach(const std::vector<model::Hca*>& hcas);
  /** @brief Add scripted rules (what --drop gives). */
  void add(const std::vector<DropRule>& rules) { rules_.insert(rules_.end(), rules.begin(), rules.end()); }
  /** @brief Lose the next frame that @p host receives (DropRule::kAny: whichever host receives one first). */
  void drop_next(uint32_t host) { next_.push_back(host); }
  /** @brief Whether host @p host loses a frame for QP @p qpn with PSN @p psn (and count it if so). */
  bool lose(uint32_t host, uint32_t qpn, uint32_t psn);

 private:
  std::vector<DropRule> rules_;
  std::vector<uint32_t> next_;  ///< pending `drop next` requests (host or kAny)
};

}  // namespace hcasim::sim
