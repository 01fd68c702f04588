// SPDX-License-Identifier: Apache-2.0
#include "explain.h"

#include <hcasim/hca_hw.h>
#include "strprintf.h"

namespace hcasim::sim {

using model::TraceKind;
using model::TraceUnit;

std::pair<const char*, const char*> explain_cqe_status(uint16_t syndrome) {
  using S = hw::CqeSyndrome;
  switch (S(syndrome)) {
    case S::Ok: return {"IBV_WC_SUCCESS", "success"};
    case S::LocalLengthErr:
      return {"IBV_WC_LOC_LEN_ERR",
              "the message is longer than the receive buffer posted for it (or than the path MTU, on UD)"};
    case S::LocalQpOpErr: return {"IBV_WC_LOC_QP_OP_ERR", "the work request is not valid for this QP"};
    case S::LocalProtErr:
      return {"IBV_WC_LOC_PROT_ERR",
              "an lkey check failed: a scatter/gather entry is not inside memory registered with that lkey "
              "in the QP's PD"};
    case S::WrFlushErr:
      return {"IBV_WC_WR_FLUSH_ERR",
              "the QP is in the error state, so its outstanding work requests are flushed"};
    case S::MwBindErr: return {"IBV_WC_MW_BIND_ERR", "the memory window could not be bound"};
    case S::BadRespErr: return {"IBV_WC_BAD_RESP_ERR", "the responder sent an unexpected response"};
    case S::LocalAccessErr: return {"IBV_WC_LOC_ACCESS_ERR", "a local access check failed"};
    case S::RemoteInvalReqErr:
      return {"IBV_WC_REM_INV_REQ_ERR",
              "the responder rejected the request as invalid (longer than its receive buffer, or an "
              "operation its QP does not enable in qp_access_flags)"};
    case S::RemoteAccessErr:
      return {
          "IBV_WC_REM_ACCESS_ERR",
          "the responder refused the access: the rkey check failed (bad key, outside the region, or memory "
          "registered without the right)"};
    case S::RemoteOpErr: return {"IBV_WC_REM_OP_ERR", "the responder could not complete the operation"};
    case S::TransportRetryExcErr:
      return {"IBV_WC_RETRY_EXC_ERR",
              "no acknowledgement came within the local ACK timeout, retry_cnt times over (peer gone, not "
              "ready, or "
              "the wire lost everything)"};
    case S::RnrRetryExcErr:
      return {"IBV_WC_RNR_RETRY_EXC_ERR",
              "the responder had no receive posted, and RNR NAKs used up rnr_retry (post receives before the "
              "peer sends)"};
    case S::RemoteAbortedErr: return {"IBV_WC_REM_ABORT_ERR", "the responder aborted the operation"};
  }
  return {"IBV_WC_GENERAL_ERR", "an unknown error"};
}

bool ExplainSink::wants(TraceUnit u, TraceKind k) const {
  (void)u;
  return k == TraceKind::Error || k == TraceKind::QpState || k == TraceKind::CqeWrite ||
         k == TraceKind::EqeWrite;
}

bool ExplainSink::wants_success(TraceUnit u, TraceKind k) const {
  // A successful QP state change is used (a moved QP starts a new flush episode).
  return wants(u, k) && k != TraceKind::CqeWrite;
}

void ExplainSink::record(const model::TraceEvent& ev) {
  if (done_) return;
  const std::string line = explain(ev);
  if (line.empty()) return;
  std::fprintf(out_, "hcasim: %s\n", line.c_str());
  std::fflush(out_);
}

std::string ExplainSink::who(const model::TraceEvent& ev) const {
  static const char* const long_names[] = {"driver",         "doorbell unit",
                                           "QPC unit",       "buffer-table walker",
                                           "WQE fetch unit", "memory-key unit",
                                           "DMA engine",     "requester",
                                           "responder",      "port",
                                           "wire",           "CQ unit",
                                           "EQ unit",        "firmware"};
  const unsigned u = unsigned(ev.unit);
  std::string s = (ev.host < names_.size() ? names_[ev.host] : "host " + std::to_string(ev.host)) + " " +
                  (u < sizeof long_names / sizeof long_names[0] ? long_names[u] : "?");
  if (ev.qpn != model::kTraceNone) s += model::strprintf(", QP 0x%06x", ev.qpn);
  return s;
}

std::string ExplainSink::explain(const model::TraceEvent& ev) {
  const bool error = ev.f.has(model::kTfError);
  switch (ev.kind) {
    case TraceKind::Error:
      // Hazards have their own report; a frame lost on purpose (--drop) is what was asked for.
      if (ev.unit == TraceUnit::Command || ev.unit == TraceUnit::Port) return {};
      return who(ev) + ": " + ev.text;
    case TraceKind::QpState:
      if (!error) {
        flushed_.erase({ev.host, ev.qpn});  // the program moved it: a new life, a new flush
        return {};
      }
      return who(ev) + ": " + ev.text + "; its outstanding work requests complete with IBV_WC_WR_FLUSH_ERR";
    case TraceKind::CqeWrite: return error ? completion(ev) : std::string();
    case TraceKind::EqeWrite: return async_event(ev);
    default: return {};
  }
}

std::string ExplainSink::completion(const model::TraceEvent& ev) {
  const auto [name, meaning] = explain_cqe_status(ev.f.status);
  std::string s =
      who(ev) + model::strprintf(": %s WQE %u completed with %s: %s",
                                 ev.f.has(model::kTfRq) ? "receive" : "send", ev.f.wqe, name, meaning);
  if (hw::CqeSyndrome(ev.f.status) != hw::CqeSyndrome::WrFlushErr) return s;
  if (!flushed_.insert({ev.host, ev.qpn}).second) return {};  // one line per QP and error episode
  return s + " (further flushed WQEs of this QP are not listed)";
}

std::string ExplainSink::async_event(const model::TraceEvent& ev) const {
  using E = hw::EqeType;
  const char* what = nullptr;
  switch (E(ev.f.opcode)) {
    case E::CqError:
      what = "IBV_EVENT_CQ_ERR: a CQ overflowed (more completions than entries, none polled in time)";
      break;
    case E::WqCatastrophic:
      what = "IBV_EVENT_QP_FATAL: the QP hit an error it cannot report in a completion";
      break;
    case E::WqInvalidRequest:
      what = "IBV_EVENT_QP_REQ_ERR: the QP received a request it cannot accept";
      break;
    case E::WqAccessError:
      what = "IBV_EVENT_QP_ACCESS_ERR: a request to the QP violated its access rights";
      break;
    case E::PortChange:
      if (hw::PortChangeSubtype(ev.f.status) == hw::PortChangeSubtype::Down)
        return who(ev) +
               model::strprintf(
                   ": asynchronous event IBV_EVENT_PORT_ERR: port %u's link went down (frames across "
                   "it are lost until it comes back; RC retries, then fails with RETRY_EXC_ERR)",
                   ev.f.peer_qpn);
      return who(ev) +
             model::strprintf(": asynchronous event IBV_EVENT_PORT_ACTIVE: port %u's link is up again",
                              ev.f.peer_qpn);
    default: return {};  // completions and the informational events (COMM_EST, SQ_DRAINED, SRQ, LAST_WQE)
  }
  std::string s = who(ev) + ": asynchronous event " + what;
  if (ev.f.peer_qpn != model::kTraceNone) s += model::strprintf(" (resource 0x%x)", ev.f.peer_qpn);
  return s;
}

}  // namespace hcasim::sim
