// SPDX-License-Identifier: Apache-2.0
// Endpoints: rdma_create_ep (a synchronous id from an rdma_addrinfo: bound for a passive one,
// address and route resolved plus an optional QP for an active one), rdma_destroy_ep, and
// rdma_get_request (the next connection request on a synchronous listener).
#include <cstdlib>
#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

int passive_ep(rdma_cm_id* id, const rdma_addrinfo* res, ibv_pd* pd, const ibv_qp_init_attr* qp_init_attr) {
  const int ret = af_ib_supported() ? bind_addr2(id, res->ai_src_addr, res->ai_src_len)
                                    : rdma_bind_addr(id, res->ai_src_addr);
  if (ret) return ret;
  if (pd) id->pd = pd;
  if (qp_init_attr) {
    CmaId* id_priv = from_id(id);
    id_priv->qp_init_attr = static_cast<ibv_qp_init_attr*>(std::malloc(sizeof(ibv_qp_init_attr)));
    if (!id_priv->qp_init_attr) return err(ENOMEM);
    *id_priv->qp_init_attr = *qp_init_attr;
    id_priv->qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  }
  return 0;
}

int active_ep(rdma_cm_id* id, const rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  constexpr int kTimeoutMs = 2000;
  int ret = af_ib_supported() ? resolve_addr2(id, res->ai_src_addr, res->ai_src_len, res->ai_dst_addr,
                                              res->ai_dst_len, kTimeoutMs)
                              : rdma_resolve_addr(id, res->ai_src_addr, res->ai_dst_addr, kTimeoutMs);
  if (ret) return ret;
  if (res->ai_route_len) {
    ret = rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res->ai_route, res->ai_route_len);
    if (!ret) ret = ucma_complete(id);
  } else {
    ret = rdma_resolve_route(id, kTimeoutMs);
  }
  if (ret) return ret;
  if (qp_init_attr) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    if (rdma_create_qp(id, pd, qp_init_attr)) return -1;
  }
  if (res->ai_connect_len) {
    CmaId* id_priv = from_id(id);
    id_priv->connect = std::malloc(res->ai_connect_len);
    if (!id_priv->connect) return err(ENOMEM);
    std::memcpy(id_priv->connect, res->ai_connect, res->ai_connect_len);
    id_priv->connect_len = res->ai_connect_len;
  }
  return 0;
}

}  // namespace
}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                                        ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res) return err(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space),
                static_cast<ibv_qp_type>(res->ai_qp_type)))
    return -1;
  const int ret = (res->ai_flags & RAI_PASSIVE) ? passive_ep(cm_id, res, pd, qp_init_attr)
                                                : active_ep(cm_id, res, pd, qp_init_attr);
  if (ret) {
    const int e = errno;
    rdma_destroy_ep(cm_id);
    errno = e;
    return ret;
  }
  *id = cm_id;
  return 0;
}

HCASIM_RDMACM_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);  // also frees the passive side's QP template
}

HCASIM_RDMACM_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!listen || !id) return err(EINVAL);
  CmaId* id_priv = from_id(listen);
  if (!id_priv->sync) return err(EINVAL);
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(listen->channel, &event)) return -1;
  int ret = 0;
  if (event->event == RDMA_CM_EVENT_REJECTED)
    ret = err(ECONNREFUSED);
  else if (event->status)
    ret = err(event->status < 0 ? -event->status : event->status);
  else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST)
    ret = err(EINVAL);
  if (!ret && id_priv->qp_init_attr) {
    ibv_qp_init_attr attr = *id_priv->qp_init_attr;
    ret = rdma_create_qp(event->id, listen->pd, &attr);
  }
  if (ret) {
    listen->event = event;  // acknowledged with the next call or rdma_destroy_id
    return ret;
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}
