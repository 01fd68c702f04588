// SPDX-License-Identifier: Apache-2.0
/**
 * @file crc32.h
 * @brief The CRC-32 of Ethernet and of the RoCEv2 ICRC (polynomial 0x04C11DB7, bit-reflected),
 *        with zlib's crc32() interface and results.
 *
 * Every frame's ICRC is computed when it is built and checked when it is received, so this is
 * on the simulator's hot path. zlib's generic code costs about three instructions per byte
 * plus a set-up per call; with PCLMULQDQ (every x86-64 CPU since 2010, checked at run time)
 * the bulk of a buffer is folded 16 bytes at a time by carry-less multiplication (Intel,
 * "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction", 2009), and the
 * last 16 bytes and the tail go through a table; where AVX-512 has VPCLMULQDQ, buffers of a
 * few hundred bytes and more fold 64 bytes per instruction (a 4 KiB payload's ICRC in a third
 * of the time). Without PCLMULQDQ, zlib's crc32() does the work.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace hcasim::wire {

/**
 * @brief Continue CRC-32 @p crc over @p n bytes at @p p: the value zlib's crc32(crc, p, n)
 * returns (start with 0; the initial and final inversions are inside, as in zlib).
 */
uint32_t crc32_ieee(uint32_t crc, const uint8_t* p, size_t n);

/** @brief The same without the carry-less multiplier, byte-table only (tests compare both). */
uint32_t crc32_ieee_portable(uint32_t crc, const uint8_t* p, size_t n);

/** @brief The same with 16-byte carry-less folding only, never 64-byte (tests compare each path). */
uint32_t crc32_ieee_clmul128(uint32_t crc, const uint8_t* p, size_t n);

/** @brief Whether crc32_ieee() uses PCLMULQDQ on this CPU. */
bool crc32_uses_clmul();

/** @brief Whether crc32_ieee() folds 64 bytes per step (VPCLMULQDQ with AVX-512) on this CPU. */
bool crc32_uses_vpclmul();

}  // namespace hcasim::wire
