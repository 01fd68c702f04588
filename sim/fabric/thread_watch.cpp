// SPDX-License-Identifier: Apache-2.0
#include "thread_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hcasim::fabric {

namespace {
/** @brief The whole of a small /proc file, read again from its start. */
std::optional<std::string> read_all(int fd) {
  char buf[512];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return std::nullopt;
  return std::string(buf, size_t(n));
}
}  // namespace

ThreadWatch::~ThreadWatch() { close(); }

void ThreadWatch::close() {
  if (stat_fd_ >= 0) ::close(stat_fd_);
  if (sched_fd_ >= 0) ::close(sched_fd_);
  stat_fd_ = sched_fd_ = -1;
}

std::string ThreadWatch::open(pid_t pid, pid_t tid, bool& foreign) {
  close();
  foreign = false;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  stat_fd_ = ::open((dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (stat_fd_ < 0) {
    foreign = errno == ENOENT;
    return dir + "/stat: " + std::strerror(errno);
  }
  sched_fd_ = ::open((dir + "/schedstat").c_str(), O_RDONLY | O_CLOEXEC);
  if (sched_fd_ < 0) {
    const std::string why = dir + "/schedstat: " + std::strerror(errno);
    close();
    return why;
  }
  if (!sample() || !read_all(sched_fd_)) {
    close();
    return dir + ": unreadable";
  }
  return "";
}

std::optional<ThreadWatch::Sample> ThreadWatch::sample() const {
  if (stat_fd_ < 0) return std::nullopt;
  const auto stat = read_all(stat_fd_);
  const auto runnable = stat ? parse_state(*stat) : std::nullopt;
  if (!runnable) return std::nullopt;
  // An asleep thread's CPU time is not asked for: one read instead of two (each a system call,
  // and the lockstep device looks at a quiet thread every 50 us).
  if (!*runnable) return Sample{false, 0};
  const auto sched = read_all(sched_fd_);
  const auto cpu = sched ? parse_cpu(*sched) : std::nullopt;
  if (!cpu) return std::nullopt;
  return Sample{true, *cpu};
}

std::optional<bool> ThreadWatch::parse_state(const std::string& stat) {
  // "tid (comm) S ...": the name may hold spaces and parentheses, so the state follows the last ')'.
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size() || stat[close_paren + 1] != ' ')
    return std::nullopt;
  return stat[close_paren + 2] == 'R';
}

std::optional<uint64_t> ThreadWatch::parse_cpu(const std::string& schedstat) {
  // schedstat: "on-CPU ns, run-queue wait ns, time slices".
  char* end = nullptr;
  errno = 0;
  const unsigned long long cpu = std::strtoull(schedstat.c_str(), &end, 10);
  if (end == schedstat.c_str() || errno || (*end != ' ' && *end != '\n')) return std::nullopt;
  return uint64_t(cpu);
}

}  // namespace hcasim::fabric
