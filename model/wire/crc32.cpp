// SPDX-License-Identifier: Apache-2.0
#include "crc32.h"

#include <immintrin.h>
#include <zlib.h>

#include <array>
#include <cstring>

namespace hcasim::wire {
namespace {

constexpr uint32_t kReflectedPoly = 0xEDB88320u;

// Slicing-by-8 tables: t[k][b] is the CRC of byte b followed by k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kReflectedPoly : 0);
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}
constexpr Tables kTables = make_tables();

// Raw CRC state (no inversions) over n bytes, 8 at a time, then bytewise.
uint32_t table_update(uint32_t c, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian: the first byte is the lowest
    w ^= c;
    c = kTables[7][w & 0xff] ^ kTables[6][(w >> 8) & 0xff] ^ kTables[5][(w >> 16) & 0xff] ^
        kTables[4][(w >> 24) & 0xff] ^ kTables[3][(w >> 32) & 0xff] ^ kTables[2][(w >> 40) & 0xff] ^
        kTables[1][(w >> 48) & 0xff] ^ kTables[0][w >> 56];
  }
  for (; n; --n) c = kTables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

// Folding constants, x^n mod P bit-reflected and shifted left by one (the reflected product
// comes out one place lower): a 16-byte register A.x^64 + B (low half A) moves 128 bits on as
// clmul(A, x^160) ^ clmul(B, x^96), 512 bits on as clmul(A, x^544) ^ clmul(B, x^480).
constexpr uint64_t kX160 = 0x1751997d0ull, kX96 = 0x0ccaa009eull;
constexpr uint64_t kX544 = 0x154442bd4ull, kX480 = 0x1c6e41596ull;

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)),
                       next);
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i load(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Raw state c over n bytes (n >= 32): the whole 16-byte blocks fold into one register, which
// is congruent to them modulo P; its 16 bytes and the tail then go through the table.
__attribute__((target("pclmul,sse4.1"))) uint32_t clmul_update(uint32_t c, const uint8_t* p, size_t n) {
  __m128i x = _mm_xor_si128(load(p), _mm_cvtsi32_si128(int(c)));
  p += 16;
  n -= 16;
  if (n >= 112) {  // four registers 64 bytes apart, folded together afterwards
    const __m128i k4 = _mm_set_epi64x(int64_t(kX480), int64_t(kX544));
    __m128i y = load(p), z = load(p + 16), w = load(p + 32);
    for (p += 48, n -= 48; n >= 64; p += 64, n -= 64) {
      x = fold(x, k4, load(p));
      y = fold(y, k4, load(p + 16));
      z = fold(z, k4, load(p + 32));
      w = fold(w, k4, load(p + 48));
    }
    const __m128i k1 = _mm_set_epi64x(int64_t(kX96), int64_t(kX160));
    x = fold(fold(fold(x, k1, y), k1, z), k1, w);
  }
  const __m128i k1 = _mm_set_epi64x(int64_t(kX96), int64_t(kX160));
  for (; n >= 16; p += 16, n -= 16) x = fold(x, k1, load(p));
  alignas(16) uint8_t folded[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(folded), x);
  return table_update(table_update(0, folded, 16), p, n);
}

bool have_clmul() {
  static const bool have = [] {
    __builtin_cpu_init();  // may run before the CPU model's own initialiser
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return have;
}

}  // namespace

uint32_t crc32_ieee(uint32_t crc, const uint8_t* p, size_t n) {
  if (!have_clmul()) return uint32_t(crc32(crc, p, uInt(n)));
  const uint32_t c = ~crc;
  return ~(n >= 32 ? clmul_update(c, p, n) : table_update(c, p, n));
}

uint32_t crc32_ieee_portable(uint32_t crc, const uint8_t* p, size_t n) { return ~table_update(~crc, p, n); }

bool crc32_uses_clmul() { return have_clmul(); }

}  // namespace hcasim::wire
