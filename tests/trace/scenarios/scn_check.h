// SPDX-License-Identifier: Apache-2.0
/* CHECK(cond, fmt, ...): a trace scenario stops at its first failed step, saying which. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "scenario: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                             \
      exit(1);                                           \
    }                                                    \
  } while (0)
