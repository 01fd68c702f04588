// SPDX-License-Identifier: Apache-2.0
// busy_poster: one program thread posts RDMA WRITEs, one doorbell each, computing (spinning) for
// SPIN_US of wall time between posts, while a second thread polls a CQ nothing will reach. Run
// on the fabric in the lockstep clock (tests/fabric/busy-poster-test): the waiting thread may
// not move simulated time on while the posting thread is busy, so every SQ doorbell of the run
// lands at the same simulated instant, whether the doorbells travel as messages or through the
// arena's doorbell ring (sim/fabric/doorbell_ring.h).
//
//   busy_poster [POSTS [SPIN_US]]        (defaults 32, 50)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "write_pair.h"

namespace {

/** @brief Compute for @p us microseconds of wall time (no system call, no verbs call). */
void spin(long us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

/** @brief Post one 64-byte RDMA WRITE from @p a to @p b, signaled if @p last. */
void post_write(bench::Side& a, const bench::Side& b, bool last) {
  ibv_sge sge{uint64_t(uintptr_t(a.buf.data())), 64, a.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
  wr.wr.rdma.remote_addr = uint64_t(uintptr_t(b.buf.data()));
  wr.wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(a.qp, &wr, &bad)) bench::die("ibv_post_send");
}

}  // namespace

int main(int argc, char** argv) {
  const long posts = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 32;
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
    post_write(a, b, i == posts - 1);
    if (i != posts - 1) spin(us);
  }
  for (;;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(a.cq, 1, &wc);
    if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) bench::die("completion error");
    if (n == 1) break;
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
