// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace_filter.h
 * @brief Which trace events to keep, from a spec such as `host=hcasim1;qpn=0x11;kind=cqe`:
 *        the one vocabulary of `--trace-filter`, `--step-filter` and step mode's `next`.
 *
 * No SystemC: the hcasim command links it to check a filter before it starts anything.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace.h"

namespace hcasim::sim {

/** @brief Which events a sink keeps (an empty list keeps all). */
struct TraceFilter {
  std::vector<uint32_t> hosts;
  std::vector<uint32_t> qpns;
  std::vector<model::TraceUnit> units;
  std::vector<model::TraceKind> kinds;

  /**
   * @brief Whether @p ev matches. A QPN matches the event's QP, or, for packets, the destination
   * QP in their BTH: so `qpn=0x11` keeps the frames sent to or received by QP 0x11 too.
   */
  bool keep(const model::TraceEvent& ev) const;
  /** @brief keep() can be true for some event of this unit and kind (hosts and QPNs aside). */
  bool may_keep(model::TraceUnit u, model::TraceKind k) const;
  /**
   * @brief Parse clauses `field=v1,v2` joined by `;`: host (a name from @p host_names or an index
   * below its size), qpn (decimal or 0x hex, 24 bits), unit and kind (names as traces print them,
   * or the short words cqe, eqe, arm, db, pkt). False with @p err naming the bad value and what
   * would be valid. With no @p host_names, host indices are not range-checked.
   */
  bool parse(const std::string& spec, std::string& err, const std::vector<std::string>& host_names = {});

  /** @brief The short words parse() accepts for kinds, with what they stand for (help texts). */
  static const char* kind_words();
};

/** @brief Every unit name, comma-separated (for error messages and help). */
std::string trace_unit_names();
/** @brief Every kind name, comma-separated. */
std::string trace_kind_names();

}  // namespace hcasim::sim
