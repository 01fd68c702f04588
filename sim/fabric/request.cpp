// SPDX-License-Identifier: Apache-2.0
#include "request.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hcasim::fabric {
namespace {

constexpr const char* kTypeNames[] = {"HELLO", "ATTACH",        "COMMAND",       "DOORBELL", "MAP",
                                      "UNMAP", "WAIT",          "TRACE",         "CONTROL",  "STATUS",
                                      "STOP",  "DOORBELL_SYNC", "DOORBELL_IRQS", "LEAVING",  "WAKE"};
constexpr uint32_t kLastType = uint32_t(MsgType::Wake);

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char b[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  return b;
}

/** The payload size a type must have exactly (TRACE: at least, then its text). */
size_t payload_size(MsgType t) {
  switch (t) {
    case MsgType::Hello: return sizeof(HelloMsg);
    case MsgType::Attach: return sizeof(AttachMsg);
    case MsgType::Command: return sizeof(CommandMsg);
    case MsgType::Doorbell:
    case MsgType::DoorbellSync:
    case MsgType::DoorbellIrqs: return sizeof(DoorbellMsg);
    case MsgType::Map:
    case MsgType::Unmap: return sizeof(MapMsg);
    case MsgType::Trace: return sizeof(TraceMsg);
    case MsgType::Control: return sizeof(ControlMsg);
    case MsgType::Wait: return sizeof(WaitMsg);
    default: return 0;  // STATUS, STOP, LEAVING, WAKE
  }
}

bool is_doorbell(MsgType t) {
  return t == MsgType::Doorbell || t == MsgType::DoorbellSync || t == MsgType::DoorbellIrqs;
}

/** When @p t may come on a connection in state @p c; empty if now. */
std::string check_moment(MsgType t, const ConnState& c) {
  const std::string name = type_name(t);
  switch (t) {
    case MsgType::Hello:
    case MsgType::Attach:
      return c.host < 0 ? "" : format("%s on a connection that is host %d's already", name.c_str(), c.host);
    case MsgType::Status:
    case MsgType::Control: return "";
    case MsgType::Stop:
      return c.host < 0
                 ? ""
                 : format("STOP on host %d's connection (only `hcasim fabric stop` stops a fabric)", c.host);
    case MsgType::Leaving:
      if (!c.life) return "LEAVING outside the host's HELLO connection";
      return "";
    default: return c.host >= 0 ? "" : name + " before HELLO/ATTACH";
  }
}

std::string check_doorbell(const DoorbellMsg& d, MsgType t, const ConnState& c) {
  if (d.offset >= hw::kUarPageSize || d.offset % 8)
    return format("%s at UAR offset 0x%x: outside the HCA's UAR page (%u bytes, 8-byte registers)",
                  type_name(t).c_str(), d.offset, hw::kUarPageSize);
  if (!hw::is_sq_doorbell(d.offset)) return "";
  // QPNs carry their HCA's index (CommandUnit::qpn_base): one of another HCA is another host's.
  const uint32_t qpn = hw::sq_doorbell_qpn(d.value), own = c.first_hca + d.hca;
  // The GSI QP is number 1 on every HCA (its doorbell goes to the UAR of the HCA it names).
  if (qpn == hw::kGsiQpn || ((qpn >> 16) & 0xff) == (own & 0xff)) return "";
  return format("SQ doorbell names QPN 0x%06x, a QP of hcasim%u, not of this host's hcasim%u", qpn,
                (qpn >> 16) & 0xff, own);
}

std::string check_map(const MapMsg& m, MsgType t) {
  if (t == MsgType::Unmap) return "";
  if (m.len == 0) return format("MAP of 0 bytes at IOVA 0x%" PRIx64, m.iova);
  if (m.iova + m.len < m.iova || m.hva + m.len < m.hva)
    return format("MAP of 0x%" PRIx64 " bytes at IOVA 0x%" PRIx64 " from address 0x%" PRIx64
                  ": the range wraps around the address space",
                  m.len, m.iova, m.hva);
  return "";
}

std::string check_trace(const TraceMsg& m, size_t text_len) {
  if (text_len > kMaxTraceText)
    return format("TRACE with %zu bytes of text (at most %zu)", text_len, kMaxTraceText);
  // The kinds a driver traces: posts, interrupts, notes (a core hand-off), errors (events
  // never acknowledged, a CQ armed in vain).
  if (m.kind != trace::TraceKind::Post && m.kind != trace::TraceKind::Interrupt &&
      m.kind != trace::TraceKind::Note && m.kind != trace::TraceKind::Error)
    return format("TRACE of kind %u (a driver traces posts, interrupts, notes and errors only)",
                  unsigned(m.kind));
  return "";
}

/** The payload's fields, decoded into @p out and checked. */
std::string decode(MsgType t, const uint8_t* p, size_t len, const ConnState& c, Request& out) {
  auto take = [&](auto& x) { std::memcpy(&x, p, sizeof x); };
  switch (t) {
    case MsgType::Hello: take(out.hello); break;
    case MsgType::Attach: take(out.attach); break;
    case MsgType::Command: take(out.command); break;
    case MsgType::Doorbell:
    case MsgType::DoorbellSync:
    case MsgType::DoorbellIrqs: take(out.doorbell); break;
    case MsgType::Map:
    case MsgType::Unmap: take(out.map); break;
    case MsgType::Trace:
      take(out.trace);
      out.text = reinterpret_cast<const char*>(p) + sizeof out.trace;
      out.text_len = len - sizeof out.trace;
      break;
    case MsgType::Control: take(out.control); break;
    case MsgType::Wait: take(out.wait); break;
    default: break;
  }
  const uint32_t hca = out.hca();
  if (hca >= c.n_hcas)
    return format("%s for HCA %u: host %d has %u HCA(s), 0..%u", type_name(t).c_str(), hca, c.host, c.n_hcas,
                  c.n_hcas - 1);
  if (is_doorbell(t)) return check_doorbell(out.doorbell, t, c);
  if (t == MsgType::Map || t == MsgType::Unmap) return check_map(out.map, t);
  if (t == MsgType::Trace) return check_trace(out.trace, out.text_len);
  if (t == MsgType::Control && (uint32_t(out.control.op) < 1 || uint32_t(out.control.op) > 4))
    return format("CONTROL with unknown operation %u", unsigned(out.control.op));
  return "";
}

}  // namespace

uint32_t Request::hca() const {
  switch (type) {
    case MsgType::Command: return command.hca;
    case MsgType::Doorbell:
    case MsgType::DoorbellSync:
    case MsgType::DoorbellIrqs: return doorbell.hca;
    case MsgType::Map:
    case MsgType::Unmap: return map.hca;
    case MsgType::Trace: return trace.hca;
    default: return 0;
  }
}

std::string type_name(MsgType type) {
  const uint32_t t = uint32_t(type);
  return t >= 1 && t <= kLastType ? kTypeNames[t - 1] : "unknown type " + std::to_string(t);
}

std::string check_request(const MsgHeader& h, const uint8_t* p, uint32_t nfds, const ConnState& c,
                          Request& out) {
  out = Request{};
  out.type = h.type;
  const uint32_t t = uint32_t(h.type);
  if (t < 1 || t > kLastType) return format("a message of unknown type %u (%u bytes)", t, h.len);
  const std::string name = type_name(h.type);
  if (nfds && h.type != MsgType::Hello)
    return format("%u descriptor(s) passed with %s (only HELLO passes any)", nfds, name.c_str());
  const size_t want = payload_size(h.type);
  if (h.type == MsgType::Trace ? h.len < want : h.len != want)
    return format("%s with %u payload bytes, expected %s%zu", name.c_str(), h.len,
                  h.type == MsgType::Trace ? "at least " : "", want);
  std::string why = check_moment(h.type, c);
  if (!why.empty()) return why;
  return decode(h.type, p, h.len, c, out);
}

}  // namespace hcasim::fabric
