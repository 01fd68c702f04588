// SPDX-License-Identifier: Apache-2.0
/**
 * @file address.h
 * @brief What one side of an RC connection tells the other: {lid, qpn, psn, gid} plus the
 *        path MTU, in a versioned, checksummed, validated byte encoding.
 *
 * Wire layout, version 1 (36 bytes, multi-byte fields big-endian):
 *
 * | offset | size | field    | rule                                                       |
 * |-------:|-----:|----------|------------------------------------------------------------|
 * |  0     |  2   | magic    | 'H' 'V' (0x4856)                                           |
 * |  2     |  1   | version  | 1                                                          |
 * |  3     |  1   | length   | 36, the encoded size                                       |
 * |  4     |  1   | flags    | bit 0: global (GRH needed, e.g. RoCE); other bits 0        |
 * |  5     |  1   | mtu      | ibv_mtu 1..5 (256..4096): the sender's active MTU          |
 * |  6     |  2   | lid      | without the global flag: unicast LID 0x0001..0xbfff        |
 * |  8     |  4   | qpn      | 24-bit, not 0 or 1 (QP0/QP1 are special)                   |
 * | 12     |  4   | psn      | 24-bit initial packet sequence number                      |
 * | 16     | 16   | gid      | with the global flag: not all zero                         |
 * | 32     |  2   | reserved | 0                                                          |
 * | 34     |  2   | checksum | Fletcher-16 over bytes 0..33                               |
 *
 * Address::fromBytes() rejects anything else with an AddressError naming the field.
 */
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hcasim::verbs {

struct Address {
  static constexpr size_t kSize = 36;
  static constexpr uint8_t kVersion = 1;
  static constexpr uint8_t kFlagGlobal = 0x01;

  uint16_t lid = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  std::array<uint8_t, 16> gid{};
  uint8_t mtu = 0;      ///< enum ibv_mtu value, 1 (256) .. 5 (4096)
  bool global = false;  ///< the peer must use a GRH (RoCE, or another subnet)

  /** @brief The 36-byte version-1 encoding. Throws AddressError if a field is out of range. */
  std::vector<uint8_t> bytes() const;
  /** @brief Decodes and validates; throws AddressError naming the first bad field. */
  static Address fromBytes(const void* data, size_t len);
  static Address fromBytes(const std::vector<uint8_t>& b) { return fromBytes(b.data(), b.size()); }

  /** @brief "qpn 0x000012 psn 0x3a41f2 lid 0 gid ::ffff:192.0.2.1 mtu 4096". */
  std::string str() const;

  /** @brief Fletcher-16 as used by the checksum field. */
  static uint16_t checksum(const uint8_t* p, size_t n);

  bool operator==(const Address& o) const {
    return lid == o.lid && qpn == o.qpn && psn == o.psn && gid == o.gid && mtu == o.mtu && global == o.global;
  }
};

/** @brief Printable GID: "::ffff:a.b.c.d" for IPv4-mapped ones, else full IPv6 text. */
std::string gidString(const uint8_t gid[16]);

}  // namespace hcasim::verbs
