// SPDX-License-Identifier: Apache-2.0
// rpoll and rselect over rsockets and ordinary descriptors together. An rsocket's readiness is
// its protocol state (data queued, credits and a target buffer, a queued connection), so rpoll
// first looks at every socket without blocking (taking completions as it goes), then sleeps in
// poll(2) on what can change it: a connected socket's completion channel (armed first), a
// listener's accept queue, the program's own descriptors, and this thread's wake-up eventfd,
// which the service thread signals when a connection comes up or goes away.
#include <poll.h>
#include <sys/select.h>

#include <algorithm>
#include <vector>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

bool has_qp(const RSocket& rs) { return rs.cm_id && rs.cm_id->qp; }

/// A stream socket's events now (rs_poll_rs), having taken its completions. Caller holds @p l.
short stream_events(RSocket& rs, Lock& l, short events) {
  if ((rs.state & kOpening) && !rs.cm_watched) do_connect(rs, l);  // nobody else drives it
  if ((rs.state & (kConnected | kDisconnected | kError)) && has_qp(rs)) {
    progress(rs, l, true, [](RSocket&) { return true; });
    short rev = 0;
    if ((events & POLLIN) && (have_rdata(rs) || !(rs.state & kReadable))) rev |= POLLIN;
    if ((events & POLLOUT) && can_send(rs)) rev |= POLLOUT;
    // A hang-up once what arrived before it has been read (rdma-core reports it at once, and
    // a program that treats POLLHUP as the end loses the last data: rstream -T a).
    if (rs.state == kDisconnected && !have_rdata(rs)) rev |= POLLHUP;
    if (rs.state & kError) rev |= POLLERR;
    return rev;
  }
  if (rs.state == kListening) return (events & POLLIN) && !rs.accept_queue.empty() ? POLLIN : 0;
  if (rs.state & kOpening) return 0;
  if (rs.state == kConnectError) return short((events & (POLLIN | POLLOUT)) | POLLERR);
  return short((events & POLLOUT) | POLLHUP);  // never connected, as an unconnected TCP socket
}

short events_of(RSocket& rs, short events) {
  Lock l(rs.mu);
  return stream_events(rs, l, events);
}

/// One look at every descriptor, blocking nowhere (rs_poll_check).
int check_all(pollfd* fds, nfds_t nfds) {
  int cnt = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    fds[i].revents = 0;
    if (RSocket* rs = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr)
      fds[i].revents = events_of(*rs, fds[i].events);
    else
      poll(&fds[i], 1, 0);
    if (fds[i].revents) ++cnt;
  }
  return cnt;
}

/// What to sleep on for @p rs, after arming its CQ; -1 for nothing (its changes are signalled).
int arm(RSocket& rs, short events, short& ready) {
  Lock l(rs.mu);
  if (rs.state == kListening) {
    ready = stream_events(rs, l, events);
    return rs.accept_fd;
  }
  if (!has_qp(rs) || !(rs.state & (kConnected | kDisconnected | kError))) return -1;
  if (!rs.cq_armed) {
    ibv_req_notify_cq(rs.cm_id->recv_cq, 0);
    rs.cq_armed = true;
  }
  ready = stream_events(rs, l, events);  // what completed before the arming
  return rs.cm_id->recv_cq_channel->fd;
}

/// Takes the completion event that made @p rs's channel readable (unless a thread waiting in
/// a call takes it), so the channel does not stay readable.
void take_event(RSocket& rs) {
  Lock l(rs.mu);
  if (rs.cq_waiter || !has_qp(rs)) return;
  pollfd p{rs.cm_id->recv_cq_channel->fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  if (!ibv_get_cq_event(rs.cm_id->recv_cq_channel, &cq, &ctx)) {
    ibv_ack_cq_events(cq, 1);
    rs.cq_armed = false;
  }
}

/// Arms everything and builds the sleep set (rs_poll_arm); > 0 when something is ready already.
int prepare(pollfd* fds, nfds_t nfds, std::vector<pollfd>& rfds) {
  for (nfds_t i = 0; i < nfds; ++i) {
    rfds[i] = pollfd{fds[i].fd, fds[i].events, 0};
    RSocket* rs = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
    if (!rs) continue;
    short ready = 0;
    rfds[i] = pollfd{arm(*rs, fds[i].events, ready), POLLIN, 0};
    if (ready) return check_all(fds, nfds);
  }
  return 0;
}

/// Sleeps once (up to @p ms) and looks again; the number of ready descriptors.
int sleep_once(pollfd* fds, nfds_t nfds, std::vector<pollfd>& rfds, int ms) {
  const int wake = poll_sleeper_fd();
  rfds[nfds] = pollfd{wake, POLLIN, 0};
  poll_sleep_begin(wake);
  int ret = prepare(fds, nfds, rfds);  // after registering: a change from now on wakes us
  if (!ret) ret = poll(rfds.data(), nfds + 1, ms);
  poll_sleep_end(wake);
  if (ret < 0) return -1;
  for (nfds_t i = 0; i < nfds; ++i) {
    if (!rfds[i].revents) continue;
    if (RSocket* rs = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr) take_event(*rs);
  }
  return check_all(fds, nfds);
}

}  // namespace

}  // namespace hcasim::rdmacm::rs

using namespace hcasim::rdmacm;
using namespace hcasim::rdmacm::rs;

HCASIM_RDMACM_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (nfds && !fds) return err(EFAULT);
  const uint64_t start = mono_us();
  int ret;
  do {  // a short busy look first (polling_time), as rdma-core
    if ((ret = check_all(fds, nfds)) || !timeout) return ret;
  } while (mono_us() - start <= config().polling_time);
  std::vector<pollfd> rfds(nfds + 1);
  for (;;) {
    int ms = config().wake_up_interval;
    if (timeout >= 0) {
      const int64_t left = int64_t(timeout) - int64_t((mono_us() - start) / 1000);
      if (left <= 0) return 0;
      ms = static_cast<int>(std::min<int64_t>(left, ms));
    }
    if ((ret = sleep_once(fds, nfds, rfds, ms))) return ret;
  }
}

HCASIM_RDMACM_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                                 timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return err(EINVAL);
  if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) return err(EINVAL);
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev) fds.push_back(pollfd{fd, ev, 0});
  }
  const int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int ret = rpoll(fds.data(), fds.size(), ms);
  if (ret < 0) return ret;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  ret = 0;
  auto mark = [&ret](fd_set* set, int fd) {
    FD_SET(fd, set);
    ++ret;
  };
  for (const pollfd& p : fds) {  // as select(2): a hang-up or an error reads as readable
    if (readfds && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) mark(readfds, p.fd);
    if (writefds && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) mark(writefds, p.fd);
    if (exceptfds && (p.revents & POLLPRI)) mark(exceptfds, p.fd);
  }
  return ret;
}
