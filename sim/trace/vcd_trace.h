// SPDX-License-Identifier: Apache-2.0
/**
 * @file vcd_trace.h
 * @brief Key hardware signals as a VCD (IEEE 1364 value change dump) for GTKWave, built from
 *        the typed trace events.
 *
 * Signals, one module per host and below it one per port / QP / CQ / EQ as they appear:
 *
 *   hcasim0.sq_doorbell, .cq_arm_doorbell,
 *          .eq_arm_doorbell, .msix<V>                    strobes (1 for strobe_ps, default 1 ns)
 *   hcasim0.port.tx_busy                                 1 while a frame is being serialised
 *   hcasim0.port.tx_opcode[8], .tx_psn[24], .rx_frame    last frame sent; strobe per frame received
 *   hcasim0.qp_0x000011.sq_posted[16]                    driver's SQ producer (WQEBBs, after post)
 *   hcasim0.qp_0x000011.sq_pi[16], .sq_ci[16]            producer from the last doorbell; next WQEBB to fetch
 *   hcasim0.qp_0x000011.rq_pi[16], .rq_ci[16]            receive WQEs posted; consumed by the responder
 *   hcasim0.cq_1.pi[24], .ci[24], .armed[2], .event      CQEs written; consumer index of the last arm;
 *                                                        0 disarmed / 1 next / 2 solicited; strobe per event
 *   hcasim0.eq_1.pi[24], .ci[24]                         EQEs written; consumer index of the last EQ arm
 *
 * Counters are 'x' until first seen. Timescale 1 ps (simulated time). The value changes are
 * spooled to a temporary file and the header (which must declare every signal first) is
 * written by finish(), so signals of QPs and CQs created at any time can be declared.
 */
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "trace.h"

namespace hcasim::sim {

class VcdSink : public model::TraceSink {
 public:
  /**
   * @param path output file (written at finish())
   * @param host_names the name of each host index (one scope per host)
   * @param wire_ps serialisation time of a frame of N bytes on the wire (tx_busy)
   * @param strobe_ps width of strobe pulses
   */
  VcdSink(const std::string& path, std::vector<std::string> host_names,
          std::function<uint64_t(uint32_t)> wire_ps, uint64_t strobe_ps = 1000);
  /** @brief The run's clock mode, named in the header comment. */
  void set_time_model(const std::string& m) { time_model_ = m; }
  ~VcdSink() override;
  /** @brief The output file could be created. */
  bool ok() const { return out_ != nullptr && body_ != nullptr; }
  void record(const model::TraceEvent& ev) override;
  void finish() override;
  /** @brief Only the events that move a signal (posts, doorbells, fetches, packets, CQ/EQ). */
  bool wants(model::TraceUnit u, model::TraceKind k) const override;
  size_t signals() const { return vars_.size(); }

 private:
  std::string time_model_ = "lockstep";
  struct Var {
    std::string scope;  ///< "hcasim0" or "hcasim0.qp_0x000011"
    std::string name;
    unsigned width;
    std::string code;  ///< VCD identifier code
    uint64_t value = 0;
    bool known = false;
    uint64_t until = 0;  ///< strobes/busy: when the pending fall is due
    bool pulse = false;  ///< starts at 0 (strobe/busy) rather than x
  };
  int var(uint32_t host, const std::string& sub, const char* name, unsigned width, bool pulse);
  void set(int v, uint64_t value);
  void at(uint64_t t);
  void pulse(int v, uint64_t width_ps);
  void flush_falls(uint64_t before, bool inclusive);
  std::string host_name(uint32_t host) const;

  std::string path_;
  FILE* out_ = nullptr;
  FILE* body_ = nullptr;
  bool done_ = false;
  std::vector<std::string> names_;
  std::function<uint64_t(uint32_t)> wire_ps_;
  uint64_t strobe_ps_;
  std::vector<Var> vars_;
  std::map<std::string, int> by_name_;  ///< "scope.name" -> index
  std::multimap<uint64_t, int> falls_;  ///< due time -> var
  uint64_t now_ = 0;                    ///< time of the event being recorded
  uint64_t written_ = 0;                ///< last "#t" in the body (0 is written by the header)
};

}  // namespace hcasim::sim
