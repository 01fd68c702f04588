// SPDX-License-Identifier: Apache-2.0
/**
 * @file conformance.h
 * @brief Helpers for the conformance suite: capability checks that SKIP (never fail) on a
 *        device that does not advertise a feature, and the simulator's fault hooks looked up
 *        at run time (absent on rxe/hardware, so those tests SKIP there).
 *
 * The suite links only libibverbs: under the simulator that is build/lib/libibverbs.so.1; on
 * rxe or hardware run the same binary with LD_LIBRARY_PATH pointing at the system library.
 */
#pragma once

#include <fcntl.h>
#include <poll.h>

#include "verbs_fixture.h"

namespace conformance {

using e2e::Host;
using e2e::Options;
using e2e::VerbsFixture;
using e2e::WcExpect;

/** hcasim_sim_drop_rx from sim_control.h, or nullptr on a real device. */
inline auto drop_rx_hook() {
  using Fn = int (*)(const char*, uint32_t, uint32_t, uint32_t);
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "hcasim_sim_drop_rx"));
}

#define REQUIRE_SIM_FAULT_HOOKS()                                                            \
  do {                                                                                       \
    if (!::conformance::drop_rx_hook()) GTEST_SKIP() << "needs the simulator's fault hooks"; \
  } while (0)

inline bool device_has_atomics(ibv_context* ctx) {
  ibv_device_attr a{};
  return ibv_query_device(ctx, &a) == 0 && a.atomic_cap != IBV_ATOMIC_NONE;
}

using e2e::PostAtomic;

/** Wait for one async event on @p ctx, at most @p seconds (non-blocking fd + poll(2)). */
inline bool GetAsyncEvent(ibv_context* ctx, ibv_async_event& ev, double seconds = 2.0) {
  const int fl = fcntl(ctx->async_fd, F_GETFL);
  fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool got = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ibv_get_async_event(ctx, &ev) == 0) {
      got = true;
      break;
    }
    pollfd p{ctx->async_fd, POLLIN, 0};
    poll(&p, 1, 10);
  }
  fcntl(ctx->async_fd, F_SETFL, fl);
  return got;
}

}  // namespace conformance
