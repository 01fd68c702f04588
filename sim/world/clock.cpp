// SPDX-License-Identifier: Apache-2.0
#include "clock.h"

namespace hcasim::sim {

const char* clock_mode_name(ClockMode m) {
  switch (m) {
    case ClockMode::Auto: return "auto";
    case ClockMode::Lockstep: return "lockstep";
    case ClockMode::Realtime: return "realtime";
  }
  return "?";
}

bool parse_clock_mode(const std::string& s, ClockMode& m) {
  for (ClockMode c : {ClockMode::Auto, ClockMode::Lockstep, ClockMode::Realtime})
    if (s == clock_mode_name(c)) {
      m = c;
      return true;
    }
  return false;
}

const char* clock_mode_summary(ClockMode m) {
  switch (m) {
    case ClockMode::Auto:
      return "lockstep while one thread of one process uses the device, realtime from the moment a "
             "second one does";
    case ClockMode::Lockstep:
      return "simulated time moves only while programs wait in verbs calls; same program and seed, "
             "same trace";
    case ClockMode::Realtime:
      return "the device runs beside the programs and simulated time follows wall time, as on "
             "hardware";
  }
  return "?";
}

void WallCoupling::start(uint64_t sim_ps, uint64_t wall_ns) {
  started_ = true;
  sim0_ps_ = sim_ps;
  wall0_ns_ = wall_ns;
  slip_ps_ = 0;
}

uint64_t WallCoupling::target(uint64_t next_event_ps, uint64_t wall_ns) {
  const uint64_t elapsed_ps = wall_ns > wall0_ns_ ? (wall_ns - wall0_ns_) * 1000 : 0;
  // A wall time read before the slip grew (a thread that waited for the device lock meanwhile)
  // may map to before the start: that is "long past", never a wrap to the far future.
  if (sim0_ps_ + elapsed_ps <= slip_ps_) return 0;
  uint64_t t = sim0_ps_ + elapsed_ps - slip_ps_;
  if (next_event_ps < t && t - next_event_ps > kMaxLagPs) {
    slip_ps_ += t - (next_event_ps + kMaxLagPs);
    t = next_event_ps + kMaxLagPs;
  }
  return t;
}

uint64_t WallCoupling::wall_at(uint64_t sim_ps) const {
  const uint64_t base = sim0_ps_ - slip_ps_;  // may wrap below zero: unsigned arithmetic cancels it
  return wall0_ns_ + (sim_ps - base) / 1000;
}

double WallCoupling::sim_per_wall(uint64_t now_ps, uint64_t wall_ns) const {
  if (!started_ || wall_ns <= wall0_ns_) return 1.0;
  return double(now_ps - sim0_ps_) / (double(wall_ns - wall0_ns_) * 1000.0);
}

}  // namespace hcasim::sim
