// SPDX-License-Identifier: Apache-2.0
// hcasim run: parse, check, set up (step mode, private fabric, library path), start the
// commands, wait for them, tear the private fabric down.
#include <fcntl.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"
#include "dma_arena.h"
#include "drop_rule.h"
#include "fault_spec.h"
#include "trace_filter.h"

namespace hcasim::cli {

namespace {

/// "Not done yet, go on": the steps below return an exit status to stop the run early.
constexpr int kGoOn = -1;

/** @brief What `hcasim run` was asked to do, and what it set up for it. */
struct RunRequest {
  SimOptions so;
  FabricOptions fo;
  bool preload = false, aslr = false, fabric = false;
  std::string join;  ///< the fabric's socket (joined, or the private one once started)
  unsigned grace_s = 10;
  std::vector<std::vector<char*>> cmds;  ///< each command's argv, null-terminated
  bool cross = false;                    ///< on a cross-process fabric (else the in-process world)
  bool step_stdin = false;               ///< step commands come on our stdin
  pid_t device = -1;                     ///< the private fabric's device process
  std::string tmpdir;                    ///< holds the private fabric's socket
};

/** @brief The options before the command; @p i ends at the command's first word. */
int parse_run_options(int argc, char** argv, int& i, RunRequest& r) {
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    const int s = parse_sim_option(argc, argv, i, r.so);
    if (s < 0) return 2;
    if (s > 0) continue;
    const int f = parse_fabric_option(argc, argv, i, r.fo);
    if (f < 0) return 2;
    if (f > 0) continue;
    if (a == "--preload") {
      r.preload = true;
    } else if (a == "--aslr") {
      r.aslr = true;
    } else if (a == "--fabric") {
      r.fabric = true;
    } else if (a == "--join") {
      if (i + 1 >= argc || !*argv[i + 1]) return fail("--join needs the fabric's socket PATH");
      r.join = argv[++i];
    } else if (a == "--grace") {
      const char* v = i + 1 < argc ? argv[++i] : nullptr;
      if (!parse_uint(v, 0, 86400)) return fail("--grace: expected seconds (0..86400), got '%s'", v ? v : "");
      r.grace_s = unsigned(std::strtoul(v, nullptr, 0));
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return fail("run: unknown option '%s' (see hcasim help)", a.c_str());
    } else {
      break;  // the command starts here (the -- is optional)
    }
  }
  return kGoOn;
}

/** @brief The commands from argv[i] on, split at :::. */
int split_commands(int argc, char** argv, int i, RunRequest& r) {
  if (i >= argc) return fail("run: no COMMAND given (hcasim run [options] -- COMMAND [ARGS...])");
  r.cmds.assign(1, {});
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], ":::") == 0) {
      if (r.cmds.back().empty()) return fail("run: empty command before ':::'");
      r.cmds.emplace_back();
    } else {
      r.cmds.back().push_back(argv[i]);
    }
  }
  if (r.cmds.back().empty()) return fail("run: empty command after ':::'");
  for (auto& c : r.cmds) c.push_back(nullptr);
  return kGoOn;
}

/** @brief Hosts on the private fabric: one per command; a single --fabric command (a launcher
 *  whose children join) gets room for 8 unless --hosts says otherwise. */
uint32_t fabric_hosts(const RunRequest& r) {
  return r.so.hosts          ? std::max<uint32_t>(r.so.hosts, uint32_t(r.cmds.size()))
         : r.cmds.size() > 1 ? uint32_t(r.cmds.size())
                             : 8u;
}

/** @brief The HCA names the run will have (what a filter's host= may name). */
std::vector<std::string> run_hca_names(const RunRequest& r) {
  const uint32_t n = r.cross ? fabric_hosts(r) * r.fo.hcas_per_host : (r.so.hosts ? r.so.hosts : 2);
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.push_back("hcasim" + std::to_string(i));
  return names;
}

/** @brief --trace-filter, --step-filter, --drop and --faults, checked before anything starts. */
int check_filters(const RunRequest& r) {
  const std::vector<std::string> names = run_hca_names(r);
  for (const auto& [var, value] : r.so.env) {
    const char* option = var == "HCASIM_TRACE_FILTER"  ? "--trace-filter"
                         : var == "HCASIM_STEP_FILTER" ? "--step-filter"
                                                       : nullptr;
    std::string err;
    if (option && !sim::TraceFilter().parse(value, err, names)) return fail("%s: %s", option, err.c_str());
  }
  std::vector<sim::DropRule> rules;
  std::string err;
  if (!sim::parse_drop_rules(r.so.drops, rules, err, names)) return fail("--drop: %s", err.c_str());
  if (!sim::FaultSpec().parse(r.so.faults, err, names)) return fail("--faults: %s", err.c_str());
  return kGoOn;
}

/** @brief Where the commands run, and whether the options fit that. */
int check_run(RunRequest& r) {
  const std::string lib = self_dir() + "/../lib/libibverbs.so.1";
  if (access(lib.c_str(), R_OK) != 0)
    return fail("drop-in library not found at %s (build the hcasim_libibverbs target)", lib.c_str());
  if (r.join.empty() && !r.fabric && std::getenv("HCASIM_FABRIC") && *std::getenv("HCASIM_FABRIC"))
    r.join = std::getenv("HCASIM_FABRIC");
  r.cross = r.fabric || r.cmds.size() > 1 || !r.join.empty();
  // Read by the programs' drop-in library (fabric client); checked here so nothing starts with it wrong.
  bool arena = true;
  if (const std::string err = fabric::dma_arena_setting(arena); !err.empty()) return fail("%s", err.c_str());
  if (const std::string err = fabric::poll_spin_setting(arena); !err.empty()) return fail("%s", err.c_str());
  if (const std::string err = fabric::read_ahead_setting(arena); !err.empty()) return fail("%s", err.c_str());
  if (const std::string err = fabric::gather_asleep_setting(arena); !err.empty())
    return fail("%s", err.c_str());
  if (const std::string err = fabric::doorbell_ring_setting(arena); !err.empty())
    return fail("%s", err.c_str());
  if (!r.join.empty() && !r.so.env.empty())
    return fail(
        "run --join: simulation options (trace, profile, ...) are the fabric's: give them to `hcasim fabric "
        "start`");
  if (r.cross && r.so.step)
    return fail("step mode works in the in-process world only (one command, no --fabric/--join)");
  if (r.so.step && r.so.clock == "realtime")
    return fail(
        "--clock realtime cannot be combined with step mode: a paused device would fall behind the "
        "wall clock (use --clock lockstep or auto)");
  return check_filters(r);
}

/**
 * @brief Step commands: --step-script FILE; else stdin if it is a pipe (the program gets
 * /dev/null); else the terminal. The world (in the program's process) reads them.
 */
int setup_step(RunRequest& r) {
  SimOptions& so = r.so;
  if (!so.step) return kGoOn;
  so.env.emplace_back("HCASIM_STEP", "1");
  struct stat st {};
  if (so.step_script == "-") {
    r.step_stdin = true;
  } else if (!so.step_script.empty()) {
    if (access(so.step_script.c_str(), R_OK) != 0)
      return fail("--step-script: cannot read %s: %s", so.step_script.c_str(), std::strerror(errno));
    so.env.emplace_back("HCASIM_STEP_SCRIPT", so.step_script);
  } else if (fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    r.step_stdin = true;
  } else {
    const int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (tty < 0)
      return fail("--step needs a terminal, step commands on a pipe as stdin, or --step-script FILE");
    close(tty);
    so.env.emplace_back("HCASIM_STEP_SCRIPT", "/dev/tty");
  }
  if (r.step_stdin) {
    const int fd = fcntl(0, F_DUPFD, 10);  // inherited by the program (no close-on-exec)
    if (fd < 0) return fail("cannot pass stdin to step mode: %s", std::strerror(errno));
    so.env.emplace_back("HCASIM_STEP_FD", std::to_string(fd));
  }
  return kGoOn;
}

/** @brief A private fabric for this run: the device process lives as long as the commands. */
int start_private_fabric(RunRequest& r) {
  if (!r.cross || !r.join.empty()) return kGoOn;
  char tmpl[] = "/tmp/hcasim-run-XXXXXX";
  if (!mkdtemp(tmpl)) return fail("cannot make a directory for the fabric socket: %s", std::strerror(errno));
  r.tmpdir = tmpl;
  r.fo.socket = r.tmpdir + "/fabric.sock";
  r.device = start_device(r.fo, fabric_hosts(r), false, "");
  if (r.device < 0) {
    rmdir(r.tmpdir.c_str());
    return fail("the fabric's device process did not start");
  }
  r.join = r.fo.socket;
  return kGoOn;
}

/** @brief Put the drop-in library in front of this process's (and so its children's) search path. */
void inject_library(bool preload) {
  const std::string libdir_real = lib_dir_real();
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  if (preload) {  // both drop-ins: a program that uses rdma_cm loads librdmacm too
    std::string p = libdir_real + "/libibverbs.so.1:" + libdir_real + "/librdmacm.so.1";
    const char* old = std::getenv("LD_PRELOAD");
    setenv("LD_PRELOAD", old && *old ? (p + ":" + old).c_str() : p.c_str(), 1);
  } else {
    const char* old = std::getenv("LD_LIBRARY_PATH");
    setenv("LD_LIBRARY_PATH", old && *old ? (libdir_real + ":" + old).c_str() : libdir_real.c_str(), 1);
  }
}

/** @brief In the child: become command @p c (never returns). */
[[noreturn]] void exec_command(const RunRequest& r, size_t c) {
  // Command c is host c (several commands on a private fabric); a joined fabric or a
  // single --fabric command takes the first free host.
  if (r.cmds.size() > 1 && r.device > 0) setenv("HCASIM_HOST", std::to_string(c).c_str(), 1);
  // Determinism: the same program and seed give the same trace, addresses included.
  if (!r.aslr) personality(ADDR_NO_RANDOMIZE);
  if (r.step_stdin) {  // stdin carries step commands: the program reads /dev/null
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0 && null != 0) {
      dup2(null, 0);
      close(null);
    }
  }
  execvp(r.cmds[c][0], r.cmds[c].data());
  std::fprintf(stderr, "hcasim: cannot run '%s': %s\n", r.cmds[c][0], std::strerror(errno));
  _exit(127);
}

/** @brief Exit status of a waitpid() status, reporting a death by signal. */
int exit_code(int status, const char* what) {
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "hcasim: '%s' died of signal %d (%s)\n", what, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

/** @brief After a failure: the others get the grace period, then SIGTERM, then SIGKILL. */
void enforce_grace(const std::vector<pid_t>& pids, double since_failure_s, unsigned grace_s, bool& termed) {
  if (since_failure_s >= grace_s + 5.0) {
    for (pid_t p : pids)
      if (p > 0) kill(p, SIGKILL);
  } else if (since_failure_s >= grace_s && !termed) {
    termed = true;
    for (pid_t p : pids)
      if (p > 0) {
        std::fprintf(stderr, "hcasim: stopping pid %d (another command failed)\n", int(p));
        kill(p, SIGTERM);
      }
  }
}

/**
 * @brief Wait for every command. The status is the first non-zero one; once a command has
 * failed, the others get the grace period (enforce_grace()).
 */
int wait_commands(RunRequest& r, std::vector<pid_t>& pids) {
  int result = 0;
  size_t left = pids.size();
  bool failed = false, termed = false;
  auto failed_at = std::chrono::steady_clock::now();
  while (left) {
    int status = 0;
    const pid_t w = waitpid(-1, &status, failed ? WNOHANG : 0);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) break;
    if (w == 0) {
      enforce_grace(pids, std::chrono::duration<double>(std::chrono::steady_clock::now() - failed_at).count(),
                    r.grace_s, termed);
      usleep(20000);
      continue;
    }
    if (w == r.device) {
      std::fprintf(stderr, "hcasim: the fabric's device process ended unexpectedly (%s %d)\n",
                   WIFSIGNALED(status) ? "signal" : "status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      r.device = -1;
      if (!result) result = 1;
      continue;
    }
    for (size_t c = 0; c < pids.size(); ++c) {
      if (pids[c] != w) continue;
      pids[c] = -1;
      --left;
      const int code = exit_code(status, r.cmds[c][0]);
      if (code != 0 && result == 0) {
        result = code;
        if (r.cmds.size() > 1)
          std::fprintf(stderr, "hcasim: command %zu ('%s') exited with %d\n", c, r.cmds[c][0], code);
      }
      if (code != 0 && !failed && left) {
        failed = true;
        failed_at = std::chrono::steady_clock::now();
      }
    }
  }
  return result;
}

/** @brief Stop the private fabric's device (it writes its outputs) and remove its socket. */
int stop_private_fabric(RunRequest& r, int result) {
  if (r.device > 0) {
    if (!stop_device(r.join)) kill(r.device, SIGTERM);
    int status = 0;
    while (waitpid(r.device, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "hcasim: the fabric's device process failed at exit\n");
      if (!result) result = 1;
    }
  }
  if (!r.tmpdir.empty()) {
    unlink(r.fo.socket.c_str());
    rmdir(r.tmpdir.c_str());
  }
  return result;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  RunRequest r;
  int i = 0;
  int rc = parse_run_options(argc, argv, i, r);
  if (rc == kGoOn) rc = split_commands(argc, argv, i, r);
  if (rc == kGoOn) rc = check_run(r);
  if (rc == kGoOn) rc = setup_step(r);
  if (rc != kGoOn) return rc;
  for (auto& [k, v] : r.so.env) setenv(k.c_str(), v.c_str(), 1);
  if ((rc = start_private_fabric(r)) != kGoOn) return rc;
  inject_library(r.preload);
  if (r.cross) {
    setenv("HCASIM_FABRIC", r.join.c_str(), 1);
    unsetenv("HCASIM_HOSTS");  // the fabric's business now, not the programs'
  }
  std::vector<pid_t> pids;
  for (size_t c = 0; c < r.cmds.size(); ++c) {
    const pid_t pid = fork();
    if (pid < 0) return fail("fork failed: %s", std::strerror(errno));
    if (pid == 0) exec_command(r, c);
    pids.push_back(pid);
  }
  return stop_private_fabric(r, wait_commands(r, pids));
}

}  // namespace hcasim::cli
