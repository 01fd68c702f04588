// SPDX-License-Identifier: Apache-2.0
// busy_poster: one program thread posts RDMA WRITEs, one doorbell each, computing (spinning) for
// SPIN_US of wall time between posts, while a second thread polls a CQ nothing will reach. Run
// on the fabric in the lockstep clock (tests/fabric/busy-poster-test): the waiting thread may
// not move simulated time on while the posting thread is busy, so every SQ doorbell of the run
// lands at the same simulated instant, whether the doorbells travel as messages or through the
// arena's doorbell ring (sim/fabric/doorbell_ring.h).
//
//   busy_poster [POSTS [SPIN_US]]        (defaults 64, 50)
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "write_pair.h"

int main(int argc, char** argv) {
  const long posts = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 64;
  const long us = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 50;
  if (posts < 1 || posts > 200 || us < 0 || us > 10'000) {
    std::fprintf(stderr, "busy_poster: POSTS must be 1..200 and SPIN_US 0..10000\n");
    return 2;
  }
  bench::Side a{}, b{};
  if (!bench::open_simulated_pair(a, b, "busy_poster")) return 2;
  ibv_cq* idle = ibv_create_cq(a.ctx, 16, nullptr, nullptr, 0);  // no QP: nothing ever lands here
  if (!idle) bench::die("ibv_create_cq");
  std::atomic<bool> done{false};
  std::atomic<long> polls{0};
  std::thread waiter([&] {
    ibv_wc wc{};
    while (!done.load(std::memory_order_acquire)) {
      if (ibv_poll_cq(idle, 1, &wc) != 0) bench::die("a completion on a CQ with no QP");
      polls.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // Let the waiter start polling (and waiting in the device) before the first post.
  while (polls.load(std::memory_order_relaxed) < 2) std::this_thread::yield();
  for (long i = 0; i < posts; ++i) {
    bench::post_signaled_write(a, b, uint64_t(i));
    if (i != posts - 1) bench::spin(us);
  }
  for (long done = 0; done < posts;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(a.cq, 1, &wc);
    if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) bench::die("completion error");
    done += n;
  }
  done.store(true, std::memory_order_release);
  waiter.join();
  ibv_destroy_cq(idle);
  bench::close_side(a);
  bench::close_side(b);
  std::printf(
      "busy_poster: %ld WRITEs posted, %ld us of computation between posts, %ld polls of the idle CQ\n",
      posts, us, polls.load());
  return 0;
}
