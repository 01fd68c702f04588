// SPDX-License-Identifier: Apache-2.0
/**
 * @file link_schedule.h
 * @brief Scripted link faults (`--faults link-down=H@T1..T2`, fault_spec.h): at T1 host H's
 *        link goes down, at T2 it comes back, at simulated times counted from the start of the run.
 *
 * At each change the schedule traces a fault event (unit wire, on host H) and tells H's HCA
 * (Hca::set_link), which changes the port's state and raises the port-change event the program
 * sees as IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE. Two hosts share one cable: when it goes
 * down both ports lose their link (as when a cable is pulled); on a switch only H's port does. While a link
 * is down, the world's FaultyWire loses every frame that would cross it (to or from H) and counts it in the
 * sender's link_down_losses. Real HCAs do the same: rxe reports PORT_ERR/PORT_ACTIVE when its netdev loses or
 * regains carrier, mlx5 when the physical link does; neither moves QPs to an error state by itself: RC
 * requesters retry until their budget (retry_cnt x local ACK timeout) runs out.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fault_spec.h"
#include "hca.h"

namespace hcasim::sim {

/** @brief The link-down windows of a spec, played on the hosts' HCAs. */
class LinkSchedule {
 public:
  /**
   * @param spec the parsed --faults spec (only its link_downs are read, now)
   * @param hcas the world's HCAs, by host index (they outlive the schedule)
   * @param cable the hosts share one cable (two hosts), not a switch: a link-down takes both ports down
   */
  LinkSchedule(const FaultSpec& spec, std::vector<model::Hca*> hcas, bool cable);
  /** @brief Whether host @p host's link is down now (false for kAny or a host out of range). */
  bool down(uint32_t host) const { return host < down_.size() && down_[host] > 0; }
  /** @brief Host @p host's name ("hcasim1"); @p host must be a host of the world. */
  const std::string& name(uint32_t host) const { return hcas_[host]->identity().name; }

 private:
  /** @brief One change: host @p host's link goes down (@p up false) or comes back. */
  struct Change {
    uint32_t host;
    bool up;
    uint64_t until_ps;  ///< down: when it comes back (LinkDownClause::kForever: never)
  };
  void apply(const Change& c);
  /** @brief One more (or one fewer) window holds host @p host's port down; tell its HCA on a change. */
  void hold(uint32_t host, bool up);

  std::vector<model::Hca*> hcas_;
  bool cable_;
  std::vector<uint32_t> down_;  ///< per host: the windows holding its port down now
  model::TimedQueue<Change> changes_;
};

}  // namespace hcasim::sim
