// SPDX-License-Identifier: Apache-2.0
// TimerSet (model/sim_support/timer_set.h), the model's cancellable timers (a QP's ACK timer),
// and the parked wake-ups they leave behind when stopped (parked_wakes.h): a stopped timer must
// neither fire nor move the clock, and the simulation's next event must leave it out.
#include <gtest/gtest.h>

#include <vector>

#include "model_fixture.h"
#include "parked_wakes.h"
#include "timer_set.h"

// libsystemc references sc_main; these tests drive the kernel from GoogleTest instead.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::test {
namespace {

using model::next_activity_ps;
using model::parked_clear_run_ps;

constexpr uint64_t kUs = 1'000'000;  // ps
constexpr uint64_t kNone = ~0ull;

struct Fired {
  uint32_t key;
  uint64_t at_ps;
};

struct Timers : ::testing::Test {
  std::vector<Fired> fired;
  model::TimerSet timers{"timers", [this](uint32_t key) { fired.push_back({key, sim_now_ps()}); }};
  void SetUp() override { sc_core::sc_start(sc_core::SC_ZERO_TIME); }
  /** Run the way the engine does: to the next event that is not a parked wake-up. */
  void run_to_next() {
    const uint64_t next = next_activity_ps();
    ASSERT_NE(next, kNone);
    run_for_ps(next - sim_now_ps());
  }
};

TEST_F(Timers, ATimerFiresAtItsDeadline) {
  const uint64_t t0 = sim_now_ps();
  timers.arm(7, t0 + 10 * kUs);
  EXPECT_EQ(next_activity_ps(), t0 + 10 * kUs);
  run_to_next();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].key, 7u);
  EXPECT_EQ(fired[0].at_ps, t0 + 10 * kUs);
  EXPECT_FALSE(timers.armed(7));
  EXPECT_EQ(next_activity_ps(), kNone);
}

TEST_F(Timers, AStoppedTimerIsNoEventAndDoesNotMoveTheClock) {
  const uint64_t t0 = sim_now_ps();
  timers.arm(1, t0 + 500 * kUs);
  timers.cancel(1);
  // Its wake-up is still in the kernel (parked), but it is not the simulation's next event ...
  EXPECT_TRUE(sc_core::sc_pending_activity());
  EXPECT_EQ(model::earliest_parked_wake_ps(), t0 + 500 * kUs);
  EXPECT_EQ(next_activity_ps(), kNone);
  // ... and asking dropped it: nothing is left to run the clock forward to.
  EXPECT_FALSE(sc_core::sc_pending_activity());
  EXPECT_EQ(model::earliest_parked_wake_ps(), kNone);
  EXPECT_EQ(sim_now_ps(), t0);
  EXPECT_TRUE(fired.empty());
}

TEST_F(Timers, RestartedLaterItFiresOnceAtTheNewDeadlineOnly) {
  const uint64_t t0 = sim_now_ps();
  timers.arm(3, t0 + 100 * kUs);
  timers.cancel(3);  // parked at +100 us
  timers.arm(3, t0 + 250 * kUs);
  EXPECT_EQ(model::earliest_parked_wake_ps(), kNone);  // taken back by the new deadline
  EXPECT_EQ(next_activity_ps(), t0 + 100 * kUs);       // the old wake-up re-checks ...
  run_to_next();
  EXPECT_TRUE(fired.empty());  // ... and finds nothing due
  EXPECT_EQ(next_activity_ps(), t0 + 250 * kUs);
  run_to_next();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].at_ps, t0 + 250 * kUs);
  EXPECT_EQ(next_activity_ps(), kNone);
}

TEST_F(Timers, RestartedEarlierItFiresAtTheEarlierDeadline) {
  const uint64_t t0 = sim_now_ps();
  timers.arm(4, t0 + 300 * kUs);
  timers.cancel(4);
  timers.arm(4, t0 + 20 * kUs);
  run_to_next();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].at_ps, t0 + 20 * kUs);
  EXPECT_EQ(next_activity_ps(), kNone);  // the wake-up at +300 us was cancelled, not parked
}

TEST_F(Timers, RealEventsBeforeAndAfterAParkedWakeAreTheNextEvents) {
  const uint64_t t0 = sim_now_ps();
  std::vector<uint64_t> ran;
  model::TimedQueue<int> work("work", [&](int&) { ran.push_back(sim_now_ps()); });
  timers.arm(2, t0 + 50 * kUs);
  timers.cancel(2);  // parked at +50 us
  work.push(t0 + 30 * kUs, 1);
  work.push(t0 + 80 * kUs, 2);
  EXPECT_EQ(next_activity_ps(), t0 + 30 * kUs);
  // A run may not reach the parked instant: it would move the clock there.
  EXPECT_EQ(parked_clear_run_ps(200 * kUs), 50 * kUs - 1);
  EXPECT_EQ(parked_clear_run_ps(10 * kUs), 10 * kUs);
  run_to_next();
  EXPECT_EQ(next_activity_ps(), t0 + 80 * kUs);  // the parked one in between is dropped
  EXPECT_EQ(model::earliest_parked_wake_ps(), kNone);
  run_to_next();
  EXPECT_EQ(ran, (std::vector<uint64_t>{t0 + 30 * kUs, t0 + 80 * kUs}));
  EXPECT_TRUE(fired.empty());
}

TEST_F(Timers, ManyStopsAndStartsKeepOneWakeUp) {
  // A stream's ACK timer: started by a send, stopped when everything is acknowledged. However
  // often, one wake-up stands for it (the parked one is taken back), and it fires once.
  const uint64_t t0 = sim_now_ps();
  for (int i = 0; i < 10000; ++i) {
    timers.arm(9, t0 + 1000 * kUs + uint64_t(i));
    timers.cancel(9);
  }
  EXPECT_EQ(model::earliest_parked_wake_ps(), t0 + 1000 * kUs);
  timers.arm(9, t0 + 2000 * kUs);
  EXPECT_EQ(next_activity_ps(), t0 + 1000 * kUs);
  run_to_next();
  run_to_next();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].at_ps, t0 + 2000 * kUs);
}

}  // namespace
}  // namespace hcasim::test
