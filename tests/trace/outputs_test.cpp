// SPDX-License-Identifier: Apache-2.0
/**
 * @file outputs_test.cpp
 * @brief Every trace output of `hcasim run` on the golden scenarios, checked against the
 *        readable step trace of the same run:
 *   - pcap: every frame parses as RoCEv2 with a correct ICRC; opcode/PSN/SE sequence = trace;
 *   - tshark (skipped if absent): every frame dissected as InfiniBand, none malformed, no expert
 *     warnings, the same opcode/PSN/SE sequence;
 *   - timeline: valid JSON; one process per host, named unit tracks; one slice per trace line;
 *     one flow per posted WR, each started once and finished at its CQE;
 *   - VCD: well-formed; the signals of the run's QPs/CQs/ports; final indices match the trace;
 *   - counters JSON: valid, packet counts match the trace;
 *   - step mode: a scripted session through --step-script and through a pipe on stdin.
 */
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "mini_json.h"
#include "roce_packet.h"
#include "trace_files.h"

namespace {

using namespace tracetest;

// Sanitizer builds: HCASIM_TEST_PRELOAD names a runtime the (unsanitized) scenarios must load first.
const std::string kHcasim = [] {
  const char* pre = std::getenv("HCASIM_TEST_PRELOAD");
  return (pre && *pre ? "env LD_PRELOAD='" + std::string(pre) + "' ASAN_OPTIONS=detect_leaks=0 "
                      : std::string()) +
         HCASIM_BIN;
}();
const std::map<std::string, std::string> kScenarios = {
    {"send_recv", SCN_SEND_RECV}, {"write_imm", SCN_WRITE_IMM}, {"read_multi_mtu", SCN_READ_MULTI_MTU},
    {"solicited", SCN_SOLICITED}, {"ud_send", SCN_UD_SEND},     {"srq_send", SCN_SRQ_SEND},
    {"three_ops", THREE_OPS}};

std::string run_cmd(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return out;
}

struct Outputs {
  std::string dir, trace, timeline, vcd, pcap, stats, out;
  std::vector<TraceLine> lines;
  int status = -1;
};

Outputs run_all(const std::string& scenario) {
  Outputs o;
  char tmpl[] = "/tmp/hcasim-outputs.XXXXXX";
  o.dir = ::mkdtemp(tmpl) ? tmpl : "/tmp";
  const std::string d = o.dir + "/";
  const std::string cmd = kHcasim + " run --idle-us 0 --trace " + d + "trace --timeline " + d +
                          "timeline.json --vcd " + d + "signals.vcd --pcap " + d + "wire.pcap --stats-json " +
                          d + "stats.json -- " + kScenarios.at(scenario) + " 2>&1";
  o.out = run_cmd(cmd, &o.status);
  o.trace = slurp(d + "trace");
  o.timeline = slurp(d + "timeline.json");
  o.vcd = slurp(d + "signals.vcd");
  o.pcap = slurp(d + "wire.pcap");
  o.stats = slurp(d + "stats.json");
  o.lines = trace_lines(o.trace);
  return o;
}

void cleanup(const Outputs& o) {
  if (!::testing::Test::HasFailure())
    run_cmd("rm -rf '" + o.dir + "'");
  else
    std::printf("outputs kept in %s\n", o.dir.c_str());
}

class TraceOutputs : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    o_ = run_all(GetParam());
    ASSERT_EQ(o_.status, 0) << o_.out;
    ASSERT_FALSE(o_.lines.empty()) << "empty trace";
    packets_ = trace_packets(o_.lines);
    ASSERT_FALSE(packets_.empty());
  }
  void TearDown() override { cleanup(o_); }
  Outputs o_;
  std::vector<WirePacket> packets_;
};

TEST_P(TraceOutputs, PcapFramesAreTheTracePacketsWithValidIcrc) {
  std::vector<PcapRecord> recs;
  std::string err;
  ASSERT_TRUE(read_pcap(o_.pcap, recs, err)) << err;
  ASSERT_EQ(recs.size(), packets_.size());
  uint64_t last = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i + 1));
    hcasim::wire::ParsedFrame f;
    ASSERT_EQ(hcasim::wire::parse_frame(recs[i].data.data(), recs[i].data.size(), f, true),
              hcasim::wire::ParseError::Ok);
    EXPECT_EQ(hcasim::wire::opcode_name(f.h.opcode), packets_[i].opcode);
    EXPECT_EQ(f.h.psn, packets_[i].psn);
    EXPECT_EQ(f.h.se, packets_[i].se);
    EXPECT_GE(recs[i].time_ns, last);
    last = recs[i].time_ns;
  }
}

TEST_P(TraceOutputs, TsharkDissectsEveryFrameAsTheTraceShows) {
  if (std::system("command -v tshark >/dev/null 2>&1") != 0) GTEST_SKIP() << "tshark is not installed";
  const std::string out = run_cmd(
      "tshark -r '" + o_.dir +
      "/wire.pcap' --disable-heuristic rpcrdma_infiniband -o ip.check_checksum:TRUE "
      "-o udp.check_checksum:TRUE -T fields -E separator='|' -E occurrence=f -e frame.number -e "
      "frame.protocols "
      "-e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.bth.se -e _ws.malformed -e _ws.expert "
      "-e ip.checksum.status 2>/dev/null");
  std::vector<std::string> rows;
  {
    std::istringstream ss(out);
    std::string line;
    while (std::getline(ss, line))
      if (!line.empty()) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), packets_.size()) << out;
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i]);
    std::vector<std::string> f;
    std::string cell;
    std::istringstream cs(rows[i]);
    while (std::getline(cs, cell, '|')) f.push_back(cell);
    f.resize(8);
    EXPECT_NE(f[1].find("eth:ethertype:ip:udp:infiniband"), std::string::npos);
    int op = -1;
    for (int k = 0; k < 0x100; ++k)
      if (packets_[i].opcode == hcasim::wire::opcode_name(hcasim::wire::BthOpcode(k))) op = k;
    EXPECT_EQ(f[2], std::to_string(op));
    EXPECT_EQ(f[3], std::to_string(packets_[i].psn));
    EXPECT_EQ(f[4] == "1" || f[4] == "True", packets_[i].se) << "SE " << f[4];
    EXPECT_EQ(f[5], "") << "malformed";
    EXPECT_EQ(f[6], "") << "expert info";
    EXPECT_EQ(f[7], "1") << "IPv4 header checksum";
  }
}

TEST_P(TraceOutputs, TimelineIsValidJsonWithTracksAndFlows) {
  minijson::Value doc;
  std::string err;
  ASSERT_TRUE(minijson::parse(o_.timeline, doc, err)) << err;
  const auto& te = doc["traceEvents"];
  ASSERT_EQ(te.type, minijson::Value::Array);
  std::map<int, std::string> procs;
  std::set<std::pair<int, int>> threads;
  std::set<std::tuple<int, int, double>> slice_at;
  size_t slices = 0;
  struct Flow {
    std::string phases;
    double first = -1, last = -1;
  };
  std::map<double, Flow> flows;
  for (const auto& e : te.arr) {
    const std::string& ph = e["ph"].str;
    ASSERT_TRUE(e.has("pid")) << ph;
    const int pid = int(e["pid"].num), tid = int(e["tid"].num);
    if (ph == "M") {
      if (e["name"].str == "process_name") procs[pid] = e["args"]["name"].str;
      if (e["name"].str == "thread_name") threads.insert({pid, tid});
    } else if (ph == "X") {
      ++slices;
      EXPECT_TRUE(e.has("name") && e.has("ts") && e.has("dur") && e.has("tid") && e.has("cat"));
      EXPECT_TRUE(threads.count({pid, tid})) << "slice before its thread_name";
      EXPECT_GE(e["dur"].num, 0);
      slice_at.insert({pid, tid, e["ts"].num});
    } else if (ph == "s" || ph == "t" || ph == "f") {
      Flow& f = flows[e["id"].num];
      f.phases += ph;
      EXPECT_GE(e["ts"].num, f.last);
      if (f.first < 0) f.first = e["ts"].num;
      f.last = e["ts"].num;
      EXPECT_TRUE(slice_at.count({pid, tid, e["ts"].num})) << "flow event with no slice to bind to";
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_EQ(slices, o_.lines.size()) << "one slice per trace line";
  EXPECT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[1], "hcasim0");
  EXPECT_EQ(procs[2], "hcasim1");
  size_t posts = 0, cqes = 0;
  for (const auto& l : o_.lines) {
    posts += l.event == "post";
    cqes += l.event == "cqe.write";
  }
  ASSERT_EQ(flows.size(), posts) << "one flow per posted work request";
  size_t finished = 0;
  for (const auto& [id, f] : flows) {
    SCOPED_TRACE("flow " + std::to_string(id) + ": " + f.phases);
    EXPECT_EQ(f.phases.front(), 's');
    EXPECT_EQ(f.phases.find('s', 1), std::string::npos);
    if (f.phases.back() == 'f') ++finished;
    EXPECT_EQ(f.phases.find('f'), f.phases.size() - 1);
  }
  EXPECT_EQ(finished, cqes) << "every WR of these scenarios is signaled: its flow ends at its CQE";
  // A send WR's flow reaches the wire: steps on both hosts' ports.
  size_t longest = 0;
  for (const auto& [id, f] : flows) longest = std::max(longest, f.phases.size());
  EXPECT_GE(longest, 4 + packets_.size());
}

TEST_P(TraceOutputs, VcdIsWellFormedAndTracksTheQueues) {
  Vcd v;
  std::string err;
  ASSERT_TRUE(v.parse(o_.vcd, err)) << err;
  EXPECT_EQ(v.timescale, "1ps");
  for (const char* s :
       {"hcasim0.sq_doorbell", "hcasim0.port.tx_busy", "hcasim1.port.tx_busy", "hcasim0.port.tx_psn",
        "hcasim1.port.rx_frame", "hcasim0.qp_0x000011.sq_pi", "hcasim0.qp_0x000011.sq_ci", "hcasim0.cq_1.pi"})
    EXPECT_NE(v.find(s), nullptr) << s;
  // Final values against the trace: the last SQ doorbell's producer, the CQEs written per host.
  std::map<std::string, unsigned> cqes;
  std::string producer;
  for (const auto& l : o_.lines) {
    if (l.event == "cqe.write") ++cqes[l.host];
    if (l.event == "doorbell" && l.host == "hcasim0" && l.qpn != "-")
      producer = l.facts.back().substr(l.facts.back().find('=') + 1);
  }
  auto bin = [](unsigned x) {
    std::string s;
    do {
      s.insert(s.begin(), char('0' + (x & 1)));
      x >>= 1;
    } while (x);
    return s;
  };
  EXPECT_EQ(v.final_value("hcasim0.qp_0x000011.sq_pi"), bin(unsigned(std::stoul(producer))));
  EXPECT_EQ(v.final_value("hcasim0.cq_1.pi"), bin(cqes["hcasim0"]));
  if (cqes["hcasim1"]) {
    EXPECT_EQ(v.final_value("hcasim1.cq_1.pi"), bin(cqes["hcasim1"]));
  }
  EXPECT_EQ(v.final_value("hcasim0.port.tx_busy"), "0");
  // tx_busy rises once per frame or run of back-to-back frames from that port.
  size_t rises = 0;
  for (const auto& [t, val] : v.changes.at(v.find("hcasim0.port.tx_busy")->code)) rises += val == "1";
  size_t sent0 = 0;
  for (const auto& p : packets_) sent0 += p.host == "hcasim0";
  EXPECT_GE(rises, 1u);
  EXPECT_LE(rises, sent0);
}

TEST_P(TraceOutputs, CountersJsonMatchesTheTrace) {
  minijson::Value doc;
  std::string err;
  ASSERT_TRUE(minijson::parse(o_.stats, doc, err)) << err;
  for (const char* h : {"hcasim0", "hcasim1"}) {
    size_t tx = 0, rx = 0;
    for (const auto& l : o_.lines) {
      tx += l.host == h && l.unit == "port" && l.event == "pkt.tx";
      rx += l.host == h && l.unit == "port" && l.event == "pkt.rx";
    }
    EXPECT_EQ(doc["devices"][h]["tx_packets"].num, double(tx)) << h;
    EXPECT_EQ(doc["devices"][h]["rx_packets"].num, double(rx)) << h;
    EXPECT_EQ(doc["qps"][h].type, minijson::Value::Array) << h;
  }
  EXPECT_GT(doc["sim_time_ps"].num, 0);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, TraceOutputs,
                         ::testing::Values("send_recv", "write_imm", "read_multi_mtu", "solicited", "ud_send",
                                           "srq_send"),
                         [](const auto& info) { return info.param; });

// ------------------------------------------------------------------ step mode

TEST(StepMode, ScriptedSession) {
  char tmpl[] = "/tmp/hcasim-step.XXXXXX";
  const std::string dir = ::mkdtemp(tmpl) ? tmpl : "/tmp";
  const std::string script = dir + "/cmds";
  {
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("n doorbell\np qp 0x11\np bt 0x11\nn pkt\nc 2\nn cqe\np cq 1\nn event\nq\n", f);
    std::fclose(f);
  }
  int st = -1;
  const std::string out = run_cmd(
      kHcasim + " run --idle-us 0 --step-script " + script + " -- " + kScenarios.at("write_imm") + " 2>&1",
      &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("hcasim: step mode: pausing at every hardware event"), std::string::npos) << out;
  EXPECT_NE(out.find("(step) n doorbell\n"), std::string::npos) << out;  // commands echoed
  // One WR posted: the doorbell is a BlueFlame store, which carries the WQE.
  EXPECT_NE(out.find("doorbell    0x000011  UAR+0x900 SQ BlueFlame doorbell (the WQE came with it): qpn=0x11 "
                     "producer=1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("QP 0x000011 on hcasim0: RC RTS, dest QP 0x010011, path MTU 1024"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  SQ: 16 WQEBBs; producer (last doorbell) 0, next fetch 0"), std::string::npos) << out;
  EXPECT_NE(out.find("QP 0x000011 on hcasim0 buffer tables:"), std::string::npos) << out;
  EXPECT_NE(out.find("    page 0: L1[0]@0x"), std::string::npos) << out;
  EXPECT_NE(out.find("port      pkt.tx      -         TX WRITE_FIRST"), std::string::npos) << out;
  EXPECT_NE(out.find("cqe.write   0x010011  CQ 1 CQE[0]"), std::string::npos) << out;
  EXPECT_NE(out.find("CQ 1 on hcasim"), std::string::npos) << out;
  EXPECT_NE(out.find("cq        event       0x010011  CQ 1 no event: not armed"), std::string::npos) << out;
  EXPECT_NE(out.find("step: no more pauses"), std::string::npos) << out;
  EXPECT_NE(out.find("write_imm: ok"), std::string::npos) << out;
  run_cmd("rm -rf '" + dir + "'");
}

// Step mode shows a shared receive queue: its context, its indices, and which QPs take from it.
TEST(StepMode, PrintsTheSharedReceiveQueue) {
  int st = -1;
  const std::string out = run_cmd(
      "printf 'n kind=wqe.fetch;host=1\\nn kind=wqe.fetch;host=1\\np srq 1\\np qp 0x10011\\nq\\n' | " +
          kHcasim + " run --idle-us 0 --step --step-filter 'host=1' -- " + kScenarios.at("srq_send") +
          " 2>&1",
      &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("wqe.fetch   0x010011  SRQ 0x1 WQE 0: 1 SGE(s)"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          "SRQ 0x1 on hcasim1: 8 WQEs of 16 B, PD 1; consumer 2 (slot 2), producer seen 2; limit not armed"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("  RQ: none, receives from SRQ 0x1 (p srq 0x1)"), std::string::npos) << out;
  EXPECT_NE(out.find("srq_send: ok"), std::string::npos) << out;
}

TEST(StepMode, CommandsOnAPipeAndAFilter) {
  int st = -1;
  // Commands on stdin (a pipe): the program's stdin is /dev/null. Only port transmissions pause.
  const std::string out = run_cmd("printf 'c 3\\np cq 1 1\\nh\\n' | " + std::string(kHcasim) +
                                      " run --idle-us 0 --step-filter 'unit=port;kind=pkt.tx' -- " +
                                      kScenarios.at("read_multi_mtu") + " 2>&1",
                                  &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("pausing at events matching unit=port;kind=pkt.tx"), std::string::npos) << out;
  EXPECT_NE(out.find("TX READ_REQ"), std::string::npos) << out;
  // c 3 from the READ request: the 3rd port transmission after it is the 2nd response MIDDLE.
  EXPECT_NE(out.find("(step) c 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("TX READ_RESP_MIDDLE psn=102"), std::string::npos) << out;
  EXPECT_NE(out.find("CQ 1 on hcasim1: 32 CQEs"), std::string::npos) << out;
  EXPECT_NE(out.find("step commands:"), std::string::npos) << out;
  EXPECT_NE(out.find("step: end of commands: running to completion"), std::string::npos) << out;
  EXPECT_NE(out.find("read_multi_mtu: ok"), std::string::npos) << out;
}

TEST(StepMode, NoCommandSourceIsAnError) {
  int st = -1;
  // No terminal (setsid), stdin not a pipe, no script: refused before the program runs.
  const std::string out = run_cmd(
      "setsid -w " + kHcasim + " run --step -- " + kScenarios.at("send_recv") + " </dev/null 2>&1", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("--step needs a terminal"), std::string::npos) << out;
}

}  // namespace

namespace {

/** Run lab 1's program (three_ops) in step mode with the commands @p script; its whole output. */
std::string step_three_ops(const std::string& script) {
  int st = -1;
  const std::string out = run_cmd("printf '" + script + "' | " + kHcasim + " run --idle-us 0 --step -- " +
                                      kScenarios.at("three_ops") + " 2>&1",
                                  &st);
  EXPECT_EQ(st, 0) << out;
  return out;
}

}  // namespace

// A pause shows the state before the unit acts: at B's cq.arm, p cq still says disarmed.
TEST(StepMode, StateIsShownBeforeTheUnitActs) {
  const std::string out = step_three_ops("n arm\np cq 1\ns\np cq 1 1\nq\n");
  EXPECT_NE(out.find("cq.arm      -         CQ 1 arm sn=0 ci=1 request=next: disarmed -> next"),
            std::string::npos)
      << out;
  const size_t first = out.find("CQ 1 on hcasim1: 32 CQEs");
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_NE(out.find("; disarmed", first), std::string::npos) << out;
  EXPECT_NE(out.find("; armed next", first), std::string::npos) << out;  // one step later
}

// x wqe decodes a send WQE with the contract's accessors; a QPN's host is found without HOST.
TEST(StepMode, ExaminesASendWqe) {
  const std::string out =
      step_three_ops("n kind=post;host=0\nn kind=post;host=0\nx wqe 0x11 1\nx wqe 0x11 3\nq\n");
  EXPECT_NE(out.find("SQ WQE at WQEBB 1 (slot 1) of QP 0x000011 on hcasim0: 1 WQEBB(s)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("    +00: 00 00 01 09 00 00 11 03 00 00 00 08 00 c0 ff ee"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          "  control: opcode 0x09 (RDMA_WRITE_WITH_IMM), WQE index 1, QPN 0x11, 3 segment(s), flags 0x08 "
          "signaled"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("  data: addr 0x"), std::string::npos) << out;
  EXPECT_NE(out.find(", length 3000, lkey 0x12a"), std::string::npos) << out;
  EXPECT_NE(out.find("message length 3000; not yet rung"), std::string::npos) << out;  // doorbell comes next
  EXPECT_NE(out.find("SQ slot 3 of QP 0x000011 on hcasim0: no WQE written here yet"), std::string::npos)
      << out;
}

// x rwqe, x cqe, x eqe, p eq and p mr: bytes, fields and owner bits.
TEST(StepMode, ExaminesCompletionAndEventEntries) {
  const std::string out = step_three_ops(
      "n kind=post;host=1\nx rwqe 0x10011 0\nn cqe\nx cqe 1 0 1\ns\ns\nx cqe 1 0 1\nn eqe\ns\ns\n"
      "x eqe 1 0 1\np eq 1 1\n"
      "p mr 0x12a 1\np mr 0x999 1\nx bogus 1 1\nq\n");
  EXPECT_NE(out.find("RQ WQE 0 (slot 0) of QP 0x010011 on hcasim1: 32 bytes"), std::string::npos) << out;
  EXPECT_NE(out.find("  terminator (lkey 0x100)"), std::string::npos) << out;
  // At the cqe.write pause the CQE is not in memory yet, nor at its DMA write's pause; after that it is.
  EXPECT_NE(out.find("owner bit 1: not written yet (the value software initialised)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  opcode 2 (RESP_SEND), QPN 0x10011, WQE counter 0, byte count 2500, syndrome 0x00"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("owner bit 0: last written as entry 0, in pass 0 of the ring (where the hardware writes 0)"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("  type 0x00, resource 0x1, timestamp 4800 ns"), std::string::npos) << out;
  EXPECT_NE(out.find("EQ 1 on hcasim1: 4096 EQEs, MSI-X vector 0; producer 1"), std::string::npos) << out;
  EXPECT_NE(out.find("MR key 0x12a on hcasim1: PD 1, va 0x"), std::string::npos) << out;
  EXPECT_NE(out.find("access LOCAL_READ|LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ"), std::string::npos) << out;
  EXPECT_NE(out.find("hcasim1 has no memory region or window with key 0x999"), std::string::npos) << out;
  EXPECT_NE(out.find("step: x wqe|rwqe QPN IDX [HOST] | x cqe CQN IDX [HOST] | x eqe EQN IDX [HOST]"),
            std::string::npos)
      << out;
}
