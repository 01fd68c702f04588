// SPDX-License-Identifier: Apache-2.0
// Starting and stopping the cross-process fabric's device process, build/bin/hcasim-device
// (cli.h).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli.h"
#include "protocol.h"

namespace hcasim::cli {

pid_t start_device(const FabricOptions& f, uint32_t hosts, bool detach, const std::string& log) {
  const std::string dev = self_dir() + "/hcasim-device";
  if (access(dev.c_str(), X_OK) != 0) {
    fail("device program not found at %s (build the hcasim-device target)", dev.c_str());
    return -1;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    const int ready = fcntl(p[1], F_DUPFD, 10);  // without close-on-exec
    if (detach) {
      setsid();
      const int null = open("/dev/null", O_RDONLY);
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      if (null >= 0) dup2(null, 0);
      if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
      }
    }
    const std::string hs = std::to_string(hosts), k = std::to_string(f.hcas_per_host),
                      q = std::to_string(f.quiet_us), r = std::to_string(ready);
    execl(dev.c_str(), dev.c_str(), "--socket", f.socket.c_str(), "--hosts", hs.c_str(), "--hcas-per-host",
          k.c_str(), "--quiet-us", q.c_str(), "--ready-fd", r.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "hcasim: cannot run %s: %s\n", dev.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(p[1]);
  char buf[8] = {};
  ssize_t n;
  do {
    n = read(p[0], buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  close(p[0]);
  if (n <= 0) {  // it exited before listening
    int st = 0;
    waitpid(pid, &st, 0);
    return -1;
  }
  return pid;
}

bool stop_device(const std::string& path) {
  const int fd = fabric::connect_socket(path);
  if (fd < 0) return false;
  fabric::StatusReply r{};
  fabric::MsgHeader h{};
  const bool ok =
      fabric::send_msg(fd, fabric::MsgType::Stop, nullptr, 0) && fabric::recv_msg(fd, h, &r, sizeof r) > 0;
  close(fd);
  return ok;
}

}  // namespace hcasim::cli
