// SPDX-License-Identifier: Apache-2.0
// Datagram rsockets: not yet (work in progress on this branch).
#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
int dgram_socket(int, int) { return err(EOPNOTSUPP); }
int dgram_bind(RSocket&, const sockaddr*, socklen_t) { return err(EOPNOTSUPP); }
int dgram_connect(RSocket&, const sockaddr*, socklen_t) { return err(EOPNOTSUPP); }
ssize_t dgram_send(RSocket&, const iovec*, int, int, const sockaddr*, socklen_t) { return err(EOPNOTSUPP); }
ssize_t dgram_recv(RSocket&, const iovec*, int, int, sockaddr*, socklen_t*) { return err(EOPNOTSUPP); }
short dgram_events(RSocket&, short) { return POLLERR; }
int dgram_arm(RSocket&, short, short& ready) {
  ready = POLLERR;
  return -1;
}
void dgram_take_event(RSocket&) {}
int dgram_setsockopt(RSocket&, int, int, const void*, socklen_t) { return err(EOPNOTSUPP); }
int dgram_name(RSocket&, bool, sockaddr*, socklen_t*) { return err(EOPNOTSUPP); }
void free_dgram(RSocket* rs) { delete rs; }
}  // namespace hcasim::rdmacm::rs
