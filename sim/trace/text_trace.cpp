// SPDX-License-Identifier: Apache-2.0
#include "text_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace hcasim::sim {

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

TextTraceSink::TextTraceSink(FILE* out, bool own, std::vector<std::string> host_names,
                             const std::string& preamble)
    : out_(out), own_(own), names_(std::move(host_names)) {
  std::fputs(preamble.c_str(), out_);
  std::fputs(text_trace_header(), out_);
}

void TextTraceSink::note(const std::string& text) {
  if (!done_) std::fprintf(out_, "# %s\n", text.c_str());
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
