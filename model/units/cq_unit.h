// SPDX-License-Identifier: Apache-2.0
/**
 * @file cq_unit.h
 * @brief The completion unit: CQE bytes into the CQ ring (owner bit flipping on each wrap),
 *        CQ arming and the completion-event decision.
 *
 * Arming (verbs ibv_req_notify_cq) is one-shot. An armed CQ fires one event for the next CQE
 * written after the arm ("next"), or with solicited_only for the next receive CQE of a
 * solicited message or any error CQE. A pending "next" is never downgraded by a later
 * solicited-only arm; a "next" arm upgrades a pending solicited-only one. CQEs already in the
 * ring when the CQ is armed do not fire.
 */
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <hcasim/hca_hw.h>

#include "eq_unit.h"

namespace hcasim::model {

/** @brief A CQE opcode's name as traces print it ("REQ", "RESP_SEND", ...). */
const char* cqe_opcode_name(hw::CqeOpcode op);

/** @brief What the requester/responder report for one completion. */
struct CqeInfo {
  hw::CqeOpcode opcode = hw::CqeOpcode::Req;
  hw::CqeSyndrome syndrome = hw::CqeSyndrome::Ok;
  uint32_t qpn = 0;
  uint32_t src_qp = 0;
  uint16_t wqe_counter = 0;
  uint32_t srqn = 0;  ///< with hw::kCqeSrq: the SRQ wqe_counter indexes
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;   ///< network order
  uint8_t flags = 0;  ///< hw::CqeFlags
  hw::WqeOpcode req_opcode = hw::WqeOpcode::Nop;
};

class CqUnit {
 public:
  CqUnit(DmaEngine& dma, BufferTableWalker& bt, EqUnit& eq, const TimingProfile& prof, Tracer& tracer);

  bool create(const hw::Cqc& cqc);
  bool destroy(uint32_t cqn);
  /** @brief What resize() did. */
  enum class Resize { Ok, NoSuchCq, TooSmall };
  /**
   * @brief Switch CQ @p cqn to a new ring of 2^@p log_size CQEs at @p buf (ibv_resize_cq). The
   * producer count goes on, so the next CQE lands at index pi of the new ring; @p pi gets the
   * count at the switch: the CQEs from @p ci (software's consumer index) up to it are still in
   * the old ring, and software copies them to the same indices of the new one. TooSmall if
   * they would not fit.
   */
  Resize resize(uint32_t cqn, uint8_t log_size, const hw::BufferDesc& buf, uint32_t ci, uint32_t& pi);
  bool exists(uint32_t cqn) const { return cqs_.count(cqn) != 0; }
  /** @brief Numbers of all CQs (function reset). */
  std::vector<uint32_t> ids() const {
    std::vector<uint32_t> v;
    for (auto& [n, c] : cqs_) v.push_back(n);
    return v;
  }
  /** @brief The EQ a CQ reports to (0 if no such CQ). */
  uint32_t eqn_of(uint32_t cqn) const {
    auto it = cqs_.find(cqn);
    return it == cqs_.end() ? 0 : it->second.cqc.eqn;
  }
  /** @brief Called once when a CQ overflows (the HCA moves its QPs to ERR). */
  void set_overflow_handler(std::function<void(uint32_t cqn)> h) { on_overflow_ = std::move(h); }
  /**
   * @brief The CQ arm doorbell. @p pi_at_request is the CQ's producer count when the arm was
   * issued: completions that landed since then (while the store was in flight) fire the event
   * at once, since the request was for completions after it; earlier ones never do.
   */
  void arm(uint32_t cqn, uint32_t ci, uint32_t sn, bool solicited_only, uint32_t pi_at_request);
  /** @brief CQEs written to the CQ so far (0 for no such CQ). */
  uint32_t produced(uint32_t cqn) const {
    auto it = cqs_.find(cqn);
    return it == cqs_.end() ? 0 : it->second.pi;
  }
  /**
   * @brief CQEs in the CQ that software has not consumed: the producer count minus the
   * consumer index in the CQ's doorbell record, read from host memory now (DmaEngine::peek).
   * 0 for no such CQ or an unreadable record. Destroy-time hazard check only.
   */
  uint32_t unpolled(uint32_t cqn) const;
  /** @brief Queue a CQE; it lands in host memory after the PCIe write latency. */
  void post(uint32_t cqn, const CqeInfo& info);

  uint64_t cqes() const { return cqes_; }
  uint64_t events() const { return events_; }
  uint64_t overflows() const { return overflows_; }

  /** @brief Read-only state of one CQ, for inspection (step mode). */
  struct CqView {
    hw::Cqc cqc;
    uint32_t pi;       ///< CQEs written (producer counter)
    uint32_t ci_seen;  ///< consumer index from the last arm doorbell / doorbell-record read
    bool armed, solicited_only, overflowed;
    BufferCursor cursor;
  };
  bool peek(uint32_t cqn, CqView& out) const {
    auto it = cqs_.find(cqn);
    if (it == cqs_.end()) return false;
    const Cq& c = it->second;
    out = CqView{c.cqc, c.pi, c.ci_seen, c.armed, c.solicited_only, c.overflowed, c.cursor};
    return true;
  }

 private:
  struct Cq {
    hw::Cqc cqc;
    uint32_t pi = 0;
    uint32_t ci_seen = 0;
    bool armed = false;
    bool solicited_only = false;
    bool overflowed = false;
    uint32_t trigger_pi = 0;  ///< pi just after the last CQE a solicited-only arm fires for
    uint32_t event_pi = 0;    ///< pi when the last event fired (CQEs up to it are reported)
    BufferCursor cursor;
  };
  struct Pending {
    uint32_t cqn;
    CqeInfo info;
  };
  void land(Pending& p);
  /** @brief Whether @p cq can take a CQE (re-reading the consumer index if it looks full); on
   *  overflow reports it (once) and returns false. */
  bool has_room(uint32_t cqn, Cq& cq, const CqeInfo& in);
  /** @brief After a CQE landed: fire the CQ's completion event or say why not. */
  void decide_event(uint32_t cqn, Cq& cq, const CqeInfo& in);

  DmaEngine& dma_;
  BufferTableWalker& bt_;
  EqUnit& eq_;
  const TimingProfile& prof_;
  Tracer& tracer_;
  std::unordered_map<uint32_t, Cq> cqs_;
  TimedQueue<Pending> landing_;
  std::function<void(uint32_t)> on_overflow_;
  uint64_t cqes_ = 0, events_ = 0, overflows_ = 0;
};

}  // namespace hcasim::model
