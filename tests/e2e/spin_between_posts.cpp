// SPDX-License-Identifier: Apache-2.0
// spin_between_posts: post an RDMA WRITE, compute (spin) for a known wall time, post another,
// wait for both. Run under `hcasim run --clock MODE --trace FILE`, the trace shows where the two
// doorbells landed in simulated time (tests/e2e/clock_test.sh): 0 ns apart in lockstep, where
// software time is free, and about the spin apart in realtime, as on hardware.
//
// With PD_PAIRS > 0 the program also allocates and frees a protection domain that many times
// between the posts: two firmware commands each, which in realtime take the profile's command
// time (20 us each by default) and in lockstep none.
//
//   spin_between_posts [SPIN_US [PD_PAIRS]]        (defaults 20, 0)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "write_pair.h"

int main(int argc, char** argv) {
  const long us = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 20;
  if (us < 0 || us > 1'000'000) {
    std::fprintf(stderr, "spin_between_posts: SPIN_US must be 0..1000000\n");
    return 2;
  }
  const long pd_pairs = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 0;
  if (pd_pairs < 0 || pd_pairs > 1000) {
    std::fprintf(stderr, "spin_between_posts: PD_PAIRS must be 0..1000\n");
    return 2;
  }
  bench::Side a{}, b{};
  if (!bench::open_simulated_pair(a, b, "spin_between_posts")) return 2;
  // Wall time from the first post's return to the second's start: the realtime gap's upper
  // bound on a machine too loaded to run the commands at once (clock_test.sh).
  bench::post_signaled_write(a, b, 1);
  const auto between = std::chrono::steady_clock::now();
  bench::spin(us);
  for (long i = 0; i < pd_pairs; ++i) {
    ibv_pd* pd = ibv_alloc_pd(a.ctx);
    if (!pd || ibv_dealloc_pd(pd) != 0) {
      std::fprintf(stderr, "spin_between_posts: ibv_alloc_pd/ibv_dealloc_pd failed\n");
      return 1;
    }
  }
  const long long wall_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - between)
          .count();
  bench::post_signaled_write(a, b, 2);
  for (int done = 0; done < 2;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(a.cq, 1, &wc);
    if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) {
      std::fprintf(stderr, "spin_between_posts: completion error\n");
      return 1;
    }
    done += n;
  }
  bench::close_side(a);
  bench::close_side(b);
  std::printf(
      "spin_between_posts: 2 WRITEs completed, %ld us of computation and %ld firmware commands between "
      "the posts\nspin_between_posts: wall time between the posts: %lld ns\n",
      us, 2 * pd_pairs, wall_ns);
  return 0;
}
