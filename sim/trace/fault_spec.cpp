// SPDX-License-Identifier: Apache-2.0
#include "fault_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "drop_rule.h"

namespace hcasim::sim {
namespace {

constexpr const char* kFaults = "loss=P, duplicate=P, reorder=P, corrupt=P (P from 0 to 1) or delay=T[..T]";
constexpr const char* kScopes = "host=H, dir=tx|rx, qpn=Q, op=send|write|read|atomic|ack";
constexpr uint64_t kMaxDelayPs = 100'000'000'000ull;  // 100 ms

/** @brief Split @p s at every @p sep (empty pieces kept: they are errors). */
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

bool probability(const std::string& v, double& p) {
  if (v.empty() || v[0] == '-' || v[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  p = std::strtod(v.c_str(), &end);
  return !errno && !*end && std::isfinite(p) && p >= 0 && p <= 1;
}

/** @brief A time with its unit (ns, us, ms) in picoseconds. */
bool duration(const std::string& v, uint64_t& ps) {
  static const struct {
    const char* unit;
    double ps;
  } units[] = {{"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}};
  for (const auto& u : units) {
    const size_t n = v.size();
    if (n < 3 || v.compare(n - 2, 2, u.unit) != 0) continue;
    const std::string num = v.substr(0, n - 2);
    if (num[0] == '-' || num[0] == '+') return false;
    errno = 0;
    char* end = nullptr;
    const double x = std::strtod(num.c_str(), &end) * u.ps;
    if (errno || *end || !std::isfinite(x) || x < 0 || x > double(kMaxDelayPs)) return false;
    ps = uint64_t(std::llround(x));
    return true;
  }
  return false;
}

bool delay_range(const std::string& v, FaultClause& c) {
  const size_t dots = v.find("..");
  if (dots == std::string::npos) {
    if (!duration(v, c.delay_min_ps)) return false;
    c.delay_max_ps = c.delay_min_ps;
    return true;
  }
  return duration(v.substr(0, dots), c.delay_min_ps) && duration(v.substr(dots + 2), c.delay_max_ps) &&
         c.delay_min_ps <= c.delay_max_ps;
}

/** @brief The fault part of a clause ("loss=0.01"). */
bool parse_fault(const std::string& text, FaultClause& c, std::string& err) {
  static const FaultKind kinds[] = {FaultKind::Loss, FaultKind::Duplicate, FaultKind::Reorder,
                                    FaultKind::Corrupt, FaultKind::Delay};
  const auto eq = text.find('=');
  const std::string key = text.substr(0, eq), v = eq == std::string::npos ? "" : text.substr(eq + 1);
  for (FaultKind k : kinds) {
    if (key != fault_kind_name(k)) continue;
    c.kind = k;
    if (k == FaultKind::Delay) {
      c.probability = 1;
      if (delay_range(v, c)) return true;
      err = "bad delay '" + v +
            "' (a time with its unit, ns, us or ms, up to 100ms: 5us, or a range 2us..50us)";
      return false;
    }
    if (probability(v, c.probability)) return true;
    err = "bad probability '" + v + "' for " + key + " (a number from 0 to 1: 0.01, 1e-3)";
    return false;
  }
  err = "unknown fault '" + key + "' (" + kFaults + ")";
  return false;
}

bool parse_op(const std::string& v, FaultOp& op) {
  static const struct {
    const char* name;
    FaultOp op;
  } ops[] = {{"send", FaultOp::Send},
             {"write", FaultOp::Write},
             {"read", FaultOp::Read},
             {"atomic", FaultOp::Atomic},
             {"ack", FaultOp::Ack}};
  for (const auto& o : ops)
    if (v == o.name) return op = o.op, true;
  return false;
}

/** @brief One scope qualifier ("host=1", "dir=tx") into @p c. */
bool parse_scope(const std::string& text, FaultClause& c, std::string& err,
                 const std::vector<std::string>& names) {
  const auto eq = text.find('=');
  const std::string key = text.substr(0, eq), v = eq == std::string::npos ? "" : text.substr(eq + 1);
  bool ok = eq != std::string::npos;
  std::string valid;
  if (key == "host") {
    ok = ok && parse_rule_host(v, names, c.host);
    valid = names.empty()
                ? "a host index"
                : names.front() + ".." + names.back() + ", or 0.." + std::to_string(names.size() - 1);
  } else if (key == "dir") {
    ok = ok && (v == "tx" || v == "rx");
    if (ok) c.dir = v == "tx" ? FaultDir::Tx : FaultDir::Rx;
    valid = "tx or rx";
  } else if (key == "qpn") {
    ok = ok && parse_rule_number(v, 0xffffff, c.qpn);
    valid = "a 24-bit number";
  } else if (key == "op") {
    ok = ok && parse_op(v, c.op);
    valid = "send, write, read, atomic or ack";
  } else {
    err = "unknown scope '" + key + "' (" + kScopes + ")";
    return false;
  }
  if (!ok) err = "bad " + key + " '" + v + "' (" + valid + ")";
  return ok;
}

bool is_scope(const std::string& item) {
  const std::string key = item.substr(0, item.find('='));
  return key == "host" || key == "dir" || key == "qpn" || key == "op";
}

/** @brief One clause "FAULT{@SCOPE}" into @p c; @p err without the clause's name. */
bool parse_clause(const std::string& text, FaultClause& c, std::string& err,
                  const std::vector<std::string>& names) {
  const std::vector<std::string> parts = split(text, '@');
  if (!parse_fault(parts[0], c, err)) return false;
  for (size_t i = 1; i < parts.size(); ++i)
    if (!parse_scope(parts[i], c, err, names)) return false;
  if (c.dir != FaultDir::Both && c.host == FaultClause::kAny) {
    err = "dir= needs host= (the host whose sent or received frames it picks)";
    return false;
  }
  return true;
}

}  // namespace

const char* fault_kind_name(FaultKind k) {
  static const char* const names[] = {"loss", "duplicate", "reorder", "corrupt", "delay"};
  return names[unsigned(k)];
}

bool FaultSpec::parse(const std::string& spec, std::string& err, const std::vector<std::string>& host_names) {
  clauses.clear();
  if (spec.empty()) return true;
  // Items after a comma that are scopes continue the scoped clause before them.
  std::vector<std::string> texts;
  for (const std::string& item : split(spec, ',')) {
    if (!texts.empty() && is_scope(item) && texts.back().find('@') != std::string::npos)
      texts.back() += "@" + item;
    else
      texts.push_back(item);
  }
  for (const std::string& text : texts) {
    FaultClause c;
    std::string why;
    if (text.empty()) {
      err = "empty clause in '" + spec + "' (clauses: " + kFaults + "; each optionally @" + kScopes + ")";
    } else if (parse_clause(text, c, why, host_names)) {
      clauses.push_back(c);
      continue;
    } else {
      err = "clause '" + text + "': " + why;
    }
    clauses.clear();
    return false;
  }
  return true;
}

}  // namespace hcasim::sim
