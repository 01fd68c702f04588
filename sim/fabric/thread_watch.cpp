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
  if (!sample()) {
    close();
    return dir + ": unreadable";
  }
  return "";
}

std::optional<ThreadWatch::Sample> ThreadWatch::sample() const {
  if (stat_fd_ < 0) return std::nullopt;
  const auto stat = read_all(stat_fd_);
  const auto sched = stat ? read_all(sched_fd_) : std::nullopt;
  if (!stat || !sched) return std::nullopt;
  return parse(*stat, *sched);
}

std::optional<ThreadWatch::Sample> ThreadWatch::parse(const std::string& stat, const std::string& schedstat) {
  // "tid (comm) S ...": the name may hold spaces and parentheses, so the state follows the last ')'.
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size() || stat[close_paren + 1] != ' ')
    return std::nullopt;
  const char state = stat[close_paren + 2];
  // schedstat: "on-CPU ns, run-queue wait ns, time slices".
  char* end = nullptr;
  errno = 0;
  const unsigned long long cpu = std::strtoull(schedstat.c_str(), &end, 10);
  if (end == schedstat.c_str() || errno || (*end != ' ' && *end != '\n')) return std::nullopt;
  return Sample{state == 'R', uint64_t(cpu)};
}

}  // namespace hcasim::fabric
