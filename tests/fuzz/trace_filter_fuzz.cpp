// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the specs users type: --trace-filter / --step-filter / step mode's `next`
// (sim/trace/trace_filter.h), --drop rules (sim/trace/drop_rule.h) and --faults specs
// (sim/trace/fault_spec.h). Input: a line of text;
// its first byte picks the grammar, the rest is the spec. Properties: a spec is either accepted
// with an empty message or refused with one that says something; accepted values are in range
// (24-bit QPNs and PSNs, host indices below the number of hosts, counts 1..1000000,
// probabilities in [0, 1], delays ordered and at most 100 ms, a direction only with a host;
// link-down windows: a host of the run, T1 < T2, T1 at most an hour, no two overlapping for one host;
// drop= clauses: the same ranges as --drop rules).
#include <string>
#include <vector>

#include "drop_rule.h"
#include "fault_spec.h"
#include "fuzz_check.h"
#include "trace_filter.h"

using namespace hcasim::sim;

namespace {

const std::vector<std::string> kHosts = {"hcasim0", "hcasim1", "hcasim2"};

void filter(const std::string& spec, bool named) {
  TraceFilter f;
  std::string err;
  const bool ok = f.parse(spec, err, named ? kHosts : std::vector<std::string>{});
  FUZZ_CHECK(ok == err.empty(), "parse returned %d with message '%s'", ok, err.c_str());
  if (!ok) return;
  for (uint32_t q : f.qpns) FUZZ_CHECK(q <= 0xffffff, "QPN 0x%x is not 24 bits", q);
  if (named)
    for (uint32_t h : f.hosts) FUZZ_CHECK(h < kHosts.size(), "host index %u of %zu", h, kHosts.size());
}

void check_drop_rules(const std::vector<DropRule>& rules) {
  for (const DropRule& r : rules) {
    FUZZ_CHECK(r.host < kHosts.size(), "host %u", r.host);
    FUZZ_CHECK(r.psn == DropRule::kAny || r.psn <= 0xffffff, "PSN 0x%x", r.psn);
    FUZZ_CHECK(r.qpn == DropRule::kAny || r.qpn <= 0xffffff, "QPN 0x%x", r.qpn);
    FUZZ_CHECK(r.count >= 1 && r.count <= 1000000, "count %u", r.count);
  }
}

void drop(const std::string& spec) {
  std::vector<DropRule> rules;
  std::string err;
  const bool ok = parse_drop_rules(spec, rules, err, kHosts);
  FUZZ_CHECK(ok == err.empty(), "parse returned %d with message '%s'", ok, err.c_str());
  if (ok) check_drop_rules(rules);
}

void faults(const std::string& spec) {
  FaultSpec f;
  std::string err;
  const bool ok = f.parse(spec, err, kHosts);
  FUZZ_CHECK(ok == err.empty(), "parse returned %d with message '%s'", ok, err.c_str());
  if (!ok) return;
  for (const FaultClause& c : f.clauses) {
    FUZZ_CHECK(c.probability >= 0 && c.probability <= 1, "probability %g", c.probability);
    FUZZ_CHECK(c.delay_min_ps <= c.delay_max_ps && c.delay_max_ps <= 100'000'000'000ull,
               "delay %llu..%llu ps", (unsigned long long)c.delay_min_ps, (unsigned long long)c.delay_max_ps);
    FUZZ_CHECK(c.host == FaultClause::kAny || c.host < kHosts.size(), "host %u", c.host);
    FUZZ_CHECK(c.qpn == FaultClause::kAny || c.qpn <= 0xffffff, "QPN 0x%x", c.qpn);
    FUZZ_CHECK(c.dir == FaultDir::Both || c.host != FaultClause::kAny, "a direction without a host");
  }
  constexpr uint64_t kHour = 3600ull * 1'000'000'000'000ull;
  check_drop_rules(f.drops);  // drop= clauses: the same rules as --drop
  for (size_t i = 0; i < f.link_downs.size(); ++i) {
    const LinkDownClause& l = f.link_downs[i];
    FUZZ_CHECK(l.host < kHosts.size(), "link-down host %u", l.host);
    FUZZ_CHECK(l.down_ps < l.up_ps && l.down_ps <= kHour, "link-down %llu..%llu ps",
               (unsigned long long)l.down_ps, (unsigned long long)l.up_ps);
    FUZZ_CHECK(l.up_ps == LinkDownClause::kForever || l.up_ps <= kHour, "link up at %llu ps",
               (unsigned long long)l.up_ps);
    for (size_t j = 0; j < i; ++j) {
      const LinkDownClause& o = f.link_downs[j];
      FUZZ_CHECK(o.host != l.host || l.up_ps <= o.down_ps || o.up_ps <= l.down_ps,
                 "overlapping windows of host %u", l.host);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string spec(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: filter(spec, true); break;
    case 1: filter(spec, false); break;
    case 2: drop(spec); break;
    default: faults(spec); break;
  }
  return 0;
}
