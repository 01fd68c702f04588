// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's UD ids: rdma_connect on a UD id is a service ID resolution (IBTA 12.11: SIDR_REQ
// and SIDR_REP), which tells the requester the QP number and Q_Key that serve a port; there is
// no connection, so no RTU, DREQ or time wait (Linux's cma_resolve_ib_udp, cma_sidr_rep_handler).
#include <arpa/inet.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstring>

#include "ucma.h"

namespace hcasim::drv::cm {

int Ucma::connect_ud(UcmaId& id, const rdma_ucm_conn_param& cp) {
  if (cp.private_data_len > mad::kSidrReqPrivateDataSize - kCmaHdrLen) return -EINVAL;
  mad::SidrReq r;
  r.partition_key = 0xffff;
  r.service_id = (uint64_t(id.ps) << 16) + ntohs(id.dst.port());
  put_cma_hdr(r.private_data, id.src, id.dst);
  std::memcpy(r.private_data + kCmaHdrLen, cp.private_data, cp.private_data_len);
  uint8_t dgid[16];
  id.dst.gid(dgid);
  id.cm = Cm::get().create_id(handler_for(id.handle));
  id.state = UcmaState::Connect;
  // CMA_CM_RESPONSE_TIMEOUT (20: 4.3 s) and CMA_MAX_CM_RETRIES (15), as for a REQ.
  return -Cm::get().send_sidr_req(id.cm, id.agent, r, dgid, 20, 15);
}

void Ucma::on_sidr_request(UcmaId& listener, const CmEvent& e) {
  mad::SidrReq req;
  if (mad::decode(e.mad, kMadBytes, req) != mad::DecodeError::Ok) return;
  auto child = std::make_unique<UcmaId>();
  UcmaId& c = *child;
  c.handle = next_handle_++;
  c.child = true;
  c.uid = listener.uid;
  c.ch = listener.ch;
  c.ps = listener.ps;
  c.qp_type = listener.qp_type;
  c.state = UcmaState::Connect;
  // A request the listener does not take (another address or family) is refused, as Linux's CM
  // refuses one its consumer turned down: SIDR_REP status 2.
  if (!get_cma_hdr(req.private_data, listener.src.port(), c.dst, c.src) ||
      !listener_takes(listener.src, c.src)) {
    mad::SidrRep rep;
    rep.status = uint8_t(mad::SidrStatus::Rejected);
    return (void)Cm::get().send_sidr_rep(e.id, rep);
  }
  c.agent = e.id->agent();
  c.cm = e.id;
  ids_[c.handle] = std::move(child);
  Cm::get().set_handler(e.id, handler_for(c.handle));
  UcmaEvent& ev = queue_event(c, kConnectRequest, 0);
  ev.credit = listener.handle;
  rdma_ucm_ud_param& p = ev.resp.param.ud;
  std::memcpy(p.private_data, req.private_data + kCmaHdrLen, sizeof req.private_data - kCmaHdrLen);
  p.private_data_len = uint8_t(sizeof req.private_data - kCmaHdrLen);
  fill_av(c.dst, c.tos, 64, p.ah_attr);
}

int Ucma::accept_ud(UcmaId& id, const rdma_ucm_conn_param& cp) {
  if (!id.cm || id.cm->state() != CmState::SidrReqRcvd) return -EINVAL;
  if (cp.private_data_len > mad::kSidrRepPrivateDataSize) return -EINVAL;
  mad::SidrRep rep;
  rep.status = uint8_t(mad::SidrStatus::Valid);
  rep.qpn = cp.qp_num;
  rep.qkey = cp.qkey ? cp.qkey : kUdpQkey;
  std::memcpy(rep.private_data, cp.private_data, cp.private_data_len);
  return -Cm::get().send_sidr_rep(id.cm, rep);
}

void Ucma::on_sidr_reply(UcmaId& id, const CmEvent& e) {
  mad::SidrRep rep;
  if (mad::decode(e.mad, kMadBytes, rep) != mad::DecodeError::Ok) return;
  if (rep.status != uint8_t(mad::SidrStatus::Valid)) {
    id.state = UcmaState::RouteResolved;
    return queue(id, kUnreachable, rep.status);  // the SIDR status, as cma_sidr_rep_handler gives it
  }
  rdma_ucm_ud_param& p = queue_event(id, kEstablished, 0).resp.param.ud;
  p.qp_num = rep.qpn;
  p.qkey = rep.qkey;
  fill_av(id.dst, id.tos, 64, p.ah_attr);
  std::memcpy(p.private_data, rep.private_data, sizeof rep.private_data);
  p.private_data_len = uint8_t(sizeof rep.private_data);
}

}  // namespace hcasim::drv::cm
