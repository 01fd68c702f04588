// SPDX-License-Identifier: Apache-2.0
/**
 * @file roce_packet_test.cpp
 * @brief Unit tests of the RoCEv2 wire format library (model/wire/roce_packet.h).
 */
#include "roce_packet.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace hcasim::wire {
namespace {

// ------------------------------------------------------------------ helpers

constexpr BthOpcode kAllOpcodes[] = {
    BthOpcode::SEND_FIRST,
    BthOpcode::SEND_MIDDLE,
    BthOpcode::SEND_LAST,
    BthOpcode::SEND_LAST_WITH_IMMEDIATE,
    BthOpcode::SEND_ONLY,
    BthOpcode::SEND_ONLY_WITH_IMMEDIATE,
    BthOpcode::RDMA_WRITE_FIRST,
    BthOpcode::RDMA_WRITE_MIDDLE,
    BthOpcode::RDMA_WRITE_LAST,
    BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE,
    BthOpcode::RDMA_WRITE_ONLY,
    BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    BthOpcode::RDMA_READ_REQUEST,
    BthOpcode::RDMA_READ_RESPONSE_FIRST,
    BthOpcode::RDMA_READ_RESPONSE_MIDDLE,
    BthOpcode::RDMA_READ_RESPONSE_LAST,
    BthOpcode::RDMA_READ_RESPONSE_ONLY,
    BthOpcode::ACKNOWLEDGE,
    BthOpcode::ATOMIC_ACKNOWLEDGE,
    BthOpcode::COMPARE_SWAP,
    BthOpcode::FETCH_ADD,
    BthOpcode::SEND_LAST_WITH_INVALIDATE,
    BthOpcode::SEND_ONLY_WITH_INVALIDATE,
};

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

/// Plain RFC 1071 sum, 16-bit big-endian words, one at a time: the reference for the fast one.
uint32_t ref_sum(const uint8_t* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += static_cast<uint32_t>((p[i] << 8) | p[i + 1]);
  if (n & 1) acc += static_cast<uint32_t>(p[n - 1] << 8);
  return acc;
}
uint16_t ref_fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

/// Representative headers: every field set to something distinctive so round trips show mix-ups.
Headers sample_headers(BthOpcode op, bool ipv6) {
  Headers h;
  const uint8_t dmac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  const uint8_t smac[6] = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  std::memcpy(h.dst_mac, dmac, 6);
  std::memcpy(h.src_mac, smac, 6);
  h.ipv6 = ipv6;
  h.ipv4_src = 0xc0a80101;  // 192.168.1.1
  h.ipv4_dst = 0xc0a80102;
  const uint8_t s6[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  const uint8_t d6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x42};
  std::memcpy(h.ipv6_src, s6, 16);
  std::memcpy(h.ipv6_dst, d6, 16);
  h.ttl = 63;
  h.traffic_class = (26 << 2) | 2;  // DSCP AF31, ECT(0)
  h.flow_label = ipv6 ? 0xabcde : 0;
  h.udp_sport = roce_udp_sport(0x123, 0x456);
  h.opcode = op;
  h.se = true;
  h.migreq = true;
  h.pkey = 0x8001;
  h.dest_qp = 0xabcdef;
  h.ackreq = true;
  h.psn = 0xfffffe;
  h.reth = {0x00007f1234567000ull, 0xdeadbeef, 12345};
  h.aeth = {aeth_ack(kAethCreditInvalid), 0x654321};
  h.imm_data = 0x78563412;  // whatever byte order: copied raw
  h.ieth_rkey = 0x0badf00d;
  h.atomic_eth = {0x1000, 0x77, 0x1111222233334444ull, 0x5555666677778888ull};
  h.atomic_ack_eth = {0x0123456789abcdefull};
  return h;
}

std::vector<uint8_t> make_payload(size_t n, uint8_t seed = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

std::vector<uint8_t> build(const Headers& h, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(frame_length(h, payload.size()));
  const size_t n = build_frame(h, payload.data(), payload.size(), out.data(), out.size());
  EXPECT_EQ(n, out.size());
  out.resize(n);
  return out;
}

/// Recomputes the IPv4 header checksum after a test edits the header (as a router would).
void fix_ipv4_checksum(std::vector<uint8_t>& f) {
  uint8_t* ip = f.data() + kEthHeaderLen;
  ip[10] = ip[11] = 0;
  const uint16_t c = static_cast<uint16_t>(~ref_fold(ref_sum(ip, 20)));
  ip[10] = static_cast<uint8_t>(c >> 8);
  ip[11] = static_cast<uint8_t>(c);
}

/// Rewrites the ICRC after a test edits an invariant field on purpose.
void fix_icrc(std::vector<uint8_t>& f) {
  const uint32_t c = compute_icrc(f.data(), f.size() - 4);
  for (int i = 0; i < 4; ++i) f[f.size() - 4 + i] = static_cast<uint8_t>(c >> (8 * i));
}

ParseError parse(const std::vector<uint8_t>& f, bool check_icrc = true) {
  ParsedFrame pf;
  return parse_frame(f.data(), f.size(), pf, check_icrc);
}

// ------------------------------------------------------------------ opcodes

TEST(Opcode, Predicates) {
  using B = BthOpcode;
  // {op, reth, imm, aeth, atomic, atomic_ack, ieth, payload, first, middle, last, only, request}
  struct Row {
    B op;
    bool reth, imm, aeth, atomic, atomic_ack, ieth, payload, first, middle, last, only, request;
  };
  const Row rows[] = {
      {B::SEND_FIRST, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1},
      {B::SEND_MIDDLE, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1},
      {B::SEND_LAST, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1},
      {B::SEND_LAST_WITH_IMMEDIATE, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1},
      {B::SEND_ONLY, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1},
      {B::SEND_ONLY_WITH_IMMEDIATE, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1},
      {B::RDMA_WRITE_FIRST, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1},
      {B::RDMA_WRITE_MIDDLE, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1},
      {B::RDMA_WRITE_LAST, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1},
      {B::RDMA_WRITE_LAST_WITH_IMMEDIATE, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1},
      {B::RDMA_WRITE_ONLY, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1},
      {B::RDMA_WRITE_ONLY_WITH_IMMEDIATE, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1},
      {B::RDMA_READ_REQUEST, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
      {B::RDMA_READ_RESPONSE_FIRST, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0},
      {B::RDMA_READ_RESPONSE_MIDDLE, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0},
      {B::RDMA_READ_RESPONSE_LAST, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0},
      {B::RDMA_READ_RESPONSE_ONLY, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0},
      {B::ACKNOWLEDGE, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0},
      {B::ATOMIC_ACKNOWLEDGE, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0},
      {B::COMPARE_SWAP, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1},
      {B::FETCH_ADD, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1},
      {B::SEND_LAST_WITH_INVALIDATE, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1},
      {B::SEND_ONLY_WITH_INVALIDATE, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1},
  };
  ASSERT_EQ(std::size(rows), std::size(kAllOpcodes));
  for (const Row& r : rows) {
    SCOPED_TRACE(opcode_name(r.op));
    EXPECT_TRUE(is_valid_opcode(r.op));
    EXPECT_EQ(has_reth(r.op), r.reth);
    EXPECT_EQ(has_imm(r.op), r.imm);
    EXPECT_EQ(has_aeth(r.op), r.aeth);
    EXPECT_EQ(has_atomic_eth(r.op), r.atomic);
    EXPECT_EQ(has_atomic_ack_eth(r.op), r.atomic_ack);
    EXPECT_EQ(has_ieth(r.op), r.ieth);
    EXPECT_EQ(carries_payload(r.op), r.payload);
    EXPECT_EQ(is_first(r.op), r.first);
    EXPECT_EQ(is_middle(r.op), r.middle);
    EXPECT_EQ(is_last(r.op), r.last);
    EXPECT_EQ(is_only(r.op), r.only);
    EXPECT_EQ(is_request(r.op), r.request);
    EXPECT_EQ(is_response(r.op), !r.request);
    // exactly one position
    EXPECT_EQ(r.first + r.middle + r.last + r.only, 1);
  }
}

TEST(Opcode, ValuesMatchIbta) {
  EXPECT_EQ(static_cast<int>(BthOpcode::SEND_FIRST), 0x00);
  EXPECT_EQ(static_cast<int>(BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE), 0x0b);
  EXPECT_EQ(static_cast<int>(BthOpcode::RDMA_READ_REQUEST), 0x0c);
  EXPECT_EQ(static_cast<int>(BthOpcode::RDMA_READ_RESPONSE_ONLY), 0x10);
  EXPECT_EQ(static_cast<int>(BthOpcode::ACKNOWLEDGE), 0x11);
  EXPECT_EQ(static_cast<int>(BthOpcode::ATOMIC_ACKNOWLEDGE), 0x12);
  EXPECT_EQ(static_cast<int>(BthOpcode::COMPARE_SWAP), 0x13);
  EXPECT_EQ(static_cast<int>(BthOpcode::FETCH_ADD), 0x14);
  EXPECT_EQ(static_cast<int>(BthOpcode::SEND_LAST_WITH_INVALIDATE), 0x16);
  EXPECT_EQ(static_cast<int>(BthOpcode::SEND_ONLY_WITH_INVALIDATE), 0x17);
  // Outside every known set: reserved RC 0x15, UC READ/ACK (0x2c, 0x31), UD SEND_FIRST and
  // WRITE (0x60, 0x6a), RD (0x44), CNP (0x81).
  for (int v : {0x15, 0x18, 0x1f, 0x2c, 0x31, 0x44, 0x60, 0x6a, 0x81, 0xb5, 0xff}) {
    EXPECT_FALSE(is_valid_opcode(static_cast<BthOpcode>(v))) << v;
    EXPECT_STREQ(opcode_name(static_cast<BthOpcode>(v)), "UNKNOWN");
  }
}

TEST(Opcode, UcIsRcSendAndWriteWithoutAcks) {
  for (uint8_t low = 0; low < 32; ++low) {
    const auto uc = in_transport(static_cast<BthOpcode>(low), Transport::UC);
    EXPECT_EQ(transport_of(uc), Transport::UC);
    EXPECT_EQ(is_valid_opcode(uc), low <= 0x0b) << int(low);
    if (low <= 0x0b) {
      EXPECT_EQ(opcode_flags(uc), opcode_flags(static_cast<BthOpcode>(low))) << int(low);
      EXPECT_EQ(rc_equivalent(uc), static_cast<BthOpcode>(low));
    }
  }
  EXPECT_EQ(static_cast<int>(BthOpcode::UC_SEND_ONLY), 0x24);
  EXPECT_STREQ(opcode_name(BthOpcode::UC_SEND_ONLY), "UC_SEND_ONLY");
  EXPECT_STREQ(opcode_name(BthOpcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE), "UC_WRITE_ONLY_IMM");
}

TEST(Opcode, UdIsSendOnlyWithDeth) {
  EXPECT_EQ(static_cast<int>(BthOpcode::UD_SEND_ONLY), 0x64);
  EXPECT_EQ(static_cast<int>(BthOpcode::UD_SEND_ONLY_WITH_IMMEDIATE), 0x65);
  for (auto op : {BthOpcode::UD_SEND_ONLY, BthOpcode::UD_SEND_ONLY_WITH_IMMEDIATE}) {
    EXPECT_TRUE(is_valid_opcode(op));
    EXPECT_TRUE(has_deth(op));
    EXPECT_TRUE(is_request(op));
    EXPECT_TRUE(is_only(op));
    EXPECT_FALSE(has_deth(rc_equivalent(op)));
  }
  EXPECT_EQ(ext_header_length(BthOpcode::UD_SEND_ONLY), kDethLen);
  EXPECT_EQ(ext_header_length(BthOpcode::UD_SEND_ONLY_WITH_IMMEDIATE), kDethLen + kImmDtLen);
  EXPECT_STREQ(opcode_name(BthOpcode::UD_SEND_ONLY_WITH_IMMEDIATE), "UD_SEND_ONLY_IMM");
}

TEST(Opcode, XrcIsRcWithAnXrcEthOnRequests) {
  for (uint8_t low = 0; low < 32; ++low) {
    const auto rc = static_cast<BthOpcode>(low);
    const auto x = in_transport(rc, Transport::XRC);
    EXPECT_EQ(is_valid_opcode(x), is_valid_opcode(rc)) << int(low);
    if (!is_valid_opcode(rc)) continue;
    EXPECT_EQ(has_xrceth(x), is_request(rc)) << int(low);
    EXPECT_EQ(ext_header_length(x), ext_header_length(rc) + (is_request(rc) ? kXrcEthLen : 0)) << int(low);
  }
  EXPECT_STREQ(opcode_name(BthOpcode::XRC_SEND_ONLY), "XRC_SEND_ONLY");
  EXPECT_STREQ(opcode_name(BthOpcode::XRC_ACKNOWLEDGE), "XRC_ACK");
}

TEST(Build, XrcWriteCarriesXrcEthBeforeReth) {
  Headers h;
  h.opcode = in_transport(BthOpcode::RDMA_WRITE_ONLY, Transport::XRC);
  h.xrc_srqn = 0x00abcd;
  h.reth.va = 0x1122334455667788ull;
  h.reth.rkey = 0x99;
  h.reth.dma_len = 4;
  const uint8_t payload[4] = {9, 8, 7, 6};
  uint8_t out[256];
  const size_t n = build_frame(h, payload, 4, out, sizeof out);
  ASSERT_GT(n, 0u);
  const uint8_t* bth = out + kEthHeaderLen + kIpv4HeaderLen + kUdpHeaderLen;
  EXPECT_EQ(bth[0], 0xaa);
  EXPECT_EQ(be32(bth + kBthLen), 0x0000abcdu);               // XRCETH
  EXPECT_EQ(be32(bth + kBthLen + kXrcEthLen), 0x11223344u);  // then the RETH
  ParsedFrame f;
  ASSERT_EQ(parse_frame(out, n, f), ParseError::Ok);
  EXPECT_EQ(f.h.xrc_srqn, 0xabcdu);
  EXPECT_EQ(f.h.reth.va, h.reth.va);
}

TEST(Build, UdSendOnlyImmCarriesDethBeforeImmDt) {
  Headers h;
  h.opcode = BthOpcode::UD_SEND_ONLY_WITH_IMMEDIATE;
  h.dest_qp = 0x000123;
  h.deth.qkey = 0x11111111;
  h.deth.src_qp = 0xabcdef;
  h.imm_data = 0x04030201;
  const uint8_t payload[5] = {1, 2, 3, 4, 5};
  uint8_t out[256];
  const size_t n = build_frame(h, payload, sizeof payload, out, sizeof out);
  ASSERT_GT(n, 0u);
  const uint8_t* bth = out + kEthHeaderLen + kIpv4HeaderLen + kUdpHeaderLen;
  EXPECT_EQ(bth[0], 0x65);
  EXPECT_EQ(be32(bth + kBthLen), 0x11111111u);                          // DETH Q_Key
  EXPECT_EQ(be32(bth + kBthLen + 4), 0x00abcdefu);                      // reserved byte, then the source QP
  EXPECT_EQ(std::memcmp(bth + kBthLen + kDethLen, &h.imm_data, 4), 0);  // ImmDt after the DETH
  ParsedFrame f;
  ASSERT_EQ(parse_frame(out, n, f), ParseError::Ok);
  EXPECT_EQ(f.h.deth.qkey, 0x11111111u);
  EXPECT_EQ(f.h.deth.src_qp, 0xabcdefu);
  EXPECT_EQ(f.h.imm_data, h.imm_data);
  ASSERT_EQ(f.payload_len, sizeof payload);
  EXPECT_EQ(std::memcmp(f.payload, payload, sizeof payload), 0);
}

TEST(Opcode, Names) {
  EXPECT_STREQ(opcode_name(BthOpcode::SEND_ONLY_WITH_IMMEDIATE), "SEND_ONLY_IMM");
  EXPECT_STREQ(opcode_name(BthOpcode::RDMA_WRITE_FIRST), "WRITE_FIRST");
  EXPECT_STREQ(opcode_name(BthOpcode::RDMA_READ_RESPONSE_LAST), "READ_RESP_LAST");
  EXPECT_STREQ(opcode_name(BthOpcode::ACKNOWLEDGE), "ACK");
  EXPECT_STREQ(opcode_name(BthOpcode::RDMA_READ_REQUEST), "READ_REQ");
  EXPECT_STREQ(opcode_name(BthOpcode::COMPARE_SWAP), "CMP_SWAP");
  for (BthOpcode op : kAllOpcodes) EXPECT_STRNE(opcode_name(op), "UNKNOWN");
}

TEST(Opcode, ExtensionHeaderLengths) {
  EXPECT_EQ(ext_header_length(BthOpcode::SEND_MIDDLE), 0u);
  EXPECT_EQ(ext_header_length(BthOpcode::SEND_ONLY_WITH_IMMEDIATE), 4u);
  EXPECT_EQ(ext_header_length(BthOpcode::RDMA_WRITE_FIRST), 16u);
  EXPECT_EQ(ext_header_length(BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE), 20u);
  EXPECT_EQ(ext_header_length(BthOpcode::RDMA_READ_REQUEST), 16u);
  EXPECT_EQ(ext_header_length(BthOpcode::RDMA_READ_RESPONSE_MIDDLE), 0u);
  EXPECT_EQ(ext_header_length(BthOpcode::RDMA_READ_RESPONSE_FIRST), 4u);
  EXPECT_EQ(ext_header_length(BthOpcode::ACKNOWLEDGE), 4u);
  EXPECT_EQ(ext_header_length(BthOpcode::ATOMIC_ACKNOWLEDGE), 12u);
  EXPECT_EQ(ext_header_length(BthOpcode::COMPARE_SWAP), 28u);
  EXPECT_EQ(ext_header_length(BthOpcode::SEND_LAST_WITH_INVALIDATE), 4u);
}

// ------------------------------------------------------------------ lengths

TEST(Lengths, HeaderAndFrame) {
  Headers h;
  h.opcode = BthOpcode::SEND_ONLY;
  EXPECT_EQ(header_length(h), 14u + 20 + 8 + 12);
  EXPECT_EQ(frame_length(h, 0), 58u);
  EXPECT_EQ(frame_length(h, 1), 58u + 4);  // 1 byte + 3 pad
  EXPECT_EQ(frame_length(h, 4), 58u + 4);
  EXPECT_EQ(frame_length(h, 5), 58u + 8);
  h.ipv6 = true;
  h.opcode = BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
  EXPECT_EQ(header_length(h), 14u + 40 + 8 + 12 + 16 + 4);
  EXPECT_EQ(frame_length(h, 4096), header_length(h) + 4096 + 4);
  h.opcode = BthOpcode::COMPARE_SWAP;
  EXPECT_EQ(header_length(h), kMaxHeaderLen);
  EXPECT_EQ(pad_count(0), 0);
  EXPECT_EQ(pad_count(1), 3);
  EXPECT_EQ(pad_count(2), 2);
  EXPECT_EQ(pad_count(3), 1);
  EXPECT_EQ(pad_count(4097), 3);
  EXPECT_GE(max_frame_length(4096), frame_length(h, 0));
}

// ------------------------------------------------------------------ known-good frames

/*
 * Frame captured from a Mellanox ConnectX-4 Lx NIC: a RoCEv2 CNP (opcode 0x81,
 * BECN set in the BTH resv8a byte, IP TOS 0xc2 = DSCP 48 + ECN CE, TTL 64).
 * Bytes published in Scapy's RoCE regression tests (test/contrib/roce.uts,
 * "RoCE CNP captured on ConnectX-4 Lx"), ICRC 82 fd 00 2a on the wire.
 * Hardware-made, so it pins the masks (TOS, TTL, IP checksum, resv8a), the seed
 * and the byte order independently of this code and of Linux rxe.
 */
const uint8_t kCx4CnpFrame[] = {
    0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00, 0x45,
    0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11, 0x01,
    0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff,
    0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
};

/*
 * Second published frame: Scapy's "RoCE layer" example (same file), a UC
 * SEND_ONLY (0x24) to QP 211, PSN 13571856, MigReq, pad 2, IP TOS 1, IP ID 1144,
 * a non-zero UDP checksum (0xaca2), 18 payload bytes + 2 pad. Its ICRC
 * (0x78f353f3 as Scapy prints the field big-endian) was computed by Scapy's
 * own Python implementation.
 */
const uint8_t kScapyUcFrame[] = {
    0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22, 0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22, 0x08, 0x00, 0x45, 0x01,
    0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8, 0x00, 0x07, 0xc0, 0xa8,
    0x00, 0x07, 0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2, 0x24, 0x60, 0xff, 0xff, 0x00, 0x00,
    0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, 0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a,
    0x95, 0x50, 0x54, 0x01, 0xbe, 0x88, 0x5e, 0x50, 0x00, 0x00, 0x78, 0xf3, 0x53, 0xf3,
};

TEST(Icrc, MatchesConnectX4Capture) {
  const size_t n = sizeof(kCx4CnpFrame);
  EXPECT_EQ(compute_icrc(kCx4CnpFrame, n - 4), 0x2a00fd82u);  // zlib value; wire bytes 82 fd 00 2a
  EXPECT_EQ(stored_icrc(kCx4CnpFrame, n), 0x2a00fd82u);
  // The CNP opcode is not RC, so the parser rejects it, but only at the opcode.
  ParsedFrame pf;
  EXPECT_EQ(parse_frame(kCx4CnpFrame, n, pf), ParseError::UnknownOpcode);
  EXPECT_EQ(pf.h.dest_qp, 0x000118u);
  EXPECT_EQ(pf.h.traffic_class, 0xc2);
}

TEST(Icrc, MatchesScapyFrame) {
  const size_t n = sizeof(kScapyUcFrame);
  EXPECT_EQ(compute_icrc(kScapyUcFrame, n - 4), stored_icrc(kScapyUcFrame, n));
  EXPECT_EQ(stored_icrc(kScapyUcFrame, n), 0xf353f378u);
}

/// The ICRC of IPv4 frame @p f by one zlib call over its masked pseudo-packet (8 bytes of 0xFF
/// for the LRH, then IP..payload with the variant fields set to 0xFF): an independent reference.
uint32_t reference_icrc_v4(const std::vector<uint8_t>& f) {
  std::vector<uint8_t> pseudo(8, 0xff);
  pseudo.insert(pseudo.end(), f.begin() + kEthHeaderLen, f.end() - 4);
  uint8_t* ip = pseudo.data() + 8;
  ip[1] = ip[8] = ip[10] = ip[11] = 0xff;
  ip[20 + 6] = ip[20 + 7] = 0xff;
  ip[28 + 4] = 0xff;
  return uint32_t(crc32(0L, pseudo.data(), static_cast<uInt>(pseudo.size())));
}

TEST(Icrc, SeedIsCrcOfMaskedLrh) {
  // The ICRC starts with 8 bytes of 0xFF for the LRH a RoCEv2 packet does not have.
  // Linux rxe starts from the raw (un-inverted) register 0xdebb20e3; zlib's view is its complement.
  const uint8_t ff[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(crc32(0L, ff, 8), 0x2144df1cUL);
  EXPECT_EQ(~0xdebb20e3u, 0x2144df1cu);
  // Whole-frame reference: one zlib call over the masked pseudo-packet must give the same ICRC.
  const auto f = build(sample_headers(BthOpcode::RDMA_WRITE_ONLY, false), make_payload(301));
  EXPECT_EQ(reference_icrc_v4(f), compute_icrc(f.data(), f.size() - 4));
}

// Up to 256 bytes after the BTH the ICRC is one pass over a copy (headers and rest together),
// beyond that two (the rest read in place): both sides of the switch, against the reference.
TEST(Icrc, ShortAndLongFramesAgreeWithTheReference) {
  for (size_t len = 0; len <= 300; ++len) {  // RETH (16) + payload + pad crosses 256 at ~240
    const auto f = build(sample_headers(BthOpcode::RDMA_WRITE_ONLY, false), make_payload(len, uint8_t(len)));
    ASSERT_EQ(compute_icrc(f.data(), f.size() - 4), reference_icrc_v4(f)) << "payload " << len;
  }
  const auto ack = build(sample_headers(BthOpcode::ACKNOWLEDGE, false), {});
  EXPECT_EQ(compute_icrc(ack.data(), ack.size() - 4), reference_icrc_v4(ack));
}

TEST(Icrc, MasksExactlyTheVariantFields) {
  for (bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
    const auto f = build(sample_headers(BthOpcode::RDMA_WRITE_FIRST, v6), make_payload(100));
    const size_t n = f.size() - 4;
    const uint32_t base = compute_icrc(f.data(), n);
    ASSERT_EQ(base, stored_icrc(f.data(), f.size()));
    const size_t ip = kEthHeaderLen;
    const size_t udp = ip + (v6 ? kIpv6HeaderLen : kIpv4HeaderLen);
    const size_t bth = udp + kUdpHeaderLen;
    std::vector<size_t> variant = {udp + 6, udp + 7, bth + 4};
    if (v6) {
      // traffic class (low nibble of byte 0, high nibble of byte 1), flow label, hop limit
      for (size_t o : {ip + 1, ip + 2, ip + 3, ip + 7}) variant.push_back(o);
    } else {
      for (size_t o : {ip + 1, ip + 8, ip + 10, ip + 11}) variant.push_back(o);
    }
    for (size_t i = 0; i < n; ++i) {
      auto g = f;
      bool is_variant = false;
      for (size_t o : variant) is_variant |= (o == i);
      if (v6 && i == ip) {
        g[i] ^= 0x0f;  // traffic class high nibble: variant
        EXPECT_EQ(compute_icrc(g.data(), n), base) << "IPv6 byte 0 low nibble";
        g = f;
        g[i] ^= 0x10;  // version nibble: invariant
        EXPECT_NE(compute_icrc(g.data(), n), base) << "IPv6 version";
        continue;
      }
      g[i] ^= 0x5a;
      if (i < ip) {
        // Ethernet header is outside the ICRC, except that the EtherType selects IPv4 vs IPv6.
        if (i < 12) {
          EXPECT_EQ(compute_icrc(g.data(), n), base) << "MAC byte " << i;
        }
        continue;
      }
      if (is_variant)
        EXPECT_EQ(compute_icrc(g.data(), n), base) << "variant byte " << i;
      else
        EXPECT_NE(compute_icrc(g.data(), n), base) << "invariant byte " << i;
    }
  }
}

TEST(Icrc, RouterRewritesKeepFrameValid) {
  // What a switch does on the way: decrement TTL, mark ECN CE, fix the IP checksum.
  auto f = build(sample_headers(BthOpcode::SEND_ONLY, false), make_payload(33));
  f[kEthHeaderLen + 8] -= 1;
  f[kEthHeaderLen + 1] |= 3;
  fix_ipv4_checksum(f);
  ParsedFrame pf;
  ASSERT_EQ(parse_frame(f.data(), f.size(), pf), ParseError::Ok);
  EXPECT_EQ(pf.h.ttl, 62);
  EXPECT_EQ(pf.h.traffic_class & 3, 3);

  auto g = build(sample_headers(BthOpcode::SEND_ONLY, true), make_payload(33));
  g[kEthHeaderLen + 7] -= 1;     // hop limit
  g[kEthHeaderLen + 1] |= 0x30;  // ECN CE is the low 2 bits of the traffic class
  ASSERT_EQ(parse_frame(g.data(), g.size(), pf), ParseError::Ok);
  EXPECT_EQ(pf.h.ttl, 62);
  EXPECT_EQ(pf.h.traffic_class & 3, 3);
}

TEST(Icrc, NonFramesGiveZero) {
  uint8_t junk[64] = {};
  EXPECT_EQ(compute_icrc(junk, sizeof(junk)), 0u);  // EtherType 0
  EXPECT_EQ(compute_icrc(nullptr, 100), 0u);
  EXPECT_EQ(compute_icrc(kCx4CnpFrame, 20), 0u);  // too short for the headers
  EXPECT_EQ(stored_icrc(kCx4CnpFrame, 3), 0u);
}

// ------------------------------------------------------------------ build: exact bytes

TEST(Build, Ipv4SendOnlyBytes) {
  Headers h = sample_headers(BthOpcode::SEND_ONLY, false);
  h.se = false;
  h.migreq = false;
  h.ackreq = true;
  h.psn = 0x123456;
  const auto payload = make_payload(5);
  const auto f = build(h, payload);
  ASSERT_EQ(f.size(), 14u + 20 + 8 + 12 + 8 + 4);
  // Ethernet
  EXPECT_EQ(0, std::memcmp(f.data(), h.dst_mac, 6));
  EXPECT_EQ(0, std::memcmp(f.data() + 6, h.src_mac, 6));
  EXPECT_EQ(be16(&f[12]), 0x0800);
  // IPv4
  const uint8_t* ip = &f[14];
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], h.traffic_class);
  EXPECT_EQ(be16(ip + 2), f.size() - 14);
  EXPECT_EQ(be16(ip + 6), 0x4000);  // DF
  EXPECT_EQ(ip[8], 63);
  EXPECT_EQ(ip[9], 17);
  EXPECT_EQ(ref_fold(ref_sum(ip, 20)), 0xffff);  // header checksum verifies
  EXPECT_EQ(be32(ip + 12), 0xc0a80101u);
  EXPECT_EQ(be32(ip + 16), 0xc0a80102u);
  // UDP
  const uint8_t* udp = ip + 20;
  EXPECT_EQ(be16(udp), h.udp_sport);
  EXPECT_EQ(be16(udp + 2), 4791);
  EXPECT_EQ(be16(udp + 4), f.size() - 34);
  EXPECT_EQ(be16(udp + 6), 0);  // IPv4: no UDP checksum
  // BTH
  const uint8_t* b = udp + 8;
  EXPECT_EQ(b[0], 0x04);
  EXPECT_EQ(b[1], 0x30);  // pad 3, tver 0
  EXPECT_EQ(be16(b + 2), 0x8001);
  EXPECT_EQ(b[4], 0);
  EXPECT_EQ(be32(b + 4), 0x00abcdefu);
  EXPECT_EQ(b[8], 0x80);
  EXPECT_EQ(be32(b + 8), 0x80123456u);
  // payload, zero pad, ICRC little-endian
  EXPECT_EQ(0, std::memcmp(b + 12, payload.data(), 5));
  EXPECT_EQ(b[17], 0);
  EXPECT_EQ(b[18], 0);
  EXPECT_EQ(b[19], 0);
  const uint32_t icrc = compute_icrc(f.data(), f.size() - 4);
  EXPECT_EQ(f[f.size() - 4], icrc & 0xff);
  EXPECT_EQ(f[f.size() - 1], icrc >> 24);
}

TEST(Build, Ipv6WriteImmBytesAndUdpChecksum) {
  Headers h = sample_headers(BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE, true);
  const auto payload = make_payload(10);
  const auto f = build(h, payload);
  const uint8_t* ip = &f[14];
  EXPECT_EQ(be16(&f[12]), 0x86dd);
  EXPECT_EQ(be32(ip), (6u << 28) | (uint32_t{h.traffic_class} << 20) | 0xabcde);
  EXPECT_EQ(be16(ip + 4), f.size() - 54);
  EXPECT_EQ(ip[6], 17);
  EXPECT_EQ(ip[7], 63);
  EXPECT_EQ(0, std::memcmp(ip + 8, h.ipv6_src, 16));
  EXPECT_EQ(0, std::memcmp(ip + 24, h.ipv6_dst, 16));
  const uint8_t* udp = ip + 40;
  const size_t udp_len = be16(udp + 4);
  EXPECT_EQ(udp_len, f.size() - 54);
  // Verify the UDP checksum the slow way: pseudo-header + datagram must sum to 0xffff.
  uint32_t acc = ref_sum(ip + 8, 32);
  acc += static_cast<uint32_t>(udp_len) + 17;
  acc = ref_sum(udp, udp_len, acc);
  EXPECT_NE(be16(udp + 6), 0);
  EXPECT_EQ(ref_fold(acc), 0xffff);
  // RETH then ImmDt (raw), payload, pad 2
  const uint8_t* b = udp + 8;
  EXPECT_EQ(b[0], 0x0b);
  EXPECT_EQ((b[1] >> 4) & 3, 2);
  EXPECT_EQ(be32(b + 12), 0x00007f12u);
  EXPECT_EQ(be32(b + 16), 0x34567000u);
  EXPECT_EQ(be32(b + 20), 0xdeadbeefu);
  EXPECT_EQ(be32(b + 24), 12345u);
  EXPECT_EQ(0, std::memcmp(b + 28, &h.imm_data, 4));
  EXPECT_EQ(0, std::memcmp(b + 32, payload.data(), 10));

  // rxe-compatible: no checksum
  h.ipv6_udp_checksum = false;
  const auto g = build(h, payload);
  EXPECT_EQ(be16(&g[54 + 6]), 0);
  EXPECT_EQ(compute_icrc(g.data(), g.size() - 4), compute_icrc(f.data(), f.size() - 4));
}

TEST(Build, UdpChecksumOddAndLargePayloads) {
  // Exercise the 8/4/2-byte paths of the fast sum against the reference.
  for (size_t len : {0u, 1u, 2u, 3u, 6u, 7u, 9u, 15u, 17u, 255u, 1023u, 4096u}) {
    Headers h = sample_headers(BthOpcode::SEND_ONLY, true);
    const auto f = build(h, make_payload(len, static_cast<uint8_t>(len)));
    const uint8_t* ip = &f[14];
    const uint8_t* udp = ip + 40;
    const size_t udp_len = be16(udp + 4);
    uint32_t acc = ref_sum(ip + 8, 32) + static_cast<uint32_t>(udp_len) + 17;
    acc = ref_sum(udp, udp_len, acc);
    EXPECT_EQ(ref_fold(acc), 0xffff) << len;
  }
}

TEST(Build, Failures) {
  Headers h = sample_headers(BthOpcode::SEND_ONLY, false);
  const auto payload = make_payload(100);
  std::vector<uint8_t> out(frame_length(h, 100), 0xee);
  EXPECT_EQ(build_frame(h, payload.data(), 100, out.data(), out.size() - 1), 0u);
  EXPECT_EQ(build_frame(h, payload.data(), 100, nullptr, 1000), 0u);
  h.opcode = BthOpcode::ACKNOWLEDGE;  // carries no payload
  EXPECT_EQ(build_frame(h, payload.data(), 1, out.data(), out.size()), 0u);
  EXPECT_EQ(build_frame(h, nullptr, 0, out.data(), out.size()), frame_length(h, 0));
  h.opcode = static_cast<BthOpcode>(0x15);
  EXPECT_EQ(build_frame(h, nullptr, 0, out.data(), out.size()), 0u);
  h.opcode = BthOpcode::SEND_ONLY;
  std::vector<uint8_t> big(70000);
  std::vector<uint8_t> big_out(80000);
  EXPECT_EQ(build_frame(h, big.data(), big.size(), big_out.data(), big_out.size()), 0u);
  // Largest IPv4 payload whose datagram (with pad) fits the 16-bit total length: 65491 rounded down to 4.
  const size_t max_v4 = (0xffff - 20 - 8 - 12 - 4) & ~size_t{3};
  EXPECT_EQ(build_frame(h, big.data(), max_v4, big_out.data(), big_out.size()), frame_length(h, max_v4));
  EXPECT_EQ(build_frame(h, big.data(), max_v4 + 1, big_out.data(), big_out.size()), 0u);
}

TEST(Build, NullPayloadIsZeroFilled) {
  Headers h = sample_headers(BthOpcode::RDMA_READ_RESPONSE_MIDDLE, false);
  std::vector<uint8_t> out(frame_length(h, 256), 0xee);
  ASSERT_EQ(build_frame(h, nullptr, 256, out.data(), out.size()), out.size());
  ParsedFrame pf;
  ASSERT_EQ(parse_frame(out.data(), out.size(), pf), ParseError::Ok);
  ASSERT_EQ(pf.payload_len, 256u);
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(pf.payload[i], 0);
}

TEST(Build, InPlacePayload) {
  // The payload already sits where the frame needs it: no copy needed, result identical.
  Headers h = sample_headers(BthOpcode::RDMA_WRITE_MIDDLE, true);
  const auto payload = make_payload(1024);
  const auto ref = build(h, payload);
  std::vector<uint8_t> out(ref.size(), 0xee);
  std::memcpy(out.data() + header_length(h), payload.data(), payload.size());
  ASSERT_EQ(build_frame(h, out.data() + header_length(h), payload.size(), out.data(), out.size()),
            out.size());
  EXPECT_EQ(out, ref);
}

// ------------------------------------------------------------------ round trips

TEST(RoundTrip, EveryOpcodeBothFamiliesManyLengths) {
  for (bool v6 : {false, true}) {
    for (BthOpcode op : kAllOpcodes) {
      const std::vector<size_t> lens = carries_payload(op)
                                           ? std::vector<size_t>{0, 1, 2, 3, 4, 5, 255, 256, 257, 4096}
                                           : std::vector<size_t>{0};
      for (size_t len : lens) {
        SCOPED_TRACE(std::string(opcode_name(op)) + (v6 ? " v6 " : " v4 ") + std::to_string(len));
        const Headers h = sample_headers(op, v6);
        const auto payload = make_payload(len, static_cast<uint8_t>(len));
        const auto f = build(h, payload);
        ParsedFrame pf;
        ASSERT_EQ(parse_frame(f.data(), f.size(), pf), ParseError::Ok)
            << parse_error_name(parse_frame(f.data(), f.size(), pf));
        const Headers& g = pf.h;
        EXPECT_EQ(0, std::memcmp(g.dst_mac, h.dst_mac, 6));
        EXPECT_EQ(0, std::memcmp(g.src_mac, h.src_mac, 6));
        EXPECT_EQ(g.ipv6, v6);
        if (v6) {
          EXPECT_EQ(0, std::memcmp(g.ipv6_src, h.ipv6_src, 16));
          EXPECT_EQ(0, std::memcmp(g.ipv6_dst, h.ipv6_dst, 16));
          EXPECT_EQ(g.flow_label, h.flow_label);
        } else {
          EXPECT_EQ(g.ipv4_src, h.ipv4_src);
          EXPECT_EQ(g.ipv4_dst, h.ipv4_dst);
        }
        EXPECT_EQ(g.ttl, h.ttl);
        EXPECT_EQ(g.traffic_class, h.traffic_class);
        EXPECT_EQ(g.udp_sport, h.udp_sport);
        EXPECT_EQ(g.opcode, op);
        EXPECT_EQ(g.se, h.se);
        EXPECT_EQ(g.migreq, h.migreq);
        EXPECT_EQ(g.pad, pad_count(len));
        EXPECT_EQ(g.tver, 0);
        EXPECT_EQ(g.pkey, h.pkey);
        EXPECT_EQ(g.dest_qp, h.dest_qp);
        EXPECT_EQ(g.ackreq, h.ackreq);
        EXPECT_EQ(g.psn, h.psn);
        if (has_reth(op)) {
          EXPECT_EQ(g.reth.va, h.reth.va);
          EXPECT_EQ(g.reth.rkey, h.reth.rkey);
          EXPECT_EQ(g.reth.dma_len, h.reth.dma_len);
        }
        if (has_aeth(op)) {
          EXPECT_EQ(g.aeth.syndrome, h.aeth.syndrome);
          EXPECT_EQ(g.aeth.msn, h.aeth.msn);
        }
        if (has_imm(op)) {
          EXPECT_EQ(g.imm_data, h.imm_data);
        }
        if (has_ieth(op)) {
          EXPECT_EQ(g.ieth_rkey, h.ieth_rkey);
        }
        if (has_atomic_eth(op)) {
          EXPECT_EQ(g.atomic_eth.va, h.atomic_eth.va);
          EXPECT_EQ(g.atomic_eth.rkey, h.atomic_eth.rkey);
          EXPECT_EQ(g.atomic_eth.swap_add, h.atomic_eth.swap_add);
          EXPECT_EQ(g.atomic_eth.compare, h.atomic_eth.compare);
        }
        if (has_atomic_ack_eth(op)) {
          EXPECT_EQ(g.atomic_ack_eth.orig_data, h.atomic_ack_eth.orig_data);
        }
        EXPECT_EQ(pf.payload_len, len);
        if (len) {
          ASSERT_NE(pf.payload, nullptr);
          EXPECT_EQ(pf.payload, f.data() + header_length(h));
          EXPECT_EQ(0, std::memcmp(pf.payload, payload.data(), len));
        } else {
          EXPECT_EQ(pf.payload, nullptr);
        }
        EXPECT_EQ(pf.frame_len, f.size());
        EXPECT_EQ(pf.icrc, compute_icrc(f.data(), f.size() - 4));
        // Rebuilding from what was parsed gives the same bytes.
        const auto again = build(g, payload);
        EXPECT_EQ(again, f);
      }
    }
  }
}

TEST(RoundTrip, FieldMasks) {
  Headers h = sample_headers(BthOpcode::ACKNOWLEDGE, false);
  h.dest_qp = 0xff123456;  // only 24 bits go on the wire
  h.psn = 0x01abcdef;
  h.aeth.msn = 0x7f000001;
  const auto f = build(h, {});
  ParsedFrame pf;
  ASSERT_EQ(parse_frame(f.data(), f.size(), pf), ParseError::Ok);
  EXPECT_EQ(pf.h.dest_qp, 0x123456u);
  EXPECT_EQ(pf.h.psn, 0xabcdefu);
  EXPECT_EQ(pf.h.aeth.msn, 0x000001u);
}

TEST(Parse, TolerantOfEthernetPaddingAndFcs) {
  // A zero-length SEND_ONLY is 58 bytes; real NICs pad it to the 60-byte minimum (plus FCS).
  Headers h = sample_headers(BthOpcode::SEND_ONLY, false);
  auto f = build(h, {});
  ASSERT_EQ(f.size(), 58u);
  f.resize(64, 0);
  ParsedFrame pf;
  ASSERT_EQ(parse_frame(f.data(), f.size(), pf), ParseError::Ok);
  EXPECT_EQ(pf.frame_len, 58u);
  EXPECT_EQ(pf.payload_len, 0u);
}

// ------------------------------------------------------------------ parse errors

TEST(Parse, EachErrorFromATargetedMutation) {
  const Headers h4 = sample_headers(BthOpcode::SEND_ONLY, false);
  const Headers h6 = sample_headers(BthOpcode::SEND_ONLY, true);
  const auto v4 = build(h4, make_payload(20));
  const auto v6 = build(h6, make_payload(20));
  const size_t ip = 14, udp4 = 34, udp6 = 54, bth4 = 42, bth6 = 62;
  ASSERT_EQ(parse(v4), ParseError::Ok);
  ASSERT_EQ(parse(v6), ParseError::Ok);

  auto m = v4;
  m[12] = 0x81;  // VLAN tag: not supported
  EXPECT_EQ(parse(m), ParseError::BadEtherType);

  m = v4;
  m[ip] = 0x65;
  EXPECT_EQ(parse(m), ParseError::BadIpVersion);
  m = v6;
  m[ip] = 0x46;
  EXPECT_EQ(parse(m), ParseError::BadIpVersion);

  m = v4;
  m[ip] = 0x46;
  EXPECT_EQ(parse(m), ParseError::BadIpHeaderLength);

  m = v4;
  m[ip + 8] ^= 1;  // TTL without fixing the checksum
  EXPECT_EQ(parse(m), ParseError::BadIpChecksum);

  m = v4;
  m[ip + 6] = 0x20;  // MF
  fix_ipv4_checksum(m);
  EXPECT_EQ(parse(m), ParseError::IpFragment);
  m = v4;
  m[ip + 7] = 0x01;  // fragment offset
  fix_ipv4_checksum(m);
  EXPECT_EQ(parse(m), ParseError::IpFragment);

  m = v4;
  m[ip + 9] = 6;  // TCP
  fix_ipv4_checksum(m);
  EXPECT_EQ(parse(m), ParseError::NotUdp);
  m = v6;
  m[ip + 6] = 0;  // hop-by-hop options header
  EXPECT_EQ(parse(m), ParseError::NotUdp);

  m = v4;
  m[ip + 2] = 0;
  m[ip + 3] = 27;  // shorter than IP + UDP
  fix_ipv4_checksum(m);
  EXPECT_EQ(parse(m), ParseError::BadIpLength);
  m = v6;
  m[ip + 4] = 0;
  m[ip + 5] = 7;
  EXPECT_EQ(parse(m), ParseError::BadIpLength);

  m = v4;
  m[ip + 3] += 4;  // claims 4 more bytes than the frame has
  fix_ipv4_checksum(m);
  EXPECT_EQ(parse(m), ParseError::Truncated);
  m = v6;
  m[ip + 5] += 4;
  EXPECT_EQ(parse(m), ParseError::Truncated);

  m = v4;
  m[udp4 + 5] -= 4;
  EXPECT_EQ(parse(m), ParseError::BadUdpLength);
  m = v6;
  m[udp6 + 5] += 4;
  EXPECT_EQ(parse(m), ParseError::BadUdpLength);

  m = v4;
  m[udp4 + 3] ^= 1;  // port 4790
  EXPECT_EQ(parse(m), ParseError::NotRoceV2Port);

  m = v4;
  m[bth4 + 1] |= 0x01;  // TVer 1
  EXPECT_EQ(parse(m), ParseError::BadBthVersion);

  m = v4;
  m[bth4] = 0x15;
  EXPECT_EQ(parse(m), ParseError::UnknownOpcode);
  m = v6;
  m[bth6] = 0x6a;  // RDMA WRITE ONLY does not exist in UD
  EXPECT_EQ(parse(m), ParseError::UnknownOpcode);

  // SEND_ONLY with 20 payload bytes relabelled as an atomic: 28-byte AtomicETH does not fit.
  m = v4;
  m[bth4] = static_cast<uint8_t>(BthOpcode::COMPARE_SWAP);
  EXPECT_EQ(parse(m), ParseError::BadLength);

  // Relabel as ACK: AETH fits, but 16 bytes would be left over as payload.
  m = v4;
  m[bth4] = static_cast<uint8_t>(BthOpcode::ACKNOWLEDGE);
  EXPECT_EQ(parse(m), ParseError::UnexpectedPayload);

  // A pad count on an opcode without payload.
  auto ack = build(sample_headers(BthOpcode::ACKNOWLEDGE, false), {});
  ack[bth4 + 1] |= 0x10;
  EXPECT_EQ(parse(ack), ParseError::BadPadCount);

  // Pad count larger than the payload area: a 0-byte SEND_ONLY claiming pad 3.
  auto empty = build(sample_headers(BthOpcode::SEND_ONLY, false), {});
  empty[bth4 + 1] |= 0x30;
  EXPECT_EQ(parse(empty, false), ParseError::BadPadCount);

  // IB length not a multiple of 4: drop 2 bytes from IP and UDP lengths.
  m = v4;
  m[ip + 3] -= 2;
  m[udp4 + 5] -= 2;
  fix_ipv4_checksum(m);
  m.resize(m.size() - 2);
  EXPECT_EQ(parse(m), ParseError::BadLength);

  m = v4;
  m[bth4 + 12] ^= 0x80;  // one payload bit
  EXPECT_EQ(parse(m), ParseError::BadIcrc);
  EXPECT_EQ(parse(m, false), ParseError::Ok);
  m = v6;
  m[m.size() - 1] ^= 1;  // the ICRC itself
  EXPECT_EQ(parse(m), ParseError::BadIcrc);

  // An invariant header field changed and the ICRC recomputed: valid again.
  m = v4;
  m[bth4 + 11] ^= 1;  // PSN
  EXPECT_EQ(parse(m), ParseError::BadIcrc);
  fix_icrc(m);
  EXPECT_EQ(parse(m), ParseError::Ok);

  ParsedFrame pf;
  EXPECT_EQ(parse_frame(nullptr, 100, pf), ParseError::Truncated);
  EXPECT_EQ(parse_frame(v4.data(), 0, pf), ParseError::Truncated);
}

TEST(Parse, ErrorNames) {
  EXPECT_STREQ(parse_error_name(ParseError::Ok), "Ok");
  EXPECT_STREQ(parse_error_name(ParseError::BadIcrc), "BadIcrc");
  EXPECT_STREQ(parse_error_name(ParseError::Truncated), "Truncated");
  for (int e = 0; e <= static_cast<int>(ParseError::BadIcrc); ++e)
    EXPECT_STRNE(parse_error_name(static_cast<ParseError>(e)), "Unknown") << e;
}

/// Copies into an exactly sized heap block so ASan flags any read past the end.
ParseError parse_exact(const uint8_t* data, size_t n, bool check_icrc) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n ? n : 1]);
  if (n) std::memcpy(copy.get(), data, n);
  ParsedFrame pf;
  return parse_frame(copy.get(), n, pf, check_icrc);
}

TEST(Parse, EveryTruncationIsAnError) {
  for (bool v6 : {false, true}) {
    for (BthOpcode op : kAllOpcodes) {
      const auto f = build(sample_headers(op, v6), make_payload(carries_payload(op) ? 37 : 0));
      ASSERT_EQ(parse_exact(f.data(), f.size(), true), ParseError::Ok);
      for (size_t n = 0; n < f.size(); ++n) {
        EXPECT_NE(parse_exact(f.data(), n, true), ParseError::Ok) << opcode_name(op) << " cut at " << n;
        EXPECT_NE(parse_exact(f.data(), n, false), ParseError::Ok) << opcode_name(op) << " cut at " << n;
      }
    }
  }
}

TEST(Parse, RandomBytesNeverParseOrCrash) {
  std::mt19937_64 rng(12345);
  std::vector<uint8_t> buf(256);
  for (int iter = 0; iter < 20000; ++iter) {
    const size_t n = rng() % buf.size();
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    EXPECT_NE(parse_exact(buf.data(), n, true), ParseError::Ok);
  }
  // Random bytes behind a plausible IPv4/UDP/4791 prefix get deeper into the parser.
  const auto good = build(sample_headers(BthOpcode::SEND_ONLY, false), make_payload(40));
  for (int iter = 0; iter < 20000; ++iter) {
    auto f = good;
    for (size_t i = 42; i < f.size(); ++i) f[i] = static_cast<uint8_t>(rng());
    const size_t n = 42 + rng() % (f.size() - 41);
    EXPECT_NE(parse_exact(f.data(), n, true), ParseError::Ok);
    (void)parse_exact(f.data(), n, false);  // may parse; must not crash
  }
}

TEST(Parse, MutatedValidFramesNeverCrash) {
  std::mt19937_64 rng(777);
  for (bool v6 : {false, true}) {
    for (BthOpcode op : kAllOpcodes) {
      const auto good = build(sample_headers(op, v6), make_payload(carries_payload(op) ? 61 : 0));
      for (int iter = 0; iter < 400; ++iter) {
        auto f = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) f[rng() % f.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        const size_t n = rng() % 4 == 0 ? rng() % (f.size() + 1) : f.size();
        const ParseError e = parse_exact(f.data(), n, true);
        (void)parse_exact(f.data(), n, false);
        if (e == ParseError::Ok) {
          // Only variant fields (or the MACs, outside the ICRC) can change unnoticed.
          ParsedFrame pf;
          ASSERT_EQ(parse_frame(f.data(), n, pf), ParseError::Ok);
          EXPECT_EQ(pf.h.psn, sample_headers(op, v6).psn);
          EXPECT_EQ(pf.h.opcode, op);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ GIDs, ports

TEST(Gid, Ipv4MappedSelectsIpv4) {
  uint8_t s[16], d[16];
  ipv4_to_gid(0x0a000001, s);
  ipv4_to_gid(0x0a000002, d);
  const uint8_t expect[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(0, std::memcmp(s, expect, 16));
  EXPECT_TRUE(gid_is_ipv4_mapped(s));
  Headers h;
  h.ipv6 = true;
  set_l3_from_gids(h, s, d);
  EXPECT_FALSE(h.ipv6);
  EXPECT_EQ(h.ipv4_src, 0x0a000001u);
  EXPECT_EQ(h.ipv4_dst, 0x0a000002u);
  uint8_t s2[16], d2[16];
  gids_from_l3(h, s2, d2);
  EXPECT_EQ(0, std::memcmp(s, s2, 16));
  EXPECT_EQ(0, std::memcmp(d, d2, 16));
}

TEST(Gid, OtherGidsSelectIpv6) {
  const uint8_t s[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  const uint8_t d[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x66};
  // ::a.b.c.d (IPv4-compatible, deprecated) and ::ffff:0:a.b.c.d are not IPv4-mapped.
  const uint8_t compat[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1};
  EXPECT_FALSE(gid_is_ipv4_mapped(s));
  EXPECT_FALSE(gid_is_ipv4_mapped(compat));
  Headers h;
  set_l3_from_gids(h, s, d);
  EXPECT_TRUE(h.ipv6);
  EXPECT_EQ(0, std::memcmp(h.ipv6_src, s, 16));
  EXPECT_EQ(0, std::memcmp(h.ipv6_dst, d, 16));
  uint8_t s2[16], d2[16];
  gids_from_l3(h, s2, d2);
  EXPECT_EQ(0, std::memcmp(s, s2, 16));
  EXPECT_EQ(0, std::memcmp(d, d2, 16));
}

TEST(Ports, UdpSourcePortIsStableEntropy) {
  EXPECT_EQ(roce_udp_sport(17, 18), roce_udp_sport(17, 18));
  int distinct = 0;
  uint16_t prev = 0;
  for (uint32_t q = 1; q < 2000; ++q) {
    const uint16_t p = roce_udp_sport(q, q + 1);
    EXPECT_GE(p, 0xc000);
    distinct += (p != prev);
    prev = p;
  }
  EXPECT_GT(distinct, 1900);
}

// ------------------------------------------------------------------ PSN

TEST(Psn, AddWraps) {
  EXPECT_EQ(psn_add(0, 1), 1u);
  EXPECT_EQ(psn_add(0xffffff, 1), 0u);
  EXPECT_EQ(psn_add(0xfffffe, 5), 3u);
  EXPECT_EQ(psn_add(2, -3), 0xffffffu);
  EXPECT_EQ(psn_add(0, -1), 0xffffffu);
  EXPECT_EQ(psn_add(0x123456, 0x1000000), 0x123456u);
  EXPECT_EQ(psn_add(0xfff000, 8u * 1024 * 1024), 0x7ff000u);
}

TEST(Psn, DiffAcrossWrap) {
  EXPECT_EQ(psn_diff(5, 5), 0);
  EXPECT_EQ(psn_diff(0, 0xffffff), 1);
  EXPECT_EQ(psn_diff(0xffffff, 0), -1);
  EXPECT_EQ(psn_diff(2, 0xfffffe), 4);
  EXPECT_EQ(psn_diff(0xfffffe, 2), -4);
  EXPECT_EQ(psn_diff(0x7fffff, 0), 0x7fffff);
  EXPECT_EQ(psn_diff(0x800000, 0), 0x800000);  // +2^23 is in range
  EXPECT_EQ(psn_diff(0, 0x800000), 0x800000);  // and -2^23 is not: it reads as +2^23
  EXPECT_EQ(psn_diff(0x800001, 0), -0x7fffff);
  for (uint32_t b : {0u, 1u, 0x7fffffu, 0x800000u, 0xfffff0u, 0xffffffu}) {
    for (int64_t n : {-0x7fffffll, -1000ll, -1ll, 0ll, 1ll, 77ll, 0x7fffffll, 0x800000ll}) {
      EXPECT_EQ(psn_diff(psn_add(b, n), b), n) << b << " " << n;
    }
  }
}

TEST(Psn, Before) {
  EXPECT_TRUE(psn_before(1, 2));
  EXPECT_FALSE(psn_before(2, 1));
  EXPECT_FALSE(psn_before(7, 7));
  EXPECT_TRUE(psn_before(0xfffffe, 1));  // across the wrap
  EXPECT_FALSE(psn_before(1, 0xfffffe));
  EXPECT_TRUE(psn_before(0xffffff, 0));
}

// ------------------------------------------------------------------ AETH and timers

TEST(Aeth, Syndromes) {
  EXPECT_EQ(aeth_ack(0), 0x00);
  EXPECT_EQ(aeth_ack(kAethCreditInvalid), 0x1f);
  EXPECT_EQ(aeth_rnr_nak(0), 0x20);
  EXPECT_EQ(aeth_rnr_nak(18), 0x32);
  EXPECT_EQ(aeth_nak(NakCode::PsnSequenceError), 0x60);
  EXPECT_EQ(aeth_nak(NakCode::InvalidRequest), 0x61);
  EXPECT_EQ(aeth_nak(NakCode::RemoteAccessError), 0x62);
  EXPECT_EQ(aeth_nak(NakCode::RemoteOperationalError), 0x63);
  EXPECT_EQ(aeth_nak(NakCode::InvalidRdRequest), 0x64);

  EXPECT_EQ(aeth_kind(aeth_ack(5)), AethKind::Ack);
  EXPECT_EQ(aeth_kind(aeth_rnr_nak(5)), AethKind::RnrNak);
  EXPECT_EQ(aeth_kind(aeth_nak(NakCode::RemoteAccessError)), AethKind::Nak);
  EXPECT_EQ(aeth_kind(0x40), AethKind::Reserved);
  EXPECT_EQ(aeth_value(aeth_ack(13)), 13);
  EXPECT_EQ(aeth_value(aeth_rnr_nak(31)), 31);
  EXPECT_EQ(aeth_nak_code(aeth_nak(NakCode::RemoteOperationalError)), NakCode::RemoteOperationalError);
  EXPECT_STREQ(nak_code_name(NakCode::PsnSequenceError), "PSN_SEQ_ERR");
  EXPECT_STREQ(nak_code_name(static_cast<NakCode>(9)), "NAK_RESERVED");
}

TEST(Aeth, Credits) {
  EXPECT_EQ(aeth_credits(0), 0u);
  EXPECT_EQ(aeth_credits(4), 4u);
  EXPECT_EQ(aeth_credits(5), 6u);
  EXPECT_EQ(aeth_credits(0x10), 256u);
  EXPECT_EQ(aeth_credits(30), 32768u);
  EXPECT_EQ(aeth_credits(kAethCreditInvalid), UINT32_MAX);
  for (uint8_t c = 0; c < 31; ++c) EXPECT_EQ(aeth_credit_code(aeth_credits(c)), c);
  EXPECT_EQ(aeth_credit_code(5), 4);  // rounds down: never promise more than there is
  EXPECT_EQ(aeth_credit_code(7), 5);
  EXPECT_EQ(aeth_credit_code(100000), 30);
}

TEST(Timers, RnrTableExact) {
  // IBTA vol. 1 table 45, in ms: code 0 is 655.36, then 0.01 ... 491.52.
  const double ms[32] = {655.36, 0.01,  0.02,  0.03,  0.04,  0.06,   0.08,   0.12,   0.16,   0.24,  0.32,
                         0.48,   0.64,  0.96,  1.28,  1.92,  2.56,   3.84,   5.12,   7.68,   10.24, 15.36,
                         20.48,  30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};
  for (uint8_t c = 0; c < 32; ++c)
    EXPECT_EQ(rnr_timer_ns(c), static_cast<uint64_t>(ms[c] * 1e6 + 0.5)) << int(c);
  EXPECT_EQ(rnr_timer_ns(0), 655360000u);
  EXPECT_EQ(rnr_timer_ns(1), 10000u);
  EXPECT_EQ(rnr_timer_ns(31), 491520000u);
  EXPECT_EQ(rnr_timer_ns(32 + 1), rnr_timer_ns(1));  // 5-bit field
}

TEST(Timers, AckTimeout) {
  EXPECT_EQ(ack_timeout_ns(0), 0u);  // infinite
  EXPECT_EQ(ack_timeout_ns(1), 8192u);
  EXPECT_EQ(ack_timeout_ns(14), 67108864u);  // ~67 ms, the common default
  EXPECT_EQ(ack_timeout_ns(31), 4096ull << 31);
  EXPECT_EQ(ack_timeout_ns(40), 4096ull << 31);
}

// ------------------------------------------------------------------ segmentation

TEST(Segment, MtuHelpers) {
  EXPECT_EQ(mtu_bytes(1), 256u);
  EXPECT_EQ(mtu_bytes(3), 1024u);
  EXPECT_EQ(mtu_bytes(5), 4096u);
  EXPECT_EQ(mtu_bytes(0), 0u);
  EXPECT_EQ(mtu_bytes(6), 0u);
  EXPECT_TRUE(valid_mtu(256));
  EXPECT_FALSE(valid_mtu(1500));
  EXPECT_EQ(plan_segments(MessageKind::Send, 100, 1500).num_packets, 0u);
  EXPECT_EQ(plan_segments(MessageKind::Send, 100, 0).num_packets, 0u);
}

TEST(Segment, BoundariesForEveryKindAndMtu) {
  using B = BthOpcode;
  struct KindOps {
    MessageKind kind;
    B first, middle, last, only;
  };
  const KindOps kinds[] = {
      {MessageKind::Send, B::SEND_FIRST, B::SEND_MIDDLE, B::SEND_LAST, B::SEND_ONLY},
      {MessageKind::SendImm, B::SEND_FIRST, B::SEND_MIDDLE, B::SEND_LAST_WITH_IMMEDIATE,
       B::SEND_ONLY_WITH_IMMEDIATE},
      {MessageKind::SendInv, B::SEND_FIRST, B::SEND_MIDDLE, B::SEND_LAST_WITH_INVALIDATE,
       B::SEND_ONLY_WITH_INVALIDATE},
      {MessageKind::Write, B::RDMA_WRITE_FIRST, B::RDMA_WRITE_MIDDLE, B::RDMA_WRITE_LAST, B::RDMA_WRITE_ONLY},
      {MessageKind::WriteImm, B::RDMA_WRITE_FIRST, B::RDMA_WRITE_MIDDLE, B::RDMA_WRITE_LAST_WITH_IMMEDIATE,
       B::RDMA_WRITE_ONLY_WITH_IMMEDIATE},
      {MessageKind::ReadResponse, B::RDMA_READ_RESPONSE_FIRST, B::RDMA_READ_RESPONSE_MIDDLE,
       B::RDMA_READ_RESPONSE_LAST, B::RDMA_READ_RESPONSE_ONLY},
  };
  for (const KindOps& k : kinds) {
    for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
      struct Case {
        uint32_t len, packets;
      };
      const Case cases[] = {{0, 1},       {1, 1},       {mtu - 1, 1}, {mtu, 1},
                            {mtu + 1, 2}, {2 * mtu, 2}, {3 * mtu, 3}, {3 * mtu + 1, 4}};
      for (const Case& c : cases) {
        SCOPED_TRACE("kind " + std::to_string(static_cast<int>(k.kind)) + " mtu " + std::to_string(mtu) +
                     " len " + std::to_string(c.len));
        const SegmentPlan p = plan_segments(k.kind, c.len, mtu);
        ASSERT_EQ(p.num_packets, c.packets);
        uint64_t sum = 0;
        for (uint32_t i = 0; i < p.num_packets; ++i) {
          const Segment s = p.segment(i);
          EXPECT_EQ(s.offset, static_cast<uint64_t>(i) * mtu);
          sum += s.length;
          if (p.num_packets == 1) {
            EXPECT_EQ(s.opcode, k.only);
            EXPECT_EQ(s.length, c.len);
          } else if (i == 0) {
            EXPECT_EQ(s.opcode, k.first);
            EXPECT_EQ(s.length, mtu);
          } else if (i + 1 == p.num_packets) {
            EXPECT_EQ(s.opcode, k.last);
            EXPECT_GE(s.length, 1u);
            EXPECT_LE(s.length, mtu);
          } else {
            EXPECT_EQ(s.opcode, k.middle);
            EXPECT_EQ(s.length, mtu);
          }
        }
        EXPECT_EQ(sum, c.len);
      }
    }
  }
}

TEST(Segment, ThreeMtuWriteExplicit) {
  const SegmentPlan p = plan_segments(MessageKind::WriteImm, 3 * 1024, 1024);
  ASSERT_EQ(p.num_packets, 3u);
  EXPECT_EQ(p.segment(0).opcode, BthOpcode::RDMA_WRITE_FIRST);
  EXPECT_EQ(p.segment(1).opcode, BthOpcode::RDMA_WRITE_MIDDLE);
  EXPECT_EQ(p.segment(2).opcode, BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE);
  EXPECT_EQ(p.segment(2).offset, 2048u);
  EXPECT_EQ(p.segment(2).length, 1024u);
}

TEST(Segment, LargestMessage) {
  // 2 GiB - 1 at MTU 256: packet count and the last packet's range stay exact in 32 bits.
  const uint32_t len = 0x7fffffff;
  const SegmentPlan p = plan_segments(MessageKind::Write, len, 256);
  EXPECT_EQ(p.num_packets, 0x800000u);
  const Segment last = p.segment(p.num_packets - 1);
  EXPECT_EQ(last.offset, 0x7fffff00u);
  EXPECT_EQ(last.length, 0xffu);
  EXPECT_EQ(last.opcode, BthOpcode::RDMA_WRITE_LAST);
  const SegmentPlan q = plan_segments(MessageKind::Send, 0xffffffffu, 4096);
  EXPECT_EQ(q.num_packets, 0x100000u);
  EXPECT_EQ(q.segment(q.num_packets - 1).length, 4095u);
}

TEST(Segment, PlanDrivesBuild) {
  // A segmented WRITE_IMM, built and parsed packet by packet, reassembles to the message.
  const auto msg = make_payload(2500, 9);
  const SegmentPlan p = plan_segments(MessageKind::WriteImm, static_cast<uint32_t>(msg.size()), 1024);
  std::vector<uint8_t> out(max_frame_length(1024));
  std::vector<uint8_t> got;
  Headers h = sample_headers(BthOpcode::SEND_ONLY, false);
  for (uint32_t i = 0; i < p.num_packets; ++i) {
    const Segment s = p.segment(i);
    h.opcode = s.opcode;
    h.psn = psn_add(0xfffffe, i);
    const size_t n = build_frame(h, msg.data() + s.offset, s.length, out.data(), out.size());
    ASSERT_GT(n, 0u);
    ParsedFrame pf;
    ASSERT_EQ(parse_frame(out.data(), n, pf), ParseError::Ok);
    EXPECT_EQ(pf.h.psn, psn_add(0xfffffe, i));
    got.insert(got.end(), pf.payload, pf.payload + pf.payload_len);
  }
  EXPECT_EQ(got, msg);
}

}  // namespace
}  // namespace hcasim::wire
