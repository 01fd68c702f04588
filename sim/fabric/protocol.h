// SPDX-License-Identifier: Apache-2.0
/**
 * @file protocol.h
 * @brief The cross-process fabric's wire protocol: what a client process (the drop-in
 *        libibverbs) and the device process (hcasim-device, which owns the SystemC kernel and
 *        every HCA) say to each other over a Unix SOCK_SEQPACKET socket.
 *
 * What travels here is what crosses PCIe on a real host: firmware commands (mailboxes),
 * doorbell stores, IOMMU programming, plus the simulator's own "I am waiting" message that
 * lets simulated time advance. DMA does not travel here: the device reads and writes client
 * memory by address (process_vm_readv/writev), and the driver's rings, buffer tables and
 * doorbell records through a memfd the client shares at HELLO (dma_arena.h). Interrupts do not either: the
 * host's interrupt line is an eventfd the client passed at HELLO (each WAIT reply carries every HCA's
 * interrupt count, so the waiter knows which ISRs to run).
 *
 * One message per datagram: a MsgHeader then the type's payload. Every connection belongs to
 * one host: the first (HELLO) is the host's life line, held for the process's lifetime, whose
 * end means the process is gone; each client thread then opens its own ATTACH connection for
 * requests, so one thread's wait never holds up another thread's doorbell.
 */
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <hcasim/hca_hw.h>
#include <hcasim/trace_event.h>

namespace hcasim::fabric {

constexpr uint32_t kProtocolVersion = 10;  // 2: TraceMsg carries typed fields; 3: DOORBELL_IRQS, LEAVING;
                                           // 4: HelloReply::driver_trace bits; 5: CommandReply;
                                           // 6: HelloMsg's DMA arena; 7: AttachMsg's thread;
                                           // 8: WaitMsg, WaitReply::visible, the arena's progress page
                                           // 9: the arena's doorbell ring (doorbell_ring.h), WAKE
                                           // 10: ring entries name their thread and time (lockstep too)
/** @brief HelloReply::driver_trace: the device wants the driver's error events / all its others. */
constexpr uint8_t kDriverTraceErrors = 1, kDriverTraceOthers = 2;
/** @brief Most HCAs one host may own. */
constexpr uint32_t kMaxHcasPerHost = 8;
/** @brief Largest datagram either side sends (the counters JSON is the big one). */
constexpr size_t kMaxMessage = 1 << 20;

enum class MsgType : uint32_t {
  Hello = 1,     ///< client → device: become a host (first connection). Reply: HelloReply.
  Attach,        ///< client → device: another connection of a host. Reply: Status.
  Command,       ///< firmware command. Reply: the mailbox.
  Doorbell,      ///< UAR store. No reply.
  Map,           ///< IOMMU map. Reply: Status.
  Unmap,         ///< IOMMU unmap. Reply: Status.
  Wait,          ///< the program waits: advance simulated time. WaitMsg. Reply: WaitReply.
  Trace,         ///< a driver-side trace line. No reply.
  Control,       ///< simulator control API (sim_control.h). Reply: ControlReply.
  Status,        ///< `hcasim fabric status`. Reply: text.
  Stop,          ///< `hcasim fabric stop`. Reply: Status, then the device exits.
  DoorbellSync,  ///< UAR store acknowledged once issued (CQ arm). Reply: Status.
  DoorbellIrqs,  ///< SQ doorbell answered after its run-ahead with the interrupt counts. Reply: WaitReply.
  Leaving,       ///< on the HELLO connection: the process is ending; report what it leaves. Reply: Status.
  Wake,  ///< doorbells wait in the arena's ring and the device may be asleep (doorbell_ring.h). No reply.
};

struct MsgHeader {
  MsgType type;
  uint32_t len;  ///< payload bytes after the header
};

struct HelloMsg {
  uint32_t version;
  int32_t pid;
  int32_t want_host;  ///< host slot to take (HCASIM_HOST), or -1 for the first free one
  uint32_t rsvd;      ///< passed with it (SCM_RIGHTS): the host's interrupt eventfd, then the arena's memfd
  /**
   * The DMA arena (dma_arena.h): where the client has the memfd passed second, and its length;
   * 0 and 0 when it passes none (then the device reaches every byte by address).
   */
  uint64_t arena_hva;
  uint64_t arena_len;
};
struct HelloReply {
  int32_t status;  ///< 0, or an errno (then `error` says why)
  int32_t host;    ///< host index
  uint64_t token;  ///< proves ATTACH connections belong to this host
  uint32_t n_hcas;
  uint8_t driver_trace;  ///< which driver events the device's sinks want: kDriverTrace* bits
  uint8_t rsvd[3];
  char names[kMaxHcasPerHost][32];
  char error[160];
};
struct AttachMsg {
  int32_t host;
  uint64_t token;
  int32_t tid;  ///< the thread this connection serves (gettid), or 0: the lockstep clock watches it
};
struct StatusReply {
  int32_t status;  ///< 0 or an errno
};
struct CommandMsg {
  uint32_t hca;  ///< index among the host's HCAs
  hw::CmdMailbox mb;
};
/** @brief The reply to a Command: the mailbox as the firmware left it, and when it is done. */
struct CommandReply {
  hw::CmdMailbox mb;
  /**
   * Monotonic wall time (CLOCK_MONOTONIC, ns, the same clock in every process of the machine)
   * at which the firmware finishes the command: in the realtime clock the caller waits until
   * then, as a driver waits for a command's completion. 0: at once (lockstep).
   */
  uint64_t done_ns;
};
struct DoorbellMsg {
  uint32_t hca;
  uint32_t offset;
  uint64_t value;
};
struct MapMsg {
  uint32_t hca;
  uint32_t rsvd;
  uint64_t iova, hva, len;
};
/**
 * @brief WAIT: the program found nothing new. Answered as soon as the host's count of device
 * writes and interrupts differs from @p seen, so that what landed between the program's last
 * look and this message's arrival is not waited for again.
 */
struct WaitMsg {
  uint64_t seen;  ///< the count the program has seen (the last WaitReply::visible, or the arena's)
};
struct WaitReply {
  uint8_t progress;  ///< 1: something ran (re-check); 0: nothing is pending anywhere
  uint8_t rsvd[7];
  uint64_t irqs[kMaxHcasPerHost];  ///< interrupts raised so far per HCA of the host
  uint64_t visible;                ///< the host's count of device writes and interrupts, now
};
struct TraceMsg {
  uint32_t hca;
  uint32_t qpn;
  uint64_t wr_id;
  uint8_t has_wr;
  trace::TraceKind kind;  ///< Post or Interrupt (the driver's lines)
  uint8_t rsvd[6];
  trace::TraceFields fields;  ///< the line's facts as data
  // then the text, not NUL-terminated
};
enum class ControlOp : uint32_t { NowNs = 1, DropRx, Counter, StatsJson };
struct ControlMsg {
  ControlOp op;
  uint32_t qpn, psn, count;
  char device[32];
  char name[32];
};
struct ControlReply {
  int32_t rc;
  uint32_t rsvd;
  uint64_t value;
  // then text (StatsJson)
};

/**
 * @brief Send one message (header + payload parts), optionally passing descriptors.
 * Returns false on error (errno set). Never raises SIGPIPE.
 */
inline bool send_msg(int fd, MsgType type, const void* a, size_t alen, const void* b = nullptr,
                     size_t blen = 0, const int* fds = nullptr, uint32_t nfds = 0) {
  MsgHeader h{type, uint32_t(alen + blen)};
  iovec iov[3] = {{&h, sizeof h}, {const_cast<void*>(a), alen}, {const_cast<void*>(b), blen}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = blen ? 3 : alen ? 2 : 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxHcasPerHost)];
  if (nfds) {
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n >= 0) return true;
    if (errno != EINTR) return false;
  }
}

/**
 * @brief Receive one message: header into @p h, payload (h.len bytes) into @p buf. Returns the
 * datagram's size (> 0), 0 on
 * orderly shutdown, -1 on error (errno; EAGAIN with @p flags MSG_DONTWAIT and nothing there,
 * EMSGSIZE for a truncated datagram, EPROTO for a malformed one). Passed descriptors land in
 * @p fds (up to @p max_fds; the count in @p nfds).
 */
inline ssize_t recv_msg(int fd, MsgHeader& h, void* buf, size_t cap, int flags = 0, int* fds = nullptr,
                        uint32_t max_fds = 0, uint32_t* nfds = nullptr) {
  iovec iov[2] = {{&h, sizeof h}, {buf, cap}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxHcasPerHost)];
  if (fds) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
  }
  ssize_t n;
  do {
    n = recvmsg(fd, &m, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return n;
  if (nfds) *nfds = 0;
  if (fds) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const uint32_t k = uint32_t((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (uint32_t i = 0; i < k; ++i) {
        int x;
        std::memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof x);
        if (*nfds < max_fds)
          fds[(*nfds)++] = x;
        else
          ::close(x);
      }
    }
  }
  if (m.msg_flags & MSG_TRUNC) {
    errno = EMSGSIZE;
    return -1;
  }
  if (size_t(n) < sizeof h || h.len != size_t(n) - sizeof h) {
    errno = EPROTO;
    return -1;
  }
  return n;
}

/** @brief Default socket path of the long-running fabric for this user. */
std::string default_socket_path();
/** @brief Connect to the fabric socket at @p path (close-on-exec); -1 with errno on failure. */
int connect_socket(const std::string& path);

}  // namespace hcasim::fabric
