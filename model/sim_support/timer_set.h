// SPDX-License-Identifier: Apache-2.0
/**
 * @file timer_set.h
 * @brief Cancellable per-key timers (a QP's local ACK timeout) on one SystemC event.
 *
 * The common use restarts a timer for a later deadline with every acknowledgement, so that
 * costs one hash lookup: each key's deadline is kept apart from the queue of wake-up times,
 * and a queued wake-up that finds its key's deadline moved later queues the new one then
 * (lazy). Only an earlier deadline queues a wake-up at once. The kernel's event follows the
 * earliest queued time and is re-notified only for an earlier one; when no timer is left, its
 * pending wake-up is parked (parked_wakes.h) rather than cancelled, so the next arm takes it
 * back. A parked wake-up never wakes a waiting program or lets its clock run ahead.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

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
    Slot& s = slots_[key];
    if (s.deadline == kNone) ++live_;
    s.deadline = at_ps;
    if (s.queued == kNone || at_ps < s.queued) queue(key, s, at_ps);
    unpark();
  }
  /** @brief Cancel @p key (no-op if not armed). */
  void cancel(uint32_t key) {
    auto it = slots_.find(key);
    if (it == slots_.end() || it->second.deadline == kNone) return;
    it->second.deadline = kNone;
    if (--live_ == 0) park();
  }
  bool armed(uint32_t key) const {
    auto it = slots_.find(key);
    return it != slots_.end() && it->second.deadline != kNone;
  }

 private:
  static constexpr uint64_t kNone = ~0ull;
  struct Slot {
    uint64_t deadline = kNone;  ///< when the timer fires (kNone: stopped)
    uint64_t queued = kNone;    ///< its earliest wake-up in queue_ (kNone: none)
  };
  using Wake = std::pair<uint64_t, uint32_t>;  ///< (time, key)

  void queue(uint32_t key, Slot& s, uint64_t at_ps) {
    s.queued = at_ps;
    queue_.emplace(at_ps, key);
    if (!running_) follow_queue();
  }
  // Make the kernel's event due at the earliest queued time; a later pending one is moved,
  // an earlier one stays and looks again when it comes.
  void follow_queue() {
    if (queue_.empty()) return;
    const uint64_t at = queue_.top().first;
    if (armed_ && armed_at_ <= at) return;
    const uint64_t now = now_ps();
    wake_.cancel();
    wake_.notify(sc_core::sc_time::from_value(at > now ? at - now : 0));
    armed_ = true;
    armed_at_ = at;
  }
  // A queued wake-up came due: fire its key, queue the key's later deadline, or drop it.
  void due(const Wake& w, uint64_t now) {
    auto it = slots_.find(w.second);
    if (it == slots_.end()) return;
    Slot& s = it->second;
    if (s.queued == w.first) s.queued = kNone;
    if (s.deadline == kNone) return;
    if (s.deadline > now) {
      if (s.queued == kNone || s.deadline < s.queued) queue(w.second, s, s.deadline);
      return;
    }
    s.deadline = kNone;
    --live_;
    fire_(w.second);  // may re-arm
  }
  void run() {
    armed_ = false;
    unpark();
    running_ = true;
    const uint64_t now = now_ps();
    while (!queue_.empty() && queue_.top().first <= now) {
      const Wake w = queue_.top();
      queue_.pop();
      due(w, now);
    }
    running_ = false;
    if (live_ == 0) return park();
    follow_queue();
  }
  // No timer left: everything queued is stale. Keep the kernel's pending wake-up (parked) for
  // the next arm rather than cancel it, which would leave a dead entry in the kernel's heap.
  void park() {
    queue_ = {};
    slots_.clear();  // every deadline is kNone
    if (armed_ && !parked_) {
      park_wake(this, armed_at_);
      parked_ = true;
    }
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

  Fire fire_;
  sc_core::sc_event wake_;
  bool armed_ = false;     ///< wake_ has a pending notification ...
  uint64_t armed_at_ = 0;  ///< ... for this time
  bool parked_ = false;    ///< ... that no timer needs any more (parked_wakes.h)
  bool running_ = false;   ///< in run(): follow the queue once, at the end
  uint64_t live_ = 0;      ///< keys with a deadline
  std::unordered_map<uint32_t, Slot> slots_;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> queue_;
};

}  // namespace hcasim::model
