// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's multicast joins on RoCE (Linux's cma_iboe_join_multicast): an IPv4 group
// address maps to its IPv4-mapped GID, an IPv6 group is its own GID; membership is the port's (IGMP on a real
// host, no subnet administrator), so the join completes at once with a MULTICAST_JOIN event carrying the
// group's address vector, QP 0xFFFFFF and the Q_Key; librdmacm then attaches the id's QP.
#include <arpa/inet.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstring>

#include "ucma.h"

namespace hcasim::drv::cm {

int Ucma::join(UcmaChannel& ch, uint32_t handle, uint64_t uid, const sockaddr* addr, uint64_t response) {
  UcmaId* id = find(handle, &ch);
  if (!id || !response) return id ? -EFAULT : -EINVAL;
  IpAddr group;
  if (!IpAddr::from(addr, sizeof(sockaddr_storage), group)) return -EAFNOSUPPORT;
  if (!group.multicast()) return -EINVAL;  // not a group
  if (!id->agent) return -ENODEV;          // joins happen on a device: bind or resolve first
  UcmaMc mc;
  mc.handle = next_handle_++;
  mc.uid = uid;
  mc.id = handle;
  mc.addr = group;
  const rdma_ucm_create_id_resp r{mc.handle};
  std::memcpy(reinterpret_cast<void*>(uintptr_t(response)), &r, sizeof r);
  mcs_[mc.handle] = mc;
  UcmaEvent& ev = queue_event(*id, kMulticastJoin, 0);
  ev.resp.uid = uid;
  ev.credit = mc.handle;
  rdma_ucm_ud_param& p = ev.resp.param.ud;
  p.qp_num = 0xffffff;
  p.qkey = kUdpQkey;
  fill_av(group, id->tos, 1, p.ah_attr);  // hop limit 1: link-local scope, as the kernel sends groups
  return 0;
}

int Ucma::join_mcast(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_join_mcast>(in, len);
  if (c.join_flags > RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return -EINVAL;
  return join(ch, c.id, c.uid, reinterpret_cast<const sockaddr*>(&c.addr), c.response);
}

int Ucma::join_ip_mcast(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_join_ip_mcast>(in, len);
  return join(ch, c.id, c.uid, reinterpret_cast<const sockaddr*>(&c.addr), c.response);
}

int Ucma::leave_mcast(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_destroy_id>(in, len);
  auto it = mcs_.find(c.id);
  if (it == mcs_.end() || !find(it->second.id, &ch)) return -ENOENT;
  const rdma_ucm_destroy_id_resp r{it->second.events_reported};
  mcs_.erase(it);
  if (!c.response) return -EFAULT;
  std::memcpy(reinterpret_cast<void*>(uintptr_t(c.response)), &r, sizeof r);
  return 0;
}

}  // namespace hcasim::drv::cm
