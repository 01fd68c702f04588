// SPDX-License-Identifier: Apache-2.0
// The rsocket API (<rdma/rsocket.h>) is exported for ABI compatibility but not modelled: every
// call fails with ENOSYS (and rpoll / rselect too, rather than silently ignoring descriptors).
#include <rdma/rsocket.h>

#include "cma_private.h"

using hcasim::rdmacm::err;

namespace {
/// The common answer of every rsocket call.
int not_modelled() { return err(ENOSYS); }
}  // namespace

HCASIM_RDMACM_EXPORT int rsocket(int, int, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rbind(int, const sockaddr*, socklen_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rlisten(int, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int raccept(int, sockaddr*, socklen_t*) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rshutdown(int, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rclose(int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rrecv(int, void*, size_t, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return not_modelled();
}
HCASIM_RDMACM_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rsend(int, const void*, size_t, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return not_modelled();
}
HCASIM_RDMACM_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rread(int, void*, size_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rreadv(int, const iovec*, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rwrite(int, const void*, size_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT ssize_t rwritev(int, const iovec*, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rpoll(pollfd*, nfds_t, int) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int rfcntl(int, int, ...) { return not_modelled(); }
HCASIM_RDMACM_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT int riounmap(int, void*, size_t) { return not_modelled(); }
HCASIM_RDMACM_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  return static_cast<size_t>(not_modelled());
}
