// SPDX-License-Identifier: Apache-2.0
#include "trace_filter.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace hcasim::sim {
namespace {

template <typename T>
bool contains(const std::vector<T>& v, T x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

/** A whole number (decimal, or hex with 0x) no larger than @p max. */
bool parse_number(const std::string& s, uint64_t max, uint32_t& out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (errno || *end || v > max) return false;
  out = uint32_t(v);
  return true;
}

/** Short words for kinds (also step mode's `next WORD`). */
struct KindWord {
  const char* word;
  std::vector<model::TraceKind> kinds;
  std::vector<model::TraceUnit> units;  ///< also restricts the units (pkt: frames on a port)
};
const std::vector<KindWord>& kind_word_table() {
  using K = model::TraceKind;
  static const std::vector<KindWord> t = {{"cqe", {K::CqeWrite}, {}},
                                          {"eqe", {K::EqeWrite}, {}},
                                          {"arm", {K::CqArm}, {}},
                                          {"db", {K::Doorbell}, {}},
                                          {"pkt", {K::PktTx, K::PktRx}, {model::TraceUnit::Port}},
                                          {"packet", {K::PktTx, K::PktRx}, {model::TraceUnit::Port}}};
  return t;
}

bool parse_host(const std::string& v, const std::vector<std::string>& names, TraceFilter& f,
                std::string& err) {
  for (uint32_t i = 0; i < names.size(); ++i)
    if (v == names[i]) return f.hosts.push_back(i), true;
  uint32_t i = 0;
  if (parse_number(v, names.empty() ? 0xffffffffu : names.size() - 1, i)) return f.hosts.push_back(i), true;
  err = "no host '" + v + "'";
  if (!names.empty())
    err += " in this run (" + names.front() + ".." + names.back() + ", or 0.." +
           std::to_string(names.size() - 1) + ")";
  return false;
}

bool parse_unit(const std::string& v, TraceFilter& f, std::string& err) {
  for (unsigned u = 0; u < unsigned(model::TraceUnit::Count); ++u)
    if (v == model::unit_name(model::TraceUnit(u))) return f.units.push_back(model::TraceUnit(u)), true;
  err = "unknown trace unit '" + v + "' (units: " + trace_unit_names() + ")";
  return false;
}

bool parse_kind(const std::string& v, TraceFilter& f, std::string& err) {
  for (unsigned k = 0; k < unsigned(model::TraceKind::Count); ++k)
    if (v == model::kind_name(model::TraceKind(k))) return f.kinds.push_back(model::TraceKind(k)), true;
  for (const KindWord& w : kind_word_table())
    if (v == w.word) {
      f.kinds.insert(f.kinds.end(), w.kinds.begin(), w.kinds.end());
      f.units.insert(f.units.end(), w.units.begin(), w.units.end());
      return true;
    }
  err = "unknown trace kind '" + v + "' (kinds: " + trace_kind_names() + "; or " + TraceFilter::kind_words() +
        ")";
  return false;
}

}  // namespace

std::string trace_unit_names() {
  std::string s;
  for (unsigned u = 0; u < unsigned(model::TraceUnit::Count); ++u)
    s += (u ? ", " : "") + std::string(model::unit_name(model::TraceUnit(u)));
  return s;
}

std::string trace_kind_names() {
  std::string s;
  for (unsigned k = 0; k < unsigned(model::TraceKind::Count); ++k)
    s += (k ? ", " : "") + std::string(model::kind_name(model::TraceKind(k)));
  return s;
}

const char* TraceFilter::kind_words() {
  return "cqe = cqe.write, eqe = eqe.write, arm = cq.arm, db = doorbell, pkt = a frame on a port "
         "(unit port, pkt.tx and pkt.rx)";
}

bool TraceFilter::keep(const model::TraceEvent& ev) const {
  const bool qp = qpns.empty() || contains(qpns, ev.qpn) ||
                  ((ev.kind == model::TraceKind::PktTx || ev.kind == model::TraceKind::PktRx) &&
                   contains(qpns, ev.f.peer_qpn));
  return qp && contains(hosts, ev.host) && contains(units, ev.unit) && contains(kinds, ev.kind);
}

bool TraceFilter::may_keep(model::TraceUnit u, model::TraceKind k) const {
  return contains(units, u) && contains(kinds, k);
}

bool TraceFilter::parse(const std::string& spec, std::string& err,
                        const std::vector<std::string>& host_names) {
  std::stringstream ss(spec);
  std::string clause;
  while (std::getline(ss, clause, ';')) {
    if (clause.empty()) continue;
    const auto eq = clause.find('=');
    if (eq == std::string::npos) {
      err = "clause '" + clause + "' has no '=' (host=..., qpn=..., unit=..., kind=...)";
      return false;
    }
    const std::string key = clause.substr(0, eq);
    if (key != "host" && key != "qpn" && key != "unit" && key != "kind") {
      err = "unknown field '" + key + "' (host, qpn, unit, kind)";
      return false;
    }
    std::stringstream vs(clause.substr(eq + 1));
    std::string v;
    bool any = false;
    while (std::getline(vs, v, ',')) {
      any = true;
      uint32_t qpn = 0;
      bool ok = true;
      if (key == "host") ok = parse_host(v, host_names, *this, err);
      if (key == "unit") ok = parse_unit(v, *this, err);
      if (key == "kind") ok = parse_kind(v, *this, err);
      if (key == "qpn" && !(ok = parse_number(v, 0xffffff, qpn)))
        err = "qpn '" + v + "' is not a 24-bit number";
      if (key == "qpn" && ok) qpns.push_back(qpn);
      if (!ok) return false;
    }
    if (!any) {
      err = "field '" + key + "' has no value";
      return false;
    }
  }
  return true;
}

}  // namespace hcasim::sim
