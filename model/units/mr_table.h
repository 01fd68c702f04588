// SPDX-License-Identifier: Apache-2.0
/**
 * @file mr_table.h
 * @brief Memory keys: lkey/rkey -> MKey context, with PD, bounds and access checks, and
 *        gather/scatter through the MR's page list (a buffer table) and the DMA engine; memory
 *        windows (IBTA 10.6.7): keys that give remote access to a part of an MR once bound.
 */
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <hcasim/hca_hw.h>

#include "buffer_table.h"

namespace hcasim::model {

/** @brief Outcome of a key check, in the order the checks are made. */
enum class MrCheck : uint8_t { Ok, BadKey, BadPd, OutOfBounds, NoAccess, NotBound, TagMismatch, BadQp };
const char* mr_check_name(MrCheck c);

struct MrEntry {
  hw::MkeyCtx ctx;
  BufferCursor cursor;
};

/** @brief A memory window: its key index, and while bound, the part of an MR it opens. */
struct MwEntry {
  uint32_t pdn = 0;
  uint8_t type = 1;  ///< 1: bound with ibv_bind_mw; 2: bound through a WR, to one QP
  uint8_t tag = 0;   ///< low byte of the current key
  bool bound = false;
  uint32_t mr_key = 0;
  uint64_t start = 0;  ///< MR virtual address of the window's first byte
  uint64_t length = 0;
  uint32_t access = 0;  ///< remote AccessFlags granted
  bool zero_based = false;
  uint32_t qpn = 0;  ///< type 2: the QP it is bound to
};

/** @brief Outcome of a bind or an invalidation (IBTA 10.6.7.2, 10.6.7.3). */
enum class MwOp : uint8_t {
  Ok,
  NoWindow,      ///< no window has the key's index
  WrongType,     ///< bind/invalidate of a window of the other type
  BadPd,         ///< window, MR and QP are not in one PD
  NoMr,          ///< the MR key is not valid
  NoBindAccess,  ///< the MR was registered without IBV_ACCESS_MW_BIND
  OutOfBounds,   ///< the window is not inside the MR
  BadAccess,     ///< remote write/atomic through the window without local write on the MR
  Bound,         ///< type 2: the window is already bound
  NotBound,      ///< invalidate: the window is not bound
  TagMismatch,   ///< invalidate: the key's tag is not the window's current one
  BadQp,         ///< invalidate of a type 2 window bound to another QP
};
const char* mw_op_name(MwOp r);

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

  /** @brief A new, unbound window with key @p key (its index unique among MRs and windows). */
  bool add_window(uint32_t key, uint32_t pdn, uint8_t type);
  bool remove_window(uint32_t key);
  /** @brief Forget every window (function reset). */
  void clear_windows() { windows_.clear(); }
  const MwEntry* find_window(uint32_t key) const;
  /** @brief Bind the window of @p b.new_rkey's index for QP @p qpn in PD @p pdn (a BindMw WQE). */
  MwOp bind(const hw::BindInfo& b, uint32_t pdn, uint32_t qpn);
  /** @brief Invalidate the type 2 window @p rkey (local invalidate, or SEND with invalidate on @p qpn). */
  MwOp invalidate(uint32_t rkey, uint32_t pdn, uint32_t qpn);

  /**
   * @brief Copy between the MR and a device buffer; returns PCIe reads spent walking tables, -1 on
   * fault. @p why says what the read fetches (dma_engine.h).
   */
  int read(uint32_t key, uint64_t va, void* dst, uint64_t len, uint32_t qpn, ReadFor why = ReadFor::Device);
  int write(uint32_t key, uint64_t va, const void* src, uint64_t len, uint32_t qpn);

  uint64_t checks() const { return checks_; }
  uint64_t violations() const { return violations_; }

 private:
  template <bool kWrite>
  int copy(uint32_t key, uint64_t va, uint8_t* buf, uint64_t len, uint32_t qpn, ReadFor why);
  /** @brief Checks of @p key as a window key; on success @p mr_key / @p mr_va say where it lands. */
  MrCheck check_window(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t access, uint32_t qpn,
                       uint32_t& mr_key, uint64_t& mr_va) const;
  /** @brief @p key's MR and the MR address of @p va (a window key resolves through its window). */
  MrEntry* resolve(uint32_t key, uint64_t& va);
  /** @brief The MR with key @p key, nullptr if none. A stream asks for the same key at every
   *  packet, so the last key found is remembered. */
  MrEntry* entry(uint32_t key) const {
    if (key == last_key_ && last_) return last_;
    auto it = table_.find(key);
    if (it == table_.end()) return nullptr;
    last_key_ = key;
    last_ = const_cast<MrEntry*>(&it->second);
    return last_;
  }
  BufferTableWalker& bt_;
  DmaEngine& dma_;
  Tracer& tracer_;
  std::unordered_map<uint32_t, MrEntry> table_;  ///< nodes stay put, so last_ stays valid until removed
  mutable uint32_t last_key_ = 0;
  mutable MrEntry* last_ = nullptr;
  std::unordered_map<uint32_t, MwEntry> windows_;  ///< by key index
  uint64_t checks_ = 0, violations_ = 0;
};

}  // namespace hcasim::model
