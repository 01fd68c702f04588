// SPDX-License-Identifier: Apache-2.0
// hcasim: run unmodified ibverbs programs against simulated HCAs.
//
//   hcasim run [options] -- COMMAND [ARGS...]
//   hcasim profiles
//   hcasim version
//
// `run` puts build/lib (where the drop-in libibverbs.so.1 lives) in front of the program's
// library path, passes the simulation settings in HCASIM_* variables, and returns the
// program's exit status (128+N if it died of signal N).
#include <fcntl.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* const kProfiles[] = {"roce-100g", "roce-25g", "teaching"};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: hcasim run [options] -- COMMAND [ARGS...]\n"
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

int cmd_run(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> env;
  bool preload = false, aslr = false, step = false;
  std::string step_script;
  int i = 0;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)what;
      return argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "--hosts") {
      const char* v = value("N");
      if (!parse_uint(v, 1, 64)) return fail("--hosts: expected a number from 1 to 64, got '%s'", v ? v : "");
      env.emplace_back("HCASIM_HOSTS", v);
    } else if (a == "--profile") {
      const char* v = value("NAME");
      bool known = false;
      for (const char* p : kProfiles) known = known || (v && std::strcmp(v, p) == 0);
      if (!known) return fail("--profile: unknown profile '%s' (known: roce-100g roce-25g teaching)", v ? v : "");
      env.emplace_back("HCASIM_PROFILE", v);
    } else if (a == "--trace") {
      const char* v = value("FILE");
      if (!v || std::strcmp(v, "--") == 0) return fail("--trace needs FILE or -");
      env.emplace_back("HCASIM_TRACE", v);
    } else if (a == "--trace-filter") {
      const char* v = value("SPEC");
      if (!v) return fail("--trace-filter needs a SPEC");
      env.emplace_back("HCASIM_TRACE_FILTER", v);
    } else if (a == "--timeline" || a == "--vcd" || a == "--pcap") {
      const char* v = value("FILE");
      if (!v || !*v || std::strcmp(v, "--") == 0) return fail("%s needs a FILE", a.c_str());
      env.emplace_back(a == "--timeline" ? "HCASIM_TIMELINE" : a == "--vcd" ? "HCASIM_VCD" : "HCASIM_PCAP", v);
    } else if (a == "--stats") {
      env.emplace_back("HCASIM_STATS", "-");
    } else if (a == "--stats=json") {
      env.emplace_back("HCASIM_STATS_JSON", "-");
    } else if (a.rfind("--stats=", 0) == 0) {
      if (a.size() == 8) return fail("--stats=: expected a FILE or json");
      env.emplace_back("HCASIM_STATS", a.substr(8));
    } else if (a == "--stats-json") {
      const char* v = value("FILE");
      if (!v || !*v || std::strcmp(v, "--") == 0) return fail("--stats-json needs a FILE or -");
      env.emplace_back("HCASIM_STATS_JSON", v);
    } else if (a == "--step") {
      step = true;
    } else if (a == "--step-filter") {
      const char* v = value("SPEC");
      if (!v) return fail("--step-filter needs a SPEC");
      env.emplace_back("HCASIM_STEP_FILTER", v);
      step = true;
    } else if (a == "--step-script") {
      const char* v = value("FILE");
      if (!v || !*v || std::strcmp(v, "--") == 0) return fail("--step-script needs a FILE or -");
      step_script = v;
      step = true;
    } else if (a == "--seed") {
      const char* v = value("N");
      if (!parse_uint(v, 0, ~0ull)) return fail("--seed: expected a number, got '%s'", v ? v : "");
      env.emplace_back("HCASIM_SEED", v);
    } else if (a == "--idle-us") {
      const char* v = value("N");
      if (!parse_uint(v, 0, 10000000)) return fail("--idle-us: expected 0..10000000, got '%s'", v ? v : "");
      env.emplace_back("HCASIM_IDLE_US", v);
    } else if (a == "--preload") {
      preload = true;
    } else if (a == "--aslr") {
      aslr = true;
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
  const std::string lib_dir = self_dir() + "/../lib";
  const std::string lib = lib_dir + "/libibverbs.so.1";
  if (access(lib.c_str(), R_OK) != 0) return fail("drop-in library not found at %s (build the hcasim_libibverbs target)", lib.c_str());
  char real[PATH_MAX];
  std::string libdir_real = realpath(lib_dir.c_str(), real) ? real : lib_dir;
  // Step commands: --step-script FILE; else stdin if it is a pipe (the program gets /dev/null);
  // else the terminal. The world (in the program's process) reads them.
  bool step_stdin = false;
  if (step) {
    env.emplace_back("HCASIM_STEP", "1");
    struct stat st {};
    if (step_script == "-") {
      step_stdin = true;
    } else if (!step_script.empty()) {
      if (access(step_script.c_str(), R_OK) != 0)
        return fail("--step-script: cannot read %s: %s", step_script.c_str(), std::strerror(errno));
      env.emplace_back("HCASIM_STEP_SCRIPT", step_script);
    } else if (fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
      step_stdin = true;
    } else {
      const int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
      if (tty < 0)
        return fail("--step needs a terminal, step commands on a pipe as stdin, or --step-script FILE");
      close(tty);
      env.emplace_back("HCASIM_STEP_SCRIPT", "/dev/tty");
    }
    if (step_stdin) {
      const int fd = fcntl(0, F_DUPFD, 10);  // inherited by the program (no close-on-exec)
      if (fd < 0) return fail("cannot pass stdin to step mode: %s", std::strerror(errno));
      env.emplace_back("HCASIM_STEP_FD", std::to_string(fd));
    }
  }
  for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  if (preload) {
    std::string p = libdir_real + "/libibverbs.so.1";
    const char* old = std::getenv("LD_PRELOAD");
    setenv("LD_PRELOAD", old && *old ? (p + ":" + old).c_str() : p.c_str(), 1);
  } else {
    const char* old = std::getenv("LD_LIBRARY_PATH");
    setenv("LD_LIBRARY_PATH", old && *old ? (libdir_real + ":" + old).c_str() : libdir_real.c_str(), 1);
  }
  pid_t pid = fork();
  if (pid < 0) return fail("fork failed: %s", std::strerror(errno));
  if (pid == 0) {
    // Determinism: the same program and seed give the same trace, addresses included.
    if (!aslr) personality(ADDR_NO_RANDOMIZE);
    if (step_stdin) {  // stdin carries step commands: the program reads /dev/null
      const int null = open("/dev/null", O_RDONLY);
      if (null >= 0 && null != 0) {
        dup2(null, 0);
        close(null);
      }
    }
    execvp(argv[i], argv + i);
    std::fprintf(stderr, "hcasim: cannot run '%s': %s\n", argv[i], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "hcasim: '%s' died of signal %d (%s)\n", argv[i], WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
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
  return fail("unknown command '%s' (hcasim run | profiles | version | help)", cmd.c_str());
}
