// SPDX-License-Identifier: Apache-2.0
/**
 * @file enum_bits.h
 * @brief The integer a program stored in an enum field of a verbs struct.
 *
 * A program may store any value there (`attr.qp_state = 42`), and ibv_modify_qp(3) or
 * ibv_post_send(3) must answer EINVAL. Loading such a value as the enum type is undefined
 * behaviour in C++ when it lies outside the enum's range, so the checks read the bytes instead.
 */
#pragma once

#include <cstring>
#include <type_traits>

namespace hcasim::drv {

/** @brief The value of enum field @p e as its underlying integer, whatever the program put there. */
template <class E>
std::underlying_type_t<E> enum_bits(const E& e) {
  static_assert(std::is_enum_v<E>);
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace hcasim::drv
