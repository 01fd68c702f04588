// SPDX-License-Identifier: Apache-2.0
// Events: GET_EVENT from the kernel, the library's own work on each event before the program
// sees it (queries after address and route resolution, a new id for a connection request, the
// active side's RTR/RTS/ACCEPT on a connect response, attaching a QP to a joined group), the
// acknowledgement that lets rdma_destroy_id finish, and the event names.
#include <cstdlib>
#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

/// The failure of the last call as an event status (a negative errno, as the kernel reports).
int failed_status() { return errno ? -errno : -EIO; }

void copy_conn_event(CmaEvent* evt, const kabi::rdma_ucm_conn_param& src) {
  rdma_conn_param& dst = evt->event.param.conn;
  dst.private_data_len = src.private_data_len;
  if (src.private_data_len) {
    std::memcpy(evt->private_data, src.private_data, src.private_data_len);
    dst.private_data = evt->private_data;
  }
  dst.responder_resources = src.responder_resources;
  dst.initiator_depth = src.initiator_depth;
  dst.flow_control = src.flow_control;
  dst.retry_count = src.retry_count;
  dst.rnr_retry_count = src.rnr_retry_count;
  dst.srq = src.srq;
  dst.qp_num = src.qp_num;
}

void copy_ud_event(CmaEvent* evt, kabi::rdma_ucm_ud_param& src) {
  rdma_ud_param& dst = evt->event.param.ud;
  dst.private_data_len = src.private_data_len;
  if (src.private_data_len) {
    std::memcpy(evt->private_data, src.private_data, src.private_data_len);
    dst.private_data = evt->private_data;
  }
  ibv_copy_ah_attr_from_kern(&dst.ah_attr, &src.ah_attr);
  dst.qp_num = src.qp_num;
  dst.qkey = src.qkey;
}

void process_addr_resolved(CmaEvent* evt) {
  rdma_cm_id* id = &evt->id_priv->id;
  int ret = af_ib_supported() ? query_addr(id) : query_route(id);
  if (!ret && !id->verbs) ret = err(ENODEV);
  if (!ret && af_ib_supported() && id->verbs->device->transport_type == IBV_TRANSPORT_IB) ret = query_gid(id);
  if (ret) {
    evt->event.status = failed_status();
    evt->event.event = RDMA_CM_EVENT_ADDR_ERROR;
  }
}

void process_route_resolved(CmaEvent* evt) {
  rdma_cm_id* id = &evt->id_priv->id;
  if (!id->verbs || id->verbs->device->transport_type != IBV_TRANSPORT_IB) return;
  if (af_ib_supported() ? query_path(id) : query_route(id)) {
    evt->event.status = failed_status();
    evt->event.event = RDMA_CM_EVENT_ROUTE_ERROR;
  }
}

int query_req_info(rdma_cm_id* id) {
  if (!af_ib_supported()) return query_route(id);
  if (query_addr(id) || query_gid(id)) return -1;
  return query_path(id);
}

/// A connection request: a new id on the listener's channel for kernel id @p handle.
int process_conn_req(CmaEvent* evt, uint32_t handle, const kabi::rdma_ucm_ece& ece) {
  CmaId* listen = evt->id_priv;
  CmaId* id_priv = alloc_id(listen->id.channel, listen->id.context, listen->id.ps, listen->id.qp_type);
  if (!id_priv) {
    const int e = errno;
    destroy_kern_id(listen->id.channel->fd, handle);
    complete_event(listen);
    return err(e);
  }
  evt->event.listen_id = &listen->id;
  evt->event.id = &id_priv->id;
  id_priv->handle = handle;
  insert_id(id_priv);
  id_priv->initiator_depth = evt->event.param.conn.initiator_depth;
  id_priv->responder_resources = evt->event.param.conn.responder_resources;
  id_priv->remote_ece.vendor_id = ece.vendor_id;
  id_priv->remote_ece.options = ece.attr_mod;
  // A synchronous listener's requests get channels of their own.
  if ((listen->sync && rdma_migrate_id(&id_priv->id, nullptr)) || query_req_info(&id_priv->id)) {
    const int e = errno;
    rdma_destroy_id(&id_priv->id);
    complete_event(listen);
    return err(e);
  }
  return 0;
}

int process_join(CmaEvent* evt) {
  CmaMulticast* mc = evt->mc;
  mc->mgid = evt->event.param.ud.ah_attr.grh.dgid;
  mc->mlid = evt->event.param.ud.ah_attr.dlid;
  rdma_cm_id* id = &evt->id_priv->id;
  if (!id->qp || mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return 0;
  return seterrno(ibv_attach_mcast(id->qp, &mc->mgid, mc->mlid));
}

void complete_mc_event(CmaMulticast* mc) {
  CmaId* id_priv = mc->id_priv;
  pthread_mutex_lock(&id_priv->mut);
  ++mc->events_completed;
  pthread_cond_signal(&mc->cond);
  ++id_priv->events_completed;
  pthread_cond_signal(&id_priv->cond);
  pthread_mutex_unlock(&id_priv->mut);
}

void process_conn_response(CmaEvent* evt, kabi::rdma_ucm_event_resp& resp) {
  CmaId* id_priv = evt->id_priv;
  copy_conn_event(evt, resp.param.conn);
  if (!id_priv->id.qp) {  // the program finishes with rdma_establish()
    id_priv->remote_ece.vendor_id = resp.ece.vendor_id;
    id_priv->remote_ece.options = resp.ece.attr_mod;
    return;
  }
  if (process_conn_resp_ece(id_priv, resp.ece) == 0) {
    evt->event.event = RDMA_CM_EVENT_ESTABLISHED;
  } else {
    evt->event.status = failed_status();
    evt->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
    id_priv->connect_error = true;
  }
}

/// Multicast events carry the group as uid; their id is the group's.
void process_mc_event(CmaEvent* evt, kabi::rdma_ucm_event_resp& resp) {
  evt->mc = reinterpret_cast<CmaMulticast*>(static_cast<uintptr_t>(resp.uid));
  evt->id_priv = evt->mc->id_priv;
  evt->event.id = &evt->id_priv->id;
  if (resp.event == RDMA_CM_EVENT_MULTICAST_JOIN) {
    copy_ud_event(evt, resp.param.ud);
    if (process_join(evt)) {
      evt->event.status = failed_status();
      evt->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
    }
  }
  evt->event.param.ud.private_data = evt->mc->context;
}

/// The library's work on one event. False: the event was consumed here; fetch the next one.
bool process_event(CmaEvent* evt, kabi::rdma_ucm_event_resp& resp) {
  // A multicast event's uid is its group, not an id: look at the id only once the type says so.
  CmaId* id_priv = evt->id_priv;
  switch (resp.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: process_addr_resolved(evt); return true;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: process_route_resolved(evt); return true;
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      if (id_priv->id.qp_type == IBV_QPT_UD)
        copy_ud_event(evt, resp.param.ud);
      else
        copy_conn_event(evt, resp.param.conn);
      return process_conn_req(evt, resp.id, resp.ece) == 0;
    case RDMA_CM_EVENT_CONNECT_RESPONSE: process_conn_response(evt, resp); return true;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_DISCONNECTED:
      if (id_priv->connect_error) {  // already reported as CONNECT_ERROR
        complete_event(id_priv);
        return false;
      }
      copy_conn_event(evt, resp.param.conn);
      if (resp.event == RDMA_CM_EVENT_REJECTED) modify_qp_err(&id_priv->id);
      return true;
    case RDMA_CM_EVENT_MULTICAST_JOIN:
    case RDMA_CM_EVENT_MULTICAST_ERROR: process_mc_event(evt, resp); return true;
    default:  // ESTABLISHED, UNREACHABLE, CONNECT_ERROR, DEVICE_REMOVAL, ...
      if (id_priv->id.qp_type == IBV_QPT_UD)
        copy_ud_event(evt, resp.param.ud);
      else
        copy_conn_event(evt, resp.param.conn);
      return true;
  }
}

/// The id an event is for; nullptr when it must be dropped (then fetch the next one).
CmaId* event_owner(const kabi::rdma_ucm_event_resp& resp) {
  if (resp.uid) return reinterpret_cast<CmaId*>(static_cast<uintptr_t>(resp.uid));
  // Only old kernels report uid 0 (for ESTABLISHED); find the id by its kernel handle.
  CmaId* id_priv = lookup_id(resp.id);
  if (id_priv && resp.event != RDMA_CM_EVENT_ESTABLISHED) {
    complete_event(id_priv);
    return nullptr;
  }
  return id_priv;
}

}  // namespace

}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (ucma_init()) return -1;
  if (!channel || !event) return err(EINVAL);
  auto* evt = static_cast<CmaEvent*>(std::malloc(sizeof(CmaEvent)));
  if (!evt) return err(ENOMEM);
  for (;;) {
    std::memset(evt, 0, sizeof *evt);
    kabi::rdma_ucm_event_resp resp{};
    kabi::rdma_ucm_get_event cmd{};
    cmd.response = reinterpret_cast<uintptr_t>(&resp);
    if (kern_cmd(channel->fd, kabi::RDMA_USER_CM_CMD_GET_EVENT, cmd, sizeof resp)) {
      const int e = errno;
      std::free(evt);
      return err(e);
    }
    evt->event.event = static_cast<rdma_cm_event_type>(resp.event);
    evt->id_priv = event_owner(resp);
    if (!evt->id_priv) continue;
    evt->event.id = &evt->id_priv->id;
    evt->event.status = static_cast<int>(resp.status);
    if (!process_event(evt, resp)) continue;
    *event = &evt->event;
    return 0;
  }
}

HCASIM_RDMACM_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return err(EINVAL);
  CmaEvent* evt = from_event(event);
  if (evt->mc)
    complete_mc_event(evt->mc);
  else
    complete_event(evt->id_priv);
  std::free(evt);
  return 0;
}

HCASIM_RDMACM_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",  "RDMA_CM_EVENT_ADDR_ERROR",      "RDMA_CM_EVENT_ROUTE_RESOLVED",
      "RDMA_CM_EVENT_ROUTE_ERROR",    "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",  "RDMA_CM_EVENT_UNREACHABLE",     "RDMA_CM_EVENT_REJECTED",
      "RDMA_CM_EVENT_ESTABLISHED",    "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
      "RDMA_CM_EVENT_TIMEWAIT_EXIT",
  };
  const auto i = static_cast<unsigned>(event);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "UNKNOWN EVENT";
}
