// SPDX-License-Identifier: Apache-2.0
#include "timeline_trace.h"

#include <cinttypes>
#include <cstring>

#include "roce_packet.h"

namespace hcasim::sim {

using model::kTraceNone;
using model::TraceEvent;
using model::TraceKind;
using model::TraceUnit;

void json_escape(std::string& out, const char* s) {
  for (; *s; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += char(c);
        }
    }
  }
}

namespace {

constexpr unsigned kUnits = unsigned(TraceUnit::Count);

/** "12.345678" microseconds from picoseconds, exactly. */
void append_us(std::string& out, uint64_t ps) {
  char b[40];
  snprintf(b, sizeof b, "%" PRIu64 ".%06" PRIu64, ps / 1000000, ps % 1000000);
  out += b;
}

bool psn_in(uint32_t psn, uint32_t first, uint32_t last) {
  if (psn == kTraceNone || first == kTraceNone || last == kTraceNone) return false;
  return wire::psn_diff(psn, first) >= 0 && wire::psn_diff(last, psn) >= 0;
}

}  // namespace

TimelineSink::TimelineSink(FILE* out, bool own, std::vector<std::string> host_names,
                           std::function<uint64_t(uint32_t)> wire_ps, const std::string& time_model)
    : out_(out),
      own_(own),
      names_(std::move(host_names)),
      wire_ps_(std::move(wire_ps)),
      seen_proc_(names_.size()),
      seen_thread_(names_.size() * kUnits) {
  std::fprintf(out_,
               "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"generator\":\"hcasim\",\"clock\":\"simulated "
               "time\",\"time_model\":\"%s\"},\n\"traceEvents\":[\n",
               time_model.c_str());
}

TimelineSink::~TimelineSink() { finish(); }

void TimelineSink::finish() {
  if (done_) return;
  done_ = true;
  std::fputs("\n]}\n", out_);
  std::fflush(out_);
  if (own_) std::fclose(out_);
}

void TimelineSink::meta(uint32_t host, TraceUnit unit) {
  if (host >= names_.size()) {  // a host the sink was not told about: grow
    names_.resize(host + 1);
    seen_proc_.resize(host + 1);
    seen_thread_.resize((host + 1) * kUnits);
  }
  std::string s;
  const unsigned pid = host + 1, tid = unsigned(unit) + 1;
  if (!seen_proc_[host]) {
    seen_proc_[host] = true;
    const std::string name = names_[host].empty() ? "host" + std::to_string(host) : names_[host];
    char b[256];
    snprintf(b, sizeof b,
             "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":\"%s\"}},\n"
             "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"args\":{\"sort_index\":%u}}",
             first_ ? "" : ",\n", pid, name.c_str(), pid, pid);
    s += b;
    first_ = false;
  }
  const size_t ti = size_t(host) * kUnits + unsigned(unit);
  if (!seen_thread_[ti]) {
    seen_thread_[ti] = true;
    char b[256];
    snprintf(
        b, sizeof b,
        "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"%s\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
        first_ ? "" : ",\n", pid, tid, model::unit_name(unit), pid, tid, tid);
    s += b;
    first_ = false;
  }
  if (!s.empty()) std::fputs(s.c_str(), out_);
}

void TimelineSink::slice(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  // Name: packets by direction and opcode, everything else by kind.
  std::string name;
  if (ev.unit == TraceUnit::Port && (ev.kind == TraceKind::PktTx || ev.kind == TraceKind::PktRx) &&
      f.opcode != model::kTraceNone16) {
    name = ev.kind == TraceKind::PktTx ? "TX " : "RX ";
    name += wire::opcode_name(wire::BthOpcode(f.opcode));
  } else if (ev.kind == TraceKind::Post && ev.unit == TraceUnit::Driver) {
    name = (f.flags & model::kTfRq) ? "post_recv" : f.wqe != kTraceNone ? "post_send" : "post";
  } else {
    name = model::kind_name(ev.kind);
  }
  uint64_t dur = 0;
  if (ev.unit == TraceUnit::Port && ev.kind == TraceKind::PktTx && f.count != kTraceNone && wire_ps_)
    dur = wire_ps_(f.count);

  std::string s = first_ ? "" : ",\n";
  first_ = false;
  s += "{\"ph\":\"X\",\"name\":\"";
  json_escape(s, name.c_str());
  s += "\",\"cat\":\"";
  s += model::unit_name(ev.unit);
  s += "\",\"ts\":";
  append_us(s, ev.time_ps);
  s += ",\"dur\":";
  append_us(s, dur);
  char b[64];
  snprintf(b, sizeof b, ",\"pid\":%u,\"tid\":%u,\"args\":{", ev.host + 1, unsigned(ev.unit) + 1);
  s += b;
  s += "\"facts\":\"";
  json_escape(s, ev.text.c_str());
  s += '"';
  if (ev.qpn != kTraceNone) {
    snprintf(b, sizeof b, ",\"qpn\":\"0x%06x\"", ev.qpn);
    s += b;
  }
  if (ev.has_wr_id) {
    snprintf(b, sizeof b, ",\"wr_id\":%" PRIu64, ev.wr_id);
    s += b;
  }
  auto num = [&](const char* k, uint32_t v) {
    if (v == kTraceNone) return;
    snprintf(b, sizeof b, ",\"%s\":%u", k, v);
    s += b;
  };
  num("wqe", f.wqe);
  num("psn", f.psn);
  num("psn_last", f.psn_last);
  if (f.peer_qpn != kTraceNone) {
    snprintf(b, sizeof b, ",\"peer_qpn\":\"0x%06x\"", f.peer_qpn);
    s += b;
  }
  num("queue", f.queue);
  num("index", f.index);
  num("count", f.count);
  if (f.opcode != model::kTraceNone16) num("opcode", f.opcode);
  if (f.flags) num("flags", f.flags);
  s += "}}";
  std::fputs(s.c_str(), out_);
  ++slices_;
}

void TimelineSink::flow(const TraceEvent& ev, char ph, const Flow& f) {
  std::string s = ",\n{\"ph\":\"";
  s += ph;
  s += "\",\"name\":\"";
  s += f.name;
  s += "\",\"cat\":\"wqe\",\"id\":";
  s += std::to_string(f.id);
  s += ",\"ts\":";
  append_us(s, ev.time_ps);
  char b[64];
  snprintf(b, sizeof b, ",\"pid\":%u,\"tid\":%u,\"bp\":\"e\"}", ev.host + 1, unsigned(ev.unit) + 1);
  s += b;
  std::fputs(s.c_str(), out_);
}

TimelineSink::Flow* TimelineSink::by_psn(QpFlows& q, uint32_t psn) {
  for (auto& [w, fl] : q.sq)
    if (psn_in(psn, fl.psn_first, fl.psn_last)) return &fl;
  return nullptr;
}

void TimelineSink::link_packet(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  if (f.opcode == model::kTraceNone16 || f.psn == kTraceNone || f.peer_qpn == kTraceNone) return;
  const bool request = wire::is_request(wire::BthOpcode(f.opcode));
  const bool tx = ev.kind == TraceKind::PktTx;
  Flow* hit = nullptr;
  if (!request && !tx) {  // a response arriving at its requester: the QP is ours
    auto it = qps_.find(key(ev.host, f.peer_qpn));
    if (it != qps_.end()) hit = by_psn(it->second, f.psn);
  } else {
    for (auto& [k, q] : qps_) {
      const uint32_t host = uint32_t(k >> 32), qpn = uint32_t(k);
      bool candidate;
      if (request)  // sent by a QP whose peer is the destination QP: on this host (tx) or another (rx)
        candidate = q.peer == f.peer_qpn && (tx ? host == ev.host : host != ev.host);
      else  // a response leaving the responder for the requester's QP, on another host
        candidate = qpn == f.peer_qpn && host != ev.host;
      if (candidate && (hit = by_psn(q, f.psn))) break;
    }
  }
  if (hit) flow(ev, 't', *hit);
}

TimelineSink::QpFlows* TimelineSink::find_qp(uint32_t host, uint32_t qpn) {
  auto it = qps_.find(key(host, qpn));
  return it == qps_.end() ? nullptr : &it->second;
}

// The driver posts a WQE: its flow starts.
void TimelineSink::link_post(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  const bool rq = f.has(model::kTfRq);
  if (ev.unit == TraceUnit::Driver && f.has(model::kTfSrq) && f.queue != kTraceNone && f.wqe != kTraceNone) {
    Flow fl;
    fl.id = next_flow_++;
    char b[64];
    snprintf(b, sizeof b, "%s SRQ 0x%x WQE %u", names_[ev.host].c_str(), f.queue, f.wqe);
    fl.name = b;
    fl.signaled = true;
    srqs_[key(ev.host, f.queue)][f.wqe] = fl;
    flow(ev, 's', fl);
    ++flows_;
    return;
  }
  if (ev.unit != TraceUnit::Driver || ev.qpn == kTraceNone || f.wqe == kTraceNone) return;
  QpFlows& q = qps_[key(ev.host, ev.qpn)];
  Flow fl;
  fl.id = next_flow_++;
  char b[64];
  snprintf(b, sizeof b, "%s %s QP 0x%x WQE %u", names_[ev.host].c_str(), rq ? "RQ" : "SQ", ev.qpn, f.wqe);
  fl.name = b;
  fl.signaled = rq || f.has(model::kTfSignaled);
  (rq ? q.rq : q.sq)[f.wqe] = fl;
  flow(ev, 's', fl);
  ++flows_;
}

// An SQ doorbell: every WQE its producer index has passed joins it (once).
void TimelineSink::link_doorbell(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  if (ev.qpn == kTraceNone || f.index == kTraceNone) return;  // CQ arm doorbells carry no QPN
  QpFlows* q = find_qp(ev.host, ev.qpn);
  if (!q) return;
  for (auto& [w, fl] : q->sq) {
    const uint16_t ahead = uint16_t(f.index - w);  // the doorbell's producer is past this WQE
    if (!fl.doorbelled && ahead != 0 && ahead < 0x8000) {
      fl.doorbelled = true;
      flow(ev, 't', fl);
    }
  }
}

bool TimelineSink::find_wqe_flow(const TraceEvent& ev, std::map<uint32_t, Flow>*& queue,
                                 std::map<uint32_t, Flow>::iterator& flow) {
  if (ev.qpn == kTraceNone || ev.f.wqe == kTraceNone) return false;
  QpFlows* q = find_qp(ev.host, ev.qpn);
  if (!q) return false;
  queue = ev.f.has(model::kTfRq) ? &q->rq : &q->sq;
  flow = queue->find(ev.f.wqe);
  return flow != queue->end();
}

// WQE fetch and decode (which also gives the message's PSN range).
void TimelineSink::link_wqe(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  if (f.has(model::kTfSrq) && ev.qpn != kTraceNone && f.queue != kTraceNone) {
    // A QP took an SRQ WQE: from here its flow is that QP's receive (its CQE names the QP).
    auto s = srqs_.find(key(ev.host, f.queue));
    if (s == srqs_.end()) return;
    auto w = s->second.find(f.wqe);
    if (w == s->second.end()) return;
    Flow& fl = qps_[key(ev.host, ev.qpn)].rq[f.wqe] = w->second;
    s->second.erase(w);
    flow(ev, 't', fl);
    return;
  }
  std::map<uint32_t, Flow>* m;
  std::map<uint32_t, Flow>::iterator fl;
  if (!find_wqe_flow(ev, m, fl)) return;
  if (ev.kind == TraceKind::WqeDecode) {
    fl->second.psn_first = f.psn;
    fl->second.psn_last = f.psn_last;
  }
  flow(ev, 't', fl->second);
}

// The requester starts a WQE's packets ("WQE n: start ... to qp D"): learn the peer QPN.
void TimelineSink::link_requester(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  if (ev.qpn == kTraceNone) return;
  QpFlows& q = qps_[key(ev.host, ev.qpn)];
  if (f.peer_qpn != kTraceNone) q.peer = f.peer_qpn;
  auto fl = q.sq.find(f.wqe);
  if (fl != q.sq.end()) flow(ev, 't', fl->second);
}

// ACK/NAK at the requester: joins the flows whose PSNs it covers; an ACK past an unsignaled
// WQE's last PSN ends that flow (no CQE will come).
void TimelineSink::link_ack(const TraceEvent& ev) {
  const model::TraceFields& f = ev.f;
  if (ev.unit != TraceUnit::Requester || ev.qpn == kTraceNone || f.psn == kTraceNone) return;
  QpFlows* q = find_qp(ev.host, ev.qpn);
  if (!q) return;
  auto& sq = q->sq;
  for (auto fl = sq.begin(); fl != sq.end();) {
    Flow& x = fl->second;
    const bool decoded = x.psn_last != kTraceNone;
    const bool retired = ev.kind == TraceKind::Ack && decoded && wire::psn_diff(f.psn, x.psn_last) >= 0;
    if (retired && !x.signaled) {  // no CQE will come: the ACK ends it
      flow(ev, 'f', x);
      fl = sq.erase(fl);
      continue;
    }
    if (psn_in(f.psn, x.psn_first, x.psn_last) || retired) flow(ev, 't', x);
    ++fl;
  }
}

// The CQE ends the flow.
void TimelineSink::link_cqe(const TraceEvent& ev) {
  std::map<uint32_t, Flow>* m;
  std::map<uint32_t, Flow>::iterator fl;
  if (!find_wqe_flow(ev, m, fl)) return;
  flow(ev, 'f', fl->second);
  m->erase(fl);
}

void TimelineSink::link(const TraceEvent& ev) {
  switch (ev.kind) {
    case TraceKind::Post: return link_post(ev);
    case TraceKind::Doorbell: return link_doorbell(ev);
    case TraceKind::WqeFetch:
    case TraceKind::WqeDecode: return link_wqe(ev);
    case TraceKind::PktTx:
    case TraceKind::PktRx:
      if (ev.unit == TraceUnit::Requester) return link_requester(ev);
      if (ev.unit == TraceUnit::Port) return link_packet(ev);
      return;
    case TraceKind::Ack:
    case TraceKind::Nak: return link_ack(ev);
    case TraceKind::CqeWrite: return link_cqe(ev);
    default: return;
  }
}

void TimelineSink::record(const TraceEvent& ev) {
  if (done_) return;
  meta(ev.host, ev.unit);
  slice(ev);
  link(ev);
}

}  // namespace hcasim::sim
