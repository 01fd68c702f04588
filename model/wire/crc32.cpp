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

// The raw CRC state of a folded register's 16 bytes in four multiplies instead of two passes
// through the tables: fold the 128 bits to 64 (x^96 and x^64 mod P, reflected and shifted like
// the constants above), then a Barrett reduction to 32 bits with P and floor(x^64 / P), each
// bit-reflected over its 33 bits.
constexpr uint64_t kX64 = 0x163cd6124ull, kP = 0x1db710641ull, kMu = 0x1f7011641ull;

__attribute__((target("pclmul,sse4.1"))) inline uint32_t reduce(__m128i x) {
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, _mm_set_epi64x(int64_t(kX96), 0), 0x10));
  const __m128i high = _mm_srli_si128(x, 4);
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), _mm_cvtsi64_si128(int64_t(kX64)), 0x00),
                    high);
  const __m128i barrett = _mm_set_epi64x(int64_t(kMu), int64_t(kP));
  __m128i q = _mm_clmulepi64_si128(_mm_and_si128(x, low32), barrett, 0x10);
  q = _mm_clmulepi64_si128(_mm_and_si128(q, low32), barrett, 0x00);
  return uint32_t(_mm_extract_epi32(_mm_xor_si128(x, q), 1));
}

// Raw state c over n bytes (n >= 32): the whole 16-byte blocks fold into one register, which
// is congruent to them modulo P; it reduces to 32 bits and the tail goes through the table.
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
  return table_update(reduce(x), p, n);
}

// 512-bit folding (VPCLMULQDQ): a 64-byte register A moves on as four lanes at once; four
// registers 256 bytes apart move 2048 bits per step.
constexpr uint64_t kX2080 = 0x11542778aull, kX2016 = 0x1322d1430ull;

#define HCASIM_VCLMUL __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))

HCASIM_VCLMUL inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                   next, 0x96);  // a ^ b ^ c
}

HCASIM_VCLMUL inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Lane @p i of @p x (the zero-masking form: the plain one trips GCC 12's -Wuninitialized).
template <int i>
HCASIM_VCLMUL inline __m128i lane(__m512i x) {
  return _mm512_maskz_extracti32x4_epi32(0xf, x, i);
}

HCASIM_VCLMUL inline __m512i lanes(uint64_t lo, uint64_t hi) {
  return _mm512_set_epi64(int64_t(hi), int64_t(lo), int64_t(hi), int64_t(lo), int64_t(hi), int64_t(lo),
                          int64_t(hi), int64_t(lo));
}

// Raw state c over n bytes (n >= 256): four 64-byte registers fold 256 bytes at a time, then
// into one, then 64 bytes at a time; its four lanes fold into one 16-byte register, and the
// rest is clmul_update's 16-byte loop, reduction and table tail.
HCASIM_VCLMUL uint32_t vclmul_update(uint32_t c, const uint8_t* p, size_t n) {
  __m512i x0 = _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(int(c))));
  __m512i x1 = load512(p + 64), x2 = load512(p + 128), x3 = load512(p + 192);
  p += 256;
  n -= 256;
  const __m512i k256 = lanes(kX2080, kX2016);
  for (; n >= 256; p += 256, n -= 256) {
    x0 = fold512(x0, k256, load512(p));
    x1 = fold512(x1, k256, load512(p + 64));
    x2 = fold512(x2, k256, load512(p + 128));
    x3 = fold512(x3, k256, load512(p + 192));
  }
  const __m512i k64 = lanes(kX544, kX480);
  __m512i x = fold512(fold512(fold512(x0, k64, x1), k64, x2), k64, x3);
  for (; n >= 64; p += 64, n -= 64) x = fold512(x, k64, load512(p));
  const __m128i k1 = _mm_set_epi64x(int64_t(kX96), int64_t(kX160));
  __m128i r = fold(fold(fold(lane<0>(x), k1, lane<1>(x)), k1, lane<2>(x)), k1, lane<3>(x));
  for (; n >= 16; p += 16, n -= 16) r = fold(r, k1, load(p));
  return table_update(reduce(r), p, n);
}

bool have_vclmul() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return have;
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
  // Below a few hundred bytes the 512-bit set-up (four registers, the lane reduction) costs
  // more than it saves.
  if (n >= 384 && have_clmul() && have_vclmul()) return ~vclmul_update(~crc, p, n);
  return crc32_ieee_clmul128(crc, p, n);
}

uint32_t crc32_ieee_clmul128(uint32_t crc, const uint8_t* p, size_t n) {
  if (!have_clmul()) return uint32_t(crc32(crc, p, uInt(n)));
  const uint32_t c = ~crc;
  return ~(n >= 32 ? clmul_update(c, p, n) : table_update(c, p, n));
}

uint32_t crc32_ieee_portable(uint32_t crc, const uint8_t* p, size_t n) { return ~table_update(~crc, p, n); }

bool crc32_uses_clmul() { return have_clmul(); }

bool crc32_uses_vpclmul() { return have_clmul() && have_vclmul(); }

}  // namespace hcasim::wire
