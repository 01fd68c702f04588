// SPDX-License-Identifier: Apache-2.0
/**
 * @file hca_hw.h
 * @brief The hardware/software contract of the hcasim HCA.
 *
 * Everything the driver and the model must agree on lives here and only here:
 * send/receive WQE formats, CQE and EQE formats, the UAR doorbell page,
 * doorbell records, buffer-table entries and the command mailboxes that
 * program QPC/CQC/MKey/EQ state.
 *
 * The layouts are modelled on Mellanox mlx5 (public in rdma-core's mlx5dv.h):
 * 64-byte WQE basic blocks made of 16-byte segments, 64-byte CQEs whose last
 * byte carries opcode and owner bit, a doorbell record in host memory plus an
 * MMIO doorbell, and a CQ arm doorbell with a sequence number and a
 * solicited-only command. Multi-byte fields in WQEs, CQEs, EQEs, doorbell
 * records and buffer-table entries are big-endian, as the device sees them;
 * command mailboxes are firmware structures in host byte order.
 *
 * Byte offsets are pinned by static_asserts below and by tests/unit/hw_layout_test.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hcasim::hw {

// ---------------------------------------------------------------- endianness
/** @brief Host to big-endian 16-bit. */
constexpr uint16_t to_be16(uint16_t v) { return __builtin_bswap16(v); }
/** @brief Host to big-endian 32-bit. */
constexpr uint32_t to_be32(uint32_t v) { return __builtin_bswap32(v); }
/** @brief Host to big-endian 64-bit. */
constexpr uint64_t to_be64(uint64_t v) { return __builtin_bswap64(v); }
/** @brief Big-endian to host 16-bit. */
constexpr uint16_t from_be16(uint16_t v) { return __builtin_bswap16(v); }
/** @brief Big-endian to host 32-bit. */
constexpr uint32_t from_be32(uint32_t v) { return __builtin_bswap32(v); }
/** @brief Big-endian to host 64-bit. */
constexpr uint64_t from_be64(uint64_t v) { return __builtin_bswap64(v); }

// ---------------------------------------------------------------- geometry
constexpr uint32_t kMinPageShift = 12;   ///< 4 KiB: smallest buffer-table page
constexpr uint32_t kWqeBasicBlock = 64;  ///< send WQE basic block (WQEBB)
constexpr uint32_t kSegmentSize = 16;    ///< every WQE segment is 16 bytes
constexpr uint32_t kCqeSize = 64;
constexpr uint32_t kEqeSize = 64;
constexpr uint32_t kMaxSendWqeBbs = 4;    ///< a send WQE spans at most 4 WQEBBs (16 segments)
constexpr uint32_t kInvalidLkey = 0x100;  ///< terminates a short receive WQE scatter list
constexpr uint32_t kQpnMask = 0xffffff;
constexpr uint32_t kPsnMask = 0xffffff;

// ---------------------------------------------------------------- send WQE
/** @brief Send WQE opcodes (low byte of CtrlSeg::opmod_idx_opcode); mlx5 values. */
enum class WqeOpcode : uint8_t {
  Nop = 0x00,
  SendInv = 0x01,  ///< SEND with invalidate: CtrlSeg::imm carries the rkey to invalidate (host order)
  RdmaWrite = 0x08,
  RdmaWriteImm = 0x09,
  Send = 0x0a,
  SendImm = 0x0b,
  RdmaRead = 0x10,
  AtomicCmpSwap = 0x11,
  AtomicFetchAdd = 0x12,
  BindMw = 0x25,    ///< a BindSeg follows the control segment
  LocalInv = 0x27,  ///< CtrlSeg::imm carries the rkey to invalidate (host order)
};

/** @brief Flags in CtrlSeg::fm_ce_se. */
enum CtrlFlags : uint8_t {
  kCtrlSolicited = 0x02,  ///< set SE in the BTH of the last/only packet
  kCtrlCqUpdate = 0x08,   ///< generate a CQE (signaled WR)
  kCtrlFence = 0x80,      ///< wait for outstanding READ/atomic responses first
};

/** @brief Control segment: first 16 bytes of every send WQE. */
struct CtrlSeg {
  uint32_t opmod_idx_opcode;  ///< BE: [31:24] opmod, [23:8] WQE index (16 bit), [7:0] WqeOpcode
  uint32_t qpn_ds;            ///< BE: [31:8] QPN, [5:0] WQE size in 16-byte segments
  uint8_t signature;
  uint8_t rsvd[2];
  uint8_t fm_ce_se;  ///< CtrlFlags
  uint32_t imm;      ///< immediate data, network byte order, copied to the wire as is
};

/** @brief Remote address segment (RDMA WRITE/READ, atomics). */
struct RaddrSeg {
  uint64_t raddr;  ///< BE
  uint32_t rkey;   ///< BE
  uint32_t rsvd;
};

/** @brief Atomic segment (follows RaddrSeg for atomics). */
struct AtomicSeg {
  uint64_t swap_add;  ///< BE: swap value (CMP_SWAP) or addend (FETCH_ADD)
  uint64_t compare;   ///< BE: compare value (CMP_SWAP)
};

/** @brief Data (scatter/gather) segment. */
struct DataSeg {
  uint32_t byte_count;  ///< BE
  uint32_t lkey;        ///< BE
  uint64_t addr;        ///< BE: virtual address inside the MR
};

/**
 * @brief Datagram segment (UD send WQEs only, right after the control segment): the address
 * handle's destination and the remote QP and Q_Key of this WR. The HCA resolves the next-hop
 * MAC from the GID itself, as it does for a connected QP's path.
 */
struct DatagramSeg {
  uint8_t dgid[16];
  uint32_t dqpn;  ///< BE: [23:0] destination QPN
  uint32_t qkey;  ///< BE: as posted (the HCA applies the privileged-Q_Key rule)
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t rsvd;
  uint32_t flow_label;  ///< BE: [19:0]
};
constexpr uint32_t kDatagramSegs = sizeof(DatagramSeg) / kSegmentSize;  ///< 16-byte segments it takes

/** @brief XRC segment (XRC send WQEs only, right after the control segment). */
struct XrcSeg {
  uint32_t srqn;  ///< BE: [23:0] the remote XRC SRQ the message is for
  uint8_t rsvd[12];
};
inline void set_xrc_seg(XrcSeg& x, uint32_t srqn) {
  x = XrcSeg{};
  x.srqn = to_be32(srqn & kQpnMask);
}
inline uint32_t xrc_seg_srqn(const XrcSeg& x) { return from_be32(x.srqn) & kQpnMask; }

/**
 * @brief Memory-window bind segment (BindMw WQEs, right after the control segment): bind the
 * window whose key index is @ref new_rkey's to [addr, addr + length) of the MR @ref mr_lkey.
 */
struct BindSeg {
  uint32_t new_rkey;  ///< BE: the window's key after the bind (index and the new 8-bit tag)
  uint32_t mr_lkey;   ///< BE
  uint64_t addr;      ///< BE: first byte of the window, a virtual address inside the MR
  uint64_t length;    ///< BE: 0 unbinds a type 1 window
  uint32_t access;    ///< BE: AccessFlags granted through the window
  uint8_t flags;      ///< BindFlags
  uint8_t rsvd[3];
};
/** @brief Flags in BindSeg::flags. */
enum BindFlags : uint8_t {
  kBindZeroBased = 0x01,  ///< remote addresses are offsets from the window's start
  kBindType2 = 0x02,      ///< a type 2 window (bound through a WR, to this QP)
};
constexpr uint32_t kBindSegs = sizeof(BindSeg) / kSegmentSize;  ///< 16-byte segments it takes

/** @brief Inline data header; byte_count has kInlineFlag set and the data follows, padded to 16. */
struct InlineSeg {
  uint32_t byte_count;  ///< BE, | kInlineFlag
};
constexpr uint32_t kInlineFlag = 0x80000000u;

/** @brief Pack CtrlSeg::opmod_idx_opcode (host order; store with to_be32). */
constexpr uint32_t ctrl_opmod_idx_opcode(uint16_t wqe_index, WqeOpcode op) {
  return (uint32_t(wqe_index) << 8) | uint32_t(op);
}
/** @brief Pack CtrlSeg::qpn_ds (host order; store with to_be32). */
constexpr uint32_t ctrl_qpn_ds(uint32_t qpn, uint32_t ds) { return (qpn << 8) | (ds & 0x3f); }

// ---------------------------------------------------------------- CQE
/** @brief CQE opcodes (high nibble of Cqe::op_own). */
enum class CqeOpcode : uint8_t {
  Req = 0x0,           ///< requester completion
  RespWriteImm = 0x1,  ///< responder: RDMA WRITE with immediate consumed a receive WQE
  RespSend = 0x2,      ///< responder: SEND
  RespSendImm = 0x3,   ///< responder: SEND with immediate
  ReqErr = 0xd,        ///< requester error
  RespErr = 0xe,       ///< responder error
  Invalid = 0xf,       ///< never written by hardware; initial ring contents
};

/** @brief CQE error syndromes (Cqe::syndrome); mlx5 values. */
enum class CqeSyndrome : uint8_t {
  Ok = 0x00,
  LocalLengthErr = 0x01,
  LocalQpOpErr = 0x02,
  LocalProtErr = 0x04,
  WrFlushErr = 0x05,
  MwBindErr = 0x06,
  BadRespErr = 0x10,
  LocalAccessErr = 0x11,
  RemoteInvalReqErr = 0x12,
  RemoteAccessErr = 0x13,
  RemoteOpErr = 0x14,
  TransportRetryExcErr = 0x15,
  RnrRetryExcErr = 0x16,
  RemoteAbortedErr = 0x22,
};

/** @brief Flags in Cqe::flags. */
enum CqeFlags : uint8_t {
  kCqeWithImm = 0x01,    ///< imm field valid
  kCqeSolicited = 0x02,  ///< the message carried SE
  kCqeGrh = 0x04,        ///< UD receive: the first 40 bytes of the buffer hold the network header
  kCqeSrq = 0x08,        ///< receive: wqe_counter is an index into the QP's shared receive queue
  kCqeWithInv = 0x10,    ///< receive: the SEND invalidated the rkey in imm (host order)
};

/** @brief 64-byte completion queue entry, written by the HCA into the CQ ring. */
struct Cqe {
  uint64_t timestamp;    ///< BE: simulated completion time in ns
  uint32_t byte_cnt;     ///< BE: bytes received (responder) or read/atomic result length
  uint32_t imm;          ///< immediate data, network byte order as on the wire
  uint32_t qpn;          ///< BE: [23:0] local QPN
  uint32_t src_qp;       ///< BE: remote QPN (informational for RC; the DETH's source QP for UD)
  uint16_t wqe_counter;  ///< BE: WQE index of the completed WQE (SQ: first WQEBB index)
  uint8_t syndrome;      ///< CqeSyndrome (error CQEs only)
  uint8_t vendor_syndrome;
  uint8_t flags;       ///< CqeFlags
  uint8_t req_opcode;  ///< WqeOpcode of the completed send WQE (requester CQEs)
  uint8_t rsvd0[2];
  uint32_t srqn;  ///< BE: with kCqeSrq, the shared receive queue wqe_counter indexes
  uint8_t rsvd1[27];
  uint8_t op_own;  ///< [7:4] CqeOpcode, [0] owner bit
};

/** @brief Owner bit the hardware writes for CQE number @p index of a ring of 2^log_size. */
constexpr uint8_t cqe_owner_for(uint32_t index, uint32_t log_size) {
  return uint8_t((index >> log_size) & 1u);
}

// ---------------------------------------------------------------- EQE
/** @brief Event queue entry types; mlx5 values. */
enum class EqeType : uint8_t {
  Completion = 0x00,
  CommEstablished = 0x02,
  SqDrained = 0x03,
  CqError = 0x04,
  WqCatastrophic = 0x05,  ///< QP fatal
  PortChange = 0x09,
  WqInvalidRequest = 0x10,
  WqAccessError = 0x11,
  SrqLastWqe = 0x13,
  SrqLimit = 0x14,
};

/**
 * @brief EqeType::PortChange sub-types (mlx5 values): what the port became. The EQE's resource
 * is the port number.
 */
enum class PortChangeSubtype : uint8_t {
  Down = 0x01,    ///< the link went down: IBV_EVENT_PORT_ERR
  Active = 0x04,  ///< the link came (back) up: IBV_EVENT_PORT_ACTIVE
};

/** @brief 64-byte event queue entry. */
struct Eqe {
  uint8_t type;      ///< EqeType
  uint8_t sub_type;  ///< PortChangeSubtype for port events, else 0
  uint8_t rsvd0[2];
  uint32_t resource;   ///< BE: CQN for completion/CQ events, QPN for QP events, port for port events
  uint64_t timestamp;  ///< BE: simulated time in ns
  uint8_t rsvd1[47];
  uint8_t owner;  ///< [0] owner bit
};

// ---------------------------------------------------------------- UAR and doorbell records
/**
 * @brief Offsets of 64-bit MMIO registers inside one 4 KiB UAR page.
 *
 * SQ doorbell value: [55:32] QPN, [15:0] new SQ producer counter (in WQEBBs).
 * CQ arm value:      [63:60] arm sequence number, [56] solicited-only, [55:32] consumer index, [23:0] CQN.
 * EQ arm value:      [55:32] consumer index, [23:0] EQN (re-enables the interrupt).
 *
 * The SQ BlueFlame register takes the SQ doorbell value from a post of a single WQE of at most
 * kBlueFlameBytes: the CPU writes that WQE's basic blocks into the UAR's BlueFlame buffer with
 * write-combining stores, so the WQE reaches the adapter with the doorbell and is not read by
 * DMA (mlx5's BlueFlame: rdma-core providers/mlx5/qp.c copies the WQE when one is posted).
 */
enum UarOffset : uint32_t {
  kUarCqArm = 0x020,
  kUarEqArm = 0x040,
  kUarSqDoorbell = 0x800,
  kUarSqBlueFlame = 0x900,
};
constexpr uint32_t kUarPageSize = 4096;
/** @brief The BlueFlame buffer: the largest WQE a post may push with its doorbell (4 WQEBBs). */
constexpr uint32_t kBlueFlameBytes = 256;
/** @brief Whether a UAR store at @p offset is an SQ doorbell (plain or BlueFlame). */
constexpr bool is_sq_doorbell(uint32_t offset) {
  return offset == kUarSqDoorbell || offset == kUarSqBlueFlame;
}

constexpr uint64_t sq_doorbell_value(uint32_t qpn, uint16_t pi) {
  return (uint64_t(qpn & kQpnMask) << 32) | pi;
}
constexpr uint64_t cq_arm_value(uint32_t cqn, uint32_t ci, uint32_t sn, bool solicited) {
  return (uint64_t(sn & 0xf) << 60) | (uint64_t(solicited ? 1 : 0) << 56) | (uint64_t(ci & 0xffffff) << 32) |
         (cqn & 0xffffff);
}
constexpr uint64_t eq_arm_value(uint32_t eqn, uint32_t ci) {
  return (uint64_t(ci & 0xffffff) << 32) | (eqn & 0xffffff);
}

/** @brief QP doorbell record (8 bytes, host memory). */
struct QpDbrec {
  uint32_t rq_counter;  ///< BE: RQ producer counter (in WQEs), read by the HCA when it needs receives
  uint32_t sq_counter;  ///< BE: SQ producer counter (in WQEBBs)
};
/** @brief CQ doorbell record (8 bytes, host memory). */
struct CqDbrec {
  uint32_t set_ci;  ///< BE: [23:0] consumer index, read by the HCA to detect overflow
  uint32_t arm;     ///< BE: last arm word (same encoding as the high half of the arm doorbell)
};

// ---------------------------------------------------------------- buffer table
/**
 * @brief Buffer-table entry (8 bytes, BE in host memory): [63:12] DMA address of a page, [0] valid.
 *
 * A queue's pages are described by a page-table-like structure whose root DMA address and level
 * count live in the QPC/CQC/EQC/MKey: 1 level = root is an array of page entries; 2 levels =
 * root entries point to leaf tables. Table pages are always 4 KiB (512 entries), whatever the
 * size of the data pages they describe (BufferDesc::log_page_size).
 */
constexpr uint64_t kBteValid = 1;
constexpr uint64_t bte_make(uint64_t dma_addr) { return to_be64((dma_addr & ~0xfffull) | kBteValid); }
constexpr bool bte_valid(uint64_t be) { return (from_be64(be) & kBteValid) != 0; }
constexpr uint64_t bte_addr(uint64_t be) { return from_be64(be) & ~0xfffull; }

/** @brief Where a queue (or MR) lives in DMA space, as the HCA sees it. */
struct BufferDesc {
  uint64_t bt_root;       ///< DMA address of the root table
  uint32_t npages;        ///< pages described
  uint8_t levels;         ///< 1 or 2
  uint8_t log_page_size;  ///< >= kMinPageShift
  uint16_t rsvd;
  uint64_t first_page_offset;  ///< byte offset of the buffer start inside page 0 (MRs only)
};

// ---------------------------------------------------------------- QP context
/** @brief QP states (values equal enum ibv_qp_state, so the driver maps 1:1). */
enum class QpState : uint8_t { Reset = 0, Init = 1, Rtr = 2, Rts = 3, Sqd = 4, Sqe = 5, Err = 6 };
/** @brief "RESET", "INIT", ... as the IBTA names the states; "?" for a value out of range. */
inline const char* qp_state_name(QpState s) {
  static const char* const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return unsigned(s) < 7 ? n[unsigned(s)] : "?";
}

/**
 * @brief QP transport types (values equal enum ibv_qp_type). An XRC send QP is an RC requester
 * whose every request names a remote XRC SRQ; an XRC receive QP is an RC responder with no
 * queues of its own, taking its receive WQEs from the XRC SRQ each request names. The GSI QP
 * (IBTA 13.5.2: QP1, the general services interface the connection manager sends its MADs on)
 * has the value of the kernel's IB_QPT_GSI: a datagram QP like UD whose number is always 1.
 */
enum class QpType : uint8_t { Gsi = 1, Rc = 2, Uc = 3, Ud = 4, XrcSend = 9, XrcRecv = 10 };
constexpr uint32_t kGsiQpn = 1;            ///< the GSI QP's number on every port (IBTA 13.5.2)
constexpr uint32_t kGsiQkey = 0x80010000;  ///< the GSI's well-known Q_Key (IBTA 13.5.3)
/** @brief UD and the GSI QP: one packet per message, addressed per WQE, with a DETH. */
constexpr bool is_datagram(QpType t) { return t == QpType::Ud || t == QpType::Gsi; }
/** @brief "GSI", "RC", "UC", "UD", "XRC_SEND", "XRC_RECV"; "?" otherwise. */
inline const char* qp_type_name(QpType t) {
  switch (t) {
    case QpType::Gsi: return "GSI";
    case QpType::Rc: return "RC";
    case QpType::Uc: return "UC";
    case QpType::Ud: return "UD";
    case QpType::XrcSend: return "XRC_SEND";
    case QpType::XrcRecv: return "XRC_RECV";
  }
  return "?";
}
constexpr uint32_t kNoSrq = 0xffffffff;  ///< Qpc::srqn of a QP with its own receive queue

/** @brief Access flags in QPC and MKey (values equal enum ibv_access_flags). */
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1,
  kAccessRemoteWrite = 2,
  kAccessRemoteRead = 4,
  kAccessRemoteAtomic = 8,
  kAccessMwBind = 16,  ///< MR only: memory windows may be bound to it
};

/** @brief Addressing of the remote port (RoCEv2: Ethernet + IPv4/IPv6 GID). */
struct PathDesc {
  uint8_t dgid[16];
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t rsvd;
  uint32_t flow_label;
};

/** @brief Queue pair context, programmed by kCmdCreateQp / kCmdModifyQp (host order). */
struct Qpc {
  uint32_t qpn;
  uint32_t pdn;
  uint32_t send_cqn;
  uint32_t recv_cqn;
  uint8_t state;          ///< QpState
  uint8_t port;           ///< 1-based
  uint8_t path_mtu_log;   ///< log2 of path MTU bytes (8..12)
  uint8_t sq_log_size;    ///< SQ ring size in WQEBBs, log2
  uint8_t rq_log_size;    ///< RQ ring size in WQEs, log2
  uint8_t rq_log_stride;  ///< RQ WQE size in bytes, log2
  uint8_t timeout;        ///< local ACK timeout exponent: 4.096 us * 2^timeout, 0 = none
  uint8_t retry_cnt;
  uint8_t rnr_retry;           ///< 7 = infinite
  uint8_t min_rnr_timer;       ///< IBTA RNR timer code (5 bits)
  uint8_t max_rd_atomic;       ///< outstanding READ/atomic as requester
  uint8_t max_dest_rd_atomic;  ///< as responder
  uint32_t access_flags;       ///< remote access allowed on this QP (AccessFlags)
  uint32_t dest_qpn;
  uint32_t sq_psn;  ///< next PSN to send
  uint32_t rq_psn;  ///< expected PSN
  uint16_t pkey_index;
  uint16_t max_inline;
  uint32_t srqn;  ///< kNoSrq, or the shared receive queue this QP takes its receive WQEs from
  PathDesc path;
  BufferDesc sq_buf;
  BufferDesc rq_buf;
  uint64_t dbrec_addr;  ///< DMA address of the QpDbrec
  uint8_t sqd_notify;   ///< raise an SQ-drained event after RTS->SQD
  uint8_t type;         ///< QpType (fixed at creation)
  uint8_t rsvd_tail[6];
  uint32_t qkey;   ///< UD: Q_Key a packet must carry to be accepted, and the one privileged sends use
  uint32_t xrcdn;  ///< XRC receive QP: its XRC domain (the SRQs its requests may name)
};

/**
 * @brief Shared receive queue context (host order), programmed by CreateSrq. Its WQEs have the
 * receive-queue format (a scatter list ended by a terminator); its producer counter is the
 * rq_counter word of a QpDbrec.
 */
struct Srqc {
  uint32_t srqn;
  uint32_t pdn;
  uint32_t eqn;        ///< the event queue its limit event goes to
  uint8_t log_size;    ///< ring size in WQEs, log2
  uint8_t log_stride;  ///< WQE size in bytes, log2
  uint8_t rsvd[2];
  uint32_t limit;  ///< armed limit: raise SrqLimit once when fewer WQEs than this are posted; 0 = off
  BufferDesc buf;
  uint64_t dbrec_addr;  ///< DMA address of the QpDbrec whose rq_counter is the producer counter
  uint32_t xrcdn;       ///< XRC SRQ: its XRC domain; 0 for an ordinary SRQ
  uint32_t cqn;         ///< XRC SRQ: where its completions go (an XRC receive QP has no CQ)
};

/** @brief Completion queue context (host order). */
struct Cqc {
  uint32_t cqn;
  uint32_t eqn;
  uint8_t log_size;
  uint8_t rsvd[7];
  BufferDesc buf;
  uint64_t dbrec_addr;  ///< DMA address of the CqDbrec
};

/** @brief Event queue context (host order). */
struct Eqc {
  uint32_t eqn;
  uint32_t irq_vector;
  uint8_t log_size;
  uint8_t rsvd[7];
  BufferDesc buf;
};

/** @brief Memory key context (host order). lkey == rkey == key. */
struct MkeyCtx {
  uint32_t key;
  uint32_t pdn;
  uint64_t start;  ///< virtual address of the first byte
  uint64_t length;
  uint32_t access;  ///< AccessFlags (local read is always allowed)
  uint32_t rsvd;
  BufferDesc pages;  ///< page list; first_page_offset = start % page size
};

// ---------------------------------------------------------------- command interface
/** @brief Command opcodes for the HCA command mailbox. */
enum class CmdOpcode : uint16_t {
  QueryHcaCap = 0x100,
  AllocPd = 0x800,
  DeallocPd = 0x801,
  CreateMkey = 0x200,
  DestroyMkey = 0x202,
  CreateEq = 0x301,
  DestroyEq = 0x302,
  CreateCq = 0x400,
  DestroyCq = 0x401,
  QueryCq = 0x402,
  /// ibv_resize_cq: arg0 CQN, arg1 the driver's consumer index; in: Cqc (log_size, buf of the
  /// new ring). The CQ writes its next CQE into the new ring; out arg0: the producer count at
  /// the switch (CQEs before it are in the old ring, for the driver to copy).
  ResizeCq = 0x403,
  CreateQp = 0x500,
  ModifyQp = 0x501,
  QueryQp = 0x50b,
  DestroyQp = 0x502,
  AllocXrcd = 0x80e,    ///< returns the XRC domain number in arg0
  DeallocXrcd = 0x80f,  ///< arg0 the XRC domain
  AllocMw = 0x203,      ///< arg0 PDN, arg1 type (1 or 2); returns the window's first key in arg0
  DeallocMw = 0x204,    ///< arg0 the window's key
  CreateSrq = 0x700,
  DestroySrq = 0x701,
  ArmSrq = 0x702,  ///< arg0 SRQN, arg1 the new limit (0 disarms)
  QuerySrq = 0x703,
  QueryPort = 0x750,  ///< arg0 the port number (1); out: PortInfo
  /// The port's neighbour resolution (what ARP/ND do for a RoCE NIC's netdev): in: GidQuery;
  /// out: Neighbour, or BadParam when no port on the network owns the GID.
  ResolveGid = 0x751,
  /// ibv_attach_mcast: arg0 a UD QP; in: GidQuery (the multicast GID). The port delivers a
  /// copy of every datagram sent to that GID (destination QP 0xFFFFFF) to the QP.
  AttachMcast = 0x752,
  /// ibv_detach_mcast: arg0 the QP; in: GidQuery. BadParam if it was not attached.
  DetachMcast = 0x753,
  /// The DREQ of an established connection, left with the HCA for when its owner is gone. The
  /// host's kernel CM sends it whatever becomes of the program (Linux: when the process's
  /// rdma_cm files close, a kill included); here the CM lives in the program, so it leaves the
  /// DREQ's fields while the connection is established and takes them back when it is not.
  /// arg0 the connection's local communication ID; arg1 1 leaves (in: LeftDreq), 0 takes back
  /// (BadParam if none was left). At a function reset the HCA sends each one left from QP1.
  SetLeftDreq = 0x760,
};

/** @brief Command completion status (CmdMailbox::status). */
enum class CmdStatus : uint8_t {
  Ok = 0x00,
  InternalError = 0x01,  ///< the function cannot be reached (a fabric whose device process is gone)
  BadOpcode = 0x02,
  BadParam = 0x03,
  BadSysState = 0x04,
  BadResource = 0x05,
  ResourceBusy = 0x06,
  ExceedLimit = 0x08,
  BadResState = 0x09,
  BadIndex = 0x0a,
  NoResources = 0x0f,
};

/** @brief QPC field mask for kCmdModifyQp (values equal enum ibv_qp_attr_mask). */
using QpAttrMask = uint32_t;

/** @brief HCA capabilities returned by QueryHcaCap. */
struct HcaCaps {
  uint64_t node_guid;
  uint64_t sys_image_guid;
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
  uint32_t max_qp;
  uint32_t max_qp_wr;
  uint32_t max_sge;
  uint32_t max_cq;
  uint32_t max_cqe;
  uint32_t max_mr;
  uint64_t max_mr_size;
  uint32_t max_pd;
  uint32_t max_qp_rd_atom;
  uint32_t max_qp_init_rd_atom;
  uint32_t max_inline_data;
  uint32_t max_srq;
  uint32_t max_srq_wr;
  uint32_t max_srq_sge;
  uint32_t phys_port_cnt;
  uint32_t qpc_cache_entries;
  uint8_t port_mac[6];
  uint8_t active_mtu_log;
  uint8_t rsvd;
  uint32_t port_ipv4;  ///< host order (192.0.2.1 is 0xc0000201)
  uint32_t link_gbps;
  uint32_t atomic_cap;  ///< 0 none, 1 atomic within this HCA (values of enum ibv_atomic_cap)
};

/** @brief Logical port states (values equal enum ibv_port_state). */
enum class PortState : uint8_t { Down = 1, Init = 2, Armed = 3, Active = 4 };
/** @brief Physical port states (IBTA PortPhysicalState, the values of ibv_port_attr::phys_state). */
enum class PortPhysState : uint8_t { Polling = 2, Disabled = 3, LinkUp = 5 };

/** @brief A port's state, returned by QueryPort. */
struct PortInfo {
  uint8_t state;       ///< PortState
  uint8_t phys_state;  ///< PortPhysState
  uint8_t rsvd[2];
  uint32_t link_changes;  ///< how often the link went down or came up since the HCA started
};

/** @brief ResolveGid's input: the GID (an IPv4-mapped or link-local address) to find. */
struct GidQuery {
  uint8_t gid[16];
};
constexpr uint32_t kMulticastQpn = 0xffffff;  ///< the destination QP of a multicast datagram (IBTA 10.5.2.1)

/**
 * @brief A multicast GID: an IPv6 multicast address (ff00::/8) or the IPv4-mapped form of an
 * IPv4 multicast address (\::ffff:224.0.0.0/4), as RoCEv2 carries them.
 */
inline bool is_multicast_gid(const uint8_t gid[16]) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return gid[0] == 0xff || (std::memcmp(gid, mapped, 12) == 0 && (gid[12] & 0xf0) == 0xe0);
}
/** @brief The Ethernet address a multicast GID's frames go to (RFC 1112 and RFC 2464 mappings). */
inline void multicast_mac(const uint8_t gid[16], uint8_t mac[6]) {
  if (gid[0] == 0xff) {  // 33:33 and the low 32 bits
    mac[0] = mac[1] = 0x33;
    std::memcpy(mac + 2, gid + 12, 4);
  } else {  // 01:00:5e and the low 23 bits
    mac[0] = 0x01, mac[1] = 0x00, mac[2] = 0x5e;
    mac[3] = gid[13] & 0x7f, mac[4] = gid[14], mac[5] = gid[15];
  }
}

/** @brief SetLeftDreq's input: where the DREQ goes and what it names (IBTA 12.6.10). */
struct LeftDreq {
  PathDesc path;            ///< to the peer's port (its QP1)
  uint32_t remote_comm_id;  ///< the peer's communication ID
  uint32_t remote_qpn;      ///< the peer's QP of the connection
  uint64_t tid;             ///< the DREQ's transaction ID
};

/** @brief ResolveGid's output: the MAC address of the port that owns the GID. */
struct Neighbour {
  uint8_t mac[6];
  uint8_t rsvd[2];
};

/**
 * @brief A command mailbox: the driver fills opcode and in, the HCA fills status and out.
 * In/out payloads are the command's structure (Qpc, Cqc, ...), host order.
 */
struct CmdMailbox {
  uint16_t opcode;  ///< CmdOpcode
  uint8_t status;   ///< CmdStatus
  uint8_t rsvd;
  uint32_t syndrome;  ///< extra error detail
  uint32_t arg0;      ///< small argument: QPN/CQN/EQN/key/PDN to act on, or attr mask
  uint32_t arg1;
  uint8_t in[256];
  uint8_t out[256];
};

// ---------------------------------------------------------------- accessors
// Both sides encode *and* decode through these (as mlx5dv.h's mlx5dv_set_*_seg and
// mlx5dv_get_cqe_* do for mlx5): no code outside this header shifts, masks or byte-swaps a
// contract field. The WQE/CQE/EQE structures are device memory; their byte order is handled here.

// Send WQE: sizes.
/** @brief WQEBBs a send WQE of @p ds 16-byte segments occupies. */
constexpr uint32_t wqe_bbs_for_segments(uint32_t ds) {
  return (ds * kSegmentSize + kWqeBasicBlock - 1) / kWqeBasicBlock;
}
/** @brief 16-byte segments an inline-data segment of @p len bytes occupies (4-byte header). */
constexpr uint32_t inline_segments(uint32_t len) { return (4 + len + kSegmentSize - 1) / kSegmentSize; }
/** @brief Byte address of segment @p seg inside a WQE starting at @p wqe. */
inline uint8_t* wqe_segment(uint8_t* wqe, uint32_t seg) { return wqe + seg * kSegmentSize; }
inline const uint8_t* wqe_segment(const uint8_t* wqe, uint32_t seg) { return wqe + seg * kSegmentSize; }

// Send WQE: control segment.
/** @brief Fill a control segment (all fields; @p imm in network byte order, as on the wire). */
inline void set_ctrl_seg(CtrlSeg& c, uint16_t wqe_index, WqeOpcode op, uint32_t qpn, uint32_t ds,
                         uint8_t flags, uint32_t imm) {
  c = CtrlSeg{};
  c.opmod_idx_opcode = to_be32(ctrl_opmod_idx_opcode(wqe_index, op));
  c.qpn_ds = to_be32(ctrl_qpn_ds(qpn, ds));
  c.fm_ce_se = flags;
  c.imm = imm;
}
inline WqeOpcode ctrl_opcode(const CtrlSeg& c) { return WqeOpcode(from_be32(c.opmod_idx_opcode) & 0xff); }
inline uint16_t ctrl_wqe_index(const CtrlSeg& c) { return uint16_t(from_be32(c.opmod_idx_opcode) >> 8); }
inline uint32_t ctrl_qpn(const CtrlSeg& c) { return from_be32(c.qpn_ds) >> 8; }
/** @brief WQE size in 16-byte segments, control segment included. */
inline uint32_t ctrl_ds(const CtrlSeg& c) { return from_be32(c.qpn_ds) & 0x3f; }
inline uint8_t ctrl_flags(const CtrlSeg& c) { return c.fm_ce_se; }
inline uint32_t ctrl_imm(const CtrlSeg& c) { return c.imm; }

// Send WQE: remote address, atomic and data segments.
inline void set_raddr_seg(RaddrSeg& r, uint64_t raddr, uint32_t rkey) {
  r = RaddrSeg{to_be64(raddr), to_be32(rkey), 0};
}
inline uint64_t raddr_seg_addr(const RaddrSeg& r) { return from_be64(r.raddr); }
inline uint32_t raddr_seg_rkey(const RaddrSeg& r) { return from_be32(r.rkey); }
inline void set_atomic_seg(AtomicSeg& a, uint64_t swap_add, uint64_t compare) {
  a = AtomicSeg{to_be64(swap_add), to_be64(compare)};
}
inline uint64_t atomic_seg_swap_add(const AtomicSeg& a) { return from_be64(a.swap_add); }
inline uint64_t atomic_seg_compare(const AtomicSeg& a) { return from_be64(a.compare); }
inline void set_data_seg(DataSeg& d, uint64_t addr, uint32_t length, uint32_t lkey) {
  d = DataSeg{to_be32(length), to_be32(lkey), to_be64(addr)};
}
inline uint64_t data_seg_addr(const DataSeg& d) { return from_be64(d.addr); }
inline uint32_t data_seg_length(const DataSeg& d) { return from_be32(d.byte_count); }
inline uint32_t data_seg_lkey(const DataSeg& d) { return from_be32(d.lkey); }

// Send WQE: datagram segment (UD).
/** @brief Where a UD send goes: host-order fields of a DatagramSeg. */
struct DatagramAddr {
  uint8_t dgid[16] = {};
  uint32_t dqpn = 0;
  uint32_t qkey = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 0;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
};
inline void set_datagram_seg(DatagramSeg& d, const DatagramAddr& a) {
  d = DatagramSeg{};
  std::memcpy(d.dgid, a.dgid, 16);
  d.dqpn = to_be32(a.dqpn & kQpnMask);
  d.qkey = to_be32(a.qkey);
  d.sgid_index = a.sgid_index;
  d.hop_limit = a.hop_limit;
  d.traffic_class = a.traffic_class;
  d.flow_label = to_be32(a.flow_label & 0xfffff);
}
inline DatagramAddr get_datagram_seg(const DatagramSeg& d) {
  DatagramAddr a;
  std::memcpy(a.dgid, d.dgid, 16);
  a.dqpn = from_be32(d.dqpn) & kQpnMask;
  a.qkey = from_be32(d.qkey);
  a.sgid_index = d.sgid_index;
  a.hop_limit = d.hop_limit;
  a.traffic_class = d.traffic_class;
  a.flow_label = from_be32(d.flow_label) & 0xfffff;
  return a;
}

// Send WQE: memory-window bind segment.
/** @brief A bind's fields in host order. */
struct BindInfo {
  uint32_t new_rkey = 0;
  uint32_t mr_lkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint8_t flags = 0;  ///< BindFlags
};
inline void set_bind_seg(BindSeg& b, const BindInfo& i) {
  b = BindSeg{};
  b.new_rkey = to_be32(i.new_rkey);
  b.mr_lkey = to_be32(i.mr_lkey);
  b.addr = to_be64(i.addr);
  b.length = to_be64(i.length);
  b.access = to_be32(i.access);
  b.flags = i.flags;
}
inline BindInfo get_bind_seg(const BindSeg& b) {
  BindInfo i;
  i.new_rkey = from_be32(b.new_rkey);
  i.mr_lkey = from_be32(b.mr_lkey);
  i.addr = from_be64(b.addr);
  i.length = from_be64(b.length);
  i.access = from_be32(b.access);
  i.flags = b.flags;
  return i;
}
/** @brief The 8-bit tag of a key (its low byte; the rest is the key's index). */
constexpr uint8_t key_tag(uint32_t key) { return uint8_t(key); }
constexpr uint32_t key_index(uint32_t key) { return key >> 8; }

// Send WQE: inline data (a 4-byte header with kInlineFlag, then the bytes).
inline void set_inline_seg(InlineSeg& s, uint32_t len) { s.byte_count = to_be32(len | kInlineFlag); }
/** @brief Whether the segment at @p seg (its first 4 bytes) is an inline header, not a DataSeg. */
inline bool seg_is_inline(const uint8_t* seg) {
  uint32_t w;
  std::memcpy(&w, seg, 4);
  return (from_be32(w) & kInlineFlag) != 0;
}
inline uint32_t inline_seg_length(const InlineSeg& s) { return from_be32(s.byte_count) & ~kInlineFlag; }

// Receive WQE: an array of DataSegs, ended early by one whose lkey is kInvalidLkey.
/** @brief Mark the end of a receive WQE's scatter list. */
inline void set_recv_terminator(DataSeg& d) { d = DataSeg{0, to_be32(kInvalidLkey), 0}; }
inline bool data_seg_is_terminator(const DataSeg& d) { return data_seg_lkey(d) == kInvalidLkey; }

// CQE.
/** @brief The last byte of a CQE: opcode and owner bit. */
constexpr uint8_t cqe_op_own(CqeOpcode op, uint8_t owner) { return uint8_t(uint8_t(op) << 4) | (owner & 1); }
/** @brief What software writes into every CQE before handing the ring over (hardware owns it). */
constexpr uint8_t cqe_initial_op_own() { return cqe_op_own(CqeOpcode::Invalid, 1); }
constexpr CqeOpcode cqe_opcode(uint8_t op_own) { return CqeOpcode(op_own >> 4); }
constexpr uint8_t cqe_owner(uint8_t op_own) { return op_own & 1; }
/**
 * @brief Whether CQE number @p ci of a ring of 2^log_size, whose last byte is @p op_own, has been
 * written by hardware in the current pass (software may read it).
 */
constexpr bool cqe_ready(uint8_t op_own, uint32_t ci, uint32_t log_size) {
  return cqe_opcode(op_own) != CqeOpcode::Invalid && cqe_owner(op_own) == cqe_owner_for(ci, log_size);
}
/** @brief Load the last byte of the CQE at @p cqe (acquire: the rest of the CQE is visible after it). */
inline uint8_t cqe_load_op_own(const uint8_t* cqe) {
  return __atomic_load_n(cqe + offsetof(Cqe, op_own), __ATOMIC_ACQUIRE);
}
/** @brief Hand the CQE at @p cqe to hardware before first use (cqe_initial_op_own()). */
inline void cqe_init(uint8_t* cqe) { cqe[offsetof(Cqe, op_own)] = cqe_initial_op_own(); }
/** @brief Values of a CQE, host order (what hardware writes and software reads). */
struct CqeFields {
  CqeOpcode opcode = CqeOpcode::Req;
  uint64_t timestamp_ns = 0;
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;  ///< network byte order, as on the wire
  uint32_t qpn = 0;
  uint32_t src_qp = 0;
  uint16_t wqe_counter = 0;
  uint32_t srqn = 0;  ///< with kCqeSrq
  CqeSyndrome syndrome = CqeSyndrome::Ok;
  uint8_t vendor_syndrome = 0;
  uint8_t flags = 0;  ///< CqeFlags
  WqeOpcode req_opcode = WqeOpcode::Nop;
};
/** @brief Encode @p f with owner bit @p owner (op_own last: write the CQE, then its last byte). */
inline void set_cqe(Cqe& c, const CqeFields& f, uint8_t owner) {
  c = Cqe{};
  c.timestamp = to_be64(f.timestamp_ns);
  c.byte_cnt = to_be32(f.byte_cnt);
  c.imm = f.imm;
  c.qpn = to_be32(f.qpn & kQpnMask);
  c.src_qp = to_be32(f.src_qp);
  c.wqe_counter = to_be16(f.wqe_counter);
  c.srqn = to_be32(f.srqn);
  c.syndrome = uint8_t(f.syndrome);
  c.vendor_syndrome = f.vendor_syndrome;
  c.flags = f.flags;
  c.req_opcode = uint8_t(f.req_opcode);
  c.op_own = cqe_op_own(f.opcode, owner);
}
/** @brief Decode every field of @p c but the owner bit. */
inline CqeFields get_cqe(const Cqe& c) {
  CqeFields f;
  f.opcode = cqe_opcode(c.op_own);
  f.timestamp_ns = from_be64(c.timestamp);
  f.byte_cnt = from_be32(c.byte_cnt);
  f.imm = c.imm;
  f.qpn = from_be32(c.qpn) & kQpnMask;
  f.src_qp = from_be32(c.src_qp);
  f.wqe_counter = from_be16(c.wqe_counter);
  f.srqn = from_be32(c.srqn);
  f.syndrome = CqeSyndrome(c.syndrome);
  f.vendor_syndrome = c.vendor_syndrome;
  f.flags = c.flags;
  f.req_opcode = WqeOpcode(c.req_opcode);
  return f;
}

// EQE.
/** @brief Owner bit hardware writes for EQE number @p index of a ring of 2^log_size. */
constexpr uint8_t eqe_owner_for(uint32_t index, uint32_t log_size) {
  return uint8_t((index >> log_size) & 1u);
}
/** @brief What software writes into an EQE's owner byte before the first pass (hardware owns it). */
constexpr uint8_t eqe_initial_owner() { return 1; }
inline void set_eqe(Eqe& e, EqeType type, uint32_t resource, uint64_t timestamp_ns, uint8_t owner) {
  e = Eqe{};
  e.type = uint8_t(type);
  e.resource = to_be32(resource);
  e.timestamp = to_be64(timestamp_ns);
  e.owner = owner & 1;
}
/** @brief Load the owner byte of the EQE at @p eqe (acquire: the rest is visible after it). */
inline uint8_t eqe_load_owner(const uint8_t* eqe) {
  return __atomic_load_n(eqe + offsetof(Eqe, owner), __ATOMIC_ACQUIRE);
}
/** @brief Hand the EQE at @p eqe to hardware before first use. */
inline void eqe_init(uint8_t* eqe) { eqe[offsetof(Eqe, owner)] = eqe_initial_owner(); }
/** @brief Make @p e a port-change EQE (resource: the port) saying what the port became. */
inline void set_eqe_port_change(Eqe& e, PortChangeSubtype what, uint32_t port, uint64_t timestamp_ns,
                                uint8_t owner) {
  set_eqe(e, EqeType::PortChange, port, timestamp_ns, owner);
  e.sub_type = uint8_t(what);
}
inline EqeType eqe_type(const Eqe& e) { return EqeType(e.type); }
/** @brief The sub-type of a port-change EQE (PortChangeSubtype). */
inline PortChangeSubtype eqe_port_change(const Eqe& e) { return PortChangeSubtype(e.sub_type); }
inline uint32_t eqe_resource(const Eqe& e) { return from_be32(e.resource); }
inline uint64_t eqe_timestamp_ns(const Eqe& e) { return from_be64(e.timestamp); }
/** @brief Whether EQE number @p ci, whose owner byte is @p owner, was written in this pass. */
constexpr bool eqe_ready(uint8_t owner, uint32_t ci, uint32_t log_size) {
  return (owner & 1) == eqe_owner_for(ci, log_size);
}

// Doorbells (UAR stores): decoders for the values sq_doorbell_value/cq_arm_value/eq_arm_value make.
inline uint32_t sq_doorbell_qpn(uint64_t v) { return uint32_t(v >> 32) & kQpnMask; }
inline uint16_t sq_doorbell_pi(uint64_t v) { return uint16_t(v); }
inline uint32_t cq_arm_cqn(uint64_t v) { return uint32_t(v) & 0xffffff; }
inline uint32_t cq_arm_ci(uint64_t v) { return uint32_t(v >> 32) & 0xffffff; }
inline uint32_t cq_arm_sn(uint64_t v) { return uint32_t(v >> 60) & 0xf; }
inline bool cq_arm_solicited(uint64_t v) { return ((v >> 56) & 1) != 0; }
/** @brief The arm word software also leaves in CqDbrec::arm (the high half of the doorbell). */
inline uint32_t cq_arm_word(uint64_t v) { return uint32_t(v >> 32); }
inline uint32_t eq_arm_eqn(uint64_t v) { return uint32_t(v) & 0xffffff; }
inline uint32_t eq_arm_ci(uint64_t v) { return uint32_t(v >> 32) & 0xffffff; }

// Doorbell records (host memory, BE). Loads and stores are atomic: device and software race.
inline void qp_dbrec_set_sq(QpDbrec& r, uint32_t counter) {
  __atomic_store_n(&r.sq_counter, to_be32(counter), __ATOMIC_RELEASE);
}
inline void qp_dbrec_set_rq(QpDbrec& r, uint32_t counter) {
  __atomic_store_n(&r.rq_counter, to_be32(counter), __ATOMIC_RELEASE);
}
inline uint16_t qp_dbrec_sq(const QpDbrec& r) {
  return uint16_t(from_be32(__atomic_load_n(&r.sq_counter, __ATOMIC_ACQUIRE)));
}
inline uint16_t qp_dbrec_rq(const QpDbrec& r) {
  return uint16_t(from_be32(__atomic_load_n(&r.rq_counter, __ATOMIC_ACQUIRE)));
}
inline void cq_dbrec_set_ci(CqDbrec& r, uint32_t ci) {
  __atomic_store_n(&r.set_ci, to_be32(ci & 0xffffff), __ATOMIC_RELEASE);
}
inline void cq_dbrec_set_arm(CqDbrec& r, uint64_t arm_doorbell) {
  __atomic_store_n(&r.arm, to_be32(cq_arm_word(arm_doorbell)), __ATOMIC_RELEASE);
}
inline uint32_t cq_dbrec_ci(const CqDbrec& r) {
  return from_be32(__atomic_load_n(&r.set_ci, __ATOMIC_ACQUIRE)) & 0xffffff;
}

// GIDs of a RoCE port (the table both ibv_query_gid and the device's packet builder use).
constexpr uint32_t kGidTableLen = 2;  ///< index 0: link-local from the MAC; 1: IPv4-mapped
/** @brief fe80::/64 with the modified EUI-64 of @p mac, as the kernel derives the link-local GID. */
inline void gid_from_mac(const uint8_t mac[6], uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[0] = 0xfe;
  gid[1] = 0x80;
  gid[8] = mac[0] ^ 0x02;
  gid[9] = mac[1];
  gid[10] = mac[2];
  gid[11] = 0xff;
  gid[12] = 0xfe;
  gid[13] = mac[3];
  gid[14] = mac[4];
  gid[15] = mac[5];
}
/** @brief The IPv4-mapped GID (\::ffff:a.b.c.d) for @p ipv4 in host order. */
inline void gid_from_ipv4(uint32_t ipv4, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  const uint32_t be = to_be32(ipv4);
  std::memcpy(gid + 12, &be, 4);
}
/** @brief GID @p index (< kGidTableLen) of a port with @p mac and @p ipv4 (host order). */
inline void port_gid(uint32_t index, const uint8_t mac[6], uint32_t ipv4, uint8_t gid[16]) {
  if (index == 0)
    gid_from_mac(mac, gid);
  else
    gid_from_ipv4(ipv4, gid);
}

// Command mailboxes: the driver builds them, the device reads its input and writes its output.
/** @brief A mailbox for @p op acting on @p arg0 (and @p arg1), with no input structure. */
inline CmdMailbox make_cmd(CmdOpcode op, uint32_t arg0 = 0, uint32_t arg1 = 0) {
  CmdMailbox mb{};
  mb.opcode = uint16_t(op);
  mb.arg0 = arg0;
  mb.arg1 = arg1;
  return mb;
}
/** @brief A mailbox for @p op whose input is the structure @p in (a context: Qpc, Cqc, ...). */
template <typename T>
inline CmdMailbox make_cmd_with(CmdOpcode op, const T& in, uint32_t arg0 = 0, uint32_t arg1 = 0) {
  static_assert(sizeof(T) <= sizeof(CmdMailbox::in), "command input larger than the mailbox");
  CmdMailbox mb = make_cmd(op, arg0, arg1);
  std::memcpy(mb.in, &in, sizeof in);
  return mb;
}
/** @brief The command's input structure (device side). */
template <typename T>
inline T cmd_in(const CmdMailbox& mb) {
  static_assert(sizeof(T) <= sizeof(CmdMailbox::in), "command input larger than the mailbox");
  T v;
  std::memcpy(&v, mb.in, sizeof v);
  return v;
}
/** @brief Write the command's output structure (device side). */
template <typename T>
inline void set_cmd_out(CmdMailbox& mb, const T& out) {
  static_assert(sizeof(T) <= sizeof(CmdMailbox::out), "command output larger than the mailbox");
  std::memcpy(mb.out, &out, sizeof out);
}
/** @brief The command's output structure (driver side). */
template <typename T>
inline T cmd_out(const CmdMailbox& mb) {
  static_assert(sizeof(T) <= sizeof(CmdMailbox::out), "command output larger than the mailbox");
  T v;
  std::memcpy(&v, mb.out, sizeof v);
  return v;
}

// ---------------------------------------------------------------- layout pins
static_assert(sizeof(CtrlSeg) == 16);
static_assert(sizeof(RaddrSeg) == 16);
static_assert(sizeof(AtomicSeg) == 16);
static_assert(sizeof(DataSeg) == 16);
static_assert(sizeof(Cqe) == 64);
static_assert(offsetof(Cqe, op_own) == 63);
static_assert(sizeof(Eqe) == 64);
static_assert(offsetof(Eqe, owner) == 63);
static_assert(sizeof(QpDbrec) == 8);
static_assert(sizeof(CqDbrec) == 8);
static_assert(sizeof(BufferDesc) == 24);
static_assert(sizeof(DatagramSeg) == 2 * kSegmentSize);
static_assert(sizeof(BindSeg) == 2 * kSegmentSize);
static_assert(sizeof(XrcSeg) == kSegmentSize);
static_assert(sizeof(Qpc) <= sizeof(CmdMailbox::in));
static_assert(sizeof(Srqc) <= sizeof(CmdMailbox::in));
static_assert(sizeof(HcaCaps) <= sizeof(CmdMailbox::out));

}  // namespace hcasim::hw
