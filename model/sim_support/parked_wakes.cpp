// SPDX-License-Identifier: Apache-2.0
#include "parked_wakes.h"

#ifndef SC_INCLUDE_DYNAMIC_PROCESSES
#define SC_INCLUDE_DYNAMIC_PROCESSES
#endif
#include <systemc>

#include <map>
#include <set>
#include <utility>

namespace hcasim::model {
namespace {
// One SystemC kernel per process, touched only under the simulation's lock.
struct Parking {
  std::set<std::pair<uint64_t, ParkedWakeOwner*>> by_time;
  std::map<ParkedWakeOwner*, uint64_t> by_owner;
};

Parking& parking() {
  static Parking* p = new Parking;  // outlives every owner, whatever the order of exit
  return *p;
}

// One query: with nothing pending, the kernel answers with the time left to sc_max_time().
uint64_t kernel_next_ps() {
  const uint64_t next = sc_core::sc_time_stamp().value() + sc_core::sc_time_to_pending_activity().value();
  return next >= sc_core::sc_max_time().value() ? ~0ull : next;
}
}  // namespace

void park_wake(ParkedWakeOwner* owner, uint64_t at_ps) {
  unpark_wake(owner);
  parking().by_time.emplace(at_ps, owner);
  parking().by_owner.emplace(owner, at_ps);
}

void unpark_wake(ParkedWakeOwner* owner) {
  Parking& p = parking();
  auto it = p.by_owner.find(owner);
  if (it == p.by_owner.end()) return;
  p.by_time.erase({it->second, owner});
  p.by_owner.erase(it);
}

uint64_t earliest_parked_wake_ps() {
  const Parking& p = parking();
  return p.by_time.empty() ? ~0ull : p.by_time.begin()->first;
}

uint64_t next_activity_ps() {
  for (;;) {
    const uint64_t next = kernel_next_ps();
    if (next == ~0ull || earliest_parked_wake_ps() > next) return next;
    // The kernel's next event is a parked wake-up (or shares its instant): drop every parked
    // one up to there, then look again.
    Parking& p = parking();
    while (!p.by_time.empty() && p.by_time.begin()->first <= next) {
      ParkedWakeOwner* owner = p.by_time.begin()->second;
      unpark_wake(owner);
      owner->drop_parked_wake();
    }
  }
}

uint64_t parked_clear_run_ps(uint64_t want) {
  const uint64_t now = sc_core::sc_time_stamp().value();
  const uint64_t parked = earliest_parked_wake_ps();
  if (parked == ~0ull || parked <= now || parked - now > want) return want;
  return parked - now - 1;
}

}  // namespace hcasim::model
