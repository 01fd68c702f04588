// SPDX-License-Identifier: Apache-2.0
/**
 * @file roce_packet.h
 * @brief RoCEv2 wire format: build and parse real Ethernet/IP/UDP/IB frames.
 *
 * The simulated HCA exchanges byte-exact RoCEv2 frames so that captures open
 * in Wireshark and so that the model exercises the same parsing and checking
 * a real NIC does (lengths, pad count, ICRC). The Reliable Connection (RC),
 * Unreliable Connection (UC), Unreliable Datagram (UD) and eXtended Reliable Connection (XRC)
 * transports are covered.
 *
 * Layout of every frame built here (no VLAN tag, no Ethernet FCS):
 *
 *     Ethernet(14) | IPv4(20) or IPv6(40) | UDP(8, dst 4791) | BTH(12)
 *     | extension headers (by opcode) | payload | pad (0..3) | ICRC(4)
 *
 * Hot path: the simulator builds and parses one frame per packet at more than
 * a million packets per second, so nothing here allocates, touches iostreams
 * or loops per byte except the checksums themselves (crc32.h's CRC-32 for the ICRC,
 * an 8-bytes-at-a-time one's-complement sum for IP/UDP).
 *
 * Byte order: every multi-byte field of hcasim::wire::Headers is in host order, except
 * Headers::imm_data which is kept exactly as verbs carries it (network order).
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace hcasim::wire {

// ------------------------------------------------------------------ constants

constexpr uint16_t kRoceV2UdpPort = 4791;    ///< IANA port that marks a UDP datagram as RoCEv2
constexpr uint16_t kEtherTypeIpv4 = 0x0800;  ///< EtherType of a RoCEv2-over-IPv4 frame
constexpr uint16_t kEtherTypeIpv6 = 0x86dd;  ///< EtherType of a RoCEv2-over-IPv6 frame
constexpr uint8_t kIpProtoUdp = 17;          ///< IPv4 protocol / IPv6 next header for UDP

constexpr size_t kEthHeaderLen = 14;    ///< dst MAC, src MAC, EtherType
constexpr size_t kIpv4HeaderLen = 20;   ///< RoCEv2 never uses IPv4 options
constexpr size_t kIpv6HeaderLen = 40;   ///< RoCEv2 never uses IPv6 extension headers
constexpr size_t kUdpHeaderLen = 8;     ///< source port, destination port, length, checksum
constexpr size_t kBthLen = 12;          ///< Base Transport Header
constexpr size_t kRethLen = 16;         ///< RDMA ETH: va, rkey, dma length
constexpr size_t kAethLen = 4;          ///< ACK ETH: syndrome, MSN
constexpr size_t kImmDtLen = 4;         ///< immediate data
constexpr size_t kIethLen = 4;          ///< invalidate ETH: rkey to invalidate
constexpr size_t kAtomicEthLen = 28;    ///< va, rkey, swap/add, compare
constexpr size_t kAtomicAckEthLen = 8;  ///< original remote data
constexpr size_t kIcrcLen = 4;          ///< invariant CRC, last 4 bytes of every frame
constexpr size_t kDethLen = 8;          ///< datagram ETH (UD): Q_Key, source QP
constexpr size_t kXrcEthLen = 4;        ///< XRC ETH: the destination XRC SRQ number
constexpr size_t kGrhLen = 40;          ///< what a UD receive buffer gets before the payload

/// Longest header stack: Eth + IPv6 + UDP + BTH + AtomicETH (the largest extension set; a UD
/// packet's DETH + ImmDt is shorter).
constexpr size_t kMaxHeaderLen = kEthHeaderLen + kIpv6HeaderLen + kUdpHeaderLen + kBthLen + kAtomicEthLen;

/// Largest frame for a path MTU (payload bytes per packet): sizes transmit buffers once, up front.
constexpr size_t max_frame_length(size_t mtu) { return kMaxHeaderLen + mtu + 3 + kIcrcLen; }

constexpr uint32_t kPsnMask = 0xffffff;    ///< PSNs are 24-bit and wrap
constexpr uint32_t kQpnMask = 0xffffff;    ///< QPNs are 24-bit
constexpr uint32_t kMsnMask = 0xffffff;    ///< AETH MSN is 24-bit
constexpr uint16_t kDefaultPkey = 0xffff;  ///< full-member default partition, what RoCE uses

// ------------------------------------------------------------------ opcodes

/**
 * @brief The transport an opcode belongs to: its top three bits (IBTA vol. 1, table 38).
 */
enum class Transport : uint8_t { RC = 0, UC = 1, RD = 2, UD = 3, XRC = 5 };

/**
 * @brief BTH opcodes (IBTA vol. 1, table 38): the RC set (prefix 0b000), the UC set (0b001:
 * the SEND and WRITE opcodes of RC), the UD set (0b011: SEND_ONLY with or without
 * immediate, with a DETH) and the XRC set (0b101: RC's opcodes, requests with an XRCETH).
 *
 * The two *_WITH_INVALIDATE opcodes (IBTA 1.2+) are included because verbs
 * exposes IBV_WR_SEND_WITH_INV; they carry an IETH.
 */
enum class BthOpcode : uint8_t {
  SEND_FIRST = 0x00,
  SEND_MIDDLE = 0x01,
  SEND_LAST = 0x02,
  SEND_LAST_WITH_IMMEDIATE = 0x03,
  SEND_ONLY = 0x04,
  SEND_ONLY_WITH_IMMEDIATE = 0x05,
  RDMA_WRITE_FIRST = 0x06,
  RDMA_WRITE_MIDDLE = 0x07,
  RDMA_WRITE_LAST = 0x08,
  RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09,
  RDMA_WRITE_ONLY = 0x0a,
  RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b,
  RDMA_READ_REQUEST = 0x0c,
  RDMA_READ_RESPONSE_FIRST = 0x0d,
  RDMA_READ_RESPONSE_MIDDLE = 0x0e,
  RDMA_READ_RESPONSE_LAST = 0x0f,
  RDMA_READ_RESPONSE_ONLY = 0x10,
  ACKNOWLEDGE = 0x11,
  ATOMIC_ACKNOWLEDGE = 0x12,
  COMPARE_SWAP = 0x13,
  FETCH_ADD = 0x14,
  SEND_LAST_WITH_INVALIDATE = 0x16,
  SEND_ONLY_WITH_INVALIDATE = 0x17,
  UC_SEND_FIRST = 0x20,
  UC_SEND_ONLY = 0x24,
  UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2b,
  UD_SEND_ONLY = 0x64,
  UD_SEND_ONLY_WITH_IMMEDIATE = 0x65,
  XRC_SEND_ONLY = 0xa4,
  XRC_ACKNOWLEDGE = 0xb1,
};

/** @brief The transport of @p op (its top three bits). */
constexpr Transport transport_of(BthOpcode op) {
  return static_cast<Transport>(static_cast<uint8_t>(op) >> 5);
}
/** @brief The opcode with the same low five bits in transport @p t (SEND_ONLY in UD is UD_SEND_ONLY). */
constexpr BthOpcode in_transport(BthOpcode op, Transport t) {
  return static_cast<BthOpcode>((static_cast<uint8_t>(t) << 5) | (static_cast<uint8_t>(op) & 0x1f));
}
/** @brief The RC opcode with the same meaning (the low five bits): UC_SEND_ONLY is SEND_ONLY. */
constexpr BthOpcode rc_equivalent(BthOpcode op) {
  return static_cast<BthOpcode>(static_cast<uint8_t>(op) & 0x1f);
}

/// Per-opcode property bits; one switch answers every predicate so each compiles to a table lookup.
namespace opflag {
constexpr uint16_t kValid = 1u << 0;         ///< an RC opcode this library knows
constexpr uint16_t kReth = 1u << 1;          ///< carries a RETH
constexpr uint16_t kImm = 1u << 2;           ///< carries ImmDt
constexpr uint16_t kAeth = 1u << 3;          ///< carries an AETH
constexpr uint16_t kAtomicEth = 1u << 4;     ///< carries an AtomicETH
constexpr uint16_t kAtomicAckEth = 1u << 5;  ///< carries an AtomicAckETH
constexpr uint16_t kIeth = 1u << 6;          ///< carries an IETH
constexpr uint16_t kPayload = 1u << 7;       ///< may carry payload bytes
constexpr uint16_t kFirst = 1u << 8;         ///< first packet of a multi-packet message
constexpr uint16_t kMiddle = 1u << 9;        ///< middle packet (full MTU)
constexpr uint16_t kLast = 1u << 10;         ///< last packet of a multi-packet message
constexpr uint16_t kOnly = 1u << 11;         ///< the packet is the whole message / exchange
constexpr uint16_t kRequest = 1u << 12;      ///< sent by the requester (else by the responder)
constexpr uint16_t kDeth = 1u << 13;         ///< carries a DETH (UD)
constexpr uint16_t kXrcEth = 1u << 14;       ///< carries an XRCETH (XRC requests)
}  // namespace opflag

/** @brief Property bits (opflag::*) of an RC opcode; 0 for an opcode outside the RC set. */
constexpr uint16_t rc_opcode_flags(BthOpcode op) {
  using namespace opflag;
  switch (op) {
    case BthOpcode::SEND_FIRST: return kValid | kRequest | kPayload | kFirst;
    case BthOpcode::SEND_MIDDLE: return kValid | kRequest | kPayload | kMiddle;
    case BthOpcode::SEND_LAST: return kValid | kRequest | kPayload | kLast;
    case BthOpcode::SEND_LAST_WITH_IMMEDIATE: return kValid | kRequest | kPayload | kLast | kImm;
    case BthOpcode::SEND_ONLY: return kValid | kRequest | kPayload | kOnly;
    case BthOpcode::SEND_ONLY_WITH_IMMEDIATE: return kValid | kRequest | kPayload | kOnly | kImm;
    case BthOpcode::RDMA_WRITE_FIRST: return kValid | kRequest | kPayload | kFirst | kReth;
    case BthOpcode::RDMA_WRITE_MIDDLE: return kValid | kRequest | kPayload | kMiddle;
    case BthOpcode::RDMA_WRITE_LAST: return kValid | kRequest | kPayload | kLast;
    case BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE: return kValid | kRequest | kPayload | kLast | kImm;
    case BthOpcode::RDMA_WRITE_ONLY: return kValid | kRequest | kPayload | kOnly | kReth;
    case BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE:
      return kValid | kRequest | kPayload | kOnly | kReth | kImm;
    case BthOpcode::RDMA_READ_REQUEST: return kValid | kRequest | kOnly | kReth;
    case BthOpcode::RDMA_READ_RESPONSE_FIRST: return kValid | kPayload | kFirst | kAeth;
    case BthOpcode::RDMA_READ_RESPONSE_MIDDLE: return kValid | kPayload | kMiddle;
    case BthOpcode::RDMA_READ_RESPONSE_LAST: return kValid | kPayload | kLast | kAeth;
    case BthOpcode::RDMA_READ_RESPONSE_ONLY: return kValid | kPayload | kOnly | kAeth;
    case BthOpcode::ACKNOWLEDGE: return kValid | kOnly | kAeth;
    case BthOpcode::ATOMIC_ACKNOWLEDGE: return kValid | kOnly | kAeth | kAtomicAckEth;
    case BthOpcode::COMPARE_SWAP: return kValid | kRequest | kOnly | kAtomicEth;
    case BthOpcode::FETCH_ADD: return kValid | kRequest | kOnly | kAtomicEth;
    case BthOpcode::SEND_LAST_WITH_INVALIDATE: return kValid | kRequest | kPayload | kLast | kIeth;
    case BthOpcode::SEND_ONLY_WITH_INVALIDATE: return kValid | kRequest | kPayload | kOnly | kIeth;
    default: return 0;
  }
}

/**
 * @brief Property bits (opflag::*) of an opcode of any transport this library knows; 0 otherwise.
 * UC has RC's SEND and RDMA WRITE opcodes (0x00..0x0b); UD has SEND_ONLY and SEND_ONLY with
 * immediate, each with a DETH.
 */
constexpr uint16_t opcode_flags(BthOpcode op) {
  const uint8_t low = static_cast<uint8_t>(op) & 0x1f;
  switch (transport_of(op)) {
    case Transport::RC: return rc_opcode_flags(op);
    case Transport::UC: return low <= 0x0b ? rc_opcode_flags(rc_equivalent(op)) : 0;
    case Transport::UD:
      return low == 0x04 || low == 0x05 ? rc_opcode_flags(rc_equivalent(op)) | opflag::kDeth : 0;
    case Transport::XRC: {
      const uint16_t f = rc_opcode_flags(rc_equivalent(op));
      return (f & opflag::kRequest) ? f | opflag::kXrcEth : f;
    }
    default: return 0;
  }
}

/** @brief True for the RC, UC, UD and XRC opcodes above; a parser rejects anything else. */
constexpr bool is_valid_opcode(BthOpcode op) { return (opcode_flags(op) & opflag::kValid) != 0; }
/** @brief The packet carries a RETH (first/only packet of an RDMA WRITE, every READ request). */
constexpr bool has_reth(BthOpcode op) { return (opcode_flags(op) & opflag::kReth) != 0; }
/** @brief The packet carries ImmDt (last/only packet of a *_WITH_IMMEDIATE message). */
constexpr bool has_imm(BthOpcode op) { return (opcode_flags(op) & opflag::kImm) != 0; }
/** @brief The packet carries an IETH (last/only packet of SEND_WITH_INVALIDATE). */
constexpr bool has_ieth(BthOpcode op) { return (opcode_flags(op) & opflag::kIeth) != 0; }
/** @brief The packet carries an XRCETH (every XRC request). */
constexpr bool has_xrceth(BthOpcode op) { return (opcode_flags(op) & opflag::kXrcEth) != 0; }
/** @brief The packet carries a DETH (every UD packet). */
constexpr bool has_deth(BthOpcode op) { return (opcode_flags(op) & opflag::kDeth) != 0; }
/** @brief The packet carries an AETH (ACK, ATOMIC ACK, READ response first/last/only). */
constexpr bool has_aeth(BthOpcode op) { return (opcode_flags(op) & opflag::kAeth) != 0; }
/** @brief The packet carries an AtomicETH (COMPARE_SWAP, FETCH_ADD). */
constexpr bool has_atomic_eth(BthOpcode op) { return (opcode_flags(op) & opflag::kAtomicEth) != 0; }
/** @brief The packet carries an AtomicAckETH (ATOMIC_ACKNOWLEDGE). */
constexpr bool has_atomic_ack_eth(BthOpcode op) { return (opcode_flags(op) & opflag::kAtomicAckEth) != 0; }
/**
 * @brief The opcode may carry payload bytes (SEND, WRITE, READ response).
 * A zero-length message is still one *_ONLY packet with no payload.
 */
constexpr bool carries_payload(BthOpcode op) { return (opcode_flags(op) & opflag::kPayload) != 0; }
/** @brief First packet of a multi-packet message. */
constexpr bool is_first(BthOpcode op) { return (opcode_flags(op) & opflag::kFirst) != 0; }
/** @brief Middle packet of a multi-packet message (always a full path MTU of payload). */
constexpr bool is_middle(BthOpcode op) { return (opcode_flags(op) & opflag::kMiddle) != 0; }
/** @brief Last packet of a multi-packet message. */
constexpr bool is_last(BthOpcode op) { return (opcode_flags(op) & opflag::kLast) != 0; }
/**
 * @brief The packet is a whole message on its own: every *_ONLY opcode, and also
 * READ_REQUEST, the atomics, ACKNOWLEDGE and ATOMIC_ACKNOWLEDGE, which are never segmented.
 * So `is_first || is_only` starts a message and `is_last || is_only` ends one, with no special cases.
 */
constexpr bool is_only(BthOpcode op) { return (opcode_flags(op) & opflag::kOnly) != 0; }
/** @brief The packet starts a message (FIRST or ONLY). */
constexpr bool starts_message(BthOpcode op) { return is_first(op) || is_only(op); }
/** @brief The packet ends a message (LAST or ONLY). */
constexpr bool ends_message(BthOpcode op) { return is_last(op) || is_only(op); }
/** @brief Sent requester to responder (SEND, WRITE, READ request, atomics); false for responses. */
constexpr bool is_request(BthOpcode op) { return (opcode_flags(op) & opflag::kRequest) != 0; }
/** @brief Sent responder to requester (READ responses, ACK, ATOMIC ACK). */
constexpr bool is_response(BthOpcode op) { return is_valid_opcode(op) && !is_request(op); }

/** @brief Bytes of extension headers that follow the BTH for this opcode. */
constexpr size_t ext_header_length(BthOpcode op) {
  const uint16_t f = opcode_flags(op);
  return ((f & opflag::kDeth) ? kDethLen : 0) + ((f & opflag::kXrcEth) ? kXrcEthLen : 0) +
         ((f & opflag::kReth) ? kRethLen : 0) + ((f & opflag::kAtomicEth) ? kAtomicEthLen : 0) +
         ((f & opflag::kImm) ? kImmDtLen : 0) + ((f & opflag::kIeth) ? kIethLen : 0) +
         ((f & opflag::kAeth) ? kAethLen : 0) + ((f & opflag::kAtomicAckEth) ? kAtomicAckEthLen : 0);
}

/** @brief Short readable name ("SEND_ONLY_IMM", "WRITE_FIRST", "READ_RESP_LAST", "ACK"..., with a
 * "UC_" or "UD_" prefix outside RC); "UNKNOWN" otherwise. */
const char* opcode_name(BthOpcode op);

// ------------------------------------------------------------------ headers

/** @brief RDMA Extended Transport Header: where a WRITE lands or a READ comes from. */
struct Reth {
  uint64_t va = 0;       ///< remote virtual address
  uint32_t rkey = 0;     ///< remote key
  uint32_t dma_len = 0;  ///< length of the whole message (not just this packet)
};

/** @brief ACK Extended Transport Header. */
struct Aeth {
  uint8_t syndrome = 0;  ///< see aeth_ack(), aeth_rnr_nak(), aeth_nak()
  uint32_t msn = 0;      ///< 24-bit message sequence number
};

/** @brief Atomic Extended Transport Header (COMPARE_SWAP / FETCH_ADD). */
struct AtomicEth {
  uint64_t va = 0;        ///< remote address, 8-byte aligned
  uint32_t rkey = 0;      ///< remote key
  uint64_t swap_add = 0;  ///< swap value (CMP_SWAP) or addend (FETCH_ADD)
  uint64_t compare = 0;   ///< compare value (CMP_SWAP only; ignored by FETCH_ADD)
};

/** @brief Datagram Extended Transport Header (UD). */
struct Deth {
  uint32_t qkey = 0;    ///< the receiving QP accepts the packet only if this equals its Q_Key
  uint32_t src_qp = 0;  ///< 24-bit QPN of the sender (ibv_wc::src_qp)
};

/** @brief Atomic ACK Extended Transport Header. */
struct AtomicAckEth {
  uint64_t orig_data = 0;  ///< remote value before the atomic operation
};

/**
 * @brief Every field of one RoCEv2 packet's headers, as plain host-order values.
 *
 * Which extension headers are on the wire follows from @ref opcode alone; the
 * structs for absent ones are ignored by build_frame() and left as they were by
 * parse_frame(). Defaults give a valid IPv4 SEND_ONLY frame.
 */
struct Headers {
  // L2
  uint8_t dst_mac[6] = {};  ///< Ethernet destination (next hop)
  uint8_t src_mac[6] = {};  ///< Ethernet source

  // L3. For RoCEv2 the GIDs are the IP addresses: see set_l3_from_gids().
  bool ipv6 = false;          ///< false: IPv4 fields below are used; true: IPv6 fields
  uint32_t ipv4_src = 0;      ///< host order, e.g. 0x0a000001 is 10.0.0.1
  uint32_t ipv4_dst = 0;      ///< host order
  uint8_t ipv6_src[16] = {};  ///< the source GID itself
  uint8_t ipv6_dst[16] = {};  ///< the destination GID itself
  uint8_t ttl = 64;           ///< IPv4 TTL / IPv6 hop limit (verbs grh.hop_limit)
  /// IPv4 TOS byte / IPv6 traffic class: DSCP in bits 7..2, ECN in bits 1..0 (verbs grh.traffic_class).
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;  ///< 20-bit IPv6 flow label; unused for IPv4
  /// IPv6 only: true computes the real UDP checksum (Wireshark flags a zero one as an error), false
  /// sends 0 like Linux rxe. IPv4 always sends 0. parse_frame() reports whether an IPv6 frame had one.
  bool ipv6_udp_checksum = true;

  // L4
  uint16_t udp_sport = 0xc000;  ///< entropy for ECMP; see roce_udp_sport(). Destination is always 4791.

  // BTH
  BthOpcode opcode = BthOpcode::SEND_ONLY;  ///< decides which extension headers are present
  bool se = false;                          ///< solicited event
  bool migreq = false;                      ///< migration request (APM); carried through unchanged
  uint8_t pad = 0;               ///< output only: parse_frame() reports it, build_frame() computes it
  uint8_t tver = 0;              ///< transport header version; must be 0
  uint16_t pkey = kDefaultPkey;  ///< partition key
  uint32_t dest_qp = 0;          ///< 24-bit destination QPN
  bool ackreq = false;           ///< ask the responder for an ACK
  uint32_t psn = 0;              ///< 24-bit packet sequence number

  // Extension headers (present according to opcode)
  Deth deth;              ///< used when has_deth(opcode)
  uint32_t xrc_srqn = 0;  ///< XRCETH: the XRC SRQ the request is for (24 bits), when has_xrceth(opcode)
  Reth reth;              ///< used when has_reth(opcode)
  Aeth aeth;              ///< used when has_aeth(opcode)
  /// ImmDt exactly as verbs holds it (ibv_send_wr::imm_data / ibv_wc::imm_data): network order, copied raw.
  uint32_t imm_data = 0;
  uint32_t ieth_rkey = 0;       ///< rkey to invalidate (host order, like ibv_send_wr::invalidate_rkey)
  AtomicEth atomic_eth;         ///< used when has_atomic_eth(opcode)
  AtomicAckEth atomic_ack_eth;  ///< used when has_atomic_ack_eth(opcode)
};

/** @brief True if a GID is an IPv4-mapped IPv6 address (\::ffff:a.b.c.d), i.e. a RoCEv2 IPv4 GID. */
bool gid_is_ipv4_mapped(const uint8_t gid[16]);

/** @brief Writes the IPv4-mapped GID \::ffff:a.b.c.d for a host-order IPv4 address. */
void ipv4_to_gid(uint32_t ipv4, uint8_t gid[16]);

/**
 * @brief Fills the L3 fields from a source/destination GID pair.
 *
 * Like the kernel's RoCEv2 GID type logic, the source GID decides: an IPv4-mapped
 * sgid selects IPv4 (addresses taken from the last 4 bytes of each GID), anything
 * else selects IPv6 with the GIDs used verbatim as addresses.
 */
void set_l3_from_gids(Headers& h, const uint8_t sgid[16], const uint8_t dgid[16]);

/** @brief The inverse of set_l3_from_gids(): the GIDs a received frame's addresses stand for (fills
 * ibv_grh/ibv_wc). */
void gids_from_l3(const Headers& h, uint8_t sgid[16], uint8_t dgid[16]);

/**
 * @brief UDP source port for a QP pair: 0xC000 | 14-bit hash of both QPNs.
 * RoCEv2 uses the source port as ECMP entropy; keeping it fixed per connection
 * keeps a connection's packets in order on one path. Deterministic, not rxe's exact formula.
 */
uint16_t roce_udp_sport(uint32_t src_qpn, uint32_t dst_qpn);

// ------------------------------------------------------------------ lengths

/** @brief Pad bytes that round a payload up to a 4-byte multiple (BTH PadCnt). */
constexpr uint8_t pad_count(size_t payload_len) { return static_cast<uint8_t>((0u - payload_len) & 3u); }

/** @brief Bytes from the Ethernet header through the last extension header. */
size_t header_length(const Headers& h);

/** @brief Whole frame: headers + payload + pad + ICRC (no Ethernet FCS, no padding to 60 bytes). */
size_t frame_length(const Headers& h, size_t payload_len);

// ------------------------------------------------------------------ build

/**
 * @brief Serializes one frame into @p out.
 *
 * Fills the IPv4 header checksum, IPv4 total length / IPv6 payload length, UDP
 * length, BTH pad count, zero pad bytes and the ICRC. The UDP checksum is 0 for
 * IPv4 (allowed for RoCEv2) and, for IPv6, a real checksum unless
 * Headers::ipv6_udp_checksum is false (then 0, as Linux rxe sends; Wireshark then
 * flags "Illegal checksum value (0)" because IPv6 requires one).
 *
 * @p payload may be null (payload bytes are then zeroed, for timing-only traffic)
 * and may already sit at `out + header_length(h)` (zero-copy: memmove handles it).
 *
 * @return bytes written, or 0 if @p out_cap is too small, the opcode is unknown,
 *         a payload is given to an opcode that carries none, or the length
 *         overflows the IP length field.
 */
size_t build_frame(const Headers& h, const void* payload, size_t payload_len, uint8_t* out, size_t out_cap);

/**
 * @brief RoCEv2 ICRC (IBTA vol. 1 Annex A17) of a complete frame minus its last 4 bytes.
 *
 * CRC-32 (Ethernet/zlib polynomial, reflected, init and final xor 0xFFFFFFFF)
 * over: 8 bytes of 0xFF standing for the masked LRH; the IP header with the
 * variant fields set to all 1s (IPv4: TOS, TTL, header checksum; IPv6: traffic
 * class, flow label, hop limit); the UDP header with its checksum set to 1s;
 * the BTH with its reserved byte resv8a (which holds FECN/BECN on IB) set to 1s;
 * then everything after the BTH up to the ICRC (extension headers, payload, pad).
 *
 * The result is the value zlib's crc32() returns. It goes on the wire least
 * significant byte first (the same convention as the Ethernet FCS; what Linux
 * rxe does on a little-endian host), so Wireshark, which shows the field
 * big-endian, displays it byte-swapped.
 *
 * @return the ICRC, or 0 if the frame is not Ethernet + IPv4(no options)/IPv6 + UDP + BTH.
 */
uint32_t compute_icrc(const uint8_t* frame, size_t frame_len_without_icrc);

/** @brief Reads the ICRC stored in the last 4 bytes of a frame (little-endian, see compute_icrc()). */
uint32_t stored_icrc(const uint8_t* frame, size_t frame_len);

// ------------------------------------------------------------------ parse

/** @brief Why parse_frame() rejected a frame; Ok is 0 so `if (err != ParseError::Ok)` reads naturally. */
enum class ParseError : uint8_t {
  Ok = 0,             ///< valid frame; ParsedFrame fully filled
  Truncated,          ///< shorter than the headers or than the IP length says
  BadEtherType,       ///< neither IPv4 nor IPv6 (VLAN tags are not supported)
  BadIpVersion,       ///< IP version nibble disagrees with the EtherType
  BadIpHeaderLength,  ///< IPv4 IHL != 5 (RoCEv2 carries no options)
  BadIpChecksum,      ///< IPv4 header checksum wrong
  IpFragment,         ///< IPv4 MF set or fragment offset != 0
  BadIpLength,        ///< IPv4 total length / IPv6 payload length inconsistent
  NotUdp,             ///< IP protocol / next header is not UDP
  BadUdpLength,       ///< UDP length disagrees with the IP length
  NotRoceV2Port,      ///< UDP destination port is not 4791
  BadBthVersion,      ///< BTH TVer != 0
  UnknownOpcode,      ///< not an RC, UC, UD or XRC opcode this library handles
  BadLength,          ///< too short for BTH + extension headers + ICRC, or not a 4-byte multiple
  BadPadCount,        ///< pad count larger than the payload area, or non-zero without payload
  UnexpectedPayload,  ///< payload bytes after an opcode that carries none
  BadIcrc,            ///< ICRC mismatch
};

/** @brief Stable name of a ParseError ("Ok", "BadIcrc", ...), for logs and test messages. */
const char* parse_error_name(ParseError e);

/** @brief A parsed frame: headers by value, payload by pointer into the caller's buffer. */
struct ParsedFrame {
  Headers h;                         ///< all header fields, host order (imm_data raw)
  const uint8_t* frame = nullptr;    ///< the parsed buffer (its IP header starts at kEthHeaderLen)
  const uint8_t* payload = nullptr;  ///< first payload byte inside the parsed buffer (null if none)
  size_t payload_len = 0;            ///< payload bytes, pad excluded
  size_t frame_len = 0;              ///< bytes the RoCE frame occupies (trailing Ethernet padding excluded)
  uint32_t icrc = 0;                 ///< the ICRC found in the frame
};

/**
 * @brief Validates and decodes one frame.
 *
 * Checks EtherType, IP version, IHL, header checksum (IPv4), fragmentation,
 * protocol, IP and UDP lengths, UDP port 4791, BTH TVer, that the opcode is a
 * known RC, UC, UD or XRC opcode, that the UDP payload holds exactly BTH + that opcode's
 * extension headers + payload + pad + ICRC, and (if @p check_icrc) the ICRC.
 * Bytes after the IP datagram (Ethernet minimum-size padding, an FCS) are
 * ignored. The UDP checksum is not verified: the ICRC covers the same bytes end
 * to end, and RoCEv2 senders commonly leave it 0.
 *
 * Never reads outside [frame, frame + len). On error @p out is partially filled.
 */
ParseError parse_frame(const uint8_t* frame, size_t len, ParsedFrame& out, bool check_icrc = true);

// ------------------------------------------------------------------ PSN arithmetic

/** @brief psn + n modulo 2^24; n may be negative. */
constexpr uint32_t psn_add(uint32_t psn, int64_t n) {
  return static_cast<uint32_t>(static_cast<uint64_t>(psn) + static_cast<uint64_t>(n)) & kPsnMask;
}

/**
 * @brief Signed distance a - b on the 24-bit PSN circle, in (-2^23, 2^23].
 * Positive means a is after b; this is how a responder tells duplicate from out-of-sequence.
 */
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  const uint32_t d = (a - b) & kPsnMask;
  return d > 0x800000u ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
}

/** @brief a comes strictly before b on the PSN circle. */
constexpr bool psn_before(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }

// ------------------------------------------------------------------ AETH

/** @brief What an AETH syndrome says (bits 6..5 of the syndrome byte). */
enum class AethKind : uint8_t {
  Ack = 0,       ///< 00: positive ACK; low 5 bits are the credit code
  RnrNak = 1,    ///< 01: receiver not ready; low 5 bits are the RNR timer code
  Reserved = 2,  ///< 10: reserved by IBTA; a receiver treats it as an error
  Nak = 3,       ///< 11: NAK; low 5 bits are a NakCode
};

/** @brief NAK codes (IBTA vol. 1 table 43). */
enum class NakCode : uint8_t {
  PsnSequenceError = 0,        ///< requester must resend from the AETH's PSN
  InvalidRequest = 1,          ///< unsupported or malformed request (e.g. bad opcode sequence, length)
  RemoteAccessError = 2,       ///< rkey / bounds / access-rights check failed
  RemoteOperationalError = 3,  ///< responder could not complete the request
  InvalidRdRequest = 4,        ///< RD only; never sent on RC
};

/// Credit code meaning "no credit information" (responders with an SRQ, or that do not track credits).
constexpr uint8_t kAethCreditInvalid = 0x1f;

/** @brief ACK syndrome carrying a 5-bit credit code (see aeth_credit_code()). */
constexpr uint8_t aeth_ack(uint8_t credit_code) { return static_cast<uint8_t>(credit_code & 0x1f); }
/** @brief RNR NAK syndrome carrying a 5-bit RNR timer code (see rnr_timer_ns()). */
constexpr uint8_t aeth_rnr_nak(uint8_t timer_code) {
  return static_cast<uint8_t>(0x20 | (timer_code & 0x1f));
}
/** @brief NAK syndrome. */
constexpr uint8_t aeth_nak(NakCode code) {
  return static_cast<uint8_t>(0x60 | (static_cast<uint8_t>(code) & 0x1f));
}
/** @brief Kind of an AETH syndrome. */
constexpr AethKind aeth_kind(uint8_t syndrome) { return static_cast<AethKind>((syndrome >> 5) & 3); }
/** @brief Low 5 bits: credit code, RNR timer code or NAK code depending on aeth_kind(). */
constexpr uint8_t aeth_value(uint8_t syndrome) { return static_cast<uint8_t>(syndrome & 0x1f); }
/** @brief NAK code of a NAK syndrome (meaningful only when aeth_kind() is Nak). */
constexpr NakCode aeth_nak_code(uint8_t syndrome) { return static_cast<NakCode>(syndrome & 0x1f); }
/** @brief Readable name of a NAK code ("PSN_SEQ_ERR", ...), "NAK_RESERVED" for codes 5..31. */
const char* nak_code_name(NakCode code);

/** @brief Credits (receive WQEs) a credit code stands for; code 31 (invalid) returns UINT32_MAX. */
uint32_t aeth_credits(uint8_t credit_code);
/** @brief Largest credit code whose credit count does not exceed @p credits (never 31). */
uint8_t aeth_credit_code(uint32_t credits);

/**
 * @brief RNR NAK timer (IBTA vol. 1 table 45) in nanoseconds.
 * Code 0 is the longest (655.36 ms), 1 the shortest (0.01 ms), then roughly x1.5 per step up to 31 (491.52
 * ms).
 */
uint64_t rnr_timer_ns(uint8_t code);

/**
 * @brief Local ACK timeout: 4.096 us * 2^timeout in nanoseconds; 0 means infinite and returns 0.
 * Values above 31 (not representable in the 5-bit field) are clamped to 31.
 */
constexpr uint64_t ack_timeout_ns(uint8_t timeout) {
  return timeout == 0 ? 0 : 4096ull << (timeout > 31 ? 31 : timeout);
}

// ------------------------------------------------------------------ segmentation

/** @brief Kind of message to segment into packets. */
enum class MessageKind : uint8_t {
  Send,          ///< SEND
  SendImm,       ///< SEND with immediate (ImmDt on the last/only packet)
  SendInv,       ///< SEND with invalidate (IETH on the last/only packet)
  Write,         ///< RDMA WRITE (RETH on the first/only packet)
  WriteImm,      ///< RDMA WRITE with immediate
  ReadResponse,  ///< the responder's side of an RDMA READ
};

/** @brief One packet of a segmented message. */
struct Segment {
  BthOpcode opcode;  ///< FIRST/MIDDLE/LAST/ONLY variant of the message kind
  uint32_t offset;   ///< payload offset within the message
  uint32_t length;   ///< payload bytes in this packet
};

/**
 * @brief How a message splits into packets at a path MTU.
 *
 * Every packet but the last carries exactly mtu bytes (IBTA requires FIRST and
 * MIDDLE packets to be full); a zero-length message is one *_ONLY packet with
 * no payload. Cheap to copy; segment(i) is O(1) so a requester can resume at
 * any packet after a NAK or timeout.
 */
struct SegmentPlan {
  MessageKind kind = MessageKind::Send;  ///< decides the opcodes
  uint32_t length = 0;                   ///< message bytes
  uint32_t mtu = 0;                      ///< path MTU in payload bytes
  uint32_t num_packets = 0;              ///< 0 only for an invalid MTU

  /** @brief Opcode, payload offset and length of packet @p i (i < num_packets). */
  Segment segment(uint32_t i) const;
};

/** @brief True for the IB path MTUs 256, 512, 1024, 2048, 4096. */
constexpr bool valid_mtu(uint32_t mtu) {
  return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

/** @brief Path MTU in bytes for an ibv_mtu enum value (1 = 256 ... 5 = 4096); 0 if out of range. */
constexpr uint32_t mtu_bytes(uint8_t ibv_mtu) { return ibv_mtu >= 1 && ibv_mtu <= 5 ? 128u << ibv_mtu : 0; }

/** @brief Plans the packets of one message; num_packets is 0 if @p mtu is not a valid IB path MTU. */
SegmentPlan plan_segments(MessageKind kind, uint32_t msg_len, uint32_t mtu);

}  // namespace hcasim::wire
