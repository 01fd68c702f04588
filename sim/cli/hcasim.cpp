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
//
// This file: main() and the help text. run.cpp and fabric.cpp hold the subcommands,
// options.cpp the option parsing, device.cpp the device process (cli.h).
#include <cstdio>
#include <string>

#include "cli.h"
#include "timing_profile.h"

namespace hcasim::cli {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: hcasim run [options] -- COMMAND [ARGS...] [::: COMMAND [ARGS...]]...\n"
      "       hcasim fabric start [--socket PATH] [--hosts N] [--hcas-per-host K] [simulation options]\n"
      "       hcasim fabric stop|status [--socket PATH]\n"
      "       hcasim profiles | version | help\n"
      "\n"
      "run options:\n"
      "  --hosts N            simulated HCAs in the world (default 2: hcasim0, hcasim1)\n"
      "  --profile NAME       timing profile (default roce-100g; see `hcasim profiles`)\n"
      "  --trace FILE|-       readable step trace of every hardware event ('-' = stderr)\n"
      "  --trace-filter SPEC  keep only matching events: host=hcasim1;qpn=0x11;unit=cq,eq;kind=cqe\n"
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
      "  --no-explain         no plain-words lines on stderr for error completions, QPs moved to ERR,\n"
      "                       asynchronous events and waits that cannot end (--explain: on, the default)\n"
      "  --drop RULE          lose frames on purpose: 'host=H;psn=P[;qpn=Q][;count=N]': host H loses\n"
      "                       the next N (1) frames it receives with that PSN (and destination QP);\n"
      "                       repeatable; step mode's 'drop next' loses the next frame\n"
      "  --faults SPEC        random faults on every wire, from --seed: a comma list of loss=P,\n"
      "                       duplicate=P, reorder=P, corrupt=P (P from 0 to 1), delay=T[..T] (5us,\n"
      "                       2us..50us), each optionally @host=H[@dir=tx|rx][@qpn=Q][@op=send|write|\n"
      "                       read|atomic|ack]; e.g. 'loss=0.01,corrupt=0.001@host=1'; and\n"
      "                       link-down=H@T1..T2 (or @T1: for good): host H's link is down from\n"
      "                       simulated time T1 to T2 (10us..200us) (docs/fabric.md)\n"
      "  --seed N             simulation seed (default 1)\n"
      "  --clock MODE         time model: auto (default), lockstep or realtime (docs/architecture.md)\n"
      "  --idle-us N          lockstep: advance simulated time after N us without verbs calls\n"
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
      "                       long (wall time; a thread ready to run also this much CPU time;\n"
      "                       default 200)\n"
      "  --grace S            seconds the other commands get after one fails (default 10)\n"
      "  --aslr               keep address-space randomisation (by default it is off, so\n"
      "                       buffer addresses, and so traces, repeat from run to run)\n");
}

}  // namespace hcasim::cli

namespace cli = hcasim::cli;

int main(int argc, char** argv) {
  if (argc < 2) {
    cli::usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "run") return cli::cmd_run(argc - 2, argv + 2);
  if (cmd == "fabric") return cli::cmd_fabric(argc - 2, argv + 2);
  if (cmd == "profiles") {
    for (const std::string& n : hcasim::model::profile_names())
      std::printf("%s\n", hcasim::model::describe_profile(*hcasim::model::find_profile(n)).c_str());
    return 0;
  }
  if (cmd == "version") {
    std::printf("hcasim 0.1.0\n");
    return 0;
  }
  if (cmd == "help" || cmd == "-h" || cmd == "--help") {
    cli::usage(stdout);
    return 0;
  }
  return cli::fail("unknown command '%s' (hcasim run | fabric | profiles | version | help)", cmd.c_str());
}
