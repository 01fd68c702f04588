// SPDX-License-Identifier: Apache-2.0
/**
 * @file timeline_trace.h
 * @brief The timeline: every trace event as Chrome/Perfetto trace-event JSON, for
 *        ui.perfetto.dev or chrome://tracing.
 *
 * Layout (Trace Event Format, JSON object form):
 *   - one process (pid = host index + 1, named after the device) per host, one thread
 *     (tid = unit + 1, named after the unit: driver, doorbell, ..., port, cq, eq) per unit,
 *     named by "M" metadata events and sorted in pipeline order;
 *   - every event is a complete ("X") slice, ts in microseconds of simulated time (picosecond
 *     digits kept), named after its kind (packets: "TX WRITE_FIRST"), category = unit, args = the
 *     facts text, QPN, wr_id and the typed fields. A port's transmissions last their
 *     serialisation time; every other event is instantaneous (dur 0);
 *   - flows ("s" start, "t" steps, "f" finish, one id per work request, binding point "e")
 *     follow each send WQE from the driver's post through its doorbell, fetch, decode, every
 *     packet on both ports (requests and their ACKs / READ responses) to its CQE — or to the
 *     ACK that retires it when unsignaled — and each receive WQE from post_recv through its
 *     fetch to its CQE.
 *
 * Packets are matched to WQEs by (QPN, PSN range); with more than two hosts whose QPNs and
 * PSNs collide, a packet may be linked to the wrong sender's WQE.
 */
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "trace.h"

namespace hcasim::sim {

class TimelineSink : public model::TraceSink {
 public:
  /**
   * @param out stream to write
   * @param own close @p out when the sink is destroyed
   * @param host_names the name of each host index (one track group per host)
   * @param wire_ps serialisation time of a frame of N bytes on the wire (for pkt.tx durations;
   *        may be empty)
   * @param time_model the run's clock mode, recorded in otherData
   */
  TimelineSink(FILE* out, bool own, std::vector<std::string> host_names,
               std::function<uint64_t(uint32_t)> wire_ps = {}, const std::string& time_model = "lockstep");
  ~TimelineSink() override;
  void record(const model::TraceEvent& ev) override;
  /** @brief Close the JSON (the file is not valid JSON before this). */
  void finish() override;

  uint64_t slices() const { return slices_; }
  uint64_t flows_started() const { return flows_; }

 private:
  struct Flow {
    uint64_t id = 0;
    std::string name;
    bool signaled = false;
    bool doorbelled = false;
    uint32_t psn_first = model::kTraceNone;
    uint32_t psn_last = model::kTraceNone;
  };
  struct QpFlows {
    uint32_t peer = model::kTraceNone;  ///< destination QPN, from the requester's "start" lines
    std::map<uint32_t, Flow> sq;        ///< by WQE index
    std::map<uint32_t, Flow> rq;
  };
  static uint64_t key(uint32_t host, uint32_t qpn) { return (uint64_t(host) << 32) | qpn; }
  /** Flows of WQEs posted to a shared receive queue, by (host, SRQN), until a QP takes them. */
  std::map<uint64_t, std::map<uint32_t, Flow>> srqs_;

  void meta(uint32_t host, model::TraceUnit unit);
  void slice(const model::TraceEvent& ev);
  void flow(const model::TraceEvent& ev, char ph, const Flow& f);
  /** Join @p ev to the flow(s) of the work requests it is about (by kind, below). */
  void link(const model::TraceEvent& ev);
  void link_post(const model::TraceEvent& ev);
  void link_doorbell(const model::TraceEvent& ev);
  void link_wqe(const model::TraceEvent& ev);
  void link_requester(const model::TraceEvent& ev);
  void link_packet(const model::TraceEvent& ev);
  void link_ack(const model::TraceEvent& ev);
  void link_cqe(const model::TraceEvent& ev);
  /** The flows of QP @p qpn on @p host, or nullptr (none recorded yet). */
  QpFlows* find_qp(uint32_t host, uint32_t qpn);
  /** The queue (SQ, or RQ for kTfRq events) and the flow of the WQE @p ev names; false if none. */
  bool find_wqe_flow(const model::TraceEvent& ev, std::map<uint32_t, Flow>*& queue,
                     std::map<uint32_t, Flow>::iterator& flow);
  /** A SQ flow of @p q whose PSN range holds @p psn. */
  Flow* by_psn(QpFlows& q, uint32_t psn);

  FILE* out_;
  bool own_;
  bool done_ = false;
  bool first_ = true;
  std::vector<std::string> names_;
  std::function<uint64_t(uint32_t)> wire_ps_;
  std::vector<bool> seen_proc_;
  std::vector<bool> seen_thread_;
  std::map<uint64_t, QpFlows> qps_;  ///< (host, qpn) -> flows; ordered, so output is deterministic
  uint64_t next_flow_ = 1;
  uint64_t slices_ = 0, flows_ = 0;
};

/** @brief Append @p s to @p out as JSON string content (no quotes). */
void json_escape(std::string& out, const char* s);

}  // namespace hcasim::sim
