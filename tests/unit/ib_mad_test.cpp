// SPDX-License-Identifier: Apache-2.0
/**
 * @file ib_mad_test.cpp
 * @brief Unit tests of the CM MAD codec (model/wire/ib_mad.h).
 *
 * Every expected position below is written from the IBTA vol. 1 chapter 12 message tables (the
 * CM data offset Byte[Bit] of the table, plus 24 for the MAD header), as cross-checked with the
 * Linux kernel's include/rdma/ibta_vol1_c12.h and Wireshark's CM dissector; none is taken from
 * the codec itself. Bits are read back here one at a time, by a reader independent of the codec.
 */
#include "ib_mad.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace hcasim::wire::mad {
namespace {

// ------------------------------------------------------------------ test-side bit access

constexpr unsigned kHdr = 24;  // the common MAD header: table offsets are relative to its end

/// @p width bits of @p mad starting at bit @p bit (0 = MSB) of byte @p byte, one bit at a time.
uint64_t bits(const uint8_t* mad, unsigned byte, unsigned bit, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) {
    const unsigned pos = byte * 8 + bit + i;
    v = (v << 1) | ((mad[pos / 8] >> (7 - pos % 8)) & 1u);
  }
  return v;
}

uint64_t mask(unsigned width) { return width >= 64 ? ~0ull : (1ull << width) - 1; }
/// A value with no symmetry, so a reversed or shifted field cannot match it by chance.
uint64_t pattern(unsigned width) { return 0x9e3779b97f4a7c15ull & mask(width); }

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint64_t be64(const uint8_t* p) { return bits(p, 0, 0, 64); }

// ------------------------------------------------------------------ field tables

struct Part {
  unsigned byte;  ///< MAD byte offset (24 + the table's CM data offset)
  unsigned bit;   ///< bit offset from that byte's MSB
  unsigned width;
};

/// One scalar field of message M: where the spec puts it (1 to 3 parts, most significant first)
/// and how to set and read the struct member.
template <class M>
struct FieldCase {
  const char* name;
  Part parts[3];
  unsigned nparts;
  unsigned storage_bits;  ///< bits of the member's type (1 for bool): truncation is tested below it
  void (*set)(M&, uint64_t);
  uint64_t (*get)(const M&);

  unsigned width() const {
    unsigned w = 0;
    for (unsigned i = 0; i < nparts; ++i) w += parts[i].width;
    return w;
  }
  uint64_t read(const uint8_t* mad) const {
    uint64_t v = 0;
    for (unsigned i = 0; i < nparts; ++i)  // (a 64-bit field is always alone: no shift by 64)
      v = (parts[i].width < 64 ? v << parts[i].width : 0) |
          bits(mad, parts[i].byte, parts[i].bit, parts[i].width);
    return v;
  }
};

/// One byte array of message M (GID, ARI, private data): spec offset and length.
template <class M>
struct ArrayCase {
  const char* name;
  unsigned byte;
  unsigned len;
  size_t member_size;
  uint8_t* (*ptr)(M&);
};

#define MEMBER_T(M, member) std::remove_reference_t<decltype(std::declval<M&>().member)>
#define STORAGE(M, member) \
  (std::is_same<MEMBER_T(M, member), bool>::value ? 1u : unsigned(sizeof(MEMBER_T(M, member)) * 8))
#define ACCESSORS(M, member)                                                \
  [](M& m, uint64_t v) { m.member = static_cast<MEMBER_T(M, member)>(v); }, \
      [](const M& m) { return static_cast<uint64_t>(m.member); }
#define FIELD(M, member, byte, bit, width) \
  FieldCase<M> { #member, {{byte, bit, width } }, 1, STORAGE(M, member), ACCESSORS(M, member) }
#define FIELD2(M, member, p0, p1) \
  FieldCase<M> { #member, {p0, p1 }, 2, STORAGE(M, member), ACCESSORS(M, member) }
#define FIELD3(M, member, p0, p1, p2) \
  FieldCase<M> { #member, {p0, p1, p2 }, 3, STORAGE(M, member), ACCESSORS(M, member) }
#define ARRAY(M, member, byte, len)                                                                    \
  ArrayCase<M> {                                                                                       \
#member, byte, len, sizeof(std::declval <M&>().member), [](M & m) -> uint8_t* { return m.member; } \
  }

// REQ, IBTA 12.6.5 (REQ message contents table).
#define PATH_FIELDS(p, b)                                                                             \
  FIELD(Req, p.local_lid, kHdr + b + 0, 0, 16), FIELD(Req, p.remote_lid, kHdr + b + 2, 0, 16),        \
      FIELD(Req, p.flow_label, kHdr + b + 36, 0, 20), FIELD(Req, p.packet_rate, kHdr + b + 39, 2, 6), \
      FIELD(Req, p.traffic_class, kHdr + b + 40, 0, 8), FIELD(Req, p.hop_limit, kHdr + b + 41, 0, 8), \
      FIELD(Req, p.sl, kHdr + b + 42, 0, 4), FIELD(Req, p.subnet_local, kHdr + b + 42, 4, 1),         \
      FIELD(Req, p.local_ack_timeout, kHdr + b + 43, 0, 5)
const FieldCase<Req> kReqFields[] = {
    FIELD(Req, local_comm_id, kHdr + 0, 0, 32),
    FIELD(Req, vendor_id, kHdr + 5, 0, 24),
    FIELD(Req, service_id, kHdr + 8, 0, 64),
    FIELD(Req, local_ca_guid, kHdr + 16, 0, 64),
    FIELD(Req, local_qkey, kHdr + 28, 0, 32),
    FIELD(Req, local_qpn, kHdr + 32, 0, 24),
    FIELD(Req, responder_resources, kHdr + 35, 0, 8),
    FIELD(Req, local_eecn, kHdr + 36, 0, 24),
    FIELD(Req, initiator_depth, kHdr + 39, 0, 8),
    FIELD(Req, remote_eecn, kHdr + 40, 0, 24),
    FIELD(Req, remote_cm_response_timeout, kHdr + 43, 0, 5),
    FIELD(Req, transport_service_type, kHdr + 43, 5, 2),
    FIELD(Req, end_to_end_flow_control, kHdr + 43, 7, 1),
    FIELD(Req, starting_psn, kHdr + 44, 0, 24),
    FIELD(Req, local_cm_response_timeout, kHdr + 47, 0, 5),
    FIELD(Req, retry_count, kHdr + 47, 5, 3),
    FIELD(Req, partition_key, kHdr + 48, 0, 16),
    FIELD(Req, path_mtu, kHdr + 50, 0, 4),
    FIELD(Req, rdc_exists, kHdr + 50, 4, 1),
    FIELD(Req, rnr_retry_count, kHdr + 50, 5, 3),
    FIELD(Req, max_cm_retries, kHdr + 51, 0, 4),
    FIELD(Req, srq, kHdr + 51, 4, 1),
    FIELD(Req, extended_transport_type, kHdr + 51, 5, 3),
    PATH_FIELDS(primary, 52),
    PATH_FIELDS(alternate, 96),
    FIELD(Req, sap_supported, kHdr + 139, 5, 1),
};
const ArrayCase<Req> kReqArrays[] = {
    ARRAY(Req, primary.local_gid, kHdr + 56, 16),    ARRAY(Req, primary.remote_gid, kHdr + 72, 16),
    ARRAY(Req, alternate.local_gid, kHdr + 100, 16), ARRAY(Req, alternate.remote_gid, kHdr + 116, 16),
    ARRAY(Req, private_data, kHdr + 140, 92),
};

// MRA, IBTA 12.6.6.
const FieldCase<Mra> kMraFields[] = {
    FIELD(Mra, local_comm_id, kHdr + 0, 0, 32),
    FIELD(Mra, remote_comm_id, kHdr + 4, 0, 32),
    FIELD(Mra, message_mraed, kHdr + 8, 0, 2),
    FIELD(Mra, service_timeout, kHdr + 9, 0, 5),
};
const ArrayCase<Mra> kMraArrays[] = {ARRAY(Mra, private_data, kHdr + 10, 222)};

// REJ, IBTA 12.6.7.
const FieldCase<Rej> kRejFields[] = {
    FIELD(Rej, local_comm_id, kHdr + 0, 0, 32),   FIELD(Rej, remote_comm_id, kHdr + 4, 0, 32),
    FIELD(Rej, message_rejected, kHdr + 8, 0, 2), FIELD(Rej, reject_info_length, kHdr + 9, 0, 7),
    FIELD(Rej, reason, kHdr + 10, 0, 16),
};
const ArrayCase<Rej> kRejArrays[] = {ARRAY(Rej, ari, kHdr + 12, 72),
                                     ARRAY(Rej, private_data, kHdr + 84, 148)};

// REP, IBTA 12.6.8. The ECE vendor ID (release 1.4) fills the byte after each 24-bit number.
const FieldCase<Rep> kRepFields[] = {
    FIELD(Rep, local_comm_id, kHdr + 0, 0, 32),
    FIELD(Rep, remote_comm_id, kHdr + 4, 0, 32),
    FIELD(Rep, local_qkey, kHdr + 8, 0, 32),
    FIELD(Rep, local_qpn, kHdr + 12, 0, 24),
    FIELD3(Rep, vendor_id, (Part{kHdr + 15, 0, 8}), (Part{kHdr + 19, 0, 8}), (Part{kHdr + 23, 0, 8})),
    FIELD(Rep, local_eecn, kHdr + 16, 0, 24),
    FIELD(Rep, starting_psn, kHdr + 20, 0, 24),
    FIELD(Rep, responder_resources, kHdr + 24, 0, 8),
    FIELD(Rep, initiator_depth, kHdr + 25, 0, 8),
    FIELD(Rep, target_ack_delay, kHdr + 26, 0, 5),
    FIELD(Rep, failover_accepted, kHdr + 26, 5, 2),
    FIELD(Rep, end_to_end_flow_control, kHdr + 26, 7, 1),
    FIELD(Rep, rnr_retry_count, kHdr + 27, 0, 3),
    FIELD(Rep, srq, kHdr + 27, 3, 1),
    FIELD(Rep, local_ca_guid, kHdr + 28, 0, 64),
};
const ArrayCase<Rep> kRepArrays[] = {ARRAY(Rep, private_data, kHdr + 36, 196)};

// RTU 12.6.9, DREQ 12.6.10, DREP 12.6.11.
const FieldCase<Rtu> kRtuFields[] = {FIELD(Rtu, local_comm_id, kHdr + 0, 0, 32),
                                     FIELD(Rtu, remote_comm_id, kHdr + 4, 0, 32)};
const ArrayCase<Rtu> kRtuArrays[] = {ARRAY(Rtu, private_data, kHdr + 8, 224)};
const FieldCase<Dreq> kDreqFields[] = {FIELD(Dreq, local_comm_id, kHdr + 0, 0, 32),
                                       FIELD(Dreq, remote_comm_id, kHdr + 4, 0, 32),
                                       FIELD(Dreq, remote_qpn_eecn, kHdr + 8, 0, 24)};
const ArrayCase<Dreq> kDreqArrays[] = {ARRAY(Dreq, private_data, kHdr + 12, 220)};
const FieldCase<Drep> kDrepFields[] = {FIELD(Drep, local_comm_id, kHdr + 0, 0, 32),
                                       FIELD(Drep, remote_comm_id, kHdr + 4, 0, 32)};
const ArrayCase<Drep> kDrepArrays[] = {ARRAY(Drep, private_data, kHdr + 8, 224)};

// SIDR_REQ 12.11.1, SIDR_REP 12.11.2 (ECE vendor ID: bits 23-8 in bytes 6-7, 7-0 in byte 11).
const FieldCase<SidrReq> kSidrReqFields[] = {FIELD(SidrReq, request_id, kHdr + 0, 0, 32),
                                             FIELD(SidrReq, partition_key, kHdr + 4, 0, 16),
                                             FIELD(SidrReq, service_id, kHdr + 8, 0, 64)};
const ArrayCase<SidrReq> kSidrReqArrays[] = {ARRAY(SidrReq, private_data, kHdr + 16, 216)};
const FieldCase<SidrRep> kSidrRepFields[] = {
    FIELD(SidrRep, request_id, kHdr + 0, 0, 32),
    FIELD(SidrRep, status, kHdr + 4, 0, 8),
    FIELD(SidrRep, additional_info_length, kHdr + 5, 0, 8),
    FIELD2(SidrRep, vendor_id, (Part{kHdr + 6, 0, 16}), (Part{kHdr + 11, 0, 8})),
    FIELD(SidrRep, qpn, kHdr + 8, 0, 24),
    FIELD(SidrRep, service_id, kHdr + 12, 0, 64),
    FIELD(SidrRep, qkey, kHdr + 20, 0, 32),
};
const ArrayCase<SidrRep> kSidrRepArrays[] = {ARRAY(SidrRep, additional_info, kHdr + 24, 72),
                                             ARRAY(SidrRep, private_data, kHdr + 96, 136)};

template <class M>
struct Table {
  const FieldCase<M>* fields;
  size_t nfields;
  const ArrayCase<M>* arrays;
  size_t narrays;
  uint16_t attr;  ///< the message's attribute ID (IBTA vol. 1 chapter 12)
};
template <class M, size_t NF, size_t NA>
Table<M> table(const FieldCase<M> (&f)[NF], const ArrayCase<M> (&a)[NA], uint16_t attr) {
  return {f, NF, a, NA, attr};
}

// ------------------------------------------------------------------ generic checks

/// The spec's bits of every field and array of a table, as a 2048-bit map of the MAD.
template <class M>
std::vector<bool> covered(const Table<M>& t) {
  std::vector<bool> c(kMadSize * 8);
  for (size_t i = 0; i < t.nfields; ++i)
    for (unsigned k = 0; k < t.fields[i].nparts; ++k) {
      const Part& p = t.fields[i].parts[k];
      for (unsigned b = 0; b < p.width; ++b) c[p.byte * 8 + p.bit + b] = true;
    }
  for (size_t i = 0; i < t.narrays; ++i)
    for (unsigned b = 0; b < t.arrays[i].len * 8; ++b) c[t.arrays[i].byte * 8 + b] = true;
  return c;
}

/// Bits set in the CM data of @p mad outside field @p f's spec position.
template <class M>
unsigned stray_bits(const uint8_t* mad, const FieldCase<M>& f) {
  std::vector<bool> mine(kMadSize * 8);
  for (unsigned k = 0; k < f.nparts; ++k)
    for (unsigned b = 0; b < f.parts[k].width; ++b) mine[f.parts[k].byte * 8 + f.parts[k].bit + b] = true;
  unsigned n = 0;
  for (unsigned pos = kHdr * 8; pos < kMadSize * 8; ++pos)
    if (!mine[pos] && ((mad[pos / 8] >> (7 - pos % 8)) & 1u)) ++n;
  return n;
}

/// Every field but @p skip (nullptr: none) reads 0 and every array is all zero.
template <class M>
void expect_rest_zero(const Table<M>& t, M& m, const void* skip) {
  for (size_t i = 0; i < t.nfields; ++i)
    if (&t.fields[i] != skip) {
      EXPECT_EQ(t.fields[i].get(m), 0u) << "neighbour " << t.fields[i].name;
    }
  for (size_t i = 0; i < t.narrays; ++i) {
    if (&t.arrays[i] == skip) continue;
    const uint8_t* a = t.arrays[i].ptr(m);
    for (unsigned k = 0; k < t.arrays[i].len; ++k) ASSERT_EQ(a[k], 0) << t.arrays[i].name << "[" << k << "]";
  }
}

/// One field alone at @p v: the bits land at the spec position and nowhere else, and decode back.
template <class M>
void check_field_value(const Table<M>& t, const FieldCase<M>& f, uint64_t v) {
  SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(v));
  M m;
  f.set(m, v);
  uint8_t mad[kMadSize];
  encode(m, 0x1122334455667788ull, mad);
  EXPECT_EQ(f.read(mad), v) << "not at the spec position";
  EXPECT_EQ(stray_bits(mad, f), 0u) << "bits written outside the field";
  M d;
  ASSERT_EQ(decode(mad, sizeof(mad), d), DecodeError::Ok);
  EXPECT_EQ(f.get(d), v);
  expect_rest_zero(t, d, &f);
}

/// Every other field and array at all ones, this one at 0: writing the neighbours leaks nothing in.
template <class M>
void check_field_hole(const Table<M>& t, const FieldCase<M>& f) {
  SCOPED_TRACE(std::string(f.name) + " = 0 among ones");
  M m;
  for (size_t i = 0; i < t.nfields; ++i) t.fields[i].set(m, mask(t.fields[i].width()));
  for (size_t i = 0; i < t.narrays; ++i) std::memset(t.arrays[i].ptr(m), 0xff, t.arrays[i].len);
  f.set(m, 0);
  uint8_t mad[kMadSize];
  encode(m, 1, mad);
  EXPECT_EQ(f.read(mad), 0u);
  M d;
  ASSERT_EQ(decode(mad, sizeof(mad), d), DecodeError::Ok);
  EXPECT_EQ(f.get(d), 0u);
  for (size_t i = 0; i < t.nfields; ++i)
    if (&t.fields[i] != &f) {
      EXPECT_EQ(t.fields[i].get(d), mask(t.fields[i].width())) << t.fields[i].name;
    }
}

template <class M>
void check_fields(const Table<M>& t) {
  for (size_t i = 0; i < t.nfields; ++i) {
    const FieldCase<M>& f = t.fields[i];
    const unsigned w = f.width();
    for (uint64_t v : {uint64_t{0}, uint64_t{1}, mask(w), pattern(w)}) check_field_value(t, f, v);
    check_field_hole(t, f);
    if (f.storage_bits > w) {  // a value wider than the field is cut to it, neighbours untouched
      SCOPED_TRACE(std::string(f.name) + " one bit too wide");
      M m;
      f.set(m, (1ull << w) | pattern(w));
      uint8_t mad[kMadSize];
      encode(m, 1, mad);
      EXPECT_EQ(f.read(mad), pattern(w));
      EXPECT_EQ(stray_bits(mad, f), 0u);
    }
  }
}

template <class M>
void check_arrays(const Table<M>& t) {
  for (size_t i = 0; i < t.narrays; ++i) {
    const ArrayCase<M>& a = t.arrays[i];
    SCOPED_TRACE(a.name);
    EXPECT_EQ(a.member_size, a.len) << "the struct's array is not the spec's size";
    M m;
    for (unsigned k = 0; k < a.len; ++k) a.ptr(m)[k] = static_cast<uint8_t>(k * 7 + 1);
    uint8_t mad[kMadSize];
    encode(m, 1, mad);
    for (unsigned k = 0; k < a.len; ++k) ASSERT_EQ(mad[a.byte + k], static_cast<uint8_t>(k * 7 + 1)) << k;
    for (unsigned pos = kHdr; pos < kMadSize; ++pos)
      if (pos < a.byte || pos >= a.byte + a.len) {
        ASSERT_EQ(mad[pos], 0) << "stray byte " << pos;
      }
    M d;
    ASSERT_EQ(decode(mad, sizeof(mad), d), DecodeError::Ok);
    EXPECT_EQ(std::memcmp(a.ptr(d), a.ptr(m), a.len), 0);
    expect_rest_zero(t, d, &a);
  }
}

/// Everything at all ones: exactly the spec's field bits are set (reserved bits stay 0), and a
/// MAD of all ones (reserved bits included) decodes to every field at its maximum.
template <class M>
void check_all_ones(const Table<M>& t) {
  M m;
  for (size_t i = 0; i < t.nfields; ++i) t.fields[i].set(m, mask(t.fields[i].width()));
  for (size_t i = 0; i < t.narrays; ++i) std::memset(t.arrays[i].ptr(m), 0xff, t.arrays[i].len);
  uint8_t mad[kMadSize];
  encode(m, 1, mad);
  const std::vector<bool> c = covered(t);
  for (unsigned pos = kHdr * 8; pos < kMadSize * 8; ++pos)
    ASSERT_EQ(((mad[pos / 8] >> (7 - pos % 8)) & 1u) != 0, c[pos]) << "MAD bit " << pos;
  std::memset(mad + kHdr, 0xff, kMadSize - kHdr);
  M d;
  ASSERT_EQ(decode(mad, sizeof(mad), d), DecodeError::Ok);
  EXPECT_TRUE(d == m) << "reserved bits leaked into a field";
}

/// The common header an encoder writes (IBTA 13.4.2 positions).
template <class M>
void check_header(const Table<M>& t) {
  uint8_t mad[kMadSize];
  std::memset(mad, 0xee, sizeof(mad));
  encode(M{}, 0x0102030405060708ull, mad);
  EXPECT_EQ(mad[0], 1);         // base version
  EXPECT_EQ(mad[1], 0x07);      // class: CM
  EXPECT_EQ(mad[2], 2);         // class version
  EXPECT_EQ(mad[3], 0x03);      // R = 0, method Send()
  EXPECT_EQ(be16(mad + 4), 0);  // status
  EXPECT_EQ(be16(mad + 6), 0);  // class specific
  EXPECT_EQ(be64(mad + 8), 0x0102030405060708ull);
  EXPECT_EQ(be16(mad + 16), t.attr);
  EXPECT_EQ(be16(mad + 18), 0);         // reserved
  EXPECT_EQ(bits(mad, 20, 0, 32), 0u);  // attribute modifier
  for (unsigned k = kHdr; k < kMadSize; ++k) ASSERT_EQ(mad[k], 0) << "default message byte " << k;
}

/// Every field at a pattern, every array filled: decode(encode(m)) == m, and == sees a change.
template <class M>
void check_round_trip(const Table<M>& t) {
  M m;
  for (size_t i = 0; i < t.nfields; ++i)
    t.fields[i].set(m, (pattern(t.fields[i].width()) ^ i) & mask(t.fields[i].width()));
  for (size_t i = 0; i < t.narrays; ++i)
    for (unsigned k = 0; k < t.arrays[i].len; ++k) t.arrays[i].ptr(m)[k] = static_cast<uint8_t>(k + 13 * i);
  uint8_t mad[kMadSize];
  encode(m, 42, mad);
  M d;
  ASSERT_EQ(decode(mad, sizeof(mad), d), DecodeError::Ok);
  EXPECT_TRUE(d == m);
  EXPECT_FALSE(d != m);
  for (size_t i = 0; i < t.nfields; ++i) {
    M e = d;
    t.fields[i].set(e, t.fields[i].get(e) ^ 1);
    EXPECT_TRUE(e != d) << "== misses " << t.fields[i].name;
  }
  for (size_t i = 0; i < t.narrays; ++i) {
    M e = d;
    t.arrays[i].ptr(e)[t.arrays[i].len - 1] ^= 0x80;
    EXPECT_TRUE(e != d) << "== misses " << t.arrays[i].name;
  }
}

template <class M>
void check_message(const Table<M>& t) {
  check_header(t);
  check_fields(t);
  check_arrays(t);
  check_all_ones(t);
  check_round_trip(t);
}

// ------------------------------------------------------------------ per message

TEST(IbMad, ReqLayout) { check_message(table(kReqFields, kReqArrays, 0x0010)); }
TEST(IbMad, MraLayout) { check_message(table(kMraFields, kMraArrays, 0x0011)); }
TEST(IbMad, RejLayout) { check_message(table(kRejFields, kRejArrays, 0x0012)); }
TEST(IbMad, RepLayout) { check_message(table(kRepFields, kRepArrays, 0x0013)); }
TEST(IbMad, RtuLayout) { check_message(table(kRtuFields, kRtuArrays, 0x0014)); }
TEST(IbMad, DreqLayout) { check_message(table(kDreqFields, kDreqArrays, 0x0015)); }
TEST(IbMad, DrepLayout) { check_message(table(kDrepFields, kDrepArrays, 0x0016)); }
TEST(IbMad, SidrReqLayout) { check_message(table(kSidrReqFields, kSidrReqArrays, 0x0017)); }
TEST(IbMad, SidrRepLayout) { check_message(table(kSidrRepFields, kSidrRepArrays, 0x0018)); }

/// A few positions spelled out byte by byte, as a reader of the spec table would check them.
TEST(IbMad, ReqBytesAtSpecOffsets) {
  Req r;
  r.local_comm_id = 0x12345678;
  r.service_id = 0x0000000001060000ull | 0x4791;  // RDMA CM, TCP port space, port 0x4791
  r.local_qpn = 0xabcdef;
  r.responder_resources = 0x5a;
  r.starting_psn = 0x123456;
  r.partition_key = 0xffff;
  r.path_mtu = 5;  // 4096
  r.rnr_retry_count = 7;
  r.primary.sl = 3;
  r.primary.subnet_local = true;
  r.private_data[0] = 0x40;
  r.private_data[91] = 0x99;
  uint8_t mad[kMadSize];
  encode(r, 7, mad);
  const uint8_t comm[] = {0x12, 0x34, 0x56, 0x78};
  EXPECT_EQ(std::memcmp(mad + 24, comm, 4), 0);
  const uint8_t sid[] = {0, 0, 0, 0, 0x01, 0x06, 0x47, 0x91};
  EXPECT_EQ(std::memcmp(mad + 32, sid, 8), 0);  // CM byte 8
  const uint8_t qpn_rr[] = {0xab, 0xcd, 0xef, 0x5a};
  EXPECT_EQ(std::memcmp(mad + 56, qpn_rr, 4), 0);  // CM byte 32: QPN then responder resources
  const uint8_t psn[] = {0x12, 0x34, 0x56};
  EXPECT_EQ(std::memcmp(mad + 68, psn, 3), 0);  // CM byte 44
  EXPECT_EQ(be16(mad + 72), 0xffff);            // CM byte 48
  EXPECT_EQ(mad[74], 0x57);                     // CM byte 50: MTU 0101, RDC 0, RNR retry 111
  EXPECT_EQ(mad[118], 0x38);                    // CM byte 94: SL 0011, subnet local 1, 000
  EXPECT_EQ(mad[164], 0x40);                    // CM byte 140: first private data byte
  EXPECT_EQ(mad[255], 0x99);                    // the last one is the MAD's last byte
}

TEST(IbMad, RejAndRepBytesAtSpecOffsets) {
  Rej j;
  j.message_rejected = static_cast<uint8_t>(RejectedMessage::Rep);
  j.reject_info_length = 0x7f;
  j.reason = static_cast<uint16_t>(RejReason::ConsumerReject);
  j.ari[0] = 0xa1;
  j.private_data[0] = 0xb2;
  uint8_t mad[kMadSize];
  encode(j, 1, mad);
  EXPECT_EQ(mad[24 + 8], 0x40);  // message rejected 01 in the top two bits
  EXPECT_EQ(mad[24 + 9], 0xfe);  // 7-bit length, then a reserved bit
  EXPECT_EQ(be16(mad + 24 + 10), 28);
  EXPECT_EQ(mad[24 + 12], 0xa1);  // ARI
  EXPECT_EQ(mad[24 + 84], 0xb2);  // private data

  Rep p;
  p.local_qpn = 0x000102;
  p.vendor_id = 0x02c9ab;  // Mellanox's OUI 0x0002c9 shifted: high, middle, low bytes
  p.target_ack_delay = 0x1f;
  p.failover_accepted = 2;
  p.end_to_end_flow_control = true;
  p.rnr_retry_count = 5;
  p.srq = true;
  encode(p, 1, mad);
  const uint8_t qpn_vh[] = {0x00, 0x01, 0x02, 0x02};
  EXPECT_EQ(std::memcmp(mad + 24 + 12, qpn_vh, 4), 0);
  EXPECT_EQ(mad[24 + 19], 0xc9);
  EXPECT_EQ(mad[24 + 23], 0xab);
  EXPECT_EQ(mad[24 + 26], 0xfd);  // 11111 10 1
  EXPECT_EQ(mad[24 + 27], 0xb0);  // 101 1 0000
}

// ------------------------------------------------------------------ header, peek, errors

TEST(IbMad, Constants) {
  EXPECT_EQ(kMadSize, 256u);
  EXPECT_EQ(kMadHeaderSize, 24u);
  EXPECT_EQ(kCmDataSize, 232u);
  EXPECT_EQ(kBaseVersion, 1);
  EXPECT_EQ(kMgmtClassCm, 0x07);
  EXPECT_EQ(kCmClassVersion, 2);
  EXPECT_EQ(kMethodGet, 0x01);
  EXPECT_EQ(kMethodSet, 0x02);
  EXPECT_EQ(kMethodSend, 0x03);
  EXPECT_EQ(kMethodGetResp, 0x81);
  EXPECT_TRUE(is_response(kMethodGetResp));
  EXPECT_FALSE(is_response(kMethodSend));
  EXPECT_EQ(kGsiQkey, 0x80010000u);
  EXPECT_EQ(kGsiQpn, 1u);
}

TEST(IbMad, CommonHeaderEncodeAndPeek) {
  CommonHeader h;
  h.base_version = 0x11;
  h.mgmt_class = 0x22;
  h.class_version = 0x33;
  h.method = 0x81;
  h.status = 0x4455;
  h.class_specific = 0x6677;
  h.transaction_id = 0x8899aabbccddeeffull;
  h.attribute_id = 0x0102;
  h.attribute_modifier = 0x03040506;
  uint8_t b[kMadHeaderSize];
  std::memset(b, 0xee, sizeof(b));
  encode_header(h, b);
  const uint8_t want[24] = {0x11, 0x22, 0x33, 0x81, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
                            0xcc, 0xdd, 0xee, 0xff, 0x01, 0x02, 0x00, 0x00, 0x03, 0x04, 0x05, 0x06};
  EXPECT_EQ(std::memcmp(b, want, 24), 0);
  CommonHeader g;
  ASSERT_TRUE(peek(b, sizeof(b), g));
  EXPECT_TRUE(g == h);
  g.attribute_modifier ^= 1;
  EXPECT_TRUE(g != h);
  CommonHeader untouched;
  EXPECT_FALSE(peek(b, 23, untouched));
  EXPECT_FALSE(peek(nullptr, 0, untouched));
  EXPECT_TRUE(untouched == CommonHeader{});
}

/// A valid MAD of message M, then one header byte (or the length) spoiled.
template <class M>
void check_decode_errors(AttrId other) {
  SCOPED_TRACE(attr_id_name(M::kAttrId));
  uint8_t good[kMadSize + 8] = {};
  M m;
  m.private_data[0] = 1;
  encode(m, 9, good);
  M sentinel;
  sentinel.private_data[3] = 0x77;
  auto decode_with = [&](size_t byte, uint8_t value, size_t len) {
    uint8_t b[kMadSize + 8];
    std::memcpy(b, good, sizeof(b));
    b[byte] = value;
    M out = sentinel;
    const DecodeError e = decode(b, len, out);
    if (e != DecodeError::Ok) {
      EXPECT_TRUE(out == sentinel) << "output changed on " << decode_error_name(e);
    }
    return e;
  };
  EXPECT_EQ(decode_with(0, 1, kMadSize), DecodeError::Ok);
  EXPECT_EQ(decode_with(0, 1, kMadSize + 8), DecodeError::Ok);  // bytes past the MAD ignored
  EXPECT_EQ(decode_with(0, 1, kMadSize - 1), DecodeError::TooShort);
  EXPECT_EQ(decode_with(0, 1, 0), DecodeError::TooShort);
  EXPECT_EQ(decode_with(0, 2, kMadSize), DecodeError::BadBaseVersion);
  EXPECT_EQ(decode_with(1, 0x03, kMadSize), DecodeError::BadMgmtClass);  // SA
  EXPECT_EQ(decode_with(2, 1, kMadSize), DecodeError::BadClassVersion);
  EXPECT_EQ(decode_with(3, 0x83, kMadSize), DecodeError::BadMethod);  // a response
  EXPECT_EQ(decode_with(3, kMethodGet, kMadSize), DecodeError::BadMethod);
  EXPECT_EQ(decode_with(17, static_cast<uint8_t>(other), kMadSize), DecodeError::WrongAttribute);
  EXPECT_EQ(decode_with(16, 0x01, kMadSize), DecodeError::WrongAttribute);
  M out;
  EXPECT_EQ(decode(nullptr, 0, out), DecodeError::TooShort);
  EXPECT_EQ(check_cm(good, kMadSize, M::kAttrId), DecodeError::Ok);
}

TEST(IbMad, DecodeRejectsBadInput) {
  check_decode_errors<Req>(AttrId::Rep);
  check_decode_errors<Mra>(AttrId::Req);
  check_decode_errors<Rej>(AttrId::Rtu);
  check_decode_errors<Rep>(AttrId::Req);
  check_decode_errors<Rtu>(AttrId::Rep);
  check_decode_errors<Dreq>(AttrId::Drep);
  check_decode_errors<Drep>(AttrId::Dreq);
  check_decode_errors<SidrReq>(AttrId::SidrRep);
  check_decode_errors<SidrRep>(AttrId::SidrReq);
}

TEST(IbMad, DecodeChecksInOrder) {
  uint8_t b[kMadSize] = {};
  Rtu out;
  EXPECT_EQ(decode(b, sizeof(b), out), DecodeError::BadBaseVersion);  // all zero: the first check
  b[0] = 1;
  EXPECT_EQ(decode(b, sizeof(b), out), DecodeError::BadMgmtClass);
  b[1] = 7;
  EXPECT_EQ(decode(b, sizeof(b), out), DecodeError::BadClassVersion);
  b[2] = 2;
  EXPECT_EQ(decode(b, sizeof(b), out), DecodeError::BadMethod);
  b[3] = 3;
  EXPECT_EQ(decode(b, sizeof(b), out), DecodeError::WrongAttribute);
  b[17] = 0x14;
  EXPECT_EQ(decode(b, sizeof(b), out), DecodeError::Ok);
  EXPECT_STREQ(decode_error_name(DecodeError::Ok), "Ok");
  EXPECT_STREQ(decode_error_name(DecodeError::TooShort), "TooShort");
  EXPECT_STREQ(decode_error_name(DecodeError::WrongAttribute), "WrongAttribute");
  EXPECT_STREQ(decode_error_name(static_cast<DecodeError>(99)), "?");
}

// ------------------------------------------------------------------ names

TEST(IbMad, Names) {
  const std::pair<uint16_t, const char*> attrs[] = {{0x0001, "ClassPortInfo"},
                                                    {0x0010, "REQ"},
                                                    {0x0011, "MRA"},
                                                    {0x0012, "REJ"},
                                                    {0x0013, "REP"},
                                                    {0x0014, "RTU"},
                                                    {0x0015, "DREQ"},
                                                    {0x0016, "DREP"},
                                                    {0x0017, "SIDR_REQ"},
                                                    {0x0018, "SIDR_REP"},
                                                    {0x0019, "LAP"},
                                                    {0x001a, "APR"},
                                                    {0x0000, "?"},
                                                    {0x001b, "?"},
                                                    {0xffff, "?"}};
  for (const auto& a : attrs) EXPECT_STREQ(attr_id_name(static_cast<AttrId>(a.first)), a.second) << a.first;
  // REJ reasons: IBTA 12.6.7 numbering (Linux ib_cm.h and OFED ib_types.h agree).
  EXPECT_EQ(static_cast<int>(RejReason::NoQp), 1);
  EXPECT_EQ(static_cast<int>(RejReason::Timeout), 4);
  EXPECT_EQ(static_cast<int>(RejReason::InvalidServiceId), 8);
  EXPECT_EQ(static_cast<int>(RejReason::StaleConnection), 10);
  EXPECT_EQ(static_cast<int>(RejReason::ConsumerReject), 28);
  EXPECT_EQ(static_cast<int>(RejReason::InvalidClassVersion), 31);
  EXPECT_EQ(static_cast<int>(RejReason::InvalidAltFlowLabel), 33);
  EXPECT_STREQ(rej_reason_name(8), "invalid service ID");
  EXPECT_STREQ(rej_reason_name(28), "consumer reject");
  EXPECT_STREQ(rej_reason_name(31), "invalid class version");
  EXPECT_STREQ(rej_reason_name(1), "no QP available");
  EXPECT_STREQ(rej_reason_name(33), "invalid alternate flow label");
  for (uint16_t r : {0, 34, 36, 1000, 0xffff}) EXPECT_STREQ(rej_reason_name(r), "?") << r;
  for (uint16_t r = 1; r <= 33; ++r) EXPECT_STRNE(rej_reason_name(r), "?") << r;
  EXPECT_EQ(static_cast<int>(SidrStatus::Redirect), 4);
  EXPECT_EQ(static_cast<int>(SidrStatus::UnsupportedClassVersion), 5);
  EXPECT_STREQ(sidr_status_name(0), "valid");
  EXPECT_STREQ(sidr_status_name(3), "no QP available");
  EXPECT_STREQ(sidr_status_name(6), "?");
  EXPECT_EQ(static_cast<int>(MraedMessage::Lap), 2);
  EXPECT_EQ(static_cast<int>(RejectedMessage::Other), 2);
}

// ------------------------------------------------------------------ describe

std::string describe_str(const uint8_t* p, size_t len) {
  char buf[256];
  const size_t n = describe(p, len, buf, sizeof(buf));
  EXPECT_EQ(n, std::strlen(buf));
  return buf;
}

TEST(IbMad, DescribeConnectionMessages) {
  uint8_t mad[kMadSize];
  Req r;
  r.local_comm_id = 0x12345678;
  r.service_id = 0x0000000001060000ull;
  r.local_qpn = 0x11;
  r.starting_psn = 0x1234;
  encode(r, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM REQ comm 0x12345678 service 0x0000000001060000 QPN 0x000011 PSN 0x001234");
  Rep p;
  p.local_comm_id = 2;
  p.remote_comm_id = 0x12345678;
  p.local_qpn = 0x12;
  p.starting_psn = 0x777;
  encode(p, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM REP comm 0x00000002 remote comm 0x12345678 QPN 0x000012 PSN 0x000777");
  Rej j;
  j.local_comm_id = 2;
  j.remote_comm_id = 0x12345678;
  j.reason = 8;
  encode(j, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM REJ comm 0x00000002 remote comm 0x12345678 of REQ reason 8 (invalid service ID)");
  j.message_rejected = 2;
  j.reason = 4000;
  encode(j, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM REJ comm 0x00000002 remote comm 0x12345678 of other reason 4000 (?)");
  Mra m;
  m.local_comm_id = 3;
  m.remote_comm_id = 4;
  m.message_mraed = 1;
  m.service_timeout = 20;
  encode(m, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM MRA comm 0x00000003 remote comm 0x00000004 for REP service timeout 20");
  Rtu u;
  u.local_comm_id = 5;
  u.remote_comm_id = 6;
  encode(u, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "CM RTU comm 0x00000005 remote comm 0x00000006");
}

TEST(IbMad, DescribeTeardownAndSidr) {
  uint8_t mad[kMadSize];
  Dreq q;
  q.local_comm_id = 7;
  q.remote_comm_id = 8;
  q.remote_qpn_eecn = 0xabcdef;
  encode(q, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM DREQ comm 0x00000007 remote comm 0x00000008 remote QPN 0xabcdef");
  Drep d;
  d.local_comm_id = 8;
  d.remote_comm_id = 7;
  encode(d, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "CM DREP comm 0x00000008 remote comm 0x00000007");
  SidrReq s;
  s.request_id = 9;
  s.service_id = 0x0000000001110000ull;
  s.partition_key = 0xffff;
  encode(s, 1, mad);
  EXPECT_EQ(describe_str(mad, sizeof(mad)),
            "CM SIDR_REQ request 0x00000009 service 0x0000000001110000 P_Key 0xffff");
  SidrRep t;
  t.request_id = 9;
  t.status = 1;
  t.qpn = 0x42;
  t.qkey = 0x11111111;
  encode(t, 1, mad);
  EXPECT_EQ(
      describe_str(mad, sizeof(mad)),
      "CM SIDR_REP request 0x00000009 status 1 (service ID not supported) QPN 0x000042 Q_Key 0x11111111");
}

TEST(IbMad, DescribeOtherMads) {
  uint8_t mad[kMadSize];
  encode(Rtu{}, 1, mad);
  mad[3] = 0x81;
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "CM RTU malformed (BadMethod)");
  EXPECT_EQ(describe_str(mad, 100), "CM RTU malformed (TooShort)");
  mad[3] = 0x03;
  mad[17] = 0x19;
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "CM LAP attr 0x0019 method 0x03");
  mad[17] = 0x01;
  mad[3] = kMethodGet;
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "CM ClassPortInfo attr 0x0001 method 0x01");
  mad[17] = 0x77;
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "CM ? attr 0x0077 method 0x01");
  mad[1] = 0x03;  // SA
  mad[17] = 0x35;
  EXPECT_EQ(describe_str(mad, sizeof(mad)), "MAD class 0x03 method 0x01 attr 0x0035");
  EXPECT_EQ(describe_str(mad, 23), "MAD truncated (23 bytes)");
  EXPECT_EQ(describe_str(nullptr, 0), "MAD truncated (0 bytes)");
}

TEST(IbMad, DescribeNeverOverflows) {
  uint8_t mad[kMadSize];
  Req r;
  encode(r, 1, mad);
  const std::string full = describe_str(mad, sizeof(mad));
  for (size_t n = 1; n <= full.size() + 2; ++n) {
    char buf[128];
    std::memset(buf, 'X', sizeof(buf));
    const size_t w = describe(mad, sizeof(mad), buf, n);
    EXPECT_EQ(w, std::min(n - 1, full.size())) << n;
    EXPECT_EQ(buf[w], '\0') << n;
    EXPECT_EQ(std::string(buf, w), full.substr(0, w));
    for (size_t k = n; k < sizeof(buf); ++k) ASSERT_EQ(buf[k], 'X') << "wrote past " << n;
  }
  EXPECT_EQ(describe(mad, sizeof(mad), nullptr, 0), 0u);
  char one = 'X';
  EXPECT_EQ(describe(mad, sizeof(mad), &one, 1), 0u);
  EXPECT_EQ(one, '\0');
}

// ------------------------------------------------------------------ a CM with no state

TEST(IbMad, AnswerWithoutStateRejectsReqAsNoListener) {
  Req req;
  req.local_comm_id = 0x1234abcd;
  req.service_id = 0x0000000001060000ull;
  req.local_qpn = 0x11;
  uint8_t in[kMadSize], out[kMadSize];
  encode(req, 0x77, in);
  ASSERT_TRUE(answer_without_state(in, kMadSize, out));
  CommonHeader h;
  ASSERT_TRUE(peek(out, kMadSize, h));
  EXPECT_EQ(h.attribute_id, uint16_t(AttrId::Rej));
  EXPECT_EQ(h.transaction_id, 0x77u);  // echoed, so the requester matches it
  Rej rej;
  ASSERT_EQ(decode(out, kMadSize, rej), DecodeError::Ok);
  EXPECT_EQ(rej.remote_comm_id, 0x1234abcdu);
  EXPECT_EQ(rej.local_comm_id, 0u);
  EXPECT_EQ(rej.message_rejected, uint8_t(RejectedMessage::Req));
  EXPECT_EQ(rej.reason, uint16_t(RejReason::InvalidServiceId));  // 8, as Linux cm.c sends
}

TEST(IbMad, AnswerWithoutStateRefusesSidrAndAnswersDreq) {
  SidrReq sreq;
  sreq.request_id = 0x5555;
  sreq.service_id = 0x0000000001110000ull;
  uint8_t in[kMadSize], out[kMadSize];
  encode(sreq, 9, in);
  ASSERT_TRUE(answer_without_state(in, kMadSize, out));
  SidrRep srep;
  ASSERT_EQ(decode(out, kMadSize, srep), DecodeError::Ok);
  EXPECT_EQ(srep.request_id, 0x5555u);
  EXPECT_EQ(srep.service_id, sreq.service_id);
  EXPECT_EQ(srep.status, uint8_t(SidrStatus::ServiceIdNotSupported));

  Dreq dreq;
  dreq.local_comm_id = 0x42;
  dreq.remote_comm_id = 0x43;
  encode(dreq, 10, in);
  ASSERT_TRUE(answer_without_state(in, kMadSize, out));
  Drep drep;
  ASSERT_EQ(decode(out, kMadSize, drep), DecodeError::Ok);
  EXPECT_EQ(drep.remote_comm_id, 0x42u);
  EXPECT_EQ(drep.local_comm_id, 0u);
}

TEST(IbMad, AnswerWithoutStateIgnoresEverythingElse) {
  uint8_t in[kMadSize], out[kMadSize];
  Rtu rtu;
  encode(rtu, 1, in);
  EXPECT_FALSE(answer_without_state(in, kMadSize, out));
  Rep rep;
  encode(rep, 1, in);
  EXPECT_FALSE(answer_without_state(in, kMadSize, out));
  Rej rej;
  encode(rej, 1, in);
  EXPECT_FALSE(answer_without_state(in, kMadSize, out));  // never answer an answer
  Req req;
  encode(req, 1, in);
  EXPECT_FALSE(answer_without_state(in, 100, out));  // truncated
  in[1] = 0x03;                                      // another management class
  EXPECT_FALSE(answer_without_state(in, kMadSize, out));
}

}  // namespace
}  // namespace hcasim::wire::mad
