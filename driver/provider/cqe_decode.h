// SPDX-License-Identifier: Apache-2.0
/**
 * @file cqe_decode.h
 * @brief One CQE's bytes, as the hardware wrote them, turned into what ibv_poll_cq(3) reports:
 *        the part of CQE parsing that needs no QP (poll_cq then finds the QP or SRQ the CQE
 *        names and takes the WR's wr_id from it).
 *
 * Knows the hardware interface (hcasim/hca_hw.h) and ibverbs, nothing else: the fuzz harness
 * tests/fuzz/cqe_fuzz.cpp feeds it any 64 bytes.
 */
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "hcasim/hca_hw.h"

namespace hcasim::drv {

/** @brief A decoded CQE: the work completion without its wr_id, and where that wr_id is kept. */
struct DecodedCqe {
  ibv_wc wc{};                ///< every field but wr_id
  bool is_send = false;       ///< a requester completion (the QP's send queue)
  bool from_srq = false;      ///< a receive taken from the SRQ @ref srqn (not the QP's receive queue)
  uint32_t srqn = 0;          ///< with @ref from_srq
  uint16_t wqe_counter = 0;   ///< the WQE (send: WQEBB counter, receive: index) it completes
  uint64_t timestamp_ns = 0;  ///< when the hardware wrote it (ibv_wc_read_completion_ts)
};

/** @brief The ibv_wc_status for a CQE syndrome (IBV_WC_GENERAL_ERR for one the HCA never writes). */
ibv_wc_status wc_status(hw::CqeSyndrome s);

/** @brief Decode the CQE at @p raw (hw::kCqeSize bytes, owned by software). */
DecodedCqe decode_cqe(const uint8_t* raw);

}  // namespace hcasim::drv
