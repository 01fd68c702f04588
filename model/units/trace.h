// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace.h
 * @brief Typed trace events emitted by every hardware unit, and the sink interface.
 *
 * Units call HCASIM_TRACE(...) (or HCASIM_TRACE_F(...) with typed fields) which costs one
 * predictable branch when tracing is off: nothing is formatted, and no argument is evaluated,
 * unless a sink is attached.
 */
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>

namespace hcasim::model {

/** @brief The hardware (or driver) unit an event comes from. */
enum class TraceUnit : uint8_t {
  Driver, Doorbell, Qpc, BufferTable, WqeFetch, Mr, Dma, Requester, Responder, Port, Wire, Cq, Eq,
  Command, Count
};
const char* unit_name(TraceUnit u);

/** @brief What happened (the event's type); sinks filter and lay out by it. */
enum class TraceKind : uint8_t {
  Post, Doorbell, QpcLookup, BtWalk, WqeFetch, WqeDecode, MrXlate, DmaRead, DmaWrite, PktTx, PktRx,
  Ack, Nak, Retransmit, CqeWrite, CqArm, EventDecision, EqeWrite, Interrupt, QpState, Command,
  Error, Note, Count
};
const char* kind_name(TraceKind k);

/** @brief "Not applicable" for the 32-bit typed fields. */
constexpr uint32_t kTraceNone = 0xffffffff;

/** @brief Flag bits of TraceFields::flags. */
enum TraceFlag : uint16_t {
  kTfRq = 1u << 0,         ///< about the receive queue (post_recv, RQ WQE fetch); else the send queue
  kTfSignaled = 1u << 1,   ///< the WQE asks for a CQE
  kTfSolicited = 1u << 2,  ///< the WQE sets the solicited-event bit
  kTfSe = 1u << 3,         ///< packet: BTH SE bit
  kTfAckReq = 1u << 4,     ///< packet: BTH AckReq bit
  kTfEvent = 1u << 5,      ///< CQ event decision: an event fired
  kTfArmed = 1u << 6,      ///< CQ arm state after the event: armed
  kTfArmSolicited = 1u << 7,  ///< ... and armed for solicited completions only
  kTfError = 1u << 8,      ///< CQE: error status
  kTfEq = 1u << 9,         ///< doorbell: the EQ arm doorbell (queue = EQN); else CQ arm when queue is set
};

/**
 * @brief Machine-readable facts of an event, beside its text. Filled by the emitting unit
 * (HCASIM_TRACE_F), or else derived from the text by derive_trace_fields(); kTraceNone / 0xffff
 * where not applicable. Sinks that link events (timeline flows), plot signals (VCD) or stop on
 * them (step mode) read these, never the text.
 */
struct TraceFields {
  uint32_t wqe = kTraceNone;       ///< SQ WQE index (WQEBB counter) or RQ WQE counter
  uint32_t psn = kTraceNone;       ///< packet PSN; first PSN of a message (wqe.decode)
  uint32_t psn_last = kTraceNone;  ///< last PSN of a message (wqe.decode)
  uint32_t peer_qpn = kTraceNone;  ///< the other end's QPN (packets: the BTH destination QP)
  uint32_t queue = kTraceNone;     ///< CQN (cq events), EQN (eqe.write), MSI-X vector (irq)
  /** Producer counter (SQ doorbell: new producer; cqe.write/eqe.write: counter after the write),
   *  or consumer index (cq.arm). */
  uint32_t index = kTraceNone;
  /** Bytes on the wire (pkt.tx), WQEBBs (SQ post/fetch), packets (wqe.decode), payload bytes (dma). */
  uint32_t count = kTraceNone;
  uint16_t opcode = 0xffff;  ///< BTH opcode (packets), CQE opcode (cqe.write)
  uint16_t flags = 0;        ///< TraceFlag bits
};

/** @brief One trace event. Strings are only built when tracing is on. */
struct TraceEvent {
  uint64_t time_ps = 0;  ///< simulated time
  uint32_t host = 0;     ///< host index in the world
  TraceUnit unit = TraceUnit::Driver;
  TraceKind kind = TraceKind::Note;
  uint32_t qpn = 0xffffffff;  ///< 0xffffffff: not QP-specific
  uint64_t wr_id = 0;
  bool has_wr_id = false;
  TraceFields f;     ///< typed facts (see TraceFields)
  std::string text;  ///< the step's facts, human readable
};

/**
 * @brief Fill @p ev.f from @p ev.text for events whose unit did not pass typed fields (the
 * driver's post lines, WQE fetch/decode, requester ACK/NAK, port packets). Called by the Tracer.
 */
void derive_trace_fields(TraceEvent& ev);

/** @brief Receives events; implementations live in sim/trace. */
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void record(const TraceEvent& ev) = 0;
  /** @brief End of the run: complete and flush the output. Later events are ignored. */
  virtual void finish() {}
  /**
   * @brief Whether events of this unit and kind can matter to the sink at all. Events nobody
   * wants are not formatted (a filtered trace or a VCD costs less than a full trace). Must not
   * change once the sink is attached.
   */
  virtual bool wants(TraceUnit, TraceKind) const { return true; }
};

/** @brief Per-HCA emitter: knows the host index and the sink (or none). */
class Tracer {
 public:
  void attach(TraceSink* sink, uint32_t host) { sink_ = sink; host_ = host; }
  bool on() const { return sink_ != nullptr; }
  /** @brief Some sink wants events of this unit and kind; call only when on(). */
  bool wants(TraceUnit unit, TraceKind kind) const { return sink_->wants(unit, kind); }
  uint32_t host() const { return host_; }
  /** @brief Format and record; call only when on(). */
  void emit(TraceUnit unit, TraceKind kind, uint32_t qpn, const char* fmt, ...)
      __attribute__((format(printf, 5, 6)));
  /** @brief Same, with a work-request id. */
  void emit_wr(TraceUnit unit, TraceKind kind, uint32_t qpn, uint64_t wr_id, const char* fmt, ...)
      __attribute__((format(printf, 6, 7)));
  /** @brief Same, with typed fields (not derived from the text). */
  void emit_f(TraceUnit unit, TraceKind kind, uint32_t qpn, const TraceFields& f, const char* fmt, ...)
      __attribute__((format(printf, 6, 7)));

 private:
  void vemit(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id,
             const TraceFields* f, const char* fmt, va_list ap);
  TraceSink* sink_ = nullptr;
  uint32_t host_ = 0;
};

}  // namespace hcasim::model

/**
 * Emit a trace event if tracing is on (one branch when off) and some sink wants this unit and
 * kind; arguments are not evaluated otherwise.
 */
#define HCASIM_TRACE(tracer, unit, kind, qpn, ...)                                                 \
  do {                                                                                             \
    if ((tracer).on() &&                                                                           \
        (tracer).wants(::hcasim::model::TraceUnit::unit, ::hcasim::model::TraceKind::kind))        \
      (tracer).emit(::hcasim::model::TraceUnit::unit, ::hcasim::model::TraceKind::kind, (qpn),     \
                    __VA_ARGS__);                                                                  \
  } while (0)

/**
 * Same, with typed fields: @p fields is an expression of type TraceFields, evaluated only when
 * tracing is on, e.g. `[&] { TraceFields f; f.queue = cqn; return f; }()`.
 */
#define HCASIM_TRACE_F(tracer, unit, kind, qpn, fields, ...)                                       \
  do {                                                                                             \
    if ((tracer).on() &&                                                                           \
        (tracer).wants(::hcasim::model::TraceUnit::unit, ::hcasim::model::TraceKind::kind))        \
      (tracer).emit_f(::hcasim::model::TraceUnit::unit, ::hcasim::model::TraceKind::kind, (qpn),   \
                      (fields), __VA_ARGS__);                                                      \
  } while (0)
