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
  r.qp = t->second.get();
  auto c = cached_.find(qpn);
  if (c != cached_.end()) {
    ++hits_;
    r.hit = true;
    r.latency_ps = prof_.qpc_hit_ps;
    auto f = filled_at_ps_.find(qpn);
    if (f != filled_at_ps_.end() && f->second > now_ps() + r.latency_ps) r.latency_ps = f->second - now_ps();
    lru_.splice(lru_.begin(), lru_, c->second);
  } else {
    ++misses_;
    r.latency_ps = prof_.qpc_miss_ps;
    filled_at_ps_[qpn] = now_ps() + r.latency_ps;
    if (cached_.size() >= capacity_) {
      filled_at_ps_.erase(lru_.back());
      cached_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(qpn);
    cached_[qpn] = lru_.begin();
  }
  HCASIM_TRACE(tracer_, Qpc, QpcLookup, qpn, TraceFields(), "%s: QPC cache %s (state=%u, %zu/%u cached)", why,
               !r.hit                            ? "miss -> ICM read"
               : r.latency_ps > prof_.qpc_hit_ps ? "hit, its ICM read still in flight"
                                                 : "hit",
               unsigned(r.qp->qpc.state), cached_.size(), capacity_);
  return r;
}

QpContext* QpcCache::create(uint32_t qpn) {
  auto& slot = table_[qpn];
  if (slot) return nullptr;
  slot = std::make_unique<QpContext>();
  slot->qpc.qpn = qpn;
  return slot.get();
}

bool QpcCache::destroy(uint32_t qpn) {
  auto c = cached_.find(qpn);
  if (c != cached_.end()) {
    lru_.erase(c->second);
    cached_.erase(c);
  }
  filled_at_ps_.erase(qpn);
  return table_.erase(qpn) != 0;
}

QpContext* QpcCache::find(uint32_t qpn) {
  auto t = table_.find(qpn);
  return t == table_.end() ? nullptr : t->second.get();
}

}  // namespace hcasim::model
