// SPDX-License-Identifier: Apache-2.0
/**
 * @file explain.h
 * @brief `hcasim run --explain` (on by default): one plain-words line on stderr for each thing
 *        that goes wrong — an error completion, a QP the hardware moved to ERR, an asynchronous
 *        event, a refused request, a CQ overflow, a wait for a completion event that cannot come —
 *        naming the host and the unit that decided it. Built from the same typed trace events as
 *        the trace, so it needs no `--trace`.
 */
#pragma once

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace.h"

namespace hcasim::sim {

class ExplainSink : public model::TraceSink {
 public:
  /** @param out where the lines go (stderr) @param host_names the name of each host index */
  ExplainSink(FILE* out, std::vector<std::string> host_names) : out_(out), names_(std::move(host_names)) {}
  bool wants(model::TraceUnit u, model::TraceKind k) const override;
  /** @brief Of the CQEs, only those with an error status are explained. */
  bool wants_success(model::TraceUnit u, model::TraceKind k) const override;
  void record(const model::TraceEvent& ev) override;
  void finish() override { done_ = true; }
  /** @brief The line for @p ev ("" when it explains nothing), without the "hcasim: " prefix. */
  std::string explain(const model::TraceEvent& ev);

 private:
  std::string who(const model::TraceEvent& ev) const;
  std::string completion(const model::TraceEvent& ev);
  std::string async_event(const model::TraceEvent& ev) const;

  FILE* out_;
  std::vector<std::string> names_;
  bool done_ = false;
  std::set<std::pair<uint32_t, uint32_t>> flushed_;  ///< (host, QPN) whose flush was explained once
};

/** @brief The ibverbs name and meaning of a CQE syndrome ("IBV_WC_REM_ACCESS_ERR", "..."). */
std::pair<const char*, const char*> explain_cqe_status(uint16_t syndrome);

}  // namespace hcasim::sim
