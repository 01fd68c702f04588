// SPDX-License-Identifier: Apache-2.0
// The kernel command interface: what librdmacm writes to /dev/infiniband/rdma_cm goes to
// hcasim_ucma_write() (driver/include/hcasim/ucma.h), a header then the command's structure.
#include <hcasim/ucma.h>

#include <cstring>

#include "cma_private.h"

namespace hcasim::rdmacm {

int kern_write(int fd, uint32_t op, const void* cmd, size_t len, size_t out_len) {
  kabi::rdma_ucm_cmd_hdr hdr{};
  hdr.cmd = op;
  hdr.in = static_cast<__u16>(len);
  hdr.out = static_cast<__u16>(out_len);
  // Commands are at most a few hundred bytes: a stack buffer covers all of them.
  alignas(8) unsigned char buf[sizeof hdr + 1024];
  if (len > sizeof buf - sizeof hdr) return err(EINVAL);
  std::memcpy(buf, &hdr, sizeof hdr);
  std::memcpy(buf + sizeof hdr, cmd, len);
  const size_t total = sizeof hdr + len;
  const ssize_t ret = hcasim_ucma_write(fd, buf, total);
  if (ret == static_cast<ssize_t>(total)) return 0;
  return ret >= 0 ? err(ENODATA) : -1;
}

}  // namespace hcasim::rdmacm
