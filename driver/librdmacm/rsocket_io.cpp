// SPDX-License-Identifier: Apache-2.0
// The stream send and receive calls (rsend, rrecv and their v / msg / to / from forms): data is
// cut into transfers that fit the send ring and the target buffer, the first small so the
// first bytes leave at once (rdma-core's overlap), and received data is copied out of the
// receive buffer in the order it arrived.
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

/// The state a stream socket must be in to send: connected, and not shut down for writing.
int send_state(RSocket& rs, Lock& l, int flags) {
  if ((rs.state & kOpening) && wait_connected(rs, l, nonblocking(rs, flags))) return -1;
  if (!(rs.state & (kConnected | kDisconnected | kError))) return err(EPIPE);  // never connected
  if (!(rs.state & kWritable)) return err(rs.shut_wr ? EPIPE : ECONNRESET);
  return 0;
}

ssize_t send_stream(RSocket& rs, const iovec* iov, int iovcnt, int flags) {
  const ssize_t total = iov_total(iov, iovcnt);
  if (total < 0) return -1;
  std::lock_guard<std::mutex> serial(rs.send_mu);
  Lock l(rs.mu);
  if (send_state(rs, l, flags)) return -1;
  if (rs.iomap_pending && send_iomaps(rs, l, flags)) return -1;
  IovCursor src{iov, iovcnt};
  size_t left = static_cast<size_t>(total);
  uint32_t olen = kOlapStart;
  int ret = 0;
  while (left) {
    if ((ret = wait_send(rs, l, nonblocking(rs, flags)))) break;
    RsSge& t = rs.tsgl[rs.target_sge];
    const uint32_t xfer = std::min({next_xfer(olen, left), rs.sbuf_bytes_avail, t.length});
    const uint64_t addr = t.addr;
    t.addr += xfer;
    t.length -= xfer;
    if (!t.length) rs.target_sge = (rs.target_sge + 1) % kSglSize;  // that buffer is full
    rs.sseq_no++;
    if ((ret = write_iov(rs, src, xfer, msg_set(MsgOp::Data, xfer), false, addr, t.key))) break;
    left -= xfer;
  }
  return (ret && left == size_t(total)) ? ret : total - static_cast<ssize_t>(left);
}

/// Copies @p n bytes of the receive buffer from @p off (wrapping at its end) out to @p dst.
void copy_rbuf(const RSocket& rs, uint32_t off, IovCursor& dst, uint32_t n) {
  const uint32_t first = std::min(n, rs.rbuf_size - off);
  dst.put(rs.rbuf + off, first);
  if (n > first) dst.put(rs.rbuf, n - first);
}

size_t peek(const RSocket& rs, IovCursor& dst, size_t want) {
  size_t done = 0;
  uint32_t off = rs.rbuf_offset;
  for (int head = rs.rmsg_head; done < want && head != rs.rmsg_tail; head = (head + 1) % (rs.rq_size + 1)) {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(want - done, rs.rmsg[head].data));
    copy_rbuf(rs, off, dst, n);
    off = (off + n) % rs.rbuf_size;
    done += n;
  }
  return done;
}

size_t consume(RSocket& rs, IovCursor& dst, size_t want) {
  size_t done = 0;
  while (done < want && have_rdata(rs)) {
    RecvMsg& m = rs.rmsg[rs.rmsg_head];
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(want - done, m.data));
    copy_rbuf(rs, rs.rbuf_offset, dst, n);
    if (n == m.data) {  // the whole message: its credit can go back to the peer
      rs.rseq_no++;
      rs.rmsg_head = (rs.rmsg_head + 1) % (rs.rq_size + 1);
    } else {
      m.data -= n;
    }
    rs.rbuf_offset = (rs.rbuf_offset + n) % rs.rbuf_size;
    rs.rbuf_bytes_avail += n;
    done += n;
  }
  return done;
}

ssize_t recv_stream(RSocket& rs, const iovec* iov, int iovcnt, int flags) {
  const ssize_t total = iov_total(iov, iovcnt);
  if (total < 0) return -1;
  std::lock_guard<std::mutex> serial(rs.recv_mu);
  Lock l(rs.mu);
  if ((rs.state & kOpening) && wait_connected(rs, l, nonblocking(rs, flags))) return -1;
  if (!(rs.state & (kConnected | kDisconnected | kError))) return err(ENOTCONN);
  if (!total) return 0;
  IovCursor dst{iov, iovcnt};
  size_t left = static_cast<size_t>(total);
  int ret = 0;
  do {
    if (!have_rdata(rs) && (ret = progress(rs, l, nonblocking(rs, flags), [](RSocket& r) {
                              return have_rdata(r) || !(r.state & kReadable);
                            })))
      break;
    if (flags & MSG_PEEK) {
      left -= peek(rs, dst, left);
      break;
    }
    left -= consume(rs, dst, left);
  } while (left && (flags & MSG_WAITALL) && (rs.state & kReadable));
  if (ret && left == size_t(total)) return ret;
  if (left == size_t(total) && rs.state == kError) return err(ECONNRESET);  // not an orderly end
  return total - static_cast<ssize_t>(left);
}

ssize_t do_send(int socket, const iovec* iov, int iovcnt, int flags, const sockaddr* to, socklen_t tolen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  if (to || tolen) return err(EISCONN);
  return send_stream(*rs, iov, iovcnt, flags);
}

ssize_t do_recv(int socket, const iovec* iov, int iovcnt, int flags, sockaddr* from, socklen_t* fromlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  const ssize_t ret = recv_stream(*rs, iov, iovcnt, flags);
  if (ret > 0 && from && fromlen) rgetpeername(socket, from, fromlen);
  return ret;
}

}  // namespace
}  // namespace hcasim::rdmacm::rs

using namespace hcasim::rdmacm;
using namespace hcasim::rdmacm::rs;

HCASIM_RDMACM_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  const iovec iov{const_cast<void*>(buf), len};
  return do_send(socket, &iov, 1, flags, nullptr, 0);
}

HCASIM_RDMACM_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags,
                                     const sockaddr* dest_addr, socklen_t addrlen) {
  const iovec iov{const_cast<void*>(buf), len};
  return do_send(socket, &iov, 1, flags, dest_addr, addrlen);
}

HCASIM_RDMACM_EXPORT ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (!msg) return err(EFAULT);
  if (msg->msg_control && msg->msg_controllen) return err(ENOTSUP);  // no ancillary data
  return do_send(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                 static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
}

HCASIM_RDMACM_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}

HCASIM_RDMACM_EXPORT ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return do_send(socket, iov, iovcnt, 0, nullptr, 0);
}

HCASIM_RDMACM_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  const iovec iov{buf, len};
  return do_recv(socket, &iov, 1, flags, nullptr, nullptr);
}

HCASIM_RDMACM_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                                       socklen_t* addrlen) {
  const iovec iov{buf, len};
  return do_recv(socket, &iov, 1, flags, src_addr, addrlen);
}

HCASIM_RDMACM_EXPORT ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (!msg) return err(EFAULT);
  if (msg->msg_control && msg->msg_controllen) return err(ENOTSUP);  // no ancillary data
  const ssize_t ret =
      do_recv(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags, nullptr, nullptr);
  if (ret >= 0) {
    msg->msg_flags = 0;
    msg->msg_namelen = 0;  // a stream has no per-message source
  }
  return ret;
}

HCASIM_RDMACM_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  return rrecv(socket, buf, count, 0);
}

HCASIM_RDMACM_EXPORT ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return do_recv(socket, iov, iovcnt, 0, nullptr, nullptr);
}
