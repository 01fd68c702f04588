// SPDX-License-Identifier: Apache-2.0
#include "iommu.h"

namespace hcasim::model {

bool Iommu::map(uint64_t iova, uint8_t* hva, uint64_t len) {
  if (len == 0) return false;
  auto next = map_.lower_bound(iova);
  if (next != map_.end() && next->first < iova + len) return false;
  if (next != map_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.len > iova) return false;
  }
  map_.emplace(iova, Extent{len, hva});
  return true;
}

bool Iommu::unmap(uint64_t iova) {
  auto it = map_.find(iova);
  if (it == map_.end()) return false;
  if (tlb_iova_ == iova) tlb_len_ = 0;
  map_.erase(it);
  return true;
}

uint8_t* Iommu::lookup(uint64_t iova, uint64_t& contiguous) const {
  auto it = map_.upper_bound(iova);
  if (it == map_.begin()) return nullptr;
  --it;
  if (iova - it->first >= it->second.len) return nullptr;
  contiguous = it->second.len - (iova - it->first);
  return it->second.hva + (iova - it->first);
}

uint8_t* Iommu::translate(uint64_t iova, uint64_t& contiguous) {
  if (iova - tlb_iova_ < tlb_len_) {
    ++hits_;
    contiguous = tlb_len_ - (iova - tlb_iova_);
    return tlb_hva_ + (iova - tlb_iova_);
  }
  ++misses_;
  auto it = map_.upper_bound(iova);
  if (it == map_.begin()) {
    ++faults_;
    return nullptr;
  }
  --it;
  if (iova - it->first >= it->second.len) {
    ++faults_;
    return nullptr;
  }
  tlb_iova_ = it->first;
  tlb_len_ = it->second.len;
  tlb_hva_ = it->second.hva;
  contiguous = tlb_len_ - (iova - tlb_iova_);
  return tlb_hva_ + (iova - tlb_iova_);
}

}  // namespace hcasim::model
