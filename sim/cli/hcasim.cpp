// SPDX-License-Identifier: Apache-2.0
// hcasim: run unmodified ibverbs programs against simulated HCAs.
//
//   hcasim run [options] -- COMMAND [ARGS...] [::: COMMAND [ARGS...]]...
//   hcasim fabric start|stop|status [options]
//   hcasim profiles
//   hcasim version
//
// `run` puts build/lib (where the drop-in libibverbs.so.1 lives) in front of the program's
// library path, passes the simulation settings in HCASIM_* variables, and returns the
// program's exit status (128+N if it died of signal N). One command runs in the in-process
// world (its HCAs inside the program). Several commands (separated by :::), or --fabric, run
// on a cross-process fabric: hcasim-device holds the SystemC kernel and every HCA, and each
// command is one host on it (docs/fabric.md). `fabric start` leaves such a device running for
// any number of later runs (or plain processes with HCASIM_FABRIC set) to join.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "protocol.h"

namespace {

const char* const kProfiles[] = {"roce-100g", "roce-25g", "teaching"};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: hcasim run [options] -- COMMAND [ARGS...] [::: COMMAND [ARGS...]]...\n"
               "       hcasim fabric start [--socket PATH] [--hosts N] [--hcas-per-host K] [simulation options]\n"
               "       hcasim fabric stop|status [--socket PATH]\n"
               "       hcasim profiles | version | help\n"
               "\n"
               "run options:\n"
               "  --hosts N            simulated HCAs in the world (default 2: hcasim0, hcasim1)\n"
               "  --profile NAME       timing profile (default roce-100g; see `hcasim profiles`)\n"
               "  --trace FILE|-       readable step trace of every hardware event ('-' = stderr)\n"
               "  --trace-filter SPEC  keep only matching events: host=0;qpn=0x11;unit=cq,eq;kind=cqe.write\n"
               "  --timeline FILE      Chrome/Perfetto trace-event JSON: a track per host and unit, flows\n"
               "                       from each work request to its packets and CQE (ui.perfetto.dev)\n"
               "  --vcd FILE           doorbells, queue indices, link busy, interrupts as a VCD (GTKWave)\n"
               "  --pcap FILE          every frame on every wire, RoCEv2 with ICRC (Wireshark/tshark)\n"
               "  --stats[=FILE]       per-device counters at exit, text (default stderr)\n"
               "  --stats=json         the same as JSON on stderr (with a snapshot of every live QP)\n"
               "  --stats-json FILE    the JSON into FILE ('-' = stderr)\n"
               "  --step               pause after every hardware event and read commands (h: help) from\n"
               "                       --step-script, else stdin if it is a pipe (the program then gets\n"
               "                       /dev/null as stdin), else the terminal (/dev/tty)\n"
               "  --step-filter SPEC   pause only at events matching SPEC (same syntax as --trace-filter)\n"
               "  --step-script FILE   step commands from FILE (a file or FIFO; '-' = stdin); implies --step\n"
               "  --seed N             simulation seed (default 1)\n"
               "  --idle-us N          advance simulated time after N us without verbs calls\n"
               "                       (for programs that wait outside verbs; 0 = never; default 2000)\n"
               "  --preload            inject with LD_PRELOAD instead of LD_LIBRARY_PATH\n"
               "\n"
               "cross-process runs (one host per command; all hosts in one device process, one trace):\n"
               "  CMD1 ARGS ::: CMD2 ARGS   run the commands side by side, command i as host i (hcasim<i>,\n"
               "                       192.0.2.<i+1>); exit status: the first non-zero one. When one\n"
               "                       fails, the others get --grace seconds before they are killed\n"
               "  --fabric             run even a single command on a private fabric (its child\n"
               "                       processes then join as further hosts, up to --hosts)\n"
               "  --join PATH          join the running fabric at PATH (default: $HCASIM_FABRIC if set);\n"
               "                       simulation options then belong to `hcasim fabric start`\n"
               "  --hcas-per-host K    HCAs each host owns (default 1)\n"
               "  --quiet-us N         time moves on once waiting programs' peers have been quiet this\n"
               "                       long (wall time; default 200)\n"
               "  --grace S            seconds the other commands get after one fails (default 10)\n"
               "  --aslr               keep address-space randomisation (by default it is off, so\n"
               "                       buffer addresses, and so traces, repeat from run to run)\n");
}

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

bool parse_uint(const char* s, unsigned long long lo, unsigned long long hi) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 0);
  return !*end && !errno && v >= lo && v <= hi;
}

int fail(const char* fmt, const char* a = "", const char* b = "") {
  std::fprintf(stderr, "hcasim: ");
  std::fprintf(stderr, fmt, a, b);
  std::fprintf(stderr, "\n");
  return 2;
}

/** @brief Settings that shape the simulation (they go to whoever holds the world). */
struct SimOptions {
  std::vector<std::pair<std::string, std::string>> env;
  bool step = false;
  std::string step_script;
  uint32_t hosts = 0;  ///< --hosts (0: not given)
};

/**
 * @brief Parse one simulation option at argv[i] (advancing i past its value). Returns 1 if it
 * was one, 0 if not, or -1 after printing an error.
 */
int parse_sim_option(int argc, char** argv, int& i, SimOptions& o) {
  const std::string a = argv[i];
  auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
  auto err = [](const char* fmt, const char* x = "") {
    fail(fmt, x);
    return -1;
  };
  if (a == "--hosts") {
    const char* v = value();
    if (!parse_uint(v, 1, 64)) return err("--hosts: expected a number from 1 to 64, got '%s'", v ? v : "");
    o.env.emplace_back("HCASIM_HOSTS", v);
    o.hosts = uint32_t(std::strtoul(v, nullptr, 0));
  } else if (a == "--profile") {
    const char* v = value();
    bool known = false;
    for (const char* p : kProfiles) known = known || (v && std::strcmp(v, p) == 0);
    if (!known) return err("--profile: unknown profile '%s' (known: roce-100g roce-25g teaching)", v ? v : "");
    o.env.emplace_back("HCASIM_PROFILE", v);
  } else if (a == "--trace") {
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
    o.env.emplace_back(a == "--timeline" ? "HCASIM_TIMELINE" : a == "--vcd" ? "HCASIM_VCD" : "HCASIM_PCAP", v);
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
  } else if (a == "--idle-us") {
    const char* v = value();
    if (!parse_uint(v, 0, 10000000)) return err("--idle-us: expected 0..10000000, got '%s'", v ? v : "");
    o.env.emplace_back("HCASIM_IDLE_US", v);
  } else {
    return 0;
  }
  return 1;
}

/** @brief Options of the cross-process fabric's device process. */
struct FabricOptions {
  std::string socket;
  uint32_t hcas_per_host = 1;
  uint32_t quiet_us = 200;
};

int parse_fabric_option(int argc, char** argv, int& i, FabricOptions& f) {
  const std::string a = argv[i];
  const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
  if (a == "--hcas-per-host") {
    if (!parse_uint(v, 1, hcasim::fabric::kMaxHcasPerHost))
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

std::string lib_dir_real() {
  const std::string lib_dir = self_dir() + "/../lib";
  char real[PATH_MAX];
  return realpath(lib_dir.c_str(), real) ? real : lib_dir;
}

/** @brief Put the drop-in library in front of this process's (and so its children's) search path. */
void inject_library(bool preload) {
  const std::string libdir_real = lib_dir_real();
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  if (preload) {
    std::string p = libdir_real + "/libibverbs.so.1";
    const char* old = std::getenv("LD_PRELOAD");
    setenv("LD_PRELOAD", old && *old ? (p + ":" + old).c_str() : p.c_str(), 1);
  } else {
    const char* old = std::getenv("LD_LIBRARY_PATH");
    setenv("LD_LIBRARY_PATH", old && *old ? (libdir_real + ":" + old).c_str() : libdir_real.c_str(), 1);
  }
}

/**
 * @brief Start hcasim-device on @p f.socket for @p hosts hosts; returns its pid once it
 * listens, or -1 (the device's own error is on stderr). @p detach: a daemon in its own
 * session, its output in @p log.
 */
pid_t start_device(const FabricOptions& f, uint32_t hosts, bool detach, const std::string& log) {
  const std::string dev = self_dir() + "/hcasim-device";
  if (access(dev.c_str(), X_OK) != 0) {
    fail("device program not found at %s (build the hcasim-device target)", dev.c_str());
    return -1;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    const int ready = fcntl(p[1], F_DUPFD, 10);  // without close-on-exec
    if (detach) {
      setsid();
      const int null = open("/dev/null", O_RDONLY);
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      if (null >= 0) dup2(null, 0);
      if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
      }
    }
    const std::string hs = std::to_string(hosts), k = std::to_string(f.hcas_per_host),
                      q = std::to_string(f.quiet_us), r = std::to_string(ready);
    execl(dev.c_str(), dev.c_str(), "--socket", f.socket.c_str(), "--hosts", hs.c_str(), "--hcas-per-host",
          k.c_str(), "--quiet-us", q.c_str(), "--ready-fd", r.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "hcasim: cannot run %s: %s\n", dev.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(p[1]);
  char buf[8] = {};
  ssize_t n;
  do {
    n = read(p[0], buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  close(p[0]);
  if (n <= 0) {  // it exited before listening
    int st = 0;
    waitpid(pid, &st, 0);
    return -1;
  }
  return pid;
}

/** @brief Ask the device at @p path to stop (it writes its outputs first). */
bool stop_device(const std::string& path) {
  const int fd = hcasim::fabric::connect_socket(path);
  if (fd < 0) return false;
  hcasim::fabric::StatusReply r{};
  hcasim::fabric::MsgHeader h{};
  const bool ok = hcasim::fabric::send_msg(fd, hcasim::fabric::MsgType::Stop, nullptr, 0) &&
                  hcasim::fabric::recv_msg(fd, h, &r, sizeof r) > 0;
  close(fd);
  return ok;
}

/** @brief Exit status of a waitpid() status, reporting a death by signal. */
int exit_code(int status, const char* what) {
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "hcasim: '%s' died of signal %d (%s)\n", what, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

int cmd_run(int argc, char** argv) {
  SimOptions so;
  FabricOptions fo;
  bool preload = false, aslr = false, fabric = false;
  std::string join;
  unsigned grace_s = 10;
  int i = 0;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    const int r = parse_sim_option(argc, argv, i, so);
    if (r < 0) return 2;
    if (r > 0) continue;
    const int f = parse_fabric_option(argc, argv, i, fo);
    if (f < 0) return 2;
    if (f > 0) continue;
    if (a == "--preload") {
      preload = true;
    } else if (a == "--aslr") {
      aslr = true;
    } else if (a == "--fabric") {
      fabric = true;
    } else if (a == "--join") {
      if (i + 1 >= argc || !*argv[i + 1]) return fail("--join needs the fabric's socket PATH");
      join = argv[++i];
    } else if (a == "--grace") {
      const char* v = i + 1 < argc ? argv[++i] : nullptr;
      if (!parse_uint(v, 0, 86400)) return fail("--grace: expected seconds (0..86400), got '%s'", v ? v : "");
      grace_s = unsigned(std::strtoul(v, nullptr, 0));
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return fail("run: unknown option '%s' (see hcasim help)", a.c_str());
    } else {
      break;  // the command starts here (the -- is optional)
    }
  }
  if (i >= argc) return fail("run: no COMMAND given (hcasim run [options] -- COMMAND [ARGS...])");
  // The commands, split at :::.
  std::vector<std::vector<char*>> cmds(1);
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], ":::") == 0) {
      if (cmds.back().empty()) return fail("run: empty command before ':::'");
      cmds.emplace_back();
    } else {
      cmds.back().push_back(argv[i]);
    }
  }
  if (cmds.back().empty()) return fail("run: empty command after ':::'");
  for (auto& c : cmds) c.push_back(nullptr);
  const std::string lib = self_dir() + "/../lib/libibverbs.so.1";
  if (access(lib.c_str(), R_OK) != 0) return fail("drop-in library not found at %s (build the hcasim_libibverbs target)", lib.c_str());
  if (join.empty() && !fabric && std::getenv("HCASIM_FABRIC") && *std::getenv("HCASIM_FABRIC"))
    join = std::getenv("HCASIM_FABRIC");
  const bool cross = fabric || cmds.size() > 1 || !join.empty();
  if (!join.empty() && !so.env.empty())
    return fail("run --join: simulation options (trace, profile, ...) are the fabric's: give them to `hcasim fabric start`");
  if (cross && so.step)
    return fail("step mode works in the in-process world only (one command, no --fabric/--join)");

  // Step commands: --step-script FILE; else stdin if it is a pipe (the program gets /dev/null);
  // else the terminal. The world (in the program's process) reads them.
  bool step_stdin = false;
  if (so.step) {
    so.env.emplace_back("HCASIM_STEP", "1");
    struct stat st {};
    if (so.step_script == "-") {
      step_stdin = true;
    } else if (!so.step_script.empty()) {
      if (access(so.step_script.c_str(), R_OK) != 0)
        return fail("--step-script: cannot read %s: %s", so.step_script.c_str(), std::strerror(errno));
      so.env.emplace_back("HCASIM_STEP_SCRIPT", so.step_script);
    } else if (fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
      step_stdin = true;
    } else {
      const int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
      if (tty < 0)
        return fail("--step needs a terminal, step commands on a pipe as stdin, or --step-script FILE");
      close(tty);
      so.env.emplace_back("HCASIM_STEP_SCRIPT", "/dev/tty");
    }
    if (step_stdin) {
      const int fd = fcntl(0, F_DUPFD, 10);  // inherited by the program (no close-on-exec)
      if (fd < 0) return fail("cannot pass stdin to step mode: %s", std::strerror(errno));
      so.env.emplace_back("HCASIM_STEP_FD", std::to_string(fd));
    }
  }
  for (auto& [k, v] : so.env) setenv(k.c_str(), v.c_str(), 1);

  // A private fabric for this run: the device process lives as long as the commands.
  pid_t device = -1;
  std::string tmpdir;
  if (cross && join.empty()) {
    char tmpl[] = "/tmp/hcasim-run-XXXXXX";
    if (!mkdtemp(tmpl)) return fail("cannot make a directory for the fabric socket: %s", std::strerror(errno));
    tmpdir = tmpl;
    fo.socket = tmpdir + "/fabric.sock";
    // One host per command; a single --fabric command (a launcher whose children join) gets
    // room for 8 unless --hosts says otherwise.
    const uint32_t hosts = so.hosts ? std::max<uint32_t>(so.hosts, uint32_t(cmds.size()))
                                    : cmds.size() > 1 ? uint32_t(cmds.size()) : 8u;
    device = start_device(fo, hosts, false, "");
    if (device < 0) {
      rmdir(tmpdir.c_str());
      return fail("the fabric's device process did not start");
    }
    join = fo.socket;
  }
  inject_library(preload);
  if (cross) {
    setenv("HCASIM_FABRIC", join.c_str(), 1);
    unsetenv("HCASIM_HOSTS");  // the fabric's business now, not the programs'
  }

  std::vector<pid_t> pids;
  for (size_t c = 0; c < cmds.size(); ++c) {
    pid_t pid = fork();
    if (pid < 0) return fail("fork failed: %s", std::strerror(errno));
    if (pid == 0) {
      // Command c is host c (several commands on a private fabric); a joined fabric or a
      // single --fabric command takes the first free host.
      if (cmds.size() > 1 && device > 0) setenv("HCASIM_HOST", std::to_string(c).c_str(), 1);
      // Determinism: the same program and seed give the same trace, addresses included.
      if (!aslr) personality(ADDR_NO_RANDOMIZE);
      if (step_stdin) {  // stdin carries step commands: the program reads /dev/null
        const int null = open("/dev/null", O_RDONLY);
        if (null >= 0 && null != 0) {
          dup2(null, 0);
          close(null);
        }
      }
      execvp(cmds[c][0], cmds[c].data());
      std::fprintf(stderr, "hcasim: cannot run '%s': %s\n", cmds[c][0], std::strerror(errno));
      _exit(127);
    }
    pids.push_back(pid);
  }
  // Wait for every command. The status is the first non-zero one; once a command has failed,
  // the others get the grace period, then SIGTERM, then SIGKILL.
  int result = 0;
  size_t left = pids.size();
  bool failed = false, termed = false;
  auto t0 = std::chrono::steady_clock::now(), failed_at = t0;
  while (left) {
    int status = 0;
    const pid_t w = waitpid(-1, &status, failed ? WNOHANG : 0);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) break;
    if (w == 0) {
      const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - failed_at).count();
      if (since >= grace_s + 5.0) {
        for (pid_t p : pids)
          if (p > 0) kill(p, SIGKILL);
      } else if (since >= grace_s && !termed) {
        termed = true;
        for (pid_t p : pids)
          if (p > 0) {
            std::fprintf(stderr, "hcasim: stopping pid %d (another command failed)\n", int(p));
            kill(p, SIGTERM);
          }
      }
      usleep(20000);
      continue;
    }
    if (w == device) {
      std::fprintf(stderr, "hcasim: the fabric's device process ended unexpectedly (%s %d)\n",
                   WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      device = -1;
      if (!result) result = 1;
      continue;
    }
    for (size_t c = 0; c < pids.size(); ++c) {
      if (pids[c] != w) continue;
      pids[c] = -1;
      --left;
      const int code = exit_code(status, cmds[c][0]);
      if (code != 0 && result == 0) {
        result = code;
        if (cmds.size() > 1) std::fprintf(stderr, "hcasim: command %zu ('%s') exited with %d\n", c, cmds[c][0], code);
      }
      if (code != 0 && !failed && left) {
        failed = true;
        failed_at = std::chrono::steady_clock::now();
      }
    }
  }
  if (device > 0) {
    if (!stop_device(join)) kill(device, SIGTERM);
    int status = 0;
    while (waitpid(device, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "hcasim: the fabric's device process failed at exit\n");
      if (!result) result = 1;
    }
  }
  if (!tmpdir.empty()) {
    unlink(fo.socket.c_str());
    rmdir(tmpdir.c_str());
  }
  return result;
}

int cmd_fabric(int argc, char** argv) {
  if (argc < 1) return fail("fabric: expected start, stop or status");
  const std::string what = argv[0];
  SimOptions so;
  FabricOptions fo;
  for (int i = 1; i < argc; ++i) {
    const int f = parse_fabric_option(argc, argv, i, fo);
    if (f < 0) return 2;
    if (f > 0) continue;
    if (what == "start") {
      const int r = parse_sim_option(argc, argv, i, so);
      if (r < 0) return 2;
      if (r > 0) continue;
    }
    return fail("fabric %s: unknown option '%s' (see hcasim help)", what.c_str(), argv[i]);
  }
  if (fo.socket.empty()) {
    const char* env = std::getenv("HCASIM_FABRIC");
    fo.socket = env && *env ? env : hcasim::fabric::default_socket_path();
  }
  if (what == "status") {
    const int fd = hcasim::fabric::connect_socket(fo.socket);
    if (fd < 0) {
      std::printf("no fabric running at %s\n", fo.socket.c_str());
      return 1;
    }
    std::vector<char> buf(hcasim::fabric::kMaxMessage);
    hcasim::fabric::MsgHeader h{};
    if (!hcasim::fabric::send_msg(fd, hcasim::fabric::MsgType::Status, nullptr, 0) ||
        hcasim::fabric::recv_msg(fd, h, buf.data(), buf.size()) <= 0)
      return fail("fabric status: no answer from %s", fo.socket.c_str());
    close(fd);
    std::fwrite(buf.data(), 1, h.len, stdout);
    return 0;
  }
  if (what == "stop") {
    if (!stop_device(fo.socket)) {
      std::printf("no fabric running at %s\n", fo.socket.c_str());
      return 1;
    }
    // It removes its socket on the way out.
    for (int t = 0; t < 500 && access(fo.socket.c_str(), F_OK) == 0; ++t) usleep(20000);
    std::printf("fabric at %s stopped\n", fo.socket.c_str());
    return 0;
  }
  if (what != "start") return fail("fabric: unknown subcommand '%s' (start, stop, status)", what.c_str());
  if (so.step) return fail("fabric start: step mode works in the in-process world only");
  const int probe = hcasim::fabric::connect_socket(fo.socket);
  if (probe >= 0) {
    close(probe);
    return fail("a fabric is already running at %s (hcasim fabric stop first)", fo.socket.c_str());
  }
  for (auto& [k, v] : so.env) setenv(k.c_str(), v.c_str(), 1);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  const std::string log = fo.socket + ".log";
  const pid_t pid = start_device(fo, so.hosts ? so.hosts : 8, true, log);
  if (pid < 0) return fail("the fabric did not start; see %s", log.c_str());
  std::printf("fabric running at %s (device pid %d, %u hosts, log %s)\n"
              "join it with: export HCASIM_FABRIC=%s LD_LIBRARY_PATH=%s\n",
              fo.socket.c_str(), int(pid), so.hosts ? so.hosts : 8, log.c_str(), fo.socket.c_str(), lib_dir_real().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
  if (cmd == "fabric") return cmd_fabric(argc - 2, argv + 2);
  if (cmd == "profiles") {
    for (const char* p : kProfiles) std::printf("%s\n", p);
    return 0;
  }
  if (cmd == "version") {
    std::printf("hcasim 0.1.0\n");
    return 0;
  }
  if (cmd == "help" || cmd == "-h" || cmd == "--help") {
    usage(stdout);
    return 0;
  }
  return fail("unknown command '%s' (hcasim run | fabric | profiles | version | help)", cmd.c_str());
}
