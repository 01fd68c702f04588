// SPDX-License-Identifier: Apache-2.0
// hcasim's option parsing and the small helpers every subcommand uses (cli.h).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli.h"
#include "clock.h"
#include "protocol.h"
#include "timing_profile.h"

namespace hcasim::cli {

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

std::string lib_dir_real() {
  const std::string lib_dir = self_dir() + "/../lib";
  char real[PATH_MAX];
  return realpath(lib_dir.c_str(), real) ? real : lib_dir;
}

bool parse_uint(const char* s, unsigned long long lo, unsigned long long hi) {
  // strtoull takes "-1" (as ULLONG_MAX) and leading blanks: a number here starts with a digit.
  if (!s || !std::isdigit(static_cast<unsigned char>(*s))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 0);
  return !*end && !errno && v >= lo && v <= hi;
}

int fail(const char* fmt, const char* a, const char* b) {
  std::fprintf(stderr, "hcasim: ");
  std::fprintf(stderr, fmt, a, b);
  std::fprintf(stderr, "\n");
  return 2;
}

/** The options that choose outputs (trace, timeline, VCD, pcap, counters): as parse_sim_option(). */
template <typename Value>
int parse_output_option(const std::string& a, Value value, SimOptions& o) {
  auto err = [](const char* fmt, const char* x = "", const char* y = "") {
    fail(fmt, x, y);
    return -1;
  };
  if (a == "--trace") {
    const char* v = value();
    if (!v || std::strcmp(v, "--") == 0) return err("--trace needs FILE or -");
    o.env.emplace_back("HCASIM_TRACE", v);
  } else if (a == "--trace-filter") {
    const char* v = value();
    if (!v) return err("--trace-filter needs a SPEC");
    o.env.emplace_back("HCASIM_TRACE_FILTER", v);
  } else if (a == "--timeline" || a == "--vcd" || a == "--pcap") {
    const char* v = value();
    if (!v || !*v || std::strcmp(v, "--") == 0) return err("%s needs a FILE", a.c_str());
    o.env.emplace_back(a == "--timeline" ? "HCASIM_TIMELINE"
                       : a == "--vcd"    ? "HCASIM_VCD"
                                         : "HCASIM_PCAP",
                       v);
  } else if (a == "--stats") {
    o.env.emplace_back("HCASIM_STATS", "-");
  } else if (a == "--stats=json") {
    o.env.emplace_back("HCASIM_STATS_JSON", "-");
  } else if (a.rfind("--stats=", 0) == 0) {
    if (a.size() == 8) return err("--stats=: expected a FILE or json");
    o.env.emplace_back("HCASIM_STATS", a.substr(8));
  } else if (a == "--stats-json") {
    const char* v = value();
    if (!v || !*v || std::strcmp(v, "--") == 0) return err("--stats-json needs a FILE or -");
    o.env.emplace_back("HCASIM_STATS_JSON", v);
  } else {
    return 0;
  }
  return 1;
}

int parse_sim_option(int argc, char** argv, int& i, SimOptions& o) {
  const std::string a = argv[i];
  auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
  auto err = [](const char* fmt, const char* x = "", const char* y = "") {
    fail(fmt, x, y);
    return -1;
  };
  if (a == "--hosts") {
    const char* v = value();
    if (!parse_uint(v, 1, 64)) return err("--hosts: expected a number from 1 to 64, got '%s'", v ? v : "");
    o.env.emplace_back("HCASIM_HOSTS", v);
    o.hosts = uint32_t(std::strtoul(v, nullptr, 0));
  } else if (a == "--profile") {
    const char* v = value();
    if (!v || !model::find_profile(v)) {
      std::string known;
      for (const std::string& n : model::profile_names()) known += (known.empty() ? "" : " ") + n;
      return err("--profile: unknown profile '%s' (known: %s; `hcasim profiles` describes them)", v ? v : "",
                 known.c_str());
    }
    o.env.emplace_back("HCASIM_PROFILE", v);
  } else if (int r = parse_output_option(a, value, o); r != 0) {
    return r;
  } else if (a == "--step") {
    o.step = true;
  } else if (a == "--step-filter") {
    const char* v = value();
    if (!v) return err("--step-filter needs a SPEC");
    o.env.emplace_back("HCASIM_STEP_FILTER", v);
    o.step = true;
  } else if (a == "--step-script") {
    const char* v = value();
    if (!v || !*v || std::strcmp(v, "--") == 0) return err("--step-script needs a FILE or -");
    o.step_script = v;
    o.step = true;
  } else if (a == "--seed") {
    const char* v = value();
    if (!parse_uint(v, 0, ~0ull)) return err("--seed: expected a number, got '%s'", v ? v : "");
    o.env.emplace_back("HCASIM_SEED", v);
  } else if (a == "--clock") {
    const char* v = value();
    sim::ClockMode m;
    if (!v || !sim::parse_clock_mode(v, m))
      return err("--clock: expected auto, lockstep or realtime, got '%s' (docs/architecture.md#time)",
                 v ? v : "");
    o.env.emplace_back("HCASIM_CLOCK", v);
    o.clock = v;
  } else if (a == "--explain" || a == "--no-explain") {
    o.env.emplace_back("HCASIM_EXPLAIN", a == "--explain" ? "1" : "0");
  } else if (a == "--drop") {
    const char* v = value();  // checked with the run's host names, before anything starts (run.cpp)
    if (!v || !*v) return err("--drop needs a rule: 'host=H;psn=P[;qpn=Q][;count=N]'");
    o.drops += (o.drops.empty() ? "" : "|") + std::string(v);
    auto& env = o.env;
    env.erase(std::remove_if(env.begin(), env.end(), [](const auto& e) { return e.first == "HCASIM_DROP"; }),
              env.end());
    env.emplace_back("HCASIM_DROP", o.drops);
  } else if (a == "--faults") {
    const char* v = value();  // checked with the run's host names, before anything starts (run.cpp)
    if (!v || !*v)
      return err("--faults needs a SPEC such as 'loss=0.01,duplicate=0.001' (docs/fabric.md#faults)");
    o.faults += (o.faults.empty() ? "" : ",") + std::string(v);  // repeated: the clauses add up
    auto& env = o.env;
    env.erase(
        std::remove_if(env.begin(), env.end(), [](const auto& e) { return e.first == "HCASIM_FAULTS"; }),
        env.end());
    env.emplace_back("HCASIM_FAULTS", o.faults);
  } else if (a == "--idle-us") {
    const char* v = value();
    if (!parse_uint(v, 0, 10000000)) return err("--idle-us: expected 0..10000000, got '%s'", v ? v : "");
    o.env.emplace_back("HCASIM_IDLE_US", v);
  } else {
    return 0;
  }
  return 1;
}

int parse_fabric_option(int argc, char** argv, int& i, FabricOptions& f) {
  const std::string a = argv[i];
  const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
  if (a == "--hcas-per-host") {
    if (!parse_uint(v, 1, fabric::kMaxHcasPerHost))
      return fail("--hcas-per-host: expected a number from 1 to 8, got '%s'", v ? v : ""), -1;
    f.hcas_per_host = uint32_t(std::strtoul(v, nullptr, 0));
  } else if (a == "--quiet-us") {
    if (!parse_uint(v, 0, 1000000)) return fail("--quiet-us: expected 0..1000000, got '%s'", v ? v : ""), -1;
    f.quiet_us = uint32_t(std::strtoul(v, nullptr, 0));
  } else if (a == "--socket") {
    if (!v || !*v) return fail("--socket needs a PATH"), -1;
    f.socket = v;
  } else {
    return 0;
  }
  ++i;
  return 1;
}

}  // namespace hcasim::cli
