// SPDX-License-Identifier: Apache-2.0
/**
 * @file buffer_table.h
 * @brief The buffer-table walker: queue/MR byte offset -> DMA address, by reading the
 *        page-table-like structure the driver built in host memory (1 or 2 levels).
 *
 * Each level is a DMA read of one 8-byte entry. A one-entry translation cache per
 * BufferCursor avoids re-walking while an access stays in the same page, as a real
 * HCA's translation cache would.
 */
#pragma once

#include <cstdint>

#include <hcasim/hca_hw.h>

#include "dma_engine.h"

namespace hcasim::model {

/** @brief Per-queue translation cache: the last page translated. */
struct BufferCursor {
  uint64_t page = ~0ull;
  uint64_t page_dma = 0;
};

/** @brief Result of one translation. */
struct BtResult {
  bool ok = false;
  uint64_t dma = 0;         ///< DMA address of the byte
  uint64_t contiguous = 0;  ///< bytes to the end of its page
  uint32_t reads = 0;       ///< table entries read (0 on a cache hit); each costs a PCIe read
};

class BufferTableWalker {
 public:
  BufferTableWalker(DmaEngine& dma, Tracer& tracer) : dma_(dma), tracer_(tracer) {}

  /** @brief Translate byte @p offset of the buffer described by @p desc. */
  BtResult translate(const hw::BufferDesc& desc, uint64_t offset, BufferCursor& cursor, uint32_t qpn,
                     const char* what);

  /**
   * @brief Translate byte @p offset as firmware would: no trace, no count, no translation cache,
   * no time (a BlueFlame store's WQE, which the adapter does not fetch). Not ok if unmapped.
   */
  BtResult peek(const hw::BufferDesc& desc, uint64_t offset) const;

  uint64_t walks() const { return walks_; }
  uint64_t cache_hits() const { return hits_; }

 private:
  DmaEngine& dma_;
  Tracer& tracer_;
  uint64_t walks_ = 0, hits_ = 0;
};

}  // namespace hcasim::model
