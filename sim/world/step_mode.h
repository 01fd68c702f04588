// SPDX-License-Identifier: Apache-2.0
/**
 * @file step_mode.h
 * @brief Step mode: pause after each hardware event (or each event matching a filter) and read
 *        commands — continue, run to the next event of a kind, print QP / buffer-table / CQ state.
 *
 * The controller is a trace sink: the pause happens inside record(), where the device lock is
 * held and the model is frozen between two steps of a unit, so printing state there is safe and
 * has no effect on the simulation (no cache, counter or trace side effects).
 *
 * Commands (one per line; see help_text()):
 *   s | step | (empty line) run to the next pausing event
 *   c [N] | continue [N]     run N pausing events (default 1), pause after the N-th
 *   n WHAT | next WHAT       run to the next event of a kind, ignoring the step filter:
 *                            cqe, pkt (a packet on a port), doorbell, irq, eqe, event, arm,
 *                            any event name (pkt.rx, wqe.fetch, ...) or a filter spec (kind=ack;host=1)
 *   p qp QPN [HOST]          QP context, SQ/RQ producer/consumer indices, PSNs
 *   p bt QPN [HOST]          the SQ's and RQ's buffer tables, entry by entry
 *   p cq CQN [HOST]          CQ arm state, producer/consumer indices
 *   p stats                  every device's counters
 *   p eq EQN [HOST]          event queue: indices, arm state, ring
 *   p mr KEY [HOST]          memory region or window: PD, range, access, pages
 *   x wqe|rwqe QPN IDX [HOST], x cqe CQN IDX [HOST], x eqe EQN IDX [HOST]
 *                            one ring entry: its bytes and decoded fields, owner bit explained
 *   drop next [HOST]         the wire loses the next frame HOST receives (default: any host)
 *   q | quit                 stop pausing; the program runs to completion
 *   h | help                 this list
 * HOST is an index or a device name; it defaults to the host a QPN belongs to (QPNs carry their
 * host's index in bits 16..23), else to the host of the current event.
 * End of input acts as quit.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "text_trace.h"
#include "trace.h"

namespace hcasim::model {
class Hca;
}

namespace hcasim::sim {

/** @brief What "p" commands print; World implements it over its HCAs. */
class ModelInspector {
 public:
  virtual ~ModelInspector() = default;
  virtual std::string qp(uint32_t host, uint32_t qpn) = 0;
  virtual std::string bt(uint32_t host, uint32_t qpn) = 0;
  virtual std::string cq(uint32_t host, uint32_t cqn) = 0;
  /** @brief Shared receive queue @p srqn of @p host: context, indices, armed limit, ring. */
  virtual std::string srq(uint32_t host, uint32_t srqn) = 0;
  /** @brief Event queue @p eqn of @p host: size, indices, arm state, ring. */
  virtual std::string eq(uint32_t host, uint32_t eqn) = 0;
  /** @brief The memory region or window with key @p key on @p host: PD, range, access, pages. */
  virtual std::string mr(uint32_t host, uint32_t key) = 0;
  /**
   * @brief Entry @p index of a ring as the hardware reads it, bytes and decoded fields:
   * @p what is "wqe" (send queue of QP @p queue), "rwqe" (its receive queue), "cqe" (CQ @p queue)
   * or "eqe" (EQ @p queue); owner bits are decoded against the ring's current pass.
   */
  virtual std::string raw(uint32_t host, const std::string& what, uint32_t queue, uint32_t index) = 0;
  virtual std::string stats() = 0;
};

/**
 * @brief The IOMMU mappings of one host, mirrored where the driver makes them, so the step
 * mode can read buffer-table entries without touching the model's IOMMU (its IOTLB and counters).
 */
class IommuShadow {
 public:
  void map(uint64_t iova, void* hva, uint64_t len) { map_[iova] = {static_cast<uint8_t*>(hva), len}; }
  void unmap(uint64_t iova) { map_.erase(iova); }
  /** @brief Copy @p len bytes at @p iova (within one mapping); false if unmapped. */
  bool read(uint64_t iova, void* dst, uint64_t len) const;

 private:
  std::map<uint64_t, std::pair<uint8_t*, uint64_t>> map_;
};

/** @brief ModelInspector over a list of HCAs (with their IOMMU shadows). */
class HcaInspector : public ModelInspector {
 public:
  HcaInspector(std::vector<model::Hca*> hcas, std::vector<const IommuShadow*> mem,
               std::function<std::string()> stats)
      : hcas_(std::move(hcas)), mem_(std::move(mem)), stats_(std::move(stats)) {}
  std::string qp(uint32_t host, uint32_t qpn) override;
  std::string bt(uint32_t host, uint32_t qpn) override;
  std::string cq(uint32_t host, uint32_t cqn) override;
  std::string srq(uint32_t host, uint32_t srqn) override;
  std::string eq(uint32_t host, uint32_t eqn) override;
  std::string mr(uint32_t host, uint32_t key) override;
  std::string raw(uint32_t host, const std::string& what, uint32_t queue, uint32_t index) override;
  std::string stats() override { return stats_ ? stats_() : std::string(); }

 private:
  std::vector<model::Hca*> hcas_;
  std::vector<const IommuShadow*> mem_;
  std::function<std::string()> stats_;
};

class StepController : public model::TraceSink {
 public:
  /**
   * @param in command source
   * @param own_in close @p in at finish()
   * @param out where events, prompts and answers go
   * @param echo repeat each command read (scripts: keeps the transcript readable)
   * @param host_names the name of each host index
   * @param inspector reads model state for the print commands
   */
  StepController(FILE* in, bool own_in, FILE* out, bool echo, std::vector<std::string> host_names,
                 ModelInspector* inspector);
  ~StepController() override;
  /** @brief Events that pause (empty: every event). */
  TraceFilter filter;
  /** @brief What `drop next [HOST]` calls (DropRule::kAny: whichever host receives first). */
  std::function<void(uint32_t host)> on_drop_next;
  void record(const model::TraceEvent& ev) override;
  void finish() override;
  /** @brief Still pausing (no quit, input not exhausted). */
  bool active() const { return active_; }
  uint64_t pauses() const { return pauses_; }
  static const char* help_text();

 private:
  void pause(const model::TraceEvent& ev);
  /** Run one command; true when the simulation should resume. */
  bool execute(const std::string& line, const model::TraceEvent& ev);
  /** c [N], n WHAT, p ...: @p w is the command's words; the result as for execute(). */
  bool cmd_continue(const std::vector<std::string>& w);
  bool cmd_next(const std::vector<std::string>& w);
  bool cmd_print(const std::vector<std::string>& w, const model::TraceEvent& ev);
  bool cmd_drop(const std::vector<std::string>& w);
  bool cmd_examine(const std::vector<std::string>& w, const model::TraceEvent& ev);
  bool host_arg(const std::vector<std::string>& w, size_t i, uint32_t cur, uint32_t& host);
  /** @brief The host a command means without HOST: a QPN's own host, else the current event's. */
  uint32_t default_host(bool is_qpn, uint32_t number, uint32_t current) const;

  FILE* in_;
  bool own_in_;
  FILE* out_;
  bool echo_;
  std::vector<std::string> names_;
  ModelInspector* insp_;
  bool active_ = true;
  bool done_ = false;
  uint64_t skip_ = 0;   ///< pausing events still to run through (c N)
  bool until_ = false;  ///< n WHAT in progress
  TraceFilter until_filter_;
  uint64_t pauses_ = 0;
};

}  // namespace hcasim::sim
