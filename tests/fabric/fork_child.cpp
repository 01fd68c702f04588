// SPDX-License-Identifier: Apache-2.0
// fork_child: a process on the fabric forks; the child may not use its parent's simulated HCAs
// (a real driver's child has no access to the parent's device either): its firmware command
// fails with the fabric's message instead of reaching the device as the parent's, and the
// parent carries on. Run under `hcasim run --fabric` (tests/fabric/CMakeLists.txt).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "write_pair.h"

int main() {
  bench::Side a{}, b{};
  if (!bench::open_simulated_pair(a, b, "fork_child")) return 2;
  const pid_t child = fork();
  if (child < 0) bench::die("fork");
  if (child == 0) {
    ibv_pd* pd = ibv_alloc_pd(a.ctx);  // a firmware command through the parent's connection
    std::printf("fork_child: child: ibv_alloc_pd %s\n", pd ? "succeeded" : "failed");
    std::fflush(stdout);
    _exit(pd ? 1 : 0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "fork_child: the child used its parent's HCA (status %d)\n", status);
    return 1;
  }
  bench::post_signaled_write(a, b, 7);  // the parent is unaffected
  for (;;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(a.cq, 1, &wc);
    if (n < 0 || (n == 1 && (wc.status != IBV_WC_SUCCESS || wc.wr_id != 7))) bench::die("completion error");
    if (n == 1) break;
  }
  bench::close_side(a);
  bench::close_side(b);
  std::printf("fork_child: parent: WRITE completed after the child was refused\n");
  return 0;
}
