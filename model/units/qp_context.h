// SPDX-License-Identifier: Apache-2.0
/**
 * @file qp_context.h
 * @brief A QP as the HCA holds it: the programmed QPC plus the requester's and responder's
 *        running state (what real hardware keeps in its QPC and on-chip caches).
 */
#pragma once

#include <cstdint>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"
#include "ring.h"

namespace hcasim::model {

constexpr uint32_t kMaxSge = 16;
constexpr uint32_t kMaxInline = 3 * 64 - 16 - 4;  // what fits in a 4-WQEBB WQE after ctrl+raddr

/** @brief One scatter/gather element as decoded from a WQE. */
struct Sge {
  uint64_t addr;
  uint32_t len;
  uint32_t lkey;
};

/**
 * @brief Walk bytes [offset, offset + len) of a message laid out over the list @p sge[0..n):
 * @p piece(sge, addr, bytes) is called for each contiguous piece in order. Returns false as soon
 * as @p piece does; @p left receives the bytes of the range no element covered (0 when the list
 * is long enough).
 */
template <typename F>
bool walk_sges(const Sge* sge, uint32_t n, uint32_t offset, uint32_t len, uint32_t& left, F&& piece) {
  uint32_t skip = offset;
  left = len;
  for (uint32_t i = 0; i < n && left; ++i) {
    const Sge& s = sge[i];
    if (skip >= s.len) {
      skip -= s.len;
      continue;
    }
    const uint32_t take = s.len - skip < left ? s.len - skip : left;
    if (!piece(s, s.addr + skip, take)) return false;
    left -= take;
    skip = 0;
  }
  return true;
}

/** @brief A decoded send WQE. */
struct SendWqe {
  uint16_t index = 0;  ///< first WQEBB counter
  uint8_t nbb = 1;
  hw::WqeOpcode op = hw::WqeOpcode::Nop;
  uint8_t flags = 0;  ///< hw::CtrlFlags
  uint32_t imm = 0;   ///< network order
  uint64_t raddr = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0, compare = 0;
  uint32_t nsge = 0;
  Sge sge[kMaxSge];
  uint32_t length = 0;  ///< message length
  bool is_inline = false;
  uint8_t inline_buf[kMaxInline];
  hw::DatagramAddr av;    ///< UD: where this message goes (the WQE's datagram segment)
  hw::BindInfo bind;      ///< BindMw: the window bind (the WQE's bind segment)
  uint32_t xrc_srqn = 0;  ///< XRC send: the remote XRC SRQ (the WQE's XRC segment)
};

/** @brief A message the requester has started: kept until completed, for retransmission. */
struct InflightMsg {
  /** @brief Starts the message of WQE @p wqe in this (reused) slot: no progress yet. */
  void start(const SendWqe& wqe, uint32_t psn) {
    static_assert(sizeof(InflightMsg) == sizeof(SendWqe) + 24, "a new field must be reset here");
    w = wqe;
    first_psn = psn;
    npkts = read_bytes = acked_pkts = 0;
    sent = responded = false;
    local_error = hw::CqeSyndrome::Ok;
  }
  SendWqe w;
  uint32_t first_psn = 0;
  uint32_t npkts = 0;       ///< PSNs the message occupies (READ: response packets)
  uint32_t read_bytes = 0;  ///< READ: response bytes placed so far
  uint32_t acked_pkts = 0;  ///< SEND/WRITE: leading packets an ACK covered (a retry resumes after them)
  bool sent = false;        ///< every request packet transmitted at least once
  hw::CqeSyndrome local_error = hw::CqeSyndrome::Ok;  ///< failed locally; completes in order
  bool responded = false;                             ///< READ/atomic: its response (all of it) arrived
};

/** @brief Receive WQE being filled by an incoming SEND. */
struct RecvInProgress {
  bool active = false;
  bool srq = false;   ///< taken from the QP's shared receive queue (index is the SRQ's)
  uint32_t srqn = 0;  ///< that SRQ
  uint32_t cqn = 0;   ///< an XRC SRQ's completion queue (0: the QP's receive CQ)
  uint32_t pdn = 0;   ///< the PD its lkeys belong to (the SRQ's, or the QP's)
  uint16_t index = 0;
  uint32_t nsge = 0;
  Sge sge[kMaxSge];
  uint32_t offset = 0;  ///< bytes placed so far
};

struct QpContext {
  hw::Qpc qpc{};
  // ---- requester
  uint16_t sq_pi = 0;           ///< producer counter from the last doorbell (WQEBBs)
  uint16_t sq_fetch = 0;        ///< next WQEBB to fetch
  Ring<SendWqe> fetched;        ///< fetched, waiting for decode
  Ring<uint16_t> pushed;        ///< WQEs that came with a BlueFlame store: no DMA read (start WQEBB)
  Ring<InflightMsg> inflight;   ///< decoded, not yet completed
  uint8_t rnr_left = 0;         ///< RNR retries left (7 = infinite)
  uint64_t rnr_wait_until = 0;  ///< an RNR NAK's wait: nothing is sent before it (IBTA 9.7.5.2.8)
  uint8_t retry_left = 0;       ///< transport retries left after a local ACK timeout
  bool sqd_notify = false;      ///< entered SQD with async notify: report SQ drained
  size_t tx_msg = 0;            ///< transmit cursor: message index into inflight
  uint32_t tx_pkt = 0;          ///< and packet within it
  uint32_t next_psn = 0;
  bool tx_scheduled = false;
  uint64_t req_tx_last = 0;   ///< ready time of this QP's last request frame (stream order)
  uint64_t resp_tx_last = 0;  ///< ready time of its last response frame (ACK, READ/atomic response)
  BufferCursor sq_cursor;
  // ---- responder
  uint32_t epsn = 0;
  uint32_t msn = 0;
  uint16_t rq_ci = 0;       ///< next RQ WQE to consume
  uint16_t rq_pi_seen = 0;  ///< producer counter last read from the doorbell record
  RecvInProgress recv;
  bool write_active = false;
  uint64_t write_va = 0;
  uint32_t write_rkey = 0;
  uint32_t write_len = 0;  ///< RETH DMA length of the WRITE in progress
  uint32_t write_done = 0;
  bool nak_pending = false;       ///< a PSN sequence error NAK was sent; stay quiet until the resend
  bool comm_est = false;          ///< communication-established event already raised
  bool uc_dropping = false;       ///< UC: a packet of this message was lost; drop until the next FIRST/ONLY
  bool last_wqe_reached = false;  ///< SRQ: the last-WQE-reached event was raised (once per ERR)
  uint32_t xrc_srqn = 0;          ///< XRC receive QP: the XRC SRQ the request being handled names
  uint32_t xrc_pdn = 0;           ///< ... and that SRQ's PD, in which the request's keys are checked
  /** Atomic results by PSN, so a duplicate atomic is answered again, not executed twice. */
  struct AtomicReplay {
    uint32_t psn;
    uint64_t orig;
    bool valid;
  };
  AtomicReplay atomic_replay[16] = {};
  uint32_t atomic_replay_next = 0;
  BufferCursor rq_cursor;
};

}  // namespace hcasim::model
