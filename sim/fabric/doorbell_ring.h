// SPDX-License-Identifier: Apache-2.0
/**
 * @file doorbell_ring.h
 * @brief Doorbells a client process leaves for the device process in their shared arena, with
 *        no message: the arena's second page.
 *
 * A doorbell sent as a message costs the program a sendmsg and the device a recvmsg, about 2 us
 * each on a small machine, while the in-process world runs a whole 64-byte WRITE in about
 * that. A program that rings once per work request (perftest's ib_write_bw) paid it per WRITE.
 * The client instead writes the doorbell into this ring, and the device takes every doorbell
 * waiting there whenever it looks: before any message of that process (so a doorbell written
 * before a message is always handled before it), each time round its loop, and in the lockstep
 * clock once more before it lets simulated time move on. Only when the device may be asleep
 * in poll(2) until a message comes does the client send a WAKE message. In the lockstep clock a
 * device that sleeps only until it looks at its programs' threads again (a finite timeout) is
 * not woken: the doorbell cannot be late, since time does not move before the device looks.
 *
 * Each entry names the program thread that wrote it and when. In the lockstep clock a thread's
 * messages tell the device that the thread is busy and simulated time must wait for it; a
 * doorbell taken from the ring counts as a message of the thread it names, sent when it was
 * written (so a device that takes it late holds time for that thread no longer than a message
 * would have).
 *
 * Both sides use these functions, so the layout and the ordering rules live here:
 * - the client writes an entry, then publishes head (release); the device reads head (acquire),
 *   copies the entries, then publishes tail (release), which frees their slots;
 * - sleeping is the Dekker pattern: the device sets asleep, then (full fence) looks at head;
 *   the client publishes head, then (full fence) looks at asleep. One of them sees the other.
 * A ring that is full is not waited on: the client sends that doorbell as a message, which the
 * device handles after the ring's entries.
 */
#pragma once

#include <cstdint>

#include "dma_arena.h"
#include "protocol.h"

namespace hcasim::fabric {

/// Where the ring lives in a client's arena (the page after ArenaProgress, dma_arena.h).
constexpr uint64_t kDoorbellRingOffset = 4096;
/// Entries the ring holds; a power of two.
constexpr uint32_t kDoorbellRingSlots = 128;

/** @brief One entry: the doorbell, as its message would carry it, and who rang it when. */
struct RingDoorbell {
  DoorbellMsg doorbell;
  int32_t tid;          ///< the program thread that wrote it (as its connection's ATTACH names it)
  uint32_t written_ns;  ///< when: CLOCK_MONOTONIC in ns, its low 32 bits (ring_stamp())
};

/** @brief RingDoorbell::written_ns for the wall-clock instant @p mono_ns. */
inline uint32_t ring_stamp(uint64_t mono_ns) { return uint32_t(mono_ns); }
/**
 * @brief The instant an entry stamped @p written_ns was written, taken @p now_ns (both
 * CLOCK_MONOTONIC, one machine): entries are taken within milliseconds, far less than the 4.29 s
 * after which the 32 bits wrap.
 */
inline uint64_t ring_written_ns(uint32_t written_ns, uint64_t now_ns) {
  return now_ns - uint32_t(uint32_t(now_ns) - written_ns);
}

/// DoorbellRing::asleep: the device looks here all the time.
constexpr uint32_t kRingAwake = 0;
/// DoorbellRing::asleep: the device may sleep until a message comes (a doorbell needs a WAKE).
constexpr uint32_t kRingAsleep = 1;
/// DoorbellRing::asleep: the device sleeps, but looks again before simulated time moves (lockstep).
constexpr uint32_t kRingLooksAgain = 2;

/** @brief The ring, as laid out in the arena (zeroed pages: empty, off, awake). */
struct DoorbellRing {
  alignas(64) uint64_t head;  ///< client: entries written, all time
  alignas(64) uint64_t tail;  ///< device: entries taken, all time
  uint32_t asleep;            ///< device: kRingAwake, kRingAsleep or kRingLooksAgain
  uint32_t on;                ///< device: 1 once it takes doorbells from here
  alignas(64) RingDoorbell slots[kDoorbellRingSlots];
};
static_assert(kDoorbellRingOffset + sizeof(DoorbellRing) <= 2 * 4096,
              "the ring fits in the arena's second page");
static_assert((kDoorbellRingSlots & (kDoorbellRingSlots - 1)) == 0, "a power of two");

/// @name Client side (one writer at a time: the caller serialises its threads)
/// @{
/** @brief Whether the device takes doorbells from @p r. */
bool ring_on(const DoorbellRing& r);
/** @brief Write @p e as the next entry; false if the ring is full (send its doorbell as a message). */
bool ring_push(DoorbellRing& r, const RingDoorbell& e);
/** @brief After ring_push: whether the device may sleep until a message without having seen it (send WAKE).
 */
bool ring_needs_wake(const DoorbellRing& r);
/// @}

/// @name Device side
/// @{
/** @brief The ring in the client arena mapped as @p w (protocol 9: its second page); nullptr if none. */
inline DoorbellRing* ring_in(const DmaWindow& w) {
  return w.find(w.hva + kDoorbellRingOffset, sizeof(DoorbellRing))
             ? reinterpret_cast<DoorbellRing*>(w.local + kDoorbellRingOffset)
             : nullptr;
}
/** @brief Start (or stop) taking doorbells from @p r. */
void ring_set_on(DoorbellRing& r, bool on);
/**
 * @brief About to sleep: mark @p r asleep; true if entries wait (then do not sleep). With
 * @p looks_again the device will look here before simulated time moves on (lockstep, a finite
 * sleep), so clients need not wake it.
 */
bool ring_sleep(DoorbellRing& r, bool looks_again = false);
/** @brief Awake again: clients need not send WAKE. */
void ring_awake(DoorbellRing& r);
/**
 * @brief Copy every waiting entry of @p r into @p out (room for kDoorbellRingSlots) and free
 * their slots. Returns how many, or -1 if head is not within a ring's length ahead of tail
 * (the client's memory is corrupt: the ring is then emptied, its entries dropped).
 */
int ring_take(DoorbellRing& r, RingDoorbell* out);
/// @}

}  // namespace hcasim::fabric
