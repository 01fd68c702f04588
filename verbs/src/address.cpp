// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/address.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include "hcasim/verbs/error.h"

namespace hcasim::verbs {
namespace {

constexpr uint8_t kMagic0 = 'H', kMagic1 = 'V';
constexpr size_t kChecksummed = Address::kSize - 2;

void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
void put32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
uint16_t get16(const uint8_t* p) { return uint16_t((p[0] << 8) | p[1]); }
uint32_t get32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

[[noreturn]] void bad(const char* field, const char* fmt, unsigned long long got) {
  char msg[256];
  char detail[160];
  std::snprintf(detail, sizeof detail, fmt, got);
  std::snprintf(msg, sizeof msg, "peer address bytes: field '%s' invalid: %s", field, detail);
  throw AddressError(field, msg);
}

bool allZero(const std::array<uint8_t, 16>& g) {
  for (uint8_t b : g)
    if (b) return false;
  return true;
}

// The same rules for encoding and decoding: a bad local address is a bug worth reporting too.
void validate(const Address& a) {
  if (a.mtu < 1 || a.mtu > 5) bad("mtu", "%llu is not an ibv_mtu (1..5 = 256..4096 bytes)", a.mtu);
  if (a.qpn > 0xffffff) bad("qpn", "0x%llx does not fit 24 bits", a.qpn);
  if (a.qpn < 2) bad("qpn", "%llu is a special QP (0 = SMI, 1 = GSI), not an RC QP", a.qpn);
  if (a.psn > 0xffffff) bad("psn", "0x%llx does not fit 24 bits", a.psn);
  if (a.global) {
    if (allZero(a.gid))
      bad("gid", "all zero although the global flag is set (a GRH needs a destination GID)", 0);
  } else if (a.lid == 0 || a.lid >= 0xc000) {
    bad("lid", "0x%llx is not a unicast LID (0x0001..0xbfff) and the global flag is clear", a.lid);
  }
}

}  // namespace

uint16_t Address::checksum(const uint8_t* p, size_t n) {
  uint32_t s1 = 0, s2 = 0;
  for (size_t i = 0; i < n; ++i) {
    s1 = (s1 + p[i]) % 255;
    s2 = (s2 + s1) % 255;
  }
  return uint16_t((s2 << 8) | s1);
}

std::vector<uint8_t> Address::bytes() const {
  validate(*this);
  std::vector<uint8_t> b(kSize, 0);
  b[0] = kMagic0;
  b[1] = kMagic1;
  b[2] = kVersion;
  b[3] = uint8_t(kSize);
  b[4] = global ? kFlagGlobal : 0;
  b[5] = mtu;
  put16(&b[6], lid);
  put32(&b[8], qpn);
  put32(&b[12], psn);
  std::memcpy(&b[16], gid.data(), 16);
  put16(&b[34], checksum(b.data(), kChecksummed));
  return b;
}

Address Address::fromBytes(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (len < 4) bad("length", "%llu bytes, too short for the header (version 1 is 36 bytes)", len);
  if (p[0] != kMagic0 || p[1] != kMagic1)
    bad("magic", "0x%04llx, expected 0x4856 ('HV'): not an hcasim verbs address", get16(p));
  if (p[2] != kVersion) bad("version", "%llu, this library reads version 1", p[2]);
  if (p[3] != kSize) bad("length", "header says %llu bytes, version 1 is 36", p[3]);
  if (len != kSize) bad("length", "%llu bytes given, version 1 is 36", len);
  const uint16_t want = checksum(p, kChecksummed);
  if (get16(p + 34) != want)
    bad("checksum", "0x%04llx does not match the bytes (corrupted or truncated)", get16(p + 34));
  if (p[4] & ~kFlagGlobal) bad("flags", "0x%02llx has unknown bits (only bit 0, global, is defined)", p[4]);
  if (p[32] || p[33]) bad("reserved", "0x%04llx, must be 0", get16(p + 32));
  Address a;
  a.global = (p[4] & kFlagGlobal) != 0;
  a.mtu = p[5];
  a.lid = get16(p + 6);
  a.qpn = get32(p + 8);
  a.psn = get32(p + 12);
  std::memcpy(a.gid.data(), p + 16, 16);
  validate(a);
  return a;
}

std::string gidString(const uint8_t gid[16]) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char buf[INET6_ADDRSTRLEN + 8];
  if (std::memcmp(gid, mapped, 12) == 0) {
    std::snprintf(buf, sizeof buf, "::ffff:%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
    return buf;
  }
  if (!inet_ntop(AF_INET6, gid, buf, sizeof buf)) return "?";
  return buf;
}

std::string Address::str() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "qpn 0x%06x psn 0x%06x lid %u gid %s mtu %u%s", qpn, psn, lid,
                gidString(gid.data()).c_str(), 128u << mtu, global ? "" : " (no GRH)");
  return buf;
}

void throwSystemError(const std::string& what, int err) {
  throw IoError(what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace hcasim::verbs
