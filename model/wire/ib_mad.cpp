// SPDX-License-Identifier: Apache-2.0
/**
 * @file ib_mad.cpp
 * @brief CM MAD layouts (IBTA vol. 1 chapter 12) and their encoders, decoders and describer.
 *
 * Each message's layout is written once, as a list of fields in the IBTA tables' own notation
 * (byte offset into the CM data, i.e. after the 24-byte MAD header; bit offset from the most
 * significant bit of that byte; width in bits), and a visitor walks that list to encode, to
 * decode and to compare. The layouts were checked against the Linux kernel's
 * include/rdma/ibta_vol1_c12.h (and its older drivers/infiniband/core/cm_msgs.h), Wireshark's
 * packet-infiniband.c and iPXE's ib_mad.h; static_asserts below prove that no two fields of a
 * message overlap and that each message's private data ends at the end of the MAD.
 */
#include "ib_mad.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hcasim::wire::mad {
namespace {

// ------------------------------------------------------------------ fields

/// A bit field: byte offset into the MAD, bit offset from the byte's MSB, width (1..64 bits).
struct Field {
  uint16_t byte;
  uint8_t bit;
  uint8_t width;
};

/// A byte array (GID, ARI, private data): byte offset into the MAD and length.
struct Bytes {
  uint16_t byte;
  uint16_t len;
};

/// A field in IBTA notation: Byte[Bit] offset into the CM data (after the MAD header), width.
constexpr Field cm(uint16_t byte, uint8_t bit, uint8_t width) {
  return {static_cast<uint16_t>(kMadHeaderSize + byte), bit, width};
}
/// A byte array at a CM data offset.
constexpr Bytes cm_bytes(uint16_t byte, uint16_t len) {
  return {static_cast<uint16_t>(kMadHeaderSize + byte), len};
}

constexpr unsigned span_bytes(Field f) { return (f.bit + f.width + 7u) / 8u; }
constexpr uint64_t low_mask(unsigned width) { return width >= 64 ? ~0ull : (1ull << width) - 1; }

uint64_t get(const uint8_t* mad, Field f) {
  const unsigned n = span_bytes(f);
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v = (v << 8) | mad[f.byte + i];
  return (v >> (n * 8 - f.bit - f.width)) & low_mask(f.width);
}

void put(uint8_t* mad, Field f, uint64_t value) {
  const unsigned n = span_bytes(f);
  const unsigned shift = n * 8 - f.bit - f.width;
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v = (v << 8) | mad[f.byte + i];
  const uint64_t m = low_mask(f.width) << shift;
  v = (v & ~m) | ((value << shift) & m);
  for (unsigned i = n; i-- > 0;) {
    mad[f.byte + i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

// ------------------------------------------------------------------ common header (IBTA 13.4.2)

constexpr Field kBaseVersionField{0, 0, 8};
constexpr Field kMgmtClassField{1, 0, 8};
constexpr Field kClassVersionField{2, 0, 8};
constexpr Field kMethodField{3, 0, 8};
constexpr Field kStatusField{4, 0, 16};
constexpr Field kClassSpecificField{6, 0, 16};
constexpr Field kTransactionIdField{8, 0, 64};
constexpr Field kAttributeIdField{16, 0, 16};
constexpr Field kAttributeModifierField{20, 0, 32};  // bytes 18-19 reserved

// ------------------------------------------------------------------ layouts (IBTA 12.6, 12.11)

// Fields every connected-mode message but REQ and SIDR starts with.
constexpr Field kLocalCommId = cm(0, 0, 32);
constexpr Field kRemoteCommId = cm(4, 0, 32);

// REQ (12.6.5)
constexpr Field kReqVendorId = cm(5, 0, 24);  // ECE; bytes 4-7 were reserved before IBTA 1.4
constexpr Field kReqServiceId = cm(8, 0, 64);
constexpr Field kReqLocalCaGuid = cm(16, 0, 64);
constexpr Field kReqLocalQkey = cm(28, 0, 32);  // bytes 24-27 reserved
constexpr Field kReqLocalQpn = cm(32, 0, 24);
constexpr Field kReqResponderResources = cm(35, 0, 8);
constexpr Field kReqLocalEecn = cm(36, 0, 24);
constexpr Field kReqInitiatorDepth = cm(39, 0, 8);
constexpr Field kReqRemoteEecn = cm(40, 0, 24);
constexpr Field kReqRemoteCmResponseTimeout = cm(43, 0, 5);
constexpr Field kReqTransportServiceType = cm(43, 5, 2);
constexpr Field kReqEndToEndFlowControl = cm(43, 7, 1);
constexpr Field kReqStartingPsn = cm(44, 0, 24);
constexpr Field kReqLocalCmResponseTimeout = cm(47, 0, 5);
constexpr Field kReqRetryCount = cm(47, 5, 3);
constexpr Field kReqPartitionKey = cm(48, 0, 16);
constexpr Field kReqPathMtu = cm(50, 0, 4);
constexpr Field kReqRdcExists = cm(50, 4, 1);
constexpr Field kReqRnrRetryCount = cm(50, 5, 3);
constexpr Field kReqMaxCmRetries = cm(51, 0, 4);
constexpr Field kReqSrq = cm(51, 4, 1);
constexpr Field kReqExtendedTransportType = cm(51, 5, 3);
constexpr Field kReqSapSupported = cm(139, 5, 1);
constexpr Bytes kReqPrivateData = cm_bytes(140, kReqPrivateDataSize);

/// A REQ path: primary at CM byte 52, alternate at 96; 44 bytes each.
struct PathLayout {
  Field local_lid, remote_lid;
  Bytes local_gid, remote_gid;
  Field flow_label, packet_rate, traffic_class, hop_limit, sl, subnet_local, local_ack_timeout;
};
constexpr PathLayout path_at(uint16_t b) {
  return {cm(b, 0, 16),      cm(b + 2, 0, 16), cm_bytes(b + 4, kGidSize), cm_bytes(b + 20, kGidSize),
          cm(b + 36, 0, 20), cm(b + 39, 2, 6), cm(b + 40, 0, 8),          cm(b + 41, 0, 8),
          cm(b + 42, 0, 4),  cm(b + 42, 4, 1), cm(b + 43, 0, 5)};  // b+36: 6 reserved bits after the label
}
constexpr PathLayout kPrimaryPath = path_at(52);
constexpr PathLayout kAlternatePath = path_at(96);

// MRA (12.6.6)
constexpr Field kMraMessageMraed = cm(8, 0, 2);
constexpr Field kMraServiceTimeout = cm(9, 0, 5);
constexpr Bytes kMraPrivateData = cm_bytes(10, kMraPrivateDataSize);

// REJ (12.6.7)
constexpr Field kRejMessageRejected = cm(8, 0, 2);
constexpr Field kRejRejectInfoLength = cm(9, 0, 7);
constexpr Field kRejReason = cm(10, 0, 16);
constexpr Bytes kRejAri = cm_bytes(12, kRejAriSize);
constexpr Bytes kRejPrivateData = cm_bytes(84, kRejPrivateDataSize);

// REP (12.6.8). The ECE vendor ID fills the byte after each 24-bit number: high, middle, low.
constexpr Field kRepLocalQkey = cm(8, 0, 32);
constexpr Field kRepLocalQpn = cm(12, 0, 24);
constexpr Field kRepVendorIdH = cm(15, 0, 8);
constexpr Field kRepLocalEecn = cm(16, 0, 24);
constexpr Field kRepVendorIdM = cm(19, 0, 8);
constexpr Field kRepStartingPsn = cm(20, 0, 24);
constexpr Field kRepVendorIdL = cm(23, 0, 8);
constexpr Field kRepResponderResources = cm(24, 0, 8);
constexpr Field kRepInitiatorDepth = cm(25, 0, 8);
constexpr Field kRepTargetAckDelay = cm(26, 0, 5);
constexpr Field kRepFailoverAccepted = cm(26, 5, 2);
constexpr Field kRepEndToEndFlowControl = cm(26, 7, 1);
constexpr Field kRepRnrRetryCount = cm(27, 0, 3);
constexpr Field kRepSrq = cm(27, 3, 1);
constexpr Field kRepLocalCaGuid = cm(28, 0, 64);
constexpr Bytes kRepPrivateData = cm_bytes(36, kRepPrivateDataSize);

// RTU (12.6.9), DREQ (12.6.10), DREP (12.6.11)
constexpr Bytes kRtuPrivateData = cm_bytes(8, kRtuPrivateDataSize);
constexpr Field kDreqRemoteQpnEecn = cm(8, 0, 24);
constexpr Bytes kDreqPrivateData = cm_bytes(12, kDreqPrivateDataSize);
constexpr Bytes kDrepPrivateData = cm_bytes(8, kDrepPrivateDataSize);

// SIDR_REQ (12.11.1)
constexpr Field kSidrReqRequestId = cm(0, 0, 32);
constexpr Field kSidrReqPartitionKey = cm(4, 0, 16);  // bytes 6-7 reserved
constexpr Field kSidrReqServiceId = cm(8, 0, 64);
constexpr Bytes kSidrReqPrivateData = cm_bytes(16, kSidrReqPrivateDataSize);

// SIDR_REP (12.11.2). ECE vendor ID: bits 23-8 in bytes 6-7, bits 7-0 in the byte after the QPN.
constexpr Field kSidrRepRequestId = cm(0, 0, 32);
constexpr Field kSidrRepStatus = cm(4, 0, 8);
constexpr Field kSidrRepAdditionalInfoLength = cm(5, 0, 8);
constexpr Field kSidrRepVendorIdH = cm(6, 0, 16);
constexpr Field kSidrRepQpn = cm(8, 0, 24);
constexpr Field kSidrRepVendorIdL = cm(11, 0, 8);
constexpr Field kSidrRepServiceId = cm(12, 0, 64);
constexpr Field kSidrRepQkey = cm(20, 0, 32);
constexpr Bytes kSidrRepAdditionalInfo = cm_bytes(24, kSidrRepInfoSize);
constexpr Bytes kSidrRepPrivateData = cm_bytes(96, kSidrRepPrivateDataSize);

// ------------------------------------------------------------------ layout checks

/// A field's bits as [first, first + count) counted from the MAD's first bit.
struct Span {
  unsigned first;
  unsigned count;
};
constexpr bool fits(Field f) { return f.bit < 8 && f.width >= 1 && f.width <= 64 && span_bytes(f) <= 8; }
/// A field that get()/put() cannot handle becomes an empty span, which well_formed() refuses.
constexpr Span sp(Field f) { return fits(f) ? Span{f.byte * 8u + f.bit, f.width} : Span{0, 0}; }
constexpr Span sp(Bytes b) { return {b.byte * 8u, b.len * 8u}; }

/// Every field lies in the CM data, is 1..64 bits within 8 bytes, and no two overlap.
template <size_t N>
constexpr bool well_formed(const Span (&s)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (s[i].count == 0 || s[i].first < kMadHeaderSize * 8 || s[i].first + s[i].count > kMadSize * 8)
      return false;
    for (size_t j = i + 1; j < N; ++j)
      if (s[i].first < s[j].first + s[j].count && s[j].first < s[i].first + s[i].count) return false;
  }
  return true;
}
constexpr bool ends_mad(Bytes b) { return b.byte + b.len == kMadSize; }

constexpr Span kReqSpans[] = {sp(kLocalCommId),
                              sp(kReqVendorId),
                              sp(kReqServiceId),
                              sp(kReqLocalCaGuid),
                              sp(kReqLocalQkey),
                              sp(kReqLocalQpn),
                              sp(kReqResponderResources),
                              sp(kReqLocalEecn),
                              sp(kReqInitiatorDepth),
                              sp(kReqRemoteEecn),
                              sp(kReqRemoteCmResponseTimeout),
                              sp(kReqTransportServiceType),
                              sp(kReqEndToEndFlowControl),
                              sp(kReqStartingPsn),
                              sp(kReqLocalCmResponseTimeout),
                              sp(kReqRetryCount),
                              sp(kReqPartitionKey),
                              sp(kReqPathMtu),
                              sp(kReqRdcExists),
                              sp(kReqRnrRetryCount),
                              sp(kReqMaxCmRetries),
                              sp(kReqSrq),
                              sp(kReqExtendedTransportType),
                              sp(kPrimaryPath.local_lid),
                              sp(kPrimaryPath.remote_lid),
                              sp(kPrimaryPath.local_gid),
                              sp(kPrimaryPath.remote_gid),
                              sp(kPrimaryPath.flow_label),
                              sp(kPrimaryPath.packet_rate),
                              sp(kPrimaryPath.traffic_class),
                              sp(kPrimaryPath.hop_limit),
                              sp(kPrimaryPath.sl),
                              sp(kPrimaryPath.subnet_local),
                              sp(kPrimaryPath.local_ack_timeout),
                              sp(kAlternatePath.local_lid),
                              sp(kAlternatePath.remote_lid),
                              sp(kAlternatePath.local_gid),
                              sp(kAlternatePath.remote_gid),
                              sp(kAlternatePath.flow_label),
                              sp(kAlternatePath.packet_rate),
                              sp(kAlternatePath.traffic_class),
                              sp(kAlternatePath.hop_limit),
                              sp(kAlternatePath.sl),
                              sp(kAlternatePath.subnet_local),
                              sp(kAlternatePath.local_ack_timeout),
                              sp(kReqSapSupported),
                              sp(kReqPrivateData)};
constexpr Span kMraSpans[] = {sp(kLocalCommId), sp(kRemoteCommId), sp(kMraMessageMraed),
                              sp(kMraServiceTimeout), sp(kMraPrivateData)};
constexpr Span kRejSpans[] = {sp(kLocalCommId),         sp(kRemoteCommId), sp(kRejMessageRejected),
                              sp(kRejRejectInfoLength), sp(kRejReason),    sp(kRejAri),
                              sp(kRejPrivateData)};
constexpr Span kRepSpans[] = {
    sp(kLocalCommId),         sp(kRemoteCommId),           sp(kRepLocalQkey),      sp(kRepLocalQpn),
    sp(kRepVendorIdH),        sp(kRepLocalEecn),           sp(kRepVendorIdM),      sp(kRepStartingPsn),
    sp(kRepVendorIdL),        sp(kRepResponderResources),  sp(kRepInitiatorDepth), sp(kRepTargetAckDelay),
    sp(kRepFailoverAccepted), sp(kRepEndToEndFlowControl), sp(kRepRnrRetryCount),  sp(kRepSrq),
    sp(kRepLocalCaGuid),      sp(kRepPrivateData)};
constexpr Span kRtuSpans[] = {sp(kLocalCommId), sp(kRemoteCommId), sp(kRtuPrivateData)};
constexpr Span kDreqSpans[] = {sp(kLocalCommId), sp(kRemoteCommId), sp(kDreqRemoteQpnEecn),
                               sp(kDreqPrivateData)};
constexpr Span kDrepSpans[] = {sp(kLocalCommId), sp(kRemoteCommId), sp(kDrepPrivateData)};
constexpr Span kSidrReqSpans[] = {sp(kSidrReqRequestId), sp(kSidrReqPartitionKey), sp(kSidrReqServiceId),
                                  sp(kSidrReqPrivateData)};
constexpr Span kSidrRepSpans[] = {
    sp(kSidrRepRequestId),  sp(kSidrRepStatus), sp(kSidrRepAdditionalInfoLength),
    sp(kSidrRepVendorIdH),  sp(kSidrRepQpn),    sp(kSidrRepVendorIdL),
    sp(kSidrRepServiceId),  sp(kSidrRepQkey),   sp(kSidrRepAdditionalInfo),
    sp(kSidrRepPrivateData)};

static_assert(well_formed(kReqSpans), "REQ fields overlap or leave the MAD");
static_assert(well_formed(kMraSpans), "MRA fields overlap or leave the MAD");
static_assert(well_formed(kRejSpans), "REJ fields overlap or leave the MAD");
static_assert(well_formed(kRepSpans), "REP fields overlap or leave the MAD");
static_assert(well_formed(kRtuSpans), "RTU fields overlap or leave the MAD");
static_assert(well_formed(kDreqSpans), "DREQ fields overlap or leave the MAD");
static_assert(well_formed(kDrepSpans), "DREP fields overlap or leave the MAD");
static_assert(well_formed(kSidrReqSpans), "SIDR_REQ fields overlap or leave the MAD");
static_assert(well_formed(kSidrRepSpans), "SIDR_REP fields overlap or leave the MAD");
static_assert(ends_mad(kReqPrivateData) && ends_mad(kMraPrivateData) && ends_mad(kRejPrivateData) &&
                  ends_mad(kRepPrivateData) && ends_mad(kRtuPrivateData) && ends_mad(kDreqPrivateData) &&
                  ends_mad(kDrepPrivateData) && ends_mad(kSidrReqPrivateData) &&
                  ends_mad(kSidrRepPrivateData),
              "every CM message's private data runs to the end of the MAD");
static_assert(kRejAri.byte + kRejAri.len == kRejPrivateData.byte, "REJ: ARI then private data");
static_assert(kSidrRepAdditionalInfo.byte + kSidrRepAdditionalInfo.len == kSidrRepPrivateData.byte,
              "SIDR_REP: additional information then private data");
static_assert(fits(kTransactionIdField) && fits(kAttributeModifierField), "header fields fit get()/put()");

/// A number split over several fields, most significant part first (the ECE vendor IDs).
struct Parts {
  Field part[3];
  unsigned n;
};
constexpr Parts kRepVendorId{{kRepVendorIdH, kRepVendorIdM, kRepVendorIdL}, 3};
constexpr Parts kSidrRepVendorId{{kSidrRepVendorIdH, kSidrRepVendorIdL, {}}, 2};

// ------------------------------------------------------------------ visitors

/// Writes visited fields into a MAD.
struct Writer {
  uint8_t* mad;
  template <class T>
  void operator()(Field f, const T& v) {
    put(mad, f, static_cast<uint64_t>(v));
  }
  void parts(const Parts& p, uint32_t v) {
    unsigned shift = 0;
    for (unsigned i = 0; i < p.n; ++i) shift += p.part[i].width;
    for (unsigned i = 0; i < p.n; ++i) {
      shift -= p.part[i].width;
      put(mad, p.part[i], v >> shift);
    }
  }
  template <size_t N>
  void bytes(Bytes b, const uint8_t (&a)[N]) {
    std::memcpy(mad + b.byte, a, N);
  }
};

/// Reads visited fields out of a MAD.
struct Reader {
  const uint8_t* mad;
  template <class T>
  void operator()(Field f, T& v) {
    v = static_cast<T>(get(mad, f));
  }
  void parts(const Parts& p, uint32_t& v) {
    uint64_t acc = 0;
    for (unsigned i = 0; i < p.n; ++i) acc = (acc << p.part[i].width) | get(mad, p.part[i]);
    v = static_cast<uint32_t>(acc);
  }
  template <size_t N>
  void bytes(Bytes b, uint8_t (&a)[N]) {
    std::memcpy(a, mad + b.byte, N);
  }
};

/// Collects a struct's visited values, so two structs compare field by field without allocating.
struct Collector {
  static constexpr size_t kMaxValues = 48;
  static constexpr size_t kMaxArrays = 8;
  uint64_t values[kMaxValues] = {};
  const uint8_t* arrays[kMaxArrays] = {};
  size_t lens[kMaxArrays] = {};
  size_t nv = 0;
  size_t na = 0;
  bool overflow = false;

  template <class T>
  void operator()(Field, const T& v) {
    if (nv < kMaxValues)
      values[nv++] = static_cast<uint64_t>(v);
    else
      overflow = true;
  }
  void parts(const Parts&, uint32_t v) { (*this)(Field{}, v); }
  template <size_t N>
  void bytes(Bytes, const uint8_t (&a)[N]) {
    if (na < kMaxArrays) {
      arrays[na] = a;
      lens[na++] = N;
    } else {
      overflow = true;
    }
  }
  bool same(const Collector& o) const {
    if (overflow || o.overflow || nv != o.nv || na != o.na) return false;
    for (size_t i = 0; i < nv; ++i)
      if (values[i] != o.values[i]) return false;
    for (size_t i = 0; i < na; ++i)
      if (lens[i] != o.lens[i] || std::memcmp(arrays[i], o.arrays[i], lens[i]) != 0) return false;
    return true;
  }
};

// Each layout's size must match its struct's array: the visitors copy N bytes.
static_assert(kReqPrivateData.len == sizeof(Req::private_data) &&
                  kPrimaryPath.local_gid.len == sizeof(PathInfo::local_gid) &&
                  kPrimaryPath.remote_gid.len == sizeof(PathInfo::remote_gid) &&
                  kMraPrivateData.len == sizeof(Mra::private_data) && kRejAri.len == sizeof(Rej::ari) &&
                  kRejPrivateData.len == sizeof(Rej::private_data) &&
                  kRepPrivateData.len == sizeof(Rep::private_data) &&
                  kRtuPrivateData.len == sizeof(Rtu::private_data) &&
                  kDreqPrivateData.len == sizeof(Dreq::private_data) &&
                  kDrepPrivateData.len == sizeof(Drep::private_data) &&
                  kSidrReqPrivateData.len == sizeof(SidrReq::private_data) &&
                  kSidrRepAdditionalInfo.len == sizeof(SidrRep::additional_info) &&
                  kSidrRepPrivateData.len == sizeof(SidrRep::private_data),
              "layout arrays match the structs");

template <class IO, class P>
void visit_path(IO& io, const PathLayout& l, P& p) {
  io(l.local_lid, p.local_lid);
  io(l.remote_lid, p.remote_lid);
  io.bytes(l.local_gid, p.local_gid);
  io.bytes(l.remote_gid, p.remote_gid);
  io(l.flow_label, p.flow_label);
  io(l.packet_rate, p.packet_rate);
  io(l.traffic_class, p.traffic_class);
  io(l.hop_limit, p.hop_limit);
  io(l.sl, p.sl);
  io(l.subnet_local, p.subnet_local);
  io(l.local_ack_timeout, p.local_ack_timeout);
}

/// The fields of message M in wire order: visit(io, m) with m an M (decode) or a const M.
template <class M>
struct Layout;

template <>
struct Layout<Req> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kReqVendorId, m.vendor_id);
    io(kReqServiceId, m.service_id);
    io(kReqLocalCaGuid, m.local_ca_guid);
    io(kReqLocalQkey, m.local_qkey);
    io(kReqLocalQpn, m.local_qpn);
    io(kReqResponderResources, m.responder_resources);
    io(kReqLocalEecn, m.local_eecn);
    io(kReqInitiatorDepth, m.initiator_depth);
    io(kReqRemoteEecn, m.remote_eecn);
    io(kReqRemoteCmResponseTimeout, m.remote_cm_response_timeout);
    io(kReqTransportServiceType, m.transport_service_type);
    io(kReqEndToEndFlowControl, m.end_to_end_flow_control);
    io(kReqStartingPsn, m.starting_psn);
    io(kReqLocalCmResponseTimeout, m.local_cm_response_timeout);
    io(kReqRetryCount, m.retry_count);
    io(kReqPartitionKey, m.partition_key);
    io(kReqPathMtu, m.path_mtu);
    io(kReqRdcExists, m.rdc_exists);
    io(kReqRnrRetryCount, m.rnr_retry_count);
    io(kReqMaxCmRetries, m.max_cm_retries);
    io(kReqSrq, m.srq);
    io(kReqExtendedTransportType, m.extended_transport_type);
    visit_path(io, kPrimaryPath, m.primary);
    visit_path(io, kAlternatePath, m.alternate);
    io(kReqSapSupported, m.sap_supported);
    io.bytes(kReqPrivateData, m.private_data);
  }
};

template <>
struct Layout<Mra> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kRemoteCommId, m.remote_comm_id);
    io(kMraMessageMraed, m.message_mraed);
    io(kMraServiceTimeout, m.service_timeout);
    io.bytes(kMraPrivateData, m.private_data);
  }
};

template <>
struct Layout<Rej> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kRemoteCommId, m.remote_comm_id);
    io(kRejMessageRejected, m.message_rejected);
    io(kRejRejectInfoLength, m.reject_info_length);
    io(kRejReason, m.reason);
    io.bytes(kRejAri, m.ari);
    io.bytes(kRejPrivateData, m.private_data);
  }
};

template <>
struct Layout<Rep> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kRemoteCommId, m.remote_comm_id);
    io(kRepLocalQkey, m.local_qkey);
    io(kRepLocalQpn, m.local_qpn);
    io.parts(kRepVendorId, m.vendor_id);
    io(kRepLocalEecn, m.local_eecn);
    io(kRepStartingPsn, m.starting_psn);
    io(kRepResponderResources, m.responder_resources);
    io(kRepInitiatorDepth, m.initiator_depth);
    io(kRepTargetAckDelay, m.target_ack_delay);
    io(kRepFailoverAccepted, m.failover_accepted);
    io(kRepEndToEndFlowControl, m.end_to_end_flow_control);
    io(kRepRnrRetryCount, m.rnr_retry_count);
    io(kRepSrq, m.srq);
    io(kRepLocalCaGuid, m.local_ca_guid);
    io.bytes(kRepPrivateData, m.private_data);
  }
};

template <>
struct Layout<Rtu> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kRemoteCommId, m.remote_comm_id);
    io.bytes(kRtuPrivateData, m.private_data);
  }
};

template <>
struct Layout<Dreq> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kRemoteCommId, m.remote_comm_id);
    io(kDreqRemoteQpnEecn, m.remote_qpn_eecn);
    io.bytes(kDreqPrivateData, m.private_data);
  }
};

template <>
struct Layout<Drep> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kLocalCommId, m.local_comm_id);
    io(kRemoteCommId, m.remote_comm_id);
    io.bytes(kDrepPrivateData, m.private_data);
  }
};

template <>
struct Layout<SidrReq> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kSidrReqRequestId, m.request_id);
    io(kSidrReqPartitionKey, m.partition_key);
    io(kSidrReqServiceId, m.service_id);
    io.bytes(kSidrReqPrivateData, m.private_data);
  }
};

template <>
struct Layout<SidrRep> {
  template <class IO, class M>
  static void visit(IO& io, M& m) {
    io(kSidrRepRequestId, m.request_id);
    io(kSidrRepStatus, m.status);
    io(kSidrRepAdditionalInfoLength, m.additional_info_length);
    io.parts(kSidrRepVendorId, m.vendor_id);
    io(kSidrRepQpn, m.qpn);
    io(kSidrRepServiceId, m.service_id);
    io(kSidrRepQkey, m.qkey);
    io.bytes(kSidrRepAdditionalInfo, m.additional_info);
    io.bytes(kSidrRepPrivateData, m.private_data);
  }
};

// ------------------------------------------------------------------ generic encode / decode

template <class M>
void encode_message(const M& m, uint64_t tid, uint8_t* out) {
  std::memset(out, 0, kMadSize);
  CommonHeader h;
  h.transaction_id = tid;
  h.attribute_id = static_cast<uint16_t>(M::kAttrId);
  encode_header(h, out);
  Writer w{out};
  Layout<M>::visit(w, m);
}

template <class M>
DecodeError decode_message(const uint8_t* p, size_t len, M& out) {
  const DecodeError e = check_cm(p, len, M::kAttrId);
  if (e != DecodeError::Ok) return e;
  Reader r{p};
  Layout<M>::visit(r, out);
  return DecodeError::Ok;
}

template <class M>
bool equal(const M& a, const M& b) {
  Collector ca, cb;
  Layout<M>::visit(ca, a);
  Layout<M>::visit(cb, b);
  return ca.same(cb);
}

// ------------------------------------------------------------------ describe

/// snprintf into buf[0..n) that returns what it wrote (not what it wanted to); n > 0.
size_t emit(char* buf, size_t n, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
size_t emit(char* buf, size_t n, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int r = std::vsnprintf(buf, n, fmt, ap);
  va_end(ap);
  if (r < 0) {
    buf[0] = '\0';
    return 0;
  }
  return static_cast<size_t>(r) < n ? static_cast<size_t>(r) : n - 1;
}

const char* mraed_name(uint8_t m) {
  static const char* const kNames[] = {"REQ", "REP", "LAP", "?"};
  return kNames[m & 3];
}
const char* rejected_name(uint8_t m) {
  static const char* const kNames[] = {"REQ", "REP", "other", "?"};
  return kNames[m & 3];
}

using ull = unsigned long long;

size_t describe_req(const Req& m, char* buf, size_t n) {
  return emit(buf, n, "CM REQ comm 0x%08x service 0x%016llx QPN 0x%06x PSN 0x%06x", m.local_comm_id,
              static_cast<ull>(m.service_id), m.local_qpn, m.starting_psn);
}
size_t describe_mra(const Mra& m, char* buf, size_t n) {
  return emit(buf, n, "CM MRA comm 0x%08x remote comm 0x%08x for %s service timeout %u", m.local_comm_id,
              m.remote_comm_id, mraed_name(m.message_mraed), m.service_timeout);
}
size_t describe_rej(const Rej& m, char* buf, size_t n) {
  return emit(buf, n, "CM REJ comm 0x%08x remote comm 0x%08x of %s reason %u (%s)", m.local_comm_id,
              m.remote_comm_id, rejected_name(m.message_rejected), m.reason, rej_reason_name(m.reason));
}
size_t describe_rep(const Rep& m, char* buf, size_t n) {
  return emit(buf, n, "CM REP comm 0x%08x remote comm 0x%08x QPN 0x%06x PSN 0x%06x", m.local_comm_id,
              m.remote_comm_id, m.local_qpn, m.starting_psn);
}
size_t describe_rtu(const Rtu& m, char* buf, size_t n) {
  return emit(buf, n, "CM RTU comm 0x%08x remote comm 0x%08x", m.local_comm_id, m.remote_comm_id);
}
size_t describe_dreq(const Dreq& m, char* buf, size_t n) {
  return emit(buf, n, "CM DREQ comm 0x%08x remote comm 0x%08x remote QPN 0x%06x", m.local_comm_id,
              m.remote_comm_id, m.remote_qpn_eecn);
}
size_t describe_drep(const Drep& m, char* buf, size_t n) {
  return emit(buf, n, "CM DREP comm 0x%08x remote comm 0x%08x", m.local_comm_id, m.remote_comm_id);
}
size_t describe_sidr_req(const SidrReq& m, char* buf, size_t n) {
  return emit(buf, n, "CM SIDR_REQ request 0x%08x service 0x%016llx P_Key 0x%04x", m.request_id,
              static_cast<ull>(m.service_id), m.partition_key);
}
size_t describe_sidr_rep(const SidrRep& m, char* buf, size_t n) {
  return emit(buf, n, "CM SIDR_REP request 0x%08x status %u (%s) QPN 0x%06x Q_Key 0x%08x", m.request_id,
              m.status, sidr_status_name(m.status), m.qpn, m.qkey);
}

/// Decodes an M and renders it with @p render, or names the decode error.
template <class M>
size_t describe_as(const uint8_t* p, size_t len, char* buf, size_t n,
                   size_t (*render)(const M&, char*, size_t)) {
  M m;
  const DecodeError e = decode(p, len, m);
  if (e != DecodeError::Ok)
    return emit(buf, n, "CM %s malformed (%s)", attr_id_name(M::kAttrId), decode_error_name(e));
  return render(m, buf, n);
}

}  // namespace

// ------------------------------------------------------------------ names

const char* attr_id_name(AttrId id) {
  switch (id) {
    case AttrId::ClassPortInfo: return "ClassPortInfo";
    case AttrId::Req: return "REQ";
    case AttrId::Mra: return "MRA";
    case AttrId::Rej: return "REJ";
    case AttrId::Rep: return "REP";
    case AttrId::Rtu: return "RTU";
    case AttrId::Dreq: return "DREQ";
    case AttrId::Drep: return "DREP";
    case AttrId::SidrReq: return "SIDR_REQ";
    case AttrId::SidrRep: return "SIDR_REP";
    case AttrId::Lap: return "LAP";
    case AttrId::Apr: return "APR";
  }
  return "?";
}

const char* rej_reason_name(uint16_t reason) {
  static const char* const kNames[] = {
      "?",                                   // 0 is not a reason
      "no QP available",                     // 1
      "no EE context available",             // 2
      "no resources available",              // 3
      "timeout",                             // 4
      "unsupported request",                 // 5
      "invalid communication ID",            // 6
      "invalid communication instance",      // 7
      "invalid service ID",                  // 8
      "invalid transport service type",      // 9
      "stale connection",                    // 10
      "RDC does not exist",                  // 11
      "primary remote port GID rejected",    // 12
      "primary remote port LID rejected",    // 13
      "invalid primary SL",                  // 14
      "invalid primary traffic class",       // 15
      "invalid primary hop limit",           // 16
      "invalid primary packet rate",         // 17
      "alternate remote port GID rejected",  // 18
      "alternate remote port LID rejected",  // 19
      "invalid alternate SL",                // 20
      "invalid alternate traffic class",     // 21
      "invalid alternate hop limit",         // 22
      "invalid alternate packet rate",       // 23
      "port and CM redirection",             // 24
      "port redirection",                    // 25
      "invalid path MTU",                    // 26
      "insufficient responder resources",    // 27
      "consumer reject",                     // 28
      "RNR retry count reject",              // 29
      "duplicate local communication ID",    // 30
      "invalid class version",               // 31
      "invalid primary flow label",          // 32
      "invalid alternate flow label",        // 33
      "?",                                   // 34 is not defined
      "vendor option not supported",         // 35
  };
  return reason < sizeof(kNames) / sizeof(kNames[0]) ? kNames[reason] : "?";
}

const char* sidr_status_name(uint8_t status) {
  switch (static_cast<SidrStatus>(status)) {
    case SidrStatus::Valid: return "valid";
    case SidrStatus::ServiceIdNotSupported: return "service ID not supported";
    case SidrStatus::Rejected: return "rejected by the service provider";
    case SidrStatus::NoQp: return "no QP available";
    case SidrStatus::Redirect: return "redirect";
    case SidrStatus::UnsupportedClassVersion: return "unsupported class version";
  }
  return "?";
}

const char* decode_error_name(DecodeError e) {
  switch (e) {
    case DecodeError::Ok: return "Ok";
    case DecodeError::TooShort: return "TooShort";
    case DecodeError::BadBaseVersion: return "BadBaseVersion";
    case DecodeError::BadMgmtClass: return "BadMgmtClass";
    case DecodeError::BadClassVersion: return "BadClassVersion";
    case DecodeError::BadMethod: return "BadMethod";
    case DecodeError::WrongAttribute: return "WrongAttribute";
  }
  return "?";
}

// ------------------------------------------------------------------ header

bool operator==(const CommonHeader& a, const CommonHeader& b) {
  return a.base_version == b.base_version && a.mgmt_class == b.mgmt_class &&
         a.class_version == b.class_version && a.method == b.method && a.status == b.status &&
         a.class_specific == b.class_specific && a.transaction_id == b.transaction_id &&
         a.attribute_id == b.attribute_id && a.attribute_modifier == b.attribute_modifier;
}

void encode_header(const CommonHeader& h, uint8_t out[kMadHeaderSize]) {
  std::memset(out, 0, kMadHeaderSize);
  put(out, kBaseVersionField, h.base_version);
  put(out, kMgmtClassField, h.mgmt_class);
  put(out, kClassVersionField, h.class_version);
  put(out, kMethodField, h.method);
  put(out, kStatusField, h.status);
  put(out, kClassSpecificField, h.class_specific);
  put(out, kTransactionIdField, h.transaction_id);
  put(out, kAttributeIdField, h.attribute_id);
  put(out, kAttributeModifierField, h.attribute_modifier);
}

bool peek(const uint8_t* p, size_t len, CommonHeader& h) {
  if (p == nullptr || len < kMadHeaderSize) return false;
  h.base_version = static_cast<uint8_t>(get(p, kBaseVersionField));
  h.mgmt_class = static_cast<uint8_t>(get(p, kMgmtClassField));
  h.class_version = static_cast<uint8_t>(get(p, kClassVersionField));
  h.method = static_cast<uint8_t>(get(p, kMethodField));
  h.status = static_cast<uint16_t>(get(p, kStatusField));
  h.class_specific = static_cast<uint16_t>(get(p, kClassSpecificField));
  h.transaction_id = get(p, kTransactionIdField);
  h.attribute_id = static_cast<uint16_t>(get(p, kAttributeIdField));
  h.attribute_modifier = static_cast<uint32_t>(get(p, kAttributeModifierField));
  return true;
}

DecodeError check_cm(const uint8_t* p, size_t len, AttrId attr) {
  CommonHeader h;
  if (len < kMadSize || !peek(p, len, h)) return DecodeError::TooShort;
  if (h.base_version != kBaseVersion) return DecodeError::BadBaseVersion;
  if (h.mgmt_class != kMgmtClassCm) return DecodeError::BadMgmtClass;
  if (h.class_version != kCmClassVersion) return DecodeError::BadClassVersion;
  if (h.method != kMethodSend) return DecodeError::BadMethod;
  if (h.attribute_id != static_cast<uint16_t>(attr)) return DecodeError::WrongAttribute;
  return DecodeError::Ok;
}

// ------------------------------------------------------------------ messages

bool operator==(const PathInfo& a, const PathInfo& b) {
  Collector ca, cb;
  visit_path(ca, kPrimaryPath, a);
  visit_path(cb, kPrimaryPath, b);
  return ca.same(cb);
}

// clang-format off
void encode(const Req& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const Mra& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const Rej& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const Rep& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const Rtu& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const Dreq& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const Drep& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const SidrReq& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }
void encode(const SidrRep& m, uint64_t tid, uint8_t out[kMadSize]) { encode_message(m, tid, out); }

DecodeError decode(const uint8_t* p, size_t len, Req& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, Mra& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, Rej& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, Rep& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, Rtu& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, Dreq& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, Drep& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, SidrReq& out) { return decode_message(p, len, out); }
DecodeError decode(const uint8_t* p, size_t len, SidrRep& out) { return decode_message(p, len, out); }

bool operator==(const Req& a, const Req& b) { return equal(a, b); }
bool operator==(const Mra& a, const Mra& b) { return equal(a, b); }
bool operator==(const Rej& a, const Rej& b) { return equal(a, b); }
bool operator==(const Rep& a, const Rep& b) { return equal(a, b); }
bool operator==(const Rtu& a, const Rtu& b) { return equal(a, b); }
bool operator==(const Dreq& a, const Dreq& b) { return equal(a, b); }
bool operator==(const Drep& a, const Drep& b) { return equal(a, b); }
bool operator==(const SidrReq& a, const SidrReq& b) { return equal(a, b); }
bool operator==(const SidrRep& a, const SidrRep& b) { return equal(a, b); }
// clang-format on

// ------------------------------------------------------------------ a CM with no state

bool answer_without_state(const uint8_t* p, size_t len, uint8_t out[kMadSize]) {
  CommonHeader h;
  if (!peek(p, len, h) || h.mgmt_class != kMgmtClassCm) return false;
  switch (AttrId(h.attribute_id)) {
    case AttrId::Req: {
      Req req;
      if (decode(p, len, req) != DecodeError::Ok) return false;
      Rej rej;
      rej.remote_comm_id = req.local_comm_id;
      rej.message_rejected = uint8_t(RejectedMessage::Req);
      rej.reason = uint16_t(RejReason::InvalidServiceId);
      encode(rej, h.transaction_id, out);
      return true;
    }
    case AttrId::SidrReq: {
      SidrReq req;
      if (decode(p, len, req) != DecodeError::Ok) return false;
      SidrRep rep;
      rep.request_id = req.request_id;
      rep.service_id = req.service_id;
      rep.status = uint8_t(SidrStatus::ServiceIdNotSupported);
      encode(rep, h.transaction_id, out);
      return true;
    }
    case AttrId::Dreq: {
      Dreq dreq;
      if (decode(p, len, dreq) != DecodeError::Ok) return false;
      Drep drep;
      drep.remote_comm_id = dreq.local_comm_id;
      encode(drep, h.transaction_id, out);
      return true;
    }
    default: return false;
  }
}

// ------------------------------------------------------------------ describe

size_t describe(const uint8_t* p, size_t len, char* buf, size_t n) {
  if (buf == nullptr || n == 0) return 0;
  CommonHeader h;
  if (!peek(p, len, h)) return emit(buf, n, "MAD truncated (%zu bytes)", len);
  if (h.mgmt_class != kMgmtClassCm)
    return emit(buf, n, "MAD class 0x%02x method 0x%02x attr 0x%04x", h.mgmt_class, h.method, h.attribute_id);
  switch (static_cast<AttrId>(h.attribute_id)) {
    case AttrId::Req: return describe_as<Req>(p, len, buf, n, describe_req);
    case AttrId::Mra: return describe_as<Mra>(p, len, buf, n, describe_mra);
    case AttrId::Rej: return describe_as<Rej>(p, len, buf, n, describe_rej);
    case AttrId::Rep: return describe_as<Rep>(p, len, buf, n, describe_rep);
    case AttrId::Rtu: return describe_as<Rtu>(p, len, buf, n, describe_rtu);
    case AttrId::Dreq: return describe_as<Dreq>(p, len, buf, n, describe_dreq);
    case AttrId::Drep: return describe_as<Drep>(p, len, buf, n, describe_drep);
    case AttrId::SidrReq: return describe_as<SidrReq>(p, len, buf, n, describe_sidr_req);
    case AttrId::SidrRep: return describe_as<SidrRep>(p, len, buf, n, describe_sidr_rep);
    default:
      return emit(buf, n, "CM %s attr 0x%04x method 0x%02x",
                  attr_id_name(static_cast<AttrId>(h.attribute_id)), h.attribute_id, h.method);
  }
}

}  // namespace hcasim::wire::mad
