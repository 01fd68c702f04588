// SPDX-License-Identifier: Apache-2.0
#include "text_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace hcasim::sim {

template <typename T>
static bool contains(const std::vector<T>& v, T x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

bool TraceFilter::keep(const model::TraceEvent& ev) const {
  return contains(hosts, ev.host) && (qpns.empty() || contains(qpns, ev.qpn)) && contains(units, ev.unit) &&
         contains(kinds, ev.kind);
}

bool TraceFilter::may_keep(model::TraceUnit u, model::TraceKind k) const {
  return contains(units, u) && contains(kinds, k);
}

bool TraceFilter::parse(const std::string& spec, std::string& err) {
  std::stringstream ss(spec);
  std::string clause;
  while (std::getline(ss, clause, ';')) {
    if (clause.empty()) continue;
    auto eq = clause.find('=');
    if (eq == std::string::npos) {
      err = "trace filter clause '" + clause + "' has no '='";
      return false;
    }
    const std::string key = clause.substr(0, eq);
    std::stringstream vs(clause.substr(eq + 1));
    std::string v;
    while (std::getline(vs, v, ',')) {
      if (key == "host") {
        hosts.push_back(uint32_t(std::strtoul(v.c_str(), nullptr, 0)));
      } else if (key == "qpn") {
        qpns.push_back(uint32_t(std::strtoul(v.c_str(), nullptr, 0)));
      } else if (key == "unit") {
        bool found = false;
        for (unsigned u = 0; u < unsigned(model::TraceUnit::Count); ++u)
          if (v == model::unit_name(model::TraceUnit(u))) {
            units.push_back(model::TraceUnit(u));
            found = true;
          }
        if (!found) {
          err = "unknown trace unit '" + v + "'";
          return false;
        }
      } else if (key == "kind") {
        bool found = false;
        for (unsigned k = 0; k < unsigned(model::TraceKind::Count); ++k)
          if (v == model::kind_name(model::TraceKind(k))) {
            kinds.push_back(model::TraceKind(k));
            found = true;
          }
        if (!found) {
          err = "unknown trace kind '" + v + "'";
          return false;
        }
      } else {
        err = "unknown trace filter field '" + key + "' (host, qpn, unit, kind)";
        return false;
      }
    }
  }
  return true;
}

const char* text_trace_header() {
  static char line[128];
  if (!line[0])
    snprintf(line, sizeof line, "# %16s  %-8s %-9s %-11s %-8s  %s\n", "sim time (ns)", "host", "unit",
             "event", "qpn", "facts");
  return line;
}

std::string format_trace_line(const model::TraceEvent& ev, const std::vector<std::string>& names) {
  char qpn[16] = "-";
  if (ev.qpn != model::kTraceNone) snprintf(qpn, sizeof qpn, "0x%06x", ev.qpn);
  const char* host = ev.host < names.size() ? names[ev.host].c_str() : "?";
  char wr[40] = "";
  if (ev.has_wr_id) snprintf(wr, sizeof wr, " [wr_id=%" PRIu64 "]", ev.wr_id);
  char head[96];
  snprintf(head, sizeof head, "%14" PRIu64 ".%03u  %-8s %-9s %-11s %-8s  ", ev.time_ps / 1000,
           unsigned(ev.time_ps % 1000), host, model::unit_name(ev.unit), model::kind_name(ev.kind), qpn);
  std::string line = head;
  line += ev.text;
  line += wr;
  line += '\n';
  return line;
}

TextTraceSink::TextTraceSink(FILE* out, bool own, std::vector<std::string> host_names)
    : out_(out), own_(own), names_(std::move(host_names)) {
  std::fputs(text_trace_header(), out_);
}

TextTraceSink::~TextTraceSink() { finish(); }

void TextTraceSink::finish() {
  if (done_) return;
  done_ = true;
  std::fflush(out_);
  if (own_) std::fclose(out_);
}

void TextTraceSink::record(const model::TraceEvent& ev) {
  if (done_ || !filter.keep(ev)) return;
  // Same layout as format_trace_line(), straight into the stream.
  char qpn[16] = "-";
  if (ev.qpn != model::kTraceNone) snprintf(qpn, sizeof qpn, "0x%06x", ev.qpn);
  const char* host = ev.host < names_.size() ? names_[ev.host].c_str() : "?";
  char wr[40] = "";
  if (ev.has_wr_id) snprintf(wr, sizeof wr, " [wr_id=%" PRIu64 "]", ev.wr_id);
  std::fprintf(out_, "%14" PRIu64 ".%03u  %-8s %-9s %-11s %-8s  %s%s\n", ev.time_ps / 1000,
               unsigned(ev.time_ps % 1000), host, model::unit_name(ev.unit), model::kind_name(ev.kind), qpn,
               ev.text.c_str(), wr);
}

}  // namespace hcasim::sim
