// SPDX-License-Identifier: Apache-2.0
#include "trace.h"

#include <systemc>

#include <cstdio>
#include <cstring>

#include "roce_packet.h"

namespace hcasim::model {

const char* unit_name(TraceUnit u) {
  static const char* const names[] = {"driver", "doorbell", "qpc",  "buftable", "wqefetch",
                                      "mr",     "dma",      "req",  "resp",     "port",
                                      "wire",   "cq",       "eq",   "cmd"};
  auto i = static_cast<unsigned>(u);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

const char* kind_name(TraceKind k) {
  static const char* const names[] = {
      "post",     "doorbell", "qpc.lookup", "bt.walk",  "wqe.fetch", "wqe.decode", "mr.xlate",
      "dma.read", "dma.write", "pkt.tx",    "pkt.rx",   "ack",       "nak",        "retransmit",
      "cqe.write", "cq.arm",  "event",      "eqe.write", "irq",      "qp.state",   "command",
      "error",    "note"};
  auto i = static_cast<unsigned>(k);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

namespace {

/** BTH opcode from the short name eth_port's describe_frame prints (wire::opcode_name). */
uint16_t opcode_from_name(const char* name) {
  for (unsigned op = 0; op < 0x20; ++op) {
    const auto o = wire::BthOpcode(op);
    if (wire::is_valid_opcode(o) && std::strcmp(wire::opcode_name(o), name) == 0) return uint16_t(op);
  }
  return 0xffff;
}

/** WORD present as a whole word (after a space; before a space, "(,:" or the end). */
bool has_word(const char* text, const char* word) {
  const size_t n = std::strlen(word);
  for (const char* p = std::strstr(text, word); p; p = std::strstr(p + 1, word)) {
    const char c = p[n];
    if (p > text && p[-1] == ' ' && (c == 0 || c == ' ' || c == '(' || c == ',' || c == ':')) return true;
  }
  return false;
}

bool scan_after(const char* text, const char* marker, const char* fmt, uint32_t* a, uint32_t* b = nullptr) {
  const char* p = std::strstr(text, marker);
  if (!p) return false;
  p += std::strlen(marker);
  return b ? std::sscanf(p, fmt, a, b) == 2 : std::sscanf(p, fmt, a) == 1;
}

}  // namespace

void derive_trace_fields(TraceEvent& ev) {
  TraceFields& f = ev.f;
  const char* t = ev.text.c_str();
  switch (ev.kind) {
    case TraceKind::Post:
      if (ev.unit != TraceUnit::Driver) return;
      if (scan_after(t, "-> SQ WQE ", "%u (%u", &f.wqe, &f.count)) {
        if (has_word(t, "signaled")) f.flags |= kTfSignaled;
        if (has_word(t, "solicited")) f.flags |= kTfSolicited;
      } else if (scan_after(t, "-> RQ WQE ", "%u", &f.wqe)) {
        f.flags |= kTfRq;
      }
      return;
    case TraceKind::WqeFetch:
      if (std::strncmp(t, "SQ WQE ", 7) == 0) {
        std::sscanf(t + 7, "%u (%u", &f.wqe, &f.count);
        if (has_word(t, "signaled")) f.flags |= kTfSignaled;
      } else if (std::strncmp(t, "RQ WQE ", 7) == 0) {
        std::sscanf(t + 7, "%u", &f.wqe);
        f.flags |= kTfRq;
      }
      return;
    case TraceKind::WqeDecode:  // "WQE 1 RDMA_WRITE_WITH_IMM: 3 packet(s) at MTU 1024, PSN 1003..1005"
      std::sscanf(t, "WQE %u", &f.wqe);
      scan_after(t, ": ", "%u packet", &f.count);
      scan_after(t, "PSN ", "%u..%u", &f.psn, &f.psn_last);
      return;
    case TraceKind::PktTx:
    case TraceKind::PktRx:
      if (ev.unit == TraceUnit::Requester) {  // "WQE 1: start RDMA_WRITE_WITH_IMM to qp 0x11, first PSN 1003"
        std::sscanf(t, "WQE %u", &f.wqe);
        scan_after(t, " to qp ", "%x", &f.peer_qpn);
        scan_after(t, "first PSN ", "%u", &f.psn);
      } else if (ev.unit == TraceUnit::Port) {
        // "TX WRITE_FIRST      psn=1003     dqp=0x000011 payload=1024  RETH[...] (1098 B on wire)"
        char name[32];
        uint32_t payload = 0;
        if (std::sscanf(t, "%*2s %31s psn=%u dqp=%x payload=%u", name, &f.psn, &f.peer_qpn, &payload) == 4) {
          f.opcode = opcode_from_name(name);
          if (has_word(t, "SE")) f.flags |= kTfSe;
          if (has_word(t, "AckReq")) f.flags |= kTfAckReq;
          const char* w = std::strrchr(t, '(');
          if (w) std::sscanf(w, "(%u B on wire)", &f.count);
        }
      }
      return;
    case TraceKind::Ack:
    case TraceKind::Nak:
      scan_after(t, "psn=", "%u", &f.psn) || scan_after(t, "got ", "%u", &f.psn);
      return;
    case TraceKind::Retransmit:  // "go back to PSN 1004 (WQE 1, packet 1)"
      scan_after(t, "PSN ", "%u", &f.psn);
      scan_after(t, "(WQE ", "%u", &f.wqe);
      return;
    default:
      return;
  }
}

void Tracer::vemit(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id,
                   const TraceFields* f, const char* fmt, va_list ap) {
  if (!sink_->wants(unit, kind)) return;  // direct emit() callers (the driver's lines)
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  TraceEvent ev;
  ev.time_ps = sc_core::sc_time_stamp().value();
  ev.host = host_;
  ev.unit = unit;
  ev.kind = kind;
  ev.qpn = qpn;
  ev.has_wr_id = has_wr;
  ev.wr_id = wr_id;
  ev.text = buf;
  if (f)
    ev.f = *f;
  else
    derive_trace_fields(ev);
  sink_->record(ev);
}

void Tracer::emit(TraceUnit unit, TraceKind kind, uint32_t qpn, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(unit, kind, qpn, false, 0, nullptr, fmt, ap);
  va_end(ap);
}

void Tracer::emit_wr(TraceUnit unit, TraceKind kind, uint32_t qpn, uint64_t wr_id, const char* fmt,
                     ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(unit, kind, qpn, true, wr_id, nullptr, fmt, ap);
  va_end(ap);
}

void Tracer::emit_f(TraceUnit unit, TraceKind kind, uint32_t qpn, const TraceFields& f, const char* fmt,
                    ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(unit, kind, qpn, false, 0, &f, fmt, ap);
  va_end(ap);
}

}  // namespace hcasim::model
