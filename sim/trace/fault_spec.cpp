// SPDX-License-Identifier: Apache-2.0
#include "fault_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "drop_rule.h"

namespace hcasim::sim {
namespace {

constexpr const char* kFaults =
    "loss=P, duplicate=P, reorder=P, corrupt=P (P from 0 to 1), delay=T[..T], link-down=H@T1[..T2] or "
    "drop=psn:P@host=H";
constexpr const char* kScopes = "host=H, dir=tx|rx, qpn=Q, op=send|write|read|atomic|ack";
constexpr uint64_t kMaxDelayPs = 100'000'000'000ull;                 // 100 ms
constexpr uint64_t kMaxLinkTimePs = 3600ull * 1'000'000'000'000ull;  // an hour
constexpr const char* kLinkDown = "link-down=";
constexpr const char* kDrop = "drop=";

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

/** @brief A time with its unit (ns, us, ms; s too if @p seconds) up to @p max_ps, in picoseconds. */
bool duration(const std::string& v, uint64_t& ps, uint64_t max_ps = kMaxDelayPs, bool seconds = false) {
  static const struct {
    const char* unit;
    double ps;
  } units[] = {{"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}};
  for (const auto& u : units) {
    const size_t n = v.size(), len = std::char_traits<char>::length(u.unit);
    if (len == 1 && !seconds) continue;  // "5us" met "us" first; "5s" only where seconds make sense
    if (n < len + 1 || v.compare(n - len, len, u.unit) != 0) continue;
    const std::string num = v.substr(0, n - len);
    if (num[0] == '-' || num[0] == '+') return false;
    errno = 0;
    char* end = nullptr;
    const double x = std::strtod(num.c_str(), &end) * u.ps;
    if (errno || *end || !std::isfinite(x) || x < 0 || x > double(max_ps)) return false;
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
  return key == "host" || key == "dir" || key == "qpn" || key == "op" || key == "count";
}

/**
 * @brief A scripted drop, "drop=psn:P@host=H[@qpn=Q][@count=N]", into @p r: the same rule as
 * `--drop 'host=H;psn=P...'` (parsed by DropRule, so both report the same errors).
 */
bool parse_drop(const std::string& text, DropRule& r, std::string& err,
                const std::vector<std::string>& names) {
  const std::vector<std::string> parts = split(text, '@');
  const std::string v = parts[0].substr(std::char_traits<char>::length(kDrop));
  if (v.rfind("psn:", 0) != 0) {
    err = "bad drop '" + v +
          "' (drop=psn:P@host=H[@qpn=Q][@count=N]: host H loses the next N frames it "
          "receives with PSN P)";
    return false;
  }
  std::string rule = "psn=" + v.substr(4);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string key = parts[i].substr(0, parts[i].find('='));
    if (key != "host" && key != "qpn" && key != "count") {
      err = "drop takes host=, qpn= and count=, not '" + parts[i] + "'";
      return false;
    }
    rule += ";" + parts[i];
  }
  return r.parse(rule, err, names);
}

/** @brief A link-down time ("10us"); false with @p err naming it. */
bool link_time(const std::string& v, const char* which, uint64_t& ps, std::string& err) {
  if (duration(v, ps, kMaxLinkTimePs, true)) return true;
  err = std::string("bad ") + which + " '" + v +
        "' (a simulated time from the start of the run with its unit, ns, us, ms or s, up to an hour: 10us)";
  return false;
}

/** @brief The value of a link-down clause, "H@T1[..T2]", into @p l; @p err without the clause's name. */
bool parse_link_down(const std::string& v, LinkDownClause& l, std::string& err,
                     const std::vector<std::string>& names) {
  const size_t at = v.find('@');
  if (at == std::string::npos || at + 1 == v.size()) {
    err = "missing times (link-down=HOST@T1..T2: down from T1 to T2; HOST@T1: down from T1 on)";
    return false;
  }
  const std::string host = v.substr(0, at), times = v.substr(at + 1);
  if (!parse_rule_host(host, names, l.host)) {
    err = "bad host '" + host + "' (" +
          (names.empty()
               ? std::string("a host index")
               : names.front() + ".." + names.back() + ", or 0.." + std::to_string(names.size() - 1)) +
          ")";
    return false;
  }
  const size_t dots = times.find("..");
  if (!link_time(times.substr(0, dots), "down time", l.down_ps, err)) return false;
  if (dots == std::string::npos) return true;  // down for good
  if (!link_time(times.substr(dots + 2), "up time", l.up_ps, err)) return false;
  if (l.up_ps > l.down_ps) return true;
  err = "the link must come back after it goes down (T2 " + times.substr(dots + 2) +
        " is not later than T1 " + times.substr(0, dots) + ")";
  return false;
}

/** @brief Whether @p l's window overlaps one already in @p done for the same host. */
bool overlaps(const LinkDownClause& l, const std::vector<LinkDownClause>& done) {
  for (const LinkDownClause& o : done)
    if (o.host == l.host && l.down_ps < o.up_ps && o.down_ps < l.up_ps) return true;
  return false;
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
  link_downs.clear();
  drops.clear();
  if (spec.empty()) return true;
  // Items after a comma that are scopes continue the scoped clause before them (not a link-down:
  // its '@' names the times, and it takes no scope).
  std::vector<std::string> texts;
  for (const std::string& item : split(spec, ',')) {
    if (!texts.empty() && is_scope(item) && texts.back().find('@') != std::string::npos &&
        texts.back().rfind(kLinkDown, 0) != 0)
      texts.back() += "@" + item;
    else
      texts.push_back(item);
  }
  for (const std::string& text : texts) {
    if (parse_text(text, spec, err, host_names)) continue;
    clauses.clear();
    link_downs.clear();
    drops.clear();
    return false;
  }
  return true;
}

bool FaultSpec::parse_text(const std::string& text, const std::string& spec, std::string& err,
                           const std::vector<std::string>& host_names) {
  std::string why;
  if (text.empty()) {
    err = "empty clause in '" + spec + "' (clauses: " + kFaults +
          "; each but link-down and drop optionally @" + kScopes + ")";
    return false;
  }
  if (text.rfind(kLinkDown, 0) == 0) {
    LinkDownClause l;
    if (parse_link_down(text.substr(std::char_traits<char>::length(kLinkDown)), l, why, host_names)) {
      if (!overlaps(l, link_downs)) return link_downs.push_back(l), true;
      why = "overlaps an earlier link-down of the same host (one window after the other)";
    }
  } else if (text.rfind(kDrop, 0) == 0) {
    DropRule r;
    if (parse_drop(text, r, why, host_names)) return drops.push_back(r), true;
  } else {
    FaultClause c;
    if (parse_clause(text, c, why, host_names)) return clauses.push_back(c), true;
  }
  err = "clause '" + text + "': " + why;
  return false;
}

}  // namespace hcasim::sim
