// SPDX-License-Identifier: Apache-2.0
#include "engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <systemc>

#include "dma_engine.h"
#include "parked_wakes.h"

// libsystemc references sc_main; programs that load the simulator never call it.
int sc_main(int, char**) { return 1; }

namespace hcasim::sim {

namespace {
/// Auto clock: this thread has been counted as a user of the device.
thread_local bool t_counted = false;
/// This thread is inside the kernel (sc_start): what an interrupt handler does there happens at
/// the current instant; the kernel cannot be restarted from within.
thread_local bool t_in_kernel = false;
/// Marks the calling thread as inside the kernel for a scope (every sc_start goes through one).
struct InKernel {
  InKernel() { t_in_kernel = true; }
  ~InKernel() { t_in_kernel = false; }
  InKernel(const InKernel&) = delete;
  InKernel& operator=(const InKernel&) = delete;
};
}  // namespace

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

uint64_t Engine::mono_ns() { return mono_now_ns(); }

uint64_t Engine::now_ps() const { return sc_core::sc_time_stamp().value(); }

uint64_t Engine::command_done_ns(uint64_t busy_ps) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (!realtime() || busy_ps == 0) return 0;
  ++commands_timed_;
  command_ps_total_ += busy_ps;
  return wall_.wall_at(now_ps() + busy_ps);
}

void Engine::ensure_started() {
  if (started_) return;
  started_ = true;
  InKernel k;
  sc_core::sc_start(sc_core::SC_ZERO_TIME);  // end of elaboration, time 0
}

bool Engine::pending() {
  std::lock_guard<std::recursive_mutex> g(mu_);
  ensure_started();
  return next_event_ps() != ~0ull;
}

// Timed wake-ups that no longer matter (parked_wakes.h) are not the model's next event.
uint64_t Engine::next_event_ps() const { return model::next_activity_ps(); }

bool Engine::step() {
  const uint64_t next = next_event_ps();
  if (next == ~0ull) return false;
  run_to(next);
  ++steps_;
  return true;
}

bool Engine::run_until_visible(uint64_t* pace_ns, uint64_t unwatched_until_ns) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  // Drain the activity fd only when it was kicked: an empty poll comes here every time, and a
  // read(2) per poll cost a polling program a third of its time.
  if (kicked_.exchange(false, std::memory_order_acq_rel)) {
    uint64_t drain;
    if (read(efd_, &drain, sizeof drain) < 0) { /* another reader drained it */
    }
  }
  ensure_started();
  uint64_t next = next_event_ps();
  if (next == ~0ull) return false;
  // One sc_start() runs until the first software-visible effect pauses the kernel at the end
  // of that delta cycle, until nothing is left to do (starvation: time does not jump), or for
  // at most one wait quantum of simulated time: a device retrying forever (RNR retry 7, a lost
  // peer) shows nothing to software, and the program must get control back to decide.
  auto& any = model::host_visible_epoch();
  const uint64_t start_epoch = model::watched_visible_epoch();
  uint64_t seen_any = any.load(std::memory_order_relaxed);
  const uint64_t deadline = now_ps() + kWaitQuantumPs;
  InKernel k;
  model::pause_on_visible(true);
  // (The epoch is checked before the next event is asked for: a wait usually ends on news.)
  while (model::watched_visible_epoch() == start_epoch && next != ~0ull) {
    const uint64_t now = now_ps();
    if (now >= deadline) break;
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
    // nothing is left before the deadline, and never runs into a parked wake-up.
    const uint64_t run = model::parked_clear_run_ps(deadline - now);
    sc_core::sc_start(sc_core::sc_time::from_value(run), sc_core::SC_EXIT_ON_STARVATION);
    if (model::watched_visible_epoch() != start_epoch) break;
    // Only writes nobody looks for: go on, unless that has lasted long enough on the wall clock.
    if (any.load(std::memory_order_relaxed) != seen_any) {
      if (mono_ns() >= unwatched_until_ns) break;
      seen_any = any.load(std::memory_order_relaxed);
    }
    next = next_event_ps();
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

thread_local uint64_t Engine::t_seen_kicks = 0;

void Engine::kick() {
  // Counted before the waiters are read, and waiters register before reading the count
  // (wait_activity): one of the two sides sees the other, so no wake-up is lost.
  kicks_.fetch_add(1, std::memory_order_seq_cst);
  if (!realtime() && waiters_.load(std::memory_order_seq_cst) == 0) return;
  uint64_t one = 1;
  if (write(efd_, &one, sizeof one) < 0) { /* counter saturated: already readable */
  }
  // After the write: whoever sees the flag finds the fd readable (see run_until_visible).
  kicked_.store(true, std::memory_order_release);
}

void Engine::wait_activity(std::vector<pollfd>& fds, int timeout_ms) {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  const uint64_t kicks = kicks_.load(std::memory_order_seq_cst);
  if (kicks == t_seen_kicks) {
    fds.push_back({efd_, POLLIN, 0});
    poll(fds.data(), nfds_t(fds.size()), timeout_ms);
    fds.pop_back();
  }
  t_seen_kicks = kicks;  // a kick seen here is news once, not on every later wait
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void Engine::start_idle_advancer(uint32_t quiet_us) {
  if (idle_started_) return;
  idle_started_ = true;
  quiet_us_ = quiet_us;
  // Started in every mode, even when it only sleeps (lockstep with quiet_us 0): the program's
  // heap then looks the same in every mode, and its buffer addresses, which traces show, do not
  // differ.
  idle_ = std::thread([this] { device_thread(); });
  idle_.detach();
}

void Engine::device_thread() {
  t_counted = true;               // interrupt handlers it runs are not a program thread of their own
  prctl(PR_SET_TIMERSLACK, 1UL);  // realtime: wake when the next event is due, not 50 us later
  bool ran = false;
  while (!idle_stop_.load()) {
    if (realtime()) {
      realtime_round();
    } else if (quiet_us_ == 0) {
      std::unique_lock<std::mutex> l(wake_mu_);
      wake_.wait_for(l, std::chrono::milliseconds(100));
    } else {
      idle_round(ran);
    }
  }
}

void Engine::idle_round(bool& ran) {
  // While the programs stay quiet and work is in flight, the advancer keeps stepping (each
  // step still ends at a visible effect, so a program sleeping in poll(2) wakes on the
  // interrupt and takes over): like hardware, the device does not stop between events just
  // because nobody calls into it. Only an idle one waits for a doorbell or the period.
  if (!ran && kicks_.load(std::memory_order_seq_cst) == idle_seen_kicks_) {
    // No doorbell since the model last ran here: wait for one, or the period.
    t_seen_kicks = idle_seen_kicks_;
    std::vector<pollfd> none;
    wait_activity(none, int(quiet_us_ / 1000 + 1));
  }
  ran = false;
  const uint64_t period = uint64_t(quiet_us_) * 1000;
  const uint64_t quiet = mono_ns() - last_call_ns_.load(std::memory_order_relaxed);
  if (quiet < period) {
    // Not quiet yet: sleep out the rest of the period, by the clock rather than on the
    // activity fd, so the program's doorbells need not wake this thread (and a program that
    // keeps calling verbs cannot make it spin).
    std::this_thread::sleep_for(std::chrono::nanoseconds(period - quiet));
    return;
  }
  idle_seen_kicks_ = kicks_.load(std::memory_order_seq_cst);
  std::unique_lock<std::recursive_mutex> g(mu_, std::try_to_lock);
  if (!g.owns_lock()) {  // a program is in a wait and drives the kernel itself
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    return;
  }
  uint64_t pace = 0;
  if (next_event_ps() != ~0ull) ran = run_until_visible(&pace) && !pace;
  g.unlock();
  if (pace) std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(pace, 1'000'000)));
}

void Engine::realtime_round() {
  // Hold the lock for one slice of simulated time at most, so a program ringing a doorbell
  // waits for a slice, not for the whole backlog.
  uint64_t wait_ns = run_due(kRealtimeSlicePs);
  if (wait_ns == 0 && !want_.load(std::memory_order_relaxed)) {
    std::this_thread::yield();
    return;
  }
  // A program took the lock: it brings the model up to its own instant (sync_to_wall), so step
  // aside for a moment rather than contend for the lock with it at every turn.
  if (wait_ns == 0) wait_ns = kStepAsideNs;
  // Nap until the next event is due or a doorbell kicks the activity fd.
  const uint64_t nap = std::min<uint64_t>(wait_ns, 10'000'000);
  pollfd p{efd_, POLLIN, 0};
  timespec ts{time_t(nap / 1'000'000'000), long(nap % 1'000'000'000)};
  if (ppoll(&p, 1, &ts, nullptr) > 0) {
    uint64_t drain;
    if (read(efd_, &drain, sizeof drain) < 0) { /* another reader drained it */
    }
  }
}

void Engine::stop_idle_advancer() {
  idle_stop_.store(true);
  wake_.notify_all();
}

void Engine::set_clock(ClockMode m) {
  requested_ = m;
  if (m == ClockMode::Realtime) go_realtime("--clock realtime");
}

void Engine::go_realtime(const std::string& why) {
  {
    std::lock_guard<std::recursive_mutex> g(mu_);
    if (realtime()) return;
    ensure_started();
    wall_.start(now_ps(), mono_ns());
    switch_ps_ = now_ps();
    switch_why_ = why;
    realtime_.store(true, std::memory_order_release);
    if (on_switch_) on_switch_(why);
  }
  wake_.notify_all();
  kick();
}

void Engine::note_thread() {
  if (requested_ != ClockMode::Auto || realtime()) return;
  if (t_counted) return;
  t_counted = true;
  if (threads_.fetch_add(1) >= 1) go_realtime("a second thread uses the device");
}

void Engine::run_to(uint64_t t) {
  // An interrupt handler runs inside the kernel and may ring a doorbell (re-arming its EQ):
  // that happens at the current instant.
  if (t_in_kernel) return;
  InKernel k;
  const uint64_t now = now_ps();
  if (t > now) {
    // A kernel that runs out of events before t does not move its clock there; an event at t
    // makes it (a doorbell rung after 20 us of computation must land 20 us later even when
    // nothing happened in between).
    static sc_core::sc_event* tick = new sc_core::sc_event;  // the kernel outlives every Engine user
    if (next_event_ps() != t) tick->notify(sc_core::sc_time::from_value(t - now));
    sc_core::sc_start(sc_core::sc_time::from_value(t - now));
  }
  // sc_start(d) stops before the events due at the new time; run those delta cycles now.
  while (sc_core::sc_pending_activity_at_current_time()) sc_core::sc_start(sc_core::SC_ZERO_TIME);
}

uint64_t Engine::wall_target(uint64_t wall_ns) {
  return std::max(now_ps(), wall_.target(next_event_ps(), wall_ns));
}

bool Engine::in_kernel_thread() { return t_in_kernel; }

void Engine::run_ahead(uint64_t lead_ps) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (t_in_kernel) return;
  const uint64_t limit = now_ps() + lead_ps;
  for (uint64_t next = next_event_ps(); next <= limit; next = next_event_ps()) run_to(next);
}

void Engine::post_work(std::function<void()> fn) {
  std::lock_guard<std::mutex> g(posted_mu_);
  posted_.push_back({mono_ns(), std::move(fn)});
}

void Engine::apply_posted() {
  {
    std::lock_guard<std::mutex> g(posted_mu_);
    if (posted_.empty()) return;
    applying_.swap(posted_);
  }
  for (const PostedWork& w : applying_) {
    run_to(wall_target(w.rung_ns));
    w.fn();
  }
  applying_.clear();
}

bool Engine::sync_to_wall(uint64_t wall_ns) {
  if (!realtime()) return false;
  std::lock_guard<std::recursive_mutex> g(mu_);
  ensure_started();
  const sc_dt::uint64 deltas = sc_core::sc_delta_count();
  if (!t_in_kernel) apply_posted();
  run_to(wall_target(wall_ns ? wall_ns : mono_ns()));
  return sc_core::sc_delta_count() != deltas;
}

uint64_t Engine::run_due(uint64_t slice_ps) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  const uint64_t wait = run_due_locked(slice_ps);
  // The caller naps until the next event unless kicked (0: it does not nap at all).
  nap_until_ps_.store(wait == 0 ? 0 : next_event_ps(), std::memory_order_relaxed);
  return wait;
}

bool Engine::kick_needed() {
  // Lockstep: the idle advancer's quiet period counts from the last doorbell. Realtime: only
  // work due before the device thread's planned wake-up needs it awake (a wake-up costs a
  // system call here and a contended device lock there).
  return !realtime() || next_event_ps() < nap_until_ps_.load(std::memory_order_relaxed);
}

uint64_t Engine::run_due_locked(uint64_t slice_ps) {
  ensure_started();
  apply_posted();
  const uint64_t now = now_ps();
  const uint64_t target = wall_target(mono_ns());
  const uint64_t limit = std::min(target, now + slice_ps);
  while (now_ps() < limit) {
    run_to(std::min(limit, now_ps() + kRealtimePiecePs));
    if (want_.load(std::memory_order_relaxed)) return 0;  // a program waits for the lock: let it in
  }
  if (now_ps() < target) return 0;  // the slice ended before the wall-clock instant
  const uint64_t next = next_event_ps();
  if (next == ~0ull) return ~0ull;
  // What is due within the lead runs now (a thread cannot nap that precisely).
  if (next <= target + kLeadPs) {
    run_to(next);
    ++steps_;
    return 0;
  }
  const uint64_t due = wall_.wall_at(next - kLeadPs), wall = mono_ns();
  return due > wall ? due - wall : 0;
}

std::string Engine::clock_report() {
  std::lock_guard<std::recursive_mutex> g(mu_);
  std::string s = std::string("clock: ") + clock_mode_name(requested_);
  if (!realtime()) return s + " (lockstep throughout)";
  const uint64_t now = now_ps(), wall = mono_ns();
  char b[320];
  if (requested_ == ClockMode::Auto)
    std::snprintf(b, sizeof b, ", realtime from %.3f us (%s)", double(switch_ps_) / 1e6, switch_why_.c_str());
  else
    b[0] = 0;
  s += b;
  std::snprintf(b, sizeof b,
                ": %.6f simulated s in %.6f wall s (%.3f simulated s per wall s; %.3f us of simulated time "
                "given up where the model could not keep up)",
                double(now - wall_.start_sim_ps()) / 1e12, double(wall - wall_.start_wall_ns()) / 1e9,
                wall_.sim_per_wall(now, wall), double(wall_.slip_ps()) / 1e6);
  s += b;
  std::snprintf(b, sizeof b, "; %" PRIu64 " firmware commands, %.1f us of command time", commands_timed_,
                double(command_ps_total_) / 1e6);
  return s + b;
}
}  // namespace hcasim::sim
