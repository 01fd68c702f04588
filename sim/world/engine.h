// SPDX-License-Identifier: Apache-2.0
/**
 * @file engine.h
 * @brief Drives the SystemC kernel for programs that run on wall time, in one of the time
 *        models of clock.h.
 *
 * Lockstep: simulated time advances only while a program waits in a verbs call (empty
 * poll_cq, blocking ibv_get_cq_event, ...) or, as a fallback for programs that wait outside
 * verbs (spinning on memory, sleeping in poll(2) on the channel fd), after a quiet period with
 * no verbs calls. Doorbells are stamped with the current simulated time. So a single-threaded
 * program that waits through verbs calls produces the same simulated history — and the same
 * trace — on every run.
 *
 * Realtime: the engine's device thread runs the kernel beside the programs, delivering what is
 * due by the wall clock (WallCoupling); doorbells and commands first bring the model up to the
 * wall-clock instant, so software time counts.
 *
 * The kernel runs on whichever thread needs progress, under one recursive mutex (the model
 * is only ever touched with it held); interrupt handlers run inside that step.
 */
#pragma once

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clock.h"

namespace hcasim::sim {

/// Longest simulated time one wait may advance without a software-visible effect (100 us).
constexpr uint64_t kWaitQuantumPs = 100'000'000;
/// Realtime: the longest stretch of simulated time the device thread runs under the lock (20 us).
constexpr uint64_t kRealtimeSlicePs = 20'000'000;
/** @brief Realtime: how long the device thread naps when a program wants the device lock (it runs the model
 * itself meanwhile). */
constexpr uint64_t kStepAsideNs = 20'000;
/// Realtime: within a slice, a program thread waiting for the lock gets it after at most this much (1 us).
constexpr uint64_t kRealtimePiecePs = 1'000'000;

class Engine {
 public:
  static Engine& instance();

  /** @brief The device lock: hold it to touch any model state. */
  std::recursive_mutex& mutex() { return mu_; }
  /**
   * @brief The device lock as a program thread takes it (a verbs call): in realtime the device
   * thread ends its slice early for it, as a real CPU never waits for the HCA to finish work.
   */
  class ProgramLock {
   public:
    explicit ProgramLock(Engine& e) : e_(e) {
      e_.want_.fetch_add(1, std::memory_order_relaxed);
      e_.mu_.lock();
      e_.want_.fetch_sub(1, std::memory_order_relaxed);
    }
    ~ProgramLock() { e_.mu_.unlock(); }
    ProgramLock(const ProgramLock&) = delete;
    ProgramLock& operator=(const ProgramLock&) = delete;

   private:
    Engine& e_;
  };
  /** @brief Run @p f with the device lock held. */
  template <typename F>
  void locked(F&& f) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    f();
  }

  /**
   * @brief Run the simulation until the device wrote host memory or raised an interrupt
   * (something software can observe), until nothing is pending, or for one wait quantum.
   * Returns true if anything ran.
   *
   * Pacing: when nothing at all happens within the quantum (only a timer further out: a
   * retransmission, an RNR retry), simulated time crosses that idle gap no faster than wall
   * time. A timeout of 67 ms then takes 67 ms for the programs too, so a peer that is merely
   * slow to reach RTR (a thread or process still reading a store) is in time, as on real
   * hardware. If pacing held time back, @p pace_ns (when given) is set to the wall time to
   * wait before calling again; the caller sleeps without the device lock.
   *
   * A write software is not looking for (model::HostMemory::watched(): on a fabric, into a
   * process whose threads all sleep) ends the run only once the wall clock passes
   * @p unwatched_until_ns; with the default, 0, every write does.
   */
  bool run_until_visible(uint64_t* pace_ns = nullptr, uint64_t unwatched_until_ns = 0);
  /** @brief Pace idle gaps at wall-clock speed (default on; HCASIM_PACE=0 turns it off). */
  void set_pacing(bool on) { pacing_ = on; }
  /** @brief Run until nothing is pending or simulated time passes @p limit_ps. */
  void run_until_idle(uint64_t limit_ps = ~0ull);
  /**
   * @brief A program just issued device work (doorbell): wake waiters. In lockstep only a
   * thread blocked in wait_activity() needs waking, so without one this is a counter increment,
   * not a system call (the idle advancer keeps the quiet period by its own clock).
   */
  void kick();
  /**
   * @brief Block in poll(2) on @p fds and the activity fd for up to @p timeout_ms, unless a
   * kick() came after the calling thread's last run_until_visible()/wait start (then return at
   * once: the work it announced may be what the caller waits for). Leaves @p fds as it was.
   */
  void wait_activity(std::vector<pollfd>& fds, int timeout_ms);
  /** @brief The calling thread is about to look for device work: kicks from now on count as news. */
  void note_looking() { t_seen_kicks = kicks_.load(std::memory_order_seq_cst); }
  /** @brief Under the device lock, after new work: does the device thread need a kick()? */
  bool kick_needed();
  /** @brief Readable after a kick() that woke someone (lockstep: a thread in wait_activity; realtime: any);
   * run_until_visible() drains it. */
  int activity_fd() const { return efd_; }
  /** @brief Note that a program is active in verbs (resets the quiet-period clock). */
  void note_call() { last_call_ns_.store(mono_ns(), std::memory_order_relaxed); }
  /** @brief When a program last called into the device (mono_ns()), 0 before the first call. */
  uint64_t last_call_ns() const { return last_call_ns_.load(std::memory_order_relaxed); }
  uint64_t now_ps() const;
  /** @brief True if the model has anything scheduled (an event at any future time). */
  bool pending();

  /**
   * @brief Start the fallback advancer: after @p quiet_us without verbs calls, advance to the
   * next visible event. 0 disables it (strictly program-driven time).
   */
  void start_idle_advancer(uint32_t quiet_us);
  void stop_idle_advancer();

  /** @name Time model (clock.h)
   *  @{ */
  /** @brief The mode asked for; realtime starts at once, auto waits for a second user. */
  void set_clock(ClockMode m);
  ClockMode clock_requested() const { return requested_; }
  /** @brief True once the device runs on the wall clock. */
  bool realtime() const { return realtime_.load(std::memory_order_acquire); }
  /** @brief Switch to realtime now (auto: a second thread or process uses the device). */
  void go_realtime(const std::string& why);
  /**
   * @brief Auto mode: note that the calling thread uses the device; the second distinct
   * thread switches the run to realtime.
   */
  void note_thread();
  /**
   * @brief Realtime: run what is due up to the wall-clock instant @p wall_ns (0: now) and move
   * simulated time there, so what the caller does next (a doorbell, a command) happens at that
   * instant. Callers pass the time the program rang, taken before waiting for the lock: a
   * device busy with earlier work delays its handling, not the software's clock. Returns true if
   * any event ran. Does nothing in lockstep. Takes the lock.
   */
  bool sync_to_wall(uint64_t wall_ns = 0);
  /**
   * @brief Realtime: run what is due by the wall clock (plus kLeadPs), at most @p slice_ps of
   * simulated time. Returns the wall time in ns until the next event is due (0: more is due
   * now; ~0: nothing is scheduled). Takes the lock.
   */
  uint64_t run_due(uint64_t slice_ps);
  uint64_t run_due_locked(uint64_t slice_ps);
  /**
   * @brief Realtime: run the events due within @p lead_ps of now at once (the consequences of a
   * doorbell just rung: its packets, the ACK, the CQE, the interrupt), leaving the clock at the
   * last of them. Takes the lock.
   */
  void run_ahead(uint64_t lead_ps);
  /**
   * @brief Realtime: work a program hands the device without waiting for the lock (a driver
   * trace line), done in order, at the simulated instant it was handed over, by whichever thread
   * next runs the kernel. No kick: it wakes nobody.
   */
  void post_work(std::function<void()> fn);
  /** @brief True on a thread that is inside the kernel (an interrupt handler). */
  static bool in_kernel_thread();
  /** @brief The clock line of --stats ("clock: realtime, 0.41 simulated s per wall s, ..."). */
  std::string clock_report();
  /** @brief Register @p f to hear when the run goes realtime (the trace notes it, hazards word it). */
  void on_clock_switch(std::function<void(const std::string& why)> f) { on_switch_ = std::move(f); }
  /** @} */

  uint64_t steps() const { return steps_; }
  /** @brief Monotonic wall clock in ns (quiet periods, pacing). */
  static uint64_t mono_ns();
  /**
   * @brief Realtime: the monotonic wall time (ns) at which a firmware command issued now and
   * taking @p busy_ps is done; 0 in lockstep, where commands take no time. Counted for --stats.
   * The caller waits for it without the lock (wait_until_mono_ns).
   */
  uint64_t command_done_ns(uint64_t busy_ps);

 private:
  Engine();
  ~Engine();
  bool step();
  void ensure_started();
  /** @brief When the earliest scheduled event is due (~0: none). Under the lock. */
  uint64_t next_event_ps() const;
  /** @brief Run every event due before @p t, move time to @p t, run its delta cycles. */
  void run_to(uint64_t t);
  /** @brief Realtime: do the posted work (under the lock). */
  void apply_posted();
  /** @brief Realtime: the simulated instant the wall clock stands for now (never in the past). */
  uint64_t wall_target(uint64_t wall_ns);
  void device_thread();
  /** @brief Lockstep fallback: one round of the quiet-period advancer. */
  void idle_round(bool& ran);
  /** @brief Realtime: one round of the device thread (run what is due, sleep until more is). */
  void realtime_round();

  std::recursive_mutex mu_;
  int efd_ = -1;
  std::atomic<bool> kicked_{false};           ///< efd_ may be readable: run_until_visible drains it
  std::atomic<uint64_t> kicks_{0};            ///< kick() calls so far (news for a thread about to block)
  std::atomic<int> waiters_{0};               ///< threads blocked in wait_activity (lockstep kicks wake them)
  uint64_t idle_seen_kicks_ = 0;              ///< kicks_ when the idle advancer last ran the model
  static thread_local uint64_t t_seen_kicks;  ///< kicks_ when this thread last looked for work
  bool started_ = false;
  uint64_t steps_ = 0;
  std::atomic<uint64_t> last_call_ns_{0};
  std::thread idle_;
  std::atomic<bool> idle_stop_{false};
  uint32_t quiet_us_ = 0;
  bool idle_started_ = false;
  bool pacing_ = true;
  bool idle_gap_ = false;                        ///< crossing an idle gap (pacing)
  uint64_t gap_sim0_ps_ = 0, gap_wall0_ns_ = 0;  ///< where and when the gap began
  ClockMode requested_ = ClockMode::Auto;
  std::atomic<bool> realtime_{false};
  WallCoupling wall_;            ///< realtime: simulated time against wall time (under the lock)
  std::atomic<int> threads_{0};  ///< auto: distinct threads that used the device
  std::atomic<int> want_{0};     ///< program threads waiting for the lock (ProgramLock)
  std::atomic<uint64_t> nap_until_ps_{~0ull};  ///< realtime: the next event the device thread naps for
  struct PostedWork {
    uint64_t rung_ns;
    std::function<void()> fn;
  };
  std::mutex posted_mu_;  ///< guards posted_ only (taken briefly, never with mu_ inside)
  std::vector<PostedWork> posted_, applying_;
  uint64_t commands_timed_ = 0,
           command_ps_total_ = 0;  ///< realtime: firmware commands charged (under the lock)
  std::string switch_why_;
  uint64_t switch_ps_ = 0;
  std::function<void(const std::string&)> on_switch_;
  std::mutex wake_mu_;
  std::condition_variable wake_;  ///< the device thread's nap when it has nothing to do
};

}  // namespace hcasim::sim
