// SPDX-License-Identifier: Apache-2.0
// The drop-in libibverbs.so.1's platform glue (README.md).
// Makes the simulator the driver's device source — the in-process world, or, with
// HCASIM_FABRIC set, this process's host on a cross-process fabric — and exports the
// simulator's own interface (sim_control.h), forwarded to the device process in fabric mode.
// Compiled into the drop-in libibverbs.so.1 itself, so the registration cannot be dropped by
// the linker.
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "client_link.h"
#include "engine.h"
#include "hcasim/sim_control.h"
#include "world.h"

namespace {
struct RegisterWorld {
  RegisterWorld() {
    hcasim::drv::register_link_enumerator([] {
      if (hcasim::fabric::fabric_mode()) return hcasim::fabric::fabric_links();
      hcasim::sim::World* w = hcasim::sim::World::get();
      return w ? w->links() : std::vector<hcasim::drv::HcaLink*>{};
    });
  }
} register_world;
using hcasim::fabric::ControlOp;
/** @brief Fabric mode: ask the device process. Returns rc (-1 if unreachable). */
int remote(ControlOp op, const char* device, const char* name, uint32_t qpn, uint32_t psn, uint32_t count,
           uint64_t* value, std::string* text = nullptr) {
  hcasim::fabric::ControlMsg m{};
  m.op = op;
  m.qpn = qpn;
  m.psn = psn;
  m.count = count;
  if (device) std::snprintf(m.device, sizeof m.device, "%s", device);
  if (name) std::snprintf(m.name, sizeof m.name, "%s", name);
  hcasim::fabric::ControlReply r{};
  if (!hcasim::fabric::fabric_control(m, r, text)) return -1;
  if (value) *value = r.value;
  return r.rc;
}
}  // namespace

#define HCASIM_EXPORT extern "C" __attribute__((visibility("default")))

HCASIM_EXPORT int hcasim_sim_present(void) { return 1; }

HCASIM_EXPORT uint64_t hcasim_sim_now_ns(void) {
  if (hcasim::fabric::fabric_mode()) {
    uint64_t v = 0;
    remote(ControlOp::NowNs, nullptr, nullptr, 0, 0, 0, &v);
    return v;
  }
  auto& e = hcasim::sim::Engine::instance();
  const uint64_t asked = hcasim::sim::Engine::mono_ns();
  hcasim::sim::Engine::ProgramLock g(e);
  e.sync_to_wall(asked);  // realtime: the model's clock may rest at its last event; now is later
  return e.now_ps() / 1000;
}

HCASIM_EXPORT int hcasim_sim_drop_rx(const char* device_name, uint32_t qpn, uint32_t psn, uint32_t count) {
  if (hcasim::fabric::fabric_mode())
    return device_name ? remote(ControlOp::DropRx, device_name, nullptr, qpn, psn, count, nullptr) : -1;
  hcasim::sim::World* w = hcasim::sim::World::get();
  if (!w || !device_name) return -1;
  std::lock_guard<std::recursive_mutex> g(hcasim::sim::Engine::instance().mutex());
  hcasim::model::Hca* h = w->find(device_name);
  if (!h) return -1;
  hcasim::sim::drop_rx(*h, qpn, psn, count);
  return 0;
}

HCASIM_EXPORT int hcasim_sim_counter(const char* device_name, const char* name, uint64_t* value) {
  if (hcasim::fabric::fabric_mode())
    return device_name && name && value ? remote(ControlOp::Counter, device_name, name, 0, 0, 0, value) : -1;
  hcasim::sim::World* w = hcasim::sim::World::get();
  if (!w || !device_name || !name || !value) return -1;
  std::lock_guard<std::recursive_mutex> g(hcasim::sim::Engine::instance().mutex());
  hcasim::model::Hca* h = w->find(device_name);
  if (!h) return -1;
  return hcasim::sim::stat_by_name(h->stats(), name, *value) ? 0 : -1;
}

HCASIM_EXPORT size_t hcasim_sim_stats_json(char* buf, size_t len) {
  std::string s;
  if (hcasim::fabric::fabric_mode()) {
    if (remote(ControlOp::StatsJson, nullptr, nullptr, 0, 0, 0, nullptr, &s) != 0) s = "{}";
  } else {
    hcasim::sim::World* w = hcasim::sim::World::get();
    s = w ? w->stats_json() : "{}";
  }
  if (buf && len) {
    std::strncpy(buf, s.c_str(), len - 1);
    buf[len - 1] = 0;
  }
  return s.size() + 1;
}
