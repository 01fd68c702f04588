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
// With --pair DIR --role sender|receiver, the same stream between two processes: each opens
// its first device, they exchange QP numbers, GIDs and the receiver's buffer through files in
// DIR, and the sender streams into the receiver's buffer and prints the line; the receiver only
// waits for it to finish (bench/fabric_cost.sh: the stream in one process against two).
//
//   write_stream [--ops N] [--size BYTES] [--pair DIR --role sender|receiver]
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "write_pair.h"

namespace {
/** This process's CPU seconds so far, user and system (all threads). */
void cpu_seconds(double& user, double& sys) {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  user = double(u.ru_utime.tv_sec) + double(u.ru_utime.tv_usec) / 1e6;
  sys = double(u.ru_stime.tv_sec) + double(u.ru_stime.tv_usec) / 1e6;
}

/** The stream's line, key=value, for scripts (bench/clock_rate.sh, bench/fabric_cost.sh read it). */
void stream(bench::Side& a, const bench::Target& t, uint32_t size, uint64_t ops, uint64_t (*sim_now_ns)()) {
  double u0 = 0, k0 = 0, u1 = 0, k1 = 0;
  cpu_seconds(u0, k0);
  const double w0 = bench::wall_now();
  const uint64_t s0 = sim_now_ns();
  bench::write_window(a, t, size, ops, 64, 16);
  const double wall_s = bench::wall_now() - w0;
  const double sim_s = double(sim_now_ns() - s0) / 1e9;
  cpu_seconds(u1, k1);
  std::printf(
      "write_stream: size=%u ops=%llu wall_s=%.6f sim_s=%.6f ops_per_wall_s=%.0f sim_s_per_wall_s=%.4f "
      "user_s=%.3f sys_s=%.3f\n",
      size, static_cast<unsigned long long>(ops), wall_s, sim_s, double(ops) / wall_s, sim_s / wall_s,
      u1 - u0, k1 - k0);
}

/** One side of the two-process stream (--pair DIR --role ROLE). */
int pair_side(const std::string& dir, bool sender, uint32_t size, uint64_t ops, uint64_t (*sim_now_ns)()) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) {
    std::fprintf(stderr, "write_stream: no RDMA device\n");
    return 1;
  }
  bench::Side me;
  bench::open_side(me, list[0], 4 << 20);
  ibv_free_device_list(list);
  const bench::Peer mine{me.qp->qp_num, me.mr->rkey, uint64_t(uintptr_t(me.buf.data())), me.gid};
  bench::Peer peer;
  bench::publish_peer(dir, sender ? "sender" : "receiver", mine);
  if (!bench::lookup_peer(dir, sender ? "receiver" : "sender", peer)) return 1;
  bench::connect_qp(me.qp, peer.gid, peer.qpn);
  if (sender) {
    if (!bench::await_file(dir + "/receiver.ready"))
      return std::fprintf(stderr, "write_stream: no receiver\n"), 1;
    stream(me, bench::Target{peer.addr, peer.rkey}, size, ops, sim_now_ns);
    bench::touch_file(dir + "/sender.done");
  } else {
    bench::touch_file(dir + "/receiver.ready");
    while (!bench::file_exists(dir + "/sender.done"))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bench::close_side(me);
  return 0;
}

int usage() {
  std::fprintf(stderr, "usage: write_stream [--ops N] [--size BYTES] [--pair DIR --role sender|receiver]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t ops = 200000;
  uint32_t size = 64;
  std::string dir, role;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 0);
    } else if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
      size = uint32_t(std::strtoul(argv[++i], nullptr, 0));
    } else if (!std::strcmp(argv[i], "--pair") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--role") && i + 1 < argc) {
      role = argv[++i];
    } else {
      return usage();
    }
  }
  if (ops == 0 || size == 0 || size > (2u << 20)) {
    std::fprintf(stderr, "write_stream: --ops must be > 0, --size 1 .. 2 MiB\n");
    return 2;
  }
  if (dir.empty() != role.empty() || (!role.empty() && role != "sender" && role != "receiver")) {
    std::fprintf(stderr, "write_stream: --pair DIR and --role sender|receiver go together\n");
    return 2;
  }
  auto* sim_now_ns = bench::sim_function<uint64_t()>("hcasim_sim_now_ns");
  if (!sim_now_ns) {
    std::fprintf(stderr, "write_stream: hcasim_sim_now_ns not found\n");
    return 1;
  }
  if (!dir.empty()) return pair_side(dir, role == "sender", size, ops, sim_now_ns);
  bench::Side a, b;
  if (!bench::open_simulated_pair(a, b, "write_stream")) return 1;
  stream(a, bench::target_of(b), size, ops, sim_now_ns);
  bench::close_side(a);
  bench::close_side(b);
  return 0;
}
