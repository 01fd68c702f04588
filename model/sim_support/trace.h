// SPDX-License-Identifier: Apache-2.0
/**
 * @file trace.h
 * @brief Typed trace events emitted by every hardware unit, and the sink interface.
 *
 * Units call HCASIM_TRACE(tracer, unit, kind, qpn, fields, fmt, ...), which costs one
 * predictable branch when tracing is off: nothing is formatted, and no argument is evaluated,
 * unless a sink is attached.
 */
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>

#include <hcasim/trace_event.h>

namespace hcasim::model {

// The event vocabulary (units, kinds, typed fields) is shared with the driver and the sinks.
using namespace ::hcasim::trace;  // NOLINT(google-build-using-namespace)

/** @brief One trace event. Strings are only built when tracing is on. */
struct TraceEvent {
  uint64_t time_ps = 0;  ///< simulated time
  uint32_t host = 0;     ///< host index in the world
  TraceUnit unit = TraceUnit::Driver;
  TraceKind kind = TraceKind::Note;
  uint32_t qpn = kTraceNone;  ///< kTraceNone: not QP-specific
  uint64_t wr_id = 0;
  bool has_wr_id = false;
  TraceFields f;     ///< typed facts (see TraceFields)
  std::string text;  ///< the step's facts, human readable
};

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
  /**
   * @brief Whether, of the events of this unit and kind it wants, the sink wants those that
   * are not failures too (kTfError clear). A sink that reports only failures (the error
   * explainer, always attached) says no, so a successful step of that kind, a CQE say, is not
   * formatted for it. Must not change once the sink is attached.
   */
  virtual bool wants_success(TraceUnit u, TraceKind k) const { return wants(u, k); }
};

/** @brief Per-HCA emitter: knows the host index and the sink (or none). */
class Tracer {
 public:
  void attach(TraceSink* sink, uint32_t host) {
    sink_ = sink;
    host_ = host;
  }
  bool on() const { return sink_ != nullptr; }
  /** @brief Some sink wants events of this unit and kind; call only when on(). */
  bool wants(TraceUnit unit, TraceKind kind) const { return sink_->wants(unit, kind); }
  /** @brief Same, for an event that is a failure (@p error) or not; call only when on(). */
  bool wants(TraceUnit unit, TraceKind kind, bool error) const {
    return error ? sink_->wants(unit, kind) : sink_->wants_success(unit, kind);
  }
  uint32_t host() const { return host_; }
  /** @brief Format the text from @p fmt and record it with @p f; call only when on(). */
  void emit(TraceUnit unit, TraceKind kind, uint32_t qpn, const TraceFields& f, const char* fmt, ...)
      __attribute__((format(printf, 6, 7)));
  /** @brief Same, about a work request. */
  void emit_wr(TraceUnit unit, TraceKind kind, uint32_t qpn, uint64_t wr_id, const TraceFields& f,
               const char* fmt, ...) __attribute__((format(printf, 7, 8)));
  /** @brief Record an event whose text was rendered elsewhere (the driver's lines). */
  void record(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id, const TraceFields& f,
              std::string text);

 private:
  void vemit(TraceUnit unit, TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id, const TraceFields& f,
             const char* fmt, va_list ap);
  TraceSink* sink_ = nullptr;
  uint32_t host_ = 0;
};

}  // namespace hcasim::model

/**
 * Emit a trace event if tracing is on (one branch when off) and some sink wants this unit and
 * kind; arguments are not evaluated otherwise. @p fields is a TraceFields expression, e.g.
 * `TraceFields().set_queue(cqn)`: the event's facts as data; the format renders them for people.
 */
#define HCASIM_TRACE(tracer, unit, kind, qpn, fields, ...)                                                   \
  do {                                                                                                       \
    if ((tracer).on() && (tracer).wants(::hcasim::trace::TraceUnit::unit, ::hcasim::trace::TraceKind::kind)) \
      (tracer).emit(::hcasim::trace::TraceUnit::unit, ::hcasim::trace::TraceKind::kind, (qpn), (fields),     \
                    __VA_ARGS__);                                                                            \
  } while (0)

/**
 * The same for an event that may be a failure or a success (@p error): a sink that wants only
 * failures of this kind does not get the successes formatted for it.
 */
#define HCASIM_TRACE_OUTCOME(tracer, unit, kind, error, qpn, fields, ...)                                \
  do {                                                                                                   \
    if ((tracer).on() &&                                                                                 \
        (tracer).wants(::hcasim::trace::TraceUnit::unit, ::hcasim::trace::TraceKind::kind, (error)))     \
      (tracer).emit(::hcasim::trace::TraceUnit::unit, ::hcasim::trace::TraceKind::kind, (qpn), (fields), \
                    __VA_ARGS__);                                                                        \
  } while (0)
