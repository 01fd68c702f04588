// SPDX-License-Identifier: Apache-2.0
/**
 * @file iommu_test.cpp
 * @brief Unit tests of the IOMMU (model/units/iommu.h) and of the DMA engine that reaches host
 *        memory through it (model/units/dma_engine.h).
 */
#include "iommu.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "dma_engine.h"
#include "model_fixture.h"
#include "packet.h"
#include "timing_profile.h"
#include "trace.h"

// libsystemc references sc_main; these tests never run it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

// ------------------------------------------------------------------ Iommu

TEST(Iommu, MapTranslateGivesHostAddressAndContiguousLength) {
  std::vector<uint8_t> a(0x3000), b(0x1000);
  Iommu m;
  ASSERT_TRUE(m.map(0x10000, a.data(), a.size()));
  ASSERT_TRUE(m.map(0x20000, b.data(), b.size()));
  EXPECT_EQ(m.mappings(), 2u);

  uint64_t contig = 0;
  EXPECT_EQ(m.translate(0x10000, contig), a.data());
  EXPECT_EQ(contig, 0x3000u);
  EXPECT_EQ(m.translate(0x10001, contig), a.data() + 1);
  EXPECT_EQ(contig, 0x2fffu);
  EXPECT_EQ(m.translate(0x12fff, contig), a.data() + 0x2fff);
  EXPECT_EQ(contig, 1u);
  EXPECT_EQ(m.translate(0x20800, contig), b.data() + 0x800);
  EXPECT_EQ(contig, 0x800u);
  EXPECT_EQ(m.faults(), 0u);
}

TEST(Iommu, AdjacentExtentsAreNotMergedInContiguousLength) {
  // Contiguous in IOVA space, but two different host buffers: a DMA must split at the seam.
  std::vector<uint8_t> a(0x1000), b(0x1000);
  Iommu m;
  ASSERT_TRUE(m.map(0x5000, a.data(), 0x1000));
  ASSERT_TRUE(m.map(0x6000, b.data(), 0x1000));
  uint64_t contig = 0;
  EXPECT_EQ(m.translate(0x5ff0, contig), a.data() + 0xff0);
  EXPECT_EQ(contig, 0x10u);
  EXPECT_EQ(m.translate(0x6000, contig), b.data());
  EXPECT_EQ(contig, 0x1000u);
}

TEST(Iommu, RejectsOverlapsAndEmptyMappings) {
  std::vector<uint8_t> buf(0x10000);
  Iommu m;
  ASSERT_TRUE(m.map(0x1000, buf.data(), 0x2000));  // [0x1000, 0x3000)
  EXPECT_FALSE(m.map(0x1000, buf.data(), 0x1000)) << "same start";
  EXPECT_FALSE(m.map(0x2000, buf.data(), 0x1000)) << "inside";
  EXPECT_FALSE(m.map(0x2fff, buf.data(), 0x1000)) << "overlaps the last byte";
  EXPECT_FALSE(m.map(0x0000, buf.data(), 0x1001)) << "overlaps the first byte";
  EXPECT_FALSE(m.map(0x0800, buf.data(), 0x4000)) << "encloses";
  EXPECT_FALSE(m.map(0x4000, buf.data(), 0)) << "empty";
  EXPECT_EQ(m.mappings(), 1u);
  EXPECT_TRUE(m.map(0x0000, buf.data(), 0x1000)) << "adjacent below";
  EXPECT_TRUE(m.map(0x3000, buf.data(), 0x1000)) << "adjacent above";
  EXPECT_EQ(m.mappings(), 3u);
  // A rejected map left the original mapping intact.
  uint64_t contig = 0;
  EXPECT_EQ(m.translate(0x1000, contig), buf.data());
  EXPECT_EQ(contig, 0x2000u);
}

TEST(Iommu, UnmappedIovasFault) {
  std::vector<uint8_t> a(0x1000), b(0x1000);
  Iommu m;
  uint64_t contig = 77;
  EXPECT_EQ(m.translate(0x1000, contig), nullptr) << "empty IOMMU";
  EXPECT_EQ(m.faults(), 1u);
  ASSERT_TRUE(m.map(0x10000, a.data(), 0x1000));
  ASSERT_TRUE(m.map(0x30000, b.data(), 0x1000));
  EXPECT_EQ(m.translate(0x0fff, contig), nullptr) << "below every mapping";
  EXPECT_EQ(m.translate(0x11000, contig), nullptr) << "one past the end";
  EXPECT_EQ(m.translate(0x20000, contig), nullptr) << "in a hole";
  EXPECT_EQ(m.translate(0x31000, contig), nullptr) << "past the last mapping";
  EXPECT_EQ(m.translate(~0ull, contig), nullptr);
  EXPECT_EQ(m.faults(), 6u);
  EXPECT_NE(m.translate(0x10fff, contig), nullptr);
  EXPECT_EQ(m.faults(), 6u);
}

TEST(Iommu, UnmapRemovesOnlyWholeMappingsAndInvalidatesTheIotlb) {
  std::vector<uint8_t> a(0x2000), b(0x2000);
  Iommu m;
  ASSERT_TRUE(m.map(0x10000, a.data(), 0x2000));
  uint64_t contig = 0;
  ASSERT_EQ(m.translate(0x10010, contig), a.data() + 0x10);  // fills the IOTLB
  EXPECT_FALSE(m.unmap(0x10010)) << "not the start of a mapping";
  EXPECT_FALSE(m.unmap(0x90000));
  EXPECT_EQ(m.mappings(), 1u);
  EXPECT_TRUE(m.unmap(0x10000));
  EXPECT_EQ(m.mappings(), 0u);
  EXPECT_FALSE(m.unmap(0x10000)) << "twice";
  // The IOTLB entry must not outlive the mapping.
  const uint64_t hits = m.iotlb_hits();
  EXPECT_EQ(m.translate(0x10010, contig), nullptr);
  EXPECT_EQ(m.iotlb_hits(), hits);
  EXPECT_EQ(m.faults(), 1u);
  // Remapping the same IOVA elsewhere translates to the new host memory.
  ASSERT_TRUE(m.map(0x10000, b.data(), 0x1000));
  EXPECT_EQ(m.translate(0x10010, contig), b.data() + 0x10);
  EXPECT_EQ(contig, 0xff0u);
}

TEST(Iommu, IotlbCountsHitsAndMisses) {
  std::vector<uint8_t> a(0x2000), b(0x1000);
  Iommu m;
  ASSERT_TRUE(m.map(0x10000, a.data(), 0x2000));
  ASSERT_TRUE(m.map(0x40000, b.data(), 0x1000));
  uint64_t c = 0;
  m.translate(0x10000, c);  // miss
  m.translate(0x10008, c);  // hit
  m.translate(0x11fff, c);  // hit (same extent)
  EXPECT_EQ(m.iotlb_hits(), 2u);
  EXPECT_EQ(m.iotlb_misses(), 1u);
  m.translate(0x40000, c);  // miss: other extent
  m.translate(0x10000, c);  // miss: evicted by the one-entry IOTLB
  m.translate(0x10040, c);  // hit
  EXPECT_EQ(m.iotlb_hits(), 3u);
  EXPECT_EQ(m.iotlb_misses(), 3u);
  m.translate(0x12000, c);  // miss + fault (just past the extent)
  EXPECT_EQ(m.iotlb_misses(), 4u);
  EXPECT_EQ(m.faults(), 1u);
  // A fault does not replace the IOTLB entry.
  m.translate(0x10000, c);  // hit
  EXPECT_EQ(m.iotlb_hits(), 4u);
  // Unmapping another extent keeps the IOTLB entry.
  ASSERT_TRUE(m.unmap(0x40000));
  m.translate(0x10001, c);  // hit
  EXPECT_EQ(m.iotlb_hits(), 5u);
  EXPECT_EQ(m.iotlb_misses(), 4u);
}

// ------------------------------------------------------------------ DmaEngine

TEST(DmaEngine, LatenciesComeFromTheProfile) {
  const TimingProfile& p = default_profile();
  Iommu m;
  Tracer t;
  DmaEngine dma(m, p, t);
  // roce-100g: read 400 ns, write 200 ns, 110 Gb/s -> 64 B take 4.654 ns, 4 KiB 297.89 ns.
  EXPECT_EQ(dma.read_latency_ps(64), 404'654u);
  EXPECT_EQ(dma.write_latency_ps(64), 204'654u);
  EXPECT_EQ(dma.read_latency_ps(0), p.pcie_read_ps);
  EXPECT_EQ(dma.write_latency_ps(4096), p.pcie_write_ps + 297'890u);
}

TEST(DmaEngine, ReadAndWriteSplitAcrossExtents) {
  // IOVA [0x10000, 0x12000) is two extents backed by separate host buffers.
  std::vector<uint8_t> a(0x1000, 0), b(0x1000, 0);
  Iommu m;
  Tracer t;
  DmaEngine dma(m, default_profile(), t);
  ASSERT_TRUE(m.map(0x10000, a.data(), 0x1000));
  ASSERT_TRUE(m.map(0x11000, b.data(), 0x1000));
  std::vector<uint8_t> src(0x100);
  std::iota(src.begin(), src.end(), uint8_t(1));
  const uint64_t epoch = host_visible_epoch().load();
  ASSERT_TRUE(dma.write(0x10f80, src.data(), src.size(), 1, "test"));
  EXPECT_EQ(host_visible_epoch().load(), epoch + 1);
  EXPECT_EQ(0, std::memcmp(a.data() + 0xf80, src.data(), 0x80));
  EXPECT_EQ(0, std::memcmp(b.data(), src.data() + 0x80, 0x80));
  EXPECT_EQ(a[0xf7f], 0);
  EXPECT_EQ(b[0x80], 0);

  std::vector<uint8_t> back(0x100, 0xee);
  ASSERT_TRUE(dma.read(0x10f80, back.data(), back.size(), 1, "test"));
  EXPECT_EQ(back, src);
  EXPECT_EQ(dma.bytes_written(), 0x100u);
  EXPECT_EQ(dma.bytes_read(), 0x100u);
  EXPECT_EQ(dma.faults(), 0u);
}

TEST(DmaEngine, FaultStopsTheTransfer) {
  std::vector<uint8_t> a(0x1000, 0);
  Iommu m;
  Tracer t;
  DmaEngine dma(m, default_profile(), t);
  ASSERT_TRUE(m.map(0x10000, a.data(), 0x1000));
  uint8_t buf[0x20] = {};
  EXPECT_FALSE(dma.read(0x10ff0, buf, sizeof buf, 1, "test"));  // runs off the end
  EXPECT_FALSE(dma.write(0x20000, buf, sizeof buf, 1, "test"));
  EXPECT_EQ(dma.faults(), 2u);
  EXPECT_EQ(dma.bytes_read(), 0u);
  EXPECT_EQ(dma.bytes_written(), 0u);
}

TEST(DmaEngine, ReleaseLastWritesEveryByte) {
  // A 64-byte CQE whose IOVA range crosses into a second extent exactly at the owner byte.
  std::vector<uint8_t> a(0x1000, 0xaa), b(0x1000, 0xaa);
  Iommu m;
  Tracer t;
  DmaEngine dma(m, default_profile(), t);
  ASSERT_TRUE(m.map(0x10000, a.data(), 0x1000));
  ASSERT_TRUE(m.map(0x11000, b.data(), 0x1000));
  uint8_t cqe[64];
  std::iota(cqe, cqe + 64, uint8_t(0x40));
  ASSERT_TRUE(dma.write(0x11000 - 63, cqe, 64, 1, "cqe", true));
  EXPECT_EQ(0, std::memcmp(a.data() + 0x1000 - 63, cqe, 63));
  EXPECT_EQ(b[0], cqe[63]);
  EXPECT_EQ(b[1], 0xaa);
  EXPECT_EQ(dma.bytes_written(), 64u);
}

TEST(DmaEngine, APostedWriteLandsFromTheFrameItHoldsAndThenLetsItGo) {
  // A payload posted while the HCA acts on a received frame lands from that frame (no copy):
  // the frame must stay out of the pool until it has landed, even when its owner lets go of it
  // at once, and go back to the pool after. Bytes from elsewhere (an atomic's result on the
  // stack) are copied when posted.
  std::vector<uint8_t> mem(0x1000, 0);
  Iommu m;
  Tracer t;
  DmaEngine dma(m, default_profile(), t);
  ASSERT_TRUE(m.map(0x10000, mem.data(), 0x1000));
  PacketPtr frame = make_packet();
  Packet* const held = frame.get();
  std::iota(held->data, held->data + 512, uint8_t(7));
  uint8_t local[16];
  std::iota(local, local + 16, uint8_t(200));
  {
    const DmaEngine::ActingOn acting_on(dma, held);
    ASSERT_TRUE(dma.post_write(0x10100, held->data + 64, 256, 1, "payload"));
    ASSERT_TRUE(dma.post_write(0x10000, local, sizeof local, 1, "atomic"));
  }
  frame.reset();  // the receive stage is done with it
  std::memset(local, 0xee, sizeof local);
  PacketPtr next = make_packet();  // would be the same frame, were it not held
  ASSERT_NE(next.get(), held);
  std::memset(next->data, 0xff, 512);
  EXPECT_EQ(mem[0x100], 0);  // not landed before its write latency
  test::run_for_ps(dma.posted_until() - test::sim_now_ps());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(mem[0x100 + i], uint8_t(7 + 64 + i)) << "byte " << i;
  for (int i = 0; i < 16; ++i) ASSERT_EQ(mem[i], uint8_t(200 + i)) << "byte " << i;
  PacketPtr again = make_packet();  // the pool hands out the frame it got last first
  EXPECT_EQ(again.get(), held) << "the landed write let go of its frame";
}

TEST(DmaEngine, AnEngineGoneWithWritesPostedLetsGoOfTheirFrames) {
  std::vector<uint8_t> mem(0x1000, 0);
  Iommu m;
  Tracer t;
  PacketPtr frame = make_packet();
  Packet* const held = frame.get();
  {
    DmaEngine dma(m, default_profile(), t);
    ASSERT_TRUE(m.map(0x10000, mem.data(), 0x1000));
    const DmaEngine::ActingOn acting_on(dma, held);
    ASSERT_TRUE(dma.post_write(0x10000, held->data, 128, 1, "payload"));
    frame.reset();
    ASSERT_NE(make_packet().get(), held);
  }
  EXPECT_EQ(make_packet().get(), held);
}

/** Host memory of "another process": hva values are offsets into a shadow buffer here. */
class ShadowMemory : public HostMemory {
 public:
  explicit ShadowMemory(uint8_t* base, std::vector<uint8_t>& shadow) : base_(base), shadow_(shadow) {}
  bool read(const uint8_t* hva, void* dst, uint64_t len, ReadFor) override {
    ++reads;
    std::memcpy(dst, shadow_.data() + (hva - base_), len);
    return true;
  }
  bool write(uint8_t* hva, const void* src, uint64_t len) override {
    ++writes;
    std::memcpy(shadow_.data() + (hva - base_), src, len);
    return true;
  }
  bool watched() const override { return looked_at; }
  int reads = 0, writes = 0;
  bool looked_at = true;

 private:
  uint8_t* base_;
  std::vector<uint8_t>& shadow_;
};

/** A DMA engine whose IOVA 0x10000 (one page) reaches "another process" through ShadowMemory. */
struct ShadowedDma {
  ShadowedDma(uint8_t local_fill, uint8_t shadow_fill)
      : local(0x1000, local_fill),
        shadow(0x1000, shadow_fill),
        dma(m, default_profile(), t),
        port(local.data(), shadow) {
    dma.set_host_memory(&port);
    EXPECT_TRUE(m.map(0x10000, local.data(), 0x1000));
  }
  std::vector<uint8_t> local, shadow;
  Iommu m;
  Tracer t;
  DmaEngine dma;
  ShadowMemory port;
};

TEST(DmaEngine, HostMemoryPortCarriesEveryByteIncludingTheOwnerByte) {
  // The device reaches a client's memory only through the HostMemory port (process_vm_writev
  // in a device process): no byte may be stored to the hva directly, the CQE owner byte
  // (release_last) included.
  ShadowedDma sd(0x11, 0x22);
  DmaEngine& dma = sd.dma;
  ShadowMemory& port = sd.port;
  auto &local = sd.local, &shadow = sd.shadow;
  uint8_t cqe[64];
  std::iota(cqe, cqe + 64, uint8_t(1));
  ASSERT_TRUE(dma.write(0x10040, cqe, 64, 1, "cqe", true));
  EXPECT_EQ(0, std::memcmp(shadow.data() + 0x40, cqe, 64));
  for (size_t i = 0; i < local.size(); ++i) ASSERT_EQ(local[i], 0x11) << "byte " << i;
  uint8_t back[64] = {};
  ASSERT_TRUE(dma.read(0x10040, back, 64, 1, "cqe"));
  EXPECT_EQ(0, std::memcmp(back, cqe, 64));
  EXPECT_GE(port.writes, 1);
  EXPECT_EQ(port.reads, 1);
}

TEST(DmaEngine, AWriteIntoMemoryNobodyWatchesIsVisibleButNotWatched) {
  // A fabric's sleeping process (HostMemory::watched() false): its writes still count as
  // visible, but not as news a waiting program looks for (host_visible.h).
  ShadowedDma sd(0, 0);
  DmaEngine& dma = sd.dma;
  ShadowMemory& port = sd.port;
  const uint8_t bytes[16] = {1, 2, 3};
  const uint64_t any = host_visible_epoch().load(), watched = watched_visible_epoch();
  port.looked_at = false;
  ASSERT_TRUE(dma.write(0x10000, bytes, sizeof bytes, 1, "payload"));
  EXPECT_EQ(host_visible_epoch().load(), any + 1);
  EXPECT_EQ(watched_visible_epoch(), watched);
  port.looked_at = true;
  ASSERT_TRUE(dma.write(0x10000, bytes, sizeof bytes, 1, "payload"));
  EXPECT_EQ(host_visible_epoch().load(), any + 2);
  EXPECT_EQ(watched_visible_epoch(), watched + 1);
  EXPECT_EQ(0, std::memcmp(sd.shadow.data(), bytes, sizeof bytes));
}

}  // namespace
}  // namespace hcasim::model
