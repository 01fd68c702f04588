// SPDX-License-Identifier: Apache-2.0
/**
 * @file mr_table.h
 * @brief Memory keys: lkey/rkey -> MKey context, with PD, bounds and access checks, and
 *        gather/scatter through the MR's page list (a buffer table) and the DMA engine.
 */
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"

namespace hcasim::model {

/** @brief Outcome of a key check, in the order the checks are made. */
enum class MrCheck : uint8_t { Ok, BadKey, BadPd, OutOfBounds, NoAccess };
const char* mr_check_name(MrCheck c);

struct MrEntry {
  hw::MkeyCtx ctx;
  BufferCursor cursor;
};

class MrTable {
 public:
  MrTable(BufferTableWalker& bt, DmaEngine& dma, Tracer& tracer) : bt_(bt), dma_(dma), tracer_(tracer) {}

  bool add(const hw::MkeyCtx& ctx);
  bool remove(uint32_t key);
  const MrEntry* find(uint32_t key) const;
  size_t size() const { return table_.size(); }
  /** @brief Keys of all MKeys (function reset). */
  std::vector<uint32_t> keys() const {
    std::vector<uint32_t> v;
    for (auto& [k, e] : table_) v.push_back(k);
    return v;
  }

  /**
   * @brief Check that [va, va+len) under @p key belongs to PD @p pdn and allows @p access
   * (AccessFlags; 0 = local read). Zero-length accesses need no valid key (IBTA: no memory touched).
   */
  MrCheck check(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t access, uint32_t qpn,
                const char* why);

  /** @brief Copy between the MR and a device buffer; returns PCIe reads spent walking tables, -1 on fault. */
  int read(uint32_t key, uint64_t va, void* dst, uint64_t len, uint32_t qpn);
  int write(uint32_t key, uint64_t va, const void* src, uint64_t len, uint32_t qpn);

  uint64_t checks() const { return checks_; }
  uint64_t violations() const { return violations_; }

 private:
  template <bool kWrite>
  int copy(uint32_t key, uint64_t va, uint8_t* buf, uint64_t len, uint32_t qpn);
  BufferTableWalker& bt_;
  DmaEngine& dma_;
  Tracer& tracer_;
  std::unordered_map<uint32_t, MrEntry> table_;
  uint64_t checks_ = 0, violations_ = 0;
};

}  // namespace hcasim::model
