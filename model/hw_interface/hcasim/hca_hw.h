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
constexpr uint32_t kMinPageShift = 12;          ///< 4 KiB: smallest buffer-table page
constexpr uint32_t kWqeBasicBlock = 64;         ///< send WQE basic block (WQEBB)
constexpr uint32_t kSegmentSize = 16;           ///< every WQE segment is 16 bytes
constexpr uint32_t kCqeSize = 64;
constexpr uint32_t kEqeSize = 64;
constexpr uint32_t kMaxSendWqeBbs = 4;          ///< a send WQE spans at most 4 WQEBBs (16 segments)
constexpr uint32_t kInvalidLkey = 0x100;        ///< terminates a short receive WQE scatter list
constexpr uint32_t kQpnMask = 0xffffff;
constexpr uint32_t kPsnMask = 0xffffff;

// ---------------------------------------------------------------- send WQE
/** @brief Send WQE opcodes (low byte of CtrlSeg::opmod_idx_opcode); mlx5 values. */
enum class WqeOpcode : uint8_t {
  Nop = 0x00,
  RdmaWrite = 0x08,
  RdmaWriteImm = 0x09,
  Send = 0x0a,
  SendImm = 0x0b,
  RdmaRead = 0x10,
  AtomicCmpSwap = 0x11,
  AtomicFetchAdd = 0x12,
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
  uint8_t fm_ce_se;           ///< CtrlFlags
  uint32_t imm;               ///< immediate data, network byte order, copied to the wire as is
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
};

/** @brief 64-byte completion queue entry, written by the HCA into the CQ ring. */
struct Cqe {
  uint64_t timestamp;    ///< BE: simulated completion time in ns
  uint32_t byte_cnt;     ///< BE: bytes received (responder) or read/atomic result length
  uint32_t imm;          ///< immediate data, network byte order as on the wire
  uint32_t qpn;          ///< BE: [23:0] local QPN
  uint32_t src_qp;       ///< BE: remote QPN (informational for RC)
  uint16_t wqe_counter;  ///< BE: WQE index of the completed WQE (SQ: first WQEBB index)
  uint8_t syndrome;      ///< CqeSyndrome (error CQEs only)
  uint8_t vendor_syndrome;
  uint8_t flags;         ///< CqeFlags
  uint8_t req_opcode;    ///< WqeOpcode of the completed send WQE (requester CQEs)
  uint8_t rsvd0[33];
  uint8_t op_own;        ///< [7:4] CqeOpcode, [0] owner bit
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

/** @brief 64-byte event queue entry. */
struct Eqe {
  uint8_t type;       ///< EqeType
  uint8_t sub_type;
  uint8_t rsvd0[2];
  uint32_t resource;  ///< BE: CQN for completion/CQ events, QPN for QP events, port for port events
  uint64_t timestamp; ///< BE: simulated time in ns
  uint8_t rsvd1[47];
  uint8_t owner;      ///< [0] owner bit
};

// ---------------------------------------------------------------- UAR and doorbell records
/**
 * @brief Offsets of 64-bit MMIO registers inside one 4 KiB UAR page.
 *
 * SQ doorbell value: [55:32] QPN, [15:0] new SQ producer counter (in WQEBBs).
 * CQ arm value:      [63:60] arm sequence number, [56] solicited-only, [55:32] consumer index, [23:0] CQN.
 * EQ arm value:      [55:32] consumer index, [23:0] EQN (re-enables the interrupt).
 */
enum UarOffset : uint32_t {
  kUarCqArm = 0x020,
  kUarEqArm = 0x040,
  kUarSqDoorbell = 0x800,
};
constexpr uint32_t kUarPageSize = 4096;

constexpr uint64_t sq_doorbell_value(uint32_t qpn, uint16_t pi) {
  return (uint64_t(qpn & kQpnMask) << 32) | pi;
}
constexpr uint64_t cq_arm_value(uint32_t cqn, uint32_t ci, uint32_t sn, bool solicited) {
  return (uint64_t(sn & 0xf) << 60) | (uint64_t(solicited ? 1 : 0) << 56) |
         (uint64_t(ci & 0xffffff) << 32) | (cqn & 0xffffff);
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

/** @brief Access flags in QPC and MKey (values equal enum ibv_access_flags). */
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1,
  kAccessRemoteWrite = 2,
  kAccessRemoteRead = 4,
  kAccessRemoteAtomic = 8,
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
  uint8_t rnr_retry;      ///< 7 = infinite
  uint8_t min_rnr_timer;  ///< IBTA RNR timer code (5 bits)
  uint8_t max_rd_atomic;  ///< outstanding READ/atomic as requester
  uint8_t max_dest_rd_atomic;  ///< as responder
  uint32_t access_flags;  ///< remote access allowed on this QP (AccessFlags)
  uint32_t dest_qpn;
  uint32_t sq_psn;        ///< next PSN to send
  uint32_t rq_psn;        ///< expected PSN
  uint16_t pkey_index;
  uint16_t max_inline;
  uint32_t srqn;          ///< 0xffffffff = no SRQ
  PathDesc path;
  BufferDesc sq_buf;
  BufferDesc rq_buf;
  uint64_t dbrec_addr;    ///< DMA address of the QpDbrec
  uint8_t sqd_notify;     ///< raise an SQ-drained event after RTS->SQD
  uint8_t rsvd_tail[7];
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
  uint64_t start;   ///< virtual address of the first byte
  uint64_t length;
  uint32_t access;  ///< AccessFlags (local read is always allowed)
  uint32_t rsvd;
  BufferDesc pages; ///< page list; first_page_offset = start % page size
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
  CreateQp = 0x500,
  ModifyQp = 0x501,
  QueryQp = 0x50b,
  DestroyQp = 0x502,
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
  uint32_t port_ipv4;   ///< network byte order
  uint32_t link_gbps;
  uint32_t atomic_cap;  ///< 0 none, 1 atomic within this HCA (values of enum ibv_atomic_cap)
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
static_assert(sizeof(Qpc) <= sizeof(CmdMailbox::in));
static_assert(sizeof(HcaCaps) <= sizeof(CmdMailbox::out));

}  // namespace hcasim::hw
