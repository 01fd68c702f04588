// SPDX-License-Identifier: Apache-2.0
// Simulator repro: the idle advancer (sim/world/engine.cpp) must not burn a CPU core while a
// program keeps making verbs calls.
//
// The advancer waits in poll(2) on the engine's activity eventfd and, if the program made a
// verbs call within the quiet period (HCASIM_IDLE_US, default 2000 us), goes round again. A
// doorbell makes that fd readable and only a simulation step drains it, so as long as the
// program keeps ringing doorbells (or any verbs call) more often than the quiet period, poll()
// returns at once, every time: the thread spins. With ranks as threads on a 2-core machine
// that was a core taken from the ranks (the verbs/ flow-control test ran 25x slower).
//
// Here one thread re-arms a CQ (a UAR doorbell) every 100 us for one second and sleeps in
// between; the process's CPU time outside that thread must stay far below one second.
// Exit 0 = fine, 1 = the advancer spun, 2 = setup failed.
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {
double cpu(int who) {
  rusage u{};
  getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
}  // namespace

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) return std::fprintf(stderr, "setup failed: no device\n"), 2;
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_comp_channel* ch = ctx ? ibv_create_comp_channel(ctx) : nullptr;
  ibv_cq* cq = ch ? ibv_create_cq(ctx, 4, nullptr, ch, 0) : nullptr;
  if (!cq) return std::fprintf(stderr, "setup failed: CQ\n"), 2;
  const double self0 = cpu(RUSAGE_SELF), thread0 = cpu(RUSAGE_THREAD);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < end) {
    ibv_req_notify_cq(cq, 0);  // a doorbell: the program is active in verbs
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const double others = (cpu(RUSAGE_SELF) - self0) - (cpu(RUSAGE_THREAD) - thread0);
  const bool ok = others < 0.3;
  std::printf("%s: threads other than the program's used %.2f s of CPU in 1 s of wall time\n",
              ok ? "OK" : "FAIL", others);
  ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(ch);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return ok ? 0 : 1;
}
