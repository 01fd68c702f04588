// SPDX-License-Identifier: Apache-2.0
/**
 * @file text_trace.h
 * @brief The readable step trace: one aligned line per event, optionally filtered by host,
 *        QPN, unit or kind.
 */
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "trace.h"
#include "trace_filter.h"

namespace hcasim::sim {

/** @brief The column header of the readable trace (with its newline). */
const char* text_trace_header();
/**
 * @brief One event as a line of the readable trace (with its newline):
 * `time  host  unit  event  qpn  facts [wr_id=N]`.
 */
std::string format_trace_line(const model::TraceEvent& ev, const std::vector<std::string>& host_names);

class TextTraceSink : public model::TraceSink {
 public:
  /**
   * @param out stream to write
   * @param own close @p out when the sink is destroyed
   * @param host_names the name of each host index, for the host column
   * @param preamble written before the column header (comment lines: the time model, profile)
   */
  TextTraceSink(FILE* out, bool own, std::vector<std::string> host_names, const std::string& preamble = "");
  ~TextTraceSink() override;
  void record(const model::TraceEvent& ev) override;
  void finish() override;
  /** @brief A comment line ("# " + @p text) between events, in order (a clock switch). */
  void note(const std::string& text);
  bool wants(model::TraceUnit u, model::TraceKind k) const override { return filter.may_keep(u, k); }
  /** @brief Set before the sink is added to a hub (the hub reads wants() then). */
  TraceFilter filter;

 private:
  FILE* out_;
  bool own_;
  bool done_ = false;
  std::vector<std::string> names_;
};

/** @brief Fan-out to several sinks, in the order added. */
class TraceHub : public model::TraceSink {
 public:
  /** @brief Add a sink (its wants() must be final by now). */
  void add(model::TraceSink* s) {
    sinks_.push_back(s);
    for (unsigned u = 0; u < kUnits; ++u)
      for (unsigned k = 0; k < kKinds; ++k)
        if (s->wants(model::TraceUnit(u), model::TraceKind(k))) {
          wanted_[u * kKinds + k] = true;
          if (s->wants_success(model::TraceUnit(u), model::TraceKind(k)))
            wanted_success_[u * kKinds + k] = true;
        }
  }
  bool empty() const { return sinks_.empty(); }
  bool wants(model::TraceUnit u, model::TraceKind k) const override {
    return wanted_[unsigned(u) * kKinds + unsigned(k)];
  }
  bool wants_success(model::TraceUnit u, model::TraceKind k) const override {
    return wanted_success_[unsigned(u) * kKinds + unsigned(k)];
  }
  void record(const model::TraceEvent& ev) override {
    if (done_) return;
    for (auto* s : sinks_) s->record(ev);
  }
  /** @brief finish() every sink once; events after that are dropped. */
  void finish() override {
    if (done_) return;
    done_ = true;
    for (auto* s : sinks_) s->finish();
  }

 private:
  static constexpr unsigned kUnits = unsigned(model::TraceUnit::Count);
  static constexpr unsigned kKinds = unsigned(model::TraceKind::Count);
  std::vector<model::TraceSink*> sinks_;
  bool wanted_[kUnits * kKinds] = {};
  bool wanted_success_[kUnits * kKinds] = {};  ///< wanted_, and some sink wants the successes too
  bool done_ = false;
};

}  // namespace hcasim::sim
