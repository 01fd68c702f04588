// SPDX-License-Identifier: Apache-2.0
// The fabric's shared DMA arena (sim/fabric/dma_arena.h): the client's page pool and the
// device's checked mapping of it.
#include "dma_arena.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace hcasim::fabric {
namespace {
constexpr uint64_t kPage = 4096;

bool all_zero(const uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

TEST(DmaArena, HandsOutZeroedPagesInsideItself) {
  DmaArena a;
  ASSERT_TRUE(a.create(16 * kPage));
  uint8_t* p = a.alloc(100);  // rounded up to a page
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(uint64_t(p - a.base()) % kPage, 0u);
  EXPECT_TRUE(all_zero(p, kPage));
  EXPECT_EQ(a.pages_in_use(), 1u);
  std::memset(p, 0xab, kPage);
  ASSERT_TRUE(a.free(p, 100));
  EXPECT_EQ(a.pages_in_use(), 0u);
  uint8_t* q = a.alloc(kPage);
  EXPECT_EQ(q, p);  // first fit: the same page again, and zero again
  EXPECT_TRUE(all_zero(q, kPage));
}

TEST(DmaArena, RunsOutThenCoalescesWhatIsGivenBack) {
  DmaArena a;
  ASSERT_TRUE(a.create(4 * kPage));
  std::vector<uint8_t*> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(a.alloc(kPage));
  for (uint8_t* p : pages) ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.alloc(kPage), nullptr);  // full: the caller falls back to ordinary memory
  ASSERT_TRUE(a.free(pages[1], kPage));
  EXPECT_EQ(a.alloc(2 * kPage), nullptr);  // one free page is not two
  ASSERT_TRUE(a.free(pages[2], kPage));
  EXPECT_EQ(a.alloc(2 * kPage), pages[1]);  // pages 1 and 2 merged into one run
}

TEST(DmaArena, RefusesToFreeWhatIsNotItsOwn) {
  DmaArena a;
  ASSERT_TRUE(a.create(2 * kPage));
  uint8_t elsewhere[16];
  EXPECT_FALSE(a.free(elsewhere, sizeof elsewhere));
  DmaArena none;  // never created
  EXPECT_FALSE(none.free(elsewhere, sizeof elsewhere));
}

TEST(DmaWindow, FindsOnlyWhatLiesWhollyInside) {
  uint8_t local[64];
  const DmaWindow w{local, 0x10000, 64};
  EXPECT_EQ(w.find(0x10000, 64), local);
  EXPECT_EQ(w.find(0x10020, 32), local + 32);
  EXPECT_EQ(w.find(0x10020, 33), nullptr);  // runs past the end
  EXPECT_EQ(w.find(0xfff0, 32), nullptr);   // starts before
  EXPECT_EQ(w.find(0x10000, ~0ull), nullptr);
  EXPECT_EQ(w.find(~0ull, 2), nullptr);
  EXPECT_EQ(DmaWindow{}.find(0x10000, 1), nullptr);
}

TEST(MapClientArena, SharesTheClientsPagesAndChecksWhereTheyAre) {
  DmaArena a;
  ASSERT_TRUE(a.create(4 * kPage));
  DmaWindow w;
  ASSERT_EQ(map_client_arena(a.fd(), getpid(), uint64_t(uintptr_t(a.base())), a.size(), w), "");
  EXPECT_TRUE(all_zero(a.base(), 8)) << "the check's mark must not stay behind";
  uint8_t* p = a.alloc(kPage);
  ASSERT_NE(p, nullptr);
  uint8_t* seen = w.find(uint64_t(uintptr_t(p)), 8);
  ASSERT_NE(seen, nullptr);
  std::memcpy(seen, "cqe!", 4);             // the device writes ...
  EXPECT_EQ(std::memcmp(p, "cqe!", 4), 0);  // ... the program reads, no system call between
  unmap_client_arena(w);
  EXPECT_EQ(w.local, nullptr);
}

TEST(MapClientArena, RefusesAnArenaThatIsNotWhereTheClientSays) {
  DmaArena a;
  ASSERT_TRUE(a.create(4 * kPage));
  static uint8_t other[2 * 4096] __attribute__((aligned(4096)));
  DmaWindow w;
  EXPECT_NE(map_client_arena(a.fd(), getpid(), uint64_t(uintptr_t(other)), kPage, w)
                .find("not mapped at the address"),
            std::string::npos);
  EXPECT_EQ(w.local, nullptr);
  EXPECT_NE(
      map_client_arena(a.fd(), getpid(), uint64_t(uintptr_t(a.base())) + 1, kPage, w).find("page-aligned"),
      std::string::npos);
  EXPECT_NE(map_client_arena(a.fd(), getpid(), uint64_t(uintptr_t(a.base())), 8 * kPage, w).find("smaller"),
            std::string::npos);
  const int efd = eventfd(0, EFD_CLOEXEC);
  EXPECT_NE(map_client_arena(efd, getpid(), uint64_t(uintptr_t(a.base())), kPage, w).find("not a memfd"),
            std::string::npos);
  ::close(efd);
}

}  // namespace
}  // namespace hcasim::fabric
