// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace.h
 * @brief Typed trace events emitted by every hardware unit, and the sink interface.
 *
 * Units call HCASIM_TRACE(...) which costs one predictable branch when tracing is off:
 * nothing is formatted unless a sink is attached.
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

/** @brief One trace event. Strings are only built when tracing is on. */
struct TraceEvent {
  uint64_t time_ps = 0;  ///< simulated time
  uint32_t host = 0;     ///< host index in the world
  TraceUnit unit = TraceUnit::Driver;
  TraceKind kind = TraceKind::Note;
  uint32_t qpn = 0xffffffff;  ///< 0xffffffff: not QP-specific
  uint64_t wr_id = 0;
  bool has_wr_id = false;
  std::string text;  ///< the step's facts, human readable
};

/** @brief Receives events; implementations live in sim/trace. */
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void record(const TraceEvent& ev) = 0;
};

/** @brief Per-HCA emitter: knows the host index and the sink (or none). */
class Tracer {
 public:
  void attach(TraceSink* sink, uint32_t host) { sink_ = sink; host_ = host; }
  bool on() const { return sink_ != nullptr; }
  uint32_t host() const { return host_; }
  /** @brief Format and record; call only when on(). */
  void emit(TraceUnit unit, TraceKind kind, uint32_t qpn, const char* fmt, ...)
      __attribute__((format(printf, 5, 6)));
  /** @brief Same, with a work-request id. */
  void emit_wr(TraceUnit unit, TraceKind kind, uint32_t qpn, uint64_t wr_id, const char* fmt, ...)
      __attribute__((format(printf, 6, 7)));

 private:
  void vemit(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id,
             const char* fmt, va_list ap);
  TraceSink* sink_ = nullptr;
  uint32_t host_ = 0;
};

}  // namespace hcasim::model

/** Emit a trace event if tracing is on; arguments are not evaluated otherwise. */
#define HCASIM_TRACE(tracer, unit, kind, qpn, ...)                                             \
  do {                                                                                         \
    if ((tracer).on())                                                                         \
      (tracer).emit(::hcasim::model::TraceUnit::unit, ::hcasim::model::TraceKind::kind, (qpn), \
                    __VA_ARGS__);                                                              \
  } while (0)
