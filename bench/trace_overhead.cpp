// SPDX-License-Identifier: Apache-2.0
// Cost of each trace output: the same RDMA WRITE workload through the public ibverbs API (two
// simulated HCAs in one process, 64-byte WRITEs, 128 in flight, 1 in 16 signaled) with every
// output off, then with each one on alone, then all together. Each configuration runs in a fresh
// process (the world reads HCASIM_* once), writing into a temporary directory. Figures, not
// pass/fail: WRITE completions per CPU-second of the process (robust against other load on the
// machine; the simulation is single-threaded) and per wall-second, and the ratio to "off".
//
//   trace_overhead [--ops N] [--size BYTES] [--repeat R]
#include <infiniband/verbs.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hcasim/sim_control.h"
#include "write_pair.h"

namespace {

using bench::die;
using bench::Side;
using bench::wall_now;

double cpu_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Rate {
  double cpu = -1, wall = -1;
};

// The workload of sim_throughput: `window` WRITEs in flight, linked batches of 16, 1 in 16 signaled.
Rate writes_per_s(Side& a, Side& b, uint32_t size, uint64_t ops) {
  const double t0 = wall_now(), c0 = cpu_now();
  bench::write_window(a, b, size, ops, 128, 16);
  Rate r;
  r.wall = double(ops) / (wall_now() - t0);
  r.cpu = double(ops) / std::max(1e-6, cpu_now() - c0);
  return r;
}

// One configuration, in this (child) process: the world reads HCASIM_* at the first verbs call.
int child(uint64_t ops, uint32_t size) {
  Side a, b;
  if (!bench::open_simulated_pair(a, b, "trace_overhead")) return 1;
  writes_per_s(a, b, size, ops / 10 + 1);  // warm-up: first-touch page faults, QPC cache
  const Rate r = writes_per_s(a, b, size, ops);
  std::printf("RESULT %.1f %.1f\n", r.cpu, r.wall);
  std::fflush(stdout);
  return 0;
}

struct Config {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;  ///< value "@x": file x in the temp dir
};

Rate run_config(const Config& c, const std::string& dir, uint64_t ops, uint32_t size, uint64_t* bytes) {
  int fd[2];
  if (pipe(fd)) die("pipe");
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 1);
    for (const char* v : {"HCASIM_TRACE", "HCASIM_TIMELINE", "HCASIM_VCD", "HCASIM_PCAP", "HCASIM_STATS",
                          "HCASIM_STATS_JSON", "HCASIM_STEP"})
      unsetenv(v);
    setenv("HCASIM_IDLE_US", "0", 1);
    for (auto& [k, v] : c.env) setenv(k, v[0] == '@' ? (dir + "/" + (v + 1)).c_str() : v, 1);
    const std::string o = std::to_string(ops), s = std::to_string(size);
    execl("/proc/self/exe", "trace_overhead", "--child", "--ops", o.c_str(), "--size", s.c_str(), nullptr);
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fd[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  Rate rate;
  const size_t at = out.find("RESULT ");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || at == std::string::npos) return rate;
  char* end = nullptr;
  rate.cpu = std::strtod(out.c_str() + at + 7, &end);
  rate.wall = std::strtod(end, nullptr);
  *bytes = 0;
  for (auto& [k, v] : c.env) {
    struct stat sb {};
    if (v[0] == '@' && stat((dir + "/" + (v + 1)).c_str(), &sb) == 0) *bytes += uint64_t(sb.st_size);
  }
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t ops = 20000;
  uint32_t size = 64;
  int repeat = 3;
  bool is_child = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 0);
    } else if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
      size = uint32_t(std::strtoul(argv[++i], nullptr, 0));
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--child")) {
      is_child = true;
    } else {
      std::fprintf(stderr, "usage: trace_overhead [--ops N] [--size BYTES] [--repeat R]\n");
      return 2;
    }
  }
  if (is_child) return child(ops, size);

  char tmpl[] = "/tmp/hcasim-trace-overhead.XXXXXX";
  if (!mkdtemp(tmpl)) die("mkdtemp");
  const std::string dir = tmpl;
  const std::vector<Config> configs = {
      {"off", {}},
      {"--trace FILE", {{"HCASIM_TRACE", "@trace.txt"}}},
      {"--trace FILE --trace-filter kind=cqe.write",
       {{"HCASIM_TRACE", "@trace.txt"}, {"HCASIM_TRACE_FILTER", "kind=cqe.write"}}},
      {"--timeline FILE", {{"HCASIM_TIMELINE", "@timeline.json"}}},
      {"--vcd FILE", {{"HCASIM_VCD", "@signals.vcd"}}},
      {"--pcap FILE", {{"HCASIM_PCAP", "@wire.pcap"}}},
      {"--stats-json FILE", {{"HCASIM_STATS_JSON", "@stats.json"}}},
      {"all of them",
       {{"HCASIM_TRACE", "@trace.txt"},
        {"HCASIM_TIMELINE", "@timeline.json"},
        {"HCASIM_VCD", "@signals.vcd"},
        {"HCASIM_PCAP", "@wire.pcap"},
        {"HCASIM_STATS_JSON", "@stats.json"}}},
      {"off (again: the run-to-run noise)", {}},
  };
  std::printf(
      "hcasim trace output cost: %llu RDMA WRITEs of %u B (128 in flight, 1 in 16 signaled), best of %d\n",
      static_cast<unsigned long long>(ops), size, repeat);
  std::printf("%-44s %13s %8s %14s %8s %11s\n", "outputs", "WRITEs/CPU-s", "vs off", "WRITEs/wall-s",
              "vs off", "MB written");
  Rate off;
  for (const Config& c : configs) {
    Rate best;
    uint64_t bytes = 0;
    for (int r = 0; r < repeat; ++r) {
      const Rate x = run_config(c, dir, ops, size, &bytes);
      best.cpu = std::max(best.cpu, x.cpu);
      best.wall = std::max(best.wall, x.wall);
    }
    if (best.cpu <= 0) {
      std::printf("%-44s %13s\n", c.name, "failed");
      continue;
    }
    if (off.cpu <= 0) off = best;
    std::printf("%-44s %13.0f %7.2fx %14.0f %7.2fx %11.1f\n", c.name, best.cpu, best.cpu / off.cpu, best.wall,
                best.wall / off.wall, double(bytes) / 1e6);
    std::fflush(stdout);
  }
  std::system(("rm -rf '" + dir + "'").c_str());
  return 0;
}
