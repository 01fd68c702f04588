// SPDX-License-Identifier: Apache-2.0
#include "drop_rule.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace hcasim::sim {

bool parse_rule_number(const std::string& s, uint64_t max, uint32_t& out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (errno || *end || v > max) return false;
  out = uint32_t(v);
  return true;
}

bool parse_rule_host(const std::string& v, const std::vector<std::string>& names, uint32_t& out) {
  for (uint32_t i = 0; i < names.size(); ++i)
    if (v == names[i]) return out = i, true;
  return parse_rule_number(v, names.empty() ? 0xffffffffu : names.size() - 1, out);
}

bool DropRule::parse(const std::string& spec, std::string& err, const std::vector<std::string>& host_names) {
  std::stringstream ss(spec);
  std::string clause;
  bool have_host = false;
  while (std::getline(ss, clause, ';')) {
    if (clause.empty()) continue;
    const auto eq = clause.find('=');
    const std::string key = clause.substr(0, eq), v = eq == std::string::npos ? "" : clause.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (key == "host")
      ok = ok && parse_rule_host(v, host_names, host), have_host = true;
    else if (key == "psn")
      ok = ok && parse_rule_number(v, 0xffffff, psn);
    else if (key == "qpn")
      ok = ok && parse_rule_number(v, 0xffffff, qpn);
    else if (key == "count")
      ok = ok && parse_rule_number(v, 1000000, count) && count > 0;
    else {
      err = "unknown field '" + key + "' in '" + spec + "' (host, psn, qpn, count)";
      return false;
    }
    if (!ok) {
      err = "bad " + key + " '" + v + "' in '" + spec + "'";
      if (key == "host" && !host_names.empty())
        err += " (" + host_names.front() + ".." + host_names.back() + ", or 0.." +
               std::to_string(host_names.size() - 1) + ")";
      if (key == "psn" || key == "qpn") err += " (a 24-bit number)";
      if (key == "count") err += " (1..1000000)";
      return false;
    }
  }
  if (!have_host)
    err = "'" + spec + "' names no host (host=NAME or host=INDEX: the host that loses the frame)";
  return have_host;
}

bool parse_drop_rules(const std::string& list, std::vector<DropRule>& out, std::string& err,
                      const std::vector<std::string>& host_names) {
  std::stringstream ss(list);
  std::string one;
  while (std::getline(ss, one, '|')) {
    if (one.empty()) continue;
    DropRule r;
    if (!r.parse(one, err, host_names)) return false;
    out.push_back(r);
  }
  return true;
}

}  // namespace hcasim::sim
