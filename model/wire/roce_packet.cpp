// SPDX-License-Identifier: Apache-2.0
/**
 * @file roce_packet.cpp
 * @brief RoCEv2 frame builder/parser, ICRC, PSN/AETH helpers and segmentation.
 *
 * Fields are written and read with memcpy + byte swap so that unaligned
 * buffers are fine and the compiler emits single loads/stores (movbe/bswap).
 */
#include "roce_packet.h"

#include "crc32.h"

#include <cstdio>
#include <cstring>

namespace hcasim::wire {
namespace {

// ------------------------------------------------------------------ big-endian field access

inline void put8(uint8_t* p, uint8_t v) { *p = v; }
inline void put16(uint8_t* p, uint16_t v) {
  v = __builtin_bswap16(v);
  std::memcpy(p, &v, 2);
}
inline void put24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
inline void put64(uint8_t* p, uint64_t v) {
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}
inline uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return __builtin_bswap16(v);
}
inline uint32_t get24(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 16) | (static_cast<uint32_t>(p[1]) << 8) | p[2];
}
inline uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
inline uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
/// ICRC byte order on the wire: least significant byte first (see compute_icrc()).
inline void put32_le(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}
inline uint32_t get32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// ------------------------------------------------------------------ Internet checksum (RFC 1071)
//
// Summing native-order words and storing the folded result in native order gives
// the right bytes on either endianness (RFC 1071 section 2(B)), so no per-word swaps.
// Callers pass chunks of even length except possibly the last one.

inline uint64_t csum_add(uint64_t acc, uint64_t v) {
  acc += v;
  return acc + (acc < v);  // end-around carry
}

uint64_t csum_partial(const uint8_t* p, size_t n, uint64_t acc) {
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    acc = csum_add(acc, v);
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    acc = csum_add(acc, v);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    acc = csum_add(acc, v);
    p += 2;
    n -= 2;
  }
  if (n) {
    const uint8_t tail[2] = {p[0], 0};
    uint16_t v;
    std::memcpy(&v, tail, 2);
    acc = csum_add(acc, v);
  }
  return acc;
}

inline uint16_t csum_fold(uint64_t acc) {
  acc = (acc & 0xffffffffu) + (acc >> 32);
  acc = (acc & 0xffffffffu) + (acc >> 32);
  acc = (acc & 0xffffu) + (acc >> 16);
  acc = (acc & 0xffffu) + (acc >> 16);
  acc = (acc & 0xffffu) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

/// Stores a checksum computed by csum_partial/csum_fold (native order, see above).
inline void store_csum(uint8_t* p, uint16_t folded_complemented) { std::memcpy(p, &folded_complemented, 2); }

/// UDP checksum over the IPv6 pseudo-header and the whole datagram (checksum field must be 0).
uint16_t udp6_checksum(const uint8_t* ip6, const uint8_t* udp, size_t udp_len) {
  uint64_t acc = csum_partial(ip6 + 8, 32, 0);  // source + destination address
  const uint8_t tail[8] = {static_cast<uint8_t>(udp_len >> 24),
                           static_cast<uint8_t>(udp_len >> 16),
                           static_cast<uint8_t>(udp_len >> 8),
                           static_cast<uint8_t>(udp_len),
                           0,
                           0,
                           0,
                           kIpProtoUdp};
  acc = csum_partial(tail, sizeof(tail), acc);
  acc = csum_partial(udp, udp_len, acc);
  const uint16_t c = static_cast<uint16_t>(~csum_fold(acc));
  return c == 0 ? 0xffff : c;  // 0 means "no checksum" on the wire
}

// ------------------------------------------------------------------ ICRC core

/// zlib crc32() of the 8 bytes of 0xFF that stand for the masked LRH: the ICRC starts from here.
/// (Linux rxe keeps the same state un-inverted, 0xdebb20e3.) Checked against zlib by the unit tests.
constexpr uint32_t kIcrcSeed = 0x2144df1cu;

/**
 * ICRC of the frame bytes [l3, end): a masked copy of IP+UDP+BTH continuing the
 * 0xFF-LRH seed, then the rest (copied behind it when short, else straight from the frame).
 * Caller guarantees the headers fit.
 */
uint32_t icrc_of(const uint8_t* frame, size_t l3, bool v6, size_t end) {
  const size_t ip_len = v6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  const size_t hdr = ip_len + kUdpHeaderLen + kBthLen;
  // A short rest (ACKs, small payloads) is copied behind the masked headers, so the CRC makes
  // one pass and one final reduction instead of two.
  constexpr size_t kShortRest = 256;
  uint8_t ip[kIpv6HeaderLen + kUdpHeaderLen + kBthLen + kShortRest];
  const size_t rest = l3 + hdr;
  const bool one_pass = end - rest <= kShortRest;
  std::memcpy(ip, frame + l3, one_pass ? end - l3 : hdr);
  if (v6) {
    ip[0] |= 0x0f;  // traffic class, high nibble
    ip[1] = 0xff;   // traffic class low nibble + flow label
    ip[2] = 0xff;
    ip[3] = 0xff;
    ip[7] = 0xff;  // hop limit
  } else {
    ip[1] = 0xff;   // TOS (DSCP + ECN)
    ip[8] = 0xff;   // TTL
    ip[10] = 0xff;  // header checksum
    ip[11] = 0xff;
  }
  uint8_t* udp = ip + ip_len;
  udp[6] = 0xff;  // UDP checksum
  udp[7] = 0xff;
  udp[kUdpHeaderLen + 4] = 0xff;  // BTH resv8a (FECN/BECN on IB fabrics)
  if (one_pass) return crc32_ieee(kIcrcSeed, ip, end - l3);
  return crc32_ieee(crc32_ieee(kIcrcSeed, ip, hdr), frame + rest, end - rest);
}

constexpr uint64_t kRnrTimerNs[32] = {
    655360000, 10000,    20000,    30000,     40000,     60000,     80000,     120000,
    160000,    240000,   320000,   480000,    640000,    960000,    1280000,   1920000,
    2560000,   3840000,  5120000,  7680000,   10240000,  15360000,  20480000,  30720000,
    40960000,  61440000, 81920000, 122880000, 163840000, 245760000, 327680000, 491520000,
};

// AETH credit code -> credits (IBTA vol. 1 table 44); code 31 means "invalid / no credit info".
constexpr uint32_t kCredits[31] = {
    0,   1,   2,   3,   4,    6,    8,    12,   16,   24,   32,   48,    64,    96,    128,   192,
    256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
};

}  // namespace

// ------------------------------------------------------------------ names

namespace {

const char* rc_opcode_name(BthOpcode op) {
  switch (op) {
    case BthOpcode::SEND_FIRST: return "SEND_FIRST";
    case BthOpcode::SEND_MIDDLE: return "SEND_MIDDLE";
    case BthOpcode::SEND_LAST: return "SEND_LAST";
    case BthOpcode::SEND_LAST_WITH_IMMEDIATE: return "SEND_LAST_IMM";
    case BthOpcode::SEND_ONLY: return "SEND_ONLY";
    case BthOpcode::SEND_ONLY_WITH_IMMEDIATE: return "SEND_ONLY_IMM";
    case BthOpcode::RDMA_WRITE_FIRST: return "WRITE_FIRST";
    case BthOpcode::RDMA_WRITE_MIDDLE: return "WRITE_MIDDLE";
    case BthOpcode::RDMA_WRITE_LAST: return "WRITE_LAST";
    case BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE: return "WRITE_LAST_IMM";
    case BthOpcode::RDMA_WRITE_ONLY: return "WRITE_ONLY";
    case BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE: return "WRITE_ONLY_IMM";
    case BthOpcode::RDMA_READ_REQUEST: return "READ_REQ";
    case BthOpcode::RDMA_READ_RESPONSE_FIRST: return "READ_RESP_FIRST";
    case BthOpcode::RDMA_READ_RESPONSE_MIDDLE: return "READ_RESP_MIDDLE";
    case BthOpcode::RDMA_READ_RESPONSE_LAST: return "READ_RESP_LAST";
    case BthOpcode::RDMA_READ_RESPONSE_ONLY: return "READ_RESP_ONLY";
    case BthOpcode::ACKNOWLEDGE: return "ACK";
    case BthOpcode::ATOMIC_ACKNOWLEDGE: return "ATOMIC_ACK";
    case BthOpcode::COMPARE_SWAP: return "CMP_SWAP";
    case BthOpcode::FETCH_ADD: return "FETCH_ADD";
    case BthOpcode::SEND_LAST_WITH_INVALIDATE: return "SEND_LAST_INV";
    case BthOpcode::SEND_ONLY_WITH_INVALIDATE: return "SEND_ONLY_INV";
    default: return "UNKNOWN";
  }
}

/** "UC_"/"UD_" + the RC name, built once (names are returned as plain C strings). */
struct PrefixedNames {
  char uc[32][24];
  char ud[32][24];
  char xrc[32][24];
  PrefixedNames() {
    for (uint8_t i = 0; i < 32; ++i) {
      const char* rc = rc_opcode_name(static_cast<BthOpcode>(i));
      snprintf(uc[i], sizeof uc[i], "UC_%s", rc);
      snprintf(ud[i], sizeof ud[i], "UD_%s", rc);
      snprintf(xrc[i], sizeof xrc[i], "XRC_%s", rc);
    }
  }
};

}  // namespace

const char* opcode_name(BthOpcode op) {
  if (!is_valid_opcode(op)) return "UNKNOWN";
  static const PrefixedNames names;
  const uint8_t low = static_cast<uint8_t>(op) & 0x1f;
  switch (transport_of(op)) {
    case Transport::UC: return names.uc[low];
    case Transport::UD: return names.ud[low];
    case Transport::XRC: return names.xrc[low];
    default: return rc_opcode_name(op);
  }
}

const char* parse_error_name(ParseError e) {
  switch (e) {
    case ParseError::Ok: return "Ok";
    case ParseError::Truncated: return "Truncated";
    case ParseError::BadEtherType: return "BadEtherType";
    case ParseError::BadIpVersion: return "BadIpVersion";
    case ParseError::BadIpHeaderLength: return "BadIpHeaderLength";
    case ParseError::BadIpChecksum: return "BadIpChecksum";
    case ParseError::IpFragment: return "IpFragment";
    case ParseError::BadIpLength: return "BadIpLength";
    case ParseError::NotUdp: return "NotUdp";
    case ParseError::BadUdpLength: return "BadUdpLength";
    case ParseError::NotRoceV2Port: return "NotRoceV2Port";
    case ParseError::BadBthVersion: return "BadBthVersion";
    case ParseError::UnknownOpcode: return "UnknownOpcode";
    case ParseError::BadLength: return "BadLength";
    case ParseError::BadPadCount: return "BadPadCount";
    case ParseError::UnexpectedPayload: return "UnexpectedPayload";
    case ParseError::BadIcrc: return "BadIcrc";
  }
  return "Unknown";
}

const char* nak_code_name(NakCode code) {
  switch (code) {
    case NakCode::PsnSequenceError: return "PSN_SEQ_ERR";
    case NakCode::InvalidRequest: return "INVALID_REQUEST";
    case NakCode::RemoteAccessError: return "REMOTE_ACCESS_ERR";
    case NakCode::RemoteOperationalError: return "REMOTE_OP_ERR";
    case NakCode::InvalidRdRequest: return "INVALID_RD_REQUEST";
  }
  return "NAK_RESERVED";
}

// ------------------------------------------------------------------ GIDs and ports

bool gid_is_ipv4_mapped(const uint8_t gid[16]) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, kPrefix, sizeof(kPrefix)) == 0;
}

void ipv4_to_gid(uint32_t ipv4, uint8_t gid[16]) {
  std::memset(gid, 0, 10);
  gid[10] = 0xff;
  gid[11] = 0xff;
  put32(gid + 12, ipv4);
}

void set_l3_from_gids(Headers& h, const uint8_t sgid[16], const uint8_t dgid[16]) {
  if (gid_is_ipv4_mapped(sgid)) {
    h.ipv6 = false;
    h.ipv4_src = get32(sgid + 12);
    h.ipv4_dst = get32(dgid + 12);
  } else {
    h.ipv6 = true;
    std::memcpy(h.ipv6_src, sgid, 16);
    std::memcpy(h.ipv6_dst, dgid, 16);
  }
}

void gids_from_l3(const Headers& h, uint8_t sgid[16], uint8_t dgid[16]) {
  if (h.ipv6) {
    std::memcpy(sgid, h.ipv6_src, 16);
    std::memcpy(dgid, h.ipv6_dst, 16);
  } else {
    ipv4_to_gid(h.ipv4_src, sgid);
    ipv4_to_gid(h.ipv4_dst, dgid);
  }
}

uint16_t roce_udp_sport(uint32_t src_qpn, uint32_t dst_qpn) {
  // A 64-bit mixer (multiply / xor-shift) over both QPNs; only the low 14 bits are kept.
  uint64_t x = (static_cast<uint64_t>(src_qpn & kQpnMask) << 24) | (dst_qpn & kQpnMask);
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return static_cast<uint16_t>(0xc000u | (x & 0x3fffu));
}

// ------------------------------------------------------------------ lengths

size_t header_length(const Headers& h) {
  return kEthHeaderLen + (h.ipv6 ? kIpv6HeaderLen : kIpv4HeaderLen) + kUdpHeaderLen + kBthLen +
         ext_header_length(h.opcode);
}

size_t frame_length(const Headers& h, size_t payload_len) {
  return header_length(h) + payload_len + pad_count(payload_len) + kIcrcLen;
}

// ------------------------------------------------------------------ build

namespace {

/** IPv4 or IPv6 header at @p ip of a frame of @p total bytes whose UDP datagram is @p udp_len. */
void put_ip_header(const Headers& h, uint8_t* ip, size_t total, size_t l3, size_t udp_len) {
  if (h.ipv6) {
    put32(ip, (6u << 28) | (static_cast<uint32_t>(h.traffic_class) << 20) | (h.flow_label & 0xfffffu));
    put16(ip + 4, static_cast<uint16_t>(udp_len));
    put8(ip + 6, kIpProtoUdp);
    put8(ip + 7, h.ttl);
    std::memcpy(ip + 8, h.ipv6_src, 16);
    std::memcpy(ip + 24, h.ipv6_dst, 16);
    return;
  }
  put8(ip, 0x45);
  put8(ip + 1, h.traffic_class);
  put16(ip + 2, static_cast<uint16_t>(total - l3));
  put16(ip + 4, 0);       // identification: 0 is fine with DF set (RFC 6864)
  put16(ip + 6, 0x4000);  // DF, no fragments: RoCE never fragments
  put8(ip + 8, h.ttl);
  put8(ip + 9, kIpProtoUdp);
  put16(ip + 10, 0);
  put32(ip + 12, h.ipv4_src);
  put32(ip + 16, h.ipv4_dst);
  store_csum(ip + 10, static_cast<uint16_t>(~csum_fold(csum_partial(ip, kIpv4HeaderLen, 0))));
}

/** BTH at @p p; returns the byte after it. */
uint8_t* put_bth(const Headers& h, uint8_t pad, uint8_t* p) {
  put8(p, static_cast<uint8_t>(h.opcode));
  put8(p + 1, static_cast<uint8_t>((h.se ? 0x80 : 0) | (h.migreq ? 0x40 : 0) | (pad << 4) | (h.tver & 0x0f)));
  put16(p + 2, h.pkey);
  put8(p + 4, 0);  // resv8a
  put24(p + 5, h.dest_qp & kQpnMask);
  put8(p + 8, h.ackreq ? 0x80 : 0);
  put24(p + 9, h.psn & kPsnMask);
  return p + kBthLen;
}

/** The extension headers @p flags call for, in IBTA order, at @p p. */
void put_ext_headers(const Headers& h, uint16_t flags, uint8_t* p) {
  if (flags & opflag::kDeth) {
    put32(p, h.deth.qkey);
    put32(p + 4, h.deth.src_qp & kQpnMask);  // the top byte is reserved
    p += kDethLen;
  }
  if (flags & opflag::kXrcEth) {
    put32(p, h.xrc_srqn & kQpnMask);  // the top byte is reserved
    p += kXrcEthLen;
  }
  if (flags & opflag::kReth) {
    put64(p, h.reth.va);
    put32(p + 8, h.reth.rkey);
    put32(p + 12, h.reth.dma_len);
    p += kRethLen;
  }
  if (flags & opflag::kAtomicEth) {
    put64(p, h.atomic_eth.va);
    put32(p + 8, h.atomic_eth.rkey);
    put64(p + 12, h.atomic_eth.swap_add);
    put64(p + 20, h.atomic_eth.compare);
    p += kAtomicEthLen;
  }
  if (flags & opflag::kImm) {
    std::memcpy(p, &h.imm_data, 4);  // already network order
    p += kImmDtLen;
  }
  if (flags & opflag::kIeth) {
    put32(p, h.ieth_rkey);
    p += kIethLen;
  }
  if (flags & opflag::kAeth) {
    put8(p, h.aeth.syndrome);
    put24(p + 1, h.aeth.msn & kMsnMask);
    p += kAethLen;
  }
  if (flags & opflag::kAtomicAckEth) put64(p, h.atomic_ack_eth.orig_data);
}

}  // namespace

size_t build_frame(const Headers& h, const void* payload, size_t payload_len, uint8_t* out, size_t out_cap) {
  const uint16_t flags = opcode_flags(h.opcode);
  if (!(flags & opflag::kValid)) return 0;
  if (payload_len && !(flags & opflag::kPayload)) return 0;
  if (payload_len > 0xffff) return 0;  // cannot fit any IP length field; also keeps the sums below in range
  const size_t hdr_len = header_length(h);
  const uint8_t pad = pad_count(payload_len);
  const size_t total = hdr_len + payload_len + pad + kIcrcLen;
  const size_t l3 = kEthHeaderLen;
  const size_t ip_len = h.ipv6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  const size_t l4 = l3 + ip_len;
  const size_t udp_len = total - l4;
  if (udp_len > 0xffff || (!h.ipv6 && total - l3 > 0xffff)) return 0;
  if (out == nullptr || out_cap < total) return 0;

  // Payload first: it may already sit where it belongs (memmove), and nothing below overlaps it.
  uint8_t* data = out + hdr_len;
  if (payload_len) {
    if (payload)
      std::memmove(data, payload, payload_len);
    else
      std::memset(data, 0, payload_len);
  }
  std::memset(data + payload_len, 0, pad);

  // Ethernet
  std::memcpy(out, h.dst_mac, 6);
  std::memcpy(out + 6, h.src_mac, 6);
  put16(out + 12, h.ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);

  // IP
  uint8_t* ip = out + l3;
  put_ip_header(h, ip, total, l3, udp_len);

  // UDP (checksum filled last, over the finished datagram)
  uint8_t* udp = out + l4;
  put16(udp, h.udp_sport);
  put16(udp + 2, kRoceV2UdpPort);
  put16(udp + 4, static_cast<uint16_t>(udp_len));
  put16(udp + 6, 0);

  // BTH, then the extension headers
  put_ext_headers(h, flags, put_bth(h, pad, udp + kUdpHeaderLen));

  // ICRC (masks the UDP checksum, so it can be computed before it)
  put32_le(out + total - kIcrcLen, icrc_of(out, l3, h.ipv6, total - kIcrcLen));

  if (h.ipv6 && h.ipv6_udp_checksum) store_csum(udp + 6, udp6_checksum(ip, udp, udp_len));
  return total;
}

// ------------------------------------------------------------------ ICRC

uint32_t compute_icrc(const uint8_t* frame, size_t len) {
  if (frame == nullptr || len < kEthHeaderLen) return 0;
  const uint16_t etype = get16(frame + 12);
  if (etype == kEtherTypeIpv4) {
    if (len < kEthHeaderLen + kIpv4HeaderLen + kUdpHeaderLen + kBthLen) return 0;
    if (frame[kEthHeaderLen] != 0x45) return 0;
    return icrc_of(frame, kEthHeaderLen, false, len);
  }
  if (etype == kEtherTypeIpv6) {
    if (len < kEthHeaderLen + kIpv6HeaderLen + kUdpHeaderLen + kBthLen) return 0;
    return icrc_of(frame, kEthHeaderLen, true, len);
  }
  return 0;
}

uint32_t stored_icrc(const uint8_t* frame, size_t frame_len) {
  if (frame == nullptr || frame_len < kIcrcLen) return 0;
  return get32_le(frame + frame_len - kIcrcLen);
}

// ------------------------------------------------------------------ parse

namespace {

/** The IPv4 header at @p l3; sets @p l4 (UDP offset) and @p ip_end (one past the datagram). */
ParseError parse_ipv4(const uint8_t* frame, size_t len, size_t l3, Headers& h, size_t& l4, size_t& ip_end) {
  const uint8_t* ip = frame + l3;
  if (len < l3 + kIpv4HeaderLen) return ParseError::Truncated;
  if ((ip[0] >> 4) != 4) return ParseError::BadIpVersion;
  if ((ip[0] & 0x0f) != 5) return ParseError::BadIpHeaderLength;
  const size_t tot = get16(ip + 2);
  if (tot < kIpv4HeaderLen + kUdpHeaderLen) return ParseError::BadIpLength;
  if (l3 + tot > len) return ParseError::Truncated;
  if (get16(ip + 6) & 0x3fff) return ParseError::IpFragment;  // MF or a fragment offset
  if (ip[9] != kIpProtoUdp) return ParseError::NotUdp;
  if (csum_fold(csum_partial(ip, kIpv4HeaderLen, 0)) != 0xffff) return ParseError::BadIpChecksum;
  h.ipv6 = false;
  h.traffic_class = ip[1];
  h.ttl = ip[8];
  h.flow_label = 0;
  h.ipv4_src = get32(ip + 12);
  h.ipv4_dst = get32(ip + 16);
  l4 = l3 + kIpv4HeaderLen;
  ip_end = l3 + tot;
  return ParseError::Ok;
}

/** The IPv6 header at @p l3; as parse_ipv4. */
ParseError parse_ipv6(const uint8_t* frame, size_t len, size_t l3, Headers& h, size_t& l4, size_t& ip_end) {
  const uint8_t* ip = frame + l3;
  if (len < l3 + kIpv6HeaderLen) return ParseError::Truncated;
  const uint32_t w0 = get32(ip);
  if ((w0 >> 28) != 6) return ParseError::BadIpVersion;
  if (ip[6] != kIpProtoUdp) return ParseError::NotUdp;
  const size_t plen = get16(ip + 4);
  if (plen < kUdpHeaderLen) return ParseError::BadIpLength;
  if (l3 + kIpv6HeaderLen + plen > len) return ParseError::Truncated;
  h.ipv6 = true;
  h.traffic_class = static_cast<uint8_t>(w0 >> 20);
  h.flow_label = w0 & 0xfffffu;
  h.ttl = ip[7];
  std::memcpy(h.ipv6_src, ip + 8, 16);
  std::memcpy(h.ipv6_dst, ip + 24, 16);
  l4 = l3 + kIpv6HeaderLen;
  ip_end = l4 + plen;
  return ParseError::Ok;
}

/** The BTH fields at @p b (the caller checked that the BTH is in the buffer). */
void get_bth(const uint8_t* b, Headers& h) {
  h.opcode = static_cast<BthOpcode>(b[0]);
  h.se = (b[1] & 0x80) != 0;
  h.migreq = (b[1] & 0x40) != 0;
  h.pad = (b[1] >> 4) & 3;
  h.tver = b[1] & 0x0f;
  h.pkey = get16(b + 2);
  h.dest_qp = get24(b + 5);
  h.ackreq = (b[8] & 0x80) != 0;
  h.psn = get24(b + 9);
}

/** The extension headers @p flags call for, at @p p; returns the byte after them. */
const uint8_t* get_ext_headers(const uint8_t* p, uint16_t flags, Headers& h) {
  if (flags & opflag::kDeth) {
    h.deth.qkey = get32(p);
    h.deth.src_qp = get32(p + 4) & kQpnMask;
    p += kDethLen;
  }
  if (flags & opflag::kXrcEth) {
    h.xrc_srqn = get32(p) & kQpnMask;
    p += kXrcEthLen;
  }
  if (flags & opflag::kReth) {
    h.reth.va = get64(p);
    h.reth.rkey = get32(p + 8);
    h.reth.dma_len = get32(p + 12);
    p += kRethLen;
  }
  if (flags & opflag::kAtomicEth) {
    h.atomic_eth.va = get64(p);
    h.atomic_eth.rkey = get32(p + 8);
    h.atomic_eth.swap_add = get64(p + 12);
    h.atomic_eth.compare = get64(p + 20);
    p += kAtomicEthLen;
  }
  if (flags & opflag::kImm) {
    std::memcpy(&h.imm_data, p, 4);
    p += kImmDtLen;
  }
  if (flags & opflag::kIeth) {
    h.ieth_rkey = get32(p);
    p += kIethLen;
  }
  if (flags & opflag::kAeth) {
    h.aeth.syndrome = p[0];
    h.aeth.msn = get24(p + 1);
    p += kAethLen;
  }
  if (flags & opflag::kAtomicAckEth) {
    h.atomic_ack_eth.orig_data = get64(p);
    p += kAtomicAckEthLen;
  }
  return p;
}

}  // namespace

ParseError parse_frame(const uint8_t* frame, size_t len, ParsedFrame& out, bool check_icrc) {
  out.frame = frame;
  out.payload = nullptr;
  out.payload_len = 0;
  out.frame_len = 0;
  out.icrc = 0;
  Headers& h = out.h;
  if (frame == nullptr || len < kEthHeaderLen) return ParseError::Truncated;

  std::memcpy(h.dst_mac, frame, 6);
  std::memcpy(h.src_mac, frame + 6, 6);
  const uint16_t etype = get16(frame + 12);
  const size_t l3 = kEthHeaderLen;
  size_t l4 = 0;      // offset of the UDP header
  size_t ip_end = 0;  // one past the IP datagram; trailing bytes are Ethernet padding or FCS
  ParseError e;
  if (etype == kEtherTypeIpv4)
    e = parse_ipv4(frame, len, l3, h, l4, ip_end);
  else if (etype == kEtherTypeIpv6)
    e = parse_ipv6(frame, len, l3, h, l4, ip_end);
  else
    e = ParseError::BadEtherType;
  if (e != ParseError::Ok) return e;

  // UDP: the IP length check above guarantees its 8 bytes are in the buffer.
  const uint8_t* udp = frame + l4;
  if (get16(udp + 4) != ip_end - l4) return ParseError::BadUdpLength;
  if (get16(udp + 2) != kRoceV2UdpPort) return ParseError::NotRoceV2Port;
  h.udp_sport = get16(udp);
  if (h.ipv6) h.ipv6_udp_checksum = get16(udp + 6) != 0;

  // BTH
  const size_t bth = l4 + kUdpHeaderLen;
  const size_t ib_len = ip_end - bth;  // BTH through ICRC
  if (ib_len < kBthLen + kIcrcLen) return ParseError::BadLength;
  const uint8_t* b = frame + bth;
  get_bth(b, h);
  if (h.tver != 0) return ParseError::BadBthVersion;
  const uint16_t flags = opcode_flags(h.opcode);
  if (!(flags & opflag::kValid)) return ParseError::UnknownOpcode;

  const size_t ext = ext_header_length(h.opcode);
  if (ib_len < kBthLen + ext + kIcrcLen || (ib_len & 3) != 0) return ParseError::BadLength;
  const size_t data_len = ib_len - kBthLen - ext - kIcrcLen;  // payload + pad
  if (!(flags & opflag::kPayload)) {
    if (h.pad != 0) return ParseError::BadPadCount;
    if (data_len != 0) return ParseError::UnexpectedPayload;
  } else if (h.pad > data_len) {
    return ParseError::BadPadCount;
  }

  const uint8_t* p = get_ext_headers(b + kBthLen, flags, h);

  out.payload_len = data_len - h.pad;
  out.payload = out.payload_len ? p : nullptr;
  out.frame_len = ip_end;
  out.icrc = get32_le(frame + ip_end - kIcrcLen);
  if (check_icrc && icrc_of(frame, l3, h.ipv6, ip_end - kIcrcLen) != out.icrc) return ParseError::BadIcrc;
  return ParseError::Ok;
}

// ------------------------------------------------------------------ AETH / timers

uint32_t aeth_credits(uint8_t credit_code) {
  credit_code &= 0x1f;
  return credit_code == kAethCreditInvalid ? UINT32_MAX : kCredits[credit_code];
}

uint8_t aeth_credit_code(uint32_t credits) {
  uint8_t lo = 0, hi = 30;  // invariant: kCredits[lo] <= credits (kCredits[0] == 0)
  while (lo < hi) {
    const uint8_t mid = static_cast<uint8_t>((lo + hi + 1) / 2);
    if (kCredits[mid] <= credits)
      lo = mid;
    else
      hi = static_cast<uint8_t>(mid - 1);
  }
  return lo;
}

uint64_t rnr_timer_ns(uint8_t code) { return kRnrTimerNs[code & 0x1f]; }

// ------------------------------------------------------------------ segmentation

SegmentPlan plan_segments(MessageKind kind, uint32_t msg_len, uint32_t mtu) {
  SegmentPlan plan;
  plan.kind = kind;
  plan.length = msg_len;
  plan.mtu = mtu;
  if (!valid_mtu(mtu)) return plan;
  plan.num_packets =
      msg_len == 0 ? 1 : static_cast<uint32_t>((static_cast<uint64_t>(msg_len) + mtu - 1) / mtu);
  return plan;
}

Segment SegmentPlan::segment(uint32_t i) const {
  // {first, middle, last, only} per MessageKind
  static constexpr BthOpcode kOps[6][4] = {
      {BthOpcode::SEND_FIRST, BthOpcode::SEND_MIDDLE, BthOpcode::SEND_LAST, BthOpcode::SEND_ONLY},
      {BthOpcode::SEND_FIRST, BthOpcode::SEND_MIDDLE, BthOpcode::SEND_LAST_WITH_IMMEDIATE,
       BthOpcode::SEND_ONLY_WITH_IMMEDIATE},
      {BthOpcode::SEND_FIRST, BthOpcode::SEND_MIDDLE, BthOpcode::SEND_LAST_WITH_INVALIDATE,
       BthOpcode::SEND_ONLY_WITH_INVALIDATE},
      {BthOpcode::RDMA_WRITE_FIRST, BthOpcode::RDMA_WRITE_MIDDLE, BthOpcode::RDMA_WRITE_LAST,
       BthOpcode::RDMA_WRITE_ONLY},
      {BthOpcode::RDMA_WRITE_FIRST, BthOpcode::RDMA_WRITE_MIDDLE, BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE,
       BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE},
      {BthOpcode::RDMA_READ_RESPONSE_FIRST, BthOpcode::RDMA_READ_RESPONSE_MIDDLE,
       BthOpcode::RDMA_READ_RESPONSE_LAST, BthOpcode::RDMA_READ_RESPONSE_ONLY},
  };
  const auto& ops = kOps[static_cast<uint8_t>(kind) < 6 ? static_cast<uint8_t>(kind) : 0];
  Segment s;
  const uint64_t off = static_cast<uint64_t>(i) * mtu;
  s.offset = off < length ? static_cast<uint32_t>(off) : length;
  const uint32_t left = length - s.offset;
  s.length = left < mtu ? left : mtu;
  if (num_packets <= 1)
    s.opcode = ops[3];
  else if (i == 0)
    s.opcode = ops[0];
  else if (i + 1 >= num_packets)
    s.opcode = ops[2];
  else
    s.opcode = ops[1];
  return s;
}

}  // namespace hcasim::wire
