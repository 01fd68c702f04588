// SPDX-License-Identifier: Apache-2.0
// The rdma_cm bootstrap's pure part: the group description and the private data of its
// connection requests, accepts and rejects (cm_bootstrap.h). No librdmacm calls here: the
// connecting itself is cm_bootstrap.cpp, in hcasim_verbs.
#include "hcasim/verbs/cm_bootstrap.h"

#include <arpa/inet.h>

#include <cstring>

#include "hcasim/verbs/address.h"
#include "hcasim/verbs/error.h"

namespace hcasim::verbs {
namespace {

constexpr uint8_t kMagic0 = 'H', kMagic1 = 'C';
constexpr size_t kRejectHeader = 4;

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}
uint32_t get32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw AddressError(field, "rdma_cm private data: field '" + field + "' invalid: " + why);
}

const char* kindName(uint32_t k) {
  switch (k) {
    case CmHello::kRequest: return "connection request";
    case CmHello::kAccept: return "accept";
    case CmHello::kReject: return "reject";
  }
  return "unknown";
}

bool isIpv4(const std::string& a) {
  in_addr tmp{};
  return inet_pton(AF_INET, a.c_str(), &tmp) == 1;
}

}  // namespace

// ---- CmBootstrap -------------------------------------------------------------------------

CmBootstrap CmBootstrap::parse(const std::string& list, uint16_t basePort) {
  CmBootstrap b;
  b.basePort = basePort;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const size_t end = comma == std::string::npos ? list.size() : comma;
    b.addresses.push_back(list.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (size_t i = 0; i < b.addresses.size(); ++i)
    if (!isIpv4(b.addresses[i]))
      throw AddressError("addresses", "rdma_cm bootstrap: address " + std::to_string(i) + " ('" +
                                          b.addresses[i] + "') of '" + list +
                                          "' is not a dotted IPv4 address (one per rank, comma-separated)");
  return b;
}

void CmBootstrap::validate(int size) const {
  if (size < 1 || addresses.size() != size_t(size))
    throw AddressError("addresses", "rdma_cm bootstrap: " + std::to_string(addresses.size()) +
                                        " addresses for a group of " + std::to_string(size) +
                                        " ranks (one per rank, in rank order)");
  for (size_t i = 0; i < addresses.size(); ++i)
    if (!isIpv4(addresses[i]))
      throw AddressError("addresses", "rdma_cm bootstrap: rank " + std::to_string(i) + "'s address '" +
                                          addresses[i] + "' is not a dotted IPv4 address");
  if (basePort == 0 || uint32_t(basePort) + uint32_t(size) - 1 > 65535)
    throw AddressError("basePort", "rdma_cm bootstrap: base port " + std::to_string(basePort) +
                                       " does not leave ports for " + std::to_string(size) +
                                       " ranks (rank i listens on basePort + i, 1..65535)");
}

std::string CmBootstrap::endpoint(int rank) const {
  const std::string a = rank >= 0 && size_t(rank) < addresses.size() ? addresses[size_t(rank)] : "?";
  return a + ":" + std::to_string(port(rank));
}

// ---- CmHello -----------------------------------------------------------------------------

std::vector<uint8_t> CmHello::bytes() const {
  std::vector<uint8_t> b(kSize, 0);
  b[0] = kMagic0;
  b[1] = kMagic1;
  b[2] = kVersion;
  b[3] = kind;
  put32(&b[4], size);
  put32(&b[8], rank);
  put32(&b[12], peer);
  put32(&b[16], group);
  const uint16_t c = Address::checksum(b.data(), 22);
  b[22] = uint8_t(c >> 8);
  b[23] = uint8_t(c);
  return b;
}

CmHello CmHello::fromBytes(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (!p || len < kSize)
    bad("length", std::to_string(len) + " bytes, at least " + std::to_string(kSize) +
                      " expected (a peer that is not an hcasim-verbs rank?)");
  if (p[0] != kMagic0 || p[1] != kMagic1) bad("magic", "not 'HC' (a peer that is not an hcasim-verbs rank?)");
  if (p[2] != kVersion)
    bad("version", std::to_string(p[2]) + ", this build speaks " + std::to_string(kVersion));
  if (p[3] != kRequest && p[3] != kAccept)
    bad("kind", std::to_string(p[3]) + " is neither request nor accept");
  if (p[20] || p[21]) bad("reserved", "not zero");
  const uint16_t c = Address::checksum(p, 22);
  if (p[22] != uint8_t(c >> 8) || p[23] != uint8_t(c)) bad("checksum", "does not match bytes 0..21");
  CmHello h;
  h.kind = Kind(p[3]);
  h.size = get32(p + 4);
  h.rank = get32(p + 8);
  h.peer = get32(p + 12);
  h.group = get32(p + 16);
  return h;
}

void CmHello::check(Kind want, int self, int groupSize, uint32_t groupTag, const std::string& from) const {
  const std::string what = std::string(kindName(kind)) + " from " + from;
  auto fail = [&](const char* field, const std::string& why) {
    throw AddressError(field,
                       "rank " + std::to_string(self) + ": " + what + ": field '" + field + "': " + why);
  };
  if (kind != want) fail("kind", std::string("expected a ") + kindName(want));
  if (size != uint32_t(groupSize))
    fail("size", "the peer's group has " + std::to_string(size) + " ranks, this one " +
                     std::to_string(groupSize) + " (the ranks were given different address lists?)");
  if (group != groupTag)
    fail("group", "the peer belongs to another group (a different ContextOptions::prefix)");
  if (peer != uint32_t(self))
    fail("peer",
         "addressed to rank " + std::to_string(peer) + " (two ranks with the same address and port?)");
  if (rank >= uint32_t(groupSize))
    fail("rank", std::to_string(rank) + " is out of range 0.." + std::to_string(groupSize - 1));
  // Higher ranks connect, lower ranks accept: anything else is a peer with another rule.
  if (want == kRequest && rank <= uint32_t(self))
    fail("rank", std::to_string(rank) + " connected to rank " + std::to_string(self) +
                     ", but only higher ranks connect");
  if (want == kAccept && rank >= uint32_t(self))
    fail("rank",
         std::to_string(rank) + " accepted rank " + std::to_string(self) + ", but only lower ranks accept");
}

uint32_t CmHello::groupTag(const std::string& prefix) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : prefix) h = (h ^ ch) * 16777619u;
  return h;
}

std::vector<uint8_t> CmHello::rejectBytes(const std::string& field, const std::string& reason, size_t max) {
  std::vector<uint8_t> b{kMagic0, kMagic1, kVersion, kReject};
  b.insert(b.end(), field.begin(), field.end());
  b.push_back(0);
  b.insert(b.end(), reason.begin(), reason.end());
  if (b.size() > max) b.resize(max);
  return b;
}

bool CmHello::parseReject(const void* data, size_t len, std::string& field, std::string& reason) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (!p || len < kRejectHeader + 1 || p[0] != kMagic0 || p[1] != kMagic1 || p[2] != kVersion ||
      p[3] != kReject)
    return false;
  const char* s = reinterpret_cast<const char*>(p + kRejectHeader);
  const size_t n = len - kRejectHeader;
  const size_t f = strnlen(s, n);
  field.assign(s, f);
  reason = f < n ? std::string(s + f + 1, strnlen(s + f + 1, n - f - 1)) : std::string();
  return true;
}

}  // namespace hcasim::verbs
