// SPDX-License-Identifier: Apache-2.0
#include "timing_profile.h"

#include <cstdio>

namespace hcasim::model {
namespace {
// Figures are round numbers typical of the class of hardware, not any vendor's datasheet.
const TimingProfile kProfiles[] = {
    {"roce-100g", 100e9, 100'000, 150'000, 700'000, 250'000, 200e9, 4'000, 600'000, 8'000, 12'000, 1'000'000,
     20'000'000, 16, 4096,
     "a 100 Gb/s RoCE NIC on PCIe Gen4 x16 (the default): round figures typical of such a card, not any "
     "datasheet's"},
    {"roce-25g", 25e9, 100'000, 200'000, 900'000, 300'000, 64e9, 5'000, 800'000, 12'000, 20'000, 1'500'000,
     30'000'000, 8, 4096, "a 25 Gb/s RoCE NIC on PCIe Gen3 x8: an older or smaller adapter"},
    // Slow enough that every step of one work request is microseconds apart: good for labs.
    {"teaching", 1e9, 1'000'000, 500'000, 2'000'000, 1'000'000, 8e9, 50'000, 2'000'000, 100'000, 100'000,
     2'000'000, 50'000'000, 4, 1024,
     "a 1 Gb/s link and slow internals, for labs: every step of one work request is microseconds "
     "apart, so a trace reads in order and timelines show each stage"},
};
}  // namespace

const TimingProfile* find_profile(const std::string& name) {
  for (const auto& p : kProfiles)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> profile_names() {
  std::vector<std::string> v;
  for (const auto& p : kProfiles) v.push_back(p.name);
  return v;
}

const TimingProfile& default_profile() { return kProfiles[0]; }

std::string describe_profile(const TimingProfile& p) {
  char b[1024];
  std::snprintf(b, sizeof b,
                "%s: %s\n"
                "  link %.0f Gb/s, cable %.1f us, path MTU %u\n"
                "  doorbell (MMIO write) %.0f ns; DMA read %.0f ns, write %.0f ns, %.0f Gb/s\n"
                "  QPC cache %u entries: hit %.0f ns, miss %.0f ns; WQE decode %.0f ns; packet %.0f ns; "
                "interrupt %.0f ns\n"
                "  firmware command %.0f us (charged in the realtime clock only)\n",
                p.name.c_str(), p.purpose, p.link_bps / 1e9, double(p.propagation_ps) / 1e6, p.default_mtu,
                double(p.mmio_write_ps) / 1e3, double(p.pcie_read_ps) / 1e3, double(p.pcie_write_ps) / 1e3,
                p.pcie_bps / 1e9, p.qpc_cache_entries, double(p.qpc_hit_ps) / 1e3,
                double(p.qpc_miss_ps) / 1e3, double(p.wqe_decode_ps) / 1e3, double(p.pkt_process_ps) / 1e3,
                double(p.irq_ps) / 1e3, double(p.command_ps) / 1e6);
  return b;
}

}  // namespace hcasim::model
