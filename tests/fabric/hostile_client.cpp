// SPDX-License-Identifier: Apache-2.0
// A hostile client of the cross-process fabric: it speaks the device's protocol by hand (the
// project's own protocol.h, the one both sides use) and breaks it one way per case. Each case
// checks what the device must do — disconnect it (the connection ends), refuse a request with
// an errno, or ignore what it claims — and exits 0 if the device did so, 1 if not. What the
// device logged and that the other hosts carried on is checked by tests/fabric/hostile-test.
//
//   hostile_client SOCKET CASE [ARG]
//
// Cases: garbage, bad-type, bad-length, header-mismatch, truncated, oversize, doorbell-first,
// second-hello, stop-from-host, foreign-hca, foreign-qpn QPN, foreign-uar, map-wrap,
// map-unmapped, spoof-pid PID, bad-irq-fd, bad-arena, ring-foreign-qpn, ring-overrun,
// attach-bad-token, attach-foreign-thread, orphan, driver-trace, no-read.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "doorbell_ring.h"
#include "protocol.h"

using namespace hcasim;
using namespace hcasim::fabric;

namespace {

std::string g_sock;

[[noreturn]] void fail(const char* what) {
  std::printf("hostile: FAIL: %s\n", what);
  std::exit(1);
}

int connect_or_die() {
  const int fd = connect_socket(g_sock);
  if (fd < 0) fail("cannot connect to the fabric");
  return fd;
}

/** The device ended the connection within @p ms: reading gives EOF (after any queued replies). */
bool closed_by_device(int fd, int ms = 10000) {
  std::vector<uint8_t> buf(kMaxMessage + 64);
  for (int waited = 0; waited < ms;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) {
      waited += 100;
      continue;
    }
    const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

/** HELLO with a fresh eventfd (or @p fds as given), claiming a DMA arena if @p arena_len; the reply. */
HelloReply hello(int fd, int32_t pid = getpid(), const int* fds = nullptr, uint32_t nfds = 1,
                 uint64_t arena_hva = 0, uint64_t arena_len = 0) {
  const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  HelloMsg m{kProtocolVersion, pid, -1, 0, arena_hva, arena_len};
  HelloReply r{};
  MsgHeader h{};
  if (!send_msg(fd, MsgType::Hello, &m, sizeof m, nullptr, 0, fds ? fds : &efd, nfds) ||
      recv_msg(fd, h, &r, sizeof r) <= 0 || h.type != MsgType::Hello)
    fail("no answer to HELLO");
  return r;
}

/** A host: HELLO accepted. */
int as_host(HelloReply* out = nullptr) {
  const int fd = connect_or_die();
  const HelloReply r = hello(fd);
  if (r.status != 0) fail(r.error);
  if (out) *out = r;
  return fd;
}

/** Send @p type with @p payload on a host's connection; the device must end the connection. */
template <class T>
void expect_disconnect(MsgType type, const T& payload) {
  const int fd = as_host();
  send_msg(fd, type, &payload, sizeof payload);
  if (!closed_by_device(fd)) fail("the device kept the connection");
}

void raw(int fd, const void* p, size_t n) {
  if (send(fd, p, n, MSG_NOSIGNAL) != ssize_t(n)) fail("send");
}

int case_garbage() {
  const int fd = connect_or_die();
  const char junk[] = "\x13\x37GET / HTTP/1.1\r\nHost: hcasim\r\n\r\n";
  raw(fd, junk, sizeof junk);
  return closed_by_device(fd) ? 0 : (fail("garbage accepted"), 1);
}

int case_bad_type() {
  expect_disconnect(MsgType(99), uint64_t(0));
  return 0;
}

int case_bad_length() {
  expect_disconnect(MsgType::Doorbell, uint32_t(0));  // 4 bytes, a DoorbellMsg is 16
  return 0;
}

int case_header_mismatch() {
  const int fd = as_host();
  struct {
    MsgHeader h;
    uint64_t x;
  } m{{MsgType::Wait, 100}, 0};  // says 100 payload bytes, carries 8
  raw(fd, &m, sizeof m);
  return closed_by_device(fd) ? 0 : (fail("a lying header accepted"), 1);
}

int case_truncated() {
  const int fd = as_host();
  const uint8_t part[3] = {3, 0, 0};  // the first bytes of a header, then the process goes
  raw(fd, part, sizeof part);
  ::close(fd);
  return 0;  // the device's log says what it saw (hostile-test checks)
}

int case_oversize() {
  const int fd = as_host();
  int sz = int(2 * kMaxMessage);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  std::vector<uint8_t> big(kMaxMessage + 64, 0xa5);
  if (!send_msg(fd, MsgType::Trace, big.data(), big.size())) {
    std::printf("hostile: oversize: this socket cannot send %zu bytes (%s): the case is moot\n", big.size(),
                std::strerror(errno));
    return 0;
  }
  return closed_by_device(fd) ? 0 : (fail("an oversized message accepted"), 1);
}

int case_doorbell_first() {
  const int fd = connect_or_die();
  DoorbellMsg d{0, hw::kUarSqDoorbell, uint64_t(0x11) << 32};
  send_msg(fd, MsgType::Doorbell, &d, sizeof d);
  return closed_by_device(fd) ? 0 : (fail("a doorbell before HELLO accepted"), 1);
}

int case_second_hello() {
  const int fd = as_host();
  const int efd = eventfd(0, EFD_CLOEXEC);
  HelloMsg m{kProtocolVersion, getpid(), -1, 0, 0, 0};
  send_msg(fd, MsgType::Hello, &m, sizeof m, nullptr, 0, &efd, 1);
  return closed_by_device(fd) ? 0 : (fail("a second HELLO accepted"), 1);
}

int case_stop_from_host() {
  const int fd = as_host();
  send_msg(fd, MsgType::Stop, nullptr, 0);
  return closed_by_device(fd) ? 0 : (fail("STOP from a host accepted"), 1);
}

int case_foreign_hca() {
  expect_disconnect(MsgType::Doorbell, DoorbellMsg{5, hw::kUarSqDoorbell, uint64_t(0x11) << 32});
  return 0;
}

int case_foreign_qpn(const char* qpn) {
  const uint64_t q = std::strtoull(qpn, nullptr, 0);
  expect_disconnect(MsgType::Doorbell, DoorbellMsg{0, hw::kUarSqDoorbell, q << 32 | 1});
  return 0;
}

int case_foreign_uar() {
  expect_disconnect(MsgType::Doorbell, DoorbellMsg{0, hw::kUarPageSize + hw::kUarSqDoorbell, 0});
  return 0;
}

int case_map_wrap() {
  static uint8_t page[4096];
  expect_disconnect(MsgType::Map, MapMsg{0, 0, ~uint64_t(0) - 4095, uint64_t(uintptr_t(page)), 8192});
  return 0;
}

StatusReply call_map(int fd, const MapMsg& m, MsgType type = MsgType::Map) {
  StatusReply r{-1};
  MsgHeader h{};
  if (!send_msg(fd, type, &m, sizeof m) || recv_msg(fd, h, &r, sizeof r) <= 0) fail("no answer to MAP");
  return r;
}

int case_map_unmapped() {
  const int fd = as_host();
  void* p = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(p, 8192);
  const uint64_t gone = uint64_t(uintptr_t(p));
  if (call_map(fd, MapMsg{0, 0, 0x100000, gone, 8192}).status != EFAULT) fail("a MAP of unmapped memory");
  // The kernel's half of the address space: no process owns it.
  if (call_map(fd, MapMsg{0, 0, 0x100000, 0xffff800000000000ull, 4096}).status != EFAULT)
    fail("a MAP of kernel addresses");
  // Half mapped: the second page is not there.
  auto* half = static_cast<uint8_t*>(mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  munmap(half + 4096, 4096);
  if (call_map(fd, MapMsg{0, 0, 0x100000, uint64_t(uintptr_t(half)), 8192}).status != EFAULT)
    fail("a MAP running past the end of a mapping");
  // The connection is still good: its own memory maps and unmaps.
  static uint8_t mine[8192];
  if (call_map(fd, MapMsg{0, 0, 0x100000, uint64_t(uintptr_t(mine)), sizeof mine}).status != 0)
    fail("a MAP of the client's own memory refused");
  if (call_map(fd, MapMsg{0, 0, 0x100000, 0, 0}, MsgType::Unmap).status != 0) fail("UNMAP refused");
  return 0;
}

int case_spoof_pid(const char* victim) {
  // It claims another process's pid: the device must DMA into the real sender only.
  const int fd = connect_or_die();
  const HelloReply r = hello(fd, std::atoi(victim));
  if (r.status != 0) fail(r.error);
  const int st = connect_or_die();
  send_msg(st, MsgType::Status, nullptr, 0);
  std::vector<char> text(kMaxMessage);
  MsgHeader h{};
  const ssize_t n = recv_msg(st, h, text.data(), text.size() - 1);
  if (n <= 0) fail("no STATUS");
  text[h.len] = 0;
  const std::string want = "host " + std::to_string(r.host) + ": pid " + std::to_string(getpid()) + ":";
  if (!std::strstr(text.data(), want.c_str())) fail("the device took the pid the HELLO claimed");
  return 0;
}

int case_bad_irq_fd() {
  int pfd[2];
  if (pipe(pfd) != 0) fail("pipe");
  const int fd = connect_or_die();
  HelloReply r = hello(fd, getpid(), &pfd[1], 1);  // a pipe nobody reads would block the device
  if (r.status != EINVAL || !std::strstr(r.error, "not an eventfd"))
    fail("a pipe taken as the interrupt line");
  std::printf("hostile: bad-irq-fd: refused: %s\n", r.error);
  const int fd2 = connect_or_die();
  r = hello(fd2, getpid(), nullptr, 0);
  if (r.status != EINVAL) fail("a HELLO without an interrupt line accepted");
  return 0;
}

int case_bad_arena() {
  // The DMA arena (dma_arena.h): the device writes rings into the memfd, so it must be one, and
  // the client must really have it where it says, or completions would land where it never looks.
  const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int mfd = memfd_create("hostile-arena", MFD_CLOEXEC);
  if (mfd < 0 || ftruncate(mfd, 8192) != 0) fail("memfd");
  void* real = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  void* other = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (real == MAP_FAILED || other == MAP_FAILED) fail("mmap");
  const uint64_t at = uint64_t(uintptr_t(real)), elsewhere = uint64_t(uintptr_t(other));
  int pfd[2];
  if (pipe(pfd) != 0) fail("pipe");
  const int one[1] = {efd}, with_pipe[2] = {efd, pfd[0]}, good[2] = {efd, mfd};
  struct Try {
    const char* what;
    const int* fds;
    uint32_t nfds;
    uint64_t hva;
    const char* said;
  } tries[] = {
      {"an arena without its memfd", one, 1, at, "the DMA arena's memfd"},
      {"a pipe as the arena", with_pipe, 2, at, "not a memfd (it is pipe:"},
      {"an arena claimed where other memory is", good, 2, elsewhere, "not mapped at the address HELLO gives"},
  };
  for (const Try& t : tries) {
    const HelloReply r = hello(connect_or_die(), getpid(), t.fds, t.nfds, t.hva, 8192);
    if (r.status != EINVAL || !std::strstr(r.error, t.said))
      fail((std::string(t.what) + " accepted").c_str());
    std::printf("hostile: bad-arena: %s: refused: %s\n", t.what, r.error);
  }
  // The real thing is taken.
  const HelloReply r = hello(connect_or_die(), getpid(), good, 2, at, 8192);
  if (r.status != 0) fail(r.error);
  return 0;
}

/** A host with a real DMA arena (progress page, doorbell ring); its connection and its ring. */
int host_with_ring(DoorbellRing*& ring) {
  const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int mfd = memfd_create("hostile-ring", MFD_CLOEXEC);
  if (mfd < 0 || ftruncate(mfd, 8192) != 0) fail("memfd");
  void* a = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  if (a == MAP_FAILED) fail("mmap");
  const int fds[2] = {efd, mfd};
  const int fd = connect_or_die();
  const HelloReply r = hello(fd, getpid(), fds, 2, uint64_t(uintptr_t(a)), 8192);
  if (r.status != 0) fail(r.error);
  ring = reinterpret_cast<DoorbellRing*>(static_cast<uint8_t*>(a) + kDoorbellRingOffset);
  if (!ring_on(*ring)) fail("the device does not take doorbells from the arena's ring");
  return fd;
}

int case_ring_foreign_qpn() {
  // A doorbell left in the arena's ring is checked as the same message would be: one naming
  // host 0's first QP is refused (and logged); the host stays connected.
  DoorbellRing* ring = nullptr;
  const int fd = host_with_ring(ring);
  if (!ring_push(*ring, RingDoorbell{DoorbellMsg{0, hw::kUarSqDoorbell, uint64_t(0x11) << 32 | 1},
                                     int32_t(gettid()), 0}))
    fail("ring full");
  send_msg(fd, MsgType::Wake, nullptr, 0);
  if (closed_by_device(fd, 500)) fail("a refused ring entry ended the connection");
  return 0;
}

int case_ring_overrun() {
  // A head far beyond what the ring holds: the device says so, drops them, and carries on.
  DoorbellRing* ring = nullptr;
  const int fd = host_with_ring(ring);
  __atomic_store_n(&ring->head, uint64_t(1000), __ATOMIC_RELEASE);
  send_msg(fd, MsgType::Wake, nullptr, 0);
  if (closed_by_device(fd, 500)) fail("an overrun ring ended the connection");
  if (__atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE) != 1000)
    fail("the device did not empty the overrun ring");
  return 0;
}

int case_attach_bad_token() {
  HelloReply r{};
  as_host(&r);
  const int fd = connect_or_die();
  AttachMsg a{r.host, r.token ^ 1, 0};
  StatusReply st{};
  MsgHeader h{};
  if (!send_msg(fd, MsgType::Attach, &a, sizeof a) || recv_msg(fd, h, &st, sizeof st) <= 0)
    fail("no ATTACH answer");
  if (st.status != EPERM) fail("ATTACH with a wrong token accepted");
  return closed_by_device(fd) ? 0 : (fail("kept a connection with a wrong token"), 1);
}

/** The process at the other end of @p fd (the device). */
pid_t device_pid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) fail("SO_PEERCRED");
  return cred.pid;
}

int case_attach_foreign_thread() {
  // The lockstep clock watches the thread a connection serves: one of another process (here
  // the device's own main thread, its pid) is refused.
  HelloReply r{};
  as_host(&r);
  const int fd = connect_or_die();
  AttachMsg a{r.host, r.token, int32_t(device_pid(fd))};
  StatusReply st{};
  MsgHeader h{};
  if (!send_msg(fd, MsgType::Attach, &a, sizeof a) || recv_msg(fd, h, &st, sizeof st) <= 0)
    fail("no ATTACH answer");
  if (st.status != ESRCH) fail("ATTACH for another process's thread accepted");
  return closed_by_device(fd) ? 0 : (fail("kept a connection for another process's thread"), 1);
}

int case_orphan() {
  // A thread's connection outliving its process's HELLO connection must end with it: the
  // next process to take the host slot must not be reachable through it.
  HelloReply r{};
  const int life = as_host(&r);
  const int fd = connect_or_die();
  AttachMsg a{r.host, r.token, int32_t(gettid())};
  StatusReply st{};
  MsgHeader h{};
  if (!send_msg(fd, MsgType::Attach, &a, sizeof a) || recv_msg(fd, h, &st, sizeof st) <= 0 || st.status != 0)
    fail("ATTACH refused");
  ::close(life);
  return closed_by_device(fd) ? 0 : (fail("a connection outlived its host"), 1);
}

/** A TRACE line of @p kind with a little text. */
void trace_line(int fd, trace::TraceKind kind) {
  TraceMsg m{};
  m.kind = kind;
  send_msg(fd, MsgType::Trace, &m, sizeof m, "a line", 6);
}

int case_driver_trace() {
  // What a driver traces (posts, interrupts, notes, errors) is taken; a kind only the
  // hardware's units emit ends the connection.
  const int fd = as_host();
  for (auto k :
       {trace::TraceKind::Post, trace::TraceKind::Interrupt, trace::TraceKind::Note, trace::TraceKind::Error})
    trace_line(fd, k);
  static uint8_t mine[4096];
  if (call_map(fd, MapMsg{0, 0, 0x100000, uint64_t(uintptr_t(mine)), sizeof mine}).status != 0)
    fail("a driver's trace lines ended the connection");
  trace_line(fd, trace::TraceKind::PktTx);
  return closed_by_device(fd) ? 0 : (fail("a TRACE of a hardware kind accepted"), 1);
}

int case_no_read() {
  // Requests whose replies it never reads: the device must not wait for it.
  const int fd = as_host();
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  size_t sent = 0;
  for (int idle = 0; idle < 100 && sent < 1'000'000;) {
    MapMsg m{0, 0, 0x100000, 0, 0};
    if (send_msg(fd, MsgType::Unmap, &m, sizeof m, nullptr, 0, nullptr, 0)) {
      ++sent;
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) break;  // disconnected
    if (errno != EAGAIN) fail("send");
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 100) == 0) ++idle;  // the device reads nothing more: it hangs, or it is done with us
  }
  std::printf("hostile: no-read: %zu requests sent, replies never read\n", sent);
  return closed_by_device(fd, 10000) ? 0 : (fail("the device kept a client that does not read"), 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hostile_client SOCKET CASE [ARG]\n");
    return 2;
  }
  g_sock = argv[1];
  const std::string c = argv[2];
  const char* arg = argc > 3 ? argv[3] : "0";
  const std::map<std::string, std::function<int()>> cases = {
      {"garbage", case_garbage},
      {"bad-type", case_bad_type},
      {"bad-length", case_bad_length},
      {"header-mismatch", case_header_mismatch},
      {"truncated", case_truncated},
      {"oversize", case_oversize},
      {"doorbell-first", case_doorbell_first},
      {"second-hello", case_second_hello},
      {"stop-from-host", case_stop_from_host},
      {"foreign-hca", case_foreign_hca},
      {"foreign-qpn", [&] { return case_foreign_qpn(arg); }},
      {"foreign-uar", case_foreign_uar},
      {"map-wrap", case_map_wrap},
      {"map-unmapped", case_map_unmapped},
      {"spoof-pid", [&] { return case_spoof_pid(arg); }},
      {"bad-irq-fd", case_bad_irq_fd},
      {"bad-arena", case_bad_arena},
      {"ring-foreign-qpn", case_ring_foreign_qpn},
      {"ring-overrun", case_ring_overrun},
      {"attach-bad-token", case_attach_bad_token},
      {"attach-foreign-thread", case_attach_foreign_thread},
      {"orphan", case_orphan},
      {"driver-trace", case_driver_trace},
      {"no-read", case_no_read},
  };
  auto it = cases.find(c);
  if (it == cases.end()) {
    std::fprintf(stderr, "hostile_client: unknown case '%s'\n", c.c_str());
    return 2;
  }
  const int rc = it->second();
  if (rc == 0) std::printf("hostile: %s: ok\n", c.c_str());
  return rc;
}
