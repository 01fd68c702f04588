// SPDX-License-Identifier: Apache-2.0
/**
 * @file wqe_fetch.h
 * @brief The WQE-fetch unit: (work queue, WQE index) -> WQE bytes, through the queue's buffer
 *        table and a DMA read, then decoded. The send queue fetches multi-WQEBB send WQEs; a
 *        receive queue (a QP's RQ today, a shared receive queue later) fetches scatter lists
 *        and reads its producer counter from the doorbell record.
 *
 * The unit knows queues only by their WorkQueue description, never by the QP that owns them,
 * so any queue with a buffer table can be fetched from.
 */
#pragma once

#include <cstdint>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"
#include "qp_context.h"
#include "timing_profile.h"

namespace hcasim::model {

/** @brief Where a work queue's entries live, as the fetch unit needs to know it. */
struct WorkQueue {
  const hw::BufferDesc* buf;  ///< the queue's buffer table
  uint32_t log_entries;       ///< ring size in entries (SQ: WQEBBs; RQ: WQEs), log2
  uint32_t log_stride;        ///< entry size in bytes, log2 (SQ: the 64-byte WQEBB)
  BufferCursor* cursor;       ///< the queue's translation cache
  uint32_t qpn;               ///< for the trace
  const char* table_tag;      ///< buffer-table trace tag ("sq", "rq")
  const char* dma_tag;        ///< DMA trace tag ("wqe", "rq.wqe")
  bool datagram = false;      ///< UD send queue: a datagram segment follows each control segment
  bool xrc = false;           ///< XRC send queue: an XRC segment follows each control segment
};

/** @brief The send queue of @p qp as a WorkQueue. */
WorkQueue send_queue(QpContext& qp);
/** @brief The receive queue of @p qp as a WorkQueue. */
WorkQueue recv_queue(QpContext& qp);

class WqeFetchUnit {
 public:
  WqeFetchUnit(BufferTableWalker& bt, DmaEngine& dma, const TimingProfile& prof)
      : bt_(bt), dma_(dma), prof_(prof) {}

  /**
   * @brief Fetch and decode the send WQE starting at WQEBB counter @p index: the first WQEBB
   * gives the size, the others follow (the ring wraps between them). Returns its size in
   * WQEBBs, 0 on a translation/DMA fault or a malformed WQE; adds table entries read to
   * @p table_reads.
   */
  uint32_t fetch_send(const WorkQueue& sq, uint16_t index, SendWqe& w, uint32_t& table_reads);
  /**
   * @brief Decode the send WQE at @p index that came with a BlueFlame store: the adapter has
   * its bytes already, so there is no DMA read, no table walk and no time to charge. Returns
   * its size in WQEBBs, 0 if malformed.
   */
  uint32_t take_pushed_send(const WorkQueue& sq, uint16_t index, SendWqe& w);
  /**
   * @brief Fetch receive WQE number @p index and decode its scatter list into @p sge / @p nsge
   * (up to kMaxSge entries, ended early by a terminator). False on a fault.
   */
  bool fetch_recv(const WorkQueue& rq, uint16_t index, Sge* sge, uint32_t& nsge);
  /**
   * @brief Read a receive queue's producer counter from the doorbell record at @p dbrec
   * (@p tag names the read in the trace: "rq.dbrec", "srq.dbrec").
   */
  bool recv_producer(uint64_t dbrec, uint32_t qpn, uint16_t& pi, const char* tag = "rq.dbrec");
  /**
   * @brief Time to fetch @p nbb WQEBBs after @p table_reads table entries: the first WQE of a
   * batch pays the PCIe round trip, later ones (@p pipelined) only their transfer.
   */
  uint64_t send_cost_ps(uint32_t nbb, uint32_t table_reads, bool pipelined) const;

 private:
  /** @brief Read @p len bytes (at most one entry) of entry @p index; counts table reads. */
  bool read_entry(const WorkQueue& q, uint32_t index, uint8_t* dst, uint32_t len, uint32_t& table_reads);
  /** @brief The bytes of entry @p index as a BlueFlame store brought them: no DMA, not traced. */
  bool pushed_entry(const WorkQueue& q, uint32_t index, uint8_t* dst, uint32_t len) const;
  /** @brief Fetch (@p table_reads set) or take as pushed (null) the send WQE at @p index. */
  uint32_t send_wqe(const WorkQueue& sq, uint16_t index, SendWqe& w, uint32_t* table_reads);

  BufferTableWalker& bt_;
  DmaEngine& dma_;
  const TimingProfile& prof_;
};

/**
 * @brief Decode the send WQE in @p raw (@p nbb WQEBBs, first at WQEBB counter @p index): the
 * control segment, the datagram segment if @p datagram (a UD QP's) or the XRC segment if @p xrc
 * (an XRC send QP's), then the segments its opcode implies. False if it is malformed.
 */
bool decode_send_wqe(const uint8_t* raw, uint32_t nbb, uint16_t index, SendWqe& w, bool datagram = false,
                     bool xrc = false);

}  // namespace hcasim::model
