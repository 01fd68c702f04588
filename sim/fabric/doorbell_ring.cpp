// SPDX-License-Identifier: Apache-2.0
#include "doorbell_ring.h"

namespace hcasim::fabric {

bool ring_on(const DoorbellRing& r) { return __atomic_load_n(&r.on, __ATOMIC_ACQUIRE) != 0; }

bool ring_push(DoorbellRing& r, const RingDoorbell& e) {
  const uint64_t head = r.head;  // only this side writes it
  if (head - __atomic_load_n(&r.tail, __ATOMIC_ACQUIRE) >= kDoorbellRingSlots) return false;
  r.slots[head & (kDoorbellRingSlots - 1)] = e;
  __atomic_store_n(&r.head, head + 1, __ATOMIC_RELEASE);
  return true;
}

bool ring_needs_wake(const DoorbellRing& r) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // head published before asleep is read (file comment)
  return __atomic_load_n(&r.asleep, __ATOMIC_RELAXED) == kRingAsleep;
}

void ring_set_on(DoorbellRing& r, bool on) { __atomic_store_n(&r.on, on ? 1u : 0u, __ATOMIC_RELEASE); }

bool ring_sleep(DoorbellRing& r, bool looks_again) {
  __atomic_store_n(&r.asleep, looks_again ? kRingLooksAgain : kRingAsleep, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // asleep published before head is read (file comment)
  return __atomic_load_n(&r.head, __ATOMIC_ACQUIRE) != r.tail;
}

void ring_awake(DoorbellRing& r) { __atomic_store_n(&r.asleep, kRingAwake, __ATOMIC_RELAXED); }

int ring_take(DoorbellRing& r, RingDoorbell* out) {
  const uint64_t tail = r.tail;  // only this side writes it
  const uint64_t head = __atomic_load_n(&r.head, __ATOMIC_ACQUIRE);
  if (head - tail > kDoorbellRingSlots) {
    __atomic_store_n(&r.tail, head, __ATOMIC_RELEASE);
    return -1;
  }
  const int n = int(head - tail);
  for (int i = 0; i < n; ++i) out[i] = r.slots[(tail + uint64_t(i)) & (kDoorbellRingSlots - 1)];
  __atomic_store_n(&r.tail, head, __ATOMIC_RELEASE);
  return n;
}

}  // namespace hcasim::fabric
