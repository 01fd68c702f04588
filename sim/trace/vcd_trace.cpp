// SPDX-License-Identifier: Apache-2.0
#include "vcd_trace.h"

#include <cinttypes>
#include <cstring>

namespace hcasim::sim {

using model::kTraceNone;
using model::TraceEvent;
using model::TraceKind;
using model::TraceUnit;

namespace {

/** VCD identifier codes: printable ASCII 33..126, base 94. */
std::string id_code(size_t n) {
  std::string s;
  do {
    s += char(33 + n % 94);
    n /= 94;
  } while (n);
  return s;
}

std::string qp_scope(uint32_t qpn) {
  char b[24];
  snprintf(b, sizeof b, "qp_0x%06x", qpn);
  return b;
}

}  // namespace

VcdSink::VcdSink(const std::string& path, std::vector<std::string> host_names,
                 std::function<uint64_t(uint32_t)> wire_ps, uint64_t strobe_ps)
    : path_(path),
      names_(std::move(host_names)),
      wire_ps_(std::move(wire_ps)),
      strobe_ps_(strobe_ps ? strobe_ps : 1) {
  out_ = std::fopen(path.c_str(), "w");
  body_ = std::tmpfile();
}

VcdSink::~VcdSink() { finish(); }

std::string VcdSink::host_name(uint32_t host) const {
  return host < names_.size() ? names_[host] : "host" + std::to_string(host);
}

int VcdSink::var(uint32_t host, const std::string& sub, const char* name, unsigned width, bool pulse) {
  std::string scope = host_name(host);
  if (!sub.empty()) scope += "." + sub;
  const std::string full = scope + "." + name;
  auto it = by_name_.find(full);
  if (it != by_name_.end()) return it->second;
  Var v;
  v.scope = scope;
  v.name = name;
  v.width = width;
  v.code = id_code(vars_.size());
  v.pulse = pulse;
  v.known = pulse;  // strobes and busy lines start at 0; counters are unknown until seen
  vars_.push_back(v);
  by_name_.emplace(full, int(vars_.size() - 1));
  return int(vars_.size() - 1);
}

void VcdSink::at(uint64_t t) {
  if (t != written_) {
    std::fprintf(body_, "#%" PRIu64 "\n", t);
    written_ = t;
  }
}

void VcdSink::set(int i, uint64_t value) {
  Var& v = vars_[size_t(i)];
  if (v.width < 64) value &= (uint64_t(1) << v.width) - 1;
  if (v.known && v.value == value) return;
  v.known = true;
  v.value = value;
  at(now_);
  if (v.width == 1) {
    std::fprintf(body_, "%c%s\n", value ? '1' : '0', v.code.c_str());
  } else {
    char bits[72];
    int n = 0;
    for (int b = int(v.width) - 1; b >= 0; --b)
      if (n || ((value >> b) & 1) || b == 0) bits[n++] = char('0' + ((value >> b) & 1));
    bits[n] = 0;
    std::fprintf(body_, "b%s %s\n", bits, v.code.c_str());
  }
}

void VcdSink::pulse(int i, uint64_t width_ps) {
  Var& v = vars_[size_t(i)];
  const uint64_t until = now_ + (width_ps ? width_ps : 1);
  if (until > v.until) {
    v.until = until;
    falls_.emplace(until, i);
  }
  set(i, 1);
}

void VcdSink::flush_falls(uint64_t before, bool inclusive) {
  while (!falls_.empty()) {
    auto it = falls_.begin();
    if (!(it->first < before || (inclusive && it->first == before))) break;
    const uint64_t t = it->first;
    const int i = it->second;
    falls_.erase(it);
    Var& v = vars_[size_t(i)];
    if (v.until != t) continue;  // extended by a later pulse
    const uint64_t saved = now_;
    now_ = t;
    set(i, 0);
    now_ = saved;
  }
}

bool VcdSink::wants(TraceUnit u, TraceKind k) const {
  switch (k) {
    case TraceKind::Post: return u == TraceUnit::Driver;
    case TraceKind::PktTx:
    case TraceKind::PktRx: return u == TraceUnit::Port;
    case TraceKind::Interrupt: return u == TraceUnit::Eq;
    case TraceKind::Doorbell:
    case TraceKind::WqeFetch:
    case TraceKind::CqeWrite:
    case TraceKind::CqArm:
    case TraceKind::EventDecision:
    case TraceKind::EqeWrite: return true;
    default: return false;
  }
}

void VcdSink::record(const TraceEvent& ev) {
  if (done_ || !ok()) return;
  // Falls due strictly before this event (one due exactly now is cancelled if the event
  // re-raises the line: back-to-back frames keep tx_busy high).
  flush_falls(ev.time_ps, false);
  if (ev.time_ps > now_) now_ = ev.time_ps;
  const model::TraceFields& f = ev.f;
  const uint32_t h = ev.host;
  switch (ev.kind) {
    case TraceKind::Post:
      if (ev.unit != TraceUnit::Driver || ev.qpn == kTraceNone || f.wqe == kTraceNone) return;
      if (f.flags & model::kTfRq)
        set(var(h, qp_scope(ev.qpn), "rq_pi", 16, false), f.wqe + 1);
      else
        set(var(h, qp_scope(ev.qpn), "sq_posted", 16, false), f.wqe + (f.count == kTraceNone ? 1 : f.count));
      return;
    case TraceKind::Doorbell:
      if (ev.qpn != kTraceNone) {
        pulse(var(h, "", "sq_doorbell", 1, true), strobe_ps_);
        if (f.index != kTraceNone) set(var(h, qp_scope(ev.qpn), "sq_pi", 16, false), f.index);
      } else if (f.queue != kTraceNone && (f.flags & model::kTfEq)) {
        pulse(var(h, "", "eq_arm_doorbell", 1, true), strobe_ps_);
        if (f.index != kTraceNone) set(var(h, "eq_" + std::to_string(f.queue), "ci", 24, false), f.index);
      } else if (f.queue != kTraceNone) {
        pulse(var(h, "", "cq_arm_doorbell", 1, true), strobe_ps_);
      }
      return;
    case TraceKind::WqeFetch:
      if (ev.qpn == kTraceNone || f.wqe == kTraceNone) return;
      if (f.flags & model::kTfRq)
        set(var(h, qp_scope(ev.qpn), "rq_ci", 16, false), f.wqe + 1);
      else
        set(var(h, qp_scope(ev.qpn), "sq_ci", 16, false), f.wqe + (f.count == kTraceNone ? 1 : f.count));
      return;
    case TraceKind::PktTx:
      if (ev.unit != TraceUnit::Port) return;
      pulse(var(h, "port", "tx_busy", 1, true),
            wire_ps_ && f.count != kTraceNone ? wire_ps_(f.count) : strobe_ps_);
      if (f.opcode != model::kTraceNone16) set(var(h, "port", "tx_opcode", 8, false), f.opcode);
      if (f.psn != kTraceNone) set(var(h, "port", "tx_psn", 24, false), f.psn);
      return;
    case TraceKind::PktRx:
      if (ev.unit == TraceUnit::Port) pulse(var(h, "port", "rx_frame", 1, true), strobe_ps_);
      return;
    case TraceKind::CqeWrite:
      if (f.queue == kTraceNone) return;
      if (f.index != kTraceNone) set(var(h, "cq_" + std::to_string(f.queue), "pi", 24, false), f.index);
      return;
    case TraceKind::CqArm:
    case TraceKind::EventDecision: {
      if (f.queue == kTraceNone) return;
      const std::string cq = "cq_" + std::to_string(f.queue);
      if (ev.kind == TraceKind::CqArm && f.index != kTraceNone) set(var(h, cq, "ci", 24, false), f.index);
      unsigned armed = (f.flags & model::kTfArmed) ? ((f.flags & model::kTfArmSolicited) ? 2 : 1) : 0;
      if (f.flags & model::kTfEvent) {
        pulse(var(h, cq, "event", 1, true), strobe_ps_);
        armed = 0;  // one-shot: the event disarms the CQ
      }
      set(var(h, cq, "armed", 2, false), armed);
      return;
    }
    case TraceKind::EqeWrite:
      if (f.queue != kTraceNone && f.index != kTraceNone)
        set(var(h, "eq_" + std::to_string(f.queue), "pi", 24, false), f.index);
      return;
    case TraceKind::Interrupt:
      if (ev.unit == TraceUnit::Eq && f.queue != kTraceNone)
        pulse(var(h, "", ("msix" + std::to_string(f.queue)).c_str(), 1, true), strobe_ps_);
      return;
    default: return;
  }
}

void VcdSink::finish() {
  if (done_) return;
  done_ = true;
  if (!ok()) {
    if (out_) std::fclose(out_);
    if (body_) std::fclose(body_);
    out_ = body_ = nullptr;
    return;
  }
  flush_falls(~0ull, true);
  FILE* o = out_;
  std::fprintf(o,
               "$version hcasim (simulated HCA signals from the trace) $end\n"
               "$comment time is simulated time (clock %s); strobes are 1 for a fixed width $end\n"
               "$timescale 1ps $end\n",
               time_model_.c_str());
  // Declarations: the host modules, then their sub-modules, both sorted by name.
  std::map<std::string, std::vector<int>> by_scope;
  for (size_t i = 0; i < vars_.size(); ++i) by_scope[vars_[i].scope].push_back(int(i));
  std::string open_host;
  for (auto& [scope, list] : by_scope) {
    const size_t dot = scope.find('.');
    const std::string host = scope.substr(0, dot);
    if (host != open_host) {
      if (!open_host.empty()) std::fputs("$upscope $end\n", o);
      std::fprintf(o, "$scope module %s $end\n", host.c_str());
      open_host = host;
    }
    if (dot != std::string::npos) std::fprintf(o, "$scope module %s $end\n", scope.c_str() + dot + 1);
    for (int i : list) {
      const Var& v = vars_[size_t(i)];
      if (v.width == 1)
        std::fprintf(o, "$var wire 1 %s %s $end\n", v.code.c_str(), v.name.c_str());
      else
        std::fprintf(o, "$var wire %u %s %s [%u:0] $end\n", v.width, v.code.c_str(), v.name.c_str(),
                     v.width - 1);
    }
    if (dot != std::string::npos) std::fputs("$upscope $end\n", o);
  }
  if (!open_host.empty()) std::fputs("$upscope $end\n", o);
  std::fputs("$enddefinitions $end\n#0\n$dumpvars\n", o);
  for (const Var& v : vars_) {
    if (v.width == 1)
      std::fprintf(o, "%c%s\n", v.pulse ? '0' : 'x', v.code.c_str());
    else
      std::fprintf(o, "b%s %s\n", v.pulse ? "0" : "x", v.code.c_str());
  }
  std::fputs("$end\n", o);
  std::rewind(body_);
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, body_)) > 0) std::fwrite(buf, 1, n, o);
  std::fclose(body_);
  std::fclose(o);
  out_ = body_ = nullptr;
}

}  // namespace hcasim::sim
