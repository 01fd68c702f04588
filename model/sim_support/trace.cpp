// SPDX-License-Identifier: Apache-2.0
#include "trace.h"

#include <systemc>

#include <cstdio>

namespace hcasim::model {

void Tracer::vemit(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id,
                   const TraceFields& f, const char* fmt, va_list ap) {
  if (!sink_->wants(unit, kind)) return;
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  record(unit, kind, qpn, has_wr, wr_id, f, buf);
}

void Tracer::record(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id,
                    const TraceFields& f, std::string text) {
  if (!sink_->wants(unit, kind)) return;  // direct callers (the driver's lines)
  TraceEvent ev;
  ev.time_ps = sc_core::sc_time_stamp().value();
  ev.host = host_;
  ev.unit = unit;
  ev.kind = kind;
  ev.qpn = qpn;
  ev.has_wr_id = has_wr;
  ev.wr_id = wr_id;
  ev.f = f;
  ev.text = std::move(text);
  sink_->record(ev);
}

void Tracer::emit(TraceUnit unit, TraceKind kind, uint32_t qpn, const TraceFields& f, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(unit, kind, qpn, false, 0, f, fmt, ap);
  va_end(ap);
}

void Tracer::emit_wr(TraceUnit unit, TraceKind kind, uint32_t qpn, uint64_t wr_id, const TraceFields& f,
                     const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(unit, kind, qpn, true, wr_id, f, fmt, ap);
  va_end(ap);
}

}  // namespace hcasim::model
