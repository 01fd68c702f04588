// SPDX-License-Identifier: Apache-2.0
// A stream of RDMA WRITEs between two RC QPs of this process (hcasim0 -> hcasim1): 64 WRs in
// flight, 1 in 16 signaled, ibv_poll_cq in a loop. Prints how many operations ran in how much
// wall time and how much simulated time, so that
//   hcasim run --clock lockstep -- write_stream ...   and   hcasim run --clock realtime -- ...
// can be set side by side (bench/clock_rate.sh), and the process's CPU time in user and kernel
// mode over the stream (system time is where a simulator's system calls show, which
// instruction counts under valgrind do not see). A plain ibverbs program: <infiniband/verbs.h>
// and dlsym for the simulator's hcasim_sim_now_ns (sim_control.h), nothing of the simulator's.
//
//   write_stream [--ops N] [--size BYTES]
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "write_pair.h"

namespace {
/** This process's CPU seconds so far, user and system (all threads). */
void cpu_seconds(double& user, double& sys) {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  user = double(u.ru_utime.tv_sec) + double(u.ru_utime.tv_usec) / 1e6;
  sys = double(u.ru_stime.tv_sec) + double(u.ru_stime.tv_usec) / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
  uint64_t ops = 200000;
  uint32_t size = 64;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 0);
    } else if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
      size = uint32_t(std::strtoul(argv[++i], nullptr, 0));
    } else {
      std::fprintf(stderr, "usage: write_stream [--ops N] [--size BYTES]\n");
      return 2;
    }
  }
  if (ops == 0 || size == 0 || size > (2u << 20)) {
    std::fprintf(stderr, "write_stream: --ops must be > 0, --size 1 .. 2 MiB\n");
    return 2;
  }
  bench::Side a, b;
  if (!bench::open_simulated_pair(a, b, "write_stream")) return 1;
  auto* sim_now_ns = bench::sim_function<uint64_t()>("hcasim_sim_now_ns");
  if (!sim_now_ns) {
    std::fprintf(stderr, "write_stream: hcasim_sim_now_ns not found\n");
    return 1;
  }

  double u0 = 0, k0 = 0, u1 = 0, k1 = 0;
  cpu_seconds(u0, k0);
  const double w0 = bench::wall_now();
  const uint64_t s0 = sim_now_ns();
  bench::write_window(a, b, size, ops, 64, 16);
  const double wall_s = bench::wall_now() - w0;
  const double sim_s = double(sim_now_ns() - s0) / 1e9;
  cpu_seconds(u1, k1);

  // One line, key=value, for scripts (bench/clock_rate.sh reads it).
  std::printf(
      "write_stream: size=%u ops=%llu wall_s=%.6f sim_s=%.6f ops_per_wall_s=%.0f sim_s_per_wall_s=%.4f "
      "user_s=%.3f sys_s=%.3f\n",
      size, static_cast<unsigned long long>(ops), wall_s, sim_s, double(ops) / wall_s, sim_s / wall_s,
      u1 - u0, k1 - k0);
  bench::close_side(a);
  bench::close_side(b);
  return 0;
}
