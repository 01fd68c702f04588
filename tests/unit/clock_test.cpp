// SPDX-License-Identifier: Apache-2.0
// The time models' names and the realtime clock's coupling of simulated to wall time
// (sim/world/clock.h): plain arithmetic, checked without a kernel.
#include "clock.h"

#include <gtest/gtest.h>

namespace hcasim::sim {
namespace {

constexpr uint64_t kNone = ~0ull;    // no event pending
constexpr uint64_t kUs = 1'000'000;  // ps

TEST(ClockMode, NamesRoundTripAndOthersAreRefused) {
  for (ClockMode m : {ClockMode::Auto, ClockMode::Lockstep, ClockMode::Realtime}) {
    ClockMode back = ClockMode::Auto;
    ASSERT_TRUE(parse_clock_mode(clock_mode_name(m), back));
    EXPECT_EQ(back, m);
    EXPECT_STRNE(clock_mode_summary(m), "?");
  }
  ClockMode m = ClockMode::Lockstep;
  EXPECT_FALSE(parse_clock_mode("Realtime", m));
  EXPECT_FALSE(parse_clock_mode("", m));
  EXPECT_FALSE(parse_clock_mode("wall", m));
  EXPECT_EQ(m, ClockMode::Lockstep);  // untouched
}

TEST(WallCoupling, SimulatedTimeFollowsWallTimeFromTheStart) {
  WallCoupling w;
  w.start(5 * kUs, 1'000'000);                      // 5 us simulated at wall 1 ms
  EXPECT_EQ(w.target(kNone, 1'000'000), 5 * kUs);   // no time passed
  EXPECT_EQ(w.target(kNone, 1'020'000), 25 * kUs);  // 20 us of wall later
  EXPECT_EQ(w.wall_at(25 * kUs), 1'020'000u);
  EXPECT_EQ(w.slip_ps(), 0u);
}

TEST(WallCoupling, AnIdleModelJumpsWithoutSlip) {
  WallCoupling w;
  w.start(0, 0);
  // A second of wall time with nothing to do: the instant is a second on, nothing given up.
  EXPECT_EQ(w.target(kNone, 1'000'000'000), 1'000'000 * kUs);
  // An event due just before the instant is no lag either.
  EXPECT_EQ(w.target(1'000'000 * kUs - 50 * kUs, 1'000'000'000), 1'000'000 * kUs);
  EXPECT_EQ(w.slip_ps(), 0u);
}

TEST(WallCoupling, AModelThatFallsBehindSlipsByTheExcess) {
  WallCoupling w;
  w.start(0, 0);
  // Its oldest event is due at 10 us, the wall says 300 us: 290 us behind, 100 allowed.
  EXPECT_EQ(w.target(10 * kUs, 300'000), 10 * kUs + kMaxLagPs);
  EXPECT_EQ(w.slip_ps(), 300 * kUs - 10 * kUs - kMaxLagPs);
  // The mapping moved: the next instant counts on from there, not from the first wall time.
  EXPECT_EQ(w.target(kNone, 310'000), 10 * kUs + kMaxLagPs + 10 * kUs);
  EXPECT_EQ(w.wall_at(10 * kUs + kMaxLagPs), 300'000u);
}

TEST(WallCoupling, AnOldWallTimeAfterSlipIsThePastNotTheFarFuture) {
  // A program reads the wall clock (5 us), then waits for the device lock while the model
  // falls 300 us behind. Its doorbell then maps to before the start of the mapping: the caller
  // takes max(now, target), so 0 is right; a wrapped value would fire every timer at once (it
  // did: "transport retry counter exceeded" within 70 ms of wall time on a loaded machine).
  WallCoupling w;
  w.start(0, 0);
  EXPECT_EQ(w.target(0, 400'000), kMaxLagPs);  // 300 us of slip
  EXPECT_EQ(w.target(kNone, 5'000), 0u);
  EXPECT_EQ(w.target(kNone, 400'000), kMaxLagPs);
}

TEST(WallCoupling, SimulatedSecondsPerWallSecond) {
  WallCoupling w;
  EXPECT_DOUBLE_EQ(w.sim_per_wall(0, 0), 1.0);  // not started
  w.start(0, 1000);
  EXPECT_DOUBLE_EQ(w.sim_per_wall(250 * kUs, 1000 + 1'000'000), 0.25);
}

}  // namespace
}  // namespace hcasim::sim
