// SPDX-License-Identifier: Apache-2.0
/**
 * @file model_fixture.h
 * @brief Shared helpers for the model's unit tests: page-aligned host memory, a bare set of
 *        DMA-side units (IOMMU, DMA engine, buffer-table walker) and hand-built buffer tables,
 *        plus helpers that drive the SystemC kernel.
 *
 * Buffer tables are built here by hand, independently of the driver's builder
 * (driver/kernel/dma_buffer.h), so the walker is checked against the contract in hca_hw.h and
 * not against another implementation of it.
 */
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"
#include "dma_engine.h"
#include "iommu.h"
#include "timed_queue.h"
#include "timing_profile.h"
#include "trace.h"

namespace hcasim::test {

constexpr uint64_t kPage = 4096;

/** @brief Owner of page-aligned, zero-filled host allocations. */
class HostPages {
 public:
  HostPages() = default;
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;
  ~HostPages() {
    for (void* p : blocks_) std::free(p);
  }
  /** @brief @p bytes of zeroed memory aligned to @p align. */
  uint8_t* alloc(uint64_t bytes, uint64_t align = kPage) {
    void* p = nullptr;
    if (posix_memalign(&p, align, bytes ? bytes : 1) != 0) return nullptr;
    std::memset(p, 0, bytes);
    blocks_.push_back(p);
    return static_cast<uint8_t*>(p);
  }

 private:
  std::vector<void*> blocks_;
};

/** @brief A buffer described by a hand-built table: its descriptor, host pages and their IOVAs. */
struct HandTable {
  hw::BufferDesc desc{};
  std::vector<uint8_t*> pages;       ///< host address of each data page (nullptr if not backed)
  std::vector<uint64_t> page_iova;   ///< DMA address of each data page
  std::vector<uint64_t*> tables;     ///< host address of root (first) and leaf tables
  std::vector<uint64_t> table_iova;  ///< their DMA addresses
};

/** @brief IOMMU + DMA engine + buffer-table walker over this process's memory, no tracing. */
struct DmaRig {
  model::Tracer tracer;  // detached: no sink
  model::Iommu iommu;
  model::DmaEngine dma{iommu, model::default_profile(), tracer};
  model::BufferTableWalker bt{dma, tracer};
  HostPages mem;

  /**
   * @brief A fresh 4 KiB-aligned IOVA region. Successive calls go *downwards* with a one-page
   * hole, so consecutive allocations are never adjacent in DMA space.
   */
  uint64_t scatter_iova(uint64_t bytes) {
    const uint64_t len = (bytes + kPage - 1) & ~(kPage - 1);
    next_iova_ -= len + kPage;
    return next_iova_;
  }

  /** @brief Map @p hva for @p len bytes at a fresh scattered IOVA; returns the IOVA. */
  uint64_t map_scattered(uint8_t* hva, uint64_t len) {
    const uint64_t iova = scatter_iova(len);
    if (!iommu.map(iova, hva, len)) return 0;
    return iova;
  }

  /** @brief A zeroed host page mapped at a fresh scattered IOVA. */
  uint8_t* mapped_page(uint64_t& iova) {
    uint8_t* p = mem.alloc(kPage);
    iova = map_scattered(p, kPage);
    return p;
  }

  /**
   * @brief Build a 1- or 2-level table for @p npages data pages of 2^log_page bytes.
   * With @p back_pages, each data page is real host memory mapped at a scattered IOVA;
   * otherwise the entries point at fake, unmapped, page-aligned IOVAs (enough to check the
   * walker's arithmetic). Tables are 4 KiB pages of 512 entries, as hca_hw.h describes.
   */
  HandTable build(uint32_t npages, uint8_t levels, uint8_t log_page = 12, bool back_pages = true,
                  uint64_t first_page_offset = 0) {
    HandTable t;
    const uint64_t psize = 1ull << log_page;
    t.desc.npages = npages;
    t.desc.levels = levels;
    t.desc.log_page_size = log_page;
    t.desc.first_page_offset = first_page_offset;
    for (uint32_t i = 0; i < npages; ++i) {
      if (back_pages) {
        uint8_t* p = mem.alloc(psize, psize);
        t.pages.push_back(p);
        t.page_iova.push_back(map_scattered(p, psize));
      } else {
        t.pages.push_back(nullptr);
        // Descending, with gaps, aligned to the page size.
        t.page_iova.push_back(0x40000000000ull - uint64_t(i + 1) * 3 * psize);
      }
    }
    uint64_t root_iova = 0;
    auto* root = reinterpret_cast<uint64_t*>(mapped_page(root_iova));
    t.tables.push_back(root);
    t.table_iova.push_back(root_iova);
    t.desc.bt_root = root_iova;
    constexpr uint32_t kPerTable = kPage / 8;
    if (levels == 1) {
      for (uint32_t i = 0; i < npages; ++i) root[i] = hw::bte_make(t.page_iova[i]);
      return t;
    }
    for (uint32_t leaf = 0; leaf * kPerTable < npages; ++leaf) {
      uint64_t leaf_iova = 0;
      auto* lp = reinterpret_cast<uint64_t*>(mapped_page(leaf_iova));
      t.tables.push_back(lp);
      t.table_iova.push_back(leaf_iova);
      root[leaf] = hw::bte_make(leaf_iova);
      for (uint32_t i = leaf * kPerTable; i < npages && i < (leaf + 1) * kPerTable; ++i)
        lp[i - leaf * kPerTable] = hw::bte_make(t.page_iova[i]);
    }
    return t;
  }

  /** @brief Host address the IOMMU gives for @p iova (nullptr on a fault). */
  uint8_t* host_of(uint64_t iova) {
    uint64_t contig = 0;
    return iommu.translate(iova, contig);
  }

 private:
  uint64_t next_iova_ = 0x80000000ull;
};

// ---------------------------------------------------------------- SystemC helpers
/** @brief Current simulated time in ps. */
inline uint64_t sim_now_ps() { return sc_core::sc_time_stamp().value(); }

/**
 * @brief Advance simulated time by exactly @p ps and run everything due up to and including
 * the new time (sc_start(d) alone stops before the events due at the end time).
 */
inline void run_for_ps(uint64_t ps) {
  if (ps) sc_core::sc_start(sc_core::sc_time::from_value(ps));
  do {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
  } while (sc_core::sc_pending_activity_at_current_time());
}

/** @brief Run until nothing is pending (bounded, so a runaway model fails instead of hanging). */
inline void run_until_idle() {
  for (int i = 0; i < 100000 && sc_core::sc_pending_activity(); ++i)
    run_for_ps(sc_core::sc_time_to_pending_activity().value());
}

}  // namespace hcasim::test
