// SPDX-License-Identifier: Apache-2.0
/**
 * @file dma_buffer.h
 * @brief Kernel-side memory for the device: pinned pages, IOVAs, and the buffer tables the
 *        HCA walks.
 *
 * Queue rings (SQ/RQ/CQ/EQ) are page-aligned host memory whose pages get deliberately
 * scattered IOVAs, so the device must walk the buffer table to find each page. MR pages are
 * mapped contiguously (as an IOMMU maps an SG list) and described by a table too.
 * HCASIM_BT_LEVELS=2 forces two-level tables for queues (labs and tests use it).
 */
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <hcasim/hca_hw.h>

#include "hca_link.h"

namespace hcasim::drv {

/** @brief The device address space, handed out by the kernel side. */
class IovaSpace {
 public:
  /** @brief @p npages page IOVAs for a queue, deliberately non-contiguous. */
  std::vector<uint64_t> scattered_pages(uint32_t npages);
  /** @brief A contiguous range of @p len bytes whose offset modulo @p align equals @p phase. */
  uint64_t contiguous(uint64_t len, uint64_t align, uint64_t phase);

 private:
  std::mutex mu_;
  uint64_t next_scatter_ = 0x10000000ull;     // queue pages and tables
  uint64_t next_linear_ = 0x100000000000ull;  // MRs
};

/** @brief A buffer table built in host memory; owns its table pages and their IOVAs. */
class BufferTable {
 public:
  BufferTable(HcaLink& link, IovaSpace& space, const std::vector<uint64_t>& page_iovas,
              uint32_t log_page_size, uint64_t first_page_offset, int force_levels = 0);
  ~BufferTable();
  BufferTable(const BufferTable&) = delete;
  BufferTable& operator=(const BufferTable&) = delete;
  const hw::BufferDesc& desc() const { return desc_; }
  bool ok() const { return ok_; }

 private:
  uint64_t* new_table_page(uint64_t& iova);
  HcaLink& link_;
  IovaSpace& space_;
  hw::BufferDesc desc_{};
  std::vector<std::pair<uint64_t*, uint64_t>> pages_;  // host page, its IOVA
  bool ok_ = true;
};

/** @brief A page-aligned, zeroed ring in host memory, mapped for the device. */
class QueueBuffer {
 public:
  QueueBuffer(HcaLink& link, IovaSpace& space, uint64_t bytes);
  ~QueueBuffer();
  QueueBuffer(const QueueBuffer&) = delete;
  QueueBuffer& operator=(const QueueBuffer&) = delete;
  uint8_t* data() const { return mem_; }
  uint64_t size() const { return bytes_; }
  const hw::BufferDesc& desc() const { return table_->desc(); }
  bool ok() const { return mem_ && table_ && table_->ok(); }

 private:
  HcaLink& link_;
  uint8_t* mem_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<uint64_t> iovas_;
  std::unique_ptr<BufferTable> table_;
};

/** @brief A user memory region pinned and mapped for the device. */
class PinnedRegion {
 public:
  PinnedRegion(HcaLink& link, IovaSpace& space, void* addr, uint64_t len);
  ~PinnedRegion();
  PinnedRegion(const PinnedRegion&) = delete;
  PinnedRegion& operator=(const PinnedRegion&) = delete;
  const hw::BufferDesc& desc() const { return table_->desc(); }
  bool ok() const { return mapped_ && table_ && table_->ok(); }

 private:
  HcaLink& link_;
  uint64_t iova_ = 0;
  bool mapped_ = false;
  std::unique_ptr<BufferTable> table_;
};

/** @brief Small DMA-able slots (doorbell records) carved from mapped pages. */
class DbrecPool {
 public:
  DbrecPool(HcaLink& link, IovaSpace& space) : link_(link), space_(space) {}
  ~DbrecPool();
  /** @brief A zeroed 64-byte slot; returns host pointer and sets its IOVA. */
  void* alloc(uint64_t& iova);
  void free(void* p);

 private:
  HcaLink& link_;
  IovaSpace& space_;
  std::mutex mu_;
  std::vector<std::pair<uint8_t*, uint64_t>> pages_;
  std::vector<std::pair<void*, uint64_t>> free_;
};

}  // namespace hcasim::drv
