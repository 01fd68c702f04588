// SPDX-License-Identifier: Apache-2.0
/**
 * @file requester.h
 * @brief The requester: doorbell -> WQE fetch and decode (the WQE-fetch unit) -> payload gather (MR
 * checks, DMA) -> MTU segmentation into RoCEv2 packets with PSNs; for RC, ACK/NAK and READ-response
 * handling, retransmission from the first unacknowledged PSN (go-back-N); UC and UD messages
 * complete when their last packet has left; requester completions.
 */
#pragma once

#include <cstdint>

#include "hca_core.h"
#include "timer_set.h"

namespace hcasim::model {

/** @brief The verbs name of a send WQE opcode ("SEND", "RDMA_WRITE", ...). */
const char* wqe_opcode_name(hw::WqeOpcode op);
/** @brief Last PSN of in-flight message @p m. */
uint32_t last_psn(const InflightMsg& m);

/** @brief The requester: one per HCA, serving every QP's send queue (RC, UC and UD). */
class Requester {
 public:
  explicit Requester(const TransportUnits& units);

  /** @brief Who moves a QP to ERR (and flushes it) when the requester fails one. */
  void set_error_handler(QpErrorHandler h) { to_error_ = std::move(h); }
  /** @brief The port sent the last frame of an unreliable message: it completes at @p tx_end_ps. */
  void on_sent(const Packet& pkt, uint64_t tx_end_ps);
  /**
   * @brief An SQ doorbell landed: @p pi is the new producer counter. With @p pushed (the
   * BlueFlame register) the one WQE it announces came with the store: it is not read by DMA.
   */
  void doorbell(uint32_t qpn, uint16_t pi, bool pushed = false);
  /** @brief A response (ACK/NAK, READ response) arrived for @p qp. */
  void on_response(QpContext& qp, const wire::ParsedFrame& f);
  /** @brief QP entered SQD: report SQ drained now if nothing is outstanding. */
  void drained_check(QpContext& qp) { check_drained(qp); }
  /** @brief QP entered ERR: complete every outstanding and posted send WQE with a flush error. */
  void flush(QpContext& qp);

  /** @brief Send WQEs fetched and started. */
  uint64_t wqes() const { return wqes_; }
  /** @brief ACKs (and atomic ACKs) received for this HCA's requests. */
  uint64_t acks_received() const { return acks_received_; }
  uint64_t retransmits() const { return retransmits_; }

 private:
  /** Complete: an unreliable (UC/UD) message's last packet has left; it completes now. */
  enum class Stage : uint8_t { Fetch, Decode, Tx, Complete };
  struct Job {
    uint32_t qpn;
    Stage stage;
    uint32_t psn = 0;  ///< Complete: the last PSN that has left
  };
  void run(Job& job);
  void schedule(QpContext& qp, Stage stage, uint64_t at_ps, uint32_t psn = 0);
  /** @brief Whether @p m (the newest in flight) may be sent on @p qp's transport (UD: one SEND
   *  of at most an MTU); if not, it is set to fail in its turn. */
  bool transport_allows(QpContext& qp, InflightMsg& m, uint32_t mtu);
  /** @brief Execute a bind or local invalidate WQE in its turn; false after failing it. */
  bool memory_op(QpContext& qp, InflightMsg& m);
  void fetch(QpContext& qp);
  void decode(QpContext& qp);
  void tx(QpContext& qp);
  /** @brief State of one transmit pass: payload reads of its packets overlap. */
  struct TxBatch {
    uint64_t now = 0;
    uint32_t mtu = 0;
    uint64_t ready = 0;      ///< when the last payload read completes
    bool first_read = true;  ///< no payload read yet in this pass
  };
  /** @brief Fence or max_rd_atomic holds @p m back (traced); it resumes on a response. */
  bool must_wait(QpContext& qp, const InflightMsg& m);
  /** @brief Local key checks of @p m's whole gather (READ/atomic: scatter) list. */
  bool lkeys_ok(QpContext& qp, const InflightMsg& m);
  /** @brief Build and queue @p m's next packet (qp.tx_pkt); false after failing @p m locally. */
  bool send_packet(QpContext& qp, InflightMsg& m, TxBatch& batch);
  /** @brief A datagram for a GID nobody owns: lost on the wire, complete as sent (true). */
  bool lose_datagram(QpContext& qp, InflightMsg& m, uint32_t psn, const TxBatch& batch);
  bool gather(QpContext& qp, const InflightMsg& m, uint32_t offset, uint32_t len, uint8_t* dst);
  /** @brief Place @p len response bytes at byte @p offset of @p m's scatter list. */
  bool scatter(QpContext& qp, const InflightMsg& m, uint32_t offset, const uint8_t* src, uint32_t len);
  void on_ack(QpContext& qp, const wire::Headers& h);
  void on_nak(QpContext& qp, uint32_t psn, uint8_t syndrome);
  void on_read_response(QpContext& qp, const wire::ParsedFrame& f);
  void on_atomic_ack(QpContext& qp, const wire::Headers& h);
  void complete_through(QpContext& qp, uint32_t psn);
  /** @brief An ACK for @p psn covers the first packets of @p m (not all): true if that is news. */
  static bool partly_acked(InflightMsg& m, uint32_t psn);
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
  uint64_t wqes_ = 0, retransmits_ = 0, acks_received_ = 0;
};

}  // namespace hcasim::model
