// SPDX-License-Identifier: Apache-2.0
// The receiving half of the CM: what each MAD does to the connection it names, and the timers.
#include <poll.h>

#include <chrono>
#include <cstring>
#include <vector>

#include <cstdio>

#include "../kernel/hca_link.h"
#include "ib_cm.h"

namespace hcasim::drv::cm {

CmId* Cm::by_comm_id(uint32_t id, CmState want1, CmState want2) {
  auto it = ids_.find(id);
  if (it == ids_.end()) return nullptr;
  const CmState s = it->second->state_;
  return s == want1 || s == want2 ? it->second.get() : nullptr;
}

void Cm::on_mad(MadAgent& a, const ReceivedMad& m) {
  mad::CommonHeader h;
  if (!mad::peek(m.mad, kMadBytes, h) || h.mgmt_class != mad::kMgmtClassCm) return;
  switch (mad::AttrId(h.attribute_id)) {
    case mad::AttrId::Req: return on_req(a, m);
    case mad::AttrId::Rep: return on_rep(m);
    case mad::AttrId::Rtu: return on_rtu(m);
    case mad::AttrId::Rej: return on_rej(m);
    case mad::AttrId::Dreq: return on_dreq(a, m);
    case mad::AttrId::Drep: return on_drep(m);
    case mad::AttrId::Mra: return on_mra(m);
    case mad::AttrId::SidrReq: return on_sidr_req(a, m);
    case mad::AttrId::SidrRep: return on_sidr_rep(m);
    default: return;  // MRA, SIDR, LAP/APR: not handled by this CM yet
  }
}

// A message naming nothing this CM knows: the answer any CM gives it (mad::answer_without_state).
void Cm::answer_unknown(MadAgent& a, const ReceivedMad& m) {
  uint8_t out[kMadBytes];
  if (mad::answer_without_state(m.mad, kMadBytes, out)) a.send(m.sgid, out);
}

void Cm::on_req(MadAgent& a, const ReceivedMad& m) {
  mad::Req req;
  if (mad::decode(m.mad, kMadBytes, req) != mad::DecodeError::Ok) return;
  for (auto& [n, id] : ids_) {
    if (id->remote_id_ != req.local_comm_id || id->remote_guid_ != req.local_ca_guid) continue;
    // A resent REQ: our REP was lost, so send it again. Not answered yet (the program has not
    // accepted): an MRA asks for more time, as rdma_cm's delayed MRA does (CMA_CM_MRA_SETTING).
    if (id->state_ == CmState::RepSent) a.send(id->remote_gid_, id->last_mad_);
    if (id->state_ == CmState::ReqRcvd) send_mra(*id, mad::MraedMessage::Req);
    return;
  }
  auto l = listeners_.find({&a, req.service_id});
  if (l == listeners_.end()) return answer_unknown(a, m);  // REJ: invalid service ID
  mad::CommonHeader h;
  mad::peek(m.mad, kMadBytes, h);
  CmId* id = create_id(l->second->handler_);
  id->agent_ = &a;
  id->remote_id_ = req.local_comm_id;
  id->remote_guid_ = req.local_ca_guid;
  id->remote_qpn_ = req.local_qpn;
  id->xrc_ = mad::is_xrc(req);
  id->service_id_ = req.service_id;
  id->tid_ = h.transaction_id;
  std::memcpy(id->remote_gid_, m.sgid, 16);
  id->timeout_ns_ = cm_timeout_ns(req.local_cm_response_timeout);  // how long it waits for the RTU
  id->max_retries_ = req.max_cm_retries;
  id->timewait_ns_ = cm_timeout_ns(req.primary.local_ack_timeout);
  set_state(*id, CmState::ReqRcvd);
  emit(*id, CmEventType::ReqReceived, m.mad, 0, l->second);
}

void Cm::on_rep(const ReceivedMad& m) {
  mad::Rep rep;
  if (mad::decode(m.mad, kMadBytes, rep) != mad::DecodeError::Ok) return;
  CmId* id = by_comm_id(rep.remote_comm_id, CmState::ReqSent, CmState::Established);
  if (!id) return;
  if (id->state_ == CmState::Established) {  // our RTU was lost: the same RTU again
    id->agent_->send(id->remote_gid_, id->last_mad_);
    return;
  }
  id->remote_id_ = rep.local_comm_id;
  // An XRC target answers with its QP in the EECN field (cm.c: cm_rep_get_qpn).
  id->remote_qpn_ = id->xrc_ ? rep.local_eecn : rep.local_qpn;
  id->remote_guid_ = rep.local_ca_guid;
  id->deadline_ns_ = 0;
  set_state(*id, CmState::RepRcvd);
  emit(*id, CmEventType::RepReceived, m.mad);
}

void Cm::on_rtu(const ReceivedMad& m) {
  mad::Rtu rtu;
  if (mad::decode(m.mad, kMadBytes, rtu) != mad::DecodeError::Ok) return;
  CmId* id = by_comm_id(rtu.remote_comm_id, CmState::RepSent, CmState::RepSent);
  if (!id) return;
  id->deadline_ns_ = 0;
  set_state(*id, CmState::Established);
  emit(*id, CmEventType::RtuReceived, m.mad);
}

void Cm::on_rej(const ReceivedMad& m) {
  mad::Rej rej;
  if (mad::decode(m.mad, kMadBytes, rej) != mad::DecodeError::Ok) return;
  CmId* id = by_comm_id(rej.remote_comm_id, CmState::ReqSent, CmState::RepSent);
  if (!id) id = by_comm_id(rej.remote_comm_id, CmState::RepRcvd, CmState::Established);
  if (!id) return;
  id->deadline_ns_ = 0;
  set_state(*id, CmState::Idle);
  emit(*id, CmEventType::RejReceived, m.mad, rej.reason);
}

void Cm::on_dreq(MadAgent& a, const ReceivedMad& m) {
  mad::Dreq dreq;
  if (mad::decode(m.mad, kMadBytes, dreq) != mad::DecodeError::Ok) return;
  mad::CommonHeader h;
  mad::peek(m.mad, kMadBytes, h);
  CmId* id = by_comm_id(dreq.remote_comm_id, CmState::Established, CmState::DreqSent);
  // A passive side still waiting for the RTU takes a DREQ too (Linux's cm_dreq_handler, state
  // REP_SENT): the active side may end the connection before the RTU arrives, or it is lost.
  if (!id) id = by_comm_id(dreq.remote_comm_id, CmState::RepSent, CmState::RepSent);
  CmId* old = id ? nullptr : by_comm_id(dreq.remote_comm_id, CmState::Timewait, CmState::Timewait);
  // Every DREQ gets a DREP, even one for a connection long gone (its DREP was lost).
  mad::Drep drep;
  drep.local_comm_id = id || old ? dreq.remote_comm_id : 0;
  drep.remote_comm_id = dreq.local_comm_id;
  uint8_t out[kMadBytes];
  mad::encode(drep, h.transaction_id, out);
  a.send(m.sgid, out);
  if (!id) return;
  enter_timewait(*id);
  emit(*id, CmEventType::DreqReceived, m.mad);
}

void Cm::on_drep(const ReceivedMad& m) {
  mad::Drep drep;
  if (mad::decode(m.mad, kMadBytes, drep) != mad::DecodeError::Ok) return;
  CmId* id = by_comm_id(drep.remote_comm_id, CmState::DreqSent, CmState::DreqSent);
  if (!id) return;
  enter_timewait(*id);
  emit(*id, CmEventType::DrepReceived, m.mad);
}

void Cm::send_mra(CmId& id, mad::MraedMessage what) {
  mad::Mra mra;
  mra.local_comm_id = id.local_id_;
  mra.remote_comm_id = id.remote_id_;
  mra.message_mraed = uint8_t(what);
  mra.service_timeout = kMraServiceTimeout;
  uint8_t out[kMadBytes];
  mad::encode(mra, id.tid_, out);
  id.agent_->send(id.remote_gid_, out);
}

void Cm::on_mra(const ReceivedMad& m) {
  mad::Mra mra;
  if (mad::decode(m.mad, kMadBytes, mra) != mad::DecodeError::Ok) return;
  const bool req = mra.message_mraed == uint8_t(mad::MraedMessage::Req);
  CmId* id = by_comm_id(mra.remote_comm_id, req ? CmState::ReqSent : CmState::RepSent,
                        req ? CmState::ReqSent : CmState::RepSent);
  if (!id) return;
  // IBTA 12.6.6: the peer needs its service timeout more before it can answer; keep waiting.
  id->deadline_ns_ = cm_now_ns() + cm_timeout_ns(mra.service_timeout) + id->timeout_ns_;
  if (id->agent_->link().trace_on(trace::TraceKind::Note)) {
    char buf[160];
    snprintf(buf, sizeof buf, "cm: comm 0x%08x: MRA received, the peer needs up to %.1f s more",
             id->local_id_, double(cm_timeout_ns(mra.service_timeout)) * 1e-9);
    id->agent_->link().trace(trace::TraceKind::Note, trace::kTraceNone, false, 0, trace::TraceFields(), buf);
  }
}

void Cm::on_sidr_req(MadAgent& a, const ReceivedMad& m) {
  mad::SidrReq req;
  if (mad::decode(m.mad, kMadBytes, req) != mad::DecodeError::Ok) return;
  mad::CommonHeader h;
  mad::peek(m.mad, kMadBytes, h);
  for (auto& [n, id] : ids_)  // a resent request still being answered
    if (id->state_ == CmState::SidrReqRcvd && id->remote_id_ == req.request_id &&
        std::memcmp(id->remote_gid_, m.sgid, 16) == 0)
      return;
  auto l = listeners_.find({&a, req.service_id});
  if (l == listeners_.end()) return answer_unknown(a, m);  // IBTA 12.11.2: nobody serves it
  CmId* id = create_id(l->second->handler_);
  id->agent_ = &a;
  id->remote_id_ = req.request_id;
  id->service_id_ = req.service_id;
  id->tid_ = h.transaction_id;
  std::memcpy(id->remote_gid_, m.sgid, 16);
  set_state(*id, CmState::SidrReqRcvd);
  emit(*id, CmEventType::SidrReqReceived, m.mad, 0, l->second);
}

void Cm::on_sidr_rep(const ReceivedMad& m) {
  mad::SidrRep rep;
  if (mad::decode(m.mad, kMadBytes, rep) != mad::DecodeError::Ok) return;
  CmId* id = by_comm_id(rep.request_id, CmState::SidrReqSent, CmState::SidrReqSent);
  if (!id) return;
  id->deadline_ns_ = 0;
  set_state(*id, CmState::Idle);
  emit(*id, CmEventType::SidrRepReceived, m.mad, rep.status);
}

void Cm::enter_timewait(CmId& id) {
  set_state(id, CmState::Timewait);
  id.deadline_ns_ = cm_now_ns() + id.timewait_ns_;
  id.retries_left_ = 0;
}

void Cm::timed_out(CmId& id) {
  const CmState s = id.state_;
  id.deadline_ns_ = 0;
  if (s == CmState::Timewait) {
    set_state(id, CmState::Idle);
    return emit(id, CmEventType::TimewaitExit, nullptr);
  }
  if (s == CmState::DreqSent) {
    enter_timewait(id);
    return emit(id, CmEventType::DreqError, nullptr);
  }
  if (s == CmState::SidrReqSent) {
    set_state(id, CmState::Idle);
    return emit(id, CmEventType::SidrReqError, nullptr);
  }
  // IBTA 12.9.6: a REQ or REP unanswered after every resend ends with a REJ (timeout).
  mad::Rej rej;
  rej.local_comm_id = id.local_id_;
  rej.remote_comm_id = id.remote_id_;
  rej.message_rejected =
      uint8_t(s == CmState::ReqSent ? mad::RejectedMessage::Req : mad::RejectedMessage::Rep);
  rej.reason = uint16_t(mad::RejReason::Timeout);
  mad::encode(rej, id.tid_, id.last_mad_);
  id.agent_->send(id.remote_gid_, id.last_mad_);
  set_state(id, CmState::Idle);
  emit(id, s == CmState::ReqSent ? CmEventType::ReqError : CmEventType::RepError, nullptr);
}

bool Cm::fire_timers() {
  const uint64_t now = cm_now_ns();
  std::vector<uint32_t> due;
  for (auto& [n, id] : ids_)
    if (id->deadline_ns_ && id->deadline_ns_ <= now) due.push_back(n);
  for (uint32_t n : due) {
    auto it = ids_.find(n);
    if (it == ids_.end()) continue;  // a handler destroyed it
    CmId& id = *it->second;
    if (id.state_ != CmState::Timewait && id.retries_left_ > 0) {
      --id.retries_left_;
      id.deadline_ns_ = now + id.timeout_ns_;
      id.agent_->send(id.remote_gid_, id.last_mad_);
    } else {
      timed_out(id);
    }
  }
  return !due.empty();
}

bool Cm::progress() {
  std::lock_guard<std::recursive_mutex> g(mu_);
  bool any = false;
  for (auto& [dev, a] : agents_) {
    MadAgent& agent = *a;
    any |= agent.progress([&](const ReceivedMad& m) { on_mad(agent, m); }) > 0;
  }
  return fire_timers() || any;
}

uint64_t Cm::collect_waits(std::vector<pollfd>& fds) {
  for (auto& [dev, a] : agents_) {
    a->arm();
    fds.push_back({a->event_fd(), POLLIN, 0});
  }
  return next_deadline();
}

uint64_t Cm::next_deadline() const {
  uint64_t next = 0;
  for (auto& [n, id] : ids_)
    if (id->deadline_ns_ && (!next || id->deadline_ns_ < next)) next = id->deadline_ns_;
  return next;
}

void Cm::settle_sends(int max_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  for (;;) {
    bool pending = false;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      progress();
      for (auto& [dev, a] : agents_) pending |= a->sends_pending();
    }
    if (!pending || std::chrono::steady_clock::now() >= end) return;
    wait(1);
  }
}

void Cm::wait(int max_ms, int also_fd) {
  std::vector<pollfd> fds;
  if (also_fd >= 0) fds.push_back({also_fd, POLLIN, 0});
  HcaLink* link = nullptr;
  uint64_t next = 0;
  {
    std::lock_guard<std::recursive_mutex> g(mu_);
    next = collect_waits(fds);
    if (!agents_.empty()) link = &agents_.rbegin()->second->link();
  }
  const int ms = cm_wait_ms(next, max_ms);
  // Lockstep: the devices run only while someone waits; in realtime this returns at once.
  if (link && link->wait_progress()) return;
  if (link)
    link->wait_activity(fds, ms < 50 ? ms : 50);
  else
    poll(fds.data(), nfds_t(fds.size()), ms < 50 ? ms : 50);
  std::lock_guard<std::recursive_mutex> g(mu_);
  for (auto& [dev, a] : agents_) a->take_events();
}

}  // namespace hcasim::drv::cm
