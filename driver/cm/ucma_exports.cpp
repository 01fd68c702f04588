// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's kernel interface as the drop-in libibverbs.so.1 exports it (hcasim/ucma.h,
// version node HCASIM_UCMA_0.1). Compiled into the library itself, beside platform.cpp.
#include <cerrno>

#include "hcasim/ucma.h"
#include "ucma.h"

#define HCASIM_UCMA_EXPORT extern "C" __attribute__((visibility("default")))

HCASIM_UCMA_EXPORT int hcasim_ucma_open(void) {
  const int fd = hcasim::drv::cm::Ucma::get().open();
  if (fd < 0) errno = -fd;
  return fd < 0 ? -1 : fd;
}

HCASIM_UCMA_EXPORT ssize_t hcasim_ucma_write(int fd, const void* buf, size_t len) {
  const int r = hcasim::drv::cm::Ucma::get().write(fd, buf, len);
  if (r < 0) errno = -r;
  return r < 0 ? -1 : ssize_t(len);
}

HCASIM_UCMA_EXPORT int hcasim_ucma_close(int fd) {
  const int r = hcasim::drv::cm::Ucma::get().close(fd);
  if (r < 0) errno = -r;
  return r < 0 ? -1 : 0;
}
