// SPDX-License-Identifier: Apache-2.0
#include "timing_profile.h"

#include <cstdio>

namespace hcasim::model {
namespace {
// roce-100g is calibrated against published perftest figures of ConnectX-5 (and 6 Dx) 100 GbE
// cards (docs/calibration.md has the table, the sources and bench/calibration, which reproduces
// the simulated column). Its figures, in picoseconds, and why each:
//   link 100 Gb/s, path MTU 4096: 100GbE with jumbo frames (RoCE's largest MTU).
//   propagation 200 ns, port to port beyond serialisation: a 2 m cable (~10 ns) and the two
//     PHYs' PCS and RS-FEC (about 100 ns each way for 100GBASE-CR4/SR4 with RS(528,514)).
//   MMIO write 200 ns: a posted store from the CPU through the root complex to the adapter's
//     doorbell (and, BlueFlame, the WQE it carries); about half a PCIe read round trip.
//   DMA read 400 ns: the round trip of a small PCIe read to host memory (pcie-bench measured
//     several hundred ns; perftest shows a 2-byte WRITE 0.39 us slower without inline data).
//   DMA write 200 ns: a posted write until the polling CPU sees it (PCIe plus the cache line's
//     trip to the core); so data and CQEs land 200 ns after the adapter sends them.
//   DMA rate 110 Gb/s: PCIe Gen3 x16 (8 GT/s, 128b/130b, TLP headers at 256-byte payloads),
//     ConnectX-5's slot; 4 KiB crosses it in 0.3 us, twice per message (read, then write).
//   QPC hit 4 ns, miss 500 ns: an on-chip lookup; a miss reads the context from host memory (a
//     DMA read and its processing). The 16-entry cache is the labs' (lab 4), far smaller than
//     a ConnectX's; no calibrated figure depends on it.
//   WQE decode 50 ns: parse the WQE, build the first packet's headers (the send pipeline).
//   packet 300 ns: the receive pipeline per packet (parse, context, key and address checks,
//     buffering) before the packet is acted on; with the port-to-port time it is what a READ's
//     round trip shows beyond a WRITE's one way.
//   interrupt 1 us, firmware command 20 us: not calibrated (no perftest figure shows them).
// Not calibrated either: roce-25g and teaching (round figures of their class).
const TimingProfile kProfiles[] = {
    {"roce-100g", 100e9, 200'000, 200'000, 400'000, 200'000, 110e9, 4'000, 500'000, 50'000, 300'000,
     1'000'000, 20'000'000, 16, 4096,
     "a 100 Gb/s RoCE NIC on PCIe Gen3 x16 (the default), calibrated against published perftest "
     "latencies and bandwidths of ConnectX-5/6 Dx 100 GbE cards (docs/calibration.md)"},
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
                "  link %.0f Gb/s, port to port %.1f us (cable and PHYs), path MTU %u\n"
                "  doorbell (MMIO write) %.0f ns; DMA read %.0f ns, write %.0f ns, %.0f Gb/s\n"
                "  QPC cache %u entries: hit %.0f ns, miss %.0f ns; WQE decode %.0f ns; receive pipeline "
                "%.0f ns a packet; interrupt %.0f ns\n"
                "  firmware command %.0f us (charged in the realtime clock only)\n",
                p.name.c_str(), p.purpose, p.link_bps / 1e9, double(p.propagation_ps) / 1e6, p.default_mtu,
                double(p.mmio_write_ps) / 1e3, double(p.pcie_read_ps) / 1e3, double(p.pcie_write_ps) / 1e3,
                p.pcie_bps / 1e9, p.qpc_cache_entries, double(p.qpc_hit_ps) / 1e3,
                double(p.qpc_miss_ps) / 1e3, double(p.wqe_decode_ps) / 1e3, double(p.pkt_process_ps) / 1e3,
                double(p.irq_ps) / 1e3, double(p.command_ps) / 1e6);
  return b;
}

}  // namespace hcasim::model
