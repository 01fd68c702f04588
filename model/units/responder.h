// SPDX-License-Identifier: Apache-2.0
/**
 * @file responder.h
 * @brief RC responder: PSN checks (duplicates re-ACKed, gaps NAKed once), receive-WQE fetch
 *        (the WQE-fetch unit: the RQ's buffer table and doorbell record), rkey checks, payload DMA writes,
 *        READ responses, ACK/NAK/RNR-NAK generation and responder completions.
 */
#pragma once

#include <cstdint>

#include "hca_core.h"

namespace hcasim::model {

/** @brief The RC responder: one per HCA, serving every QP's receive side. */
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

 private:
  /** @brief A request with a PSN already seen: acknowledge (or answer) it again. */
  void on_duplicate(QpContext& qp, const wire::Headers& h);
  /** @brief The expected request, by opcode class. */
  void on_send(QpContext& qp, const wire::ParsedFrame& f);
  void on_write(QpContext& qp, const wire::ParsedFrame& f);
  void on_read(QpContext& qp, const wire::Headers& h);
  /** @brief No receive WQE for a message that needs one: RNR NAK (@p why goes to the trace). */
  void rnr_nak(QpContext& qp, uint32_t psn, const char* why);
  bool take_recv(QpContext& qp);
  void send_ack(QpContext& qp, uint32_t psn, uint8_t syndrome);
  void read_response(QpContext& qp, uint32_t psn, const wire::Reth& reth);
  void atomic(QpContext& qp, const wire::Headers& h);
  void atomic_ack(QpContext& qp, uint32_t psn, uint64_t orig);
  void recv_error(QpContext& qp, hw::CqeSyndrome status);
  void completion(QpContext& qp, hw::CqeOpcode op, uint32_t len, const wire::Headers& h);
  /** @brief Responder-side fatal error: NAK the requester, complete the receive in error, QP to ERR. */
  void fatal(QpContext& qp, uint32_t psn, wire::NakCode nak, hw::CqeSyndrome recv_status, const char* why);

  TransportUnits u_;
  QpErrorHandler to_error_;
  uint64_t acks_ = 0, naks_ = 0, rnr_naks_ = 0, dups_ = 0, recv_wqes_ = 0;
};

}  // namespace hcasim::model
