// SPDX-License-Identifier: Apache-2.0
/**
 * @file responder.h
 * @brief The responder: RC PSN checks (duplicates re-ACKed, gaps NAKed once), receive-WQE fetch
 *        (the WQE-fetch unit: the RQ's or the shared receive queue's buffer table and doorbell
 *        record), rkey checks, payload DMA writes, READ responses, ACK/NAK/RNR-NAK generation and
 *        responder completions; UC and UD receive without ACKs (responder_unreliable.cpp).
 */
#pragma once

#include <string>

#include <cstdint>

#include "hca_core.h"

namespace hcasim::model {

/** @brief The responder: one per HCA, serving every QP's receive side (RC, UC and UD). */
class Responder {
 public:
  explicit Responder(const TransportUnits& units) : u_(units) {}

  /** @brief Who moves a QP to ERR (and flushes it) when the responder fails one. */
  void set_error_handler(QpErrorHandler h) { to_error_ = std::move(h); }

  /** @brief A request packet arrived for @p qp. */
  void on_request(QpContext& qp, const wire::ParsedFrame& f);
  /** @brief QP entered ERR: complete every posted receive WQE with a flush error. */
  void flush(QpContext& qp);

  /** @brief ACKs (and atomic ACKs) this HCA sent for requests it received. */
  uint64_t acks() const { return acks_; }
  /** @brief Receive WQEs fetched (one per SEND message received). */
  uint64_t recv_wqes() const { return recv_wqes_; }
  uint64_t naks() const { return naks_; }
  uint64_t rnr_naks() const { return rnr_naks_; }
  uint64_t duplicates() const { return dups_; }
  /** @brief UC/UD packets dropped (no receive WQE, PSN gap, failed check): unreliable, never NAKed. */
  uint64_t unreliable_drops() const { return unreliable_drops_; }
  /** @brief UD packets dropped because their Q_Key was not the QP's. */
  uint64_t qkey_violations() const { return qkey_violations_; }

 private:
  /** @brief A request with a PSN already seen: acknowledge (or answer) it again. */
  void on_duplicate(QpContext& qp, const wire::Headers& h);
  /** @brief The expected request, by opcode class. */
  void on_send(QpContext& qp, const wire::ParsedFrame& f);
  void on_write(QpContext& qp, const wire::ParsedFrame& f);
  void on_read(QpContext& qp, const wire::Headers& h);
  /** @brief SEND with invalidate: invalidate its IETH rkey; false after failing the request. */
  bool remote_invalidate(QpContext& qp, const wire::Headers& h);
  /** @brief No receive WQE for a message that needs one: RNR NAK (@p why goes to the trace). */
  void rnr_nak(QpContext& qp, uint32_t psn, const char* why);
  bool take_recv(QpContext& qp);
  /** @brief take_recv from shared receive queue @p srqn (the QP's, or the one an XRC request names). */
  bool take_srq_recv(QpContext& qp, uint32_t srqn);
  /** @brief XRC receive QP: the XRCETH names an XRC SRQ of the QP's domain; false after NAKing it. */
  bool xrc_target(QpContext& qp, const wire::Headers& h);
  /** @brief The PD a request's keys are checked in: the QP's, or for XRC the named SRQ's. */
  uint32_t request_pdn(const QpContext& qp) const;
  /** @brief Where the receive WQE in progress completes (an XRC SRQ's CQ, or the QP's). */
  uint32_t recv_cqn(const QpContext& qp) const;
  /** @brief After an SRQ WQE was taken: fewer WQEs left than its armed limit raise the limit event. */
  void check_srq_limit(SrqContext& srq, uint32_t qpn);
  /**
   * @brief Place @p len bytes at byte @p offset of the receive WQE in progress (its lkeys checked
   * for local write). False on a protection fault; @p left gets the bytes that did not fit.
   */
  bool place(QpContext& qp, uint32_t offset, const uint8_t* src, uint32_t len, uint32_t& left);
  /** @brief UC request: no ACKs; a PSN gap loses the message in progress (IBTA 9.7.6.1.x / rxe). */
  void on_uc_request(QpContext& qp, const wire::ParsedFrame& f);
  void uc_send(QpContext& qp, const wire::ParsedFrame& f);
  void uc_write(QpContext& qp, const wire::ParsedFrame& f);
  /** @brief UC: lose the message @p h belongs to (traced as @p why); the receive WQE is kept. */
  void uc_drop(QpContext& qp, const wire::Headers& h, const char* why);
  /** @brief UD request: Q_Key check, a receive WQE, the 40-byte network header, then the payload. */
  void on_ud_request(QpContext& qp, const wire::ParsedFrame& f);
  void ud_drop(QpContext& qp, const wire::Headers& h, const char* why);
  /** @brief Trace what management datagram a packet for the GSI QP carries. */
  void note_mad(QpContext& qp, const wire::ParsedFrame& f);
  void send_ack(QpContext& qp, uint32_t psn, uint8_t syndrome);
  void read_response(QpContext& qp, uint32_t psn, const wire::Reth& reth);
  void atomic(QpContext& qp, const wire::Headers& h);
  void atomic_ack(QpContext& qp, uint32_t psn, uint64_t orig);
  void recv_error(QpContext& qp, hw::CqeSyndrome status);
  /** @brief Complete the receive WQE in progress; @p src_qp and @p flags as the transport gives them. */
  void completion(QpContext& qp, hw::CqeOpcode op, uint32_t len, const wire::Headers& h, uint32_t src_qp,
                  uint8_t flags = 0);
  /**
   * @brief The remote access checks of an RDMA WRITE, READ or atomic: first the QP's own
   * permission (qp_access_flags), then the rkey's region or window. Empty when allowed, else
   * the reason, naming which check refused: the QP's or the memory's (they are different
   * mistakes in a program). @p nak is the NAK the refusal earns: Invalid Request when the QP
   * does not enable the operation (as rxe, qib and hfi1 answer), Remote Access Error when the
   * rkey check fails (IBTA 9.7.5.2, NAK codes).
   */
  std::string remote_access_refusal(QpContext& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                                    wire::NakCode& nak);
  /** @brief Responder-side fatal error: NAK the requester, complete the receive in error, QP to ERR. */
  void fatal(QpContext& qp, uint32_t psn, wire::NakCode nak, hw::CqeSyndrome recv_status, const char* why);

  TransportUnits u_;
  QpErrorHandler to_error_;
  uint64_t acks_ = 0, naks_ = 0, rnr_naks_ = 0, dups_ = 0, recv_wqes_ = 0;
  uint64_t unreliable_drops_ = 0, qkey_violations_ = 0;
};

}  // namespace hcasim::model
