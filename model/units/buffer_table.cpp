// SPDX-License-Identifier: Apache-2.0
#include "buffer_table.h"

#include <cinttypes>

namespace hcasim::model {

BtResult BufferTableWalker::translate(const hw::BufferDesc& desc, uint64_t offset, BufferCursor& cursor,
                                      uint32_t qpn, const char* what) {
  BtResult r;
  const uint32_t shift = desc.log_page_size;
  const uint64_t psize = 1ull << shift;
  const uint64_t abs = offset + desc.first_page_offset;
  const uint64_t page = abs >> shift;
  const uint64_t in_page = abs & (psize - 1);
  if (page >= desc.npages) {
    HCASIM_TRACE(tracer_, BufferTable, Error, qpn, TraceFields().set_addr(offset).set_flag(kTfError),
                 "%s: offset 0x%" PRIx64 " beyond %u pages", what, offset, desc.npages);
    return r;
  }
  if (cursor.page == page) {
    ++hits_;
    r.ok = true;
    r.dma = cursor.page_dma + in_page;
    r.contiguous = psize - in_page;
    return r;
  }
  ++walks_;
  uint64_t entry = 0;
  if (desc.levels == 1) {
    uint64_t at = desc.bt_root + page * 8;
    if (!dma_.read(at, &entry, 8, qpn, "bt.L1")) return r;
    r.reads = 1;
    HCASIM_TRACE(tracer_, BufferTable, BtWalk, qpn,
                 TraceFields().set_addr(hw::bte_addr(entry)).set_count(r.reads),
                 "%s: page %" PRIu64 " L1[%" PRIu64 "]@0x%" PRIx64 " -> page dma 0x%" PRIx64, what, page,
                 page, at, hw::bte_addr(entry));
  } else if (desc.levels == 2) {
    // Tables are 4 KiB pages of entries whatever the data page size (the driver builds them so).
    const uint64_t per_leaf = (1ull << hw::kMinPageShift) / 8;
    uint64_t root_at = desc.bt_root + (page / per_leaf) * 8;
    uint64_t root = 0;
    if (!dma_.read(root_at, &root, 8, qpn, "bt.L1")) return r;
    if (!hw::bte_valid(root)) {
      HCASIM_TRACE(tracer_, BufferTable, Error, qpn, TraceFields().set_addr(root_at).set_flag(kTfError),
                   "%s: invalid root entry", what);
      return r;
    }
    uint64_t leaf_at = hw::bte_addr(root) + (page % per_leaf) * 8;
    if (!dma_.read(leaf_at, &entry, 8, qpn, "bt.L2")) return r;
    r.reads = 2;
    HCASIM_TRACE(
        tracer_, BufferTable, BtWalk, qpn, TraceFields().set_addr(hw::bte_addr(entry)).set_count(r.reads),
        "%s: page %" PRIu64 " L1[%" PRIu64 "]@0x%" PRIx64 " -> leaf 0x%" PRIx64 " L2[%" PRIu64
        "] -> page dma 0x%" PRIx64,
        what, page, page / per_leaf, root_at, hw::bte_addr(root), page % per_leaf, hw::bte_addr(entry));
  } else {
    return r;
  }
  if (!hw::bte_valid(entry)) {
    HCASIM_TRACE(tracer_, BufferTable, Error, qpn, TraceFields().set_index(uint32_t(page)).set_flag(kTfError),
                 "%s: invalid entry for page %" PRIu64, what, page);
    return r;
  }
  cursor.page = page;
  cursor.page_dma = hw::bte_addr(entry);
  r.ok = true;
  r.dma = cursor.page_dma + in_page;
  r.contiguous = psize - in_page;
  return r;
}

BtResult BufferTableWalker::peek(const hw::BufferDesc& desc, uint64_t offset) const {
  BtResult r;
  const uint64_t psize = 1ull << desc.log_page_size;
  const uint64_t abs = offset + desc.first_page_offset;
  const uint64_t page = abs >> desc.log_page_size;
  if (page >= desc.npages) return r;
  uint64_t entry = 0;
  if (desc.levels == 1) {
    if (!dma_.peek(desc.bt_root + page * 8, &entry, 8)) return r;
  } else if (desc.levels == 2) {
    const uint64_t per_leaf = (1ull << hw::kMinPageShift) / 8;
    uint64_t root = 0;
    if (!dma_.peek(desc.bt_root + (page / per_leaf) * 8, &root, 8) || !hw::bte_valid(root)) return r;
    if (!dma_.peek(hw::bte_addr(root) + (page % per_leaf) * 8, &entry, 8)) return r;
  } else {
    return r;
  }
  if (!hw::bte_valid(entry)) return r;
  r.ok = true;
  r.dma = hw::bte_addr(entry) + (abs & (psize - 1));
  r.contiguous = psize - (abs & (psize - 1));
  return r;
}

}  // namespace hcasim::model
