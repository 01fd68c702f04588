// SPDX-License-Identifier: Apache-2.0
// Connections: connect, accept, reject, notify, disconnect, establish, and the active side's
// answer to the connect response (QP to RTR and RTS, then ACCEPT, after which the kernel sends
// the RTU), with the ECE exchange the request and reply carry.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

/// For the TCP port space: a QP or parameters are needed, and the depths must fit the device.
int valid_param(CmaId* id_priv, const rdma_conn_param* param) {
  if (id_priv->id.ps != RDMA_PS_TCP) return 0;
  if (!id_priv->id.qp && !param) return err(EINVAL);
  if (!param) return 0;
  CmaDevice* dev = id_priv->cma_dev;
  if (!dev) return err(EINVAL);
  if (param->responder_resources != RDMA_MAX_RESP_RES &&
      param->responder_resources > dev->max_responder_resources)
    return err(EINVAL);
  if (param->initiator_depth != RDMA_MAX_INIT_DEPTH && param->initiator_depth > dev->max_initiator_depth)
    return err(EINVAL);
  return 0;
}

void copy_conn_param(CmaId* id_priv, kabi::rdma_ucm_conn_param* dst, const rdma_conn_param* src,
                     uint32_t qp_num, uint8_t srq) {
  dst->qp_num = qp_num;
  dst->srq = srq;
  dst->responder_resources = id_priv->responder_resources;
  dst->initiator_depth = id_priv->initiator_depth;
  dst->valid = 1;
  size_t len = 0;
  if (id_priv->connect_len) {  // rdma_create_ep's private data goes first
    len = std::min<size_t>(id_priv->connect_len, RDMA_MAX_PRIVATE_DATA);
    std::memcpy(dst->private_data, id_priv->connect, len);
  }
  if (src) {
    dst->flow_control = src->flow_control;
    dst->retry_count = src->retry_count;
    dst->rnr_retry_count = src->rnr_retry_count;
    if (src->private_data && src->private_data_len) {
      const size_t n = std::min<size_t>(src->private_data_len, RDMA_MAX_PRIVATE_DATA - len);
      std::memcpy(dst->private_data + len, src->private_data, n);
      len += n;
    }
  } else {
    dst->retry_count = 7;
    dst->rnr_retry_count = 7;
  }
  dst->private_data_len = static_cast<__u8>(len);
}

int reject_with_reason(rdma_cm_id* id, const void* private_data, uint8_t private_data_len, uint8_t reason) {
  if (!id) return err(EINVAL);
  kabi::rdma_ucm_reject cmd{};
  cmd.id = from_id(id)->handle;
  if (private_data && private_data_len) {
    std::memcpy(cmd.private_data, private_data, private_data_len);
    cmd.private_data_len = private_data_len;
  }
  cmd.reason = reason;
  return kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_REJECT, cmd);
}

}  // namespace

int process_conn_resp(CmaId* id_priv) {
  rdma_cm_id* id = &id_priv->id;
  int ret = modify_qp_rtr(id, RDMA_MAX_RESP_RES);
  if (!ret) ret = modify_qp_rts(id, RDMA_MAX_INIT_DEPTH);
  if (!ret) {
    kabi::rdma_ucm_accept cmd{};
    cmd.id = id_priv->handle;
    ret = kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_ACCEPT, cmd);
  }
  if (ret) {
    const int e = errno;
    modify_qp_err(id);
    errno = e;
  }
  return ret;
}

int process_conn_resp_ece(CmaId* id_priv, const kabi::rdma_ucm_ece& ece) {
  ibv_ece local{};
  local.vendor_id = ece.vendor_id;
  local.options = ece.attr_mod;
  if (!ece.vendor_id) {  // the peer (or its kernel) does not do ECE
    local.vendor_id = id_priv->local_ece.vendor_id;
    local.options = 0;
  } else if (ece.vendor_id != id_priv->local_ece.vendor_id) {
    modify_qp_err(&id_priv->id);
    return err(EINVAL);
  }
  id_priv->remote_ece.vendor_id = ece.vendor_id;
  int ret = ibv_set_ece(id_priv->id.qp, &local);
  if (ret && ret != EOPNOTSUPP) return err(ret);
  if (process_conn_resp(id_priv)) return -1;
  ret = ibv_query_ece(id_priv->id.qp, &local);
  if (ret && ret != EOPNOTSUPP) {
    modify_qp_err(&id_priv->id);
    return err(ret);
  }
  id_priv->local_ece.options = ret == EOPNOTSUPP ? 0 : local.options;
  return 0;
}

}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!id) return err(EINVAL);
  CmaId* id_priv = from_id(id);
  if (valid_param(id_priv, conn_param)) return -1;
  CmaDevice* dev = id_priv->cma_dev;
  const uint8_t max_init = dev ? dev->max_initiator_depth : 0;
  const uint8_t max_resp = dev ? dev->max_responder_resources : 0;
  const bool given_init = conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH;
  const bool given_resp = conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES;
  id_priv->initiator_depth = given_init ? conn_param->initiator_depth : max_init;
  id_priv->responder_resources = given_resp ? conn_param->responder_resources : max_resp;
  uint32_t qp_num = conn_param ? conn_param->qp_num : 0;
  uint8_t srq = conn_param ? conn_param->srq : 0;
  if (id->qp) {
    qp_num = id->qp->qp_num;
    srq = id->qp->srq ? 1 : 0;
  }
  kabi::rdma_ucm_connect cmd{};
  cmd.id = id_priv->handle;
  copy_conn_param(id_priv, &cmd.conn_param, conn_param, qp_num, srq);
  cmd.ece.vendor_id = id_priv->local_ece.vendor_id;
  cmd.ece.attr_mod = id_priv->local_ece.options;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_CONNECT, cmd)) return -1;
  if (id_priv->connect_len) {
    std::free(id_priv->connect);
    id_priv->connect = nullptr;
    id_priv->connect_len = 0;
  }
  return ucma_complete(id);
}

HCASIM_RDMACM_EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!id || (!id->qp && !conn_param)) return err(EINVAL);
  CmaId* id_priv = from_id(id);
  const uint32_t qp_num = id->qp ? id->qp->qp_num : conn_param->qp_num;
  const uint8_t srq = id->qp ? (id->qp->srq ? 1 : 0) : conn_param->srq;
  if (valid_param(id_priv, conn_param)) return -1;
  CmaDevice* dev = id_priv->cma_dev;
  if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH)
    id_priv->initiator_depth =
        std::min(id_priv->initiator_depth, dev ? dev->max_initiator_depth : uint8_t{0});
  else
    id_priv->initiator_depth = conn_param->initiator_depth;
  if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES)
    id_priv->responder_resources =
        std::min(id_priv->responder_resources, dev ? dev->max_responder_resources : uint8_t{0});
  else
    id_priv->responder_resources = conn_param->responder_resources;
  const bool ud = id->qp_type == IBV_QPT_UD;
  if (!ud && (modify_qp_rtr(id, id_priv->responder_resources) || modify_qp_rts(id, id_priv->initiator_depth)))
    return -1;
  kabi::rdma_ucm_accept cmd{};
  cmd.id = id_priv->handle;
  cmd.uid = reinterpret_cast<uintptr_t>(id_priv);
  copy_conn_param(id_priv, &cmd.conn_param, conn_param, qp_num, srq);
  cmd.ece.vendor_id = id_priv->remote_ece.vendor_id;  // answer with the id the request carried
  cmd.ece.attr_mod = id_priv->local_ece.options;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_ACCEPT, cmd)) {
    const int e = errno;
    modify_qp_err(id);
    errno = e;
    return -1;
  }
  if (!ud) return ucma_complete(id);
  if (id_priv->sync && id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return reject_with_reason(id, private_data, private_data_len, 0);
}

HCASIM_RDMACM_EXPORT int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  constexpr uint8_t kVendorOptionNotSupported = 35;  // IBTA CM REJ reason
  return reject_with_reason(id, private_data, private_data_len, kVendorOptionNotSupported);
}

HCASIM_RDMACM_EXPORT int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (!id) return err(EINVAL);
  kabi::rdma_ucm_notify cmd{};
  cmd.id = from_id(id)->handle;
  cmd.event = static_cast<__u32>(event);
  return kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_NOTIFY, cmd);
}

HCASIM_RDMACM_EXPORT int rdma_disconnect(rdma_cm_id* id) {
  if (!id || !id->verbs || !id->verbs->device) return err(EINVAL);
  int ret;
  switch (id->verbs->device->transport_type) {
    case IBV_TRANSPORT_IB: ret = modify_qp_err(id); break;
    case IBV_TRANSPORT_IWARP: ret = modify_qp_sqd(id); break;
    default: ret = err(EINVAL); break;
  }
  if (ret) return ret;
  kabi::rdma_ucm_disconnect cmd{};
  cmd.id = from_id(id)->handle;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_DISCONNECT, cmd)) return -1;
  return ucma_complete(id);
}

HCASIM_RDMACM_EXPORT int rdma_establish(rdma_cm_id* id) {
  if (!id || id->qp) return err(EINVAL);
  // Without a QP, process_conn_resp() only sends ACCEPT (the kernel then sends the RTU).
  return process_conn_resp(from_id(id));
}
