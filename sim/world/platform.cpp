// SPDX-License-Identifier: Apache-2.0
// Makes the in-process world the driver's device source, and exports the simulator's own
// interface (sim_control.h). Compiled into the drop-in libibverbs.so.1 itself, so the
// registration cannot be dropped by the linker.
#include <cstring>
#include <mutex>
#include <string>

#include "engine.h"
#include "hcasim/sim_control.h"
#include "world.h"

namespace {
struct RegisterWorld {
  RegisterWorld() {
    hcasim::drv::register_link_enumerator([] {
      hcasim::sim::World* w = hcasim::sim::World::get();
      return w ? w->links() : std::vector<hcasim::drv::HcaLink*>{};
    });
  }
} register_world;
}  // namespace

namespace hcasim::sim {
bool stat_by_name(const model::HcaStats& s, const std::string& name, uint64_t& v);
}

#define HCASIM_EXPORT extern "C" __attribute__((visibility("default")))

HCASIM_EXPORT int hcasim_sim_present(void) { return 1; }

HCASIM_EXPORT uint64_t hcasim_sim_now_ns(void) {
  auto& e = hcasim::sim::Engine::instance();
  std::lock_guard<std::recursive_mutex> g(e.mutex());
  return e.now_ps() / 1000;
}

HCASIM_EXPORT int hcasim_sim_drop_rx(const char* device_name, uint32_t qpn, uint32_t psn, uint32_t count) {
  hcasim::sim::World* w = hcasim::sim::World::get();
  if (!w || !device_name) return -1;
  std::lock_guard<std::recursive_mutex> g(hcasim::sim::Engine::instance().mutex());
  hcasim::model::Hca* h = w->find(device_name);
  if (!h) return -1;
  h->drop_rx_if(
      [qpn, psn](const hcasim::wire::ParsedFrame& f) {
        return (qpn == 0xffffffff || f.h.dest_qp == qpn) && (psn == 0xffffffff || f.h.psn == psn);
      },
      count);
  return 0;
}

HCASIM_EXPORT int hcasim_sim_counter(const char* device_name, const char* name, uint64_t* value) {
  hcasim::sim::World* w = hcasim::sim::World::get();
  if (!w || !device_name || !name || !value) return -1;
  std::lock_guard<std::recursive_mutex> g(hcasim::sim::Engine::instance().mutex());
  hcasim::model::Hca* h = w->find(device_name);
  if (!h) return -1;
  return hcasim::sim::stat_by_name(h->stats(), name, *value) ? 0 : -1;
}

HCASIM_EXPORT size_t hcasim_sim_stats_json(char* buf, size_t len) {
  hcasim::sim::World* w = hcasim::sim::World::get();
  std::string s = w ? w->stats_json() : "{}";
  if (buf && len) {
    std::strncpy(buf, s.c_str(), len - 1);
    buf[len - 1] = 0;
  }
  return s.size() + 1;
}
