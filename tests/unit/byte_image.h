// SPDX-License-Identifier: Apache-2.0
/** @file byte_image.h @brief The bytes of a contract structure, as the device sees them (tests). */
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace hcasim::hw {

/** @brief The in-memory bytes of @p v, in order. */
template <typename T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

}  // namespace hcasim::hw
