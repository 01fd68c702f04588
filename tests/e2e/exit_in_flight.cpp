// SPDX-License-Identifier: Apache-2.0
// exit_in_flight: post one signaled 64-byte RDMA WRITE, poll its CQ twice (in the lockstep clock
// the first look at a CQ is free, the second lets the device run until the data is at the peer,
// the ACK still on its way back), then end the process one of three ways:
//   wait    poll its completion, free everything, exit 0 (nothing left behind);
//   exit    exit 0 at once, objects still open and the WRITE unacknowledged;
//   abort   std::abort() at once (SIGABRT, as Gloo's teardown check ends a process);
//   own     the program's own SIGABRT handler (installed before any verbs call) says "own
//           handler" and exits 3: the simulator must not have replaced it.
// Under `hcasim run --clock lockstep`, where the WRITE cannot complete unless the program waits,
// the simulator reports what "exit" and "abort" leave in flight, naming the QP, the WQE and the
// buffer it was sent from (tests/e2e/exit_in_flight_test.sh). Prints the QPN and the buffer.
//
//   exit_in_flight wait|exit|abort|own
#include <unistd.h>

#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "write_pair.h"

int main(int argc, char** argv) {
  const char* how = argc == 2 ? argv[1] : "";
  if (std::strcmp(how, "wait") != 0 && std::strcmp(how, "exit") != 0 && std::strcmp(how, "abort") != 0 &&
      std::strcmp(how, "own") != 0) {
    std::fprintf(stderr, "usage: exit_in_flight wait|exit|abort|own\n");
    return 2;
  }
  if (how[0] == 'o')
    std::signal(SIGABRT, [](int) {
      const char m[] = "exit_in_flight: own handler\n";
      if (write(2, m, sizeof m - 1) < 0) _exit(4);
      _exit(3);
    });
  bench::Side a{}, b{};
  if (!bench::open_simulated_pair(a, b, "exit_in_flight")) return 2;
  bench::post_signaled_write(a, b);
  ibv_wc wc{};
  int n = ibv_poll_cq(a.cq, 1, &wc);
  if (n == 0) n = ibv_poll_cq(a.cq, 1, &wc);
  std::printf("exit_in_flight: QP 0x%x posted a WRITE from the buffer at 0x%" PRIx64 " (lkey 0x%x)\n",
              a.qp->qp_num, uint64_t(uintptr_t(a.buf.data())), a.mr->lkey);
  std::fflush(stdout);
  if (how[0] == 'a' || how[0] == 'o') std::abort();
  if (how[0] == 'e') return 0;
  while (n == 0) n = ibv_poll_cq(a.cq, 1, &wc);
  if (n < 0 || wc.status != IBV_WC_SUCCESS) bench::die("completion");
  bench::close_side(a);
  bench::close_side(b);
  return 0;
}
