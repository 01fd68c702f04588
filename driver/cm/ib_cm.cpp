// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include "ib_cm.h"

#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../kernel/hca_link.h"

namespace hcasim::drv::cm {

namespace {

void copy_pd(uint8_t* dst, size_t cap, const void* src, size_t len) {
  if (src && len) std::memcpy(dst, src, len < cap ? len : cap);
}

}  // namespace

const char* cm_state_name(CmState s) {
  static const char* const names[] = {"IDLE",      "LISTEN",   "REQ_SENT",      "REQ_RCVD",
                                      "REP_SENT",  "REP_RCVD", "ESTABLISHED",   "DREQ_SENT",
                                      "DREQ_RCVD", "TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD"};
  return size_t(s) < sizeof names / sizeof *names ? names[size_t(s)] : "?";
}

const char* cm_event_name(CmEventType t) {
  static const char* const names[] = {
      "REQ_RECEIVED",      "REP_RECEIVED",      "RTU_RECEIVED",  "REJ_RECEIVED", "REQ_ERROR",
      "REP_ERROR",         "DREQ_RECEIVED",     "DREP_RECEIVED", "DREQ_ERROR",   "TIMEWAIT_EXIT",
      "SIDR_REQ_RECEIVED", "SIDR_REP_RECEIVED", "SIDR_REQ_ERROR"};
  return size_t(t) < sizeof names / sizeof *names ? names[size_t(t)] : "?";
}

Cm& Cm::get() {
  static Cm* cm = new Cm();  // lives as long as the process, like the kernel's
  return *cm;
}

MadAgent* Cm::agent(ibv_device* dev) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  auto& a = agents_[dev];
  if (!a) {
    a = MadAgent::open(dev);
    const uint64_t one = 1;  // the service thread waits on the new agent too
    if (a && wake_fd_ >= 0 && write(wake_fd_, &one, sizeof one) < 0) { /* it looks again within 100 ms */
    }
  }
  if (!a) agents_.erase(dev);
  return dev && agents_.count(dev) ? agents_[dev].get() : nullptr;
}

CmId* Cm::create_id(CmHandler handler) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  while (ids_.count(next_id_) || next_id_ == 0) ++next_id_;
  auto id = std::make_unique<CmId>();
  id->handler_ = std::move(handler);
  id->local_id_ = next_id_++;
  CmId* p = id.get();
  ids_[p->local_id_] = std::move(id);
  return p;
}

void Cm::set_state(CmId& id, CmState s) {
  if (id.agent_ && id.agent_->link().trace_on(trace::TraceKind::Note)) {
    char buf[160];
    snprintf(buf, sizeof buf, "cm: comm 0x%08x %s -> %s", id.local_id_, cm_state_name(id.state_),
             cm_state_name(s));
    id.agent_->link().trace(trace::TraceKind::Note, trace::kTraceNone, false, 0, trace::TraceFields(), buf);
  }
  // While established, the HCA holds the DREQ that ends the connection should the process end
  // without one (killed): the kernel's CM, which outlives the process, would send it.
  const bool was = id.state_ == CmState::Established, is = s == CmState::Established;
  if (was != is && id.agent_)  // (a TID of its own, so the MADs the program sends keep theirs)
    id.agent_->leave_dreq(id.local_id_, is, id.remote_gid_, id.remote_id_, id.remote_qpn_,
                          kLeftDreqTid | id.local_id_);
  id.state_ = s;
}

void Cm::emit(CmId& id, CmEventType t, const uint8_t* mad, uint16_t reason, CmId* listener) {
  CmEvent ev{t, &id, listener, mad, reason};
  CmHandler& h = listener ? listener->handler_ : id.handler_;
  if (h) h(ev);
}

int Cm::transmit(CmId& id, bool resend_later) {
  id.deadline_ns_ = resend_later ? cm_now_ns() + id.timeout_ns_ : 0;
  id.retries_left_ = resend_later ? id.max_retries_ : 0;
  return id.agent_->send(id.remote_gid_, id.last_mad_);
}

int Cm::listen(CmId* id, ibv_device* dev, uint64_t service_id) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  MadAgent* a = agent(dev);
  if (!a) return errno ? errno : ENODEV;
  return listen(id, a, service_id);
}

int Cm::listen(CmId* id, MadAgent* a, uint64_t service_id) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::Idle) return EINVAL;
  if (listeners_.count({a, service_id})) return EADDRINUSE;
  listeners_[{a, service_id}] = id;
  id->agent_ = a;
  id->service_id_ = service_id;
  set_state(*id, CmState::Listen);
  return 0;
}

void Cm::set_handler(CmId* id, CmHandler handler) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  id->handler_ = std::move(handler);
}

int Cm::establish(CmId* id) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ == CmState::Established) return 0;
  if (id->state_ != CmState::RepSent) return EINVAL;
  id->deadline_ns_ = 0;
  set_state(*id, CmState::Established);
  emit(*id, CmEventType::RtuReceived, nullptr);
  return 0;
}

int Cm::send_req(CmId* id, ibv_device* dev, mad::Req req, const uint8_t dgid[16]) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  MadAgent* a = agent(dev);
  if (!a) return errno ? errno : ENODEV;
  return send_req(id, a, req, dgid);
}

int Cm::send_req(CmId* id, MadAgent* a, mad::Req req, const uint8_t dgid[16]) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::Idle) return EINVAL;
  id->agent_ = a;
  std::memcpy(id->remote_gid_, dgid, 16);
  req.local_comm_id = id->local_id_;
  req.local_ca_guid = a->node_guid();
  std::memcpy(req.primary.local_gid, a->gid_for(dgid), 16);
  std::memcpy(req.primary.remote_gid, dgid, 16);
  id->service_id_ = req.service_id;
  id->xrc_ = mad::is_xrc(req);
  id->tid_ = next_tid_++;
  mad::encode(req, id->tid_, id->last_mad_);
  id->timeout_ns_ = cm_timeout_ns(req.remote_cm_response_timeout);
  id->max_retries_ = req.max_cm_retries;
  id->timewait_ns_ = cm_timeout_ns(req.primary.local_ack_timeout);
  set_state(*id, CmState::ReqSent);
  return transmit(*id, true);
}

int Cm::send_rep(CmId* id, mad::Rep rep) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::ReqRcvd) return EINVAL;
  rep.local_comm_id = id->local_id_;
  rep.remote_comm_id = id->remote_id_;
  rep.local_ca_guid = id->agent_->node_guid();
  mad::encode(rep, id->tid_, id->last_mad_);
  set_state(*id, CmState::RepSent);
  return transmit(*id, true);
}

int Cm::send_rtu(CmId* id, const void* private_data, size_t len) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::RepRcvd) return EINVAL;
  mad::Rtu rtu;
  rtu.local_comm_id = id->local_id_;
  rtu.remote_comm_id = id->remote_id_;
  copy_pd(rtu.private_data, sizeof rtu.private_data, private_data, len);
  mad::encode(rtu, id->tid_, id->last_mad_);  // a REP resent by the peer gets it again
  set_state(*id, CmState::Established);
  return transmit(*id, false);
}

int Cm::send_rej(CmId* id, mad::RejReason reason, const void* private_data, size_t len) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  const bool req = id->state_ == CmState::ReqRcvd;
  if (!req && id->state_ != CmState::RepRcvd) return EINVAL;
  mad::Rej rej;
  rej.local_comm_id = id->local_id_;
  rej.remote_comm_id = id->remote_id_;
  rej.message_rejected = uint8_t(req ? mad::RejectedMessage::Req : mad::RejectedMessage::Rep);
  rej.reason = uint16_t(reason);
  copy_pd(rej.private_data, sizeof rej.private_data, private_data, len);
  mad::encode(rej, id->tid_, id->last_mad_);
  set_state(*id, CmState::Idle);
  return transmit(*id, false);
}

int Cm::send_dreq(CmId* id, const void* private_data, size_t len) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::Established) return EINVAL;
  mad::Dreq d;
  d.local_comm_id = id->local_id_;
  d.remote_comm_id = id->remote_id_;
  d.remote_qpn_eecn = id->remote_qpn_;
  copy_pd(d.private_data, sizeof d.private_data, private_data, len);
  id->tid_ = next_tid_++;
  mad::encode(d, id->tid_, id->last_mad_);
  set_state(*id, CmState::DreqSent);
  return transmit(*id, true);
}

int Cm::send_sidr_req(CmId* id, MadAgent* a, mad::SidrReq req, const uint8_t dgid[16], uint8_t timeout,
                      uint8_t retries) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::Idle) return EINVAL;
  id->agent_ = a;
  std::memcpy(id->remote_gid_, dgid, 16);
  req.request_id = id->local_id_;
  id->service_id_ = req.service_id;
  id->tid_ = next_tid_++;
  mad::encode(req, id->tid_, id->last_mad_);
  id->timeout_ns_ = cm_timeout_ns(timeout);
  id->max_retries_ = retries;
  set_state(*id, CmState::SidrReqSent);
  return transmit(*id, true);
}

int Cm::send_sidr_rep(CmId* id, mad::SidrRep rep) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (id->state_ != CmState::SidrReqRcvd) return EINVAL;
  rep.request_id = id->remote_id_;
  rep.service_id = id->service_id_;
  mad::encode(rep, id->tid_, id->last_mad_);
  set_state(*id, CmState::Idle);
  return transmit(*id, false);
}

void Cm::destroy_id(CmId* id) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  switch (id->state_) {
    case CmState::ReqRcvd:
    case CmState::RepRcvd: send_rej(id, mad::RejReason::ConsumerReject, nullptr, 0); break;
    case CmState::Established: send_dreq(id, nullptr, 0); break;
    case CmState::Listen: listeners_.erase({id->agent_, id->service_id_}); break;
    case CmState::SidrReqRcvd: {  // unanswered: the requester hears "rejected"
      mad::SidrRep rep;
      rep.status = uint8_t(mad::SidrStatus::Rejected);
      send_sidr_rep(id, rep);
      break;
    }
    default: break;
  }
  ids_.erase(id->local_id_);
}

}  // namespace hcasim::drv::cm
