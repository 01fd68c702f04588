// SPDX-License-Identifier: Apache-2.0
// The ICRC's CRC-32 (model/wire/crc32.h) against zlib's crc32(), which it must equal byte for
// byte: every length from 0 to 600 (each fold path and tail; 1100 for the 64-byte folds), long buffers,
// unaligned starts, continued computations and arbitrary starting values, with 64-byte folds (VPCLMULQDQ,
// from 384 bytes), with 16-byte folds only (PCLMULQDQ) and with the table alone.
#include "crc32.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <vector>

namespace hcasim::wire {
namespace {

uint32_t zlib_crc(uint32_t crc, const uint8_t* p, size_t n) { return uint32_t(crc32(crc, p, uInt(n))); }

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

TEST(Crc32, KnownValue) {
  const char* s = "123456789";  // the CRC-32 check value of the standard catalogue
  EXPECT_EQ(crc32_ieee(0, reinterpret_cast<const uint8_t*>(s), 9), 0xCBF43926u);
  EXPECT_EQ(crc32_ieee_portable(0, reinterpret_cast<const uint8_t*>(s), 9), 0xCBF43926u);
  EXPECT_EQ(crc32_ieee(0, nullptr, 0), 0u);
}

TEST(Crc32, EqualsZlibForEveryLengthAndAlignment) {
  const std::vector<uint8_t> buf = random_bytes(4096 + 64, 1);
  for (size_t off = 0; off < 16; off += 5)
    for (size_t n = 0; n <= 1100; ++n) {
      const uint8_t* p = buf.data() + off;
      ASSERT_EQ(crc32_ieee(0, p, n), zlib_crc(0, p, n)) << "length " << n << " offset " << off;
      ASSERT_EQ(crc32_ieee_clmul128(0, p, n), zlib_crc(0, p, n)) << "length " << n << " offset " << off;
      ASSERT_EQ(crc32_ieee_portable(0, p, n), zlib_crc(0, p, n)) << "length " << n << " offset " << off;
    }
}

TEST(Crc32, EqualsZlibOnLongBuffersAndFromAnyStartingValue) {
  const std::vector<uint8_t> buf = random_bytes(70000, 2);
  std::mt19937 rng(3);
  for (size_t n : {383u, 384u, 447u, 448u, 511u, 639u, 640u, 1023u, 4096u, 4111u, 9000u, 65536u, 70000u}) {
    const uint32_t init = rng();
    EXPECT_EQ(crc32_ieee(init, buf.data(), n), zlib_crc(init, buf.data(), n)) << n;
    EXPECT_EQ(crc32_ieee_clmul128(init, buf.data(), n), zlib_crc(init, buf.data(), n)) << n;
    EXPECT_EQ(crc32_ieee_portable(init, buf.data(), n), zlib_crc(init, buf.data(), n)) << n;
  }
}

TEST(Crc32, ContinuingEqualsOnePass) {
  const std::vector<uint8_t> buf = random_bytes(3000, 4);
  for (size_t cut : {0u, 1u, 31u, 32u, 40u, 127u, 128u, 1500u, 2999u}) {
    const uint32_t a = crc32_ieee(0, buf.data(), cut);
    EXPECT_EQ(crc32_ieee(a, buf.data() + cut, buf.size() - cut), zlib_crc(0, buf.data(), buf.size())) << cut;
  }
}

TEST(Crc32, SaysWhichPathItTakes) {
  // Not a requirement of the format: informs whoever reads the test log.
  std::printf("crc32_ieee uses PCLMULQDQ: %s; 64-byte folds (VPCLMULQDQ): %s\n",
              crc32_uses_clmul() ? "yes" : "no (zlib)", crc32_uses_vpclmul() ? "yes" : "no");
  SUCCEED();
}

}  // namespace
}  // namespace hcasim::wire
