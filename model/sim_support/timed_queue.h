// SPDX-License-Identifier: Apache-2.0
/**
 * @file timed_queue.h
 * @brief A unit's input: items that become due at a simulated time, handled by one SystemC
 *        method process that wakes once per distinct due time.
 *
 * Ties are broken by insertion order, so the simulation is deterministic. Processes are
 * spawned (sc_spawn), not declared in an sc_module, so HCAs can be created after the
 * simulation started (hosts joining a running fabric).
 */
#pragma once

#ifndef SC_INCLUDE_DYNAMIC_PROCESSES
#define SC_INCLUDE_DYNAMIC_PROCESSES
#endif
#include <systemc>

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

namespace hcasim::model {

/** @brief Current simulated time in picoseconds. */
inline uint64_t now_ps() { return sc_core::sc_time_stamp().value(); }

template <typename T>
class TimedQueue {
 public:
  using Handler = std::function<void(T&)>;

  TimedQueue(const std::string& name, Handler handler) : handler_(std::move(handler)) {
    sc_core::sc_spawn_options opts;
    opts.spawn_method();
    opts.set_sensitivity(&wake_);
    opts.dont_initialize();
    sc_core::sc_spawn([this] { run(); }, sc_core::sc_gen_unique_name(name.c_str()), &opts);
  }
  TimedQueue(const TimedQueue&) = delete;
  TimedQueue& operator=(const TimedQueue&) = delete;

  /** @brief Make @p item due at absolute time @p at_ps (clamped to now). */
  void push(uint64_t at_ps, T item) {
    uint64_t now = now_ps();
    if (at_ps < now) at_ps = now;
    const bool earliest = heap_.empty() || at_ps < heap_.top().at;
    heap_.push(Entry{at_ps, seq_++, std::move(item)});
    // Only a new earliest item moves the wake-up; re-notifying for later ones would leave
    // cancelled timed notifications for the kernel to sift through.
    if (earliest && !(armed_ && armed_at_ <= at_ps)) {
      wake_.notify(sc_core::sc_time::from_value(at_ps - now));
      armed_ = true;
      armed_at_ = at_ps;
    }
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

 private:
  struct Entry {
    uint64_t at;
    uint64_t seq;
    mutable T item;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void run() {
    armed_ = false;
    uint64_t now = now_ps();
    while (!heap_.empty() && heap_.top().at <= now) {
      T item = std::move(heap_.top().item);
      heap_.pop();
      handler_(item);
    }
    if (!heap_.empty()) {
      wake_.notify(sc_core::sc_time::from_value(heap_.top().at - now));
      armed_ = true;
      armed_at_ = heap_.top().at;
    }
  }

  Handler handler_;
  sc_core::sc_event wake_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  uint64_t seq_ = 0;
  bool armed_ = false;     ///< wake_ has a pending notification ...
  uint64_t armed_at_ = 0;  ///< ... for this time
};

}  // namespace hcasim::model
