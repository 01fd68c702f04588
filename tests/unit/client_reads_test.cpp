// SPDX-License-Identifier: Apache-2.0
// The fabric device's payload reads, read ahead (sim/fabric/client_reads.h), from this process
// itself (process_vm_readv of one's own pid): one call serves the payloads that follow, the copy
// follows the device's writes, forget() drops it, a read ahead stops at the first unmapped page,
// how far it reads follows what the last copy served, a gone process is reported.
#include "client_reads.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace hcasim::fabric {
namespace {

uint64_t at(const void* p) { return uint64_t(uintptr_t(p)); }

TEST(ClientReads, OneCallServesThePayloadsThatFollow) {
  std::vector<uint8_t> buf(8192);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 7);
  ClientReads r;
  uint8_t got[64];
  EXPECT_FALSE(r.find(at(buf.data()), got, 64)) << "nothing is kept before a fill";
  ASSERT_TRUE(r.fill(getpid(), at(buf.data()), got, 64));
  EXPECT_EQ(got[63], buf[63]);
  for (uint64_t off = 64; off + 64 <= 64 + ClientReads::kFirstAhead; off += 64) {
    ASSERT_TRUE(r.find(at(buf.data() + off), got, 64)) << "offset " << off;
    ASSERT_EQ(got[0], buf[off]);
    ASSERT_EQ(got[63], buf[off + 63]);
  }
  EXPECT_FALSE(r.find(at(buf.data() + 64 + ClientReads::kFirstAhead), got, 1)) << "past what was read ahead";
  EXPECT_FALSE(r.find(at(buf.data()) - 1, got, 2)) << "before it";
  EXPECT_EQ(r.fills(), 1u);
  EXPECT_EQ(r.hits(), ClientReads::kFirstAhead / 64);
}

TEST(ClientReads, FollowsTheDevicesWritesAndForgets) {
  std::vector<uint8_t> buf(4096, 1);
  ClientReads r;
  uint8_t got[16];
  ASSERT_TRUE(r.fill(getpid(), at(buf.data()), got, 16));
  const std::vector<uint8_t> twos(32, 2);
  r.update(at(buf.data()) + 100, twos.data(), 32);  // the device wrote there: the copy follows
  r.update(at(buf.data()) - 16, twos.data(), 32);   // overlapping its start
  ASSERT_TRUE(r.find(at(buf.data()), got, 16));
  EXPECT_EQ(got[15], 2);
  ASSERT_TRUE(r.find(at(buf.data()) + 96, got, 16));
  EXPECT_EQ(got[3], 1);
  EXPECT_EQ(got[4], 2);
  buf[200] = 9;  // software changed its memory (and will say so with a message)
  ASSERT_TRUE(r.find(at(buf.data()) + 200, got, 1));
  EXPECT_EQ(got[0], 1) << "a copy is a copy until it is forgotten";
  r.forget();
  EXPECT_FALSE(r.find(at(buf.data()) + 200, got, 1));
  ASSERT_TRUE(r.fill(getpid(), at(buf.data()) + 200, got, 1));
  EXPECT_EQ(got[0], 9);
}

TEST(ClientReads, ReadsAheadOnlyAsFarAsTheProcessMaps) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* p = static_cast<uint8_t*>(
      mmap(nullptr, size_t(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(munmap(p + page, size_t(page)), 0);
  p[page - 64] = 5;
  ClientReads r;
  uint8_t got[64];
  ASSERT_TRUE(r.fill(getpid(), at(p + page - 64), got, 64)) << "the payload is mapped; what follows is not";
  EXPECT_EQ(got[0], 5);
  EXPECT_FALSE(r.find(at(p + page), got, 1));
  errno = 0;
  EXPECT_FALSE(r.fill(getpid(), at(p + page - 32), got, 64)) << "a payload running into an unmapped page";
  EXPECT_EQ(errno, EFAULT);
  EXPECT_FALSE(r.find(at(p + page - 32), got, 16)) << "nothing is kept after a failed fill";
  munmap(p, size_t(page));
}

TEST(ClientReads, ReadsAheadAsFarAsTheLastCopyServed) {
  std::vector<uint8_t> buf(256 * 1024, 3);
  ClientReads r;
  uint8_t got[64];
  // A doorbell per payload (perftest): each copy serves only its own 64 bytes.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(r.fill(getpid(), at(buf.data()) + uint64_t(i) * 64, got, 64));
    r.forget();
  }
  EXPECT_EQ(r.reach(64), 64u + 128u) << "twice what the last copy served";
  // Payloads side by side, many per copy: it reads further each time, up to kWindow.
  uint64_t off = 0;
  for (int copy = 0; copy < 12; ++copy) {
    ASSERT_TRUE(r.fill(getpid(), at(buf.data()) + off, got, 64));
    for (off += 64; r.find(at(buf.data()) + off, got, 64);) off += 64;
  }
  EXPECT_EQ(r.reach(64), 64u + ClientReads::kWindow);
}

TEST(ClientReads, AGoneProcessIsReported) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  std::vector<uint8_t> buf(64);
  ClientReads r;
  errno = 0;
  EXPECT_FALSE(r.fill(child, at(buf.data()), buf.data(), 64));
  EXPECT_EQ(errno, ESRCH);
}

}  // namespace
}  // namespace hcasim::fabric
