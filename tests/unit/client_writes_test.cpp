// SPDX-License-Identifier: Apache-2.0
// The fabric device's gathered payload writes (sim/fabric/client_writes.h), written into this
// process itself (process_vm_writev to one's own pid): order kept, adjacent pages one range, one
// system call per batch, an unmapped range skipped without losing the rest, a gone process
// reported.
#include "client_writes.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace hcasim::fabric {
namespace {

uint64_t at(const void* p) { return uint64_t(uintptr_t(p)); }

TEST(ClientWrites, WritesEverythingInOrderWithOneCall) {
  std::vector<uint8_t> a(64, 0), b(64, 0);
  const std::vector<uint8_t> ones(64, 1), twos(32, 2), threes(8, 3);
  ClientWrites w;
  w.add(at(a.data()), ones.data(), 64);
  w.add(at(b.data()), twos.data(), 32);
  w.add(at(a.data()), threes.data(), 8);  // later than the first: it wins
  EXPECT_EQ(a[0], 0) << "nothing is written before the flush";
  ASSERT_TRUE(w.flush(getpid()));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.calls(), 1u);
  EXPECT_EQ(w.writes(), 3u);
  EXPECT_EQ(a[0], 3);
  EXPECT_EQ(a[7], 3);
  EXPECT_EQ(a[8], 1);
  EXPECT_EQ(a[63], 1);
  EXPECT_EQ(b[31], 2);
  EXPECT_EQ(b[32], 0);
}

TEST(ClientWrites, OverlapsOnlyWhatItKeeps) {
  std::vector<uint8_t> buf(256, 0);
  const std::vector<uint8_t> src(16, 9);
  ClientWrites w;
  w.add(at(buf.data() + 64), src.data(), 16);
  w.add(at(buf.data() + 80), src.data(), 16);  // adjacent: one range [64, 96)
  EXPECT_TRUE(w.overlaps(at(buf.data() + 95), 1));
  EXPECT_TRUE(w.overlaps(at(buf.data()), 65));
  EXPECT_FALSE(w.overlaps(at(buf.data() + 96), 16));
  EXPECT_FALSE(w.overlaps(at(buf.data()), 64));
  ASSERT_TRUE(w.flush(getpid()));
  EXPECT_FALSE(w.overlaps(at(buf.data() + 64), 32)) << "flushed writes are forgotten";
  EXPECT_EQ(buf[64], 9);
  EXPECT_EQ(buf[95], 9);
}

TEST(ClientWrites, AnUnmappedRangeIsSkippedAndTheRestWritten) {
  const long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(nullptr, size_t(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(munmap(gone, size_t(page)), 0);
  std::vector<uint8_t> a(8, 0), b(8, 0);
  const std::vector<uint8_t> src(8, 5);
  ClientWrites w;
  w.add(at(a.data()), src.data(), 8);
  w.add(at(gone), src.data(), 8);
  w.add(at(b.data()), src.data(), 8);
  EXPECT_TRUE(w.flush(getpid())) << "the process is still there";
  EXPECT_EQ(a[7], 5);
  EXPECT_EQ(b[7], 5) << "the write after the unmapped range was lost";
}

TEST(ClientWrites, AGoneProcessIsReported) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: the pid names no process now
  uint8_t x = 0;
  const uint8_t one = 1;
  ClientWrites w;
  w.add(at(&x), &one, 1);
  EXPECT_FALSE(w.flush(child));
  EXPECT_TRUE(w.empty());
}

TEST(ClientWrites, FullBoundsWhatIsKept) {
  std::vector<uint8_t> buf(2 * ClientWrites::kMaxItems, 0);
  const uint8_t one = 1;
  ClientWrites w;
  for (size_t i = 0; i + 1 < ClientWrites::kMaxItems; ++i) w.add(at(buf.data() + 2 * i), &one, 1);
  EXPECT_FALSE(w.full());
  w.add(at(buf.data() + 2 * ClientWrites::kMaxItems - 2), &one, 1);
  EXPECT_TRUE(w.full());
  ASSERT_TRUE(w.flush(getpid()));
  EXPECT_EQ(w.calls(), 1u);
  EXPECT_EQ(buf[2 * ClientWrites::kMaxItems - 2], 1);
}

}  // namespace
}  // namespace hcasim::fabric
