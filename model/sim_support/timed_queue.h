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

#include "ring.h"

namespace hcasim::model {

/** @brief Current simulated time in picoseconds. (Read inline: the model asks dozens of times
 *  per packet, and sc_time_stamp() is a call into the library each time.) */
inline uint64_t now_ps() { return sc_core::sc_get_curr_simcontext()->time_stamp().value(); }

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
    const bool earliest = at_ps < next_due();
    // Most units' items come due in the order they are pushed (a pipeline stage, a link's
    // flights): those go to a FIFO, and only an item due before the FIFO's last to the heap.
    if (fifo_.empty() || fifo_.back().at <= at_ps)
      fifo_.push_back(Entry{at_ps, seq_++, std::move(item)});
    else
      heap_.push(Entry{at_ps, seq_++, std::move(item)});
    // Only a new earliest item moves the wake-up; re-notifying for later ones would leave
    // cancelled timed notifications for the kernel to sift through.
    if (earliest && !(armed_ && armed_at_ <= at_ps)) {
      wake_.notify(sc_core::sc_time::from_value(at_ps - now));
      armed_ = true;
      armed_at_ = at_ps;
    }
  }
  bool empty() const { return fifo_.empty() && heap_.empty(); }
  size_t size() const { return fifo_.size() + heap_.size(); }

 private:
  struct Entry {
    uint64_t at = 0;
    uint64_t seq = 0;
    mutable T item{};
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  /** The due time of the first item, ~0 when there is none. */
  uint64_t next_due() const {
    uint64_t t = ~0ull;
    if (!fifo_.empty()) t = fifo_.front().at;
    if (!heap_.empty() && heap_.top().at < t) t = heap_.top().at;
    return t;
  }

  /** Takes the first item (due time, then push order) out of whichever holds it. */
  T take_first() {
    if (heap_.empty() || (!fifo_.empty() && heap_.top() > fifo_.front())) {
      T item = std::move(fifo_.front().item);
      fifo_.pop_front();
      return item;
    }
    T item = std::move(heap_.top().item);
    heap_.pop();
    return item;
  }

  void run() {
    armed_ = false;
    uint64_t now = now_ps();
    while (next_due() <= now) {
      T item = take_first();
      handler_(item);
    }
    if (!empty()) {
      const uint64_t at = next_due();
      wake_.notify(sc_core::sc_time::from_value(at - now));
      armed_ = true;
      armed_at_ = at;
    }
  }

  Handler handler_;
  sc_core::sc_event wake_;
  Ring<Entry> fifo_;  ///< items in due order, pushed that way
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;  ///< the others
  uint64_t seq_ = 0;
  bool armed_ = false;     ///< wake_ has a pending notification ...
  uint64_t armed_at_ = 0;  ///< ... for this time
};

}  // namespace hcasim::model
