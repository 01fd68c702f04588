// SPDX-License-Identifier: Apache-2.0
/**
 * @file requester.h
 * @brief RC requester: doorbell -> WQE fetch (through the SQ's buffer table) -> decode ->
 *        payload gather (MR checks, DMA) -> MTU segmentation into RoCEv2 packets with PSNs;
 *        ACK/NAK and READ-response handling, retransmission from the first unacknowledged
 *        PSN (go-back-N), requester completions.
 */
#pragma once

#include <cstdint>

#include "hca_core.h"
#include "timer_set.h"

namespace hcasim::model {

/** @brief The RC requester: one per HCA, serving every QP's send queue. */
class Requester {
 public:
  explicit Requester(const TransportUnits& units);

  /** @brief Who moves a QP to ERR (and flushes it) when the requester fails one. */
  void set_error_handler(QpErrorHandler h) { to_error_ = std::move(h); }
  /** @brief An SQ doorbell landed: @p pi is the new producer counter. */
  void doorbell(uint32_t qpn, uint16_t pi);
  /** @brief A response (ACK/NAK, READ response) arrived for @p qp. */
  void on_response(QpContext& qp, const wire::ParsedFrame& f);
  /** @brief QP entered SQD: report SQ drained now if nothing is outstanding. */
  void drained_check(QpContext& qp) { check_drained(qp); }
  /** @brief QP entered ERR: complete every outstanding and posted send WQE with a flush error. */
  void flush(QpContext& qp);

  uint64_t wqes() const { return wqes_; }
  uint64_t retransmits() const { return retransmits_; }

 private:
  enum class Stage : uint8_t { Fetch, Decode, Tx };
  struct Job {
    uint32_t qpn;
    Stage stage;
  };
  void run(Job& job);
  void schedule(QpContext& qp, Stage stage, uint64_t at_ps);
  void fetch(QpContext& qp);
  void decode(QpContext& qp);
  void tx(QpContext& qp);
  bool gather(QpContext& qp, const InflightMsg& m, uint32_t offset, uint32_t len, uint8_t* dst);
  void complete_through(QpContext& qp, uint32_t psn);
  void complete(QpContext& qp, const InflightMsg& m, hw::CqeSyndrome status);
  void fail_front(QpContext& qp, hw::CqeSyndrome status, const char* why);
  void local_fail(QpContext& qp, InflightMsg& m, hw::CqeSyndrome status, const char* why);
  void rewind(QpContext& qp, uint32_t psn);
  /** @brief Local ACK timer: (re)start while requests are unacknowledged, stop when none are. */
  void restart_timer(QpContext& qp);
  void on_timeout(uint32_t qpn);
  /** @brief In SQD with async notify and nothing outstanding: raise SQ drained once. */
  void check_drained(QpContext& qp);

  TransportUnits u_;
  QpErrorHandler to_error_;
  TimedQueue<Job> jobs_;
  TimerSet ack_timer_;
  uint64_t wqes_ = 0, retransmits_ = 0;
};

}  // namespace hcasim::model
