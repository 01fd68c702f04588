// SPDX-License-Identifier: Apache-2.0
// Running tshark from a unit test: is it installed, and what does a command print.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hcasim::test {

/** True if tshark is on PATH (tests that need it skip otherwise). */
inline bool have_tshark() { return std::system("command -v tshark >/dev/null 2>&1") == 0; }

/** Everything @p cmd writes to its standard output. */
inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

}  // namespace hcasim::test
