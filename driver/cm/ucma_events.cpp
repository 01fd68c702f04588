// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's view of a connection's life: the IB CM's events as rdma_cm events, and the QP
// attributes librdmacm asks for at each step (INIT_QP_ATTR), as Linux's cma.c and cm.c give them.
#include <arpa/inet.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstring>

#include "ucma.h"

namespace hcasim::drv::cm {

void fill_av(const IpAddr& peer, uint8_t tos, uint8_t hop_limit, ib_uverbs_ah_attr& ah) {
  std::memset(&ah, 0, sizeof ah);
  peer.gid(ah.grh.dgid);
  ah.grh.sgid_index = sgid_index_for(ah.grh.dgid);
  ah.grh.hop_limit = hop_limit;
  ah.grh.traffic_class = tos;
  ah.is_global = 1;
  ah.port_num = 1;
}

void Ucma::on_cm_event(UcmaId& id, const CmEvent& e) {
  switch (e.type) {
    case CmEventType::RepReceived: {
      mad::Rep rep;
      if (mad::decode(e.mad, kMadBytes, rep) != mad::DecodeError::Ok) return;
      id.remote_qpn = e.id->remote_qpn();
      id.remote_psn = rep.starting_psn;
      // What each side may have outstanding toward the other (cm.c: cm_rep_handler).
      if (rep.initiator_depth < id.responder_resources) id.responder_resources = rep.initiator_depth;
      if (rep.responder_resources < id.initiator_depth) id.initiator_depth = rep.responder_resources;
      rdma_ucm_conn_param& p = queue_event(id, kConnectResponse, 0).resp.param.conn;
      copy_conn_pd(p, rep.private_data, sizeof rep.private_data);
      p.qp_num = e.id->remote_qpn();
      p.responder_resources = rep.responder_resources;
      p.initiator_depth = rep.initiator_depth;
      p.flow_control = rep.end_to_end_flow_control;
      p.rnr_retry_count = rep.rnr_retry_count;
      p.srq = rep.srq;
      return;
    }
    case CmEventType::RtuReceived: return queue(id, kEstablished, 0);
    case CmEventType::RejReceived: {
      mad::Rej rej;
      if (mad::decode(e.mad, kMadBytes, rej) != mad::DecodeError::Ok) return;
      id.state = UcmaState::RouteResolved;
      rdma_ucm_conn_param& p = queue_event(id, kRejected, e.reason).resp.param.conn;
      copy_conn_pd(p, rej.private_data, sizeof rej.private_data);
      return;
    }
    case CmEventType::ReqError:
    case CmEventType::RepError: return queue(id, kUnreachable, -ETIMEDOUT);
    case CmEventType::DreqReceived:
    case CmEventType::DrepReceived:
    case CmEventType::DreqError: id.state = UcmaState::Disconnect; return queue(id, kDisconnected, 0);
    case CmEventType::TimewaitExit: return queue(id, kTimewaitExit, 0);
    case CmEventType::SidrReqError: return queue(id, kUnreachable, -ETIMEDOUT);
    case CmEventType::ReqReceived:
    case CmEventType::SidrReqReceived:
    case CmEventType::SidrRepReceived: return;  // handler_for sends these elsewhere
  }
}

int Ucma::init_qp_attr(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_init_qp_attr>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !c.response) return id ? -EFAULT : -EINVAL;
  ib_uverbs_qp_attr a{};
  a.qp_state = c.qp_state;
  a.port_num = 1;
  const bool ud = id->qp_type == IBV_QPT_UD;
  switch (c.qp_state) {
    case IBV_QPS_INIT:
      a.qp_attr_mask =
          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
      a.qkey = kUdpQkey;
      // Before a connection exists, no remote access (cma_ib_init_qp_attr); after, what the
      // peer may do (cm_init_qp_init_attr): write always, read and atomics if it may issue them.
      if (id->cm)
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
                            (id->responder_resources ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
      break;
    case IBV_QPS_RTR:
      if (ud) {
        a.qp_attr_mask = IBV_QP_STATE;
        break;
      }
      if (!id->cm) return -EINVAL;
      a.qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      // Types with a responder (cm.c: cm_init_qp_rtr_attr).
      if (id->qp_type == IBV_QPT_RC || id->qp_type == IBV_QPT_XRC_RECV)
        a.qp_attr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = id->remote_qpn;
      a.rq_psn = id->remote_psn;
      a.max_dest_rd_atomic = id->responder_resources;
      a.min_rnr_timer = 0;  // as the Linux CM sets it
      fill_av(id->dst, id->tos, 64, a.ah_attr);
      break;
    case IBV_QPS_RTS:
      a.qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      a.sq_psn = ud ? 0 : id->psn;
      // Reliable types get their ACK timeout; those that send requests also retry them (an XRC
      // target sends none) (cm.c: cm_init_qp_rts_attr).
      if (id->qp_type == IBV_QPT_RC || id->qp_type == IBV_QPT_XRC_SEND || id->qp_type == IBV_QPT_XRC_RECV) {
        if (!id->cm) return -EINVAL;
        a.qp_attr_mask |= IBV_QP_TIMEOUT;
        a.timeout = id->ack_timeout;
      }
      if (id->qp_type == IBV_QPT_RC || id->qp_type == IBV_QPT_XRC_SEND) {
        a.qp_attr_mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        a.retry_cnt = id->retry_count;
        a.rnr_retry = id->rnr_retry_count;
        a.max_rd_atomic = id->initiator_depth;
      }
      break;
    default: return -EINVAL;
  }
  std::memcpy(reinterpret_cast<void*>(uintptr_t(c.response)), &a, sizeof a);
  return 0;
}

}  // namespace hcasim::drv::cm
