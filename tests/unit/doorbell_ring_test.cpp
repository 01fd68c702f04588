// SPDX-License-Identifier: Apache-2.0
// The doorbell ring a fabric client shares with the device (sim/fabric/doorbell_ring.h): entries
// come out in the order they went in, a full ring refuses the next one (the client then sends a
// message), a head beyond the ring's length is reported and the ring emptied, a device about to
// sleep sees waiting doorbells and a client sees a sleeping device (unless it looks again by
// itself), an entry's stamp gives back when it was written, and a writer thread and a
// reader thread pass 200,000 doorbells through it with none lost, repeated or reordered.
#include "doorbell_ring.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace hcasim::fabric {
namespace {

RingDoorbell db(uint64_t n) {
  return RingDoorbell{DoorbellMsg{uint32_t(n % 3), hw::kUarSqDoorbell, n}, int32_t(n % 7), 0};
}

std::unique_ptr<DoorbellRing> fresh() {
  auto r = std::make_unique<DoorbellRing>();
  *r = DoorbellRing{};  // zeroed, as the arena's pages are
  return r;
}

TEST(DoorbellRing, StartsOffUntilTheDeviceTakesIt) {
  auto r = fresh();
  EXPECT_FALSE(ring_on(*r));
  ring_set_on(*r, true);
  EXPECT_TRUE(ring_on(*r));
}

TEST(DoorbellRing, EntriesComeOutInOrderAcrossTheWrap) {
  auto r = fresh();
  RingDoorbell out[kDoorbellRingSlots];
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 5; ++round) {  // 5 * 100 entries: the ring wraps several times
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(ring_push(*r, db(next_in++)));
    const int n = ring_take(*r, out);
    ASSERT_EQ(n, 100);
    for (int i = 0; i < n; ++i, ++next_out) {
      ASSERT_EQ(out[i].doorbell.value, next_out);
      ASSERT_EQ(out[i].doorbell.hca, uint32_t(next_out % 3));
      ASSERT_EQ(out[i].doorbell.offset, hw::kUarSqDoorbell);
      ASSERT_EQ(out[i].tid, int32_t(next_out % 7)) << "each entry keeps the thread that wrote it";
    }
  }
  EXPECT_EQ(ring_take(*r, out), 0) << "nothing waits";
}

TEST(DoorbellRing, AFullRingRefusesTheNextEntry) {
  auto r = fresh();
  for (uint32_t i = 0; i < kDoorbellRingSlots; ++i) ASSERT_TRUE(ring_push(*r, db(i)));
  EXPECT_FALSE(ring_push(*r, db(999))) << "no slot is free";
  RingDoorbell out[kDoorbellRingSlots];
  ASSERT_EQ(ring_take(*r, out), int(kDoorbellRingSlots));
  EXPECT_EQ(out[kDoorbellRingSlots - 1].doorbell.value, kDoorbellRingSlots - 1)
      << "the refused one was not written";
  EXPECT_TRUE(ring_push(*r, db(1000))) << "taking frees the slots";
}

TEST(DoorbellRing, AHeadBeyondTheRingIsReportedAndEmptied) {
  auto r = fresh();
  r->head = kDoorbellRingSlots + 1;  // more entries than the ring has slots
  RingDoorbell out[kDoorbellRingSlots];
  EXPECT_EQ(ring_take(*r, out), -1);
  EXPECT_EQ(r->tail, r->head) << "emptied: the next take starts afresh";
  EXPECT_EQ(ring_take(*r, out), 0);
  r->head = r->tail - 1;  // behind the tail: as far from it as can be
  EXPECT_EQ(ring_take(*r, out), -1);
}

TEST(DoorbellRing, SleepAndWake) {
  auto r = fresh();
  EXPECT_FALSE(ring_needs_wake(*r)) << "an awake device needs no WAKE";
  EXPECT_FALSE(ring_sleep(*r)) << "nothing waits: it may sleep";
  ASSERT_TRUE(ring_push(*r, db(1)));
  EXPECT_TRUE(ring_needs_wake(*r)) << "pushed while it sleeps: wake it";
  ring_awake(*r);
  EXPECT_FALSE(ring_needs_wake(*r));
  EXPECT_TRUE(ring_sleep(*r)) << "a doorbell waits: do not sleep";
  ring_awake(*r);
}

TEST(DoorbellRing, AnEntrysStampGivesTheInstantItWasWritten) {
  // A doorbell taken late counts as a message sent when it was written (the lockstep quiet rule).
  const uint64_t written = 5'000'000'123ull;
  EXPECT_EQ(ring_written_ns(ring_stamp(written), written), written);
  EXPECT_EQ(ring_written_ns(ring_stamp(written), written + 250'000), written) << "taken 250 us later";
  // Across the low 32 bits' wrap (every 4.29 s).
  const uint64_t before_wrap = 0x1'ffff'fff0ull;
  EXPECT_EQ(ring_written_ns(ring_stamp(before_wrap), before_wrap + 0x40), before_wrap);
}

TEST(DoorbellRing, ADeviceThatLooksAgainByItselfNeedsNoWake) {
  auto r = fresh();
  EXPECT_FALSE(ring_sleep(*r, /*looks_again=*/true));
  ASSERT_TRUE(ring_push(*r, db(1)));
  EXPECT_FALSE(ring_needs_wake(*r)) << "lockstep, a finite sleep: it looks at the ring before time moves";
  RingDoorbell out[kDoorbellRingSlots];
  ASSERT_EQ(ring_take(*r, out), 1);
  EXPECT_FALSE(ring_sleep(*r, /*looks_again=*/false));
  ASSERT_TRUE(ring_push(*r, db(2)));
  EXPECT_TRUE(ring_needs_wake(*r)) << "asleep until a message: wake it";
}

TEST(DoorbellRing, AWriterAndAReaderThreadLoseNothing) {
  auto r = fresh();
  constexpr uint64_t kN = 200'000;
  std::thread writer([&] {
    for (uint64_t i = 0; i < kN;)
      if (ring_push(*r, db(i)))
        ++i;
      else
        std::this_thread::yield();  // full: the client would send a message instead
  });
  RingDoorbell out[kDoorbellRingSlots];
  uint64_t expect = 0;
  while (expect < kN) {
    const int n = ring_take(*r, out);
    ASSERT_GE(n, 0);
    for (int i = 0; i < n; ++i, ++expect) ASSERT_EQ(out[i].doorbell.value, expect);
    if (!n) std::this_thread::yield();
  }
  writer.join();
  EXPECT_EQ(ring_take(*r, out), 0);
}

}  // namespace
}  // namespace hcasim::fabric
