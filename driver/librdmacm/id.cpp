// SPDX-License-Identifier: Apache-2.0
// CM ids: creation and destruction (waiting for the program to acknowledge every event the
// kernel reported), moving an id between channels, options, ports and ECE values.
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

std::mutex g_ids_mut;
std::unordered_map<uint32_t, CmaId*>& g_ids =
    *new std::unordered_map<uint32_t, CmaId*>;  // handle -> id; never destroyed

void remove_id(CmaId* id_priv) {
  std::lock_guard<std::mutex> lock(g_ids_mut);
  auto it = g_ids.find(id_priv->handle);
  if (it != g_ids.end() && it->second == id_priv) g_ids.erase(it);
}

}  // namespace

void insert_id(CmaId* id_priv) {
  std::lock_guard<std::mutex> lock(g_ids_mut);
  g_ids[id_priv->handle] = id_priv;
}

CmaId* lookup_id(uint32_t handle) {
  std::lock_guard<std::mutex> lock(g_ids_mut);
  auto it = g_ids.find(handle);
  return it == g_ids.end() ? nullptr : it->second;
}

void complete_event(CmaId* id_priv) {
  pthread_mutex_lock(&id_priv->mut);
  ++id_priv->events_completed;
  pthread_cond_signal(&id_priv->cond);
  pthread_mutex_unlock(&id_priv->mut);
}

CmaId* alloc_id(rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type) {
  auto* id_priv = static_cast<CmaId*>(std::calloc(1, sizeof(CmaId)));
  if (!id_priv) {
    errno = ENOMEM;
    return nullptr;
  }
  id_priv->id.context = context;
  id_priv->id.ps = ps;
  id_priv->id.qp_type = qp_type;
  id_priv->handle = 0xFFFFFFFFu;
  pthread_mutex_init(&id_priv->mut, nullptr);
  pthread_cond_init(&id_priv->cond, nullptr);
  if (channel) {
    id_priv->id.channel = channel;
    return id_priv;
  }
  id_priv->id.channel = rdma_create_event_channel();
  if (!id_priv->id.channel) {
    free_id(id_priv);
    return nullptr;
  }
  id_priv->sync = true;
  return id_priv;
}

void free_id(CmaId* id_priv) {
  const int saved = errno;
  remove_id(id_priv);
  if (id_priv->cma_dev) put_device(id_priv->cma_dev);
  pthread_cond_destroy(&id_priv->cond);
  pthread_mutex_destroy(&id_priv->mut);
  std::free(id_priv->id.route.path_rec);
  if (id_priv->sync && id_priv->id.channel) rdma_destroy_event_channel(id_priv->id.channel);
  std::free(id_priv->connect);
  std::free(id_priv->qp_init_attr);
  while (CmaMulticast* mc = id_priv->mc_list) {  // groups never left: the kernel dropped them
    id_priv->mc_list = mc->next;
    pthread_cond_destroy(&mc->cond);
    std::free(mc);
  }
  std::free(id_priv);
  errno = saved;
}

int create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps,
              ibv_qp_type qp_type) {
  if (ucma_init()) return -1;
  if (!id) return err(EINVAL);
  CmaId* id_priv = alloc_id(channel, context, ps, qp_type);
  if (!id_priv) return -1;  // errno: ENOMEM, or why the private channel failed
  kabi::rdma_ucm_create_id_resp resp{};
  kabi::rdma_ucm_create_id cmd{};
  cmd.uid = reinterpret_cast<uintptr_t>(id_priv);
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.ps = static_cast<__u16>(ps);
  cmd.qp_type = static_cast<__u8>(qp_type);
  if (kern_cmd(id_priv->id.channel->fd, kabi::RDMA_USER_CM_CMD_CREATE_ID, cmd, sizeof resp)) {
    free_id(id_priv);
    return -1;
  }
  id_priv->handle = resp.id;
  insert_id(id_priv);
  *id = &id_priv->id;
  return 0;
}

int destroy_kern_id(int fd, uint32_t handle) {
  kabi::rdma_ucm_destroy_id_resp resp{};
  kabi::rdma_ucm_destroy_id cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = handle;
  if (kern_cmd(fd, kabi::RDMA_USER_CM_CMD_DESTROY_ID, cmd, sizeof resp)) return -1;
  return static_cast<int>(resp.events_reported);
}

}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                                        rdma_port_space ps) {
  const ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
  return create_id(channel, id, context, ps, qp_type);
}

HCASIM_RDMACM_EXPORT int rdma_destroy_id(rdma_cm_id* id) {
  if (!id) return err(EINVAL);
  CmaId* id_priv = from_id(id);
  const int reported = destroy_kern_id(id->channel->fd, id_priv->handle);
  if (reported < 0) return -1;
  if (id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  pthread_mutex_lock(&id_priv->mut);
  while (id_priv->events_completed < reported) pthread_cond_wait(&id_priv->cond, &id_priv->mut);
  pthread_mutex_unlock(&id_priv->mut);
  free_id(id_priv);
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  CmaId* id_priv = from_id(id);
  if (id_priv->sync && !channel) return err(EINVAL);
  const bool sync = channel == nullptr;
  if (sync && !(channel = rdma_create_event_channel())) return -1;
  kabi::rdma_ucm_migrate_resp resp{};
  kabi::rdma_ucm_migrate_id cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = id_priv->handle;
  cmd.fd = static_cast<__u32>(id->channel->fd);
  // Written to the destination channel, naming the source channel's descriptor.
  if (kern_cmd(channel->fd, kabi::RDMA_USER_CM_CMD_MIGRATE_ID, cmd, sizeof resp)) {
    if (sync) rdma_destroy_event_channel(channel);
    return -1;
  }
  if (id_priv->sync) {
    if (id->event) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    rdma_destroy_event_channel(id->channel);
  }
  pthread_mutex_lock(&id_priv->mut);
  id_priv->sync = sync;
  id->channel = channel;
  while (id_priv->events_completed < static_cast<int>(resp.events_reported))
    pthread_cond_wait(&id_priv->cond, &id_priv->mut);
  pthread_mutex_unlock(&id_priv->mut);
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval,
                                         size_t optlen) {
  kabi::rdma_ucm_set_option cmd{};
  cmd.optval = reinterpret_cast<uintptr_t>(optval);
  cmd.id = from_id(id)->handle;
  cmd.level = static_cast<__u32>(level);
  cmd.optname = static_cast<__u32>(optname);
  cmd.optlen = static_cast<__u32>(optlen);
  return kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_SET_OPTION, cmd);
}

HCASIM_RDMACM_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) { return port_of(&id->route.addr.src_addr); }

HCASIM_RDMACM_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) { return port_of(&id->route.addr.dst_addr); }

HCASIM_RDMACM_EXPORT int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask) return err(EINVAL);
  from_id(id)->local_ece.vendor_id = ece->vendor_id;
  from_id(id)->local_ece.options = ece->options;
  return 0;
}

HCASIM_RDMACM_EXPORT int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!id || id->qp || !ece) return err(EINVAL);
  ece->vendor_id = from_id(id)->remote_ece.vendor_id;
  ece->options = from_id(id)->remote_ece.options;
  ece->comp_mask = 0;
  return 0;
}
