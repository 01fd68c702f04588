// SPDX-License-Identifier: Apache-2.0
/**
 * @file test_pattern.h
 * @brief The tests' payload pattern, with no test framework: the GoogleTest fixtures
 *        (verbs_fixture.h) and plain test programs (tests/soak/fault_soak) fill and check the
 *        same bytes.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace e2e {

/** Deterministic, position-dependent test pattern (no two nearby bytes or seeds alike). */
inline uint8_t pattern_byte(uint32_t seed, size_t i) {
  uint32_t x = seed * 0x9e3779b1u + uint32_t(i) * 0x85ebca6bu + uint32_t(i >> 8) * 0xc2b2ae35u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  return uint8_t(x);
}
inline void fill_pattern(uint8_t* p, size_t len, uint32_t seed) {
  for (size_t i = 0; i < len; ++i) p[i] = pattern_byte(seed, i);
}

}  // namespace e2e
