// SPDX-License-Identifier: Apache-2.0
// Simulator throughput: RDMA WRITE completions per wall-clock second through the public
// ibverbs API (two simulated HCAs in this process, tracing off), beside the SystemC kernel's
// own timed method wake-up rate measured in the same run. Figures, not pass/fail.
//
//   sim_throughput [--ops N] [--size BYTES] [--no-kernel]
//   sim_throughput --kernel-only N    only the kernel's loop, N wake-ups (for a callgrind count)
#include <infiniband/verbs.h>

#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hcasim/sim_control.h"
#include "write_pair.h"

namespace {

using bench::die;
using bench::Side;
using bench::wall_now;

struct Result {
  double wall_s, sim_s, ops_per_wall_s, sim_gbps;
};

// Keep `window` WRITEs in flight, posted in linked batches of 16; every `signal_every`-th signaled.
Result run_writes(Side& a, Side& b, uint32_t size, uint64_t ops, uint32_t window, uint32_t signal_every) {
  const double t0 = wall_now();
  const uint64_t s0 = hcasim_sim_now_ns();
  bench::write_window(a, b, size, ops, window, signal_every);
  Result r;
  r.wall_s = wall_now() - t0;
  r.sim_s = double(hcasim_sim_now_ns() - s0) / 1e9;
  r.ops_per_wall_s = double(ops) / r.wall_s;
  r.sim_gbps = double(ops) * size * 8 / r.sim_s / 1e9;
  return r;
}

// The SystemC kernel alone: one method process re-notifying itself with a 1 ns delay.
double kernel_wakeups_per_s(uint64_t n) {
  struct Ticker {
    sc_core::sc_event ev;
    uint64_t left;
    void tick() {
      if (--left) ev.notify(1, sc_core::SC_NS);
    }
  } t{{}, n};
  sc_core::sc_spawn_options o;
  o.spawn_method();
  o.set_sensitivity(&t.ev);
  o.dont_initialize();
  sc_core::sc_spawn([&t] { t.tick(); }, "bench_ticker", &o);
  t.ev.notify(1, sc_core::SC_NS);
  const double t0 = wall_now();
  while (t.left) sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_MS));
  return double(n) / (wall_now() - t0);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t ops = 400000;
  uint32_t only_size = 0;
  bool kernel = true;
  if (argc == 3 && !std::strcmp(argv[1], "--kernel-only")) {
    const uint64_t n = std::strtoull(argv[2], nullptr, 0);
    if (n == 0) {
      std::fprintf(stderr, "sim_throughput: --kernel-only needs a count > 0\n");
      return 2;
    }
    std::printf("SystemC kernel alone: %.2f M timed method wake-ups per wall-second\n",
                kernel_wakeups_per_s(n) / 1e6);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 0);
    } else if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
      only_size = uint32_t(std::strtoul(argv[++i], nullptr, 0));
    } else if (!std::strcmp(argv[i], "--no-kernel")) {
      kernel = false;
    } else {
      std::fprintf(stderr,
                   "usage: sim_throughput [--ops N] [--size BYTES] [--no-kernel] | --kernel-only N\n");
      return 2;
    }
  }
  setenv("HCASIM_IDLE_US", "0", 1);  // time advances only in our verbs calls
  unsetenv("HCASIM_TRACE");
  Side a, b;
  if (!bench::open_simulated_pair(a, b, "sim_throughput")) return 1;

  std::printf("hcasim simulator throughput (tracing off, 1 core, profile roce-100g)\n");
  std::printf("%-34s %12s %10s %14s %12s\n", "workload", "ops", "wall s", "ops/wall-s", "sim Gb/s");
  struct Case {
    const char* name;
    uint32_t size, window, signal_every;
    uint64_t ops;
  } cases[] = {
      {"RDMA WRITE 64 B, every WR signaled", 64, 128, 1, ops},
      {"RDMA WRITE 64 B, 1 in 16 signaled", 64, 128, 16, ops},
      {"RDMA WRITE 4 KiB, 1 in 16 signaled", 4096, 128, 16, ops / 4},
  };
  for (const Case& c : cases) {
    if (only_size && c.size != only_size) continue;
    Result r = run_writes(a, b, c.size, c.ops, c.window, c.signal_every);
    std::printf("%-34s %12llu %10.3f %14.0f %12.2f\n", c.name, static_cast<unsigned long long>(c.ops),
                r.wall_s, r.ops_per_wall_s, r.sim_gbps);
  }
  if (kernel) {
    const double k = kernel_wakeups_per_s(5'000'000);
    std::printf("SystemC kernel alone: %.2f M timed method wake-ups per wall-second\n", k / 1e6);
  }
  std::printf("target: >= 300000 64-byte WRITE completions per wall-second\n");
  return 0;
}
