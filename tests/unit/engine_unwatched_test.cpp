// SPDX-License-Identifier: Apache-2.0
// A wait's step (Engine::run_until_visible) ends at the first write software may be looking
// for; a write nobody watches (a fabric process whose threads all sleep, host_visible.h) ends
// it only once the wall-clock limit the caller gave has passed.
#include <gtest/gtest.h>

#define SC_INCLUDE_DYNAMIC_PROCESSES  // sc_spawn
#include <systemc>

#include "engine.h"
#include "host_visible.h"

namespace {

using hcasim::model::host_visible_epoch;
using hcasim::model::note_host_visible;
using hcasim::model::watched_visible_epoch;
using hcasim::sim::Engine;

// One write per nanosecond, at 1 to 5 ns: watched only at 3 ns. A method process, like the
// model's own (no thread stacks for the sanitizers to follow).
void writes() {
  static int ns = 0;
  if (ns > 0) note_host_visible(ns == 3);
  if (++ns <= 5) sc_core::next_trigger(1, sc_core::SC_NS);
}

TEST(EngineUnwatched, OnlyAWatchedWriteOrTheWallLimitEndsTheStep) {
  Engine& e = Engine::instance();
  ASSERT_FALSE(e.realtime());
  sc_core::sc_spawn_options method;
  method.spawn_method();
  sc_core::sc_spawn(&writes, "writes", &method);
  const uint64_t any = host_visible_epoch().load(), watched = watched_visible_epoch();
  const uint64_t far = Engine::mono_ns() + 60'000'000'000ull;

  // Without a limit (the in-process world) every write ends the step.
  ASSERT_TRUE(e.run_until_visible(nullptr, 0));
  EXPECT_EQ(e.now_ps(), 1000u);
  // Within the limit the unwatched write at 2 ns is passed; the watched one at 3 ns ends it.
  ASSERT_TRUE(e.run_until_visible(nullptr, far));
  EXPECT_EQ(e.now_ps(), 3000u);
  EXPECT_EQ(host_visible_epoch().load(), any + 3);
  EXPECT_EQ(watched_visible_epoch(), watched + 1);
  // A limit already passed: the next unwatched write ends it.
  ASSERT_TRUE(e.run_until_visible(nullptr, Engine::mono_ns()));
  EXPECT_EQ(e.now_ps(), 4000u);
  // The rest runs to the end, past the last unwatched write.
  ASSERT_TRUE(e.run_until_visible(nullptr, far));
  EXPECT_EQ(e.now_ps(), 5000u);
  EXPECT_EQ(host_visible_epoch().load(), any + 5);
  EXPECT_FALSE(e.run_until_visible(nullptr, far));
}

}  // namespace
