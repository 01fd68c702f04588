// SPDX-License-Identifier: Apache-2.0
#include "dma_buffer.h"

#include <cstdlib>
#include <cstring>

namespace hcasim::drv {
namespace {
constexpr uint64_t kPage = 4096;

int forced_levels() {
  const char* e = std::getenv("HCASIM_BT_LEVELS");
  return e && std::atoi(e) == 2 ? 2 : 0;
}
}  // namespace

std::vector<uint64_t> IovaSpace::scattered_pages(uint32_t npages) {
  std::lock_guard<std::mutex> g(mu_);
  // Reverse order with a one-page hole between pages: consecutive queue pages are never
  // consecutive in DMA space, so only a buffer-table walk finds them.
  std::vector<uint64_t> v(npages);
  for (uint32_t i = 0; i < npages; ++i) v[i] = next_scatter_ + uint64_t(npages - 1 - i) * 2 * kPage;
  next_scatter_ += uint64_t(npages) * 2 * kPage + 16 * kPage;
  return v;
}

uint64_t IovaSpace::contiguous(uint64_t len, uint64_t align, uint64_t phase) {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t base = (next_linear_ + align - 1) & ~(align - 1);
  uint64_t iova = base + phase;
  next_linear_ = iova + len + align;  // a guard gap after each region
  return iova;
}

uint64_t* BufferTable::new_table_page(uint64_t& iova) {
  auto* p = reinterpret_cast<uint64_t*>(link_.alloc_dma_pages(kPage));
  if (!p) return nullptr;
  iova = space_.scattered_pages(1)[0];
  if (!link_.iommu_map(iova, p, kPage)) {
    link_.free_dma_pages(reinterpret_cast<uint8_t*>(p), kPage);
    return nullptr;
  }
  pages_.emplace_back(p, iova);
  return p;
}

BufferTable::BufferTable(HcaLink& link, IovaSpace& space, const std::vector<uint64_t>& page_iovas,
                         uint32_t log_page_size, uint64_t first_page_offset, int force_levels)
    : link_(link), space_(space) {
  const uint32_t n = uint32_t(page_iovas.size());
  const uint32_t per_page = kPage / 8;
  desc_.npages = n;
  desc_.log_page_size = uint8_t(log_page_size);
  desc_.first_page_offset = first_page_offset;
  desc_.levels = (n > per_page || force_levels == 2) ? 2 : 1;
  if (n > per_page * per_page) {
    ok_ = false;
    return;
  }
  uint64_t root_iova = 0;
  uint64_t* root = new_table_page(root_iova);
  if (!root) {
    ok_ = false;
    return;
  }
  desc_.bt_root = root_iova;
  if (desc_.levels == 1) {
    for (uint32_t i = 0; i < n; ++i) root[i] = hw::bte_make(page_iovas[i]);
    return;
  }
  for (uint32_t leaf = 0; leaf * per_page < n; ++leaf) {
    uint64_t leaf_iova = 0;
    uint64_t* lp = new_table_page(leaf_iova);
    if (!lp) {
      ok_ = false;
      return;
    }
    root[leaf] = hw::bte_make(leaf_iova);
    for (uint32_t i = leaf * per_page; i < n && i < (leaf + 1) * per_page; ++i)
      lp[i - leaf * per_page] = hw::bte_make(page_iovas[i]);
  }
}

BufferTable::~BufferTable() {
  for (auto& [p, iova] : pages_) {
    link_.iommu_unmap(iova);
    link_.free_dma_pages(reinterpret_cast<uint8_t*>(p), kPage);
  }
}

QueueBuffer::QueueBuffer(HcaLink& link, IovaSpace& space, uint64_t bytes) : link_(link) {
  bytes_ = (bytes + kPage - 1) & ~(kPage - 1);
  mem_ = link_.alloc_dma_pages(bytes_);
  if (!mem_) return;
  const uint32_t npages = uint32_t(bytes_ / kPage);
  iovas_ = space.scattered_pages(npages);
  for (uint32_t i = 0; i < npages; ++i) {
    if (!link_.iommu_map(iovas_[i], mem_ + uint64_t(i) * kPage, kPage)) {
      iovas_.resize(i);
      return;
    }
  }
  table_ = std::make_unique<BufferTable>(link, space, iovas_, 12, 0, forced_levels());
}

QueueBuffer::~QueueBuffer() {
  table_.reset();
  for (uint64_t iova : iovas_) link_.iommu_unmap(iova);
  if (mem_) link_.free_dma_pages(mem_, bytes_);
}

PinnedRegion::PinnedRegion(HcaLink& link, IovaSpace& space, void* addr, uint64_t len) : link_(link) {
  // Large regions use 2 MiB pages (fewer table entries, as drivers pick the largest page size
  // the mapping allows); the IOVA keeps the host address's phase so every page is contiguous.
  const uint32_t log = len >= (4ull << 20) ? 21 : 12;
  const uint64_t psize = 1ull << log;
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  const uint64_t first = a & ~(psize - 1);
  const uint64_t last = (a + (len ? len : 1) + psize - 1) & ~(psize - 1);
  const uint64_t span = last - first;
  // Map only the bytes of the region's 4 KiB pages; the IOVA range keeps the 2 MiB phase.
  const uint64_t map_first = a & ~(kPage - 1);
  const uint64_t map_last = (a + (len ? len : 1) + kPage - 1) & ~(kPage - 1);
  const uint64_t region_iova = space.contiguous(span, psize, 0);
  iova_ = region_iova + (map_first - first);
  mapped_ = link_.iommu_map(iova_, reinterpret_cast<void*>(map_first), map_last - map_first);
  if (!mapped_) return;
  std::vector<uint64_t> pages(span / psize);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = region_iova + i * psize;
  table_ = std::make_unique<BufferTable>(link, space, pages, log, a - first);
}

PinnedRegion::~PinnedRegion() {
  table_.reset();
  if (mapped_) link_.iommu_unmap(iova_);
}

DbrecPool::~DbrecPool() {
  for (auto& [p, iova] : pages_) {
    link_.iommu_unmap(iova);
    link_.free_dma_pages(p, kPage);
  }
}

void* DbrecPool::alloc(uint64_t& iova) {
  std::lock_guard<std::mutex> g(mu_);
  if (free_.empty()) {
    uint8_t* page = link_.alloc_dma_pages(kPage);
    if (!page) return nullptr;
    uint64_t piova = space_.scattered_pages(1)[0];
    if (!link_.iommu_map(piova, page, kPage)) {
      link_.free_dma_pages(page, kPage);
      return nullptr;
    }
    pages_.emplace_back(page, piova);
    for (uint64_t off = kPage; off > 0; off -= 64) free_.emplace_back(page + off - 64, piova + off - 64);
  }
  auto [p, i] = free_.back();
  free_.pop_back();
  std::memset(p, 0, 64);
  iova = i;
  return p;
}

void DbrecPool::free(void* p) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [page, piova] : pages_) {
    auto* b = static_cast<uint8_t*>(p);
    if (b >= page && b < page + kPage) {
      free_.emplace_back(p, piova + uint64_t(b - page));
      return;
    }
  }
}

}  // namespace hcasim::drv
