// SPDX-License-Identifier: Apache-2.0
/**
 * @file timer_set.h
 * @brief Cancellable per-key timers (a QP's local ACK timeout) on one SystemC event.
 *
 * A re-armed timer leaves nothing behind in the kernel: the event is re-notified only for an
 * earlier deadline. When no timer is left, the pending wake-up is parked (parked_wakes.h)
 * rather than cancelled, so the next arm takes it back; a parked wake-up never wakes a
 * waiting program or lets its clock run ahead.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "parked_wakes.h"
#include "timed_queue.h"

namespace hcasim::model {

class TimerSet final : ParkedWakeOwner {
 public:
  using Fire = std::function<void(uint32_t key)>;

  TimerSet(const std::string& name, Fire fire) : fire_(std::move(fire)) {
    sc_core::sc_spawn_options opts;
    opts.spawn_method();
    opts.set_sensitivity(&wake_);
    opts.dont_initialize();
    sc_core::sc_spawn([this] { run(); }, sc_core::sc_gen_unique_name(name.c_str()), &opts);
  }
  TimerSet(const TimerSet&) = delete;
  TimerSet& operator=(const TimerSet&) = delete;
  ~TimerSet() { unpark(); }

  /** @brief (Re)arm @p key to fire at absolute time @p at_ps. */
  void arm(uint32_t key, uint64_t at_ps) {
    erase(key);
    by_key_[key] = at_ps;
    by_time_.emplace(at_ps, key);
    renotify();
  }
  /** @brief Cancel @p key (no-op if not armed). */
  void cancel(uint32_t key) {
    if (erase(key)) renotify();
  }
  bool armed(uint32_t key) const { return by_key_.count(key) != 0; }

 private:
  bool erase(uint32_t key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return false;
    by_time_.erase({it->second, key});
    by_key_.erase(it);
    return true;
  }
  // Lazy: a deadline that moved later (a timer restarted by an ACK, the common case) keeps the
  // pending notification, which re-checks when it fires. Only an earlier deadline touches the
  // kernel's event queue, and no timer left at all parks the notification instead of cancelling
  // it, so cancelled notifications never pile up in the queue (each one would cost every later
  // insertion a heap sift until its time came).
  void renotify() {
    if (by_time_.empty()) {
      if (armed_ && !parked_) {
        park_wake(this, armed_at_);
        parked_ = true;
      }
      return;
    }
    const uint64_t first = by_time_.begin()->first;
    unpark();
    if (armed_ && armed_at_ <= first) return;
    const uint64_t now = now_ps();
    wake_.cancel();
    wake_.notify(sc_core::sc_time::from_value(first > now ? first - now : 0));
    armed_ = true;
    armed_at_ = first;
  }
  void unpark() {
    if (!parked_) return;
    unpark_wake(this);
    parked_ = false;
  }
  void drop_parked_wake() override {  // the registry has already forgotten it
    parked_ = false;
    wake_.cancel();
    armed_ = false;
  }
  void run() {
    armed_ = false;
    unpark();
    const uint64_t now = now_ps();
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      const uint32_t key = by_time_.begin()->second;
      erase(key);
      fire_(key);  // may re-arm
    }
    renotify();
  }

  Fire fire_;
  sc_core::sc_event wake_;
  bool armed_ = false;     ///< wake_ has a pending notification ...
  uint64_t armed_at_ = 0;  ///< ... for this time
  bool parked_ = false;    ///< ... that no timer needs any more (parked_wakes.h)
  std::map<uint32_t, uint64_t> by_key_;
  std::set<std::pair<uint64_t, uint32_t>> by_time_;
};

}  // namespace hcasim::model
