// SPDX-License-Identifier: Apache-2.0
// hcasim-device: the device process of the cross-process fabric (device_server.h). Started by
// `hcasim run` (one command per host, `:::`) and `hcasim fabric start`; not normally run by hand.
//
//   hcasim-device --socket PATH [--hosts N] [--hcas-per-host K] [--quiet-us N] [--ready-fd FD]
//
// Trace, timeline, VCD, pcap, counters, profile and seed come from the same HCASIM_*
// variables as the in-process world (world.h); their outputs cover every host.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "device_server.h"
#include "dma_arena.h"
#include "engine.h"

namespace {
int usage() {
  std::fprintf(
      stderr,
      "usage: hcasim-device --socket PATH [--hosts N] [--hcas-per-host K] [--quiet-us N] [--ready-fd FD]\n");
  return 2;
}
bool parse(const char* s, uint64_t lo, uint64_t hi, uint64_t& out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 0);
  if (*end || v < lo || v > hi) return false;
  out = v;
  return true;
}
}  // namespace

// libsystemc references sc_main; the engine drives the kernel itself.
int main(int argc, char** argv) {
  hcasim::fabric::DeviceOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    uint64_t x = 0;
    if (a == "--socket" && v) {
      opt.socket = v;
    } else if (a == "--hosts" && parse(v, 1, 64, x)) {
      opt.hosts = uint32_t(x);
    } else if (a == "--hcas-per-host" && parse(v, 1, hcasim::fabric::kMaxHcasPerHost, x)) {
      opt.hcas_per_host = uint32_t(x);
    } else if (a == "--quiet-us" && parse(v, 0, 1'000'000, x)) {
      opt.quiet_us = uint32_t(x);
    } else if (a == "--ready-fd" && parse(v, 0, 65535, x)) {
      opt.ready_fd = int(x);
    } else {
      std::fprintf(stderr, "hcasim-device: bad argument '%s'%s\n", a.c_str(), v ? "" : " (missing value)");
      return usage();
    }
    ++i;
  }
  if (opt.socket.empty()) return usage();
  if (opt.hosts * opt.hcas_per_host > 64) {
    std::fprintf(stderr, "hcasim-device: %u hosts x %u HCAs is more than the 64 HCAs a fabric holds\n",
                 opt.hosts, opt.hcas_per_host);
    return 2;
  }
  hcasim::sim::WorldConfig cfg;
  std::string err = hcasim::fabric::read_ahead_setting(opt.read_ahead);
  if (err.empty()) err = hcasim::fabric::gather_asleep_setting(opt.gather_asleep);
  if (!err.empty() || !hcasim::sim::WorldConfig::from_env(cfg, err)) {
    std::fprintf(stderr, "hcasim-device: %s\n", err.c_str());
    return 2;
  }
  if (cfg.step) {
    std::fprintf(
        stderr,
        "hcasim-device: step mode works in the in-process world only (hcasim run with one command)\n");
    return 2;
  }
  cfg.hosts = opt.hosts * opt.hcas_per_host;
  cfg.idle_us = 0;                            // the server decides when time moves ...
  cfg.device_thread = false;                  // ... and drives the kernel itself, in either clock
  auto* world = new hcasim::sim::World(cfg);  // never destroyed: SystemC's globals go first at exit
  hcasim::fabric::DeviceServer server(*world, opt);
  if (!server.listen(err)) {
    std::fprintf(stderr, "hcasim-device: %s\n", err.c_str());
    return 1;
  }
  const int rc = server.run();
  world->at_exit();
  return rc;
}
