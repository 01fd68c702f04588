// SPDX-License-Identifier: Apache-2.0
/**
 * @file ip_addr.h
 * @brief An rdma_cm address: IPv4 or IPv6 with a port, as the program gave it, and the GID it
 *        stands for on RoCEv2.
 *
 * Every simulated host has two addresses, one per GID of its port: its IPv4 address
 * 192.0.2.(n+1), which is GID index 1 in its IPv4-mapped form (\::ffff:192.0.2.(n+1)), and its
 * IPv6 link-local address fe80::/64 from its MAC, which is GID index 0 (the kernel derives both
 * the same way). On RoCEv2 the address *is* the GID, so the CM works on GIDs and keeps the
 * socket address only to give it back (family, port, and an IPv6 scope, which on the one
 * simulated link names nothing).
 */
#pragma once

#include <hcasim/hca_hw.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>

namespace hcasim::drv::cm {

/** @brief An IPv4 or IPv6 socket address (sockaddr_in / sockaddr_in6). */
struct IpAddr {
  union {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } u{};

  /** @brief The wildcard address of @p family (0.0.0.0 or ::), port 0. */
  static IpAddr any_of(sa_family_t family) {
    IpAddr a;
    a.u.sa.sa_family = family;
    return a;
  }
  /** @brief Read @p len bytes at @p sa; false unless it is a whole AF_INET or AF_INET6 address. */
  static bool from(const void* sa, size_t len, IpAddr& out) {
    sockaddr head{};
    if (!sa || len < sizeof(sa_family_t)) return false;
    std::memcpy(&head, sa, sizeof(sa_family_t));
    const size_t need = head.sa_family == AF_INET    ? sizeof(sockaddr_in)
                        : head.sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                     : 0;
    if (!need || len < need) return false;
    out = IpAddr{};
    std::memcpy(&out.u, sa, need);
    return true;
  }

  sa_family_t family() const { return u.sa.sa_family; }
  bool v6() const { return family() == AF_INET6; }
  /** @brief sizeof the socket address of this family. */
  socklen_t size() const { return v6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }
  /** @brief The port, network order. */
  uint16_t port() const { return v6() ? u.v6.sin6_port : u.v4.sin_port; }
  void set_port(uint16_t be) { (v6() ? u.v6.sin6_port : u.v4.sin_port) = be; }
  /** @brief The GID the address names: IPv4 in its mapped form, IPv6 as it is. */
  void gid(uint8_t out[16]) const {
    if (v6())
      std::memcpy(out, u.v6.sin6_addr.s6_addr, 16);
    else
      hw::gid_from_ipv4(ntohl(u.v4.sin_addr.s_addr), out);
  }
  /** @brief Set the address (port and family unchanged) from a GID of the same family's kind. */
  void set_gid(const uint8_t g[16]) {
    if (v6())
      std::memcpy(u.v6.sin6_addr.s6_addr, g, 16);
    else
      std::memcpy(&u.v4.sin_addr.s_addr, g + 12, 4);
  }
  /** @brief 0.0.0.0 or ::. */
  bool any() const {
    static const uint8_t zero[16] = {};
    return v6() ? std::memcmp(u.v6.sin6_addr.s6_addr, zero, 16) == 0 : u.v4.sin_addr.s_addr == 0;
  }
  /** @brief Whether the two name the same host address (a v4-mapped IPv6 equals its IPv4). */
  bool same_address(const IpAddr& o) const {
    uint8_t a[16], b[16];
    gid(a);
    o.gid(b);
    return std::memcmp(a, b, 16) == 0;
  }
  /** @brief The IPv4 address in host order; 0 for an IPv6 address that is not IPv4-mapped. */
  uint32_t ipv4() const {
    uint8_t g[16];
    gid(g);
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g, mapped, 12) != 0) return 0;
    return uint32_t(g[12]) << 24 | uint32_t(g[13]) << 16 | uint32_t(g[14]) << 8 | g[15];
  }
  /** @brief A multicast group (224.0.0.0/4, ff00::/8, or the mapped form of the first). */
  bool multicast() const {
    uint8_t g[16];
    gid(g);
    return hw::is_multicast_gid(g);
  }
};

/**
 * @brief Which GID of a port an address of this kind goes out from: the link-local GID (index
 * 0) for IPv6 addresses other than IPv4-mapped ones, the IPv4-mapped GID (index 1) for the rest.
 */
inline uint8_t sgid_index_for(const uint8_t gid[16]) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, mapped, 12) == 0 ? 1 : 0;
}

}  // namespace hcasim::drv::cm
