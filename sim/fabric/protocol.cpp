// SPDX-License-Identifier: Apache-2.0
#include "protocol.h"

#include <unistd.h>

#include <cstdlib>

namespace hcasim::fabric {

std::string default_socket_path() {
  const char* rt = std::getenv("XDG_RUNTIME_DIR");
  const std::string dir = rt && *rt ? std::string(rt) : "/tmp";
  return dir + "/hcasim-fabric-" + std::to_string(getuid()) + ".sock";
}

}  // namespace hcasim::fabric
