// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's connections: CONNECT/LISTEN/ACCEPT/REJECT/DISCONNECT over the IB CM, the QP
// attributes each step asks for (INIT_QP_ATTR), and the IB CM's events as rdma_cm events.
#include <arpa/inet.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstring>

#include "../provider/verbs_core.h"
#include "ucma.h"

namespace hcasim::drv::cm {

namespace {

constexpr uint8_t kCmResponseTimeout = 20;   ///< CMA_CM_RESPONSE_TIMEOUT: 4.096 us * 2^20, 4.3 s
constexpr uint8_t kMaxCmRetries = 15;        ///< CMA_MAX_CM_RETRIES
constexpr uint8_t kRocePacketLifetime = 16;  ///< CMA_IBOE_PACKET_LIFETIME
constexpr uint8_t kPathMtu = IBV_MTU_1024;

uint64_t service_id(uint16_t ps, const IpAddr& a) { return (uint64_t(ps) << 16) + ntohs(a.port()); }

/** The QP type a REQ asks the passive side for (cm_msgs.h: cm_req_get_qp_type); 0 if none. */
uint8_t req_qp_type(const mad::Req& r) {
  if (mad::is_xrc(r)) return IBV_QPT_XRC_RECV;
  if (r.transport_service_type == mad::kTransportRc) return IBV_QPT_RC;
  return r.transport_service_type == mad::kTransportUc ? IBV_QPT_UC : 0;
}

}  // namespace

void put_cma_hdr(uint8_t* p, const IpAddr& src, const IpAddr& dst) {
  std::memset(p, 0, kCmaHdrLen);
  const bool v4 = src.ipv4() != 0 || !src.v6();  // IPv4 (or IPv4-mapped): the last 4 bytes only
  p[1] = uint8_t((v4 ? 4 : 6) << 4);
  const uint16_t port = src.port();
  std::memcpy(p + 2, &port, 2);
  uint8_t g[16];
  src.gid(g);
  std::memcpy(p + 4 + (v4 ? 12 : 0), g + (v4 ? 12 : 0), v4 ? 4 : 16);
  dst.gid(g);
  std::memcpy(p + 20 + (v4 ? 12 : 0), g + (v4 ? 12 : 0), v4 ? 4 : 16);
}

bool listener_takes(const IpAddr& listener, const IpAddr& to) {
  // cma.c's cma_match_private_data: an IPv6 wildcard takes both families (afonly is
  // net.ipv6.bindv6only, 0); an IPv4 id is afonly, and any other takes only its own address.
  if (listener.any() && listener.v6()) return true;
  if (!listener.v6() && to.v6()) return false;
  return listener.any() || listener.same_address(to);
}

bool get_cma_hdr(const uint8_t* p, uint16_t listener_port, IpAddr& from, IpAddr& to) {
  const int version = p[1] >> 4;
  if (p[0] != 0 || (version != 4 && version != 6)) return false;
  from = to = IpAddr::any_of(version == 4 ? AF_INET : AF_INET6);
  uint16_t port;
  std::memcpy(&port, p + 2, 2);
  from.set_port(port);
  to.set_port(listener_port);
  uint8_t g[16] = {};
  if (version == 4) g[10] = g[11] = 0xff;
  const size_t off = version == 4 ? 12 : 0;
  std::memcpy(g + off, p + 4 + off, 16 - off);
  from.set_gid(g);
  std::memcpy(g + off, p + 20 + off, 16 - off);
  to.set_gid(g);
  return true;
}

void copy_conn_pd(rdma_ucm_conn_param& c, const uint8_t* pd, size_t len) {
  std::memcpy(c.private_data, pd, len);
  c.private_data_len = uint8_t(len);
}

CmHandler Ucma::handler_for(uint32_t handle) {
  return [this, handle](const CmEvent& e) {
    UcmaId* id = find(handle);
    if (!id) return;
    if (e.type == CmEventType::ReqReceived)
      on_connect_request(*id, e);
    else if (e.type == CmEventType::SidrReqReceived)
      on_sidr_request(*id, e);
    else if (e.type == CmEventType::SidrRepReceived)
      on_sidr_reply(*id, e);
    else
      on_cm_event(*id, e);
  };
}

int Ucma::listen(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_listen>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  if (id->state == UcmaState::Idle) {
    const IpAddr any = IpAddr::any_of(AF_INET);  // rdma_listen(3) on an unbound id: IPv4, any address
    if (int e = bind_addr(*id, &any.u.sa, any.size())) return e;
  }
  if (id->state != UcmaState::AddrBound) return -EINVAL;
  Cm& cm = Cm::get();
  // A wildcard address listens on every device of this host, as the kernel's cma does.
  std::vector<MadAgent*> on;
  if (id->agent) {
    on.push_back(id->agent);
  } else {
    int n = 0;
    ibv_device** list = get_device_list(&n);
    for (int d = 0; d < n; ++d)
      if (MadAgent* a = cm.agent(list[d])) on.push_back(a);
    free_device_list(list);
  }
  for (MadAgent* a : on) {
    CmId* l = cm.create_id(handler_for(id->handle));
    if (int e = cm.listen(l, a, service_id(id->ps, id->src))) {
      cm.destroy_id(l);
      return -e;
    }
    id->cm_listens.push_back(l);
  }
  id->state = UcmaState::Listen;
  return 0;
}

void Ucma::on_connect_request(UcmaId& listener, const CmEvent& e) {
  mad::Req req;
  if (mad::decode(e.mad, kMadBytes, req) != mad::DecodeError::Ok) return;
  // The IB CM found the service's listener; rdma_cm refusing the request for its address or
  // family turns it down as its consumer (cm.c destroys the id in REQ_RCVD: REJ reason 28, as
  // rxe shows for an IPv6 request to an IPv4 listener).
  IpAddr to, from;
  if (!get_cma_hdr(req.private_data, listener.src.port(), from, to) || !listener_takes(listener.src, to))
    return (void)Cm::get().send_rej(e.id, mad::RejReason::ConsumerReject, nullptr, 0);
  // The new id takes the REQ's QP type; a listener of another type refuses it (cma.c:
  // cma_ib_check_req_qp_type, then the CM rejects for its consumer).
  const uint8_t type = req_qp_type(req);
  if (!type || (listener.qp_type && listener.qp_type != type))
    return (void)Cm::get().send_rej(e.id, mad::RejReason::ConsumerReject, nullptr, 0);
  auto child = std::make_unique<UcmaId>();
  UcmaId& c = *child;
  c.handle = next_handle_++;
  c.psn = first_psn(c.handle);
  c.child = true;
  c.uid = listener.uid;
  c.ch = listener.ch;
  c.ps = listener.ps;
  c.qp_type = type;
  c.state = UcmaState::Connect;
  c.src = to;
  c.dst = from;
  c.agent = e.id->agent();
  c.cm = e.id;
  c.remote_qpn = req.local_qpn;
  c.remote_psn = req.starting_psn;
  c.responder_resources = req.initiator_depth;
  c.initiator_depth = req.responder_resources;
  c.retry_count = req.retry_count;
  c.rnr_retry_count = req.rnr_retry_count;
  ids_[c.handle] = std::move(child);
  Cm::get().set_handler(e.id, handler_for(c.handle));
  UcmaEvent& ev = queue_event(c, kConnectRequest, 0);
  ev.credit = listener.handle;  // counted against the listener (ucma_get_event)
  rdma_ucm_conn_param& p = ev.resp.param.conn;
  copy_conn_pd(p, req.private_data + kCmaHdrLen, sizeof req.private_data - kCmaHdrLen);
  p.qp_num = req.local_qpn;
  p.responder_resources = req.responder_resources;
  p.initiator_depth = req.initiator_depth;
  p.flow_control = req.end_to_end_flow_control;
  p.retry_count = req.retry_count;
  p.rnr_retry_count = req.rnr_retry_count;
  p.srq = req.srq;
}

int Ucma::connect(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_connect>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  const rdma_ucm_conn_param& cp = c.conn_param;
  if (id->state != UcmaState::RouteResolved) return -EINVAL;
  if (id->qp_type == IBV_QPT_UD) return connect_ud(*id, cp);
  if (cp.private_data_len > mad::kReqPrivateDataSize - kCmaHdrLen) return -EINVAL;
  id->qpn = cp.qp_num;
  id->responder_resources = cp.responder_resources;
  id->initiator_depth = cp.initiator_depth;
  id->retry_count = cp.retry_count;
  id->rnr_retry_count = cp.rnr_retry_count;
  mad::Req r;
  r.service_id = service_id(id->ps, id->dst);
  r.local_qpn = cp.qp_num;
  r.starting_psn = id->psn;
  r.initiator_depth = cp.initiator_depth;
  r.end_to_end_flow_control = cp.flow_control;
  if (id->qp_type == IBV_QPT_XRC_SEND) {  // an initiator has no responder or SRQ (cm_format_req)
    r.transport_service_type = mad::kTransportExtended;
    r.extended_transport_type = mad::kExtendedTransportXrc;
  } else {
    r.transport_service_type = id->qp_type == IBV_QPT_UC ? mad::kTransportUc : mad::kTransportRc;
    r.responder_resources = cp.responder_resources;
    r.retry_count = cp.retry_count;
    r.rnr_retry_count = cp.rnr_retry_count;
    r.srq = cp.srq;
  }
  r.remote_cm_response_timeout = r.local_cm_response_timeout = kCmResponseTimeout;
  r.max_cm_retries = kMaxCmRetries;
  r.partition_key = 0xffff;
  r.path_mtu = kPathMtu;
  r.primary.local_lid = r.primary.remote_lid = 0xffff;  // RoCE: the permissive LID
  r.primary.hop_limit = 64;
  r.primary.traffic_class = id->tos;
  r.primary.packet_rate = 16;
  r.primary.local_ack_timeout = kRocePacketLifetime + 1;
  put_cma_hdr(r.private_data, id->src, id->dst);
  std::memcpy(r.private_data + kCmaHdrLen, cp.private_data, cp.private_data_len);
  uint8_t dgid[16];
  id->dst.gid(dgid);
  id->cm = Cm::get().create_id(handler_for(id->handle));
  id->state = UcmaState::Connect;
  return -Cm::get().send_req(id->cm, id->agent, r, dgid);
}

int Ucma::accept(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_accept>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !id->cm) return -EINVAL;
  Cm& cm = Cm::get();
  if (id->qp_type == IBV_QPT_UD) return accept_ud(*id, c.conn_param);
  // The active side's ACCEPT, after its QP reached RTS on the REP: the RTU (cma_rep_recv).
  if (!c.conn_param.valid)
    return id->cm->state() == CmState::RepRcvd ? -cm.send_rtu(id->cm, nullptr, 0) : -EINVAL;
  const rdma_ucm_conn_param& cp = c.conn_param;
  if (id->cm->state() != CmState::ReqRcvd || cp.private_data_len > mad::kRepPrivateDataSize) return -EINVAL;
  id->uid = c.uid;
  id->qpn = cp.qp_num;
  id->responder_resources = cp.responder_resources;
  id->initiator_depth = cp.initiator_depth;
  mad::Rep r;
  r.starting_psn = id->psn;
  r.responder_resources = cp.responder_resources;
  r.target_ack_delay = 0;
  r.rnr_retry_count = cp.rnr_retry_count;
  if (id->qp_type == IBV_QPT_XRC_RECV) {  // a target names its QP as EECN, on an SRQ (cm_format_rep)
    r.local_eecn = cp.qp_num;
    r.srq = true;
  } else {
    r.local_qpn = cp.qp_num;
    r.initiator_depth = cp.initiator_depth;
    r.end_to_end_flow_control = cp.flow_control;
    r.srq = cp.srq;
  }
  std::memcpy(r.private_data, cp.private_data, cp.private_data_len);
  return -cm.send_rep(id->cm, r);
}

int Ucma::reject(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_reject>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !id->cm || c.private_data_len > mad::kRejPrivateDataSize) return -EINVAL;
  if (id->qp_type == IBV_QPT_UD) {  // a refused resolution (cma_send_sidr_rep: IB_SIDR_REJECT)
    if (c.private_data_len > mad::kSidrRepPrivateDataSize) return -EINVAL;
    mad::SidrRep rep;
    rep.status = uint8_t(mad::SidrStatus::Rejected);
    std::memcpy(rep.private_data, c.private_data, c.private_data_len);
    return -Cm::get().send_sidr_rep(id->cm, rep);
  }
  return -Cm::get().send_rej(id->cm, mad::RejReason::ConsumerReject, c.private_data, c.private_data_len);
}

int Ucma::disconnect(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_disconnect>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !id->cm) return -EINVAL;
  const CmState s = id->cm->state();
  // The peer disconnected first: the CM answered its DREQ already.
  if (s == CmState::Timewait || s == CmState::DreqRcvd || s == CmState::DreqSent) return 0;
  if (s == CmState::RepSent || s == CmState::RepRcvd) Cm::get().establish(id->cm);
  return -Cm::get().send_dreq(id->cm, nullptr, 0);
}

int Ucma::notify(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_notify>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !id->cm) return -EINVAL;
  if (c.event != IBV_EVENT_COMM_EST) return -EINVAL;  // the only event rdma_notify(3) takes
  return -Cm::get().establish(id->cm);
}

}  // namespace hcasim::drv::cm
