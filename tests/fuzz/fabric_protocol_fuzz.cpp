// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the server side of the fabric protocol (sim/fabric/protocol.h), what a hostile
// client process can send the device. The input is one connection's byte stream: a byte
// choosing the HCAs per host (1..8), then datagrams, each [flags][length, 2 bytes LE][bytes]
// (flags bit 0: an eventfd passed with it). Each datagram goes through a real SOCK_SEQPACKET
// socket pair into recv_msg() and check_request() (sim/fabric/request.h), exactly as the
// device's drain() does, with the connection's state following what was accepted (HELLO or
// ATTACH make it a host's). Properties: recv_msg() refuses exactly the datagrams whose header
// does not match their size; a message check_request() accepts keeps every rule of the
// protocol (its type, its exact size, its moment, an HCA the host owns, a UAR offset inside
// the page, an SQ doorbell for the HCA's own QPs, a map that does not wrap, a known trace kind
// or control operation); one it refuses gets a reason, and ends the connection as on the device.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "protocol.h"
#include "request.h"

using namespace hcasim;
using namespace hcasim::fabric;

namespace {

int g_pair[2] = {-1, -1};
std::vector<uint8_t> g_buf(kMaxMessage);

/** The rules an accepted message keeps, stated apart from request.cpp's checks. */
void check_accepted(const MsgHeader& h, uint32_t nfds, const ConnState& c, const Request& r) {
  const uint32_t t = uint32_t(h.type);
  FUZZ_CHECK(t >= 1 && t <= uint32_t(MsgType::Wake), "accepted type %u", t);
  FUZZ_CHECK(nfds == 0 || h.type == MsgType::Hello, "descriptors accepted with type %u", t);
  const bool host_msg = h.type != MsgType::Hello && h.type != MsgType::Attach && h.type != MsgType::Status &&
                        h.type != MsgType::Stop && h.type != MsgType::Control;
  FUZZ_CHECK(!host_msg || c.host >= 0, "type %u accepted before HELLO/ATTACH", t);
  FUZZ_CHECK(h.type != MsgType::Leaving || c.life, "LEAVING accepted off the life line");
  FUZZ_CHECK((h.type != MsgType::Hello && h.type != MsgType::Attach && h.type != MsgType::Stop) || c.host < 0,
             "type %u accepted on a host's connection", t);
  FUZZ_CHECK(r.hca() < c.n_hcas, "HCA %u accepted of %u", r.hca(), c.n_hcas);
  switch (h.type) {
    case MsgType::Doorbell:
    case MsgType::DoorbellSync:
    case MsgType::DoorbellIrqs:
      FUZZ_CHECK(h.len == sizeof(DoorbellMsg), "doorbell of %u bytes", h.len);
      FUZZ_CHECK(r.doorbell.offset < hw::kUarPageSize && r.doorbell.offset % 8 == 0, "UAR offset 0x%x",
                 r.doorbell.offset);
      // An SQ doorbell names a QP of the sender's own HCA, or the GSI QP, number 1 on every HCA.
      FUZZ_CHECK(!hw::is_sq_doorbell(r.doorbell.offset) ||
                     hw::sq_doorbell_qpn(r.doorbell.value) == hw::kGsiQpn ||
                     (hw::sq_doorbell_qpn(r.doorbell.value) >> 16) == ((c.first_hca + r.doorbell.hca) & 0xff),
                 "SQ doorbell for QPN 0x%x accepted", hw::sq_doorbell_qpn(r.doorbell.value));
      break;
    case MsgType::Map:
      FUZZ_CHECK(
          r.map.len > 0 && r.map.iova <= ~uint64_t(0) - r.map.len && r.map.hva <= ~uint64_t(0) - r.map.len,
          "MAP of 0x%llx bytes at 0x%llx accepted", (unsigned long long)r.map.len,
          (unsigned long long)r.map.iova);
      break;
    case MsgType::Trace:
      FUZZ_CHECK(r.text_len == h.len - sizeof(TraceMsg) && r.text_len <= kMaxTraceText,
                 "trace text %zu bytes", r.text_len);
      FUZZ_CHECK(r.trace.kind == trace::TraceKind::Post || r.trace.kind == trace::TraceKind::Interrupt ||
                     r.trace.kind == trace::TraceKind::Note || r.trace.kind == trace::TraceKind::Error,
                 "trace kind %u accepted", unsigned(r.trace.kind));
      break;
    case MsgType::Control:
      FUZZ_CHECK(uint32_t(r.control.op) >= 1 && uint32_t(r.control.op) <= 4, "control op %u",
                 unsigned(r.control.op));
      break;
    case MsgType::Wait: FUZZ_CHECK(h.len == sizeof(WaitMsg), "WAIT with %u payload bytes", h.len); break;
    case MsgType::Status:
    case MsgType::Stop:
    case MsgType::Leaving:
    case MsgType::Wake: FUZZ_CHECK(h.len == 0, "type %u with %u payload bytes", t, h.len); break;
    default: break;
  }
}

/** Send @p n bytes (with an eventfd if @p pass_fd) and receive them as the device does. */
ssize_t through_socket(const uint8_t* p, size_t n, bool pass_fd, MsgHeader& h, int* fds, uint32_t& nfds) {
  msghdr m{};
  iovec iov{const_cast<uint8_t*>(p), n};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  const int efd = pass_fd ? eventfd(0, EFD_CLOEXEC) : -1;
  if (efd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &efd, sizeof efd);
  }
  const bool sent = sendmsg(g_pair[0], &m, MSG_NOSIGNAL) == ssize_t(n);
  if (efd >= 0) ::close(efd);
  FUZZ_CHECK(sent, "the socket pair refused %zu bytes: %s", n, std::strerror(errno));
  nfds = 0;
  return recv_msg(g_pair[1], h, g_buf.data(), g_buf.size(), MSG_DONTWAIT, fds, kMaxHcasPerHost, &nfds);
}

/** One datagram of the stream; false once the device would have ended the connection. */
bool one(const uint8_t* p, size_t n, bool pass_fd, ConnState& c) {
  MsgHeader h{};
  int fds[kMaxHcasPerHost];
  uint32_t nfds = 0;
  const ssize_t got = through_socket(p, n, pass_fd, h, fds, nfds);
  MsgHeader raw{};
  if (n >= sizeof raw) std::memcpy(&raw, p, sizeof raw);
  const bool framed = n >= sizeof raw && raw.len == n - sizeof raw;
  if (n == 0) FUZZ_CHECK(got == 0, "an empty datagram read as %zd", got);
  if (n > 0)
    FUZZ_CHECK(framed ? got == ssize_t(n) : got < 0 && errno == EPROTO, "%zu bytes read as %zd", n, got);
  if (got > 0) FUZZ_CHECK(nfds == (pass_fd ? 1u : 0u), "%u descriptor(s) received", nfds);
  Request r;
  std::string why = "it closed the connection or sent a malformed message";
  if (got > 0) why = check_request(h, g_buf.data(), nfds, c, r);
  for (uint32_t i = 0; i < nfds; ++i) ::close(fds[i]);
  if (!why.empty()) return false;
  check_accepted(h, nfds, c, r);
  if (h.type == MsgType::Hello) {  // the device's answer to a good HELLO: host 1
    c.host = 1;
    c.life = true;
    c.first_hca = c.n_hcas;
  } else if (h.type == MsgType::Attach) {
    if (r.attach.host < 0 || r.attach.host >= 8) return false;  // refused (EPERM) and closed
    c.host = r.attach.host;
    c.first_hca = uint32_t(c.host) * c.n_hcas;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_pair[0] < 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g_pair) != 0) return 0;
  if (size == 0) return 0;
  ConnState c;
  c.n_hcas = 1 + (data[0] & 7u);
  for (size_t i = 1; i + 3 <= size;) {
    const bool pass_fd = data[i] & 1;
    size_t n = size_t(data[i + 1]) | size_t(data[i + 2]) << 8;
    i += 3;
    n = std::min(n, size - i);
    if (!one(data + i, n, pass_fd, c)) break;
    i += n;
  }
  return 0;
}
