// SPDX-License-Identifier: Apache-2.0
#include "qpc_cache.h"

#include "timed_queue.h"  // now_ps

namespace hcasim::model {

QpcCache::Lookup QpcCache::lookup(uint32_t qpn, const char* why) {
  Lookup r;
  auto t = table_.find(qpn);
  if (t == table_.end()) {
    HCASIM_TRACE(tracer_, Qpc, QpcLookup, qpn, TraceFields().set_flag(kTfError), "%s: no such QP", why);
    return r;
  }
  Slot& slot = t->second;
  r.qp = slot.qp.get();
  const uint64_t now = now_ps();
  if (slot.cached) {
    ++hits_;
    r.hit = true;
    r.latency_ps = prof_.qpc_hit_ps;
    if (slot.filled_at_ps > now + r.latency_ps) r.latency_ps = slot.filled_at_ps - now;
    lru_.splice(lru_.begin(), lru_, slot.in_lru);
  } else {
    ++misses_;
    r.latency_ps = prof_.qpc_miss_ps;
    slot.filled_at_ps = now + r.latency_ps;
    if (lru_.size() >= capacity_) evict_one();
    lru_.push_front(qpn);
    slot.cached = true;
    slot.in_lru = lru_.begin();
  }
  HCASIM_TRACE(tracer_, Qpc, QpcLookup, qpn, TraceFields(), "%s: QPC cache %s (state=%u, %zu/%u cached)", why,
               !r.hit                            ? "miss -> ICM read"
               : r.latency_ps > prof_.qpc_hit_ps ? "hit, its ICM read still in flight"
                                                 : "hit",
               unsigned(r.qp->qpc.state), lru_.size(), capacity_);
  return r;
}

void QpcCache::evict_one() {
  Slot& victim = table_.at(lru_.back());
  victim.cached = false;
  victim.filled_at_ps = 0;
  lru_.pop_back();
}

QpContext* QpcCache::create(uint32_t qpn) {
  Slot& slot = table_[qpn];
  if (slot.qp) return nullptr;
  slot.qp = std::make_unique<QpContext>();
  slot.qp->qpc.qpn = qpn;
  return slot.qp.get();
}

bool QpcCache::destroy(uint32_t qpn) {
  auto t = table_.find(qpn);
  if (t == table_.end()) return false;
  if (t->second.cached) lru_.erase(t->second.in_lru);
  table_.erase(t);
  return true;
}

QpContext* QpcCache::find(uint32_t qpn) {
  auto t = table_.find(qpn);
  return t == table_.end() ? nullptr : t->second.qp.get();
}

}  // namespace hcasim::model
