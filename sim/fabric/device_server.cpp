// SPDX-License-Identifier: Apache-2.0
#include "device_server.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "client_reads.h"
#include "client_writes.h"
#include "dma_arena.h"
#include "doorbell_ring.h"
#include "engine.h"
#include "thread_watch.h"

namespace hcasim::fabric {

namespace {
volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }
/// A waiter is never held longer than this for another connection to go quiet.
constexpr uint64_t kMaxHoldNs = 10'000'000;
/// How often a quiet but runnable thread is looked at again (thread_watch.h).
constexpr uint64_t kHeldRecheckNs = 50'000;
/// A wait that sees nothing keeps running quantum after quantum for up to this much wall time
/// before the program gets control back (to check its own deadlines): a round trip per
/// 100 us quantum would make a retry timeout of 0.5 s simulated cost thousands of them.
constexpr uint64_t kWaitWallBudgetNs = 2'000'000;
/// Realtime: a wait that sees nothing returns after this much wall time (the program polls on).
constexpr uint64_t kRealtimeWaitNs = 100'000;
/// A host that shares no DMA arena (or no host at all).
const DmaWindow kNoArena;
}  // namespace

struct DeviceServer::Host {
  int index = 0;
  bool alive = false;
  pid_t pid = 0;
  uint64_t token = 0;
  uint64_t visible = 0;        ///< device writes into this host's memory + its interrupts
  bool watched = true;         ///< lockstep: a thread of it may look at its memory (mark_watched)
  int irq_fd = -1;             ///< the host's interrupt line (an eventfd it passed)
  bool left_reported = false;  ///< LEAVING came: what it left in flight is reported
  DmaWindow arena;             ///< the driver memory it shares (HELLO's memfd), if any
  ClientWrites gathered;       ///< payload writes not yet written into the process (client_writes.h)
  ClientReads reads;           ///< payloads read ahead from the process (client_reads.h)
};

struct DeviceServer::Conn {
  int fd = -1;
  int host = -1;      ///< -1 until HELLO/ATTACH
  bool life = false;  ///< the host's HELLO connection: its end is the process's end
  bool waiting = false;
  uint64_t wait_start_ps = 0, wait_visible = 0, wait_since_ns = 0;
  uint64_t wait_wall_ns = 0;  ///< when the WAIT arrived (realtime)
  uint64_t last_msg_ns = 0;
  pid_t pid = 0;       ///< the peer process (SO_PEERCRED), for the log
  int32_t tid = 0;     ///< the program thread it serves (ATTACH's tid), as ring entries name it
  ThreadWatch thread;  ///< the program thread it serves (ATTACH's tid), when /proc shows it
  /// Lockstep: what the device found about its thread since its last message (held_until).
  struct Silence {
    uint64_t msg_ns = 0;         ///< the last_msg_ns this silence follows
    bool have_cpu = false;       ///< cpu_ns is set: the thread was first found runnable
    uint64_t cpu_ns = 0;         ///< its CPU time then
    uint64_t look_again_ns = 0;  ///< the verdict below stands until then (the /proc reads cost system calls)
    bool quiet = false;
    bool asleep = false;  ///< quiet because the thread was found asleep (or gone)
  } silence;
  std::string failed;     ///< why it is to be disconnected (a reply could not be sent)
  bool orphaned = false;  ///< its host is gone (life line closed): closed without a word
};

/**
 * @brief The device's view of one client process's memory: DMA by address, across processes.
 *
 * A process that is being killed loses its memory before its sockets close. A DMA that finds
 * the memory gone (ESRCH) takes the HCA's port down at once, so the access failure never
 * turns into a NAK on the wire: peers see silence and retry, as they would when a real host's
 * kernel tears down a dead process's QPs. The function reset that follows brings it back up.
 */
class DeviceServer::RemoteMemory : public model::HostMemory {
 public:
  pid_t pid = 0;
  uint64_t* visible = nullptr;
  const bool* watched_by = nullptr;  ///< the host's Host::watched
  model::Hca* hca = nullptr;
  const DmaWindow* arena = &kNoArena;  ///< the host's shared DMA arena (dma_arena.h)
  ClientWrites* gathered = nullptr;    ///< the host's payload writes not yet written out
  ClientReads* reads = nullptr;        ///< the host's payloads read ahead (client_reads.h)
  bool read_ahead_on = true;           ///< DeviceOptions::read_ahead
  uint64_t shared = 0, vm_calls = 0;   ///< accesses through the arena / by process_vm_readv (and writev)
  uint64_t read_ahead = 0;             ///< payload reads served from what a process_vm_readv read ahead
  bool read(const uint8_t* hva, void* dst, uint64_t len, model::ReadFor why) override {
    if (!pid) return gone();
    const uint64_t at = uint64_t(uintptr_t(hva));
    if (const uint8_t* p = arena->find(at, len)) {
      std::memcpy(dst, p, len);
      ++shared;
      return true;
    }
    const bool payload = why == model::ReadFor::PostedPayload && read_ahead_on;
    if (payload && reads->find(at, dst, len)) {
      ++read_ahead;
      return true;
    }
    const uint64_t reach = payload ? reads->reach(len) : len;
    if (gathered->overlaps(at, reach) && !write_out()) return false;
    ++vm_calls;
    if (payload) return reads->fill(pid, at, dst, len) || (errno == ESRCH ? gone() : false);
    iovec local{dst, len}, remote{const_cast<uint8_t*>(hva), len};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == ssize_t(len)) return true;
    return errno == ESRCH ? gone() : false;
  }
  bool write(uint8_t* hva, const void* src, uint64_t len) override {
    if (!pid) return gone();
    reads->update(uint64_t(uintptr_t(hva)), src, len);
    if (uint8_t* p = arena->find(uint64_t(uintptr_t(hva)), len)) {
      // A CQE or EQE: the payloads it reports are in memory first.
      if (!write_out()) return false;
      std::memcpy(p, src, len);
      ++shared;
    } else {
      gathered->add(uint64_t(uintptr_t(hva)), src, len);
      if (gathered->full() && !write_out()) return false;
    }
    publish_progress(*arena, ++*visible, sim::Engine::instance().realtime());
    return true;
  }
  bool watched() const override { return !watched_by || *watched_by; }
  /** @brief Write the host's gathered payloads out now; false (port down) if the process is gone. */
  bool write_out() {
    if (gathered->empty()) return true;
    return gathered->flush(pid) || gone();
  }

 private:
  bool gone() {
    if (hca) hca->port().set_up(false);
    return false;
  }
};

struct DeviceServer::Slot {
  RemoteMemory mem;
  uint64_t irqs = 0;  ///< interrupts this HCA raised (the host's ISR checks the ones that moved)
};

/** @brief One received message, checked and decoded (request.h), as the handlers see it. */
struct DeviceServer::Msg {
  const Request& r;
  int* fds;  ///< descriptors that came with it (HELLO only)
  uint32_t nfds;
};

DeviceServer::DeviceServer(sim::World& world, const DeviceOptions& opt)
    : world_(world),
      opt_(opt),
      buf_(kMaxMessage),
      next_token_(sim::Engine::mono_ns() * 0x9e3779b97f4a7c15ull ^ uint64_t(getpid())) {
  for (size_t i = 0; i < world_.size(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
    world_.hca(i).set_host_memory(&slots_.back()->mem);
  }
  for (uint32_t i = 0; i < opt_.hosts; ++i) {
    hosts_.push_back(std::make_unique<Host>());
    hosts_.back()->index = int(i);
  }
  world_.set_stats_tail([this] { return stats_tail_text(); });
}

DeviceServer::~DeviceServer() {
  world_.set_stats_tail(nullptr);
  for (auto& c : conns_) ::close(c->fd);
  for (auto& h : hosts_) {
    if (h->irq_fd >= 0) ::close(h->irq_fd);
    unmap_client_arena(h->arena);
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(opt_.socket.c_str());
  }
}

bool DeviceServer::listen(std::string& err) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (opt_.socket.size() >= sizeof a.sun_path) {
    err = "socket path too long (" + std::to_string(opt_.socket.size()) + " bytes, at most " +
          std::to_string(sizeof a.sun_path - 1) + "): " + opt_.socket;
    return false;
  }
  std::strcpy(a.sun_path, opt_.socket.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    // A socket file nobody listens on is left over from a fabric that died: take it over.
    const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    const bool live = e == EADDRINUSE && connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(probe);
    if (e != EADDRINUSE || live || ::unlink(opt_.socket.c_str()) != 0 ||
        bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      err = live ? "a fabric is already running on " + opt_.socket
                 : "bind " + opt_.socket + ": " + std::strerror(e);
      ::close(listen_fd_);
      listen_fd_ = -1;
      return false;
    }
  }
  if (::listen(listen_fd_, 64) != 0) {
    err = std::string("listen: ") + std::strerror(errno);
    return false;
  }
  if (opt_.ready_fd >= 0) {
    if (write(opt_.ready_fd, "ready\n", 6) < 0) { /* the starter went away: serve anyway */
    }
    ::close(opt_.ready_fd);
    opt_.ready_fd = -1;
  }
  return true;
}

void DeviceServer::accept_conn() {
  // Non-blocking: the device never waits for a client to read (reply()).
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  int sz = int(kMaxMessage + 4096);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  ucred cred{};
  socklen_t cl = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0) c->pid = cred.pid;
  c->last_msg_ns = sim::Engine::mono_ns();
  conns_.push_back(std::move(c));
}

DeviceServer::Host* DeviceServer::pick_host(const HelloMsg& m, int& err, std::string& why) {
  if (m.want_host >= 0) {
    if (uint32_t(m.want_host) >= hosts_.size()) {
      err = EINVAL;
      why = "HCASIM_HOST=" + std::to_string(m.want_host) + ": the fabric has hosts 0.." +
            std::to_string(hosts_.size() - 1);
      return nullptr;
    }
    Host* h = hosts_[size_t(m.want_host)].get();
    if (h->alive) {
      err = EBUSY;
      why = "HCASIM_HOST=" + std::to_string(m.want_host) + " is taken by pid " + std::to_string(h->pid);
      return nullptr;
    }
    return h;
  }
  for (auto& x : hosts_)
    if (!x->alive) return x.get();
  err = EBUSY;
  why = "the fabric is full (" + std::to_string(hosts_.size()) + " hosts in use)";
  return nullptr;
}

template <typename F>
void DeviceServer::for_each_hca(const Host& h, F&& f) {
  for (uint32_t i = 0; i < opt_.hcas_per_host; ++i) {
    const size_t n = size_t(h.index) * opt_.hcas_per_host + i;
    f(i, *slots_[n], world_.hca(n));
  }
}

void DeviceServer::bind_hcas(Host& h, HelloReply& r) {
  std::lock_guard<std::recursive_mutex> g(sim::Engine::instance().mutex());
  for_each_hca(h, [&](uint32_t i, Slot& s, model::Hca& hca) {
    s.mem.pid = h.pid;
    s.mem.arena = &h.arena;
    s.mem.visible = &h.visible;
    s.mem.watched_by = &h.watched;
    s.mem.gathered = &h.gathered;
    s.mem.reads = &h.reads;
    s.mem.read_ahead_on = opt_.read_ahead;
    s.mem.hca = &hca;
    hca.port().set_up(true);
    Host* hp = &h;
    Slot* sp = &s;
    hca.set_irq_handler([hp, sp](uint32_t) {
      sp->mem.write_out();  // what the interrupt announces is in memory before it
      ++sp->irqs;
      publish_progress(hp->arena, ++hp->visible, sim::Engine::instance().realtime());
      const uint64_t one = 1;
      if (write(hp->irq_fd, &one, sizeof one) < 0) { /* counter saturated: already pending */
      }
    });
    const model::Tracer& t = hca.tracer();
    r.driver_trace = uint8_t(
        (t.on() && t.wants(model::TraceUnit::Driver, model::TraceKind::Error) ? kDriverTraceErrors : 0) |
        (t.on() && t.wants(model::TraceUnit::Driver, model::TraceKind::Post) ? kDriverTraceOthers : 0));
    std::snprintf(r.names[i], sizeof r.names[i], "%s", hca.identity().name.c_str());
    if (hca.tracer().on())
      hca.tracer().emit(model::TraceUnit::Driver, model::TraceKind::Command, model::kTraceNone,
                        model::TraceFields(), "host %d joins the fabric: pid %d owns %s", h.index, int(h.pid),
                        r.names[i]);
  });
}

void DeviceServer::hello(Conn& c, const HelloMsg& m, int* fds, uint32_t nfds) {
  HelloReply r{};
  auto refuse = [&](int e, const std::string& why) {
    r.status = e;
    std::snprintf(r.error, sizeof r.error, "%s", why.c_str());
    std::fprintf(stderr, "hcasim-device: HELLO from pid %d refused: %s\n", int(c.pid), why.c_str());
    reply(c, MsgType::Hello, &r, sizeof r);
    for (uint32_t i = 0; i < nfds; ++i) ::close(fds[i]);
  };
  if (m.version != kProtocolVersion)
    return refuse(EPROTO, "protocol version " + std::to_string(m.version) + ", device speaks " +
                              std::to_string(kProtocolVersion) +
                              " (client and hcasim-device from different builds)");
  const uint32_t want_fds = m.arena_len ? 2 : 1;
  if (nfds != want_fds)
    return refuse(EINVAL, "HELLO must pass " +
                              std::string(want_fds == 2 ? "an interrupt eventfd and the DMA arena's memfd"
                                                        : "exactly one interrupt eventfd") +
                              ", got " + std::to_string(nfds) + " descriptor(s)");
  std::string why = check_irq_fd(fds[0]);
  if (!why.empty()) return refuse(EINVAL, why);
  // DMA goes to the process the kernel says is on the other end (SO_PEERCRED), never to the
  // pid the message names: a client reaches no memory but its own.
  if (c.pid <= 0) return refuse(EPERM, "the device cannot tell which process is connected");
  DmaWindow arena;
  if (m.arena_len) {
    why = map_client_arena(fds[1], c.pid, m.arena_hva, m.arena_len, arena);
    ::close(fds[1]);
    nfds = 1;  // refuse() closes what is left
    if (!why.empty()) return refuse(EINVAL, why);
  }
  int err = 0;
  Host* h = pick_host(m, err, why);
  if (!h) {
    unmap_client_arena(arena);
    return refuse(err, why);
  }
  h->arena = arena;
  publish_progress(h->arena, h->visible, sim::Engine::instance().realtime());
  if (DoorbellRing* ring = ring_in(h->arena)) ring_set_on(*ring, true);
  h->alive = true;
  h->pid = c.pid;
  h->token = (next_token_ += 0x9e3779b97f4a7c15ull);
  h->irq_fd = fds[0];
  c.host = h->index;
  c.life = true;
  r.host = h->index;
  r.token = h->token;
  r.n_hcas = opt_.hcas_per_host;
  bind_hcas(*h, r);
  reply(c, MsgType::Hello, &r, sizeof r);
}

std::string DeviceServer::check_irq_fd(int fd) {
  // Interrupts are written from the device's loop: a pipe or socket nobody reads would block
  // it, a file would grow. Only an eventfd, and that one non-blocking.
  const std::string what = fd_target(fd);
  if (what != "anon_inode:[eventfd]")
    return "HELLO's interrupt descriptor is not an eventfd (it is " + what + ")";
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return "HELLO's interrupt eventfd cannot be made non-blocking";
  return "";
}

void DeviceServer::host_gone(Host& h) {
  std::lock_guard<std::recursive_mutex> g(sim::Engine::instance().mutex());
  // From here the device reaches the process only by address, as before it shared anything: a
  // killed process's memory is gone, and the reads below must find it so.
  unmap_client_arena(h.arena);  // and with it the doorbell ring
  h.gathered.clear();
  h.reads.forget();
  // Without a LEAVING first (killed), the memory is gone: unsent and unacknowledged messages
  // are still reported, CQEs never polled cannot be counted.
  if (!h.left_reported) report_left_behind(h);
  for_each_hca(h, [&](uint32_t, Slot& s, model::Hca& hca) {
    if (hca.tracer().on())
      hca.tracer().emit(model::TraceUnit::Driver, model::TraceKind::Command, model::kTraceNone,
                        model::TraceFields(), "host %d left the fabric (pid %d ended): reset of %s", h.index,
                        int(h.pid), hca.identity().name.c_str());
    s.mem.pid = 0;
    hca.function_reset();
  });
  if (h.irq_fd >= 0) ::close(h.irq_fd);
  h.irq_fd = -1;
  h.alive = false;
  h.left_reported = false;
  h.pid = 0;
  h.token = 0;
  // The process's other connections (its threads') end with it: a connection that outlived its
  // host could otherwise reach the HCAs of the next process to take the slot.
  for (auto& c : conns_)
    if (c->host == h.index && !c->life) c->orphaned = true;
}

void DeviceServer::close_conn(size_t i) {
  Conn& c = *conns_[i];
  ::close(c.fd);
  const int host = c.life ? c.host : -1;
  c.host = -1;
  if (host >= 0) host_gone(*hosts_[size_t(host)]);
  conns_.erase(conns_.begin() + ptrdiff_t(i));
}

void DeviceServer::sweep() {
  for (size_t i = conns_.size(); i-- > 0;) {
    Conn& c = *conns_[i];
    if (!c.failed.empty()) bad(c, c.failed);
    if (!c.failed.empty() || c.orphaned) close_conn(i);
  }
}

void DeviceServer::write_out_all() {
  for (auto& h : hosts_) {
    if (h->gathered.empty()) continue;
    if (!h->alive || !h->gathered.flush(h->pid)) {  // flush() forgets them either way
      h->gathered.clear();
      for_each_hca(*h, [](uint32_t, Slot&, model::Hca& hca) { hca.port().set_up(false); });
    }
  }
}

void DeviceServer::reply(Conn& c, MsgType type, const void* a, size_t alen, const void* b, size_t blen) {
  write_out_all();  // a reply may tell the program to look: what it would look at is there
  if (!c.failed.empty() || send_msg(c.fd, type, a, alen, b, blen)) return;
  if (errno != EAGAIN && errno != EWOULDBLOCK) {
    c.failed = std::string("its connection failed: ") + std::strerror(errno);
    return;
  }
  // A client waits for each reply before its next request, so at most one is ever unread.
  int unread = 0, cap = 0;
  socklen_t l = sizeof cap;
  ioctl(c.fd, SIOCOUTQ, &unread);
  getsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &cap, &l);
  c.failed = "it does not read its replies (" + std::to_string(unread) + " bytes unread fill the " +
             std::to_string(cap) + "-byte send buffer; " + type_name(type) + " not sent)";
}

bool DeviceServer::drain(Conn& c) {
  if (c.orphaned) return false;
  for (;;) {
    MsgHeader h{};
    int fds[kMaxHcasPerHost];
    uint32_t nfds = 0;
    const ssize_t n = recv_msg(c.fd, h, buf_.data(), buf_.size(), MSG_DONTWAIT, fds, kMaxHcasPerHost, &nfds);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      for (uint32_t i = 0; i < nfds; ++i) ::close(fds[i]);
      if (n == 0) return false;  // it closed the connection: nothing to say
      if (errno == EMSGSIZE)
        return bad(c, "a message larger than the protocol's " + std::to_string(kMaxMessage) + " bytes");
      if (errno == EPROTO)
        return bad(c, "a malformed message (shorter than a header, or its header's length is not its size)");
      return bad(c, std::string("its connection failed: ") + std::strerror(errno));
    }
    c.last_msg_ns = sim::Engine::mono_ns();
    if (!handle(c, h, buf_.data(), fds, nfds)) return false;
    if (!c.failed.empty()) return bad(c, c.failed);
  }
}

bool DeviceServer::bad(const Conn& c, const std::string& why) {
  if (c.host >= 0)
    std::fprintf(stderr, "hcasim-device: host %d (pid %d) disconnected: %s\n", c.host, int(c.pid),
                 why.c_str());
  else
    std::fprintf(stderr, "hcasim-device: a connection of pid %d (no host yet) disconnected: %s\n", int(c.pid),
                 why.c_str());
  return false;
}

model::Hca& DeviceServer::hca_of(int host, uint32_t i) {
  return world_.hca(size_t(host) * opt_.hcas_per_host + i);
}

ConnState DeviceServer::host_state(int host, bool life) const {
  ConnState s;
  s.host = host;
  s.life = life;
  s.n_hcas = opt_.hcas_per_host;
  s.first_hca = host >= 0 ? uint32_t(host) * opt_.hcas_per_host : 0;
  return s;
}

bool DeviceServer::handle(Conn& c, const MsgHeader& h, const uint8_t* p, int* fds, uint32_t nfds) {
  Request r;
  const std::string why = check_request(h, p, nfds, host_state(c.host, c.life), r);
  if (why.empty()) return dispatch(c, Msg{r, fds, nfds});
  for (uint32_t i = 0; i < nfds; ++i) ::close(fds[i]);
  return bad(c, why);
}

bool DeviceServer::dispatch(Conn& c, const Msg& m) {
  // Doorbells the process left in its ring came before this message.
  if (c.host >= 0) take_doorbells(*hosts_[size_t(c.host)]);
  // A new work request reaches the device with a message, after its payload was written: what
  // was read ahead of the process may be older (client_reads.h). A wait or a trace line posts
  // nothing.
  if (c.host >= 0 && m.r.type != MsgType::Wait && m.r.type != MsgType::Trace)
    hosts_[size_t(c.host)]->reads.forget();
  switch (m.r.type) {
    case MsgType::Hello: return on_hello(c, m);
    case MsgType::Attach: return on_attach(c, m);
    case MsgType::Status: return on_status(c);
    case MsgType::Stop: return on_stop(c);
    case MsgType::Control: return on_control(c, m);
    case MsgType::Command: return on_command(c, m);
    case MsgType::Doorbell:
    case MsgType::DoorbellSync:
    case MsgType::DoorbellIrqs: return on_doorbell(c, m);
    case MsgType::Leaving: return on_leaving(c);
    case MsgType::Map:
    case MsgType::Unmap: return on_map(c, m);
    case MsgType::Wait: return on_wait(c, m);
    case MsgType::Trace: return on_trace(c, m);
    case MsgType::Wake: ++wakes_; return true;  // its ring was emptied above
  }
  return bad(c, "unknown message type");  // check_request let none through
}

bool DeviceServer::on_hello(Conn& c, const Msg& m) {
  hello(c, m.r.hello, m.fds, m.nfds);
  return true;
}

bool DeviceServer::on_attach(Conn& c, const Msg& m) {
  const AttachMsg& am = m.r.attach;
  StatusReply r{0};
  if (am.host < 0 || size_t(am.host) >= hosts_.size() || !hosts_[size_t(am.host)]->alive ||
      hosts_[size_t(am.host)]->token != am.token)
    r.status = EPERM;
  else
    c.host = am.host;
  if (r.status == 0 && !watch_thread(c, am.tid)) r.status = ESRCH;
  if (r.status == 0) c.tid = am.tid;
  reply(c, MsgType::Attach, &r, sizeof r);
  if (r.status == EPERM) return bad(c, "ATTACH to host " + std::to_string(am.host) + " without its token");
  if (r.status != 0)
    return bad(c, "ATTACH for thread " + std::to_string(am.tid) + ", which is not a thread of the process");
  auto& e = sim::Engine::instance();
  if (++attached_ == 2 && e.clock_requested() == sim::ClockMode::Auto) {
    e.go_realtime("a second program thread or process uses the fabric");
    for (auto& x : hosts_)  // their empty polls may spin from now on (ArenaProgress)
      if (x->alive) publish_progress(x->arena, x->visible, true);
  }
  return true;
}

bool DeviceServer::on_status(Conn& c) {
  const std::string s = status_text();
  reply(c, MsgType::Status, s.data(), s.size());
  return true;
}

bool DeviceServer::on_leaving(Conn& c) {
  Host& h = *hosts_[size_t(c.host)];
  report_left_behind(h);
  h.left_reported = true;
  StatusReply r{0};
  reply(c, MsgType::Leaving, &r, sizeof r);
  return true;
}

void DeviceServer::report_left_behind(Host& h) {
  std::lock_guard<std::recursive_mutex> g(sim::Engine::instance().mutex());
  for_each_hca(h, [&](uint32_t, Slot&, model::Hca& hca) {
    hca.owner_gone_hazards("process " + std::to_string(h.pid));
  });
}

bool DeviceServer::on_stop(Conn& c) {
  StatusReply r{0};
  reply(c, MsgType::Stop, &r, sizeof r);
  stop_ = true;
  return true;
}

bool DeviceServer::on_control(Conn& c, const Msg& m) {
  ControlMsg cm = m.r.control;
  cm.device[sizeof cm.device - 1] = 0;
  cm.name[sizeof cm.name - 1] = 0;
  ControlReply r{};
  std::string text;
  auto& e = sim::Engine::instance();
  std::lock_guard<std::recursive_mutex> g(e.mutex());
  model::Hca* hca = world_.find(cm.device);
  switch (cm.op) {
    case ControlOp::NowNs:
      e.sync_to_wall();
      r.value = e.now_ps() / 1000;
      break;
    case ControlOp::DropRx:
      if (hca)
        sim::drop_rx(*hca, cm.qpn, cm.psn, cm.count);
      else
        r.rc = -1;
      break;
    case ControlOp::Counter: r.rc = hca && sim::stat_by_name(hca->stats(), cm.name, r.value) ? 0 : -1; break;
    case ControlOp::StatsJson:
      text = world_.stats_json();
      if (text.size() > kMaxMessage - sizeof r - 64) text.resize(kMaxMessage - sizeof r - 64);
      break;
    default: r.rc = -1;
  }
  reply(c, MsgType::Control, &r, sizeof r, text.data(), text.size());
  return true;
}

bool DeviceServer::on_command(Conn& c, const Msg& m) {
  CommandMsg cm = m.r.command;
  model::Hca& hca = hca_of(c.host, cm.hca);
  CommandReply r{};
  auto& e = sim::Engine::instance();
  e.locked([&] {
    e.sync_to_wall();  // realtime: at the wall-clock instant
    hca.execute(cm.mb);
    r.done_ns = e.command_done_ns(hca.command_ps());  // the program waits for it, not this loop
  });
  r.mb = cm.mb;
  reply(c, MsgType::Command, &r, sizeof r);
  return true;
}

void DeviceServer::ring_doorbells(int host, const DoorbellMsg* dms, int n) {
  auto& e = sim::Engine::instance();
  e.locked([&] {
    e.sync_to_wall();  // realtime: at the wall-clock instant
    bool sq = false;
    for (int i = 0; i < n; ++i) {
      hca_of(host, dms[i].hca).mmio_write(dms[i].offset, dms[i].value);
      sq = sq || hw::is_sq_doorbell(dms[i].offset);
    }
    // Realtime: their next few microseconds (packets, ACK, CQE, interrupt) at once, as in-process.
    if (e.realtime() && sq) e.run_ahead(sim::kLeadPs);
  });
}

int DeviceServer::take_doorbells(Host& h) {
  DoorbellRing* ring = ring_in(h.arena);
  if (!ring) return 0;
  RingDoorbell e[kDoorbellRingSlots];
  const int n = ring_take(*ring, e);
  if (n < 0)
    std::fprintf(stderr,
                 "hcasim-device: host %d (pid %d): its doorbell ring's head is more than %u entries ahead of "
                 "the device (the process wrote over it); its doorbells there are dropped\n",
                 h.index, int(h.pid), kDoorbellRingSlots);
  if (n <= 0) return 0;
  h.reads.forget();  // they announce new work requests (see dispatch)
  ring_doorbells_ += uint64_t(n);
  heard_from(h, e, n);
  const ConnState as = host_state(h.index, false);
  DoorbellMsg ok[kDoorbellRingSlots];  // the accepted ones, in order
  int n_ok = 0;
  for (int i = 0; i < n; ++i) {
    // Checked as the same doorbell sent as a message would be (request.h).
    Request r;
    const MsgHeader mh{MsgType::Doorbell, uint32_t(sizeof e[i].doorbell)};
    const std::string why = check_request(mh, reinterpret_cast<const uint8_t*>(&e[i].doorbell), 0, as, r);
    if (why.empty())
      ok[n_ok++] = r.doorbell;
    else
      std::fprintf(stderr, "hcasim-device: host %d (pid %d): doorbell ring entry refused: %s\n", h.index,
                   int(h.pid), why.c_str());
  }
  // Found together, rung together: at one instant, one run ahead (each its own would cost a
  // kernel start per event it runs, per doorbell).
  ring_doorbells(h.index, ok, n_ok);
  return n;
}

void DeviceServer::heard_from(const Host& h, const RingDoorbell* e, int n) {
  const uint64_t now = sim::Engine::mono_ns();
  for (auto& c : conns_) {
    if (c->host != h.index || c->life || c->tid <= 0) continue;
    for (int i = 0; i < n; ++i)
      if (e[i].tid == c->tid)
        c->last_msg_ns = std::max(c->last_msg_ns, ring_written_ns(e[i].written_ns, now));
  }
}

int DeviceServer::take_all_doorbells() {
  int n = 0;
  for (auto& h : hosts_)
    if (h->alive) n += take_doorbells(*h);
  return n;
}

bool DeviceServer::doorbells_before_sleep(bool looks_again) {
  bool waiting = false;
  for (auto& h : hosts_)
    if (DoorbellRing* ring = h->alive ? ring_in(h->arena) : nullptr; ring && ring_sleep(*ring, looks_again))
      waiting = true;
  return waiting;
}

void DeviceServer::awake() {
  for (auto& h : hosts_)
    if (DoorbellRing* ring = ring_in(h->arena)) ring_awake(*ring);
}

bool DeviceServer::on_doorbell(Conn& c, const Msg& m) {
  ++message_doorbells_;
  ring_doorbells(c.host, &m.r.doorbell, 1);
  if (m.r.type == MsgType::DoorbellSync) {
    StatusReply r{0};
    reply(c, m.r.type, &r, sizeof r);
  } else if (m.r.type == MsgType::DoorbellIrqs) {
    send_irqs(c, MsgType::DoorbellIrqs, true);
  }
  return true;
}

namespace {
/**
 * Whether every page of [hva, hva+len) is readable in process @p pid: what pinning it for DMA
 * needs on a real host (VFIO fails with EFAULT otherwise). One byte per page, read in batches.
 */
bool client_has(pid_t pid, uint64_t hva, uint64_t len) {
  constexpr uint64_t kPage = 4096;
  constexpr size_t kBatch = 1024;  // IOV_MAX
  uint8_t sink[kBatch];
  iovec local[kBatch], remote[kBatch];
  for (uint64_t page = hva & ~(kPage - 1); page < hva + len;) {
    size_t n = 0;
    for (; n < kBatch && page < hva + len; ++n, page += kPage) {
      local[n] = {&sink[n], 1};
      remote[n] = {reinterpret_cast<void*>(uintptr_t(std::max(page, hva))), 1};
    }
    if (process_vm_readv(pid, local, n, remote, n, 0) != ssize_t(n)) return false;
  }
  return true;
}
}  // namespace

bool DeviceServer::on_map(Conn& c, const Msg& m) {
  const MapMsg& mm = m.r.map;
  model::Hca& hca = hca_of(c.host, mm.hca);
  StatusReply r{0};
  if (m.r.type == MsgType::Map && !client_has(hosts_[size_t(c.host)]->pid, mm.hva, mm.len)) {
    std::fprintf(stderr,
                 "hcasim-device: host %d (pid %d): MAP of 0x%" PRIx64 " bytes at address 0x%" PRIx64
                 " refused (EFAULT): not all of it is mapped readable in the process\n",
                 c.host, int(c.pid), mm.len, mm.hva);
    r.status = EFAULT;
  } else {
    std::lock_guard<std::recursive_mutex> g(sim::Engine::instance().mutex());
    if (m.r.type == MsgType::Map)
      r.status = hca.iommu_map(mm.iova, reinterpret_cast<void*>(uintptr_t(mm.hva)), mm.len) ? 0 : EINVAL;
    else
      r.status = hca.iommu_unmap(mm.iova) ? 0 : EINVAL;
  }
  reply(c, m.r.type, &r, sizeof r);
  return true;
}

bool DeviceServer::on_wait(Conn& c, const Msg& m) {
  c.waiting = true;
  c.wait_start_ps = sim::Engine::instance().now_ps();
  c.wait_visible = m.r.wait.seen;  // what landed since the program looked is answered at once
  c.wait_since_ns = c.last_msg_ns;
  c.wait_wall_ns = sim::Engine::mono_ns();
  return true;
}

bool DeviceServer::on_trace(Conn& c, const Msg& m) {
  const TraceMsg& tm = m.r.trace;
  model::Hca& hca = hca_of(c.host, tm.hca);
  std::lock_guard<std::recursive_mutex> g(sim::Engine::instance().mutex());
  auto& t = hca.tracer();
  if (!t.on()) return true;
  sim::Engine::instance().sync_to_wall();  // realtime: at the wall-clock instant
  t.record(model::TraceUnit::Driver, tm.kind, tm.qpn, tm.has_wr != 0, tm.wr_id, tm.fields,
           std::string(m.r.text, m.r.text_len));
  return true;
}

void DeviceServer::send_irqs(Conn& c, MsgType type, bool progress) {
  WaitReply r{};
  r.progress = progress ? 1 : 0;
  for (uint32_t i = 0; i < opt_.hcas_per_host; ++i)
    r.irqs[i] = slots_[size_t(c.host) * opt_.hcas_per_host + i]->irqs;
  r.visible = hosts_[size_t(c.host)]->visible;
  reply(c, type, &r, sizeof r);
}

void DeviceServer::reply_wait(Conn& c, bool progress) {
  ++(progress ? waits_news_ : waits_none_);
  c.waiting = false;
  c.last_msg_ns = sim::Engine::mono_ns();  // it is about to act on what it sees: let it, before time moves on
  send_irqs(c, MsgType::Wait, progress);
}

int64_t DeviceServer::realtime_progress() {
  const uint64_t due_ns = sim::Engine::instance().run_due(sim::kRealtimeSlicePs);
  const uint64_t wall = sim::Engine::mono_ns();
  uint64_t next_ns = std::min<uint64_t>(due_ns, 10'000'000);
  for (auto& c : conns_) {
    if (!c->waiting) continue;
    const bool seen = hosts_[size_t(c->host)]->visible != c->wait_visible;
    if (seen || wall - c->wait_wall_ns >= kRealtimeWaitNs)
      reply_wait(*c, seen);
    else
      next_ns = std::min(next_ns, c->wait_wall_ns + kRealtimeWaitNs - wall);
  }
  return int64_t(next_ns);
}

bool DeviceServer::watch_thread(Conn& c, int32_t tid) {
  if (tid <= 0) return true;  // not given: quiet by wall time alone
  bool foreign = false;
  const std::string why = c.thread.open(c.pid, pid_t(tid), foreign);
  if (why.empty() || foreign) return why.empty();
  if (!said_no_watch_) {
    said_no_watch_ = true;
    std::fprintf(stderr,
                 "hcasim-device: cannot watch program threads (%s): lockstep quiet periods go by wall time\n",
                 why.c_str());
  }
  return true;
}

namespace {
/** @brief Whether a client has sent on @p fd more than the device has read yet. */
bool has_unread(int fd) {
  int n = 0;
  return ioctl(fd, SIOCINQ, &n) == 0 && n > 0;
}
}  // namespace

uint64_t DeviceServer::held_until(Conn& c, uint64_t now, uint64_t quiet) {
  if (now - c.last_msg_ns < quiet) return c.last_msg_ns + quiet;
  if (!c.thread.watching()) return 0;
  Conn::Silence& si = c.silence;
  if (si.msg_ns != c.last_msg_ns)
    si = Conn::Silence{c.last_msg_ns};
  else if (now < si.look_again_ns)
    return si.quiet ? 0 : si.look_again_ns;
  si.look_again_ns = now + std::min<uint64_t>(quiet, kHeldRecheckNs);
  si.quiet = thread_quiet(c, quiet);
  return si.quiet ? 0 : si.look_again_ns;
}

bool DeviceServer::thread_quiet(Conn& c, uint64_t quiet) {
  const auto s = c.thread.sample();
  Conn::Silence& si = c.silence;
  si.asleep = !s || !s->runnable;
  if (!s) return true;  // the thread has ended
  // Asleep, but perhaps for the answer to a message still queued here: read it first.
  if (!s->runnable) return !has_unread(c.fd);
  if (!si.have_cpu) {
    si.have_cpu = true;
    si.cpu_ns = s->cpu_ns;
    return false;
  }
  // Runnable: about to post, or waiting for a CPU the host gave to someone else, unless it has
  // run that long on a CPU without a word (computing).
  return s->cpu_ns - si.cpu_ns >= quiet;
}

bool DeviceServer::may_look(const Conn& c) {
  const Conn::Silence& si = c.silence;
  const bool asleep = c.thread.watching() && si.msg_ns == c.last_msg_ns && si.quiet && si.asleep;
  return c.waiting || !asleep;
}

uint64_t DeviceServer::mark_watched(bool all) {
  for (auto& h : hosts_) h->watched = all;
  if (all) return 0;
  uint64_t until = ~0ull;
  std::vector<bool> known(hosts_.size());
  for (auto& c : conns_) {
    if (c->host < 0 || c->life) continue;
    known[size_t(c->host)] = true;
    if (may_look(*c))
      hosts_[size_t(c->host)]->watched = true;
    else
      until = std::min(until, c->silence.look_again_ns);
  }
  // A process none of whose threads the device knows: any of them may be looking.
  for (size_t i = 0; i < hosts_.size(); ++i)
    if (!known[i]) hosts_[i]->watched = true;
  return until;
}

void DeviceServer::run_step(uint64_t* pace) {
  // Past a write into a sleeping process's memory only while every such verdict stands.
  const uint64_t until = opt_.gather_asleep ? mark_watched(false) : 0;
  sim::Engine::instance().run_until_visible(pace, until);
  mark_watched(true);
}

int64_t DeviceServer::progress() {
  auto& e = sim::Engine::instance();
  if (e.realtime()) return realtime_progress();
  const uint64_t now = sim::Engine::mono_ns();
  const uint64_t quiet = uint64_t(opt_.quiet_us) * 1000;
  bool any_wait = false;
  uint64_t oldest = now, busy_until = 0;
  for (auto& c : conns_) {
    if (c->host < 0 || c->life) continue;
    if (c->waiting) {
      any_wait = true;
      oldest = std::min(oldest, c->wait_since_ns);
    } else if (const uint64_t until = held_until(*c, now, quiet)) {
      busy_until = std::max(busy_until, until);
    }
  }
  // Doorbells left in a ring since this loop began (the thread perhaps found asleep above just
  // after writing them) are rung before time moves, and their threads counted busy: look again.
  if (take_all_doorbells()) return 0;
  const bool pending = e.pending();
  if (any_wait) {
    const bool forced = now - oldest >= kMaxHoldNs;
    if (busy_until && !forced) return int64_t(std::min(busy_until, oldest + kMaxHoldNs) - now);
    if (busy_until) ++forced_moves_;
    if (!pending) {
      for (auto& c : conns_)
        if (c->waiting) reply_wait(*c, false);
      return -1;
    }
    uint64_t pace = 0;
    run_step(&pace);
    const uint64_t t = e.now_ps(), wall = sim::Engine::mono_ns();
    for (auto& c : conns_) {
      if (!c->waiting) continue;
      if (hosts_[size_t(c->host)]->visible != c->wait_visible || wall - c->wait_since_ns >= kWaitWallBudgetNs)
        reply_wait(*c, true);
      else if (t >= c->wait_start_ps + sim::kWaitQuantumPs)
        c->wait_start_ps = t;  // nothing for it yet: another quantum
    }
    return int64_t(std::min<uint64_t>(pace, 1'000'000));
  }
  if (!pending) return -1;
  // Nobody waits in verbs, yet work is in flight: programs wait elsewhere (poll(2) on a channel
  // fd, sleep). Once everyone has been quiet for the period, let it run.
  if (busy_until) return int64_t(busy_until - now);
  uint64_t pace = 0;
  run_step(&pace);
  return int64_t(std::min<uint64_t>(pace, 1'000'000));
}

std::string DeviceServer::stats_tail_text() {
  char line[200];
  std::snprintf(line, sizeof line,
                "lockstep: %" PRIu64
                " time(s) a wait moved time on past a program thread not yet quiet (held %" PRIu64 " ms)\n",
                forced_moves_, kMaxHoldNs / 1'000'000);
  std::string s = sim::Engine::instance().realtime() && !forced_moves_ ? "" : line;
  std::snprintf(line, sizeof line,
                "fabric waits: %" PRIu64 " answered with something new for the program, %" PRIu64
                " without\n",
                waits_news_, waits_none_);
  s += line;
  std::snprintf(line, sizeof line,
                "fabric doorbells: %" PRIu64 " by message, %" PRIu64
                " through the arena's doorbell ring (%" PRIu64 " WAKE messages)\n",
                message_doorbells_, ring_doorbells_, wakes_);
  s += line;
  s += "fabric DMA (accesses to client memory):\n";
  for (size_t i = 0; i < slots_.size(); ++i) {
    const RemoteMemory& m = slots_[i]->mem;
    if (!m.shared && !m.vm_calls && !m.read_ahead) continue;
    std::snprintf(line, sizeof line,
                  "  %-16s %" PRIu64 " through shared memory, %" PRIu64
                  " by process_vm_readv/writev, %" PRIu64 " payload reads from copies read ahead\n",
                  world_.hca(i).identity().name.c_str(), m.shared, m.vm_calls, m.read_ahead);
    s += line;
  }
  for (auto& h : hosts_) {
    if (!h->gathered.writes()) continue;
    std::snprintf(line, sizeof line,
                  "  host %-11d %" PRIu64 " payload writes gathered into %" PRIu64
                  " process_vm_writev calls\n",
                  h->index, h->gathered.writes(), h->gathered.calls());
    s += line;
  }
  return s;
}

std::string DeviceServer::status_text() {
  auto& e = sim::Engine::instance();
  std::lock_guard<std::recursive_mutex> g(e.mutex());
  char line[256];
  size_t used = 0;
  for (auto& h : hosts_) used += h->alive ? 1 : 0;
  std::snprintf(line, sizeof line,
                "fabric %s: pid %d, %zu of %zu hosts in use, %u HCA(s) per host, %.3f us simulated\n",
                opt_.socket.c_str(), int(getpid()), used, hosts_.size(), opt_.hcas_per_host,
                double(e.now_ps()) / 1e6);
  std::string s = line;
  for (auto& h : hosts_) {
    std::string devs;
    for (uint32_t i = 0; i < opt_.hcas_per_host; ++i) {
      const model::HcaIdentity& id = world_.hca(size_t(h->index) * opt_.hcas_per_host + i).identity();
      char b[96];
      std::snprintf(b, sizeof b, " %s(%u.%u.%u.%u)", id.name.c_str(), id.ipv4 >> 24, (id.ipv4 >> 16) & 255,
                    (id.ipv4 >> 8) & 255, id.ipv4 & 255);
      devs += b;
    }
    if (h->alive)
      std::snprintf(line, sizeof line, "  host %d: pid %d:%s\n", h->index, int(h->pid), devs.c_str());
    else
      std::snprintf(line, sizeof line, "  host %d: free:%s\n", h->index, devs.c_str());
    s += line;
  }
  return s;
}

int DeviceServer::run() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_TIMERSLACK, 1UL);  // realtime: wake when the next event is due, not 50 us later
  // Signals are blocked except inside ppoll, so a stop request never slips between the check
  // and the wait.
  sigset_t block, none;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGHUP);
  sigprocmask(SIG_BLOCK, &block, nullptr);
  sigemptyset(&none);
  int64_t timeout_ns = -1;
  std::vector<pollfd> pfds;
  while (!stop_ && !g_signal) {
    pfds.clear();
    pfds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : conns_) pfds.push_back({c->fd, POLLIN, 0});
    write_out_all();  // before the device sleeps, every payload of this step is in memory
    // Asleep from here (clients send WAKE after a doorbell in their ring), unless one waits. In
    // lockstep a finite sleep ends in progress(), which looks at the rings before time moves.
    if (timeout_ns != 0 && doorbells_before_sleep(!sim::Engine::instance().realtime() && timeout_ns > 0))
      timeout_ns = 0;
    timespec ts{}, *tp = nullptr;
    if (timeout_ns >= 0) {
      ts.tv_sec = time_t(timeout_ns / 1'000'000'000);
      ts.tv_nsec = long(timeout_ns % 1'000'000'000);
      tp = &ts;
    }
    const int n = ppoll(pfds.data(), pfds.size(), tp, &none);
    awake();
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "hcasim-device: poll: %s\n", std::strerror(errno));
      return 1;
    }
    take_all_doorbells();
    if (n > 0) {
      // Connections first (a new one is at the end and polled next round).
      for (size_t i = pfds.size() - 1; i >= 1; --i) {
        if (!pfds[i].revents) continue;
        if (!drain(*conns_[i - 1])) close_conn(i - 1);
        if (stop_) break;
      }
      if (pfds[0].revents & POLLIN) accept_conn();
    }
    sweep();
    if (stop_) break;
    timeout_ns = progress();
    sweep();  // a wait's reply that found its client not reading
  }
  // Whoever still waits is told nothing more will come.
  for (auto& c : conns_)
    if (c->waiting) reply_wait(*c, false);
  return 0;
}

}  // namespace hcasim::fabric
