// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's addresses: binding an IP address and port, resolving a destination to the
// device and GID that reach it (the port's neighbour lookup), routes, and the queries librdmacm
// makes afterwards.
#include <arpa/inet.h>
#include <endian.h>
#include <infiniband/ib.h>
#include <rdma/ib_user_sa.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "../provider/verbs_core.h"
#include "ucma.h"

namespace hcasim::drv::cm {

namespace {

constexpr uint32_t kSubnet = 0xc0000200, kSubnetMask = 0xffffff00;  // 192.0.2.0/24: every host

/** Whether @p a is on the simulated link: 192.0.2.0/24 (or its mapped form), or fe80::/64. */
bool on_link(const IpAddr& a) {
  if (const uint32_t v4 = a.ipv4()) return (v4 & kSubnetMask) == kSubnet;
  uint8_t g[16];
  a.gid(g);
  static const uint8_t link_local[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
  return a.v6() && std::memcmp(g, link_local, 8) == 0;
}

/** The SA path record (IBTA 15.2.5.16, big-endian) of a RoCE path from @p sgid to @p dgid. */
void path_record(const uint8_t* sgid, const uint8_t* dgid, uint8_t mtu, uint8_t tos, uint32_t rec[16]) {
  uint8_t* p = reinterpret_cast<uint8_t*>(rec);
  std::memset(p, 0, 64);
  std::memcpy(p + 8, dgid, 16);
  std::memcpy(p + 24, sgid, 16);
  p[43] = 64;                   // hop limit (flow label 0)
  p[44] = tos;                  // traffic class
  p[45] = 0x80 | 1;             // reversible, one path
  p[46] = p[47] = 0xff;         // P_Key
  p[50] = uint8_t(0x80 | mtu);  // MTU, "exactly"
  p[51] = 0x80 | 16;            // rate 100 Gb/s, "exactly"
  p[52] = 0x80 | 16;            // packet lifetime (RoCE: CMA_IBOE_PACKET_LIFETIME)
}

}  // namespace

MadAgent* Ucma::device_of(const uint8_t* gid) {
  int n = 0;
  ibv_device** list = get_device_list(&n);
  MadAgent* found = nullptr;
  for (int i = 0; i < n && !found; ++i) {
    MadAgent* a = Cm::get().agent(list[i]);
    if (a && (!gid || a->owns(gid))) found = a;
  }
  free_device_list(list);
  return found;
}

int Ucma::port_conflict(const UcmaId& self, const IpAddr& at) const {
  // Linux's cma_check_port: only ids bound by the program own a port (a listener's connections
  // do not); two that both set REUSEADDR may share it; a wildcard next to anything is
  // EADDRNOTAVAIL, the same address EADDRINUSE. (The port spaces are shared by both families.)
  for (auto& [h, id] : ids_) {
    if (id.get() == &self || id->child || id->ps != self.ps || id->state == UcmaState::Idle ||
        id->src.port() != at.port())
      continue;
    if (self.reuse_addr && id->reuse_addr && id->state != UcmaState::Listen) continue;
    if (at.any() || id->src.any()) return -EADDRNOTAVAIL;
    if (at.same_address(id->src)) return -EADDRINUSE;
  }
  return 0;
}

uint16_t Ucma::ephemeral_port() {
  if (next_port_ < 49152) next_port_ = 49152;  // the local port range's top end, as Linux picks
  return next_port_++;
}

int Ucma::bind_addr(UcmaId& id, const sockaddr* sa, size_t size) {
  if (id.state != UcmaState::Idle) return -EINVAL;
  IpAddr in;
  if (!IpAddr::from(sa, size, in)) return -EAFNOSUPPORT;
  uint8_t gid[16];
  in.gid(gid);
  MadAgent* a = in.any() ? nullptr : device_of(gid);
  if (!in.any() && !a) return -EADDRNOTAVAIL;  // no simulated host of this process has the address
  if (in.port())
    if (int e = port_conflict(id, in)) return e;
  id.src = in;
  id.agent = a;
  while (!id.src.port() || port_conflict(id, id.src)) id.src.set_port(htons(ephemeral_port()));
  id.state = UcmaState::AddrBound;
  return 0;
}

int Ucma::bind(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_bind>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  return bind_addr(*id, reinterpret_cast<const sockaddr*>(&c.addr), c.addr_size);
}

int Ucma::bind_ip(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_bind_ip>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  return bind_addr(*id, reinterpret_cast<const sockaddr*>(&c.addr), sizeof c.addr);
}

int Ucma::start_resolve(UcmaId& id, const sockaddr* src, size_t src_len, const sockaddr* dst, size_t dst_len,
                        uint32_t timeout_ms) {
  IpAddr to;
  if (!IpAddr::from(dst, dst_len, to)) return -EAFNOSUPPORT;
  if (id.state == UcmaState::Idle) {
    IpAddr from = IpAddr::any_of(to.family());
    if (src && !IpAddr::from(src, src_len, from)) return -EAFNOSUPPORT;
    if (int e = bind_addr(id, &from.u.sa, from.size())) return e;
  }
  if (id.state != UcmaState::AddrBound) return -EINVAL;
  if (id.src.family() != to.family()) return -EINVAL;  // cma_resolve_addr: one family per id
  id.dst = to;
  MadAgent* a = id.agent ? id.agent : device_of(nullptr);
  uint8_t gid[16], mac[6];
  to.gid(gid);
  const bool group = to.multicast();             // a group: no neighbour to find (its MAC is mapped)
  if (a && !group && !on_link(to)) a = nullptr;  // no route off the simulated link
  if (!a) {
    queue(id, kAddrError, -ENETUNREACH);
    return 0;
  }
  if (!group && !a->resolve(gid, mac)) {  // nobody answers the neighbour solicitation until the timeout
    queue(id, kAddrError, -ETIMEDOUT, cm_now_ns() + uint64_t(timeout_ms) * 1000000);
    return 0;
  }
  id.agent = a;
  id.src.set_gid(a->gid_for(gid));
  id.state = UcmaState::AddrResolved;
  queue(id, kAddrResolved, 0);
  return 0;
}

int Ucma::resolve_addr(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_resolve_addr>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  const sockaddr* src = c.src_size ? reinterpret_cast<const sockaddr*>(&c.src_addr) : nullptr;
  return start_resolve(*id, src, c.src_size, reinterpret_cast<const sockaddr*>(&c.dst_addr),
                       c.dst_size ? c.dst_size : sizeof c.dst_addr, c.timeout_ms);
}

int Ucma::resolve_ip(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_resolve_ip>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  const sockaddr* src = c.src_addr.sin6_family ? reinterpret_cast<const sockaddr*>(&c.src_addr) : nullptr;
  return start_resolve(*id, src, sizeof c.src_addr, reinterpret_cast<const sockaddr*>(&c.dst_addr),
                       sizeof c.dst_addr, c.timeout_ms);
}

int Ucma::resolve_route(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_resolve_route>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  if (id->state != UcmaState::AddrResolved) return -EINVAL;
  // RoCE needs no subnet administrator: the route is the two GIDs (cma_resolve_iboe_route).
  id->state = UcmaState::RouteResolved;
  queue(*id, kRouteResolved, 0);
  return 0;
}

void Ucma::fill_addr_resp(const UcmaId& id, rdma_ucm_query_addr_resp& r) const {
  r.node_guid = id.agent ? htobe64(id.agent->node_guid()) : 0;  // the kernel's __be64, as is
  r.port_num = id.agent ? 1 : 0;
  r.pkey = 0xffff;
  r.src_size = id.src.size();
  r.dst_size = id.dst.size();
  std::memcpy(&r.src_addr, &id.src.u, id.src.size());
  std::memcpy(&r.dst_addr, &id.dst.u, id.dst.size());
}

int Ucma::query(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_query>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !c.response) return id ? -EFAULT : -EINVAL;
  void* out = reinterpret_cast<void*>(uintptr_t(c.response));
  if (c.option == RDMA_USER_CM_QUERY_ADDR) {
    rdma_ucm_query_addr_resp r{};
    fill_addr_resp(*id, r);
    std::memcpy(out, &r, sizeof r);
    return 0;
  }
  if (c.option == RDMA_USER_CM_QUERY_PATH) {
    rdma_ucm_query_path_resp h{};
    ib_path_rec_data p{};
    const bool routed =
        id->agent && id->state >= UcmaState::RouteResolved && id->state <= UcmaState::Disconnect;
    h.num_paths = routed ? 1 : 0;
    if (routed) {
      uint8_t dgid[16];
      id->dst.gid(dgid);
      p.flags = 1 | 4 | 8;  // IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_BIDIRECTIONAL
      path_record(id->agent->gid_for(dgid), dgid, IBV_MTU_1024, id->tos, p.path_rec);
    }
    std::memcpy(out, &h, sizeof h);
    if (routed) std::memcpy(static_cast<uint8_t*>(out) + sizeof h, &p, sizeof p);
    return 0;
  }
  if (c.option == RDMA_USER_CM_QUERY_GID) {
    rdma_ucm_query_addr_resp r{};
    fill_addr_resp(*id, r);
    sockaddr_ib s{}, d{};
    s.sib_family = d.sib_family = AF_IB;
    s.sib_pkey = d.sib_pkey = 0xffff;
    id->dst.gid(reinterpret_cast<uint8_t*>(&d.sib_addr));
    if (id->agent) std::memcpy(&s.sib_addr, id->agent->gid_for(reinterpret_cast<uint8_t*>(&d.sib_addr)), 16);
    r.src_size = r.dst_size = sizeof(sockaddr_ib);
    std::memcpy(&r.src_addr, &s, sizeof s);
    std::memcpy(&r.dst_addr, &d, sizeof d);
    std::memcpy(out, &r, sizeof r);
    return 0;
  }
  return -ENOSYS;
}

int Ucma::query_route(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_query>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id || !c.response) return id ? -EFAULT : -EINVAL;
  rdma_ucm_query_route_resp r{};
  r.node_guid = id->agent ? htobe64(id->agent->node_guid()) : 0;
  r.port_num = id->agent ? 1 : 0;
  std::memcpy(&r.src_addr, &id->src.u, id->src.size());
  std::memcpy(&r.dst_addr, &id->dst.u, id->dst.size());
  if (id->agent && id->state >= UcmaState::RouteResolved && id->state <= UcmaState::Disconnect) {
    r.num_paths = 1;
    ib_user_path_rec& p = r.ib_route[0];
    id->dst.gid(p.dgid);
    std::memcpy(p.sgid, id->agent->gid_for(p.dgid), 16);
    p.reversible = 1;
    p.mtu = IBV_MTU_1024;
    p.pkey = 0xffff;
    p.hop_limit = 64;
    p.traffic_class = id->tos;
    p.numb_path = 1;
    p.rate = 16;
    p.packet_life_time = 16;
  }
  std::memcpy(reinterpret_cast<void*>(uintptr_t(c.response)), &r, sizeof r);
  return 0;
}

}  // namespace hcasim::drv::cm
