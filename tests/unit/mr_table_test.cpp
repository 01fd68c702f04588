// SPDX-License-Identifier: Apache-2.0
/**
 * @file mr_table_test.cpp
 * @brief Unit tests of memory keys (model/units/mr_table.h): the order and results of the key,
 *        PD, bounds and access checks, and gather/scatter through an MR's page list.
 */
#include "mr_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "model_fixture.h"

// libsystemc references sc_main; these tests never run it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

using test::DmaRig;
using test::HandTable;
using test::kPage;

constexpr uint32_t kKey = 0x00abcd01;
constexpr uint32_t kPd = 7;
constexpr uint64_t kVa = 0x7f0000001100ull;   // 0x100 into a page
constexpr uint64_t kLen = 2 * kPage + 0x200;  // spans three pages: 0xf00 + 0x1000 + 0x300

class MrTableTest : public ::testing::Test {
 protected:
  DmaRig rig;
  MrTable mrs{rig.bt, rig.dma, rig.tracer};
  HandTable table;

  /** Register kKey over a three-page list (scattered host pages and IOVAs). */
  void add_mr(uint32_t access, uint64_t va = kVa, uint64_t len = kLen) {
    table = rig.build(3, 1, 12, true, va % kPage);
    hw::MkeyCtx m{};
    m.key = kKey;
    m.pdn = kPd;
    m.start = va;
    m.length = len;
    m.access = access;
    m.pages = table.desc;
    ASSERT_TRUE(mrs.add(m));
  }
  MrCheck check(uint64_t va, uint64_t len, uint32_t access, uint32_t key = kKey, uint32_t pd = kPd) {
    return mrs.check(key, pd, va, len, access, 1, "test");
  }
};

TEST_F(MrTableTest, AddFindRemove) {
  add_mr(hw::kAccessLocalWrite);
  EXPECT_EQ(mrs.size(), 1u);
  const MrEntry* e = mrs.find(kKey);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->ctx.start, kVa);
  EXPECT_EQ(e->ctx.length, kLen);
  hw::MkeyCtx dup{};
  dup.key = kKey;
  EXPECT_FALSE(mrs.add(dup)) << "duplicate key";
  EXPECT_EQ(mrs.find(kKey)->ctx.pdn, kPd) << "duplicate did not overwrite";
  EXPECT_EQ(mrs.find(kKey + 1), nullptr);
  EXPECT_TRUE(mrs.remove(kKey));
  EXPECT_FALSE(mrs.remove(kKey));
  EXPECT_EQ(mrs.find(kKey), nullptr);
  EXPECT_EQ(check(kVa, 1, 0), MrCheck::BadKey);
}

// The table remembers the last key it found (a stream asks for the same one at every packet):
// a key deregistered and registered again must be checked against its new context.
TEST_F(MrTableTest, AKeyRegisteredAgainIsCheckedAgainstItsNewContext) {
  add_mr(hw::kAccessLocalWrite);
  EXPECT_EQ(check(kVa, 1, hw::kAccessLocalWrite), MrCheck::Ok);
  ASSERT_TRUE(mrs.remove(kKey));
  EXPECT_EQ(check(kVa, 1, hw::kAccessLocalWrite), MrCheck::BadKey);
  add_mr(hw::kAccessRemoteRead, kVa + kPage, kPage);
  EXPECT_EQ(check(kVa, 1, 0), MrCheck::OutOfBounds) << "checked against the old MR's bounds";
  EXPECT_EQ(check(kVa + kPage, 1, hw::kAccessLocalWrite), MrCheck::NoAccess);
  EXPECT_EQ(check(kVa + kPage, 1, hw::kAccessRemoteRead), MrCheck::Ok);
  EXPECT_EQ(mrs.find(kKey)->ctx.start, kVa + kPage);
}

TEST_F(MrTableTest, CheckOrderKeyPdBoundsAccess) {
  add_mr(hw::kAccessLocalWrite);  // no remote access
  // Every check failing at once reports the first in order: key, PD, bounds, access.
  EXPECT_EQ(check(kVa - 1, kLen + 2, hw::kAccessRemoteWrite, kKey + 1, kPd + 1), MrCheck::BadKey);
  EXPECT_EQ(check(kVa - 1, kLen + 2, hw::kAccessRemoteWrite, kKey, kPd + 1), MrCheck::BadPd);
  EXPECT_EQ(check(kVa - 1, kLen + 2, hw::kAccessRemoteWrite), MrCheck::OutOfBounds);
  EXPECT_EQ(check(kVa, kLen, hw::kAccessRemoteWrite), MrCheck::NoAccess);
  EXPECT_EQ(check(kVa, kLen, hw::kAccessLocalWrite), MrCheck::Ok);
  EXPECT_EQ(mrs.checks(), 5u);
  EXPECT_EQ(mrs.violations(), 4u);
}

TEST_F(MrTableTest, Bounds) {
  add_mr(hw::kAccessLocalWrite | hw::kAccessRemoteRead | hw::kAccessRemoteWrite);
  EXPECT_EQ(check(kVa, kLen, 0), MrCheck::Ok) << "whole MR";
  EXPECT_EQ(check(kVa, 1, 0), MrCheck::Ok) << "first byte";
  EXPECT_EQ(check(kVa + kLen - 1, 1, 0), MrCheck::Ok) << "last byte";
  EXPECT_EQ(check(kVa + 0x1000, 0x100, 0), MrCheck::Ok) << "inside";
  EXPECT_EQ(check(kVa - 1, 1, 0), MrCheck::OutOfBounds) << "va - 1";
  EXPECT_EQ(check(kVa - 1, 2, 0), MrCheck::OutOfBounds) << "straddles the start";
  EXPECT_EQ(check(kVa + kLen, 1, 0), MrCheck::OutOfBounds) << "va + len";
  EXPECT_EQ(check(kVa, kLen + 1, 0), MrCheck::OutOfBounds) << "len + 1";
  EXPECT_EQ(check(kVa + kLen - 1, 2, 0), MrCheck::OutOfBounds) << "one byte past the end";
  EXPECT_EQ(check(kVa + 1, kLen, 0), MrCheck::OutOfBounds) << "shifted by one";
  EXPECT_EQ(check(kVa + kLen + 0x10000, 1, 0), MrCheck::OutOfBounds) << "far past the end";
  EXPECT_EQ(check(0, 1, 0), MrCheck::OutOfBounds) << "va 0";
  // Lengths that would overflow va + len must not wrap into bounds.
  EXPECT_EQ(check(kVa + 1, ~0ull, 0), MrCheck::OutOfBounds);
  EXPECT_EQ(check(kVa + 0x10, ~0ull - kVa, 0), MrCheck::OutOfBounds);
  EXPECT_EQ(check(~0ull, 2, 0), MrCheck::OutOfBounds);
  EXPECT_EQ(mrs.violations(), 11u);
}

TEST_F(MrTableTest, AccessRights) {
  add_mr(hw::kAccessLocalWrite);
  EXPECT_EQ(check(kVa, 8, 0), MrCheck::Ok) << "local read is always allowed";
  EXPECT_EQ(check(kVa, 8, hw::kAccessLocalWrite), MrCheck::Ok);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteWrite), MrCheck::NoAccess);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteRead), MrCheck::NoAccess);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteAtomic), MrCheck::NoAccess);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteWrite | hw::kAccessLocalWrite), MrCheck::NoAccess)
      << "every requested right must be granted";
  EXPECT_TRUE(mrs.remove(kKey));

  add_mr(hw::kAccessRemoteRead | hw::kAccessRemoteWrite);  // remote only, no local write
  EXPECT_EQ(check(kVa, 8, hw::kAccessLocalWrite), MrCheck::NoAccess);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteRead), MrCheck::Ok);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteWrite), MrCheck::Ok);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteRead | hw::kAccessRemoteWrite), MrCheck::Ok);
  EXPECT_EQ(check(kVa, 8, hw::kAccessRemoteAtomic), MrCheck::NoAccess);
  EXPECT_EQ(mrs.violations(), 6u);
}

TEST_F(MrTableTest, ZeroLengthNeedsNoValidKey) {
  add_mr(0);
  EXPECT_EQ(check(kVa, 0, hw::kAccessRemoteWrite, 0xdead, 99), MrCheck::Ok);
  EXPECT_EQ(check(0, 0, hw::kAccessRemoteWrite), MrCheck::Ok);
  EXPECT_EQ(check(kVa + kLen + 1, 0, hw::kAccessRemoteRead), MrCheck::Ok);
  EXPECT_EQ(mrs.checks(), 3u);
  EXPECT_EQ(mrs.violations(), 0u);
}

TEST_F(MrTableTest, MrCheckNames) {
  EXPECT_STREQ(mr_check_name(MrCheck::Ok), "ok");
  EXPECT_STREQ(mr_check_name(MrCheck::BadKey), "invalid key");
  EXPECT_STREQ(mr_check_name(MrCheck::BadPd), "PD mismatch");
  EXPECT_STREQ(mr_check_name(MrCheck::OutOfBounds), "out of bounds");
  EXPECT_STREQ(mr_check_name(MrCheck::NoAccess), "access not granted");
}

TEST_F(MrTableTest, WriteScattersAcrossPagesByteForByte) {
  add_mr(hw::kAccessLocalWrite);
  // Fill every host page with a guard pattern first.
  for (uint8_t* p : table.pages) std::memset(p, 0xee, kPage);
  std::vector<uint8_t> src(kLen);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + (i >> 8));
  // Three table walks (one per page).
  const uint64_t t0 = test::sim_now_ps();
  EXPECT_EQ(mrs.write(kKey, kVa, src.data(), src.size(), 1), 3);
  // Posted writes: nothing in host memory yet; the last chunk lands a write latency after the
  // ones before it would have.
  EXPECT_EQ(table.pages[0][0x100], 0xee);
  EXPECT_EQ(rig.dma.bytes_written(), 0u);
  EXPECT_GE(rig.dma.posted_until(), t0 + rig.dma.write_latency_ps(0x300));
  test::run_for_ps(rig.dma.posted_until() - t0);

  // Page 0: bytes [0x100, 0x1000) carry src[0, 0xf00); page 1 all of src[0xf00, 0x1f00);
  // page 2: [0, 0x300) carry the rest.
  EXPECT_EQ(0, std::memcmp(table.pages[0] + 0x100, src.data(), 0xf00));
  EXPECT_EQ(0, std::memcmp(table.pages[1], src.data() + 0xf00, kPage));
  EXPECT_EQ(0, std::memcmp(table.pages[2], src.data() + 0x1f00, 0x300));
  for (size_t i = 0; i < 0x100; ++i) ASSERT_EQ(table.pages[0][i], 0xee) << "before the MR: " << i;
  for (size_t i = 0x300; i < kPage; ++i) ASSERT_EQ(table.pages[2][i], 0xee) << "after the MR: " << i;
  EXPECT_EQ(rig.dma.bytes_written(), kLen);
}

TEST_F(MrTableTest, PostedWritesLandInOrderAndReadsDoNotPassThem) {
  add_mr(hw::kAccessLocalWrite);
  const uint8_t big[0x400] = {1}, small[8] = {2, 2, 2, 2, 2, 2, 2, 2};
  const uint64_t t0 = test::sim_now_ps();
  ASSERT_GE(mrs.write(kKey, kVa, big, sizeof big, 1), 0);
  ASSERT_GE(mrs.write(kKey, kVa + 0x800, small, sizeof small, 1), 0);
  // The small write would be faster alone, but lands behind the big one, its transfer later.
  EXPECT_EQ(rig.dma.posted_until(),
            t0 + rig.dma.write_latency_ps(sizeof big) + default_profile().pcie_xfer_ps(sizeof small));
  test::run_for_ps(rig.dma.write_latency_ps(sizeof small));
  EXPECT_EQ(table.pages[0][0x100 + 0x800], 0) << "landed before the write issued ahead of it";
  // A read of those bytes waits for the writes before it (PCIe: reads do not pass posted writes).
  uint8_t out[8] = {};
  EXPECT_GE(mrs.read(kKey, kVa + 0x800, out, sizeof out, 1), 0);
  EXPECT_EQ(0, std::memcmp(out, small, sizeof small));
  EXPECT_EQ(table.pages[0][0x100], 1);
}

TEST_F(MrTableTest, ReadGathersAcrossPagesByteForByte) {
  add_mr(0);
  for (uint32_t p = 0; p < 3; ++p)
    for (uint32_t i = 0; i < kPage; ++i) table.pages[p][i] = uint8_t(p * 31 + i);
  // Read 0x40 bytes straddling the page-0/page-1 seam, then the page-1/page-2 seam.
  std::vector<uint8_t> out(0x40, 0);
  EXPECT_EQ(mrs.read(kKey, kVa + 0xf00 - 0x20, out.data(), out.size(), 1), 2);
  for (uint32_t i = 0; i < 0x20; ++i) ASSERT_EQ(out[i], uint8_t(0 * 31 + 0xfe0 + i)) << i;
  for (uint32_t i = 0x20; i < 0x40; ++i) ASSERT_EQ(out[i], uint8_t(1 * 31 + i - 0x20)) << i;
  // Continuing inside page 1 hits the MR's cached translation: no table reads.
  EXPECT_EQ(mrs.read(kKey, kVa + 0xf00 + 0x100, out.data(), 8, 1), 0);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(out[i], uint8_t(1 * 31 + 0x100 + i)) << i;
  std::vector<uint8_t> all(kLen);
  EXPECT_EQ(mrs.read(kKey, kVa, all.data(), all.size(), 1), 3);
  for (uint64_t off = 0; off < kLen; ++off) {
    const uint64_t abs = off + 0x100;
    ASSERT_EQ(all[off], uint8_t((abs / kPage) * 31 + abs % kPage)) << off;
  }
}

TEST_F(MrTableTest, RoundTripAtArbitraryOffsets) {
  add_mr(hw::kAccessLocalWrite);
  std::vector<uint8_t> pattern(0x1234);
  std::iota(pattern.begin(), pattern.end(), uint8_t(3));
  ASSERT_GE(mrs.write(kKey, kVa + 0x333, pattern.data(), pattern.size(), 1), 0);
  std::vector<uint8_t> back(pattern.size(), 0);
  ASSERT_GE(mrs.read(kKey, kVa + 0x333, back.data(), back.size(), 1), 0);
  EXPECT_EQ(back, pattern);
  // And it really landed at VA offset 0x333 (page 0 offset 0x433).
  EXPECT_EQ(table.pages[0][0x433], pattern[0]);
  EXPECT_EQ(table.pages[1][0], pattern[kPage - 0x433]);
}

TEST_F(MrTableTest, CopyFailures) {
  add_mr(hw::kAccessLocalWrite);
  uint8_t buf[16] = {};
  EXPECT_EQ(mrs.read(kKey + 1, kVa, buf, sizeof buf, 1), -1) << "unknown key";
  EXPECT_EQ(mrs.write(kKey + 1, kVa, buf, sizeof buf, 1), -1) << "unknown key";
  // Past the page list: the walker refuses.
  EXPECT_EQ(mrs.read(kKey, kVa - 0x100 + 3 * kPage, buf, sizeof buf, 1), -1);
  // An invalid page-list entry stops the copy.
  table.tables[0][1] = 0;
  EXPECT_EQ(mrs.write(kKey, kVa + 0xf00, buf, sizeof buf, 1), -1);
  EXPECT_EQ(mrs.read(kKey, kVa, buf, 0, 1), 0) << "zero length";
}

}  // namespace
}  // namespace hcasim::model
