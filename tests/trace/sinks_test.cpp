// SPDX-License-Identifier: Apache-2.0
/**
 * @file sinks_test.cpp
 * @brief The trace sinks on synthetic events, without a simulation: the Perfetto timeline (valid JSON,
 * tracks, flows), the VCD writer (declarations, strobes, busy lines), the step controller's commands, the
 * hub.
 */
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "explain.h"
#include "mini_json.h"
#include "roce_packet.h"
#include "step_mode.h"
#include "text_trace.h"
#include "timeline_trace.h"
#include "trace.h"
#include "trace_files.h"
#include "vcd_trace.h"

// libsystemc references sc_main; this test never starts a simulation.
extern "C" int sc_main(int, char**) { return 1; }

namespace hcasim::sim {
namespace {

using model::kTraceNone;
using model::TraceEvent;
using model::TraceFields;
using model::TraceKind;
using model::TraceUnit;
using wire::BthOpcode;

// The sinks read the typed fields only; the text is what a person reads (the units fill both
// from the same values: tests/unit/trace_fields_test.cpp checks that on the model).
TraceEvent ev(uint64_t t_ns, uint32_t host, TraceUnit u, TraceKind k, uint32_t qpn, const std::string& text,
              const TraceFields& f = TraceFields()) {
  TraceEvent e;
  e.time_ps = t_ns * 1000;
  e.host = host;
  e.unit = u;
  e.kind = k;
  e.qpn = qpn;
  e.text = text;
  e.f = f;
  return e;
}

/** The fields the port gives a frame: BTH opcode, PSN, destination QP (and size when sent). */
TraceFields pkt(BthOpcode op, uint32_t psn, uint32_t dqp, uint32_t wire_bytes = kTraceNone) {
  return TraceFields().set_opcode(uint16_t(op)).set_psn(psn).set_peer_qpn(dqp).set_count(wire_bytes);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "hcasim_sinks_" + std::to_string(getpid()) + "_" + name;
}

// ------------------------------------------------------------------ a synthetic SEND, host 0 -> host 1

std::vector<TraceEvent> one_send() {
  const uint32_t none = kTraceNone;
  std::vector<TraceEvent> v = {
      ev(0, 1, TraceUnit::Driver, TraceKind::Post, 0x11, "post_recv: 1 SGE(s) -> RQ WQE 0",
         TraceFields().set_wqe(0).set_flag(model::kTfRq)),
      ev(0, 0, TraceUnit::Driver, TraceKind::Post, 0x11,
         "post_send: SEND len=1500 -> SQ WQE 0 (1 WQEBB) signaled",
         TraceFields().set_wqe(0).set_count(1).set_flag(model::kTfSignaled)),
      ev(150, 0, TraceUnit::Doorbell, TraceKind::Doorbell, 0x11, "UAR+0x800 SQ doorbell: qpn=0x11 producer=1",
         TraceFields().set_index(1)),
      ev(750, 0, TraceUnit::WqeFetch, TraceKind::WqeFetch, 0x11,
         "SQ WQE 0 (1 WQEBB): SEND len=1500 sge=1 signaled, ready in 1.0 ns",
         TraceFields().set_wqe(0).set_count(1).set_flag(model::kTfSignaled)),
      ev(752, 0, TraceUnit::Requester, TraceKind::WqeDecode, 0x11,
         "WQE 0 SEND: 2 packet(s) at MTU 1024, PSN 100..101",
         TraceFields().set_wqe(0).set_count(2).set_psn_range(100, 101)),
      ev(760, 0, TraceUnit::Requester, TraceKind::PktTx, 0x11, "WQE 0: start SEND to qp 0x11, first PSN 100",
         TraceFields().set_wqe(0).set_peer_qpn(0x11).set_psn(100)),
      ev(800, 0, TraceUnit::Port, TraceKind::PktTx, none,
         "TX SEND_FIRST       psn=100      dqp=0x000011 payload=1024  (1082 B on wire)",
         pkt(BthOpcode::SEND_FIRST, 100, 0x11, 1082)),
      ev(889, 0, TraceUnit::Port, TraceKind::PktTx, none,
         "TX SEND_LAST        psn=101      dqp=0x000011 payload=476   AckReq (534 B on wire)",
         pkt(BthOpcode::SEND_LAST, 101, 0x11, 534).set_flag(model::kTfAckReq)),
      ev(900, 1, TraceUnit::Port, TraceKind::PktRx, none,
         "RX SEND_FIRST       psn=100      dqp=0x000011 payload=1024 ",
         pkt(BthOpcode::SEND_FIRST, 100, 0x11)),
      ev(900, 1, TraceUnit::Responder, TraceKind::WqeFetch, 0x11, "RQ WQE 0: 1 SGE(s)",
         TraceFields().set_wqe(0).set_count(1).set_flag(model::kTfRq)),
      ev(950, 1, TraceUnit::Port, TraceKind::PktRx, none,
         "RX SEND_LAST        psn=101      dqp=0x000011 payload=476   AckReq",
         pkt(BthOpcode::SEND_LAST, 101, 0x11).set_flag(model::kTfAckReq)),
      ev(960, 1, TraceUnit::Port, TraceKind::PktTx, none,
         "TX ACK              psn=101      dqp=0x000011 payload=0     AETH[ACK msn=1] (62 B on wire)",
         pkt(BthOpcode::ACKNOWLEDGE, 101, 0x11, 62)),
      ev(1070, 0, TraceUnit::Port, TraceKind::PktRx, none,
         "RX ACK              psn=101      dqp=0x000011 payload=0     AETH[ACK msn=1]",
         pkt(BthOpcode::ACKNOWLEDGE, 101, 0x11)),
      ev(1070, 0, TraceUnit::Requester, TraceKind::Ack, 0x11, "ACK psn=101 msn=1",
         TraceFields().set_psn(101)),
      ev(1100, 1, TraceUnit::Cq, TraceKind::CqeWrite, 0x11,
         "CQ 1 CQE[0] RESP_SEND wqe=0 len=1500 status=0x00 owner=0",
         TraceFields().set_queue(1).set_index(1).set_wqe(0).set_flag(model::kTfRq)),
      ev(1200, 0, TraceUnit::Cq, TraceKind::CqeWrite, 0x11,
         "CQ 1 CQE[0] REQ wqe=0 len=1500 status=0x00 owner=0",
         TraceFields().set_queue(1).set_index(1).set_wqe(0)),
  };
  return v;
}

TEST(TraceTimeline, ValidJsonTracksAndFlows) {
  const std::string path = temp_path("timeline.json");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  auto events = one_send();
  {
    TimelineSink sink(f, true, {"hcasim0", "hcasim1"}, [](uint32_t bytes) { return uint64_t(bytes) * 80; });
    for (auto& e : events) sink.record(e);
    sink.finish();
    sink.record(events[0]);  // after finish: ignored
    EXPECT_EQ(sink.slices(), events.size());
    EXPECT_EQ(sink.flows_started(), 2u);
  }
  minijson::Value doc;
  std::string err;
  ASSERT_TRUE(minijson::parse(tracetest::slurp(path), doc, err)) << err;
  const auto& te = doc["traceEvents"];
  ASSERT_EQ(te.type, minijson::Value::Array);
  size_t x = 0, procs = 0;
  std::map<double, std::string> flows;  // id -> phases in order
  std::set<std::pair<int, int>> named_threads;
  for (const auto& e : te.arr) {
    const std::string ph = e["ph"].str;
    if (ph == "M" && e["name"].str == "process_name") ++procs;
    if (ph == "M" && e["name"].str == "thread_name")
      named_threads.insert({int(e["pid"].num), int(e["tid"].num)});
    if (ph == "X") {
      ++x;
      EXPECT_TRUE(e.has("ts") && e.has("dur") && e.has("pid") && e.has("tid") && e["args"].has("facts"));
      EXPECT_TRUE(named_threads.count({int(e["pid"].num), int(e["tid"].num)})) << "slice on an unnamed track";
    }
    if (ph == "s" || ph == "t" || ph == "f") {
      flows[e["id"].num] += ph;
      EXPECT_EQ(e["bp"].str, "e");
    }
  }
  EXPECT_EQ(x, events.size());
  EXPECT_EQ(procs, 2u);
  ASSERT_EQ(flows.size(), 2u);
  // The RQ WQE: post_recv, fetch, CQE.
  EXPECT_EQ(flows.begin()->second, "stf");
  // The SQ WQE: post, doorbell, fetch, decode, start, 2 TX, 2 RX, ACK TX, ACK RX, ack, CQE.
  EXPECT_EQ(std::next(flows.begin())->second, "stttttttttttf");
  // The first packet's slice lasts its serialisation time.
  for (const auto& e : te.arr) {
    if (e["ph"].str == "X" && e["name"].str == "TX SEND_FIRST") {
      EXPECT_DOUBLE_EQ(e["dur"].num, 1082 * 80 / 1e6);
    }
  }
  std::remove(path.c_str());
}

TEST(TraceTimeline, UnsignaledWqeEndsAtItsAck) {
  const std::string path = temp_path("unsig.json");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    TimelineSink sink(f, true, {"hcasim0", "hcasim1"});
    sink.record(ev(0, 0, TraceUnit::Driver, TraceKind::Post, 0x11,
                   "post_send: RDMA_WRITE len=64 -> SQ WQE 0 (1 WQEBB)",
                   TraceFields().set_wqe(0).set_count(1)));
    sink.record(ev(1, 0, TraceUnit::Requester, TraceKind::WqeDecode, 0x11,
                   "WQE 0 RDMA_WRITE: 1 packet(s) at MTU 1024, PSN 5..5",
                   TraceFields().set_wqe(0).set_count(1).set_psn_range(5, 5)));
    sink.record(
        ev(9, 0, TraceUnit::Requester, TraceKind::Ack, 0x11, "ACK psn=5 msn=1", TraceFields().set_psn(5)));
  }
  minijson::Value doc;
  std::string err;
  ASSERT_TRUE(minijson::parse(tracetest::slurp(path), doc, err)) << err;
  std::string phases;
  for (const auto& e : doc["traceEvents"].arr)
    if (e["ph"].str == "s" || e["ph"].str == "t" || e["ph"].str == "f") phases += e["ph"].str;
  EXPECT_EQ(phases, "stf");
  std::remove(path.c_str());
}

// ------------------------------------------------------------------ VCD

TEST(TraceVcd, DeclarationsStrobesAndBusyLines) {
  const std::string path = temp_path("signals.vcd");
  {
    VcdSink sink(
        path, {"hcasim0", "hcasim1"}, [](uint32_t bytes) { return uint64_t(bytes) * 80; }, 1000);
    ASSERT_TRUE(sink.ok());
    for (auto& e : one_send()) sink.record(e);
    // A second frame starting exactly when the first ends keeps tx_busy high.
    sink.record(ev(2000, 0, TraceUnit::Port, TraceKind::PktTx, kTraceNone,
                   "TX WRITE_ONLY       psn=102      dqp=0x000011 payload=8     (100 B on wire)",
                   pkt(BthOpcode::RDMA_WRITE_ONLY, 102, 0x11, 100)));
    sink.record(ev(2008, 0, TraceUnit::Port, TraceKind::PktTx, kTraceNone,
                   "TX WRITE_ONLY       psn=103      dqp=0x000011 payload=8     (100 B on wire)",
                   pkt(BthOpcode::RDMA_WRITE_ONLY, 103, 0x11, 100)));
    sink.finish();
  }
  tracetest::Vcd v;
  std::string err;
  ASSERT_TRUE(v.parse(tracetest::slurp(path), err)) << err;
  EXPECT_EQ(v.timescale, "1ps");
  for (const char* s :
       {"hcasim0.sq_doorbell", "hcasim0.port.tx_busy", "hcasim0.port.tx_psn", "hcasim0.port.tx_opcode",
        "hcasim0.qp_0x000011.sq_posted", "hcasim0.qp_0x000011.sq_pi", "hcasim0.qp_0x000011.sq_ci",
        "hcasim1.qp_0x000011.rq_pi", "hcasim1.qp_0x000011.rq_ci", "hcasim1.port.rx_frame", "hcasim0.cq_1.pi",
        "hcasim1.cq_1.pi"})
    EXPECT_NE(v.find(s), nullptr) << s;
  // The doorbell strobe: 0 at #0, 1 at 150 ns, 0 one strobe width later.
  const auto& db = v.changes.at(v.find("hcasim0.sq_doorbell")->code);
  ASSERT_EQ(db.size(), 3u);
  EXPECT_EQ(db[1], std::make_pair(uint64_t(150000), std::string("1")));
  EXPECT_EQ(db[2], std::make_pair(uint64_t(151000), std::string("0")));
  // Counters start unknown.
  EXPECT_EQ(v.changes.at(v.find("hcasim0.qp_0x000011.sq_pi")->code).front().second, "x");
  EXPECT_EQ(v.final_value("hcasim0.qp_0x000011.sq_pi"), "1");
  EXPECT_EQ(v.final_value("hcasim0.port.tx_psn"), "1100111");  // 103
  // tx_busy: the back-to-back frames (2000 ns + 8 ns, then 2008 ns + 8 ns) are one high stretch.
  const auto& busy = v.changes.at(v.find("hcasim0.port.tx_busy")->code);
  std::vector<std::pair<uint64_t, std::string>> tail(busy.end() - 2, busy.end());
  EXPECT_EQ(tail[0], std::make_pair(uint64_t(2000000), std::string("1")));
  EXPECT_EQ(tail[1], std::make_pair(uint64_t(2016000), std::string("0")));
  std::remove(path.c_str());
}

TEST(TraceVcd, CqArmStateAndInterrupt) {
  const std::string path = temp_path("arm.vcd");
  {
    VcdSink sink(path, {"hcasim0"}, {});
    TraceEvent arm = ev(10, 0, TraceUnit::Cq, TraceKind::CqArm, kTraceNone, "CQ 1 arm");
    arm.f.queue = 1;
    arm.f.index = 3;
    arm.f.flags = model::kTfArmed | model::kTfArmSolicited;
    sink.record(arm);
    TraceEvent fire = ev(20, 0, TraceUnit::Cq, TraceKind::EventDecision, 0x11, "CQ 1 EVENT");
    fire.f.queue = 1;
    fire.f.flags = model::kTfArmed | model::kTfArmSolicited | model::kTfEvent;
    sink.record(fire);
    TraceEvent irq = ev(30, 0, TraceUnit::Eq, TraceKind::Interrupt, kTraceNone, "MSI-X vector 0 -> driver");
    irq.f.queue = 0;
    sink.record(irq);
  }
  tracetest::Vcd v;
  std::string err;
  ASSERT_TRUE(v.parse(tracetest::slurp(path), err)) << err;
  const auto& armed = v.changes.at(v.find("hcasim0.cq_1.armed")->code);
  ASSERT_EQ(armed.size(), 3u);  // x, solicited (2), disarmed by the event
  EXPECT_EQ(armed[1], std::make_pair(uint64_t(10000), std::string("10")));
  EXPECT_EQ(armed[2], std::make_pair(uint64_t(20000), std::string("0")));
  EXPECT_EQ(v.final_value("hcasim0.cq_1.ci"), "11");
  EXPECT_EQ(v.changes.at(v.find("hcasim0.msix0")->code).size(), 3u);
  std::remove(path.c_str());
}

// ------------------------------------------------------------------ step controller

class FakeInspector : public ModelInspector {
 public:
  std::string qp(uint32_t host, uint32_t qpn) override {
    return "QP " + std::to_string(qpn) + "@" + std::to_string(host) + "\n";
  }
  std::string bt(uint32_t host, uint32_t qpn) override {
    return "BT " + std::to_string(qpn) + "@" + std::to_string(host) + "\n";
  }
  std::string cq(uint32_t host, uint32_t cqn) override {
    return "CQ " + std::to_string(cqn) + "@" + std::to_string(host) + "\n";
  }
  std::string eq(uint32_t host, uint32_t eqn) override {
    return "EQ " + std::to_string(eqn) + "@" + std::to_string(host) + "\n";
  }
  std::string mr(uint32_t host, uint32_t key) override {
    return "MR " + std::to_string(key) + "@" + std::to_string(host) + "\n";
  }
  std::string raw(uint32_t host, const std::string& what, uint32_t queue, uint32_t index) override {
    return "X " + what + " " + std::to_string(queue) + " " + std::to_string(index) + "@" +
           std::to_string(host) + "\n";
  }
  std::string srq(uint32_t host, uint32_t srqn) override {
    return "SRQ " + std::to_string(srqn) + "@" + std::to_string(host) + "\n";
  }
  std::string stats() override { return "STATS\n"; }
};

std::string run_step(const std::string& script, const std::string& filter, uint64_t* pauses) {
  FILE* in = fmemopen(const_cast<char*>(script.data()), script.size(), "r");
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  FakeInspector insp;
  {
    StepController step(in, true, out, true, {"hcasim0", "hcasim1"}, &insp);
    std::string err;
    EXPECT_TRUE(step.filter.parse(filter, err)) << err;
    for (auto& e : one_send()) step.record(e);
    *pauses = step.pauses();
    step.finish();
  }
  std::fclose(out);
  std::string s(buf, len);
  free(buf);
  return s;
}

TEST(TraceStep, ContinueNextPrintQuit) {
  uint64_t pauses = 0;
  const std::string out = run_step(
      "c 2\nn pkt\np qp 0x11\nn cqe\np bt 17 1\np cq 1 hcasim1\np stats\nbogus\nq\nc\n", "", &pauses);
  // Pauses: the 1st event; c 2 -> the 3rd (doorbell); n pkt -> the first port packet; n cqe ->
  // the RECV CQE on host 1 (n ignores the step filter); q -> no more.
  EXPECT_NE(out.find("post_recv: 1 SGE(s) -> RQ WQE 0"), std::string::npos) << out;
  EXPECT_NE(out.find("UAR+0x800 SQ doorbell"), std::string::npos) << out;
  EXPECT_NE(out.find("pkt.tx      -         TX SEND_FIRST"), std::string::npos) << out;
  EXPECT_NE(out.find("QP 17@0"), std::string::npos) << out;  // default host: the event's
  EXPECT_NE(out.find("cqe.write   0x000011  CQ 1 CQE[0] RESP_SEND"), std::string::npos) << out;
  EXPECT_NE(out.find("BT 17@1"), std::string::npos) << out;
  EXPECT_NE(out.find("CQ 1@1"), std::string::npos) << out;
  EXPECT_NE(out.find("STATS"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown command 'bogus'"), std::string::npos) << out;
  EXPECT_NE(out.find("step: no more pauses"), std::string::npos) << out;
  EXPECT_EQ(out.find("REQ wqe=0"), std::string::npos) << out;  // after q: not shown
  EXPECT_EQ(pauses, 4u);
}

TEST(TraceStep, FilterAndEndOfInput) {
  uint64_t pauses = 0;
  const std::string out = run_step("s\n", "unit=port;kind=pkt.tx", &pauses);
  // Pauses at the first port TX, steps to the second, then the input ends: no more pauses.
  EXPECT_EQ(pauses, 2u);
  EXPECT_NE(out.find("TX SEND_FIRST"), std::string::npos) << out;
  EXPECT_NE(out.find("TX SEND_LAST"), std::string::npos) << out;
  EXPECT_NE(out.find("end of commands"), std::string::npos) << out;
  EXPECT_EQ(out.find("TX ACK"), std::string::npos) << out;
}

TEST(TraceStep, HelpAndBadArguments) {
  uint64_t pauses = 0;
  const std::string out = run_step("h\nc x\np qp\np qp 1 hcasim7\nn kind=nope\nq\n", "", &pauses);
  EXPECT_NE(out.find("step commands:"), std::string::npos) << out;
  EXPECT_NE(out.find("positive count"), std::string::npos) << out;
  EXPECT_NE(out.find("p qp QPN"), std::string::npos) << out;
  EXPECT_NE(out.find("no host 'hcasim7'"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown trace kind 'nope'"), std::string::npos) << out;
  EXPECT_EQ(pauses, 1u);
}

// ------------------------------------------------------------------ hub, text

class CountingSink : public model::TraceSink {
 public:
  void record(const TraceEvent&) override { ++events; }
  void finish() override { ++finishes; }
  int events = 0, finishes = 0;
};

TEST(TraceFilterSpec, HostsByNameOrIndexWithinTheRun) {
  const std::vector<std::string> names = {"hcasim0", "hcasim1"};
  TraceFilter f;
  std::string err;
  ASSERT_TRUE(f.parse("host=hcasim1,0", err, names)) << err;
  EXPECT_EQ(f.hosts, (std::vector<uint32_t>{1, 0}));
  for (const char* bad : {"host=2", "host=hcasim2", "host=1x", "host=-1", "host="}) {
    TraceFilter g;
    err.clear();
    EXPECT_FALSE(g.parse(bad, err, names)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  TraceFilter g;
  EXPECT_FALSE(g.parse("host=7", err, names));
  EXPECT_EQ(err, "no host '7' in this run (hcasim0..hcasim1, or 0..1)");
}

TEST(TraceFilterSpec, QpnMatchesPacketsByTheirDestinationQp) {
  TraceFilter f;
  std::string err;
  ASSERT_TRUE(f.parse("qpn=0x12", err)) << err;
  // A frame to QP 0x12 (its BTH), seen on either host's port, has no QPN of its own.
  EXPECT_TRUE(f.keep(
      ev(1, 0, TraceUnit::Port, TraceKind::PktTx, kTraceNone, "TX", pkt(BthOpcode::SEND_ONLY, 1, 0x12))));
  EXPECT_TRUE(f.keep(
      ev(1, 1, TraceUnit::Port, TraceKind::PktRx, kTraceNone, "RX", pkt(BthOpcode::SEND_ONLY, 1, 0x12))));
  EXPECT_FALSE(f.keep(
      ev(1, 0, TraceUnit::Port, TraceKind::PktTx, kTraceNone, "TX", pkt(BthOpcode::SEND_ONLY, 1, 0x13))));
  // Other events match by their own QPN only, not by a peer they mention.
  EXPECT_TRUE(f.keep(ev(1, 0, TraceUnit::Cq, TraceKind::CqeWrite, 0x12, "CQE")));
  EXPECT_FALSE(
      f.keep(ev(1, 0, TraceUnit::Requester, TraceKind::Ack, 0x11, "ACK", TraceFields().set_peer_qpn(0x12))));
  EXPECT_FALSE(TraceFilter().parse("qpn=0x1000000", err));
  EXPECT_FALSE(TraceFilter().parse("qpn=zz", err));
}

TEST(TraceFilterSpec, ShortKindWordsAndErrorsThatListTheVocabulary) {
  TraceFilter f;
  std::string err;
  ASSERT_TRUE(f.parse("kind=cqe,arm", err)) << err;
  EXPECT_EQ(f.kinds, (std::vector<TraceKind>{TraceKind::CqeWrite, TraceKind::CqArm}));
  TraceFilter p;
  ASSERT_TRUE(p.parse("kind=pkt", err)) << err;  // a frame on a port
  EXPECT_TRUE(p.may_keep(TraceUnit::Port, TraceKind::PktRx));
  EXPECT_FALSE(p.may_keep(TraceUnit::Requester, TraceKind::PktTx));
  EXPECT_FALSE(TraceFilter().parse("kind=cqes", err));
  EXPECT_NE(err.find("kinds: post, doorbell"), std::string::npos) << err;
  EXPECT_NE(err.find("cqe = cqe.write"), std::string::npos) << err;
  EXPECT_FALSE(TraceFilter().parse("unit=cqs", err));
  EXPECT_NE(err.find("units: driver, doorbell"), std::string::npos) << err;
  EXPECT_FALSE(TraceFilter().parse("hosts=1", err));
  EXPECT_EQ(err, "unknown field 'hosts' (host, qpn, unit, kind)");
}

TEST(TraceHub, FansOutAndFinishesOnce) {
  TraceHub hub;
  CountingSink a, b;
  hub.add(&a);
  hub.add(&b);
  auto e = ev(1, 0, TraceUnit::Doorbell, TraceKind::Doorbell, 0x11, "x");
  hub.record(e);
  hub.finish();
  hub.finish();
  hub.record(e);
  EXPECT_EQ(a.events, 1);
  EXPECT_EQ(b.events, 1);
  EXPECT_EQ(a.finishes, 1);
}

TEST(TraceHub, SuccessesAreWantedOnlyIfASinkWantsThem) {
  // The explainer reports failed CQEs only; a full trace wants every CQE.
  ExplainSink explain(stderr, {"hcasim0"});
  TraceHub only_explain;
  only_explain.add(&explain);
  EXPECT_TRUE(only_explain.wants(TraceUnit::Cq, TraceKind::CqeWrite));
  EXPECT_FALSE(only_explain.wants_success(TraceUnit::Cq, TraceKind::CqeWrite));
  EXPECT_TRUE(only_explain.wants_success(TraceUnit::Command, TraceKind::QpState));  // starts a flush episode
  EXPECT_FALSE(only_explain.wants_success(TraceUnit::Doorbell, TraceKind::Doorbell));
  TraceHub both;
  CountingSink all;
  both.add(&explain);
  both.add(&all);
  EXPECT_TRUE(both.wants_success(TraceUnit::Cq, TraceKind::CqeWrite));
}

TEST(TraceText, LineFormatMatchesTheSink) {
  auto e = ev(5376400, 0, TraceUnit::Port, TraceKind::PktTx, kTraceNone, "TX WRITE_LAST_IMM");
  e.time_ps += 400;
  EXPECT_EQ(format_trace_line(e, {"hcasim0"}),
            "       5376400.400  hcasim0  port      pkt.tx      -         TX WRITE_LAST_IMM\n");
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  {
    TextTraceSink sink(out, false, {"hcasim0"});
    sink.record(e);
    sink.finish();
  }
  std::fclose(out);
  EXPECT_EQ(std::string(buf, len), std::string(text_trace_header()) + format_trace_line(e, {"hcasim0"}));
  free(buf);
}

}  // namespace
}  // namespace hcasim::sim
