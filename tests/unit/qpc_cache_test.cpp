// SPDX-License-Identifier: Apache-2.0
/**
 * @file qpc_cache_test.cpp
 * @brief Unit tests of the QPC table and its LRU cache (model/units/qpc_cache.h).
 */
#include "qpc_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_fixture.h"
#include "timing_profile.h"
#include "trace.h"

// libsystemc references sc_main; these tests never run it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

class QpcCacheTest : public ::testing::Test {
 protected:
  const TimingProfile& prof = default_profile();
  Tracer tracer;

  /** Look up each QPN and return "H"/"M" per lookup ("-" for no such QP). */
  static std::string pattern(QpcCache& c, std::initializer_list<uint32_t> qpns) {
    std::string s;
    for (uint32_t q : qpns) {
      auto r = c.lookup(q, "test");
      s += !r.qp ? '-' : r.hit ? 'H' : 'M';
    }
    return s;
  }
};

TEST_F(QpcCacheTest, ProfileLatenciesOnHitAndMiss) {
  QpcCache c(prof, tracer, 4);
  QpContext* q = c.create(0x11);
  ASSERT_NE(q, nullptr);
  auto r = c.lookup(0x11, "t");
  EXPECT_EQ(r.qp, q);
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.latency_ps, prof.qpc_miss_ps);
  EXPECT_EQ(r.latency_ps, 500'000u);  // roce-100g
  // A lookup while that ICM read is still in flight hits, but waits for the read to end.
  test::run_for_ps(100'000);
  r = c.lookup(0x11, "t");
  EXPECT_EQ(r.qp, q);
  EXPECT_TRUE(r.hit);
  EXPECT_EQ(r.latency_ps, 400'000u);
  // Once it has ended, a hit costs the profile's hit latency.
  test::run_for_ps(400'000);
  r = c.lookup(0x11, "t");
  EXPECT_TRUE(r.hit);
  EXPECT_EQ(r.latency_ps, prof.qpc_hit_ps);
  EXPECT_EQ(r.latency_ps, 4'000u);
  EXPECT_EQ(c.hits(), 2u);
  EXPECT_EQ(c.misses(), 1u);
}

TEST_F(QpcCacheTest, LruWithNPlusOneQps) {
  constexpr uint32_t N = 4;
  QpcCache c(prof, tracer, N);
  EXPECT_EQ(c.capacity(), N);
  for (uint32_t q = 1; q <= N + 1; ++q) ASSERT_NE(c.create(q), nullptr);

  EXPECT_EQ(pattern(c, {1, 2, 3, 4}), "MMMM");  // cold
  EXPECT_EQ(pattern(c, {1, 2, 3, 4}), "HHHH");  // all fit
  EXPECT_EQ(pattern(c, {5}), "M");              // evicts 1, the least recently used
  EXPECT_EQ(pattern(c, {2, 3, 4, 5}), "HHHH");  // the others stayed
  EXPECT_EQ(pattern(c, {1}), "M");              // the evicted one misses again (evicts 2)
  EXPECT_EQ(pattern(c, {2}), "M");              // evicts 3
  EXPECT_EQ(pattern(c, {4, 5, 1, 2}), "HHHH");
  EXPECT_EQ(pattern(c, {3}), "M");
  EXPECT_EQ(c.hits(), 12u);
  EXPECT_EQ(c.misses(), 8u);

  // Cycling N+1 QPs through an N-entry LRU misses every time.
  QpcCache d(prof, tracer, N);
  for (uint32_t q = 1; q <= N + 1; ++q) d.create(q);
  EXPECT_EQ(pattern(d, {1, 2, 3, 4, 5, 1, 2, 3, 4, 5}), "MMMMMMMMMM");
}

TEST_F(QpcCacheTest, HitRefreshesRecency) {
  QpcCache c(prof, tracer, 3);
  for (uint32_t q = 1; q <= 4; ++q) c.create(q);
  EXPECT_EQ(pattern(c, {1, 2, 3}), "MMM");
  EXPECT_EQ(pattern(c, {1}), "H");  // 1 is now most recent; 2 is the LRU
  EXPECT_EQ(pattern(c, {4}), "M");  // evicts 2
  EXPECT_EQ(pattern(c, {1, 3, 4}), "HHH");
  EXPECT_EQ(pattern(c, {2}), "M");  // evicts 1 (3, 4 were touched later)
  EXPECT_EQ(pattern(c, {3, 4, 2}), "HHH");
  EXPECT_EQ(pattern(c, {1}), "M");
}

TEST_F(QpcCacheTest, DestroyRemovesFromTableAndCache) {
  QpcCache c(prof, tracer, 3);
  for (uint32_t q = 1; q <= 4; ++q) c.create(q);
  EXPECT_EQ(pattern(c, {1, 2, 3}), "MMM");
  EXPECT_TRUE(c.destroy(2));
  EXPECT_EQ(c.find(2), nullptr);
  EXPECT_FALSE(c.destroy(2));
  auto r = c.lookup(2, "t");
  EXPECT_EQ(r.qp, nullptr);
  // 2's cache slot is free: 4 fits without evicting 1 or 3.
  EXPECT_EQ(pattern(c, {4}), "M");
  EXPECT_EQ(pattern(c, {1, 3, 4}), "HHH");

  // A QPN reused after destroy is a new context and is not a cache hit.
  QpContext* old1 = c.find(1);
  old1->sq_pi = 77;
  EXPECT_TRUE(c.destroy(1));
  QpContext* new1 = c.create(1);
  ASSERT_NE(new1, nullptr);
  EXPECT_EQ(new1->sq_pi, 0);
  EXPECT_EQ(new1->qpc.qpn, 1u);
  r = c.lookup(1, "t");
  EXPECT_EQ(r.qp, new1);
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.latency_ps, prof.qpc_miss_ps);
}

TEST_F(QpcCacheTest, UnknownQpnIsNotCountedOrCached) {
  QpcCache c(prof, tracer, 2);
  auto r = c.lookup(0xabcdef, "t");
  EXPECT_EQ(r.qp, nullptr);
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.latency_ps, 0u);
  EXPECT_EQ(c.hits(), 0u);
  EXPECT_EQ(c.misses(), 0u);
  // It did not take a cache slot.
  c.create(1);
  c.create(2);
  EXPECT_EQ(pattern(c, {1, 2, 0xabcdef, 1, 2}), "MM-HH");
}

TEST_F(QpcCacheTest, CreateFindAndForEach) {
  QpcCache c(prof, tracer, 2);
  QpContext* a = c.create(0x123456);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->qpc.qpn, 0x123456u);
  EXPECT_EQ(c.create(0x123456), nullptr) << "duplicate QPN";
  EXPECT_EQ(c.find(0x123456), a);
  EXPECT_EQ(c.find(0x123457), nullptr);
  c.create(7);
  uint32_t sum = 0, n = 0;
  c.for_each([&](QpContext& q) {
    sum += q.qpc.qpn;
    ++n;
  });
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(sum, 0x123456u + 7);
  // find() has no cache effect.
  EXPECT_EQ(c.hits(), 0u);
  EXPECT_EQ(c.misses(), 0u);
  EXPECT_FALSE(c.lookup(7, "t").hit);
}

TEST_F(QpcCacheTest, ZeroCapacityMeansOneEntry) {
  QpcCache c(prof, tracer, 0);
  EXPECT_EQ(c.capacity(), 1u);
  c.create(1);
  c.create(2);
  EXPECT_EQ(pattern(c, {1, 1, 2, 2, 1}), "MHMHM");
}

TEST_F(QpcCacheTest, DefaultCapacityComesFromTheProfile) {
  QpcCache c(prof, tracer, prof.qpc_cache_entries);
  EXPECT_EQ(c.capacity(), 16u);
  for (uint32_t q = 0; q < 17; ++q) c.create(100 + q);
  for (uint32_t q = 0; q < 17; ++q) c.lookup(100 + q, "t");  // 17th evicts QP 100
  EXPECT_FALSE(c.lookup(100, "t").hit);
  EXPECT_TRUE(c.lookup(116, "t").hit);
}

}  // namespace
}  // namespace hcasim::model
