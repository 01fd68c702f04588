// SPDX-License-Identifier: Apache-2.0
#include "host_visible.h"

#include <systemc>

namespace hcasim::model {

std::atomic<uint64_t>& host_visible_epoch() {
  static std::atomic<uint64_t> epoch{0};
  return epoch;
}

namespace {
/// The unwatched ones alone: counted apart so that a watched effect, every one in a single
/// process, still costs one atomic add on the per-packet path.
std::atomic<uint64_t> g_unwatched{0};
}  // namespace

uint64_t watched_visible_epoch() {
  return host_visible_epoch().load(std::memory_order_relaxed) - g_unwatched.load(std::memory_order_relaxed);
}

namespace {
bool g_pause_on_visible = false;  // only touched with the device lock held
}

void pause_on_visible(bool on) { g_pause_on_visible = on; }

void note_host_visible(bool watched) {
  host_visible_epoch().fetch_add(1, std::memory_order_relaxed);
  if (!watched) g_unwatched.fetch_add(1, std::memory_order_relaxed);
  if (g_pause_on_visible) sc_core::sc_pause();
}

}  // namespace hcasim::model
