// SPDX-License-Identifier: Apache-2.0
#include "protocol.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hcasim::fabric {

std::string default_socket_path() {
  const char* rt = std::getenv("XDG_RUNTIME_DIR");
  const std::string dir = rt && *rt ? std::string(rt) : "/tmp";
  return dir + "/hcasim-fabric-" + std::to_string(getuid()) + ".sock";
}

int connect_socket(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::strcpy(a.sun_path, path.c_str());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace hcasim::fabric
