// SPDX-License-Identifier: Apache-2.0
/**
 * @file clock.h
 * @brief The time models a run can use (`hcasim run --clock`, HCASIM_CLOCK) and, for the
 *        hardware-like one, how simulated time is tied to wall time.
 *
 * - **lockstep**: simulated time moves only while programs wait in verbs calls (plus a
 *   fallback after a quiet period). One program waiting through verbs gives the same trace on
 *   every run; software time is free.
 * - **realtime**: the device runs beside the programs, as hardware does. Simulated time follows
 *   wall time: what is due is delivered whether or not a program is in a verbs call, and a
 *   doorbell rung after 3 us of computation lands 3 us later. When the model cannot keep up,
 *   simulated time falls behind wall time by at most kMaxLagPs; beyond that the mapping slips
 *   (the run is slower than real time, and the slowdown is reported).
 * - **auto** (the default): lockstep while one thread of one process uses the simulated HCAs,
 *   realtime from the moment a second one does.
 *
 * This file holds no SystemC: the mapping is plain arithmetic, unit-tested on its own.
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace hcasim::sim {

/**
 * @brief Monotonic wall time in ns: std::chrono::steady_clock, i.e. CLOCK_MONOTONIC, the same
 * clock in every process of a machine (the fabric's device and programs compare instants).
 */
inline uint64_t mono_now_ns() {
  using namespace std::chrono;
  return uint64_t(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count());
}

/**
 * @brief Wait until monotonic wall time @p wall_ns (mono_now_ns()), as a driver waits for a
 * firmware command: without holding anything, giving the core to any other thread that wants
 * it. A sleep alone would overshoot a 20 us wait several times over (timer slack), so only a
 * long wait sleeps, and the last stretch yields in a loop. 0 or a past time: return at once.
 */
inline void wait_until_mono_ns(uint64_t wall_ns) {
  using namespace std::chrono;
  constexpr uint64_t kSleepSlackNs = 80'000;  // what a sleep may overshoot by
  for (;;) {
    const uint64_t now = mono_now_ns();
    if (now >= wall_ns) return;
    if (wall_ns - now > 2 * kSleepSlackNs)
      std::this_thread::sleep_for(nanoseconds(wall_ns - now - kSleepSlackNs));
    else
      std::this_thread::yield();
  }
}

/** @brief The time model a run asked for. */
enum class ClockMode : uint8_t { Auto, Lockstep, Realtime };

/** @brief "auto", "lockstep" or "realtime". */
const char* clock_mode_name(ClockMode m);
/** @brief Parse a mode name; false (and @p m untouched) for anything else. */
bool parse_clock_mode(const std::string& s, ClockMode& m);
/** @brief One sentence for people: what the mode does. */
const char* clock_mode_summary(ClockMode m);

/** @brief How far simulated time may fall behind wall time before the mapping slips (100 us). */
constexpr uint64_t kMaxLagPs = 100'000'000;
/**
 * @brief Events due this soon after the wall-clock instant run at once instead of being slept
 * for (5 us): a thread cannot sleep that precisely, so simulated time may lead wall time by as
 * much, never more.
 */
constexpr uint64_t kLeadPs = 5'000'000;

/**
 * @brief Simulated time as a function of wall time, for the realtime mode.
 *
 * target(wall) = sim0 + (wall - wall0) - slip. The slip grows whenever the model's oldest
 * unprocessed event lags wall time by more than kMaxLagPs, so the target never runs further
 * ahead of the work than that.
 */
class WallCoupling {
 public:
  /** @brief Couple simulated time @p sim_ps to wall time @p wall_ns (monotonic). */
  void start(uint64_t sim_ps, uint64_t wall_ns);
  bool started() const { return started_; }
  /**
   * @brief The simulated instant wall time @p wall_ns stands for, given that the model's
   * earliest unprocessed event is due at @p next_event_ps (~0: none). A model with nothing to do
   * simply jumps there; one whose oldest event lags the instant by more than kMaxLagPs cannot
   * keep up, and the excess becomes slip.
   */
  uint64_t target(uint64_t next_event_ps, uint64_t wall_ns);
  /** @brief Wall time (ns) at which simulated time @p sim_ps is due under the current mapping. */
  uint64_t wall_at(uint64_t sim_ps) const;
  /** @brief Simulated time given up so far because the model could not keep up. */
  uint64_t slip_ps() const { return slip_ps_; }
  /** @brief Simulated seconds per wall second since start (1.0 = real time). */
  double sim_per_wall(uint64_t now_ps, uint64_t wall_ns) const;
  uint64_t start_sim_ps() const { return sim0_ps_; }
  uint64_t start_wall_ns() const { return wall0_ns_; }

 private:
  bool started_ = false;
  uint64_t sim0_ps_ = 0, wall0_ns_ = 0, slip_ps_ = 0;
};

}  // namespace hcasim::sim
