// SPDX-License-Identifier: Apache-2.0
/**
 * @file world.h
 * @brief The in-process world: several simulated HCAs in this process, wired together, each
 *        offered to the driver as an HcaLink, under one SystemC kernel.
 *
 * Configured from the environment on first use (hcasim run sets these):
 *   HCASIM_HOSTS=N (2), HCASIM_PROFILE=name (roce-100g), HCASIM_TRACE=file|- ,
 *   HCASIM_TRACE_FILTER=spec, HCASIM_STATS=file|- (counters at exit, text),
 *   HCASIM_STATS_JSON=file|- (the same as JSON), HCASIM_TIMELINE=file.json (Perfetto/Chrome
 *   trace-event timeline), HCASIM_VCD=file.vcd (signals for GTKWave), HCASIM_PCAP=file.pcap
 *   (every frame on every wire), HCASIM_STEP=1 (step mode), HCASIM_STEP_FILTER=spec (events
 *   that pause), HCASIM_STEP_SCRIPT=file (step commands; default /dev/tty), HCASIM_STEP_FD=n
 *   (step commands from an inherited descriptor), HCASIM_IDLE_US (2000), HCASIM_SEED=N (1),
 *   HCASIM_PACE=0 (cross idle gaps at full speed instead of wall-clock pace; engine.h),
 *   HCASIM_DROP=rules (drop_rule.h), HCASIM_FAULTS=spec (random faults on the wire; fault_spec.h).
 *
 * With HCASIM_FABRIC=socket the process builds no world: it joins that cross-process fabric
 * as one host (HCASIM_HOST=i picks the slot; the drop-in library decides, sim/dropin), and the
 * device process (hcasim-device, which builds the world) reads the variables above instead.
 *
 * Every output is completed at exit (or when the World is destroyed): the timeline's JSON is
 * closed, the VCD header written, the pcap flushed.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <vector>
#include "clock.h"
#include "explain.h"
#include "fault_injector.h"
#include "frame_loss.h"

#include "cable_switch.h"
#include "hca.h"
#include "hca_link.h"
#include "pcap_fault_notes.h"
#include "pcap_writer.h"
#include "step_mode.h"
#include "text_trace.h"
#include "timeline_trace.h"
#include "vcd_trace.h"

namespace hcasim::sim {

struct WorldConfig {
  uint32_t hosts = 2;
  std::string profile = "roce-100g";
  std::string trace;  ///< "" off, "-" stderr, else a file
  std::string trace_filter;
  std::string stats;        ///< "" off, "-" stderr, else a file
  std::string stats_json;   ///< "" off, "-" stderr, else a file
  std::string timeline;     ///< "" off, else a file (Chrome/Perfetto JSON)
  std::string vcd;          ///< "" off, else a file
  std::string pcap;         ///< "" off, else a file
  bool step = false;        ///< step mode
  std::string step_filter;  ///< events that pause (TraceFilter spec)
  std::string step_script;  ///< step commands from this file ("" = /dev/tty)
  int step_fd = -1;         ///< step commands from this descriptor (wins over step_script)
  std::string drop;         ///< --drop rules, '|'-separated (drop_rule.h)
  std::string faults;       ///< --faults SPEC (fault_spec.h)
  bool explain = true;      ///< plain-words lines on stderr for errors (explain.h); HCASIM_EXPLAIN=0 silences
  uint32_t idle_us = 2000;
  uint64_t seed = 1;
  ClockMode clock = ClockMode::Auto;  ///< time model (clock.h); step mode needs lockstep
  /** @brief Start the engine's device thread (false: the fabric's server drives the kernel). */
  bool device_thread = true;
  /** @brief Read HCASIM_*; on a bad value sets @p err (naming the variable) and returns false. */
  static bool from_env(WorldConfig& cfg, std::string& err);
};

/**
 * @brief Counter @p name ("tx_packets", "rnr_naks", ...: the HcaStats field names) of @p s into
 * @p v; false for an unknown name. What hcasim_sim_counter() answers, in-process or on a fabric.
 */
bool stat_by_name(const model::HcaStats& s, const std::string& name, uint64_t& v);

/** @brief "Any QP" / "any PSN" for drop_rx() (sim_control.h spells it 0xffffffff). */
constexpr uint32_t kMatchAny = 0xffffffff;

/**
 * @brief Fault injection: @p hca drops the next @p count frames it receives for destination QP
 * @p qpn with PSN @p psn (either may be kMatchAny). What hcasim_sim_drop_rx() does. Call with
 * the engine's lock held.
 */
void drop_rx(model::Hca& hca, uint32_t qpn, uint32_t psn, uint32_t count);

class SimLink;

class World {
 public:
  /** @brief The process's world, built from the environment on first use (nullptr on bad config). */
  static World* get();
  explicit World(const WorldConfig& cfg);
  ~World();

  const WorldConfig& config() const { return cfg_; }
  size_t size() const { return hcas_.size(); }
  model::Hca& hca(size_t i) { return *hcas_[i]; }
  model::Hca* find(const std::string& name);
  std::vector<drv::HcaLink*> links();
  /** @brief Counters of every HCA, as text (one block per device) or JSON. */
  std::string stats_text();
  /** @brief Lines the text counters end with (the device process's own); empty function: none. */
  void set_stats_tail(std::function<std::string()> f) { stats_tail_ = std::move(f); }
  /** @brief Counters as JSON, plus a snapshot of every live QP (indices, PSNs, state). */
  std::string stats_json();
  /** @brief Complete every output (trace files, timeline, VCD, pcap); later events are dropped. */
  void finish();
  /** @brief What the process does at exit: what it left in flight, counters (--stats), finish(). */
  void at_exit();
  /**
   * @brief Report, as hazards, the sends @p who (the process) leaves unacknowledged and the
   * CQEs it never polled. Best effort: skipped if the device lock stays held elsewhere (100 ms).
   */
  void report_left_behind(const std::string& who);
  StepController* step() { return step_.get(); }

 private:
  /** @brief Where step commands come from and answers go. */
  struct StepIo {
    FILE* in = nullptr;
    FILE* out = stderr;
  };
  void open_sinks(const std::vector<std::string>& names);
  /** @brief The text trace's first line: the clock mode, profile and seed of the run. */
  std::string trace_preamble() const;
  StepIo open_step_input() const;
  void open_step(const StepIo& io, const std::vector<std::string>& names);
  /** @brief Connect the hosts' ports: a cable for two, a switch for more; --faults in between. */
  void wire_up();
  /** The index of the host whose port has MAC @p mac, or FaultClause::kAny. */
  uint32_t host_with_mac(const uint8_t* mac) const;
  /** Opens <pcap>.faults unless it is open; false (said on stderr) if it cannot. */
  bool open_fault_notes();
  /** @brief Write @p wire's faults (host @p host's) to the capture's side file, <pcap>.faults. */
  void note_faults_in_capture(FaultyWire& wire, uint32_t host);
  /** With --pcap: the frames --drop, drop= and step mode's drop next lose, in <pcap>.faults too. */
  void note_drops_in_capture();

  WorldConfig cfg_;
  const model::TimingProfile* prof_;
  int pid_ = 0;  ///< the process that built the world (a forked child does not finish its outputs)
  bool finished_ = false;
  std::function<std::string()> stats_tail_;
  TraceHub hub_;
  std::unique_ptr<TextTraceSink> text_;
  std::unique_ptr<TimelineSink> timeline_;
  std::unique_ptr<VcdSink> vcd_;
  std::unique_ptr<wire::PcapWriter> pcap_;
  PcapFaultNotes pcap_notes_;  ///< <pcap>.faults: which captured frames met which faults
  std::vector<std::unique_ptr<IommuShadow>> shadows_;
  std::unique_ptr<HcaInspector> inspector_;
  std::unique_ptr<StepController> step_;
  std::unique_ptr<ExplainSink> explain_;
  FrameLoss loss_;            ///< --drop rules and step mode's drop next
  model::Tracer net_tracer_;  ///< the cable's / switch's events (host 0)
  std::vector<std::unique_ptr<model::Hca>> hcas_;
  std::vector<std::unique_ptr<CableEnd>> cables_;
  std::unique_ptr<Switch> switch_;
  FaultSpec faults_;                                 ///< --faults (empty: a perfect wire)
  std::unique_ptr<LinkSchedule> links_schedule_;     ///< when faults_ has link-down clauses
  std::vector<std::unique_ptr<FaultyWire>> faulty_;  ///< one per host port when faults_ has clauses
  std::vector<std::unique_ptr<SimLink>> links_;
};

}  // namespace hcasim::sim
