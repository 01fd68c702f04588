// SPDX-License-Identifier: Apache-2.0
// QP helpers: the kernel's QP attributes for a state (INIT_QP_ATTR), QPs and SRQs created on an
// id with their own CQs and completion channels, and the state moves the CM makes on them.
#include <climits>
#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

/// A connected QP to INIT with the kernel's attributes.
int init_conn_qp(CmaId* id_priv, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(&id_priv->id, &attr, &mask)) return -1;
  return seterrno(ibv_modify_qp(qp, &attr, mask));
}

/// A UD QP to INIT (kernel's attributes: P_Key index, port, Q_Key), then RTR and RTS.
int init_ud_qp(CmaId* id_priv, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(&id_priv->id, &attr, &mask)) return -1;
  if (int ret = ibv_modify_qp(qp, &attr, mask)) return err(ret);
  attr.qp_state = IBV_QPS_RTR;
  if (int ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE)) return err(ret);
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return seterrno(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

/// Destroys the CQs and completion channels create_cqs() made for @p id.
void destroy_cqs(rdma_cm_id* id) {
  if (id->qp_type == IBV_QPT_XRC_RECV && id->srq) return;
  if (id->recv_cq) ibv_destroy_cq(id->recv_cq);
  if (id->send_cq && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
  id->recv_cq = id->send_cq = nullptr;
  if (id->recv_cq_channel) ibv_destroy_comp_channel(id->recv_cq_channel);
  if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
    ibv_destroy_comp_channel(id->send_cq_channel);
  id->recv_cq_channel = id->send_cq_channel = nullptr;
}

/// A CQ (with its own completion channel) of @p size for each non-zero size.
int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) goto fail;
    id->recv_cq = ibv_create_cq(id->verbs, static_cast<int>(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) goto fail;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) goto fail;
    id->send_cq = ibv_create_cq(id->verbs, static_cast<int>(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) goto fail;
  }
  return 0;
fail:
  destroy_cqs(id);
  return -1;
}

/// Records the QP's ECE values; for a QP answering a request, adopts the requester's options.
int init_ece(CmaId* id_priv, ibv_qp* qp) {
  ibv_ece ece{};
  int ret = ibv_query_ece(qp, &ece);
  if (ret && ret != EOPNOTSUPP) return err(ret);
  id_priv->local_ece.vendor_id = ece.vendor_id;
  id_priv->local_ece.options = ece.options;
  if (!id_priv->remote_ece.vendor_id) return 0;
  if (id_priv->remote_ece.vendor_id != id_priv->local_ece.vendor_id) {
    ece.vendor_id = id_priv->local_ece.vendor_id;
    ece.options = 0;
  } else {
    ece.vendor_id = id_priv->remote_ece.vendor_id;
    ece.options = id_priv->remote_ece.options;
  }
  ret = ibv_set_ece(qp, &ece);
  return (ret && ret != EOPNOTSUPP) ? err(ret) : 0;
}

int set_local_ece(CmaId* id_priv, ibv_qp* qp) {
  if (!id_priv->remote_ece.vendor_id) return 0;
  ibv_ece ece{};
  const int ret = ibv_query_ece(qp, &ece);
  if (ret && ret != EOPNOTSUPP) return err(ret);
  id_priv->local_ece.options = ece.options;
  return 0;
}

/// Fills in what rdma_create_qp_ex defaults: PD, XRC domain; EINVAL for conflicting CQs.
int check_qp_attr(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd;
  } else if (id->verbs != attr->pd->context) {
    return err(EINVAL);
  }
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
    return err(EINVAL);
  if (id->qp_type == IBV_QPT_XRC_RECV && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
    attr->xrcd = get_xrcd(from_id(id)->cma_dev);
    if (!attr->xrcd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  }
  return 0;
}

}  // namespace

int modify_qp_rtr(rdma_cm_id* id, uint8_t resp_res) {
  if (!id->qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;  // refresh the INIT attributes first, as rdma-core does
  if (rdma_init_qp_attr(id, &attr, &mask)) return -1;
  if (int ret = ibv_modify_qp(id->qp, &attr, mask)) return err(ret);
  attr.qp_state = IBV_QPS_RTR;
  if (rdma_init_qp_attr(id, &attr, &mask)) return -1;
  // rdma-core masks off the RoCE-only bits 21-24 on InfiniBand ports (an old kernel's bug).
  CmaDevice* dev = from_id(id)->cma_dev;
  if (dev && id->port_num >= 1 && id->port_num <= dev->port_cnt &&
      dev->link_layer[id->port_num - 1] == IBV_LINK_LAYER_INFINIBAND)
    mask &= UINT_MAX ^ 0xe00000;
  if (resp_res != RDMA_MAX_RESP_RES) attr.max_dest_rd_atomic = resp_res;
  return seterrno(ibv_modify_qp(id->qp, &attr, mask));
}

int modify_qp_rts(rdma_cm_id* id, uint8_t init_depth) {
  if (!id->qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTS;
  if (rdma_init_qp_attr(id, &attr, &mask)) return -1;
  if (init_depth != RDMA_MAX_INIT_DEPTH) attr.max_rd_atomic = init_depth;
  return seterrno(ibv_modify_qp(id->qp, &attr, mask));
}

int modify_qp_err(rdma_cm_id* id) {
  if (!id->qp) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return seterrno(ibv_modify_qp(id->qp, &attr, IBV_QP_STATE));
}

int modify_qp_sqd(rdma_cm_id* id) {
  if (!id->qp) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_SQD;
  return seterrno(ibv_modify_qp(id->qp, &attr, IBV_QP_STATE));
}

}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!id || !qp_attr || !qp_attr_mask) return err(EINVAL);
  ib_uverbs_qp_attr resp{};
  kabi::rdma_ucm_init_qp_attr cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = from_id(id)->handle;
  cmd.qp_state = qp_attr->qp_state;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_INIT_QP_ATTR, cmd, sizeof resp)) return -1;
  ibv_copy_qp_attr_from_kern(qp_attr, &resp);
  *qp_attr_mask = static_cast<int>(resp.qp_attr_mask);
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!id || !attr || id->qp) return err(EINVAL);
  CmaId* id_priv = from_id(id);
  if (check_qp_attr(id, attr)) return -1;
  const uint32_t send = (attr->send_cq || id->send_cq) ? 0 : attr->cap.max_send_wr;
  const uint32_t recv = (attr->recv_cq || id->recv_cq) ? 0 : attr->cap.max_recv_wr;
  if (create_cqs(id, send, recv)) return -1;
  if (!attr->send_cq) attr->send_cq = id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
  if (id->srq && !attr->srq) attr->srq = id->srq;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (!qp) {
    const int e = errno;
    destroy_cqs(id);
    errno = e;
    return -1;
  }
  int ret = init_ece(id_priv, qp);
  if (!ret) ret = id->qp_type == IBV_QPT_UD ? init_ud_qp(id_priv, qp) : init_conn_qp(id_priv, qp);
  if (!ret) ret = set_local_ece(id_priv, qp);
  if (ret) {
    const int e = errno;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    errno = e;
    return ret;
  }
  id->pd = qp->pd;
  id->qp = qp;
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!id || !qp_init_attr) return err(EINVAL);
  ibv_qp_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, qp_init_attr, sizeof(*qp_init_attr));
  attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr_ex.pd = pd ? pd : id->pd;
  const int ret = rdma_create_qp_ex(id, &attr_ex);
  std::memcpy(qp_init_attr, &attr_ex, sizeof(*qp_init_attr));
  return ret;
}

HCASIM_RDMACM_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
  if (id->qp) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(id);
}

HCASIM_RDMACM_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!id || !attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return err(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = id->pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (attr->srq_type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
      attr->xrcd = get_xrcd(from_id(id)->cma_dev);
      if (!attr->xrcd) return -1;
    }
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
      if (create_cqs(id, 0, attr->attr.max_wr)) return -1;
      attr->cq = id->recv_cq;
    }
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (!srq) {
    const int e = errno;
    destroy_cqs(id);
    errno = e;
    return -1;
  }
  if (!id->pd) id->pd = attr->pd;
  id->srq = srq;
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!id || !attr) return err(EINVAL);
  ibv_srq_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, attr, sizeof(*attr));
  attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  attr_ex.pd = pd;
  const int ret = rdma_create_srq_ex(id, &attr_ex);
  std::memcpy(attr, &attr_ex, sizeof(*attr));
  return ret;
}

HCASIM_RDMACM_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
  if (id->srq) ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  destroy_cqs(id);
}
