// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's channels, ids and events: what open, close and the id/event commands do.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ucma.h"

namespace hcasim::drv::cm {

namespace {

int copy_out(uint64_t response, const void* what, size_t len) {
  if (!response) return -EFAULT;
  std::memcpy(reinterpret_cast<void*>(uintptr_t(response)), what, len);
  return 0;
}

}  // namespace

Ucma& Ucma::get() {
  static Ucma* u = new Ucma();  // lives as long as the process, like the kernel's
  return *u;
}

int Ucma::open() {
  Cm::get().start_service();   // the kernel's CM runs whether or not the program calls it
  static std::once_flag once;  // after the service's: runs before it stops
  std::call_once(once, [] { std::atexit([] { Ucma::get().close_all(); }); });
  std::lock_guard<std::recursive_mutex> g(Cm::get().mutex());
  // The count of queued events: readable (POLLIN) exactly while one waits to be read.
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return -errno;
  auto ch = std::make_shared<UcmaChannel>();
  ch->fd = fd;
  channels_[fd] = std::move(ch);
  return fd;
}

int Ucma::close(int fd) {
  std::lock_guard<std::recursive_mutex> g(Cm::get().mutex());
  auto it = channels_.find(fd);
  if (it == channels_.end()) return -EBADF;
  std::vector<UcmaId*> gone;
  for (auto& [h, id] : ids_)
    if (id->ch == it->second.get()) gone.push_back(id.get());
  for (UcmaId* id : gone) forget(*id);
  it->second->closed = true;
  it->second->events.clear();
  ::close(fd);
  channels_.erase(it);
  return 0;
}

void Ucma::close_all() {
  std::recursive_mutex& mu = Cm::get().mutex();
  // A thread that ended holding the CM's lock (exit() from another thread) is not waited for long.
  for (int ms = 0; !mu.try_lock(); ++ms) {
    if (ms == 500) return;
    usleep(1000);
  }
  std::vector<int> fds;
  for (auto& [fd, ch] : channels_) fds.push_back(fd);
  for (int fd : fds) close(fd);
  mu.unlock();
  Cm::get().settle_sends(200);  // the DREQs just sent, and any sent before
}

int Ucma::write(int fd, const void* buf, size_t len) {
  // While a command runs (get_event waits without the CM's lock), the CM's own thread keeps out.
  struct InCall {
    InCall() { Cm::get().program_call(true); }
    ~InCall() { Cm::get().program_call(false); }
  } in_call;
  rdma_ucm_cmd_hdr hdr;
  if (len < sizeof hdr) return -EINVAL;
  std::memcpy(&hdr, buf, sizeof hdr);
  if (len - sizeof hdr < hdr.in) return -EINVAL;
  std::shared_ptr<UcmaChannel> ch;  // alive until the command returns, even if closed meanwhile
  {
    std::lock_guard<std::recursive_mutex> g(Cm::get().mutex());
    auto it = channels_.find(fd);
    if (it == channels_.end()) return -EBADF;
    ch = it->second;
  }
  return dispatch(*ch, hdr.cmd, static_cast<const uint8_t*>(buf) + sizeof hdr, hdr.in);
}

int Ucma::dispatch(UcmaChannel& ch, uint32_t cmd, const void* in, size_t in_len) {
  static const Handler table[] = {
      &Ucma::create_id,     &Ucma::destroy_id,      &Ucma::bind_ip,    &Ucma::resolve_ip,
      &Ucma::resolve_route, &Ucma::query_route,     &Ucma::connect,    &Ucma::listen,
      &Ucma::accept,        &Ucma::reject,          &Ucma::disconnect, &Ucma::init_qp_attr,
      &Ucma::get_event,     nullptr /*get_option*/, &Ucma::set_option, &Ucma::notify,
      &Ucma::join_ip_mcast, &Ucma::leave_mcast,     &Ucma::migrate_id, &Ucma::query,
      &Ucma::bind,          &Ucma::resolve_addr,    &Ucma::join_mcast};
  if (cmd >= sizeof table / sizeof *table) return -EINVAL;
  if (!table[cmd]) return -ENOSYS;  // as the kernel answers a command it has no handler for
  if (cmd == RDMA_USER_CM_CMD_GET_EVENT) return get_event(ch, in, in_len);  // waits without the lock
  std::lock_guard<std::recursive_mutex> g(Cm::get().mutex());
  return (this->*table[cmd])(ch, in, in_len);
}

UcmaId* Ucma::find(uint32_t handle, UcmaChannel* ch) {
  auto it = ids_.find(handle);
  if (it == ids_.end() || (ch && it->second->ch != ch)) return nullptr;
  return it->second.get();
}

int Ucma::create_id(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_create_id>(in, len);
  if (c.ps != RDMA_PS_TCP && c.ps != RDMA_PS_UDP && c.ps != RDMA_PS_IB && c.ps != RDMA_PS_IPOIB)
    return -EINVAL;
  auto id = std::make_unique<UcmaId>();
  id->handle = next_handle_++;
  id->psn = first_psn(id->handle);
  id->uid = c.uid;
  id->ch = &ch;
  id->ps = c.ps;
  id->qp_type = c.qp_type;
  const rdma_ucm_create_id_resp r{id->handle};
  if (int e = copy_out(c.response, &r, sizeof r)) return e;
  ids_[id->handle] = std::move(id);
  return 0;
}

void Ucma::forget(UcmaId& id) {
  Cm& cm = Cm::get();
  for (CmId* l : id.cm_listens) cm.destroy_id(l);
  if (id.cm) cm.destroy_id(id.cm);
  for (auto& [fd, ch] : channels_) {  // its events not yet read are dropped
    for (auto it = ch->events.begin(); it != ch->events.end();) {
      if (it->resp.id != id.handle) {
        ++it;
        continue;
      }
      uint64_t one;
      if (read(ch->fd, &one, sizeof one) < 0) { /* the count follows the queue */
      }
      it = ch->events.erase(it);
    }
  }
  for (auto it = mcs_.begin(); it != mcs_.end();)
    it = it->second.id == id.handle ? mcs_.erase(it) : std::next(it);
  ids_.erase(id.handle);
}

int Ucma::destroy_id(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_destroy_id>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  const rdma_ucm_destroy_id_resp r{id->events_reported};
  forget(*id);
  return copy_out(c.response, &r, sizeof r);
}

int Ucma::migrate_id(UcmaChannel& ch, const void* in, size_t len) {
  // Written to the channel the id moves to; fd names the channel it is on now (ucma_migrate_id).
  const auto c = ucma_command<rdma_ucm_migrate_id>(in, len);
  auto from_it = channels_.find(int(c.fd));
  if (from_it == channels_.end()) return -EBADF;
  UcmaChannel* from = from_it->second.get();
  UcmaId* id = find(c.id, from);
  if (!id) return -EINVAL;
  // Its unread events move with it, in order.
  for (auto it = from->events.begin(); from != &ch && it != from->events.end();) {
    if (it->resp.id != id->handle) {
      ++it;
      continue;
    }
    uint64_t one = 1;
    if (read(from->fd, &one, sizeof one) < 0 || ::write(ch.fd, &one, sizeof one) < 0) { /* counts follow */
    }
    ch.events.push_back(*it);
    it = from->events.erase(it);
  }
  id->ch = &ch;
  const rdma_ucm_migrate_resp r{id->events_reported};
  return copy_out(c.response, &r, sizeof r);
}

UcmaEvent& Ucma::queue_event(UcmaId& id, uint32_t event, int status, uint64_t due_ns) {
  UcmaEvent ev;
  ev.resp.uid = id.uid;
  ev.resp.id = id.handle;
  ev.resp.event = event;
  ev.resp.status = uint32_t(status);
  ev.due_ns = due_ns;
  ev.credit = id.handle;
  id.ch->events.push_back(ev);
  const uint64_t one = 1;
  if (::write(id.ch->fd, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
  }
  return id.ch->events.back();
}

void Ucma::queue(UcmaId& id, uint32_t event, int status, uint64_t due_ns) {
  queue_event(id, event, status, due_ns);
}

int Ucma::get_event(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_get_event>(in, len);
  Cm& cm = Cm::get();
  for (;;) {
    uint64_t next = 0;
    bool closed, nonblock;
    {
      std::lock_guard<std::recursive_mutex> g(cm.mutex());
      // Both read under the lock: close() takes it before it closes the descriptor.
      closed = ch.closed;
      const int flags = closed ? 0 : fcntl(ch.fd, F_GETFL);
      nonblock = flags > 0 && (flags & O_NONBLOCK);
      cm.progress();
      const uint64_t now = cm_now_ns();
      for (auto it = ch.events.begin(); it != ch.events.end(); ++it) {
        if (it->due_ns > now) {
          next = next && next < it->due_ns ? next : it->due_ns;
          continue;
        }
        const UcmaEvent ev = *it;
        ch.events.erase(it);
        uint64_t one;
        if (read(ch.fd, &one, sizeof one) < 0) { /* the count follows the queue */
        }
        // A connection request counts against the listener, as in ucma_get_event.
        if (UcmaId* id = find(ev.credit)) id->events_reported++;
        if (auto mc = mcs_.find(ev.credit); mc != mcs_.end()) mc->second.events_reported++;
        return copy_out(c.response, &ev.resp, sizeof ev.resp);
      }
    }
    if (closed) {  // nothing can come any more; wait on, as the kernel's reader would
      cm.wait(100);
      continue;
    }
    if (nonblock) return -EAGAIN;
    const uint64_t now = cm_now_ns();
    // With only later events queued the channel is readable already: wait for the first of them.
    cm.wait(next ? int((next > now ? next - now : 0) / 1000000) + 1 : 20, next ? -1 : ch.fd);
  }
}

int Ucma::set_option(UcmaChannel& ch, const void* in, size_t len) {
  const auto c = ucma_command<rdma_ucm_set_option>(in, len);
  UcmaId* id = find(c.id, &ch);
  if (!id) return -EINVAL;
  if (c.level != RDMA_OPTION_ID) return -ENOSYS;  // RDMA_OPTION_IB_PATH: no subnet administrator here
  const uint8_t* v = reinterpret_cast<const uint8_t*>(uintptr_t(c.optval));
  if (!v || c.optlen < 1) return -EINVAL;
  switch (c.optname) {
    case RDMA_OPTION_ID_TOS: id->tos = v[0]; return 0;
    case RDMA_OPTION_ID_REUSEADDR: id->reuse_addr = v[0] != 0; return 0;
    case RDMA_OPTION_ID_AFONLY: return 0;
    case RDMA_OPTION_ID_ACK_TIMEOUT: id->ack_timeout = v[0] > 31 ? 31 : v[0]; return 0;
    default: return -ENOSYS;
  }
}

}  // namespace hcasim::drv::cm
