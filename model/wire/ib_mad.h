// SPDX-License-Identifier: Apache-2.0
/**
 * @file ib_mad.h
 * @brief InfiniBand Communication Manager (CM) MADs: the wire format of connection management.
 *
 * The CM (IBTA vol. 1 chapter 12) sets up and tears down connections by exchanging Management
 * Datagrams (MADs, IBTA vol. 1 chapter 13.4) between the General Services Interface QPs (QP1)
 * of the two ports. Over RoCEv2 each MAD is the whole payload of one UD SEND_ONLY packet to
 * destination QP 1, whose DETH carries the GSI Q_Key (kGsiQkey) and source QP 1.
 *
 * Every MAD is exactly 256 bytes: a 24-byte common header (CommonHeader, IBTA 13.4.2) and 232
 * bytes of class data. For the CM class the attribute ID names the message and the data holds its
 * fields. This library encodes and decodes the messages a connection needs:
 *
 * | message  | attribute | IBTA vol. 1 section | struct  |
 * | -------- | --------- | ------------------- | ------- |
 * | REQ      | 0x0010    | 12.6.5              | Req     |
 * | MRA      | 0x0011    | 12.6.6              | Mra     |
 * | REJ      | 0x0012    | 12.6.7              | Rej     |
 * | REP      | 0x0013    | 12.6.8              | Rep     |
 * | RTU      | 0x0014    | 12.6.9              | Rtu     |
 * | DREQ     | 0x0015    | 12.6.10             | Dreq    |
 * | DREP     | 0x0016    | 12.6.11             | Drep    |
 * | SIDR_REQ | 0x0017    | 12.11.1             | SidrReq |
 * | SIDR_REP | 0x0018    | 12.11.2             | SidrRep |
 *
 * LAP and APR (loading an alternate path) and ClassPortInfo are named (AttrId, describe()) but
 * have no struct and are not decoded: the simulator does no automatic path migration.
 *
 * Layout. Each field sits at the byte and bit its IBTA table gives (release 1.4, which adds the
 * Enhanced Connection Establishment vendor IDs and REQ's SAP-supported bit to 1.2's fields);
 * reserved bits are written as 0 and ignored on decode. Multi-byte fields are big-endian. The
 * decoded structs are plain host-order values, one member per field, so a caller never touches
 * a bit mask; a value wider than its field (a 25-bit QPN) is truncated to the field on encode.
 *
 * Private data is a fixed array of the message's full private-data size: the CM always carries
 * all of it, so a shorter private data from a consumer is zero-padded (what librdmacm does).
 *
 * Nothing here allocates; decode() reads only the bytes it is given and leaves its output
 * untouched when it fails, describe() writes at most the buffer it is given.
 */
#pragma once

#include <cstddef>
#include <cstdint>

/// InfiniBand Management Datagrams of the Communication Manager (see ib_mad.h).
namespace hcasim::wire::mad {

// ------------------------------------------------------------------ constants

constexpr size_t kMadSize = 256;                           ///< every MAD on QP1 is exactly this long
constexpr size_t kMadHeaderSize = 24;                      ///< the common MAD header (IBTA 13.4.2)
constexpr size_t kCmDataSize = kMadSize - kMadHeaderSize;  ///< a CM message's fields, after the header
static_assert(kCmDataSize == 232, "a CM message has 232 bytes of data");

constexpr uint8_t kBaseVersion = 1;     ///< MAD base version of every IBTA MAD
constexpr uint8_t kMgmtClassCm = 0x07;  ///< management class of the Communication Manager
constexpr uint8_t kCmClassVersion = 2;  ///< CM class version since IBTA 1.2 (what Linux sends)

constexpr uint8_t kMethodGet = 0x01;          ///< Get(): read an attribute (ClassPortInfo)
constexpr uint8_t kMethodSet = 0x02;          ///< Set(): write an attribute
constexpr uint8_t kMethodSend = 0x03;         ///< Send(): every CM message uses it
constexpr uint8_t kMethodGetResp = 0x81;      ///< GetResp(): the answer to a Get()
constexpr uint8_t kMethodResponseBit = 0x80;  ///< the R bit of the method byte: a response

constexpr uint32_t kGsiQkey = 0x80010000;  ///< the well-known Q_Key of QP1 (GSI)
constexpr uint32_t kGsiQpn = 1;            ///< the GSI QP number: where CM MADs are sent

constexpr size_t kGidSize = 16;                  ///< a port GID in REQ's paths
constexpr size_t kReqPrivateDataSize = 92;       ///< REQ private data (IBTA 12.6.5)
constexpr size_t kMraPrivateDataSize = 222;      ///< MRA private data (IBTA 12.6.6)
constexpr size_t kRejAriSize = 72;               ///< REJ additional reject information (ARI)
constexpr size_t kRejPrivateDataSize = 148;      ///< REJ private data (IBTA 12.6.7)
constexpr size_t kRepPrivateDataSize = 196;      ///< REP private data (IBTA 12.6.8)
constexpr size_t kRtuPrivateDataSize = 224;      ///< RTU private data (IBTA 12.6.9)
constexpr size_t kDreqPrivateDataSize = 220;     ///< DREQ private data (IBTA 12.6.10)
constexpr size_t kDrepPrivateDataSize = 224;     ///< DREP private data (IBTA 12.6.11)
constexpr size_t kSidrReqPrivateDataSize = 216;  ///< SIDR_REQ private data (IBTA 12.11.1)
constexpr size_t kSidrRepInfoSize = 72;          ///< SIDR_REP additional information (ClassPortInfo)
constexpr size_t kSidrRepPrivateDataSize = 136;  ///< SIDR_REP private data (IBTA 12.11.2)

// ------------------------------------------------------------------ names

/** @brief CM attribute IDs (IBTA vol. 1 chapter 12): which message a CM MAD carries. */
enum class AttrId : uint16_t {
  ClassPortInfo = 0x0001,  ///< the class's port information (Get/GetResp, not Send)
  Req = 0x0010,            ///< connection request
  Mra = 0x0011,            ///< message receipt acknowledgement ("wait, I am working on it")
  Rej = 0x0012,            ///< reject
  Rep = 0x0013,            ///< reply to a REQ
  Rtu = 0x0014,            ///< ready to use: the active side's answer to a REP
  Dreq = 0x0015,           ///< disconnection request
  Drep = 0x0016,           ///< reply to a DREQ
  SidrReq = 0x0017,        ///< service ID resolution request (UD services)
  SidrRep = 0x0018,        ///< service ID resolution reply
  Lap = 0x0019,            ///< load alternate path (not decoded here)
  Apr = 0x001A,            ///< alternate path response (not decoded here)
};

/** @brief Short name of an attribute ("REQ", "REP", "SIDR_REQ", "ClassPortInfo"...); "?" otherwise. */
const char* attr_id_name(AttrId id);

/// REQ's transport service type (2 bits): RC, UC, RD, or 3 = see Req::extended_transport_type.
constexpr uint8_t kTransportRc = 0;
constexpr uint8_t kTransportUc = 1;           ///< Unreliable Connection
constexpr uint8_t kTransportRd = 2;           ///< Reliable Datagram
constexpr uint8_t kTransportExtended = 3;     ///< the extended transport type field says which
constexpr uint8_t kExtendedTransportXrc = 1;  ///< extended transport type of XRC (IBTA annex A14)

/** @brief MRA's "message MRAed" (2 bits): which message the sender needs more time for. */
enum class MraedMessage : uint8_t {
  Req = 0,  ///< the REQ (the passive side is slow to answer)
  Rep = 1,  ///< the REP (the active side is slow to send the RTU)
  Lap = 2,  ///< a LAP
};

/** @brief REJ's "message rejected" (2 bits): which message is refused. */
enum class RejectedMessage : uint8_t {
  Req = 0,    ///< the REQ: the connection is refused
  Rep = 1,    ///< the REP: the active side gives up
  Other = 2,  ///< no particular message (e.g. a timeout)
};

/**
 * @brief REJ reason codes (IBTA vol. 1 12.6.7, the REJ reason table). What the additional reject
 * information (Rej::ari) holds depends on the reason.
 */
enum class RejReason : uint16_t {
  NoQp = 1,                        ///< no QP available
  NoEec = 2,                       ///< no EE context available
  NoResources = 3,                 ///< no resources available
  Timeout = 4,                     ///< the sender timed out waiting for the next message
  UnsupportedRequest = 5,          ///< the request is not supported
  InvalidCommId = 6,               ///< unknown communication ID
  InvalidCommInstance = 7,         ///< communication ID of an older instance
  InvalidServiceId = 8,            ///< nobody listens on the service ID
  InvalidTransportType = 9,        ///< transport service type not supported
  StaleConnection = 10,            ///< the QP/EEC is still connected elsewhere
  RdcNotExist = 11,                ///< the reliable datagram domain does not exist
  InvalidGid = 12,                 ///< primary remote port GID rejected
  InvalidLid = 13,                 ///< primary remote port LID rejected
  InvalidSl = 14,                  ///< primary SL rejected
  InvalidTrafficClass = 15,        ///< primary traffic class rejected
  InvalidHopLimit = 16,            ///< primary hop limit rejected
  InvalidPacketRate = 17,          ///< primary packet rate rejected
  InvalidAltGid = 18,              ///< alternate remote port GID rejected
  InvalidAltLid = 19,              ///< alternate remote port LID rejected
  InvalidAltSl = 20,               ///< alternate SL rejected
  InvalidAltTrafficClass = 21,     ///< alternate traffic class rejected
  InvalidAltHopLimit = 22,         ///< alternate hop limit rejected
  InvalidAltPacketRate = 23,       ///< alternate packet rate rejected
  PortCmRedirect = 24,             ///< try another port and CM
  PortRedirect = 25,               ///< try another port
  InvalidMtu = 26,                 ///< path MTU not supported
  InsufficientRespResources = 27,  ///< too many RDMA READ / atomic resources asked for
  ConsumerReject = 28,             ///< the consumer (application) refused; librdmacm's rdma_reject()
  InvalidRnrRetry = 29,            ///< RNR retry count rejected
  DuplicateLocalCommId = 30,       ///< the local communication ID is already in use
  InvalidClassVersion = 31,        ///< CM class version not supported
  InvalidFlowLabel = 32,           ///< primary flow label rejected
  InvalidAltFlowLabel = 33,        ///< alternate flow label rejected
  VendorOptionNotSupported = 35,   ///< ECE vendor options refused (IBTA 1.4 / Linux ECE)
};

/** @brief Readable name of a REJ reason ("invalid service ID", "consumer reject"...); "?" otherwise. */
const char* rej_reason_name(uint16_t reason);

/** @brief SIDR_REP status (IBTA vol. 1 12.11.2). */
enum class SidrStatus : uint8_t {
  Valid = 0,                    ///< the QPN and Q_Key are valid
  ServiceIdNotSupported = 1,    ///< nobody serves the service ID
  Rejected = 2,                 ///< the service provider refused
  NoQp = 3,                     ///< no QP available
  Redirect = 4,                 ///< ask elsewhere (additional information: ClassPortInfo)
  UnsupportedClassVersion = 5,  ///< CM class version not supported
};

/** @brief Readable name of a SIDR_REP status ("valid", "no QP"...); "?" otherwise. */
const char* sidr_status_name(uint8_t status);

// ------------------------------------------------------------------ common header

/** @brief The common MAD header (IBTA vol. 1 13.4.2), 24 bytes; host order. */
struct CommonHeader {
  uint8_t base_version = kBaseVersion;      ///< byte 0
  uint8_t mgmt_class = kMgmtClassCm;        ///< byte 1
  uint8_t class_version = kCmClassVersion;  ///< byte 2
  /// Byte 3: the R bit (kMethodResponseBit, set in responses) and the 7-bit method, as one byte
  /// so the kMethod* constants (kMethodGetResp = 0x81) compare directly.
  uint8_t method = kMethodSend;
  uint16_t status = 0;              ///< bytes 4-5: 0 in requests and in every CM message
  uint16_t class_specific = 0;      ///< bytes 6-7: unused by the CM
  uint64_t transaction_id = 0;      ///< bytes 8-15: matches a response (or a REP) to its request
  uint16_t attribute_id = 0;        ///< bytes 16-17: an AttrId for the CM class
  uint32_t attribute_modifier = 0;  ///< bytes 20-23 (18-19 are reserved): 0 in CM messages
};

/** @brief Equal in every field. */
bool operator==(const CommonHeader& a, const CommonHeader& b);
/** @brief Differs in some field. */
inline bool operator!=(const CommonHeader& a, const CommonHeader& b) { return !(a == b); }

/** @brief The R bit of a method byte: the MAD answers a request (GetResp...). */
constexpr bool is_response(uint8_t method) { return (method & kMethodResponseBit) != 0; }

/** @brief Writes the 24-byte header (reserved bytes 18-19 zero). */
void encode_header(const CommonHeader& h, uint8_t out[kMadHeaderSize]);

/**
 * @brief Reads the common header of any MAD, whatever its class or version, so a caller can
 * dispatch on mgmt_class and attribute_id. @return false (and @p h untouched) if @p len < 24.
 */
bool peek(const uint8_t* p, size_t len, CommonHeader& h);

/** @brief Why decode() refused a MAD; Ok is 0. */
enum class DecodeError : uint8_t {
  Ok = 0,           ///< decoded
  TooShort,         ///< fewer than kMadSize bytes
  BadBaseVersion,   ///< base version is not kBaseVersion
  BadMgmtClass,     ///< not the CM class (kMgmtClassCm)
  BadClassVersion,  ///< CM class version is not kCmClassVersion
  BadMethod,        ///< not Send(): CM messages are never Get/Set or responses
  WrongAttribute,   ///< a CM message, but another one than asked for
};

/** @brief Stable name of a DecodeError ("Ok", "TooShort", "WrongAttribute"...). */
const char* decode_error_name(DecodeError e);

/**
 * @brief Checks that @p p holds a whole CM message @p attr: length, base version, class, class
 * version, method Send() and attribute ID, in that order (the first failure is returned).
 */
DecodeError check_cm(const uint8_t* p, size_t len, AttrId attr);

// ------------------------------------------------------------------ messages

/** @brief One path of a REQ (primary or alternate): IBTA 12.6.5, REQ bytes 52-95 / 96-139. */
struct PathInfo {
  uint16_t local_lid = 0;             ///< local port LID
  uint16_t remote_lid = 0;            ///< remote port LID
  uint8_t local_gid[kGidSize] = {};   ///< local port GID (RoCEv2: the source IP address)
  uint8_t remote_gid[kGidSize] = {};  ///< remote port GID (RoCEv2: the destination IP address)
  uint32_t flow_label = 0;            ///< 20 bits
  uint8_t packet_rate = 0;            ///< 6 bits, IB rate enum
  uint8_t traffic_class = 0;          ///< 8 bits
  uint8_t hop_limit = 0;              ///< 8 bits
  uint8_t sl = 0;                     ///< service level, 4 bits
  bool subnet_local = false;          ///< 1 bit: the remote port is on the local subnet
  uint8_t local_ack_timeout = 0;      ///< 5 bits: 4.096 us * 2^value
};

/** @brief Equal in every field. */
bool operator==(const PathInfo& a, const PathInfo& b);
/** @brief Differs in some field. */
inline bool operator!=(const PathInfo& a, const PathInfo& b) { return !(a == b); }

/** @brief REQ, connection request (IBTA vol. 1 12.6.5): the active side's offer. */
struct Req {
  static constexpr AttrId kAttrId = AttrId::Req;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;       ///< the sender's connection handle
  uint32_t vendor_id = 0;           ///< 24 bits, ECE vendor ID (IBTA 1.4; 0 without ECE)
  uint64_t service_id = 0;          ///< what to connect to (RDMA CM: 0x000000000106PPPP for TCP port PPPP)
  uint64_t local_ca_guid = 0;       ///< the sender's node GUID
  uint32_t local_qkey = 0;          ///< RD only
  uint32_t local_qpn = 0;           ///< 24 bits: the sender's QP
  uint8_t responder_resources = 0;  ///< RDMA READ/atomics the sender accepts
  uint32_t local_eecn = 0;          ///< 24 bits, RD only
  uint8_t initiator_depth = 0;      ///< RDMA READ/atomics the sender issues at once
  uint32_t remote_eecn = 0;         ///< 24 bits, RD only
  uint8_t remote_cm_response_timeout = 0;  ///< 5 bits: how long the receiver may take to answer this REQ
  uint8_t transport_service_type = 0;      ///< 2 bits: kTransportRc, kTransportUc...
  bool end_to_end_flow_control = false;    ///< 1 bit
  uint32_t starting_psn = 0;               ///< 24 bits: the sender's first send PSN
  uint8_t local_cm_response_timeout = 0;   ///< 5 bits: how long the sender takes to answer (REP to RTU)
  uint8_t retry_count = 0;                 ///< 3 bits: transport retries (ibv_qp_attr::retry_cnt)
  uint16_t partition_key = 0;              ///< the P_Key of the connection
  uint8_t path_mtu = 0;                    ///< 4 bits: IB MTU enum (1 = 256 ... 5 = 4096)
  bool rdc_exists = false;                 ///< 1 bit, RD only
  uint8_t rnr_retry_count = 0;             ///< 3 bits (7 = infinite)
  uint8_t max_cm_retries = 0;              ///< 4 bits: REQ resends before giving up
  bool srq = false;                        ///< 1 bit: the sender's QP uses an SRQ
  uint8_t extended_transport_type = 0;     ///< 3 bits, when transport_service_type is 3
  PathInfo primary;                        ///< primary path, REQ bytes 52-95
  PathInfo alternate;                      ///< alternate path, REQ bytes 96-139 (all 0: none)
  bool sap_supported = false;              ///< 1 bit after the alternate ACK timeout (IBTA 1.4)
  uint8_t private_data[kReqPrivateDataSize] = {};  ///< consumer data (RDMA CM: its IP header)
};

/** @brief Whether @p r asks for an XRC connection (transport type 3, extended type 1). */
inline bool is_xrc(const Req& r) {
  return r.transport_service_type == kTransportExtended && r.extended_transport_type == kExtendedTransportXrc;
}

/** @brief MRA, message receipt acknowledgement (IBTA vol. 1 12.6.6). */
struct Mra {
  static constexpr AttrId kAttrId = AttrId::Mra;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;                      ///< the sender's connection handle
  uint32_t remote_comm_id = 0;                     ///< the receiver's connection handle
  uint8_t message_mraed = 0;                       ///< 2 bits, an MraedMessage
  uint8_t service_timeout = 0;                     ///< 5 bits: the extra time asked for
  uint8_t private_data[kMraPrivateDataSize] = {};  ///< consumer data
};

/** @brief REJ, reject (IBTA vol. 1 12.6.7). */
struct Rej {
  static constexpr AttrId kAttrId = AttrId::Rej;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;                      ///< the sender's connection handle
  uint32_t remote_comm_id = 0;                     ///< the receiver's one (0 if unknown)
  uint8_t message_rejected = 0;                    ///< 2 bits, a RejectedMessage
  uint8_t reject_info_length = 0;                  ///< 7 bits: valid bytes of ari
  uint16_t reason = 0;                             ///< a RejReason
  uint8_t ari[kRejAriSize] = {};                   ///< additional reject information
  uint8_t private_data[kRejPrivateDataSize] = {};  ///< consumer data
};

/** @brief REP, reply (IBTA vol. 1 12.6.8): the passive side accepts. */
struct Rep {
  static constexpr AttrId kAttrId = AttrId::Rep;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;                      ///< the sender's connection handle
  uint32_t remote_comm_id = 0;                     ///< the REQ's local_comm_id
  uint32_t local_qkey = 0;                         ///< RD only
  uint32_t local_qpn = 0;                          ///< 24 bits: the sender's QP
  uint32_t vendor_id = 0;                          ///< 24 bits, ECE vendor ID, split over bytes 15, 19, 23
  uint32_t local_eecn = 0;                         ///< 24 bits (XRC: the sender's XRC TGT QP)
  uint32_t starting_psn = 0;                       ///< 24 bits: the sender's first send PSN
  uint8_t responder_resources = 0;                 ///< RDMA READ/atomics the sender accepts
  uint8_t initiator_depth = 0;                     ///< RDMA READ/atomics the sender issues
  uint8_t target_ack_delay = 0;                    ///< 5 bits
  uint8_t failover_accepted = 0;                   ///< 2 bits: the answer to the REQ's alternate path
  bool end_to_end_flow_control = false;            ///< 1 bit
  uint8_t rnr_retry_count = 0;                     ///< 3 bits
  bool srq = false;                                ///< 1 bit
  uint64_t local_ca_guid = 0;                      ///< the sender's node GUID
  uint8_t private_data[kRepPrivateDataSize] = {};  ///< consumer data
};

/** @brief RTU, ready to use (IBTA vol. 1 12.6.9): the active side's last word. */
struct Rtu {
  static constexpr AttrId kAttrId = AttrId::Rtu;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;                      ///< the sender's connection handle
  uint32_t remote_comm_id = 0;                     ///< the receiver's connection handle
  uint8_t private_data[kRtuPrivateDataSize] = {};  ///< consumer data
};

/** @brief DREQ, disconnection request (IBTA vol. 1 12.6.10). */
struct Dreq {
  static constexpr AttrId kAttrId = AttrId::Dreq;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;                       ///< the sender's connection handle
  uint32_t remote_comm_id = 0;                      ///< the receiver's connection handle
  uint32_t remote_qpn_eecn = 0;                     ///< 24 bits: the receiver's QP (or EEC)
  uint8_t private_data[kDreqPrivateDataSize] = {};  ///< consumer data
};

/** @brief DREP, disconnection reply (IBTA vol. 1 12.6.11). */
struct Drep {
  static constexpr AttrId kAttrId = AttrId::Drep;  ///< the attribute that carries it

  uint32_t local_comm_id = 0;                       ///< the sender's connection handle
  uint32_t remote_comm_id = 0;                      ///< the receiver's connection handle
  uint8_t private_data[kDrepPrivateDataSize] = {};  ///< consumer data
};

/** @brief SIDR_REQ, service ID resolution request (IBTA vol. 1 12.11.1): which UD QP serves it? */
struct SidrReq {
  static constexpr AttrId kAttrId = AttrId::SidrReq;  ///< the attribute that carries it

  uint32_t request_id = 0;                             ///< the sender's handle for the request
  uint16_t partition_key = 0;                          ///< the P_Key to use
  uint64_t service_id = 0;                             ///< the service to resolve
  uint8_t private_data[kSidrReqPrivateDataSize] = {};  ///< consumer data
};

/** @brief SIDR_REP, service ID resolution reply (IBTA vol. 1 12.11.2). */
struct SidrRep {
  static constexpr AttrId kAttrId = AttrId::SidrRep;  ///< the attribute that carries it

  uint32_t request_id = 0;             ///< the SIDR_REQ's request_id
  uint8_t status = 0;                  ///< a SidrStatus
  uint8_t additional_info_length = 0;  ///< valid bytes of additional_info
  uint32_t vendor_id = 0;              ///< 24 bits, ECE vendor ID: bits 23-8 at bytes 6-7, 7-0 at byte 11
  uint32_t qpn = 0;                    ///< 24 bits: the QP serving the service
  uint64_t service_id = 0;             ///< the SIDR_REQ's service ID
  uint32_t qkey = 0;                   ///< the Q_Key of that QP
  uint8_t additional_info[kSidrRepInfoSize] = {};      ///< ClassPortInfo when status is Redirect
  uint8_t private_data[kSidrRepPrivateDataSize] = {};  ///< consumer data
};

// ------------------------------------------------------------------ encode / decode

/**
 * @name Encode
 * Each writes a whole MAD into @p out (kMadSize bytes): the common header (base version 1,
 * class CM, class version 2, method Send(), the message's attribute ID, transaction ID @p tid,
 * status, class-specific and attribute modifier 0), then the message, reserved bits 0.
 */
///@{
void encode(const Req& m, uint64_t tid, uint8_t out[kMadSize]);      ///< writes a REQ
void encode(const Mra& m, uint64_t tid, uint8_t out[kMadSize]);      ///< writes an MRA
void encode(const Rej& m, uint64_t tid, uint8_t out[kMadSize]);      ///< writes a REJ
void encode(const Rep& m, uint64_t tid, uint8_t out[kMadSize]);      ///< writes a REP
void encode(const Rtu& m, uint64_t tid, uint8_t out[kMadSize]);      ///< writes an RTU
void encode(const Dreq& m, uint64_t tid, uint8_t out[kMadSize]);     ///< writes a DREQ
void encode(const Drep& m, uint64_t tid, uint8_t out[kMadSize]);     ///< writes a DREP
void encode(const SidrReq& m, uint64_t tid, uint8_t out[kMadSize]);  ///< writes a SIDR_REQ
void encode(const SidrRep& m, uint64_t tid, uint8_t out[kMadSize]);  ///< writes a SIDR_REP
///@}

/**
 * @name Decode
 * Each checks @p p with check_cm() for its message, then fills @p out from it. Bytes past
 * kMadSize are ignored; on error @p out is left untouched. The transaction ID (which a REP or
 * DREP must echo) is in the header: read it with peek().
 */
///@{
DecodeError decode(const uint8_t* p, size_t len, Req& out);      ///< reads a REQ
DecodeError decode(const uint8_t* p, size_t len, Mra& out);      ///< reads an MRA
DecodeError decode(const uint8_t* p, size_t len, Rej& out);      ///< reads a REJ
DecodeError decode(const uint8_t* p, size_t len, Rep& out);      ///< reads a REP
DecodeError decode(const uint8_t* p, size_t len, Rtu& out);      ///< reads an RTU
DecodeError decode(const uint8_t* p, size_t len, Dreq& out);     ///< reads a DREQ
DecodeError decode(const uint8_t* p, size_t len, Drep& out);     ///< reads a DREP
DecodeError decode(const uint8_t* p, size_t len, SidrReq& out);  ///< reads a SIDR_REQ
DecodeError decode(const uint8_t* p, size_t len, SidrRep& out);  ///< reads a SIDR_REP
///@}

/**
 * @name Equality
 * Field by field, private data and byte arrays included.
 */
///@{
bool operator==(const Req& a, const Req& b);          ///< same REQ
bool operator==(const Mra& a, const Mra& b);          ///< same MRA
bool operator==(const Rej& a, const Rej& b);          ///< same REJ
bool operator==(const Rep& a, const Rep& b);          ///< same REP
bool operator==(const Rtu& a, const Rtu& b);          ///< same RTU
bool operator==(const Dreq& a, const Dreq& b);        ///< same DREQ
bool operator==(const Drep& a, const Drep& b);        ///< same DREP
bool operator==(const SidrReq& a, const SidrReq& b);  ///< same SIDR_REQ
bool operator==(const SidrRep& a, const SidrRep& b);  ///< same SIDR_REP
///@}

/** @brief Differs in some field (any message struct above). */
template <class M, class = decltype(M::kAttrId)>
inline bool operator!=(const M& a, const M& b) {
  return !(a == b);
}

// ------------------------------------------------------------------ a CM with no state

/**
 * @brief The answer a CM gives a message that names nothing it knows, whether or not it has
 * any state at all (a host on which nothing listens, or whose CM no program has started):
 * a REQ gets a REJ with reason 8, "invalid service ID" (IBTA 12.6.7; Linux cm.c sends the same
 * when no listener matches); a SIDR_REQ a SIDR_REP with status 1, "service ID not supported"
 * (IBTA 12.11.2); a DREQ a DREP, since every DREQ is answered even for a connection long gone
 * (IBTA 12.9.6). Each echoes the transaction ID and names the sender's communication or request
 * ID. Other messages, and MADs that do not decode, get no answer.
 * @return true with the answer in @p out (kMadSize bytes), false for no answer.
 */
bool answer_without_state(const uint8_t* p, size_t len, uint8_t out[kMadSize]);

// ------------------------------------------------------------------ traces

/**
 * @brief One line naming the MAD in @p p, for traces, e.g.
 * `CM REQ comm 0x12345678 service 0x0000000001060000 QPN 0x000011 PSN 0x001234`,
 * `CM REP comm 0x00000002 remote comm 0x12345678 QPN 0x000012 PSN 0x000777`,
 * `CM REJ comm 0x00000002 remote comm 0x12345678 of REQ reason 8 (invalid service ID)`.
 * A CM MAD that does not decode is named with its DecodeError (`CM REQ malformed (BadMethod)`),
 * another class by its class, method and attribute (`MAD class 0x03 method 0x01 attr 0x0035`).
 *
 * Writes at most @p n bytes, always NUL-terminated when @p n > 0 (@p buf may be null when
 * @p n is 0), cutting a line that does not fit. No allocation.
 * @return the length of what was written (at most n - 1; 0 when n is 0).
 */
size_t describe(const uint8_t* p, size_t len, char* buf, size_t n);

}  // namespace hcasim::wire::mad
