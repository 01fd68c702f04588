// SPDX-License-Identifier: Apache-2.0
#include "client_link.h"

#include "../world/clock.h"
#include "../world/fatal_signals.h"
#include "dma_arena.h"
#include "doorbell_ring.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace hcasim::fabric {
namespace {

class RemoteLink;

/// Set in a child forked by a process that joined a fabric (pthread_atfork): its HCAs are the
/// parent's. A flag rather than a getpid() per message or doorbell, each a system call of about
/// 1 us on a small virtual machine.
std::atomic<bool> g_forked{false};

/** @brief This process as a host of the fabric. Built once, never destroyed (like a driver). */
class FabricClient {
 public:
  static FabricClient& get() {
    static FabricClient* c = new FabricClient;
    return *c;
  }
  bool join();
  std::vector<drv::HcaLink*> links() const;

  /** @brief One request and its reply on this thread's connection. False if the fabric is gone. */
  bool call(MsgType type, const void* a, size_t alen, const void* b, size_t blen, void* reply, size_t rlen,
            std::string* text = nullptr);
  /** @brief A message without a reply. */
  bool post(MsgType type, const void* a, size_t alen, const void* b = nullptr, size_t blen = 0);
  bool wait_progress();
  /**
   * @brief Realtime: watch the arena's progress word for up to this thread's spin budget; true
   * if the device wrote something meanwhile. The budget follows what spinning finds (see .cpp).
   */
  bool spin_for_progress();
  /**
   * @brief Leave doorbell @p m in the arena's ring (doorbell_ring.h), with a WAKE if the device
   * may be asleep until a message. False if it must go as a message (no ring, off, full).
   */
  bool ring_doorbell(const DoorbellMsg& m);
  /** @brief Note the interrupt counts of a reply and run the handlers of the HCAs that fired. */
  void take_irqs(const WaitReply& r);
  int activity_fd() const { return activity_fd_; }
  /** @brief The device wants driver events of @p kind (HelloReply::driver_trace). */
  bool trace_on(trace::TraceKind kind) const {
    return driver_trace_ & (kind == trace::TraceKind::Error ? kDriverTraceErrors : kDriverTraceOthers);
  }
  void set_isr(uint32_t hca, std::function<void(uint32_t)> isr) {
    std::lock_guard<std::mutex> g(isr_mu_);
    isr_[hca] = std::move(isr);
  }
  const std::string& path() const { return path_; }
  /** @brief Driver memory from the arena shared with the device; nullptr if there is none or it is full. */
  uint8_t* arena_alloc(uint64_t bytes) { return arena_.alloc(bytes); }
  /** @brief False if @p p is not the arena's. */
  bool arena_free(uint8_t* p, uint64_t bytes) { return arena_.free(p, bytes); }

 private:
  /** @brief The shared DMA arena unless HCASIM_DMA_ARENA=0, HCASIM_POLL_SPIN and HCASIM_DOORBELL_RING;
   * false (said why) on a bad setting. */
  bool open_arena();
  /** @brief A connection to the device and the buffer its replies land in. */
  struct Conn {
    int fd = -1;
    /// Allocated by the first call() only, and not zeroed: most threads never make one, and a
    /// megabyte zeroed at attach cost the first interrupt's handler a millisecond or more here.
    std::unique_ptr<uint8_t[]> buf;
  };
  /** @brief A thread's own Conn, closed when the thread's thread_local objects are destroyed. */
  struct ThreadConn : Conn {
    ~ThreadConn();
  };
  /** @brief The Conn a message goes on, and the lock it is held with if it is shared. */
  struct Line {
    Conn* c = nullptr;
    std::unique_lock<std::mutex> shared;
  };
  /**
   * @brief This thread's connection (attached on first use); once the thread's thread_local
   * objects are gone (their destructors run before exit()'s handlers and static destructors,
   * which may still call verbs: an rdma_cm id closed at exit, a global object), the process's
   * late connection, one message at a time. c is null if there is none.
   */
  Line line();
  /** @brief Connect and ATTACH as the calling thread; false (lost the fabric) if that fails. */
  bool attach(Conn& c);
  int conn() { return line().c ? 0 : -1; }
  void lost(const char* what);
  void run_isrs(const uint64_t* counts);
  /** @brief Tell the device this process is ending (LEAVING) and wait for its report. */
  void leaving();
  static void on_fatal_signal(int sig);
  void irq_thread();

  std::string path_;
  pid_t pid_ = 0;
  int life_fd_ = -1, irq_fd_ = -1, activity_fd_ = -1;
  int host_ = -1;
  uint64_t token_ = 0;
  uint8_t driver_trace_ = 0;
  std::atomic<bool> gone_{false};
  std::vector<std::unique_ptr<RemoteLink>> links_;
  std::mutex isr_mu_;
  std::function<void(uint32_t)> isr_[kMaxHcasPerHost];
  uint64_t isr_seen_[kMaxHcasPerHost] = {};                 ///< interrupt counts already handled (isr_mu_)
  std::atomic<uint64_t> irq_counts_[kMaxHcasPerHost] = {};  ///< latest counts from the device
  DmaArena arena_;  ///< rings, tables and doorbell records the device reads without a system call
  const ArenaProgress* progress_ = nullptr;  ///< the arena's first page (dma_arena.h), if shared
  DoorbellRing* ring_ = nullptr;             ///< the arena's second page (doorbell_ring.h), if shared
  std::mutex ring_mu_;                       ///< one writer at a time
  std::mutex late_mu_;                       ///< late_ is one message at a time
  Conn late_;                                ///< for threads whose ThreadConn is gone (line())
  bool spin_ = true;                         ///< HCASIM_POLL_SPIN
  bool use_ring_ = true;                     ///< HCASIM_DOORBELL_RING
};

/// Room for this process's rings, buffer tables and doorbell records (reserved; pages are
/// committed as they are used). When it is full, the rest comes from ordinary memory.
constexpr uint64_t kArenaBytes = 256ull << 20;
/// The arena's first pages: the device's progress word (ArenaProgress), then the doorbell ring.
constexpr uint64_t kSharedPagesBytes = kDoorbellRingOffset + sizeof(DoorbellRing);

/** @brief One HCA of this host, reached through the device process. */
class RemoteLink : public drv::HcaLink {
 public:
  RemoteLink(FabricClient& c, uint32_t index, std::string name)
      : c_(c), index_(index), name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  void exec(hw::CmdMailbox& mb) override {
    note_call();
    CommandMsg m{index_, mb};
    CommandReply r{};
    if (!c_.call(MsgType::Command, &m, sizeof m, nullptr, 0, &r, sizeof r)) {
      mb.status = uint8_t(hw::CmdStatus::InternalError);
      return;
    }
    mb = r.mb;
    sim::wait_until_mono_ns(r.done_ns);  // realtime: the firmware's time, of which the round trip is part
  }
  void mmio_write64(uint32_t offset, uint64_t value) override {
    note_call();
    DoorbellMsg m{index_, offset, value};
    if (offset == hw::kUarCqArm) {
      // A CQ arm asks for completions after now. The program polls right after arming; were
      // the store still queued while the device ran on, a CQE could land after that poll but
      // before the arm counts, and the program would sleep through it. Acknowledged, the arm
      // is issued before the poll.
      StatusReply r{};
      c_.call(MsgType::DoorbellSync, &m, sizeof m, nullptr, 0, &r, sizeof r);
      return;
    }
    if (!c_.ring_doorbell(m)) c_.post(MsgType::Doorbell, &m, sizeof m);
  }
  void mmio_write64_irqs(uint32_t offset, uint64_t value) override {
    // Answered after the device ran the doorbell's next microseconds: the interrupts they
    // raised are in the reply, and their handlers run here rather than on the interrupt thread.
    note_call();
    DoorbellMsg m{index_, offset, value};
    WaitReply r{};
    if (c_.call(MsgType::DoorbellIrqs, &m, sizeof m, nullptr, 0, &r, sizeof r)) c_.take_irqs(r);
  }
  bool iommu_map(uint64_t iova, void* hva, uint64_t len) override {
    MapMsg m{index_, 0, iova, uint64_t(uintptr_t(hva)), len};
    StatusReply r{EIO};
    return c_.call(MsgType::Map, &m, sizeof m, nullptr, 0, &r, sizeof r) && r.status == 0;
  }
  void iommu_unmap(uint64_t iova) override {
    MapMsg m{index_, 0, iova, 0, 0};
    StatusReply r{};
    c_.call(MsgType::Unmap, &m, sizeof m, nullptr, 0, &r, sizeof r);
  }
  uint8_t* alloc_dma_pages(uint64_t bytes) override {
    if (uint8_t* p = c_.arena_alloc(bytes)) return p;
    return HcaLink::alloc_dma_pages(bytes);
  }
  void free_dma_pages(uint8_t* p, uint64_t bytes) override {
    if (!c_.arena_free(p, bytes)) HcaLink::free_dma_pages(p, bytes);
  }
  void set_irq_handler(std::function<void(uint32_t)> isr) override { c_.set_isr(index_, std::move(isr)); }
  bool wait_progress() override {
    note_call();
    return c_.wait_progress();
  }
  int activity_fd() override { return c_.activity_fd(); }
  uint64_t activity_stamp() const override { return calls_.load(std::memory_order_relaxed); }
  bool trace_on(trace::TraceKind kind) const override { return c_.trace_on(kind); }
  void trace(trace::TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id, const trace::TraceFields& f,
             const char* text) override {
    TraceMsg m{};
    m.hca = index_;
    m.qpn = qpn;
    m.wr_id = wr_id;
    m.has_wr = has_wr ? 1 : 0;
    m.kind = kind;
    m.fields = f;
    c_.post(MsgType::Trace, &m, sizeof m, text, std::strlen(text));
  }

 private:
  void note_call() { calls_.fetch_add(1, std::memory_order_relaxed); }

  FabricClient& c_;
  uint32_t index_;
  std::string name_;
  std::atomic<uint64_t> calls_{0};  ///< calls into the device so far (activity_stamp())
};

bool FabricClient::join() {
  const char* p = std::getenv("HCASIM_FABRIC");
  path_ = p ? p : "";
  int want = -1;
  if (const char* h = std::getenv("HCASIM_HOST"); h && *h) {
    char* end = nullptr;
    const long v = std::strtol(h, &end, 10);
    if (*end || v < 0 || v > 63) {
      std::fprintf(stderr, "hcasim: HCASIM_HOST=%s: expected a host index from 0 to 63\n", h);
      return false;
    }
    want = int(v);
  }
  life_fd_ = connect_socket(path_);
  if (life_fd_ < 0) {
    std::fprintf(
        stderr,
        "hcasim: cannot reach the fabric at HCASIM_FABRIC=%s: %s (start one with `hcasim fabric start`)\n",
        path_.c_str(), std::strerror(errno));
    return false;
  }
  // The device reads and writes this process's memory by address (process_vm_readv/writev):
  // where Yama restricts that to ancestors, allow it explicitly.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  irq_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  activity_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pid_ = getpid();
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, [] { g_forked.store(true); }); });
  if (!open_arena()) return false;
  HelloMsg m{kProtocolVersion, int32_t(pid_), want, 0, uint64_t(uintptr_t(arena_.base())), arena_.size()};
  const int fds[2] = {irq_fd_, arena_.fd()};
  HelloReply r{};
  MsgHeader h{};
  if (!send_msg(life_fd_, MsgType::Hello, &m, sizeof m, nullptr, 0, fds, arena_.base() ? 2 : 1) ||
      recv_msg(life_fd_, h, &r, sizeof r) <= 0 || h.type != MsgType::Hello || h.len != sizeof r) {
    std::fprintf(stderr, "hcasim: the fabric at %s did not answer HELLO: %s\n", path_.c_str(),
                 std::strerror(errno));
    return false;
  }
  if (r.status != 0) {
    std::fprintf(stderr, "hcasim: the fabric at %s refused this process: %s\n", path_.c_str(), r.error);
    return false;
  }
  host_ = r.host;
  token_ = r.token;
  driver_trace_ = r.driver_trace;
  for (uint32_t i = 0; i < r.n_hcas && i < kMaxHcasPerHost; ++i) {
    r.names[i][sizeof r.names[i] - 1] = 0;
    links_.push_back(std::make_unique<RemoteLink>(*this, i, r.names[i]));
  }
  std::thread([this] { irq_thread(); }).detach();
  // However the process ends, the device hears it first and reports what it leaves in flight
  // while its memory can still be read.
  std::atexit([] { FabricClient::get().leaving(); });
  sim::on_fatal_signals(on_fatal_signal);
  return true;
}

bool FabricClient::open_arena() {
  bool on = true;
  std::string err = dma_arena_setting(on);
  if (err.empty()) err = poll_spin_setting(spin_);
  if (err.empty()) err = doorbell_ring_setting(use_ring_);
  if (!err.empty()) {
    std::fprintf(stderr, "hcasim: %s\n", err.c_str());
    return false;
  }
  if (on && !arena_.create(kArenaBytes)) {
    // Not fatal: the device reaches the same memory by address, only more slowly.
    std::fprintf(stderr, "hcasim: no memory shared with the device (%s); its DMA goes by address\n",
                 std::strerror(errno));
  } else if (on && arena_.alloc(kSharedPagesBytes) == arena_.base()) {
    progress_ = reinterpret_cast<const ArenaProgress*>(arena_.base());
    ring_ = reinterpret_cast<DoorbellRing*>(arena_.base() + kDoorbellRingOffset);
  }
  return true;
}

void FabricClient::leaving() {
  static std::atomic<bool> once{false};
  if (life_fd_ < 0 || g_forked.load() || gone_.load() || once.exchange(true)) return;
  StatusReply r{};
  MsgHeader h{};
  pollfd p{life_fd_, POLLIN, 0};
  // Only system calls (this may run in a signal handler); a device that does not answer within
  // a second is not waited for.
  if (send_msg(life_fd_, MsgType::Leaving, nullptr, 0) && poll(&p, 1, 1000) > 0)
    recv_msg(life_fd_, h, &r, sizeof r);
}

void FabricClient::on_fatal_signal(int sig) {
  std::signal(sig, SIG_DFL);
  get().leaving();
  std::raise(sig);
}

std::vector<drv::HcaLink*> FabricClient::links() const {
  std::vector<drv::HcaLink*> v;
  for (auto& l : links_) v.push_back(l.get());
  return v;
}

void FabricClient::lost(const char* what) {
  if (!gone_.exchange(true))
    std::fprintf(stderr, "hcasim: lost the fabric at %s (%s): the device process is gone\n", path_.c_str(),
                 what);
}

namespace {
/// Trivially destructible, so still readable after the thread's other thread_locals are gone.
thread_local bool t_conn_ended = false;
}  // namespace

FabricClient::ThreadConn::~ThreadConn() {
  if (fd >= 0) ::close(fd);
  t_conn_ended = true;
}

bool FabricClient::attach(Conn& c) {
  const int fd = connect_socket(path_);
  AttachMsg m{host_, token_, int32_t(gettid())};
  StatusReply r{EIO};
  MsgHeader h{};
  if (fd < 0 || !send_msg(fd, MsgType::Attach, &m, sizeof m) || recv_msg(fd, h, &r, sizeof r) <= 0 ||
      r.status != 0) {
    if (fd >= 0) ::close(fd);
    lost("attach");
    return false;
  }
  c.fd = fd;
  return true;
}

FabricClient::Line FabricClient::line() {
  if (gone_.load(std::memory_order_relaxed)) return {};
  if (g_forked.load(std::memory_order_relaxed)) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr, "hcasim: a forked child cannot use its parent's simulated HCAs (pid %d)\n",
                   int(getpid()));
    return {};
  }
  Line l;
  if (t_conn_ended) {
    l.shared = std::unique_lock<std::mutex>(late_mu_);
    l.c = &late_;
  } else {
    thread_local ThreadConn tc;
    l.c = &tc;
  }
  // A forked child's copy never gets here (g_forked).
  if (l.c->fd < 0 && !attach(*l.c)) return {};
  return l;
}

bool FabricClient::post(MsgType type, const void* a, size_t alen, const void* b, size_t blen) {
  Line l = line();
  if (!l.c) return false;
  if (send_msg(l.c->fd, type, a, alen, b, blen)) return true;
  lost("send");
  return false;
}

bool FabricClient::call(MsgType type, const void* a, size_t alen, const void* b, size_t blen, void* reply,
                        size_t rlen, std::string* text) {
  Line l = line();
  if (!l.c) return false;
  if (!send_msg(l.c->fd, type, a, alen, b, blen)) {
    lost("send");
    return false;
  }
  MsgHeader h{};
  if (!l.c->buf) l.c->buf.reset(new uint8_t[kMaxMessage]);
  const uint8_t* buf = l.c->buf.get();
  if (recv_msg(l.c->fd, h, l.c->buf.get(), kMaxMessage) <= 0 || h.type != type || h.len < rlen) {
    lost("receive");
    return false;
  }
  std::memcpy(reply, buf, rlen);
  if (text) text->assign(reinterpret_cast<const char*>(buf) + rlen, h.len - rlen);
  return true;
}

void FabricClient::run_isrs(const uint64_t* counts) {
  // The eventfd is left to the interrupt thread: an interrupt raised after this reply was
  // sent is not in @p counts, and must not be lost.
  std::lock_guard<std::mutex> g(isr_mu_);
  bool ran = false;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (counts[i] == isr_seen_[i] || !isr_[i]) continue;
    isr_seen_[i] = counts[i];
    isr_[i](0);
    ran = true;
  }
  if (ran) {
    const uint64_t one = 1;
    if (write(activity_fd_, &one, sizeof one) < 0) { /* saturated: already readable */
    }
  }
}

namespace {
/// The longest an empty poll watches the progress word before it waits in the device.
constexpr uint64_t kMaxSpinNs = 20'000'000;
/// This thread's spin budget. A spin that finds nothing halves it (a program waiting on a slow
/// peer soon just sleeps in the device); a wait in the device that ended with something new
/// raises it to twice that wait (at most kMaxSpinNs): spinning that long would have seen it
/// sooner. A realtime wait that sees nothing for 100 us ends without, so only a program whose
/// device keeps producing (a stream) watches long; how long follows how fast this machine and
/// build run the device, not a fixed guess.
thread_local uint64_t t_spin_ns = 100'000;
/// The host's count of device writes and interrupts as of this thread's last return from
/// wait_progress(): its caller looked after that, so only a later change is news to it.
thread_local uint64_t t_seen = 0;
}  // namespace

bool FabricClient::spin_for_progress() {
  if (!progress_) return false;
  const uint64_t now_seen = __atomic_load_n(&progress_->visible, __ATOMIC_ACQUIRE);
  if (now_seen != t_seen) {  // it landed after the caller's last look: look again
    t_seen = now_seen;
    return true;
  }
  if (!spin_ || !__atomic_load_n(&progress_->realtime, __ATOMIC_RELAXED) || t_spin_ns < 1000) return false;
  const uint64_t until = sim::mono_now_ns() + t_spin_ns;
  for (uint32_t i = 1;; ++i) {
    t_seen = __atomic_load_n(&progress_->visible, __ATOMIC_ACQUIRE);
    if (t_seen != now_seen) return true;
    if (i % 256) continue;
    if (sim::mono_now_ns() >= until) break;
    // Every few microseconds: a program spinning on a machine with fewer cores than programs
    // gives way.
    if (i % 2048 == 0) std::this_thread::yield();
  }
  t_spin_ns /= 2;
  return false;
}

bool FabricClient::wait_progress() {
  // Realtime: a program polling real hardware sees a CQE the moment it lands; a wait in the
  // device costs it a wake-up (tens of microseconds here) after the device's reply.
  if (spin_for_progress()) return true;
  const WaitMsg m{t_seen};
  WaitReply r{};
  const uint64_t asked = sim::mono_now_ns();
  if (!call(MsgType::Wait, &m, sizeof m, nullptr, 0, &r, sizeof r)) {
    // Without the device nothing will ever complete; do not let a poll loop spin a core.
    usleep(1000);
    return false;
  }
  t_seen = r.visible;
  // The interrupts this wait saw are handled before it returns, so the caller's re-check sees
  // their effect (a readable completion channel).
  take_irqs(r);
  const uint64_t waited = sim::mono_now_ns() - asked;
  if (r.progress) t_spin_ns = std::min(kMaxSpinNs, std::max(t_spin_ns, 2 * waited));
  return r.progress != 0;
}

bool FabricClient::ring_doorbell(const DoorbellMsg& m) {
  if (!ring_ || !use_ring_ || !ring_on(*ring_)) return false;
  // The entry names this thread, whose connection (attached here first) the device then counts
  // as busy, as it would for a message (lockstep's quiet rules).
  thread_local const int32_t tid = int32_t(gettid());
  if (conn() < 0) return false;
  {
    std::lock_guard<std::mutex> g(ring_mu_);
    if (!ring_push(*ring_, RingDoorbell{m, tid, ring_stamp(sim::mono_now_ns())})) return false;
  }
  if (ring_needs_wake(*ring_)) post(MsgType::Wake, nullptr, 0);
  return true;
}

void FabricClient::take_irqs(const WaitReply& r) {
  uint64_t counts[kMaxHcasPerHost];
  for (size_t i = 0; i < links_.size(); ++i) {
    uint64_t prev = irq_counts_[i].load(std::memory_order_relaxed);
    while (r.irqs[i] > prev && !irq_counts_[i].compare_exchange_weak(prev, r.irqs[i])) {
    }
    counts[i] = irq_counts_[i].load(std::memory_order_relaxed);
  }
  run_isrs(counts);
}

void FabricClient::irq_thread() {
  // The line says "raised", not by which HCA: run every ISR. Each consumes only the EQEs it
  // finds, so one that finds none (its HCA did not fire, or a waiter already ran it) is harmless.
  for (;;) {
    pollfd p{irq_fd_, POLLIN, 0};
    if (poll(&p, 1, -1) <= 0) continue;
    std::lock_guard<std::mutex> g(isr_mu_);
    uint64_t n;
    if (read(irq_fd_, &n, sizeof n) <= 0) continue;
    for (size_t i = 0; i < links_.size(); ++i)
      if (isr_[i]) isr_[i](0);
    const uint64_t one = 1;
    if (write(activity_fd_, &one, sizeof one) < 0) { /* saturated */
    }
  }
}

}  // namespace

bool fabric_mode() {
  const char* p = std::getenv("HCASIM_FABRIC");
  return p && *p;
}

std::vector<drv::HcaLink*> fabric_links() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = FabricClient::get().join(); });
  return ok ? FabricClient::get().links() : std::vector<drv::HcaLink*>{};
}

bool fabric_control(const ControlMsg& m, ControlReply& r, std::string* text) {
  if (fabric_links().empty()) return false;
  return FabricClient::get().call(MsgType::Control, &m, sizeof m, nullptr, 0, &r, sizeof r, text);
}

}  // namespace hcasim::fabric
