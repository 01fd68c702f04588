// SPDX-License-Identifier: Apache-2.0
// addr("192.0.2.2", 7471): an IPv4 socket address for the CM tests (the simulated hosts' addresses).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>

inline sockaddr_in addr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// addr6("fe80::48:43ff:fe41:2", 7471): an IPv6 socket address (the simulated hosts' link-local
// addresses are fe80::48:43ff:fe41:N, N = host + 1).
inline sockaddr_in6 addr6(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}
