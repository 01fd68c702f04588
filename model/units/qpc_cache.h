// SPDX-License-Identifier: Apache-2.0
/**
 * @file qpc_cache.h
 * @brief The QPC table (in ICM) behind a small LRU QPC cache.
 *
 * Every doorbell and every incoming packet looks its QP up here; a miss costs an ICM read
 * (profile qpc_miss_ps) and evicts the least recently used entry. Hits and misses are counted
 * and traced, so a lab can watch a QP working set outgrow the cache.
 */
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>

#include "qp_context.h"
#include "timing_profile.h"
#include "trace.h"

namespace hcasim::model {

class QpcCache {
 public:
  QpcCache(const TimingProfile& prof, Tracer& tracer, uint32_t capacity)
      : prof_(prof), tracer_(tracer), capacity_(capacity ? capacity : 1) {}

  /** @brief Result of a lookup: the context (nullptr if no such QP) and its latency. */
  struct Lookup {
    QpContext* qp = nullptr;
    bool hit = false;
    uint64_t latency_ps = 0;
  };
  Lookup lookup(uint32_t qpn, const char* why);

  QpContext* create(uint32_t qpn);
  bool destroy(uint32_t qpn);
  /** @brief Direct table access for the command interface (no cache effect). */
  QpContext* find(uint32_t qpn);
  template <typename F>
  void for_each(F&& f) {
    for (auto& [n, slot] : table_) f(*slot.qp);
  }
  /** @brief Read-only access for inspection: no cache effect, no trace, no counters. */
  const QpContext* peek(uint32_t qpn) const {
    auto t = table_.find(qpn);
    return t == table_.end() ? nullptr : t->second.qp.get();
  }
  /** @brief The QP's context is in the cache now. */
  bool is_cached(uint32_t qpn) const {
    auto t = table_.find(qpn);
    return t != table_.end() && t->second.cached;
  }
  /** @brief Every QP's context, read-only (in no particular order). */
  template <typename F>
  void for_each(F&& f) const {
    for (auto& [n, slot] : table_) f(static_cast<const QpContext&>(*slot.qp));
  }

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint32_t capacity() const { return capacity_; }

 private:
  const TimingProfile& prof_;
  Tracer& tracer_;
  uint32_t capacity_;
  /** A QP's context and its place in the cache: one table, so a lookup hashes once. */
  struct Slot {
    std::unique_ptr<QpContext> qp;
    bool cached = false;
    std::list<uint32_t>::iterator in_lru;  ///< valid while cached
    /** When a missed context's ICM read ends: a lookup before then waits for it, hit or not. */
    uint64_t filled_at_ps = 0;
  };
  /** Drops the least recently used context from the cache. */
  void evict_one();

  std::unordered_map<uint32_t, Slot> table_;
  std::list<uint32_t> lru_;  // front = most recent; its size is the number cached
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace hcasim::model
