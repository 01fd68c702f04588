// SPDX-License-Identifier: Apache-2.0
// Addresses and routes: bind, resolve address and route, listen, and the queries that copy the
// kernel's view of an id (addresses, GIDs, P_Key, path records, device and port) into it.
// Kernels that take AF_IB addresses get BIND / RESOLVE_ADDR / QUERY; otherwise the IP-only
// commands BIND_IP / RESOLVE_IP / QUERY_ROUTE, as rdma-core chooses.
#include <infiniband/ib.h>
#include <infiniband/sa.h>

#include <alloca.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

constexpr uint32_t kInvalidIbIndex = 0xFFFFFFFFu;

/// One SA path record (the kernel's QUERY PATH data) as librdmacm's ibv_sa_path_rec.
void convert_path(const ibv_path_data& pd, ibv_sa_path_rec* rec) {
  const ibv_path_record& p = pd.path;
  std::memset(rec, 0, sizeof *rec);
  rec->dgid = p.dgid;
  rec->sgid = p.sgid;
  rec->dlid = p.dlid;
  rec->slid = p.slid;
  const uint32_t fl_hop = be32toh(p.flowlabel_hoplimit);
  rec->flow_label = htobe32(fl_hop >> 8);
  rec->hop_limit = static_cast<uint8_t>(fl_hop);
  rec->traffic_class = p.tclass;
  rec->reversible = p.reversible_numpath >> 7;
  rec->numb_path = 1;
  rec->pkey = p.pkey;
  rec->sl = be16toh(p.qosclass_sl) & 0xF;
  rec->mtu_selector = 2;  // exactly
  rec->mtu = p.mtu & 0x1F;
  rec->rate_selector = 2;
  rec->rate = p.rate & 0x1F;
  rec->packet_life_time_selector = 2;
  rec->packet_life_time = p.packetlifetime & 0x1F;
  rec->preference = static_cast<uint8_t>(pd.flags);
}

/// Replaces @p id's path records with @p n fresh ones (calloc'd); nullptr and ENOMEM on failure.
ibv_sa_path_rec* new_paths(rdma_cm_id* id, uint32_t n) {
  auto* recs = static_cast<ibv_sa_path_rec*>(std::calloc(n, sizeof(ibv_sa_path_rec)));
  if (!recs) return nullptr;
  std::free(id->route.path_rec);
  id->route.path_rec = recs;
  id->route.num_paths = static_cast<int>(n);
  return recs;
}

}  // namespace

socklen_t addrlen_of(const sockaddr* addr) {
  if (!addr) return 0;
  switch (addr->sa_family) {
    case AF_INET: return sizeof(sockaddr_in);
    case AF_INET6: return sizeof(sockaddr_in6);
    case AF_IB: return af_ib_supported() ? sizeof(sockaddr_ib) : 0;
    default: return 0;
  }
}

__be16 port_of(const sockaddr* addr) {
  switch (addr->sa_family) {
    case AF_INET: return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
    case AF_INET6: return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
    case AF_IB:
      return htobe16(static_cast<uint16_t>(be64toh(reinterpret_cast<const sockaddr_ib*>(addr)->sib_sid)));
    default: return 0;
  }
}

int query_addr(rdma_cm_id* id) {
  CmaId* id_priv = from_id(id);
  kabi::rdma_ucm_query_addr_resp resp{};
  resp.ibdev_index = kInvalidIbIndex;
  kabi::rdma_ucm_query cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = id_priv->handle;
  cmd.option = kabi::RDMA_USER_CM_QUERY_ADDR;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_QUERY, cmd, sizeof resp)) return -1;
  const size_t src = std::min<size_t>(resp.src_size, sizeof id->route.addr.src_storage);
  const size_t dst = std::min<size_t>(resp.dst_size, sizeof id->route.addr.dst_storage);
  std::memcpy(&id->route.addr.src_storage, &resp.src_addr, src);
  std::memcpy(&id->route.addr.dst_storage, &resp.dst_addr, dst);
  if (!id_priv->cma_dev && resp.node_guid) {
    if (get_device(id_priv, resp.node_guid)) return -1;
    id->port_num = resp.port_num;
    id->route.addr.addr.ibaddr.pkey = resp.pkey;
  }
  return 0;
}

int query_gid(rdma_cm_id* id) {
  kabi::rdma_ucm_query_addr_resp resp{};
  kabi::rdma_ucm_query cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = from_id(id)->handle;
  cmd.option = kabi::RDMA_USER_CM_QUERY_GID;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_QUERY, cmd, sizeof resp)) return -1;
  const auto* src = reinterpret_cast<const sockaddr_ib*>(&resp.src_addr);
  const auto* dst = reinterpret_cast<const sockaddr_ib*>(&resp.dst_addr);
  std::memcpy(id->route.addr.addr.ibaddr.sgid.raw, &src->sib_addr, sizeof(ibv_gid));
  std::memcpy(id->route.addr.addr.ibaddr.dgid.raw, &dst->sib_addr, sizeof(ibv_gid));
  return 0;
}

int query_path(rdma_cm_id* id) {
  constexpr uint32_t kMaxPaths = 6;
  const size_t size = sizeof(kabi::rdma_ucm_query_path_resp) + sizeof(ibv_path_data) * kMaxPaths;
  auto* resp = static_cast<kabi::rdma_ucm_query_path_resp*>(alloca(size));
  std::memset(resp, 0, size);
  kabi::rdma_ucm_query cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(resp);
  cmd.id = from_id(id)->handle;
  cmd.option = kabi::RDMA_USER_CM_QUERY_PATH;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_QUERY, cmd, size)) return -1;
  const uint32_t n = std::min(resp->num_paths, kMaxPaths);
  if (!n) return 0;
  ibv_sa_path_rec* recs = new_paths(id, n);
  if (!recs) return err(ENOMEM);
  const auto* data = reinterpret_cast<const ibv_path_data*>(resp->path_data);
  for (uint32_t i = 0; i < n; ++i) convert_path(data[i], &recs[i]);
  return 0;
}

int query_route(rdma_cm_id* id) {
  CmaId* id_priv = from_id(id);
  kabi::rdma_ucm_query_route_resp resp{};
  resp.ibdev_index = kInvalidIbIndex;
  kabi::rdma_ucm_query cmd{};
  cmd.response = reinterpret_cast<uintptr_t>(&resp);
  cmd.id = id_priv->handle;
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_QUERY_ROUTE, cmd, sizeof resp)) return -1;
  const uint32_t n = std::min<uint32_t>(resp.num_paths, 2);
  if (n) {
    ibv_sa_path_rec* recs = new_paths(id, n);
    if (!recs) return err(ENOMEM);
    for (uint32_t i = 0; i < n; ++i)
      ibv_copy_path_rec_from_kern(&recs[i], reinterpret_cast<ib_user_path_rec*>(&resp.ib_route[i]));
  }
  std::memcpy(id->route.addr.addr.ibaddr.sgid.raw, resp.ib_route[0].sgid, sizeof(ibv_gid));
  std::memcpy(id->route.addr.addr.ibaddr.dgid.raw, resp.ib_route[0].dgid, sizeof(ibv_gid));
  id->route.addr.addr.ibaddr.pkey = resp.ib_route[0].pkey;
  std::memcpy(&id->route.addr.src_storage, &resp.src_addr, sizeof resp.src_addr);
  std::memcpy(&id->route.addr.dst_storage, &resp.dst_addr, sizeof resp.dst_addr);
  if (!id_priv->cma_dev && resp.node_guid) {
    if (get_device(id_priv, resp.node_guid)) return -1;
    id->port_num = resp.port_num;
  }
  return 0;
}

int bind_addr2(rdma_cm_id* id, const sockaddr* addr, socklen_t len) {
  kabi::rdma_ucm_bind cmd{};
  cmd.id = from_id(id)->handle;
  cmd.addr_size = static_cast<__u16>(len);
  std::memcpy(&cmd.addr, addr, std::min<size_t>(len, sizeof cmd.addr));
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_BIND, cmd)) return -1;
  return query_addr(id) ? -1 : query_gid(id);
}

int resolve_addr2(rdma_cm_id* id, const sockaddr* src, socklen_t src_len, const sockaddr* dst,
                  socklen_t dst_len, int timeout_ms) {
  kabi::rdma_ucm_resolve_addr cmd{};
  cmd.id = from_id(id)->handle;
  cmd.timeout_ms = static_cast<__u32>(timeout_ms);
  cmd.src_size = static_cast<__u16>(src_len);
  cmd.dst_size = static_cast<__u16>(dst_len);
  if (src && src_len) std::memcpy(&cmd.src_addr, src, std::min<size_t>(src_len, sizeof cmd.src_addr));
  std::memcpy(&cmd.dst_addr, dst, std::min<size_t>(dst_len, sizeof cmd.dst_addr));
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_RESOLVE_ADDR, cmd)) return -1;
  std::memcpy(&id->route.addr.dst_storage, dst, std::min<size_t>(dst_len, sizeof id->route.addr.dst_storage));
  return ucma_complete(id);
}

}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  const socklen_t len = addrlen_of(addr);
  if (!id || !len) return err(EINVAL);
  if (af_ib_supported()) return bind_addr2(id, addr, len);
  kabi::rdma_ucm_bind_ip cmd{};
  cmd.id = from_id(id)->handle;
  std::memcpy(&cmd.addr, addr, len);
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_BIND_IP, cmd)) return -1;
  return query_route(id);
}

HCASIM_RDMACM_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                                           int timeout_ms) {
  const socklen_t dst_len = addrlen_of(dst_addr);
  const socklen_t src_len = addrlen_of(src_addr);
  if (!id || !dst_len || (src_addr && !src_len)) return err(EINVAL);
  if (af_ib_supported()) return resolve_addr2(id, src_addr, src_len, dst_addr, dst_len, timeout_ms);
  kabi::rdma_ucm_resolve_ip cmd{};
  cmd.id = from_id(id)->handle;
  if (src_addr) std::memcpy(&cmd.src_addr, src_addr, src_len);
  std::memcpy(&cmd.dst_addr, dst_addr, dst_len);
  cmd.timeout_ms = static_cast<__u32>(timeout_ms);
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_RESOLVE_IP, cmd)) return -1;
  std::memcpy(&id->route.addr.dst_storage, dst_addr, dst_len);
  return ucma_complete(id);
}

HCASIM_RDMACM_EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (!id) return err(EINVAL);
  // rdma-core first asks ibacm for a path (RAI_ROUTEONLY); there is no ibacm here, so the
  // kernel resolves the route, as rdma-core falls back to when ibacm is absent.
  kabi::rdma_ucm_resolve_route cmd{};
  cmd.id = from_id(id)->handle;
  cmd.timeout_ms = static_cast<__u32>(timeout_ms);
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_RESOLVE_ROUTE, cmd)) return -1;
  return ucma_complete(id);
}

HCASIM_RDMACM_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
  if (!id) return err(EINVAL);
  kabi::rdma_ucm_listen cmd{};
  cmd.id = from_id(id)->handle;
  cmd.backlog = static_cast<__u32>(backlog);
  if (kern_cmd(id->channel->fd, kabi::RDMA_USER_CM_CMD_LISTEN, cmd)) return -1;
  return af_ib_supported() ? query_addr(id) : query_route(id);
}
