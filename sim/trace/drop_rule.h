// SPDX-License-Identifier: Apache-2.0
/**
 * @file drop_rule.h
 * @brief Scripted frame loss, `hcasim run --drop 'host=1;psn=1002'`: a host drops the next
 *        frames it receives that match, as if the wire had lost them. For labs and experiments
 *        on retransmission; the RC transport recovers, UC and UD lose the message.
 *
 * No SystemC: the hcasim command links it to check a rule before it starts anything.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hcasim::sim {

/** @brief One rule: host `host` drops `count` received frames matching PSN and QPN. */
struct DropRule {
  static constexpr uint32_t kAny = 0xffffffffu;
  uint32_t host = 0;
  uint32_t psn = kAny;  ///< the BTH PSN, or any
  uint32_t qpn = kAny;  ///< the BTH destination QP, or any
  uint32_t count = 1;

  /**
   * @brief Parse `host=H;psn=P[;qpn=Q][;count=N]` (host: a name from @p host_names or an index;
   * numbers decimal or 0x hex). False with @p err naming the field and what is valid.
   */
  bool parse(const std::string& spec, std::string& err, const std::vector<std::string>& host_names = {});
};

/** @brief A whole number (decimal or 0x hex, no sign) up to @p max into @p out. */
bool parse_rule_number(const std::string& s, uint64_t max, uint32_t& out);

/** @brief A host: a name of @p names or an index below its size (any number if @p names is empty). */
bool parse_rule_host(const std::string& v, const std::vector<std::string>& names, uint32_t& out);

/**
 * @brief Parse a list of rules separated by '|' (what HCASIM_DROP holds: one per --drop).
 * False with @p err naming the bad rule.
 */
bool parse_drop_rules(const std::string& list, std::vector<DropRule>& out, std::string& err,
                      const std::vector<std::string>& host_names = {});

}  // namespace hcasim::sim
