// SPDX-License-Identifier: Apache-2.0
/**
 * @file strprintf.h
 * @brief printf into a std::string (messages and reports built from several values).
 */
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace hcasim::model {

/** @brief printf-style formatting into a std::string (at most 511 characters). */
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string strprintf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace hcasim::model
