// SPDX-License-Identifier: Apache-2.0
// The engine's doorbell kicks in the lockstep clock (sim/world/engine.cpp): a kick wakes a
// thread blocked in wait_activity(), a kick that came before the thread blocked is not lost,
// and a kick with nobody blocked costs no system call (the activity fd stays unreadable).
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "engine.h"

namespace {

using hcasim::sim::Engine;
using Clock = std::chrono::steady_clock;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

// How long a wait_activity(10 s) took, in seconds, with @p between run on this thread once the
// waiter has looked for work (note_looking) and, if @p after_block, once it is blocked.
double waitWith(bool after_block, const std::function<void()>& between) {
  Engine& e = Engine::instance();
  std::atomic<int> stage{0};
  double took = -1;
  std::thread w([&] {
    e.note_looking();
    stage = 1;
    while (stage != 2) std::this_thread::yield();
    std::vector<pollfd> none;
    const auto t0 = Clock::now();
    e.wait_activity(none, 10000);
    took = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  while (stage != 1) std::this_thread::yield();
  if (!after_block) between();
  stage = 2;
  if (after_block) {
    // The waiter is blocked once it has been in poll(2) a while; a kick before that is the
    // other case (tested too), which must not be lost either.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    between();
  }
  w.join();
  uint64_t drain;  // what run_until_visible would do next: the next wait starts unwoken
  if (read(e.activity_fd(), &drain, sizeof drain) < 0) {
  }
  return took;
}

TEST(EngineWait, KickWithNobodyBlockedMakesNoSystemCall) {
  Engine& e = Engine::instance();
  ASSERT_FALSE(e.realtime());
  const int fd = e.activity_fd();
  ASSERT_FALSE(readable(fd));
  for (int i = 0; i < 100; ++i) e.kick();
  EXPECT_FALSE(readable(fd)) << "lockstep kicks wrote the activity fd with no thread waiting on it";
}

TEST(EngineWait, KickWakesABlockedWaiter) {
  Engine& e = Engine::instance();
  EXPECT_LT(waitWith(true, [&] { e.kick(); }), 5.0) << "the waiter slept through the kick";
}

TEST(EngineWait, KickBeforeTheWaiterBlocksIsNotLost) {
  Engine& e = Engine::instance();
  // Kicked after the waiter looked for work and before it blocked: no thread was waiting, so
  // no fd was written; the waiter must still see the news and return at once.
  EXPECT_LT(waitWith(false, [&] { e.kick(); }), 5.0) << "a kick between looking and blocking was lost";
  // ... once: the next wait blocks until its own kick.
  EXPECT_LT(waitWith(true, [&] { e.kick(); }), 5.0);
}

TEST(EngineWait, WithoutAKickTheWaitLastsItsTimeout) {
  Engine& e = Engine::instance();
  std::vector<pollfd> none;
  e.note_looking();
  const auto t0 = Clock::now();
  e.wait_activity(none, 100);
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.09);
}

}  // namespace
