// SPDX-License-Identifier: Apache-2.0
// Stream rsocket connections: rsocket/rbind/rlisten/raccept/rconnect, the endpoint (CQ, RC QP,
// send / receive / target buffers and their registrations, the posted receives), the connection
// data exchanged in the REQ and the REP (struct rs_conn_data, rdma-core's layout), the active
// side's state machine (rs_do_connect), and the service thread's accept and CM event handling.
#include <endian.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

constexpr bool kHostIsNet = __BYTE_ORDER == __BIG_ENDIAN;

/// Page-aligned, zeroed memory for registered buffers (rdma-core's forksafe_alloc).
uint8_t* page_alloc(size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  len = (len + page - 1) / page * page;
  void* p = nullptr;
  if (posix_memalign(&p, page, len)) return nullptr;
  std::memset(p, 0, len);
  return static_cast<uint8_t*>(p);
}

int set_nonblock(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  return fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) < 0 ? -1 : 0;
}

/// Queue sizes within [kQpMinSize, min(device's max_qp_wr, kQpMaxSize)] (rs_set_qp_size).
void set_qp_size(RSocket& rs) {
  const uint16_t max_size = static_cast<uint16_t>(std::min<int>(
      from_id(rs.cm_id)->cma_dev ? from_id(rs.cm_id)->cma_dev->max_qpsize : kQpMaxSize, kQpMaxSize));
  rs.sq_size = std::clamp<uint16_t>(rs.sq_size, kQpMinSize, max_size);
  rs.rq_size = std::clamp<uint16_t>(rs.rq_size, kQpMinSize, max_size);
}

int init_bufs(RSocket& rs) {
  rdma_cm_id* id = rs.cm_id;
  rs.rbuf_size = std::max<uint32_t>(rs.rbuf_size & ~1u, 2);  // two equal halves
  rs.rmsg.assign(rs.rq_size + 1u, RecvMsg{MsgOp::Data, 0});
  const uint32_t sbuf_len = rs.sbuf_size + (rs.sq_inline < kMaxCtrlMsg ? kMaxCtrlMsg * kQpCtrlSize : 0);
  const size_t target_len = sizeof(RsSge) * kSglSize + sizeof(RsIomap) * rs.target_iomap_size;
  if (!(rs.sbuf = page_alloc(sbuf_len)) || !(rs.target_buf = page_alloc(target_len)) ||
      !(rs.rbuf = page_alloc(rs.rbuf_size)))
    return err(ENOMEM);
  constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (!(rs.smr = ibv_reg_mr(id->pd, rs.sbuf, sbuf_len, IBV_ACCESS_LOCAL_WRITE)) ||
      !(rs.target_mr = ibv_reg_mr(id->pd, rs.target_buf, target_len, kRemote)) ||
      !(rs.rmr = ibv_reg_mr(id->pd, rs.rbuf, rs.rbuf_size, kRemote)))
    return -1;
  rs.tiomap.assign(rs.target_iomap_size, RsIomap{});
  rs.sbuf_pos = 0;
  rs.sbuf_bytes_avail = rs.sbuf_size;
  rs.rbuf_free_offset = rs.rbuf_size >> 1;
  rs.rbuf_bytes_avail = rs.rbuf_size >> 1;
  rs.sqe_avail = rs.sq_size - static_cast<int>(rs.ctrl_max_seqno);
  rs.rseq_comp = rs.rq_size >> 1;
  return 0;
}

int post_recvs(RSocket& rs, int n) {
  for (int i = 0; i < n; ++i) {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = kWrIdRecv;  // the data arrives by RDMA WRITE; the WR only takes the immediate
    if (int ret = ibv_post_recv(rs.cm_id->qp, &wr, &bad)) return err(ret);
  }
  return 0;
}

/// The CQ (send and receive share it, with one completion channel) and the RC QP (rs_create_ep).
int create_ep(RSocket& rs) {
  rdma_cm_id* id = rs.cm_id;
  set_qp_size(rs);
  if (!(id->recv_cq_channel = ibv_create_comp_channel(id->verbs))) return -1;
  id->recv_cq = ibv_create_cq(id->verbs, rs.sq_size + rs.rq_size, id, id->recv_cq_channel, 0);
  if (!id->recv_cq) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    id->recv_cq_channel = nullptr;
    return -1;
  }
  id->send_cq_channel = id->recv_cq_channel;
  id->send_cq = id->recv_cq;
  ibv_qp_init_attr a{};
  a.qp_context = &rs;
  a.send_cq = a.recv_cq = id->recv_cq;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 1;
  a.cap.max_send_wr = rs.sq_size;
  a.cap.max_recv_wr = rs.rq_size;
  a.cap.max_send_sge = 2;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = rs.sq_inline;
  if (rdma_create_qp(id, nullptr, &a)) return -1;
  rs.sq_inline = static_cast<uint16_t>(std::min<uint32_t>(a.cap.max_inline_data, kQpMaxSize));
  if (init_bufs(rs)) return -1;
  return post_recvs(rs, rs.rq_size);
}

void format_conn_data(const RSocket& rs, RsConnData& c) {
  c = RsConnData{};
  c.version = kConnVersion;
  c.flags = kConnFlagIomap | (kHostIsNet ? kConnFlagNet : 0);
  c.credits = htobe16(rs.rq_size);
  c.target_iomap_size = static_cast<uint8_t>(scale_of(rs.target_iomap_size));
  c.target_sgl.addr = htobe64(reinterpret_cast<uintptr_t>(rs.target_buf));
  c.target_sgl.key = htobe32(rs.target_mr->rkey);
  c.target_sgl.length = htobe32(kSglSize);
  c.data_buf.addr = htobe64(reinterpret_cast<uintptr_t>(rs.rbuf));
  c.data_buf.key = htobe32(rs.rmr->rkey);
  c.data_buf.length = htobe32(rs.rbuf_size >> 1);
}

/// The peer's connection data; -1 with EPROTO when it is not an rsocket's (rs_save_conn_data).
int save_conn_data(RSocket& rs, const void* pd, size_t len) {
  RsConnData c;
  if (!pd || len < sizeof c) return err(EPROTO);
  std::memcpy(&c, pd, sizeof c);
  if (c.version != kConnVersion) return err(EPROTO);
  rs.remote_sgl = RsSge{be64toh(c.target_sgl.addr), be32toh(c.target_sgl.key), be32toh(c.target_sgl.length)};
  if (!rs.remote_sgl.length) return err(EPROTO);
  rs.remote_sge = 1 % static_cast<int>(rs.remote_sgl.length);
  rs.swap_sgl = ((c.flags & kConnFlagNet) != 0) != kHostIsNet;
  if (c.flags & kConnFlagIomap)
    rs.remote_iomap = RsSge{rs.remote_sgl.addr + sizeof(RsSge) * rs.remote_sgl.length, rs.remote_sgl.key,
                            static_cast<uint32_t>(value_of(c.target_iomap_size))};
  rs.tsgl[0] = RsSge{be64toh(c.data_buf.addr), be32toh(c.data_buf.key), be32toh(c.data_buf.length)};
  rs.target_sge = 0;
  rs.tsgl_next = 1 % kSglSize;
  rs.sseq_comp = be16toh(c.credits);
  return 0;
}

/// rdma_cm's header (struct ib_connect_hdr: versions, port, two addresses), which an AF_IB id's
/// program puts before its own private data; for IP ids the kernel adds and strips it.
constexpr size_t kIbConnectHdrSize = 36;

/// Where the connection data starts in a request's private data.
size_t conn_data_offset(const RSocket& rs) {
  return rs.cm_id->route.addr.src_addr.sa_family == AF_IB ? kIbConnectHdrSize : 0;
}

int connect_request(RSocket& rs, Lock& l) {
  if (create_ep(rs)) return -1;
  uint8_t pd[kIbConnectHdrSize + sizeof(RsConnData)] = {};
  const size_t off = conn_data_offset(rs);
  RsConnData creq;
  format_conn_data(rs, creq);
  std::memcpy(pd + off, &creq, sizeof creq);
  rdma_conn_param param{};
  param.private_data = pd;
  param.private_data_len = static_cast<uint8_t>(sizeof creq + off);
  param.flow_control = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;  // credits cover data; control messages may meet an RNR NAK
  return rdma_connect(rs.cm_id, &param);
}

int connected(RSocket& rs) {
  const rdma_cm_event* e = rs.cm_id->event;
  if (!e || save_conn_data(rs, e->param.conn.private_data, e->param.conn.private_data_len))
    return err(ENOTSUP);  // rdma-core: a REP that is not version 1
  rs.state = kConnectRdwr;
  return 0;
}

/// The steps of rs_do_connect from address resolution on; each may stop with EAGAIN.
int connect_steps(RSocket& rs, Lock& l) {
  int ret = 0, to = 0;
  rdma_cm_id* id = rs.cm_id;
  switch (rs.state) {
    case kInit:
    case kBound:
    resolve_addr:
      to = 1000 << rs.retries++;
      if (!(ret = rdma_resolve_addr(id, nullptr, &id->route.addr.dst_addr, to))) goto resolve_route;
      if (errno == EAGAIN) rs.state = kResolvingAddr;
      return ret;
    case kResolvingAddr:
      if ((ret = ucma_complete(id))) {
        if (errno == ETIMEDOUT && rs.retries <= kConnRetries) goto resolve_addr;
        return ret;
      }
      rs.retries = 0;
    resolve_route:
      to = 1000 << rs.retries++;
      if (!rs.route.empty()) {  // RDMA_ROUTE: the path is given, the CM reports it resolved
        ret = rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, rs.route.data(), rs.route.size());
        rs.route.clear();
        if (!ret) {
          rs.state = kResolvingRoute;
          goto resolving_route;
        }
        if (errno != ENOSYS) return ret;  // a CM that takes no path (RoCE's has no SA) resolves it
      }
      if (!(ret = rdma_resolve_route(id, to))) goto do_connect;
      if (errno == EAGAIN) rs.state = kResolvingRoute;
      return ret;
    case kResolvingRoute:
    resolving_route:
      if ((ret = ucma_complete(id))) {
        if (errno == ETIMEDOUT && rs.retries <= kConnRetries) goto resolve_route;
        return ret;
      }
    do_connect:
      rs.retries = 0;
      if (!(ret = connect_request(rs, l))) return connected(rs);
      if (errno == EAGAIN) rs.state = kConnecting;
      return ret;
    case kConnecting: return ucma_complete(id) ? -1 : connected(rs);
    case kAccepting:
      if (ucma_complete(id)) return -1;
      rs.state = kConnectRdwr;
      return 0;
    default: return err(EINVAL);
  }
}

}  // namespace

int do_connect(RSocket& rs, Lock& l) {
  if (rs.state & (kConnectError | kDisconnected | kError)) return err(ENOTCONN);
  if (rs.state & kConnected) return 0;
  if (rs.state == kListening) return err(EINVAL);
  const int ret = connect_steps(rs, l);
  if (ret) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      errno = EINPROGRESS;
    } else {
      rs.state = kConnectError;
      rs.err = errno;
    }
  }
  return ret;
}

void flush_qp(RSocket& rs) {
  if (!rs.cm_id || !rs.cm_id->qp) return;
  // A requested event, then the flush: a thread blocked on the channel wakes (rdma-core's
  // rshutdown does the same to unblock rpoll).
  ibv_req_notify_cq(rs.cm_id->recv_cq, 0);
  rs.cq_armed = true;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(rs.cm_id->qp, &attr, IBV_QP_STATE);
}

int wait_connected(RSocket& rs, Lock& l, bool nonblock) {
  while (rs.state & kOpening) {
    if (!rs.cm_watched) {  // nobody else drives it: do it here, as rdma-core does
      if (do_connect(rs, l)) return errno == EINPROGRESS ? err(EAGAIN) : -1;
      continue;
    }
    if (nonblock) return err(EAGAIN);
    rs.cv.wait(l);
  }
  return 0;
}

}  // namespace hcasim::rdmacm::rs

// ---- the passive side (service thread) ---------------------------------------------------------

namespace hcasim::rdmacm::rs {
namespace {

/// Moves an accepted connection that is now established (or failed) off the listener's
/// pending list; the established one to the accept queue. Caller holds the child's lock.
bool settle_child(RSocket& rs) {
  if (rs.queued || !rs.parent || (rs.state & kOpening)) return true;
  RSocket& ls = *rs.parent;
  Lock g(ls.mu);
  if (ls.closing) return true;  // rclose of the listener frees it
  ls.pending.remove(&rs);
  if (!(rs.state & kConnected)) return false;  // never established: the service frees it
  rs.queued = true;
  ls.accept_queue.push_back(&rs);
  const uint64_t one = 1;
  if (write(ls.accept_fd, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
  }
  ls.cv.notify_all();
  return true;
}

/// Answers one connection request on @p ls with a new socket; false once none is queued.
bool accept_one(RSocket& ls) {
  rdma_cm_id* id = nullptr;
  if (rdma_get_request(ls.cm_id, &id)) return errno != EAGAIN && errno != EWOULDBLOCK;
  RSocket* rs;
  {
    Lock g(ls.mu);  // the listener's sizes, which the program may still be setting
    rs = alloc(&ls);
  }
  if (!rs) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return true;
  }
  rs->cm_id = id;
  Lock l(rs->mu);
  const rdma_conn_param req = id->event->param.conn;
  const size_t off = conn_data_offset(ls);
  int ret = req.private_data_len >= off ? 0 : err(EPROTO);
  if (!ret) ret = create_ep(*rs);
  if (!ret)
    ret =
        save_conn_data(*rs, static_cast<const uint8_t*>(req.private_data) + off, req.private_data_len - off);
  if (!ret) {
    RsConnData resp;
    format_conn_data(*rs, resp);
    rdma_conn_param param = req;
    param.private_data = &resp;
    param.private_data_len = sizeof resp;
    // The RTU is awaited by the service, not here: the channel must not block it.
    ret = set_nonblock(id->channel->fd, true);
    if (!ret) ret = rdma_accept(id, &param);
    rs->state = ret ? kAccepting : kConnectRdwr;
    if (ret && errno == EAGAIN) ret = 0;
  }
  if (ret) {
    rdma_reject(id, nullptr, 0);
    l.unlock();
    free_socket(rs);
    return true;
  }
  rs->parent = &ls;
  l.unlock();
  {
    Lock g(ls.mu);
    ls.pending.push_back(rs);
  }
  if (svc_watch(rs)) {  // nobody would see its RTU: refuse it
    Lock g(ls.mu);
    ls.pending.remove(rs);
    g.unlock();
    free_socket(rs);
    return true;
  }
  l.lock();
  if (!settle_child(*rs)) {  // it failed before the service watched it
    l.unlock();
    svc_forget(rs);
    free_socket(rs);
  }
  return true;
}

}  // namespace

void accept_requests(RSocket& ls) {
  while (accept_one(ls)) {
  }
  poll_signal();
}

bool handle_cm_event(RSocket& rs) {
  Lock l(rs.mu);
  if (rs.state & kOpening) {
    do_connect(rs, l);
  } else if (!ucma_complete(rs.cm_id) && rs.cm_id->event &&
             rs.cm_id->event->event == RDMA_CM_EVENT_DISCONNECTED && (rs.state & kConnected)) {
    // The peer's CM disconnected; a peer that closed sent its disconnect message first, one
    // that died did not. Either way nothing more will come: wake whoever waits.
    rs.state = kDisconnected;
    rs.peer_gone = true;
    flush_qp(rs);
  }
  const bool keep = settle_child(rs);
  rs.cv.notify_all();
  const bool opening = rs.state & kOpening;
  l.unlock();
  if (!opening) poll_signal();
  return keep;
}

}  // namespace hcasim::rdmacm::rs

// ---- the exported calls ------------------------------------------------------------------------

using namespace hcasim::rdmacm;
using namespace hcasim::rdmacm::rs;

HCASIM_RDMACM_EXPORT int rsocket(int domain, int type, int protocol) {
  const int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
  type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (domain != AF_INET && domain != AF_INET6 && domain != AF_IB) return err(EAFNOSUPPORT);
  if (type != SOCK_STREAM && type != SOCK_DGRAM) return err(ESOCKTNOSUPPORT);
  if ((type == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
      (type == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
    return err(EPROTONOSUPPORT);
  // Datagram rsockets are not provided: rdma-core 44's cannot run on RoCE (their local UD
  // destination's address handle has no GRH, which a RoCE port refuses), and they resolve
  // peers over a UDP socket that the simulated network does not carry.
  if (type == SOCK_DGRAM) return err(EOPNOTSUPP);
  if (ucma_init()) return -1;
  RSocket* rs = alloc(nullptr);
  if (!rs) return err(ENOMEM);
  if (flags & SOCK_NONBLOCK) rs->fd_flags = O_NONBLOCK;
  if (rdma_create_id(nullptr, &rs->cm_id, rs, RDMA_PS_TCP)) {
    const int e = errno;
    delete rs;
    return err(e);
  }
  rs->cm_id->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
  if ((rs->fd_flags & O_NONBLOCK) && set_nonblock(rs->cm_id->channel->fd, true)) {
    const int e = errno;
    free_socket(rs);
    return err(e);
  }
  if (insert(rs, rs->cm_id->channel->fd) < 0) {
    const int e = errno;
    free_socket(rs);
    return err(e);
  }
  return rs->index;
}

namespace {

/// EINVAL unless @p addr is a whole address of the socket's kind (AF_INET, AF_INET6, AF_IB).
int check_addr(const sockaddr* addr, socklen_t len) {
  if (!addr) return err(EFAULT);
  if (len < sizeof(sa_family_t)) return err(EINVAL);
  switch (addr->sa_family) {
    case AF_INET: return len < sizeof(sockaddr_in) ? err(EINVAL) : 0;
    case AF_INET6: return len < sizeof(sockaddr_in6) ? err(EINVAL) : 0;
    case AF_IB: return len < sizeof(sockaddr_ib) ? err(EINVAL) : 0;
    default: return err(EAFNOSUPPORT);
  }
}

int listen_stream(RSocket& rs, int backlog) {
  Lock l(rs.mu);
  if (rs.state == kListening) return 0;
  if (rs.state != kInit && rs.state != kBound) return err(EINVAL);
  if (rdma_listen(rs.cm_id, backlog)) return -1;  // the exported symbol: shims see it
  rs.accept_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  if (rs.accept_fd < 0 || set_nonblock(rs.cm_id->channel->fd, true)) return -1;
  rs.state = kListening;
  l.unlock();
  return svc_watch(&rs);
}

}  // namespace

HCASIM_RDMACM_EXPORT int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  if (check_addr(addr, addrlen)) return -1;
  Lock l(rs->mu);
  if (rs->state != kInit) return err(EINVAL);
  if (rdma_bind_addr(rs->cm_id, const_cast<sockaddr*>(addr))) return -1;
  rs->state = kBound;
  return 0;
}

HCASIM_RDMACM_EXPORT int rlisten(int socket, int backlog) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  return listen_stream(*rs, backlog);
}

HCASIM_RDMACM_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  RSocket* ls = lookup(socket);
  if (!ls) return -1;
  Lock l(ls->mu);
  if (ls->state != kListening) return err(EINVAL);
  while (ls->accept_queue.empty()) {
    if (ls->fd_flags & O_NONBLOCK) return err(EAGAIN);
    ls->cv.wait(l);
  }
  RSocket* rs = ls->accept_queue.front();
  ls->accept_queue.pop_front();
  uint64_t one;
  if (read(ls->accept_fd, &one, sizeof one) < 0) { /* the count follows the queue */
  }
  l.unlock();
  if (insert(rs, rs->cm_id->channel->fd) < 0) {
    const int e = errno;
    svc_forget(rs);
    free_socket(rs);
    return err(e);
  }
  if (addr && addrlen) rgetpeername(rs->index, addr, addrlen);
  return rs->index;
}

HCASIM_RDMACM_EXPORT int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  if (check_addr(addr, addrlen)) return -1;
  Lock l(rs->mu);
  if (rs->state & kConnected) return err(EISCONN);
  if (rs->state == kListening) return err(EISCONN);
  if (rs->state & kOpening) return err(EALREADY);
  if (rs->state != kInit && rs->state != kBound) return err(ENOTCONN);  // a failed or closed one
  std::memcpy(&rs->cm_id->route.addr.dst_addr, addr, std::min<size_t>(addrlen, sizeof(sockaddr_storage)));
  const bool nonblock = rs->fd_flags & O_NONBLOCK;
  if (set_nonblock(rs->cm_id->channel->fd, nonblock)) return -1;
  if (!do_connect(*rs, l)) return 0;
  if (errno != EINPROGRESS) {
    rs->err = 0;  // reported here, so not pending (SO_ERROR)
    return -1;
  }
  l.unlock();
  svc_watch(rs);  // the service reads its next CM events and finishes the connection
  return err(EINPROGRESS);
}
