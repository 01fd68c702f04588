// SPDX-License-Identifier: Apache-2.0
// The CM beside the program: the kernel's CM takes each MAD as it arrives and fires its timers
// whatever the program does, so an rdma_cm event channel's descriptor becomes readable by
// itself. This thread does the same for the process's CM. In the lockstep clock and in step
// mode there is none: simulated time moves only inside the program's own calls, and traces
// must repeat, so there the CM runs inside librdmacm's calls (Ucma::get_event waits in it).
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

#include "ib_cm.h"

namespace hcasim::drv::cm {

namespace {

/** What the simulator reads too: the lockstep clock or step mode keep the CM in the program. */
bool service_allowed() {
  const char* clock = std::getenv("HCASIM_CLOCK");
  const char* step = std::getenv("HCASIM_STEP");
  return !(clock && std::strcmp(clock, "lockstep") == 0) && !(step && std::strcmp(step, "1") == 0);
}

// Longest wait without a timer due: a new id's first timer is noticed within it.
constexpr int kServiceWaitMs = 100;

}  // namespace

void Cm::start_service() {
  static std::once_flag once;
  std::call_once(once, [this] {
    if (!service_allowed()) return;
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return;  // the CM still runs inside librdmacm's calls
    service_ = std::thread([this] { serve(); });
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
