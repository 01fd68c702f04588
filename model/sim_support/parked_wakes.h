// SPDX-License-Identifier: Apache-2.0
/**
 * @file parked_wakes.h
 * @brief Timed wake-ups that no longer matter but are left in the SystemC kernel on purpose,
 *        and the kernel's next event with them left out.
 *
 * Simulation plumbing, not hardware. SystemC cannot take a timed notification back: a
 * cancelled one stays in the kernel's event heap until its time comes. A QP's ACK timer is
 * stopped whenever everything it sent is acknowledged and started again with the next send,
 * so cancelling it each time left one dead entry per stop, milliseconds ahead: thousands in a
 * long stream, and every event of the simulation paid a deeper heap for them.
 *
 * So a timer with nothing left to time keeps its pending wake-up and *parks* it here. Started
 * again for a later deadline (the usual case), it takes the parked wake-up back without
 * touching the kernel; the wake-up, if it comes, finds nothing due. What must not happen is
 * that a parked wake-up moves the clock: a program waiting in lockstep would see simulated
 * time jump to a deadline nobody has. The engine therefore asks next_activity_ps() rather than
 * the kernel, which cancels parked wake-ups once they are the kernel's next event (by then
 * they are at the top of the heap, where a cancelled entry costs nothing), and never lets one
 * sc_start() run into a parked instant (parked_before()).
 */
#pragma once

#include <cstdint>

namespace hcasim::model {

/** @brief Something that parks its timed wake-up (TimerSet). */
class ParkedWakeOwner {
 public:
  /** @brief Cancel the parked wake-up now: it has become the kernel's next event. */
  virtual void drop_parked_wake() = 0;

 protected:
  ~ParkedWakeOwner() = default;
};

/** @brief Park @p owner's pending wake-up, due at @p at_ps (one per owner). */
void park_wake(ParkedWakeOwner* owner, uint64_t at_ps);
/** @brief Take @p owner's parked wake-up back (it times something again, or it fired). */
void unpark_wake(ParkedWakeOwner* owner);
/** @brief The earliest parked wake-up's time, ~0 if none. */
uint64_t earliest_parked_wake_ps();

/**
 * @brief Simulated time (ps) of the kernel's next event that is not a parked wake-up, ~0 if
 * there is none; parked wake-ups at or before that instant are cancelled on the way. Call with
 * the simulation's lock held, outside sc_start().
 */
uint64_t next_activity_ps();

/**
 * @brief The longest run (ps) from now that stays clear of every parked wake-up: sc_start()
 * processes the events at the end of its duration, so a parked one there would move the clock.
 * Returns @p want when no parked wake-up lies within it.
 */
uint64_t parked_clear_run_ps(uint64_t want);

}  // namespace hcasim::model
