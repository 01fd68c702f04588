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

namespace hcasim::sim {

/** @brief Which events a sink keeps (empty = all). */
struct TraceFilter {
  std::vector<uint32_t> hosts;
  std::vector<uint32_t> qpns;
  std::vector<model::TraceUnit> units;
  std::vector<model::TraceKind> kinds;
  bool keep(const model::TraceEvent& ev) const;
  /** @brief Parse "host=0,1;qpn=0x11;unit=cq,eq;kind=cqe.write"; false with @p err on a bad field. */
  bool parse(const std::string& spec, std::string& err);
};

class TextTraceSink : public model::TraceSink {
 public:
  /** @param out stream to write (not owned unless @p own) */
  TextTraceSink(FILE* out, bool own, std::vector<std::string> host_names);
  ~TextTraceSink() override;
  void record(const model::TraceEvent& ev) override;
  TraceFilter filter;

 private:
  FILE* out_;
  bool own_;
  std::vector<std::string> names_;
};

/** @brief Fan-out to several sinks. */
class TraceHub : public model::TraceSink {
 public:
  void add(model::TraceSink* s) { sinks_.push_back(s); }
  bool empty() const { return sinks_.empty(); }
  void record(const model::TraceEvent& ev) override {
    for (auto* s : sinks_) s->record(ev);
  }

 private:
  std::vector<model::TraceSink*> sinks_;
};

}  // namespace hcasim::sim
