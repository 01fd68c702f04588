// SPDX-License-Identifier: Apache-2.0
// The CM beside the program: the kernel's CM takes each MAD as it arrives and fires its timers
// whatever the program does, so an rdma_cm event channel's descriptor becomes readable by
// itself. This thread does the same for the process's CM. In the lockstep clock simulated time
// moves only inside the program's own calls and traces must repeat, so the CM runs inside
// librdmacm's calls (Ucma::get_event waits in it), and the thread steps in only for a program
// that has stopped calling librdmacm and the devices (it waits in poll(2)), as the in-process
// device's fallback advances time for such a program. In step mode there is no thread.
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

#include "../kernel/hca_link.h"
#include "ib_cm.h"

namespace hcasim::drv::cm {

namespace {

/** How the CM runs beside the program, from what the simulator reads too. */
enum class Service { None, WhenQuiet, Beside };
Service service_mode() {
  const char* clock = std::getenv("HCASIM_CLOCK");
  const char* step = std::getenv("HCASIM_STEP");
  if (step && std::strcmp(step, "1") == 0) return Service::None;
  return clock && std::strcmp(clock, "lockstep") == 0 ? Service::WhenQuiet : Service::Beside;
}

// Longest wait without a timer due: a new id's first timer is noticed within it.
constexpr int kServiceWaitMs = 100;

}  // namespace

void Cm::start_service() {
  static std::once_flag once;
  std::call_once(once, [this] {
    const Service mode = service_mode();
    if (mode == Service::None) return;
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return;  // the CM still runs inside librdmacm's calls
    service_ = std::thread([this, mode] { mode == Service::Beside ? serve() : serve_when_quiet(); });
    std::atexit([] { Cm::get().stop_service(); });
  });
}

void Cm::serve() {
  while (!stop_.load(std::memory_order_acquire)) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    uint64_t next;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      next = collect_waits(fds);
    }
    poll(fds.data(), nfds_t(fds.size()), cm_wait_ms(next, kServiceWaitMs));
    uint64_t drained;
    if (read(wake_fd_, &drained, sizeof drained) < 0) { /* not woken: a MAD or a timer */
    }
    std::lock_guard<std::recursive_mutex> g(mu_);
    for (auto& [dev, a] : agents_) a->take_events();
    progress();
  }
}

void Cm::program_call(bool begins) {
  if (!begins) {
    calls_in_.fetch_sub(1, std::memory_order_release);
    return;
  }
  calls_in_.fetch_add(1, std::memory_order_acquire);
  calls_made_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Cm::activity() const {
  // Each term only grows, so the sum changes whenever one of them does.
  uint64_t v = calls_made_.load(std::memory_order_relaxed);
  for (auto& [dev, a] : agents_) v += a->link().activity_stamp();
  return v;
}

bool Cm::work_waiting() const {
  const uint64_t next = next_deadline();
  if (next && next <= cm_now_ns()) return true;
  for (auto& [dev, a] : agents_)
    if (a->has_completion()) return true;
  return false;
}

void Cm::serve_when_quiet() {
  // Acts only after a whole quiet period with no librdmacm command in progress or begun and no
  // call into a device (this thread's own calls end a period too). It looks first and calls
  // progress() only when a MAD or a timer waits: a look moves no simulated time and leaves no
  // trace, so a program that keeps calling librdmacm and the devices gets the trace it always did.
  uint64_t seen = ~0ull;
  auto quiet_since = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd wake{wake_fd_, POLLIN, 0};
    if (poll(&wake, 1, int(kQuietPeriod.count())) > 0) {
      uint64_t drained;
      if (read(wake_fd_, &drained, sizeof drained) < 0) { /* another reader took it */
      }
    }
    std::unique_lock<std::recursive_mutex> g(mu_, std::try_to_lock);
    if (!g.owns_lock()) continue;  // a program thread is in the CM: not quiet
    const auto now = std::chrono::steady_clock::now();
    const uint64_t a = activity();
    if (a != seen || calls_in_.load(std::memory_order_acquire) > 0) {
      seen = a;
      quiet_since = now;
      continue;
    }
    if (now - quiet_since < kQuietPeriod || !work_waiting()) continue;
    for (auto& [dev, agent] : agents_) agent->take_events();
    progress();
    seen = activity();
    quiet_since = std::chrono::steady_clock::now();
  }
}

void Cm::stop_service() {
  stop_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) { /* the thread notices stop_ within its wait */
  }
  // Joined if it ends soon; a thread stuck behind a program thread that exits holding the CM's
  // lock is left to the process's end rather than hanging it.
  std::promise<void> joined;
  std::future<void> done = joined.get_future();
  std::thread([this, j = std::move(joined)]() mutable {
    service_.join();
    j.set_value();
  }).detach();
  done.wait_for(std::chrono::milliseconds(500));
}

}  // namespace hcasim::drv::cm
