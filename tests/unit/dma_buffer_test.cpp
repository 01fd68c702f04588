// SPDX-License-Identifier: Apache-2.0
/**
 * @file dma_buffer_test.cpp
 * @brief Unit tests of the driver's DMA memory (driver/kernel/dma_buffer.h): queue buffers,
 *        pinned regions and the buffer tables they build, checked by walking them with the
 *        model's own walker through a model IOMMU, as the HCA would.
 */
#include "dma_buffer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model_fixture.h"

// libsystemc references sc_main; these tests never run it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim {
namespace {

using test::DmaRig;
using test::kPage;
constexpr uint64_t k2M = 2ull << 20;

/** An HcaLink whose only working part is the IOMMU: it programs a model::Iommu. */
class TestLink : public drv::HcaLink {
 public:
  explicit TestLink(model::Iommu& iommu) : iommu_(iommu) {}
  const std::string& name() const override { return name_; }
  void exec(hw::CmdMailbox& mb) override { mb.status = uint8_t(hw::CmdStatus::BadOpcode); }
  void mmio_write64(uint32_t, uint64_t) override {}
  bool iommu_map(uint64_t iova, void* hva, uint64_t len) override {
    ++maps;
    return iommu_.map(iova, static_cast<uint8_t*>(hva), len);
  }
  void iommu_unmap(uint64_t iova) override {
    ++unmaps;
    EXPECT_TRUE(iommu_.unmap(iova)) << "unmap of an IOVA that is not a mapping: " << std::hex << iova;
  }
  void set_irq_handler(std::function<void(uint32_t)>) override {}
  bool wait_progress() override { return false; }
  int activity_fd() override { return -1; }
  bool trace_on(trace::TraceKind) const override { return false; }
  void trace(trace::TraceKind, uint32_t, bool, uint64_t, const trace::TraceFields&, const char*) override {}
  int maps = 0, unmaps = 0;

 private:
  model::Iommu& iommu_;
  std::string name_ = "test0";
};

/** Sets an environment variable for one scope and restores it. */
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

class DmaBufferTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("HCASIM_BT_LEVELS"); }
  DmaRig rig;
  TestLink link{rig.iommu};
  drv::IovaSpace space;

  /** Walk @p d at @p off with the model walker and follow the IOMMU to host memory. */
  uint8_t* reach(const hw::BufferDesc& d, uint64_t off, model::BtResult* out = nullptr) {
    model::BufferCursor cur;
    model::BtResult r = rig.bt.translate(d, off, cur, 1, "test");
    if (out) *out = r;
    if (!r.ok) return nullptr;
    return rig.host_of(r.dma);
  }
  uint64_t dma_of(const hw::BufferDesc& d, uint64_t off) {
    model::BufferCursor cur;
    model::BtResult r = rig.bt.translate(d, off, cur, 1, "test");
    return r.ok ? r.dma : ~0ull;
  }
};

// ------------------------------------------------------------------ IovaSpace

TEST_F(DmaBufferTest, ScatteredPagesAreNeverAdjacent) {
  std::vector<uint64_t> v = space.scattered_pages(5);
  ASSERT_EQ(v.size(), 5u);
  std::set<uint64_t> all(v.begin(), v.end());
  EXPECT_EQ(all.size(), 5u);
  for (uint64_t a : v) {
    EXPECT_EQ(a % kPage, 0u);
    for (uint64_t b : v) EXPECT_NE(a + kPage, b) << "adjacent pages";
  }
  // A later allocation does not overlap the earlier one.
  std::vector<uint64_t> w = space.scattered_pages(3);
  for (uint64_t a : w)
    for (uint64_t b : v) EXPECT_FALSE(a < b + kPage && b < a + kPage);
}

TEST_F(DmaBufferTest, ContiguousRangesKeepTheirPhaseAndDoNotOverlap) {
  const uint64_t a = space.contiguous(0x5000, k2M, 0x1234);
  const uint64_t b = space.contiguous(0x3000, kPage, 0);
  EXPECT_EQ(a % k2M, 0x1234u);
  EXPECT_EQ(b % kPage, 0u);
  EXPECT_GE(b, a + 0x5000);
}

// ------------------------------------------------------------------ QueueBuffer

TEST_F(DmaBufferTest, QueueBufferPagesGetNonContiguousIovas) {
  const int maps0 = link.maps;
  drv::QueueBuffer q(link, space, 3 * kPage + 1);  // rounds up to 4 pages
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.size(), 4 * kPage);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q.data()) % kPage, 0u);
  for (uint64_t i = 0; i < q.size(); ++i) ASSERT_EQ(q.data()[i], 0) << "not zeroed at " << i;
  const hw::BufferDesc& d = q.desc();
  EXPECT_EQ(d.levels, 1);
  EXPECT_EQ(d.npages, 4u);
  EXPECT_EQ(d.log_page_size, 12);
  EXPECT_EQ(d.first_page_offset, 0u);
  EXPECT_EQ(link.maps - maps0, 5) << "4 data pages + 1 table page";

  std::vector<uint64_t> dma;
  for (uint32_t p = 0; p < 4; ++p) {
    dma.push_back(dma_of(d, p * kPage));
    ASSERT_NE(dma.back(), ~0ull);
    EXPECT_EQ(dma.back() % kPage, 0u);
  }
  for (uint32_t p = 0; p + 1 < 4; ++p)
    EXPECT_NE(dma[p] + kPage, dma[p + 1]) << "pages " << p << " and " << p + 1 << " are contiguous";
  EXPECT_EQ(std::set<uint64_t>(dma.begin(), dma.end()).size(), 4u);
}

TEST_F(DmaBufferTest, WalkingAQueueBufferReachesEachHostPage) {
  drv::QueueBuffer q(link, space, 6 * kPage);
  ASSERT_TRUE(q.ok());
  for (uint64_t p = 0; p < 6; ++p) {
    for (uint64_t off : {p * kPage, p * kPage + 1, p * kPage + kPage - 1}) {
      model::BtResult r;
      ASSERT_EQ(reach(q.desc(), off, &r), q.data() + off) << "offset " << off;
      EXPECT_EQ(r.contiguous, kPage - off % kPage);
      EXPECT_EQ(r.reads, 1u);
    }
  }
  EXPECT_EQ(reach(q.desc(), 6 * kPage), nullptr);
  // A DMA write through the walked address lands in the ring.
  const uint8_t cqe[4] = {1, 2, 3, 4};
  ASSERT_TRUE(rig.dma.write(dma_of(q.desc(), 2 * kPage + 60), cqe, 4, 1, "t"));
  EXPECT_EQ(0, std::memcmp(q.data() + 2 * kPage + 60, cqe, 4));
}

TEST_F(DmaBufferTest, QueueBufferDestructorUnmapsEverything) {
  {
    drv::QueueBuffer q(link, space, 5 * kPage);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(rig.iommu.mappings(), 6u);
  }
  EXPECT_EQ(rig.iommu.mappings(), 0u);
  EXPECT_EQ(link.maps, link.unmaps);
}

TEST_F(DmaBufferTest, ForcedTwoLevelQueueBuffer) {
  ScopedEnv env("HCASIM_BT_LEVELS", "2");
  drv::QueueBuffer q(link, space, 3 * kPage);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.desc().levels, 2);
  EXPECT_EQ(q.desc().npages, 3u);
  EXPECT_EQ(rig.iommu.mappings(), 3u + 2u) << "3 data pages + root + 1 leaf";
  for (uint64_t off : {uint64_t{0}, kPage - 1, kPage, 3 * kPage - 1}) {
    model::BtResult r;
    ASSERT_EQ(reach(q.desc(), off, &r), q.data() + off) << off;
    EXPECT_EQ(r.reads, 2u);
  }
}

TEST_F(DmaBufferTest, OtherLevelSettingsStayOneLevel) {
  for (const char* v : {"1", "0", "3", "x"}) {
    ScopedEnv env("HCASIM_BT_LEVELS", v);
    drv::QueueBuffer q(link, space, kPage);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q.desc().levels, 1) << v;
  }
}

TEST_F(DmaBufferTest, LargeQueueBufferNeedsTwoLevels) {
  // 600 pages do not fit one 512-entry table page.
  drv::QueueBuffer q(link, space, 600 * kPage);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.desc().levels, 2);
  EXPECT_EQ(q.desc().npages, 600u);
  model::BufferCursor cur;
  for (uint64_t p = 0; p < 600; ++p) {
    const uint64_t off = p * kPage + (p * 8) % kPage;
    model::BtResult r = rig.bt.translate(q.desc(), off, cur, 1, "t");
    ASSERT_TRUE(r.ok) << p;
    ASSERT_EQ(rig.host_of(r.dma), q.data() + off) << p;
  }
}

// ------------------------------------------------------------------ BufferTable

TEST_F(DmaBufferTest, TableEntriesAreBigEndianValidPageAddresses) {
  const std::vector<uint64_t> pages = {0x7000, 0x3000, 0x11000};
  drv::BufferTable t(link, space, pages, 12, 0);
  ASSERT_TRUE(t.ok());
  uint8_t* root = rig.host_of(t.desc().bt_root);
  ASSERT_NE(root, nullptr);
  const uint8_t e1[8] = {0, 0, 0, 0, 0, 0, 0x30, 0x01};  // 0x3000 | valid, big-endian
  EXPECT_EQ(0, std::memcmp(root + 8, e1, 8));
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(dma_of(t.desc(), i * kPage + 5), pages[i] + 5);
}

TEST_F(DmaBufferTest, TwoLevelTableWithTwoMiBPagesMatchesTheWalker) {
  // A >1 GiB MR of 2 MiB pages needs two levels (more than 512 pages). The page IOVAs need no
  // backing memory: only the table is walked.
  std::vector<uint64_t> pages(600);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = 0x100000000000ull + i * k2M;
  drv::BufferTable t(link, space, pages, 21, 0x345);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.desc().levels, 2);
  EXPECT_EQ(t.desc().log_page_size, 21);
  EXPECT_EQ(t.desc().first_page_offset, 0x345u);
  for (uint64_t p : {0ull, 511ull, 512ull, 513ull, 599ull}) {
    model::BtResult r;
    const uint64_t off = p * k2M;  // byte 0x345 of page p
    model::BufferCursor cur;
    r = rig.bt.translate(t.desc(), off, cur, 1, "t");
    ASSERT_TRUE(r.ok) << "page " << p;
    EXPECT_EQ(r.dma, pages[p] + 0x345) << "page " << p;
  }
  EXPECT_EQ(rig.dma.faults(), 0u);
}

TEST_F(DmaBufferTest, TooManyPagesIsRefused) {
  std::vector<uint64_t> pages(512 * 512 + 1, 0x1000);
  const size_t before = rig.iommu.mappings();
  drv::BufferTable t(link, space, pages, 12, 0);
  EXPECT_FALSE(t.ok());
  EXPECT_EQ(rig.iommu.mappings(), before);
}

// ------------------------------------------------------------------ PinnedRegion

TEST_F(DmaBufferTest, UnalignedPinnedRegion) {
  uint8_t* block = rig.mem.alloc(4 * kPage);
  uint8_t* addr = block + 0x123;
  const uint64_t len = 2 * kPage;  // 0x123 .. 0x2123: three 4 KiB pages
  for (uint64_t i = 0; i < 4 * kPage; ++i) block[i] = uint8_t(i);
  const size_t before = rig.iommu.mappings();
  {
    drv::PinnedRegion r(link, space, addr, len);
    ASSERT_TRUE(r.ok());
    const hw::BufferDesc& d = r.desc();
    EXPECT_EQ(d.log_page_size, 12);
    EXPECT_EQ(d.first_page_offset, 0x123u);
    EXPECT_EQ(d.npages, 3u);
    EXPECT_EQ(d.levels, 1);
    for (uint64_t off :
         {uint64_t{0}, uint64_t{1}, kPage - 0x124, kPage - 0x123, 2 * kPage - 0x123, len - 1}) {
      model::BtResult br;
      ASSERT_EQ(reach(d, off, &br), addr + off) << "offset " << off;
      EXPECT_EQ(br.contiguous, kPage - (off + 0x123) % kPage) << off;
    }
    // MR pages are one contiguous IOVA range.
    EXPECT_EQ(dma_of(d, kPage - 0x123), dma_of(d, 0) + kPage - 0x123);
    EXPECT_EQ(dma_of(d, 0) % kPage, 0x123u);
    // A DMA read of the whole region through the walked address.
    std::vector<uint8_t> out(len);
    ASSERT_TRUE(rig.dma.read(dma_of(d, 0), out.data(), len, 1, "t"));
    EXPECT_EQ(0, std::memcmp(out.data(), addr, len));
    EXPECT_EQ(rig.iommu.mappings(), before + 2) << "region + table page";
  }
  EXPECT_EQ(rig.iommu.mappings(), before);
}

TEST_F(DmaBufferTest, LargePinnedRegionUsesTwoMiBPages) {
  const uint64_t len = (5ull << 20) + 0x777;  // > 4 MiB
  uint8_t* block = rig.mem.alloc(len + 3 * k2M, k2M);
  uint8_t* addr = block + k2M - 0x1000 + 0x56;  // crosses three 2 MiB boundaries
  const uint64_t phase = reinterpret_cast<uint64_t>(addr) % k2M;
  ASSERT_EQ(phase, k2M - 0x1000 + 0x56);
  for (uint64_t i = 0; i < len; i += 4096) addr[i] = uint8_t(i >> 12);
  drv::PinnedRegion r(link, space, addr, len);
  ASSERT_TRUE(r.ok());
  const hw::BufferDesc& d = r.desc();
  EXPECT_EQ(d.log_page_size, 21);
  EXPECT_EQ(d.first_page_offset, phase);
  EXPECT_EQ(d.npages, (phase + len + k2M - 1) / k2M);
  EXPECT_EQ(d.npages, 4u);
  EXPECT_EQ(d.levels, 1);
  const uint64_t to_boundary = k2M - phase;  // first 2 MiB boundary inside the region
  for (uint64_t off : {uint64_t{0}, to_boundary - 1, to_boundary, to_boundary + k2M - 1, to_boundary + k2M,
                       len / 2, len - 1}) {
    model::BtResult br;
    ASSERT_EQ(reach(d, off, &br), addr + off) << "offset " << off;
    EXPECT_EQ(br.contiguous, k2M - (off + phase) % k2M) << off;
  }
  for (uint64_t off = 0; off < len; off += 4096) ASSERT_EQ(*reach(d, off), uint8_t(off >> 12)) << off;
  // The IOVA keeps the 2 MiB phase, so each 2 MiB page is one table entry.
  EXPECT_EQ(dma_of(d, 0) % k2M, phase);
}

TEST_F(DmaBufferTest, PageSizeThresholdIsFourMiB) {
  uint8_t* block = rig.mem.alloc((4ull << 20) + kPage, kPage);
  {
    drv::PinnedRegion r(link, space, block, (4ull << 20) - 1);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.desc().log_page_size, 12);
    EXPECT_EQ(r.desc().npages, 1024u);
    EXPECT_EQ(r.desc().levels, 2);
    EXPECT_EQ(reach(r.desc(), (4ull << 20) - 2), block + (4ull << 20) - 2);
  }
  {
    drv::PinnedRegion r(link, space, block, 4ull << 20);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.desc().log_page_size, 21);
    EXPECT_EQ(reach(r.desc(), (4ull << 20) - 1), block + (4ull << 20) - 1);
  }
}

TEST_F(DmaBufferTest, ZeroLengthPinnedRegion) {
  uint8_t* block = rig.mem.alloc(kPage);
  drv::PinnedRegion r(link, space, block + 8, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.desc().npages, 1u);
  EXPECT_EQ(r.desc().first_page_offset, 8u);
}

// ------------------------------------------------------------------ DbrecPool

TEST_F(DmaBufferTest, DbrecSlotsAreMappedZeroedAndReused) {
  drv::DbrecPool pool(link, space);
  uint64_t ia = 0, ib = 0;
  void* a = pool.alloc(ia);
  void* b = pool.alloc(ib);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(ia % 64, 0u);
  EXPECT_EQ(ib % 64, 0u);
  EXPECT_EQ(rig.host_of(ia), a);
  EXPECT_EQ(rig.host_of(ib), b);
  std::memset(a, 0x5a, 64);
  pool.free(a);
  uint64_t ic = 0;
  void* c = pool.alloc(ic);
  EXPECT_EQ(c, a);
  EXPECT_EQ(ic, ia);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(static_cast<uint8_t*>(c)[i], 0) << i;
}

}  // namespace
}  // namespace hcasim
