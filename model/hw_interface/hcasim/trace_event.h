// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace_event.h
 * @brief The vocabulary of a trace event: which unit, what kind of step, and its facts as data.
 *
 * The model's units, the driver (its post and interrupt lines) and the simulator's sinks all
 * speak it, so it lives beside the hardware/software contract rather than inside the model.
 * A sink that links events (timeline flows), plots signals (VCD) or stops on them (step mode)
 * reads TraceFields, never the event's text: the text is a rendering of the same values for
 * people.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace hcasim::trace {

/** @brief The hardware (or driver) unit an event comes from. */
enum class TraceUnit : uint8_t {
  Driver,
  Doorbell,
  Qpc,
  BufferTable,
  WqeFetch,
  Mr,
  Dma,
  Requester,
  Responder,
  Port,
  Wire,
  Cq,
  Eq,
  Command,
  Count
};

/** @brief What happened (the event's type); sinks filter and lay out by it. */
enum class TraceKind : uint8_t {
  Post,
  Doorbell,
  QpcLookup,
  BtWalk,
  WqeFetch,
  WqeDecode,
  MrXlate,
  DmaRead,
  DmaWrite,
  PktTx,
  PktRx,
  Ack,
  Nak,
  Retransmit,
  CqeWrite,
  CqArm,
  EventDecision,
  EqeWrite,
  Interrupt,
  QpState,
  Command,
  Error,
  Note,
  Fault,  ///< a fault injected on the wire on purpose (--faults): lost, duplicated, reordered, ...
  Count
};

/** @brief A unit's name as traces print it ("wqefetch", "cq"); "?" if out of range. */
inline const char* unit_name(TraceUnit u) {
  static const char* const names[] = {"driver", "doorbell", "qpc",  "buftable", "wqefetch", "mr", "dma",
                                      "req",    "resp",     "port", "wire",     "cq",       "eq", "cmd"};
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(TraceUnit::Count), "a name for every unit");
  const auto i = static_cast<unsigned>(u);
  return i < unsigned(TraceUnit::Count) ? names[i] : "?";
}

/** @brief A kind's name as traces print it ("cqe.write", "pkt.tx"); "?" if out of range. */
inline const char* kind_name(TraceKind k) {
  static const char* const names[] = {
      "post",      "doorbell",  "qpc.lookup", "bt.walk",  "wqe.fetch", "wqe.decode", "mr.xlate",  "dma.read",
      "dma.write", "pkt.tx",    "pkt.rx",     "ack",      "nak",       "retransmit", "cqe.write", "cq.arm",
      "event",     "eqe.write", "irq",        "qp.state", "command",   "error",      "note",      "fault"};
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(TraceKind::Count), "a name for every kind");
  const auto i = static_cast<unsigned>(k);
  return i < unsigned(TraceKind::Count) ? names[i] : "?";
}

/** @brief "Not applicable" for the 32-bit typed fields (and "not about one QP" for a QPN). */
constexpr uint32_t kTraceNone = 0xffffffff;
/** @brief "Not applicable" for the 16-bit typed fields. */
constexpr uint16_t kTraceNone16 = 0xffff;
/** @brief "Not applicable" for the 64-bit typed fields. */
constexpr uint64_t kTraceNone64 = ~uint64_t(0);

/** @brief Flag bits of TraceFields::flags. */
enum TraceFlag : uint16_t {
  kTfRq = 1u << 0,            ///< about the receive queue (post_recv, RQ WQE fetch); else the SQ
  kTfSignaled = 1u << 1,      ///< the WQE asks for a CQE
  kTfSolicited = 1u << 2,     ///< the WQE sets the solicited-event bit
  kTfSe = 1u << 3,            ///< packet: BTH SE bit
  kTfAckReq = 1u << 4,        ///< packet: BTH AckReq bit
  kTfEvent = 1u << 5,         ///< CQ event decision: an event fired
  kTfArmed = 1u << 6,         ///< CQ arm state after the event: armed
  kTfArmSolicited = 1u << 7,  ///< ... and armed for solicited completions only
  kTfError = 1u << 8,         ///< CQE: error status; check/command: it failed
  kTfEq = 1u << 9,            ///< doorbell: the EQ arm doorbell (queue = EQN); else CQ arm
  kTfSrq = 1u << 10,          ///< with kTfRq: a shared receive queue (queue = SRQN)
  kTfBlueFlame = 1u << 11,    ///< SQ doorbell, SQ WQE fetch: the WQE came with a BlueFlame store
};

/**
 * @brief Machine-readable facts of an event, beside its text. Every emitter fills the ones that
 * apply (chain the setters: `TraceFields().set_wqe(i).set_count(n)`); the others stay "none".
 */
struct TraceFields {
  uint32_t wqe = kTraceNone;       ///< SQ WQE index (WQEBB counter) or RQ WQE counter
  uint32_t psn = kTraceNone;       ///< packet PSN; first PSN of a message (wqe.decode)
  uint32_t psn_last = kTraceNone;  ///< last PSN of a message (wqe.decode)
  uint32_t peer_qpn =
      kTraceNone;  ///< the other end's QPN (packets: the BTH destination QP; eqe.write: the resource)
  uint32_t queue = kTraceNone;  ///< CQN (cq events), EQN (eqe.write), MSI-X vector (irq)
  /** Producer counter (SQ doorbell: new producer; cqe.write/eqe.write: counter after the write),
   *  or consumer index (cq.arm). */
  uint32_t index = kTraceNone;
  /** Bytes on the wire (pkt.tx), WQEBBs (SQ post/fetch), packets (wqe.decode), payload bytes
   *  (dma, mr.xlate), SGEs (RQ fetch). */
  uint32_t count = kTraceNone;
  uint32_t key = kTraceNone;       ///< lkey/rkey checked (mr.xlate)
  uint64_t addr = kTraceNone64;    ///< virtual address (mr.xlate), DMA address (bt.walk, dma)
  uint16_t opcode = kTraceNone16;  ///< BTH opcode (packets), CQE opcode (cqe.write), EQE type (eqe.write)
  /** CQE syndrome (cqe.write), NAK code / AETH syndrome (nak), command status (command),
   *  PortChangeSubtype (eqe.write of a port-change EQE). */
  uint16_t status = kTraceNone16;
  uint16_t flags = 0;  ///< TraceFlag bits

  TraceFields& set_wqe(uint32_t v) {
    wqe = v;
    return *this;
  }
  TraceFields& set_psn(uint32_t v) {
    psn = v;
    return *this;
  }
  TraceFields& set_psn_range(uint32_t first, uint32_t last) {
    psn = first;
    psn_last = last;
    return *this;
  }
  TraceFields& set_peer_qpn(uint32_t v) {
    peer_qpn = v;
    return *this;
  }
  TraceFields& set_queue(uint32_t v) {
    queue = v;
    return *this;
  }
  TraceFields& set_index(uint32_t v) {
    index = v;
    return *this;
  }
  TraceFields& set_count(uint32_t v) {
    count = v;
    return *this;
  }
  TraceFields& set_key(uint32_t v) {
    key = v;
    return *this;
  }
  TraceFields& set_addr(uint64_t v) {
    addr = v;
    return *this;
  }
  TraceFields& set_opcode(uint16_t v) {
    opcode = v;
    return *this;
  }
  TraceFields& set_status(uint16_t v) {
    status = v;
    return *this;
  }
  /** @brief Set @p flag when @p on (so conditions read as data, not as branches at call sites). */
  TraceFields& set_flag(TraceFlag flag, bool on = true) {
    if (on) flags = uint16_t(flags | flag);
    return *this;
  }
  bool has(TraceFlag flag) const { return (flags & flag) != 0; }
};

}  // namespace hcasim::trace
