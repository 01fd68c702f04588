// SPDX-License-Identifier: Apache-2.0
/**
 * @file iommu.h
 * @brief The IOMMU: maps the device's DMA addresses (IOVAs) onto host memory.
 *
 * Host memory is real process memory: a mapping's target is a host virtual address. The
 * kernel-side driver maps pinned pages here; the HCA only ever sees IOVAs. A one-entry
 * IOTLB in front of the extent map makes streaming accesses cheap; its hits and misses
 * are counted.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace hcasim::model {

class Iommu {
 public:
  /** @brief Map [iova, iova+len) to host address @p hva. Overlaps are rejected (returns false). */
  bool map(uint64_t iova, uint8_t* hva, uint64_t len);
  /** @brief Remove the mapping that starts at @p iova. */
  bool unmap(uint64_t iova);
  /** @brief Remove every mapping (function reset). */
  void clear() {
    map_.clear();
    tlb_len_ = 0;
  }
  /**
   * @brief Translate @p iova; on success returns the host address and sets @p contiguous to
   * the number of bytes mapped contiguously from there. nullptr for an unmapped IOVA (a DMA fault).
   */
  uint8_t* translate(uint64_t iova, uint64_t& contiguous);
  /**
   * @brief Translate @p iova without touching the IOTLB or the counters (firmware reads at
   * command time, which must not change the data path's history); nullptr if unmapped.
   */
  uint8_t* lookup(uint64_t iova, uint64_t& contiguous) const;

  uint64_t iotlb_hits() const { return hits_; }
  uint64_t iotlb_misses() const { return misses_; }
  uint64_t faults() const { return faults_; }
  size_t mappings() const { return map_.size(); }

 private:
  struct Extent {
    uint64_t len;
    uint8_t* hva;
  };
  std::map<uint64_t, Extent> map_;
  uint64_t tlb_iova_ = 0, tlb_len_ = 0;
  uint8_t* tlb_hva_ = nullptr;
  uint64_t hits_ = 0, misses_ = 0, faults_ = 0;
};

}  // namespace hcasim::model
