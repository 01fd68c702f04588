// SPDX-License-Identifier: Apache-2.0
/**
 * @file thread_watch.h
 * @brief Whether a client thread that has gone quiet is asleep, computing, or only waiting for a
 *        CPU: what the lockstep clock needs to know before it lets simulated time move on.
 *
 * The lockstep clock moves on while programs wait in verbs; a thread that has sent the device
 * nothing for the quiet period counts as waiting elsewhere (poll(2) on a channel fd, a sleep) or
 * as computing. Judged by wall time alone, a thread the host's scheduler has merely not run for
 * that long looks the same, and on a host with fewer cores than busy threads that is most quiet
 * periods: simulated time then moves on while the thread is about to post, and the host's
 * scheduling shows up in simulated latencies. The kernel says which it is: the thread's state
 * ('R' when running or ready to run) and the CPU time it has used (/proc/PID/task/TID/schedstat).
 */
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace hcasim::fabric {

/** @brief One client thread's scheduler state, read from /proc. */
class ThreadWatch {
 public:
  struct Sample {
    bool runnable = false;  ///< running or ready to run (not asleep, stopped or gone)
    uint64_t cpu_ns = 0;    ///< CPU time the thread has used
  };

  ThreadWatch() = default;
  ~ThreadWatch();
  ThreadWatch(const ThreadWatch&) = delete;
  ThreadWatch& operator=(const ThreadWatch&) = delete;

  /**
   * @brief Watch thread @p tid of process @p pid. Returns "" on success; otherwise why not, and
   * @p foreign is set when @p tid is not a thread of @p pid (the kernel has no such task), as
   * opposed to /proc being unreadable here.
   */
  std::string open(pid_t pid, pid_t tid, bool& foreign);
  bool watching() const { return stat_fd_ >= 0; }
  /**
   * @brief The thread's state now; nullopt if it cannot be read (the thread has ended). The CPU
   * time is read only for a runnable thread (0 for one asleep).
   */
  std::optional<Sample> sample() const;

  /** @brief A /proc/.../stat line's state: running or ready to run; nullopt if malformed. */
  static std::optional<bool> parse_state(const std::string& stat);
  /** @brief A schedstat line's CPU time in ns; nullopt if malformed. */
  static std::optional<uint64_t> parse_cpu(const std::string& schedstat);

 private:
  void close();
  int stat_fd_ = -1, sched_fd_ = -1;
};

}  // namespace hcasim::fabric
