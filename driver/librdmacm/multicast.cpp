// SPDX-License-Identifier: Apache-2.0
// Multicast: joining a group (JOIN_MCAST, the group's handle coming back as a kernel id and the
// group as the event's uid) and leaving it (LEAVE_MCAST, detaching the id's QP first and then
// waiting until the program has acknowledged every event of the group).
#include <cstdlib>
#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

void unlink_mc(CmaId* id_priv, CmaMulticast* mc) {
  pthread_mutex_lock(&id_priv->mut);
  for (CmaMulticast** pos = &id_priv->mc_list; *pos; pos = &(*pos)->next) {
    if (*pos == mc) {
      *pos = mc->next;
      break;
    }
  }
  pthread_mutex_unlock(&id_priv->mut);
}

int join_multicast(rdma_cm_id* id, const sockaddr* addr, socklen_t len, uint16_t join_flags, void* context) {
  CmaId* id_priv = from_id(id);
  auto* mc = static_cast<CmaMulticast*>(std::calloc(1, sizeof(CmaMulticast)));
  if (!mc) return err(ENOMEM);
  mc->context = context;
  mc->id_priv = id_priv;
  mc->join_flags = join_flags;
  std::memcpy(&mc->addr, addr, len);
  pthread_cond_init(&mc->cond, nullptr);
  pthread_mutex_lock(&id_priv->mut);
  mc->next = id_priv->mc_list;
  id_priv->mc_list = mc;
  pthread_mutex_unlock(&id_priv->mut);

  kabi::rdma_ucm_create_id_resp resp{};
  kabi::rdma_ucm_join_mcast cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.uid = reinterpret_cast<uintptr_t>(mc);
  cmd.id = id_priv->handle;
  cmd.addr_size = static_cast<__u16>(len);
  cmd.join_flags = join_flags;
  std::memcpy(&cmd.addr, addr, len);
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_JOIN_MCAST, cmd, sizeof resp)) {
    const int e = errno;
    unlink_mc(id_priv, mc);
    pthread_cond_destroy(&mc->cond);
    std::free(mc);
    return err(e);
  }
  mc->handle = resp.id;
  return ucma_complete(id);
}

}  // namespace
}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr,
                                                void* context) {
  if (!id || !mc_join_attr) return err(EINVAL);
  if (mc_join_attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return err(ENOTSUP);
  if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return err(EINVAL);
  if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
    return err(EINVAL);
  const socklen_t len = addrlen_of(mc_join_attr->addr);
  if (!len) return err(EINVAL);
  return join_multicast(id, mc_join_attr->addr, len, static_cast<uint16_t>(mc_join_attr->join_flags),
                        context);
}

HCASIM_RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  const socklen_t len = addrlen_of(addr);
  if (!id || !len) return err(EINVAL);
  return join_multicast(id, addr, len, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

HCASIM_RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  const socklen_t len = addrlen_of(addr);
  if (!id || !len) return err(EINVAL);
  CmaId* id_priv = from_id(id);
  CmaMulticast* mc = nullptr;
  pthread_mutex_lock(&id_priv->mut);
  for (CmaMulticast** pos = &id_priv->mc_list; *pos; pos = &(*pos)->next) {
    if (std::memcmp(&(*pos)->addr, addr, len) == 0) {
      mc = *pos;
      *pos = mc->next;
      break;
    }
  }
  pthread_mutex_unlock(&id_priv->mut);
  if (!mc) return err(EADDRNOTAVAIL);
  if (id->qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    ibv_detach_mcast(id->qp, &mc->mgid, mc->mlid);
  kabi::rdma_ucm_destroy_id_resp resp{};
  kabi::rdma_ucm_destroy_id cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = mc->handle;
  int ret = kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_LEAVE_MCAST, cmd, sizeof resp);
  const int e = errno;
  if (!ret) {
    pthread_mutex_lock(&id_priv->mut);
    while (mc->events_completed < static_cast<int>(resp.events_reported))
      pthread_cond_wait(&mc->cond, &id_priv->mut);
    pthread_mutex_unlock(&id_priv->mut);
  }
  pthread_cond_destroy(&mc->cond);
  std::free(mc);
  errno = e;
  return ret;
}
