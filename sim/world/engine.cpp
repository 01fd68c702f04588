// SPDX-License-Identifier: Apache-2.0
#include "engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <systemc>

#include "dma_engine.h"

// libsystemc references sc_main; programs that load the simulator never call it.
int sc_main(int, char**) { return 1; }

namespace hcasim::sim {

Engine& Engine::instance() {
  static Engine* e = new Engine;  // never destroyed: other threads may still be in verbs at exit
  return *e;
}

Engine::Engine() {
  efd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (const char* p = std::getenv("HCASIM_PACE"); p && std::strcmp(p, "0") == 0) pacing_ = false;
  // At exit SystemC's globals are torn down: stop the advancer and keep every thread out of
  // the kernel from then on (the lock is taken and never released).
  std::atexit([] {
    Engine& e = Engine::instance();
    e.idle_stop_.store(true);
    e.mu_.lock();
  });
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
}

Engine::~Engine() { stop_idle_advancer(); }

uint64_t Engine::mono_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

uint64_t Engine::now_ps() const { return sc_core::sc_time_stamp().value(); }

void Engine::ensure_started() {
  if (started_) return;
  started_ = true;
  sc_core::sc_start(sc_core::SC_ZERO_TIME);  // end of elaboration, time 0
}

bool Engine::pending() {
  std::lock_guard<std::recursive_mutex> g(mu_);
  ensure_started();
  return sc_core::sc_pending_activity();
}

bool Engine::step() {
  if (!sc_core::sc_pending_activity()) return false;
  const sc_core::sc_time d = sc_core::sc_time_to_pending_activity();
  if (d > sc_core::SC_ZERO_TIME) sc_core::sc_start(d);
  // sc_start(d) stops before the events due at the new time; run those delta cycles now.
  do {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
  } while (sc_core::sc_pending_activity_at_current_time());
  ++steps_;
  return true;
}

bool Engine::run_until_visible(uint64_t* pace_ns) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  uint64_t drain;
  if (read(efd_, &drain, sizeof drain) < 0) { /* nothing to drain */
  }
  ensure_started();
  if (!sc_core::sc_pending_activity()) return false;
  // One sc_start() runs until the first software-visible effect pauses the kernel at the end
  // of that delta cycle, until nothing is left to do (starvation: time does not jump), or for
  // at most one wait quantum of simulated time: a device retrying forever (RNR retry 7, a lost
  // peer) shows nothing to software, and the program must get control back to decide.
  auto& epoch = model::host_visible_epoch();
  const uint64_t start_epoch = epoch.load(std::memory_order_relaxed);
  const uint64_t deadline = now_ps() + kWaitQuantumPs;
  model::pause_on_visible(true);
  while (sc_core::sc_pending_activity() && epoch.load(std::memory_order_relaxed) == start_epoch) {
    const uint64_t now = now_ps();
    if (now >= deadline) break;
    const uint64_t next = now + sc_core::sc_time_to_pending_activity().value();
    if (next > deadline) {
      // The next event (a retry timer) lies beyond the quantum: the program waited that long,
      // in wall time too when pacing.
      uint64_t target = deadline;
      if (pacing_) {
        const uint64_t wall = mono_ns();
        if (!idle_gap_) {
          idle_gap_ = true;
          gap_sim0_ps_ = now;
          gap_wall0_ns_ = wall;
        }
        const uint64_t allowed = gap_sim0_ps_ + (wall - gap_wall0_ns_) * 1000;
        if (allowed < deadline) {
          target = allowed;
          if (pace_ns) *pace_ns = (deadline - allowed) / 1000;
        }
      }
      if (target > now) sc_core::sc_start(sc_core::sc_time::from_value(target - now));
      break;
    }
    idle_gap_ = false;
    // Runs events up to the deadline; returns early on a pause (visible effect) or when
    // nothing is left before the deadline.
    sc_core::sc_start(sc_core::sc_time::from_value(deadline - now), sc_core::SC_EXIT_ON_STARVATION);
  }
  model::pause_on_visible(false);
  ++steps_;
  return true;
}

void Engine::run_until_idle(uint64_t limit_ps) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  ensure_started();
  while (now_ps() < limit_ps && step()) {
  }
}

void Engine::kick() {
  uint64_t one = 1;
  if (write(efd_, &one, sizeof one) < 0) { /* counter saturated: already readable */
  }
}

void Engine::start_idle_advancer(uint32_t quiet_us) {
  if (idle_started_) return;
  idle_started_ = true;
  quiet_us_ = quiet_us;
  // Started even when the advancer is off (quiet_us 0), only to sleep: the program's heap then
  // looks the same in both modes, and its buffer addresses, which traces show, do not differ.
  idle_ = std::thread([this] {
    while (quiet_us_ == 0 && !idle_stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // While the programs stay quiet and work is in flight, the advancer keeps stepping (each
    // step still ends at a visible effect, so a program sleeping in poll(2) wakes on the
    // interrupt and takes over): like hardware, the device does not stop between events just
    // because nobody calls into it. Only an idle one waits for a doorbell or the period.
    bool ran = false;
    while (!idle_stop_.load()) {
      if (!ran) {
        pollfd p{efd_, POLLIN, 0};
        poll(&p, 1, int(quiet_us_ / 1000 + 1));
      }
      ran = false;
      const uint64_t quiet = mono_ns() - last_call_ns_.load(std::memory_order_relaxed);
      if (quiet < uint64_t(quiet_us_) * 1000) {
        // Not quiet yet: sleep out the rest of the period. (poll() returns at once while the
        // activity fd is readable, and programs that keep calling verbs never let it drain
        // for long: without this the thread spins a whole core.)
        std::this_thread::sleep_for(std::chrono::nanoseconds(uint64_t(quiet_us_) * 1000 - quiet));
        continue;
      }
      std::unique_lock<std::recursive_mutex> g(mu_, std::try_to_lock);
      if (!g.owns_lock()) {  // a program is in a wait and drives the kernel itself
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      uint64_t pace = 0;
      if (sc_core::sc_pending_activity()) ran = run_until_visible(&pace) && !pace;
      g.unlock();
      if (pace) std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(pace, 1'000'000)));
    }
  });
  idle_.detach();
}

void Engine::stop_idle_advancer() { idle_stop_.store(true); }

}  // namespace hcasim::sim
