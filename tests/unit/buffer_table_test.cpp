// SPDX-License-Identifier: Apache-2.0
/**
 * @file buffer_table_test.cpp
 * @brief Unit tests of the buffer-table walker (model/units/buffer_table.h) over tables built by
 *        hand in host memory, with data pages mapped at deliberately non-contiguous IOVAs.
 */
#include "buffer_table.h"

#include <gtest/gtest.h>

#include "model_fixture.h"

// libsystemc references sc_main; these tests never run it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

using test::DmaRig;
using test::HandTable;
using test::kPage;

struct Xlate {
  BtResult r;
  uint8_t* host = nullptr;
};

/** Translate and follow the DMA address through the IOMMU to host memory. */
Xlate xlate(DmaRig& rig, const hw::BufferDesc& d, uint64_t off, BufferCursor& cur) {
  Xlate x;
  x.r = rig.bt.translate(d, off, cur, 7, "test");
  if (x.r.ok) x.host = rig.host_of(x.r.dma);
  return x;
}

TEST(BufferTable, HandBuiltPagesAreScattered) {
  // Sanity of the fixture itself: the walker tests below only mean something if consecutive
  // queue pages are not consecutive in DMA space.
  DmaRig rig;
  HandTable t = rig.build(4, 1);
  for (size_t i = 0; i + 1 < t.page_iova.size(); ++i) {
    EXPECT_NE(t.page_iova[i] + kPage, t.page_iova[i + 1]);
    EXPECT_NE(t.page_iova[i + 1] + kPage, t.page_iova[i]);
  }
}

TEST(BufferTable, OneLevelTranslatesPageBoundaries) {
  DmaRig rig;
  HandTable t = rig.build(4, 1);
  BufferCursor cur;

  Xlate x = xlate(rig, t.desc, 0, cur);  // first byte of page 0: walk
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.dma, t.page_iova[0]);
  EXPECT_EQ(x.r.contiguous, kPage);
  EXPECT_EQ(x.r.reads, 1u);
  EXPECT_EQ(x.host, t.pages[0]);

  x = xlate(rig, t.desc, kPage - 1, cur);  // last byte of page 0: cached
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.dma, t.page_iova[0] + kPage - 1);
  EXPECT_EQ(x.r.contiguous, 1u);
  EXPECT_EQ(x.r.reads, 0u);
  EXPECT_EQ(x.host, t.pages[0] + kPage - 1);

  x = xlate(rig, t.desc, kPage, cur);  // first byte of page 1: walk
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.dma, t.page_iova[1]);
  EXPECT_EQ(x.r.contiguous, kPage);
  EXPECT_EQ(x.r.reads, 1u);
  EXPECT_EQ(x.host, t.pages[1]);

  x = xlate(rig, t.desc, 4 * kPage - 1, cur);  // last byte of the last page
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.dma, t.page_iova[3] + kPage - 1);
  EXPECT_EQ(x.r.contiguous, 1u);
  EXPECT_EQ(x.r.reads, 1u);
  EXPECT_EQ(x.host, t.pages[3] + kPage - 1);

  x = xlate(rig, t.desc, 3 * kPage + 0x123, cur);  // same page again: cached
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.dma, t.page_iova[3] + 0x123);
  EXPECT_EQ(x.r.contiguous, kPage - 0x123);
  EXPECT_EQ(x.r.reads, 0u);

  EXPECT_EQ(rig.bt.walks(), 3u);
  EXPECT_EQ(rig.bt.cache_hits(), 2u);
  EXPECT_EQ(rig.dma.bytes_read(), 3u * 8);  // one 8-byte entry per walk
}

TEST(BufferTable, EveryPageOfAOneLevelTableReachesItsHostPage) {
  DmaRig rig;
  HandTable t = rig.build(16, 1);
  BufferCursor cur;
  for (uint32_t p = 0; p < 16; ++p) {
    t.pages[p][p] = uint8_t(0xa0 + p);
    Xlate x = xlate(rig, t.desc, uint64_t(p) * kPage + p, cur);
    ASSERT_TRUE(x.r.ok) << p;
    EXPECT_EQ(x.host, t.pages[p] + p) << p;
    EXPECT_EQ(*x.host, uint8_t(0xa0 + p)) << p;
  }
  EXPECT_EQ(rig.bt.walks(), 16u);
}

TEST(BufferTable, OffsetsBeyondTheLastPageFail) {
  DmaRig rig;
  HandTable t = rig.build(4, 1);
  BufferCursor cur;
  ASSERT_TRUE(xlate(rig, t.desc, 3 * kPage, cur).r.ok);  // cursor now on page 3
  const uint64_t walks = rig.bt.walks(), hits = rig.bt.cache_hits(), rd = rig.dma.bytes_read();
  EXPECT_FALSE(xlate(rig, t.desc, 4 * kPage, cur).r.ok);
  EXPECT_FALSE(xlate(rig, t.desc, 4 * kPage + 5, cur).r.ok);
  EXPECT_FALSE(xlate(rig, t.desc, ~0ull >> 1, cur).r.ok);
  // Not even a table read: the npages bound comes first.
  EXPECT_EQ(rig.bt.walks(), walks);
  EXPECT_EQ(rig.bt.cache_hits(), hits);
  EXPECT_EQ(rig.dma.bytes_read(), rd);

  // A smaller descriptor over the same table bounds the walk, even with a warm cursor.
  hw::BufferDesc two = t.desc;
  two.npages = 2;
  EXPECT_FALSE(xlate(rig, two, 3 * kPage, cur).r.ok);
  EXPECT_TRUE(xlate(rig, two, 2 * kPage - 1, cur).r.ok);
}

TEST(BufferTable, InvalidEntriesFailAndDoNotPoisonTheCursor) {
  DmaRig rig;
  HandTable t = rig.build(4, 1);
  t.tables[0][2] = 0;                            // no valid bit, no address
  t.tables[0][3] = hw::to_be64(t.page_iova[3]);  // address but no valid bit
  BufferCursor cur;
  ASSERT_TRUE(xlate(rig, t.desc, kPage, cur).r.ok);           // page 1: walk
  EXPECT_FALSE(xlate(rig, t.desc, 2 * kPage, cur).r.ok);      // page 2: invalid
  EXPECT_FALSE(xlate(rig, t.desc, 3 * kPage + 8, cur).r.ok);  // page 3: invalid
  Xlate x = xlate(rig, t.desc, kPage + 4, cur);               // page 1 again: still cached
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.reads, 0u);
  EXPECT_EQ(x.r.dma, t.page_iova[1] + 4);
  EXPECT_EQ(rig.bt.walks(), 3u);
  EXPECT_EQ(rig.bt.cache_hits(), 1u);
  // Fixing the entry makes the page reachable (the failure was not cached either).
  t.tables[0][2] = hw::bte_make(t.page_iova[2]);
  x = xlate(rig, t.desc, 2 * kPage, cur);
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.host, t.pages[2]);
}

TEST(BufferTable, UnmappedTableIsADmaFault) {
  DmaRig rig;
  HandTable t = rig.build(2, 1);
  hw::BufferDesc d = t.desc;
  d.bt_root = 0x1000;  // nothing mapped there
  BufferCursor cur;
  EXPECT_FALSE(xlate(rig, d, 0, cur).r.ok);
  EXPECT_EQ(rig.dma.faults(), 1u);
  d.levels = 2;
  EXPECT_FALSE(xlate(rig, d, kPage, cur).r.ok);
  EXPECT_EQ(rig.dma.faults(), 2u);
}

TEST(BufferTable, UnsupportedLevelCountsFail) {
  DmaRig rig;
  HandTable t = rig.build(2, 1);
  for (uint8_t levels : {0, 3, 255}) {
    hw::BufferDesc d = t.desc;
    d.levels = levels;
    BufferCursor cur;
    EXPECT_FALSE(xlate(rig, d, 0, cur).r.ok) << int(levels);
  }
}

TEST(BufferTable, TranslationCacheIsPerCursor) {
  DmaRig rig;
  HandTable t = rig.build(2, 1);
  BufferCursor one;
  for (int i = 0; i < 4; ++i) {  // ping-pong on one cursor: every access walks
    EXPECT_EQ(xlate(rig, t.desc, 0, one).r.reads, 1u);
    EXPECT_EQ(xlate(rig, t.desc, kPage, one).r.reads, 1u);
  }
  EXPECT_EQ(rig.bt.walks(), 8u);
  EXPECT_EQ(rig.bt.cache_hits(), 0u);

  BufferCursor a, b;  // two cursors, one per page: one walk each, then hits
  for (int i = 0; i < 4; ++i) {
    Xlate xa = xlate(rig, t.desc, 8 * i, a);
    Xlate xb = xlate(rig, t.desc, kPage + 8 * i, b);
    ASSERT_TRUE(xa.r.ok && xb.r.ok);
    EXPECT_EQ(xa.host, t.pages[0] + 8 * i);
    EXPECT_EQ(xb.host, t.pages[1] + 8 * i);
  }
  EXPECT_EQ(rig.bt.walks(), 10u);
  EXPECT_EQ(rig.bt.cache_hits(), 6u);
  EXPECT_EQ(a.page, 0u);
  EXPECT_EQ(a.page_dma, t.page_iova[0]);
  EXPECT_EQ(b.page, 1u);
  EXPECT_EQ(b.page_dma, t.page_iova[1]);
}

TEST(BufferTable, FirstPageOffsetShiftsEveryOffset) {
  // An MR starting 0x100 bytes into its first page: offset 0 is page 0 + 0x100.
  DmaRig rig;
  HandTable t = rig.build(3, 1, 12, true, 0x100);
  BufferCursor cur;
  Xlate x = xlate(rig, t.desc, 0, cur);
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.host, t.pages[0] + 0x100);
  EXPECT_EQ(x.r.contiguous, kPage - 0x100);
  x = xlate(rig, t.desc, kPage - 0x101, cur);  // last byte of page 0
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.host, t.pages[0] + kPage - 1);
  EXPECT_EQ(x.r.contiguous, 1u);
  x = xlate(rig, t.desc, kPage - 0x100, cur);  // first byte of page 1
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.host, t.pages[1]);
  EXPECT_EQ(x.r.dma, t.page_iova[1]);
  x = xlate(rig, t.desc, 3 * kPage - 0x101, cur);  // last byte of page 2
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.host, t.pages[2] + kPage - 1);
  EXPECT_FALSE(xlate(rig, t.desc, 3 * kPage - 0x100, cur).r.ok);
}

TEST(BufferTable, TwoMiBPages) {
  constexpr uint64_t k2M = 2ull << 20;
  DmaRig rig;
  HandTable t = rig.build(3, 1, 21, /*back_pages=*/false);
  BufferCursor cur;
  BtResult r = rig.bt.translate(t.desc, 0, cur, 1, "t");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dma, t.page_iova[0]);
  EXPECT_EQ(r.contiguous, k2M);
  r = rig.bt.translate(t.desc, k2M - 1, cur, 1, "t");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dma, t.page_iova[0] + k2M - 1);
  EXPECT_EQ(r.contiguous, 1u);
  EXPECT_EQ(r.reads, 0u);  // 4 KiB steps inside one 2 MiB page are one translation
  r = rig.bt.translate(t.desc, k2M, cur, 1, "t");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dma, t.page_iova[1]);
  EXPECT_EQ(r.reads, 1u);
  r = rig.bt.translate(t.desc, 3 * k2M - 1, cur, 1, "t");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dma, t.page_iova[2] + k2M - 1);
  EXPECT_FALSE(rig.bt.translate(t.desc, 3 * k2M, cur, 1, "t").ok);
  EXPECT_EQ(rig.bt.walks(), 3u);

  // With a first-page offset (an MR starting inside a 2 MiB page).
  hw::BufferDesc d = t.desc;
  d.first_page_offset = 0x12345;
  BufferCursor c2;
  r = rig.bt.translate(d, 0, c2, 1, "t");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dma, t.page_iova[0] + 0x12345);
  EXPECT_EQ(r.contiguous, k2M - 0x12345);
  r = rig.bt.translate(d, k2M - 0x12345, c2, 1, "t");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.dma, t.page_iova[1]);
}

TEST(BufferTable, TwoLevelTranslatesAcrossLeaves) {
  // 600 pages: leaf 0 holds pages 0..511, leaf 1 pages 512..599.
  DmaRig rig;
  HandTable t = rig.build(600, 2);
  ASSERT_EQ(t.tables.size(), 3u);  // root + 2 leaves
  BufferCursor cur;

  Xlate x = xlate(rig, t.desc, 512 * kPage - 1, cur);  // last byte of the last page of leaf 0
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.reads, 2u);
  EXPECT_EQ(x.r.dma, t.page_iova[511] + kPage - 1);
  EXPECT_EQ(x.host, t.pages[511] + kPage - 1);

  x = xlate(rig, t.desc, 512 * kPage, cur);  // first byte of leaf 1
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.reads, 2u);
  EXPECT_EQ(x.host, t.pages[512]);

  x = xlate(rig, t.desc, 512 * kPage + 100, cur);  // cached
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.r.reads, 0u);

  x = xlate(rig, t.desc, 600 * kPage - 1, cur);  // last byte of the last page
  ASSERT_TRUE(x.r.ok);
  EXPECT_EQ(x.host, t.pages[599] + kPage - 1);
  EXPECT_FALSE(xlate(rig, t.desc, 600 * kPage, cur).r.ok);
  EXPECT_EQ(rig.bt.walks(), 3u);
  EXPECT_EQ(rig.dma.bytes_read(), 3u * 16);  // root + leaf entry per walk

  // Every page reaches its own host page.
  for (uint32_t p = 0; p < 600; ++p) {
    x = xlate(rig, t.desc, uint64_t(p) * kPage + (p % kPage), cur);
    ASSERT_TRUE(x.r.ok) << p;
    ASSERT_EQ(x.host, t.pages[p] + (p % kPage)) << p;
  }
}

TEST(BufferTable, TwoLevelInvalidEntries) {
  DmaRig rig;
  HandTable t = rig.build(600, 2, 12, /*back_pages=*/false);
  t.tables[0][1] = 0;  // root entry of leaf 1
  t.tables[1][7] = 0;  // leaf 0, page 7
  BufferCursor cur;
  EXPECT_TRUE(xlate(rig, t.desc, 511 * kPage, cur).r.ok);
  EXPECT_FALSE(xlate(rig, t.desc, 512 * kPage, cur).r.ok);
  EXPECT_FALSE(xlate(rig, t.desc, 599 * kPage, cur).r.ok);
  EXPECT_FALSE(xlate(rig, t.desc, 7 * kPage, cur).r.ok);
  EXPECT_TRUE(xlate(rig, t.desc, 6 * kPage, cur).r.ok);
  EXPECT_TRUE(xlate(rig, t.desc, 8 * kPage, cur).r.ok);
}

TEST(BufferTable, TwoLevelWithTwoMiBPagesUsesFourKiBTables) {
  // Tables are pages of 512 entries whatever the data page size (hca_hw.h: "root entries point
  // to leaf tables (each one page of entries)"; entries hold 4 KiB-aligned addresses). A >1 GiB
  // MR with 2 MiB pages needs a second level: page 513 is entry 1 of leaf 1.
  constexpr uint64_t k2M = 2ull << 20;
  DmaRig rig;
  HandTable t = rig.build(600, 2, 21, /*back_pages=*/false);
  BufferCursor cur;
  for (uint32_t p : {0u, 1u, 511u, 512u, 513u, 599u}) {
    BtResult r = rig.bt.translate(t.desc, uint64_t(p) * k2M + 0x1234, cur, 1, "t");
    ASSERT_TRUE(r.ok) << "page " << p;
    EXPECT_EQ(r.dma, t.page_iova[p] + 0x1234) << "page " << p;
    EXPECT_EQ(r.reads, 2u);
  }
  EXPECT_EQ(rig.dma.faults(), 0u);
}

}  // namespace
}  // namespace hcasim::model
