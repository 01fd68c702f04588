// SPDX-License-Identifier: Apache-2.0
#include "host_visible.h"

#include <systemc>

namespace hcasim::model {

std::atomic<uint64_t>& host_visible_epoch() {
  static std::atomic<uint64_t> epoch{0};
  return epoch;
}

std::atomic<uint64_t>& watched_visible_epoch() {
  static std::atomic<uint64_t> epoch{0};
  return epoch;
}

namespace {
bool g_pause_on_visible = false;  // only touched with the device lock held
}

void pause_on_visible(bool on) { g_pause_on_visible = on; }

void note_host_visible(bool watched) {
  host_visible_epoch().fetch_add(1, std::memory_order_relaxed);
  if (watched) watched_visible_epoch().fetch_add(1, std::memory_order_relaxed);
  if (g_pause_on_visible) sc_core::sc_pause();
}

}  // namespace hcasim::model
