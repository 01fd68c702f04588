// SPDX-License-Identifier: Apache-2.0
/** @file fuzz_check.h @brief FUZZ_CHECK: a property every input must keep; on failure it says
 *  which and aborts, so libFuzzer saves the input and the replay test fails on it. */
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                           \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "property failed: %s (%s:%d): ", #cond, __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                                                \
      std::fprintf(stderr, "\n");                                                       \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
