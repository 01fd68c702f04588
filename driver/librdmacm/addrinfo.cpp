// SPDX-License-Identifier: Apache-2.0
// rdma_getaddrinfo / rdma_freeaddrinfo: names and services through getaddrinfo(3), mapped to
// and from librdmacm's QP types and port spaces as rdma-core does, plus the simulated network's
// own host names: hcasim<N> is the host of HCA N, at 192.0.2.(N+1) (::ffff:192.0.2.(N+1) when
// IPv6 is asked for). There is no ibacm, so no route (ai_route) is ever filled in.
#include <netdb.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

/// The numeric address of simulated host name @p node, or "" when it is not one.
std::string simulated_host(const char* node, int family) {
  constexpr char kPrefix[] = "hcasim";
  if (!node || std::strncmp(node, kPrefix, sizeof kPrefix - 1) != 0) return {};
  const char* digits = node + sizeof kPrefix - 1;
  if (!*digits || std::strspn(digits, "0123456789") != std::strlen(digits) || std::strlen(digits) > 3)
    return {};
  const int index = std::atoi(digits);
  if (index > 253) return {};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s192.0.2.%d", family == AF_INET6 ? "::ffff:" : "", index + 1);
  return buf;
}

void to_addrinfo_hints(addrinfo* ai, const rdma_addrinfo* rai) {
  std::memset(ai, 0, sizeof *ai);
  if (rai->ai_flags & RAI_PASSIVE) ai->ai_flags = AI_PASSIVE;
  if (rai->ai_flags & RAI_NUMERICHOST) ai->ai_flags |= AI_NUMERICHOST;
  if (rai->ai_family != AF_IB) ai->ai_family = rai->ai_family;
  switch (rai->ai_qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV: ai->ai_socktype = SOCK_STREAM; break;
    case IBV_QPT_UD: ai->ai_socktype = SOCK_DGRAM; break;
    default: break;
  }
  switch (rai->ai_port_space) {
    case RDMA_PS_TCP: ai->ai_protocol = IPPROTO_TCP; break;
    case RDMA_PS_IPOIB:
    case RDMA_PS_UDP: ai->ai_protocol = IPPROTO_UDP; break;
    case RDMA_PS_IB:
      if (ai->ai_socktype == SOCK_STREAM) ai->ai_protocol = IPPROTO_TCP;
      if (ai->ai_socktype == SOCK_DGRAM) ai->ai_protocol = IPPROTO_UDP;
      break;
    default: break;
  }
}

int copy_addr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  *dst = static_cast<sockaddr*>(std::malloc(len));
  if (!*dst) return err(ENOMEM);
  std::memcpy(*dst, src, len);
  *dst_len = len;
  return 0;
}

/// An IPv6 address as AF_IB (the GID), with the port space and port in the service id.
int to_sockaddr_ib(int ps, sockaddr** dst, socklen_t* dst_len, const sockaddr_in6* src) {
  auto* sib = static_cast<sockaddr_ib*>(std::calloc(1, sizeof(sockaddr_ib)));
  if (!sib) return err(ENOMEM);
  sib->sib_family = AF_IB;
  sib->sib_pkey = htobe16(0xFFFF);
  sib->sib_flowinfo = src->sin6_flowinfo;
  std::memcpy(&sib->sib_addr, &src->sin6_addr, sizeof src->sin6_addr);
  const uint16_t port = be16toh(src->sin6_port);
  sib->sib_sid = htobe64((static_cast<uint64_t>(ps) << 16) + port);
  if (ps) sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
  if (port) sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
  sib->sib_scope_id = src->sin6_scope_id;
  *dst = reinterpret_cast<sockaddr*>(sib);
  *dst_len = sizeof(sockaddr_ib);
  return 0;
}

int from_addrinfo(rdma_addrinfo* rai, const rdma_addrinfo* hints, const addrinfo* ai) {
  if (hints->ai_qp_type)
    rai->ai_qp_type = hints->ai_qp_type;
  else if (ai->ai_socktype == SOCK_STREAM || ai->ai_socktype == SOCK_DGRAM)
    rai->ai_qp_type = ai->ai_socktype == SOCK_STREAM ? IBV_QPT_RC : IBV_QPT_UD;
  if (hints->ai_port_space)
    rai->ai_port_space = hints->ai_port_space;
  else if (ai->ai_protocol == IPPROTO_TCP || ai->ai_protocol == IPPROTO_UDP)
    rai->ai_port_space = ai->ai_protocol == IPPROTO_TCP ? RDMA_PS_TCP : RDMA_PS_UDP;
  const bool passive = ai->ai_flags & AI_PASSIVE;
  char** canon = passive ? &rai->ai_src_canonname : &rai->ai_dst_canonname;
  sockaddr** addr = passive ? &rai->ai_src_addr : &rai->ai_dst_addr;
  socklen_t* len = passive ? &rai->ai_src_len : &rai->ai_dst_len;
  if (passive) rai->ai_flags = RAI_PASSIVE;
  if (ai->ai_canonname) *canon = strdup(ai->ai_canonname);
  const bool as_ib = (hints->ai_flags & RAI_FAMILY) && hints->ai_family == AF_IB &&
                     (hints->ai_flags & RAI_NUMERICHOST) && ai->ai_family == AF_INET6;
  rai->ai_family = as_ib ? AF_IB : ai->ai_family;
  if (as_ib)
    return to_sockaddr_ib(rai->ai_port_space, addr, len, reinterpret_cast<const sockaddr_in6*>(ai->ai_addr));
  return copy_addr(addr, len, ai->ai_addr, ai->ai_addrlen);
}

int lookup(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo* rai) {
  addrinfo ai_hints;
  if (hints) to_addrinfo_hints(&ai_hints, hints);
  std::string sim;
  if (!hints || !(hints->ai_flags & RAI_NUMERICHOST))
    sim = simulated_host(node, hints ? hints->ai_family : 0);
  if (!sim.empty()) {
    if (!hints) std::memset(&ai_hints, 0, sizeof ai_hints);
    ai_hints.ai_flags |= AI_NUMERICHOST;
    node = sim.c_str();
  }
  addrinfo* ai = nullptr;
  const int ret = getaddrinfo(node, service, (hints || !sim.empty()) ? &ai_hints : nullptr, &ai);
  if (ret) return ret;
  static const rdma_addrinfo kNoHints{};
  const int conv = from_addrinfo(rai, hints ? hints : &kNoHints, ai);
  freeaddrinfo(ai);
  return conv;
}

}  // namespace
}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                          rdma_addrinfo** res) {
  if ((!service && !node && !hints) || !res) return err(EINVAL);
  if (ucma_init()) return -1;
  auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!rai) return err(ENOMEM);
  int ret = 0;
  if (node || service) {
    ret = lookup(node, service, hints, rai);
  } else {
    rai->ai_flags = hints->ai_flags;
    rai->ai_family = hints->ai_family;
    rai->ai_qp_type = hints->ai_qp_type;
    rai->ai_port_space = hints->ai_port_space;
    if (hints->ai_dst_len)
      ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
  }
  if (!ret && !rai->ai_src_len && hints && hints->ai_src_len)
    ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
  if (ret) {
    rdma_freeaddrinfo(rai);
    return ret;
  }
  *res = rai;
  return 0;
}

HCASIM_RDMACM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_connect);
    std::free(res->ai_route);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res);
    res = next;
  }
}
