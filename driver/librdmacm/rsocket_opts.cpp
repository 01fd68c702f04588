// SPDX-License-Identifier: Apache-2.0
// rsocket options (rsocket(7): SOL_SOCKET, IPPROTO_TCP, IPPROTO_IPV6 and SOL_RDMA), rfcntl, and
// the socket's addresses. Boolean options are kept as bits (1 << optname) of the level's word,
// as rdma-core does; the others change the socket's sizes before its endpoint is made.
#include <endian.h>
#include <fcntl.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

/// The option's int; -1 with EFAULT / EINVAL when it is missing or short.
int int_arg(const void* optval, socklen_t optlen, int& out) {
  if (!optval) return err(EFAULT);
  if (optlen < sizeof(int)) return err(EINVAL);
  std::memcpy(&out, optval, sizeof out);
  return 0;
}

void set_flag(uint64_t& word, int optname, bool on) {
  if (on)
    word |= uint64_t(1) << optname;
  else
    word &= ~(uint64_t(1) << optname);
}

bool flag(uint64_t word, int optname) { return (word >> optname) & 1; }

unsigned default_keepalive_time() {
  unsigned t = 7200;  // Linux's tcp_keepalive_time default
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r")) {
    if (std::fscanf(f, "%u", &t) != 1) t = 7200;
    std::fclose(f);
  }
  return t;
}

uint32_t buf_size(int v) { return std::min<uint32_t>(static_cast<uint32_t>(v), kMaxBufSize / 2) << 1; }

int set_keepalive(RSocket& rs, bool on) {
  unsigned seconds;
  {
    Lock l(rs.mu);
    if (on == rs.keepalive) return 0;
    if (on && !rs.keepalive_time) rs.keepalive_time = default_keepalive_time();
    rs.keepalive = on;
    seconds = rs.keepalive_time;
  }
  return svc_keepalive(&rs, on, seconds);
}

int set_socket_opt(RSocket& rs, int optname, const void* optval, socklen_t optlen) {
  int v = 0;
  linger lg{};
  if (optname == SO_LINGER) {
    if (!optval) return err(EFAULT);
    if (optlen < sizeof lg) return err(EINVAL);
    std::memcpy(&lg, optval, sizeof lg);
  } else if (int_arg(optval, optlen, v)) {
    return -1;
  }
  if (optname == SO_KEEPALIVE) {
    if (set_keepalive(rs, v != 0)) return -1;
    Lock l(rs.mu);
    set_flag(rs.so_opts, optname, rs.keepalive);
    return 0;
  }
  Lock l(rs.mu);
  switch (optname) {
    case SO_REUSEADDR:
      if (rdma_set_option(rs.cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v) &&
          errno != ENOSYS && rs.state == kInit)
        return -1;  // as rdma-core: a refusal once bound is not an error
      break;
    case SO_RCVBUF:
      if (!rs.rbuf) rs.rbuf_size = buf_size(v);
      break;
    case SO_SNDBUF:
      if (!rs.sbuf) rs.sbuf_size = buf_size(v);
      if (rs.sbuf_size < kSndLowat) rs.sbuf_size = kSndLowat << 1;
      break;
    case SO_LINGER: v = !lg.l_onoff; break;  // inverted, so that the default (0) is on
    case SO_OOBINLINE: break;
    default: return err(ENOPROTOOPT);
  }
  set_flag(rs.so_opts, optname, v != 0);
  return 0;
}

int set_tcp_opt(RSocket& rs, int optname, const void* optval, socklen_t optlen) {
  int v = 0;
  if (int_arg(optval, optlen, v)) return -1;
  switch (optname) {
    case TCP_NODELAY: set_flag(rs.tcp_opts, optname, v != 0); return 0;
    case TCP_MAXSEG:
    case TCP_KEEPCNT:
    case TCP_KEEPINTVL: return 0;  // accepted and ignored: RC does its own segmenting and retries
    case TCP_KEEPIDLE: {
      if (v <= 0) return err(EINVAL);
      bool on;
      {
        Lock l(rs.mu);
        rs.keepalive_time = static_cast<unsigned>(v);
        on = rs.keepalive;
      }
      return on ? svc_keepalive(&rs, true, static_cast<unsigned>(v)) : 0;  // the timer restarts
    }
    default: return err(ENOPROTOOPT);
  }
}

int set_rdma_opt(RSocket& rs, int optname, const void* optval, socklen_t optlen) {
  if (optname == RDMA_ROUTE) {
    if (!optval) return err(EFAULT);
    if (!optlen || optlen % sizeof(ibv_path_data)) return err(EINVAL);
    Lock l(rs.mu);
    if (rs.state >= kOpening) return err(EINVAL);
    rs.route.assign(static_cast<const uint8_t*>(optval), static_cast<const uint8_t*>(optval) + optlen);
    return 0;
  }
  int v = 0;
  if (int_arg(optval, optlen, v)) return -1;
  Lock l(rs.mu);
  if (rs.state >= kOpening) return err(EINVAL);  // the endpoint is made: too late
  const auto size = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQpMaxSize));
  switch (optname) {
    case RDMA_SQSIZE: rs.sq_size = size; return 0;
    case RDMA_RQSIZE: rs.rq_size = size; return 0;
    case RDMA_INLINE: rs.sq_inline = size; return 0;
    case RDMA_IOMAPSIZE:
      if (v < 0) return err(EINVAL);
      rs.target_iomap_size = static_cast<uint16_t>(value_of(static_cast<uint8_t>(scale_of(v))));
      return 0;
    default: return err(ENOPROTOOPT);
  }
}

/// Writes int @p v as the option's value.
int put_int(void* optval, socklen_t* optlen, int v) {
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof v;
  return 0;
}

/// A path record as struct ibv_path_data (rdma-core's rs_convert_sa_path).
ibv_path_data path_data(const ibv_sa_path_rec& p) {
  ibv_path_data d{};
  d.path.dgid = p.dgid;
  d.path.sgid = p.sgid;
  d.path.dlid = p.dlid;
  d.path.slid = p.slid;
  d.path.flowlabel_hoplimit = htobe32((be32toh(p.flow_label) << 8) | p.hop_limit);
  d.path.tclass = p.traffic_class;
  d.path.reversible_numpath = uint8_t(p.reversible << 7 | 1);
  d.path.pkey = p.pkey;
  d.path.qosclass_sl = htobe16(p.sl);
  constexpr uint8_t kExactly = 2 << 6;  // selector: exactly this value
  d.path.mtu = p.mtu | kExactly;
  d.path.rate = p.rate | kExactly;
  d.path.packetlifetime = p.packet_life_time | kExactly;
  d.flags = p.preference;
  return d;
}

int get_route(const RSocket& rs, void* optval, socklen_t* optlen) {
  if (!rs.route.empty()) {
    if (*optlen < rs.route.size()) return err(EINVAL);
    std::memcpy(optval, rs.route.data(), rs.route.size());
    *optlen = static_cast<socklen_t>(rs.route.size());
    return 0;
  }
  if (*optlen < sizeof(ibv_path_data)) return err(EINVAL);
  socklen_t len = 0;
  const rdma_route& r = rs.cm_id->route;
  for (int i = 0; i < r.num_paths && len + sizeof(ibv_path_data) <= *optlen; ++i) {
    const ibv_path_data d = path_data(r.path_rec[i]);
    std::memcpy(static_cast<uint8_t*>(optval) + len, &d, sizeof d);
    len += sizeof d;
  }
  *optlen = len;
  return 0;
}

int get_socket_opt(RSocket& rs, int optname, void* optval, socklen_t* optlen) {
  switch (optname) {
    case SO_REUSEADDR:
    case SO_KEEPALIVE:
    case SO_OOBINLINE: return put_int(optval, optlen, flag(rs.so_opts, optname));
    case SO_RCVBUF: return put_int(optval, optlen, static_cast<int>(rs.rbuf_size));
    case SO_SNDBUF: return put_int(optval, optlen, static_cast<int>(rs.sbuf_size));
    case SO_ERROR: {
      const int e = rs.err;
      rs.err = 0;  // reading it clears it, as for a socket
      return put_int(optval, optlen, e);
    }
    case SO_LINGER: {
      if (*optlen < sizeof(linger)) return err(EINVAL);
      const linger lg{!flag(rs.so_opts, optname), 0};
      std::memcpy(optval, &lg, sizeof lg);
      *optlen = sizeof lg;
      return 0;
    }
    default: return err(ENOPROTOOPT);
  }
}

int get_tcp_opt(RSocket& rs, int optname, void* optval, socklen_t* optlen) {
  switch (optname) {
    case TCP_NODELAY: return put_int(optval, optlen, flag(rs.tcp_opts, optname));
    case TCP_MAXSEG: {
      const rdma_route* r = rs.cm_id ? &rs.cm_id->route : nullptr;
      return put_int(optval, optlen, r && r->num_paths ? 1 << (7 + r->path_rec->mtu) : 2048);
    }
    case TCP_KEEPIDLE:
      return put_int(optval, optlen,
                     static_cast<int>(rs.keepalive_time ? rs.keepalive_time : default_keepalive_time()));
    case TCP_KEEPCNT:
    case TCP_KEEPINTVL: return put_int(optval, optlen, 1);
    default: return err(ENOPROTOOPT);
  }
}

int get_rdma_opt(RSocket& rs, int optname, void* optval, socklen_t* optlen) {
  switch (optname) {
    case RDMA_SQSIZE: return put_int(optval, optlen, rs.sq_size);
    case RDMA_RQSIZE: return put_int(optval, optlen, rs.rq_size);
    case RDMA_INLINE: return put_int(optval, optlen, rs.sq_inline);
    case RDMA_IOMAPSIZE: return put_int(optval, optlen, rs.target_iomap_size);
    case RDMA_ROUTE: return rs.cm_id ? get_route(rs, optval, optlen) : err(ENOPROTOOPT);
    default: return err(ENOPROTOOPT);
  }
}

/// Copies @p src out as getpeername(2) does: truncated to *@p len, *@p len set to its size.
int copy_addr(const sockaddr* src, sockaddr* dst, socklen_t* len) {
  if (!dst || !len) return err(EFAULT);
  socklen_t size = addrlen_of(src);
  if (!size) size = sizeof(sockaddr_in);  // unbound: the family only (as rdma-core)
  std::memcpy(dst, src, std::min(*len, size));
  *len = size;
  return 0;
}

}  // namespace
}  // namespace hcasim::rdmacm::rs

using namespace hcasim::rdmacm;
using namespace hcasim::rdmacm::rs;

HCASIM_RDMACM_EXPORT int rsetsockopt(int socket, int level, int optname, const void* optval,
                                     socklen_t optlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  switch (level) {
    case SOL_SOCKET: return set_socket_opt(*rs, optname, optval, optlen);
    case IPPROTO_TCP: return set_tcp_opt(*rs, optname, optval, optlen);
    case IPPROTO_IPV6: {
      int v = 0;
      if (optname != IPV6_V6ONLY) return err(ENOPROTOOPT);
      if (int_arg(optval, optlen, v)) return -1;
      if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v)) return -1;
      set_flag(rs->ipv6_opts, optname, v != 0);
      return 0;
    }
    case SOL_RDMA: return set_rdma_opt(*rs, optname, optval, optlen);
    default: return err(ENOPROTOOPT);
  }
}

HCASIM_RDMACM_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  if (!optval || !optlen) return err(EFAULT);
  if (*optlen < sizeof(int)) return err(EINVAL);
  Lock l(rs->mu);
  switch (level) {
    case SOL_SOCKET: return get_socket_opt(*rs, optname, optval, optlen);
    case IPPROTO_TCP: return get_tcp_opt(*rs, optname, optval, optlen);
    case IPPROTO_IPV6:
      return optname == IPV6_V6ONLY ? put_int(optval, optlen, flag(rs->ipv6_opts, optname))
                                    : err(ENOPROTOOPT);
    case SOL_RDMA: return get_rdma_opt(*rs, optname, optval, optlen);
    default: return err(ENOPROTOOPT);
  }
}

HCASIM_RDMACM_EXPORT int rfcntl(int socket, int cmd, ...) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  if (cmd == F_GETFL) {
    Lock l(rs->mu);
    return rs->fd_flags;
  }
  if (cmd != F_SETFL) return err(EINVAL);
  va_list args;
  va_start(args, cmd);
  const int flags = va_arg(args, int);
  va_end(args);
  Lock l(rs->mu);
  // A blocking connect reads its CM events itself; its channel follows the flag. Every other
  // channel the library reads is non-blocking already, and its calls look at fd_flags.
  if (!rs->cm_watched && (rs->state & kOpening || rs->state < kListening)) {
    const int fl = fcntl(rs->cm_id->channel->fd, F_GETFL);
    if (fl < 0 ||
        fcntl(rs->cm_id->channel->fd, F_SETFL, (flags & O_NONBLOCK) ? fl | O_NONBLOCK : fl & ~O_NONBLOCK))
      return -1;
  }
  rs->fd_flags = flags;
  return 0;
}

HCASIM_RDMACM_EXPORT int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  Lock l(rs->mu);
  if (!(rs->state & (kConnected | kDisconnected | kError))) return err(ENOTCONN);
  return copy_addr(rdma_get_peer_addr(rs->cm_id), addr, addrlen);
}

HCASIM_RDMACM_EXPORT int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  Lock l(rs->mu);
  return copy_addr(rdma_get_local_addr(rs->cm_id), addr, addrlen);
}
