// SPDX-License-Identifier: Apache-2.0
/**
 * @file rsocket.h
 * @brief Library-private state of the rsockets (<rdma/rsocket.h>) of the drop-in librdmacm.so.1:
 *        the wire formats rdma-core 44 uses (connection data, target SGEs and iomaps, the 32-bit
 *        immediate), the socket object, and the pieces the rsocket*.cpp files share.
 *
 * A stream rsocket is an RC QP connected through the library's own rdma_cm calls. Each side
 * publishes halves of its receive buffer to the peer by writing an SGE into the peer's target
 * SGL; data moves by RDMA WRITE WITH IMMEDIATE into the published half, the immediate saying how
 * much. Credits (one per receive WR) travel in the immediates of credit updates. The layout and
 * byte order of everything on the wire is rdma-core 44's (librdmacm/docs/rsocket, rsocket.c),
 * so these rsockets talk to rdma-core's.
 */
#ifndef HCASIM_RDMACM_RSOCKET_H
#define HCASIM_RDMACM_RSOCKET_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <vector>

namespace hcasim::rdmacm::rs {

// ---- wire formats (rdma-core 44, librdmacm/rsocket.c) -----------------------------------------

/// @brief An RDMA buffer as rsockets publish it: in a target SGL entry, in host order of the
///        writer (byte-swapped when the two hosts differ, RS_CONN_FLAG_NET); big-endian inside
///        struct RsConnData.
struct RsSge {
  uint64_t addr;    ///< virtual address
  uint32_t key;     ///< rkey
  uint32_t length;  ///< bytes (entries, for the target SGL in RsConnData)
};
static_assert(sizeof(RsSge) == 16, "rs_sge is 16 bytes on the wire");

/// @brief One entry of a target iomap: a remote buffer the peer may write directly (riowrite).
struct RsIomap {
  uint64_t offset;  ///< the riomap offset the buffer stands for
  RsSge sge;        ///< where it is
};
static_assert(sizeof(RsIomap) == 24, "rs_iomap is 24 bytes on the wire");

/// @brief The private data of the REQ and the REP (struct rs_conn_data), all fields big-endian.
struct RsConnData {
  uint8_t version;            ///< 1
  uint8_t flags;              ///< kConnFlagNet | kConnFlagIomap
  uint16_t credits;           ///< initial credits: the sender's receive queue size (be16)
  uint8_t reserved[3];        ///< 0
  uint8_t target_iomap_size;  ///< scaled (scale_of()) number of iomap entries the peer may use
  RsSge target_sgl;           ///< the sender's target SGL: address, rkey, number of entries
  RsSge data_buf;             ///< the first receive buffer the peer may write
};
static_assert(sizeof(RsConnData) == 40, "rs_conn_data is 40 bytes");
static_assert(offsetof(RsConnData, target_sgl) == 8 && offsetof(RsConnData, data_buf) == 24,
              "rs_conn_data field offsets");

constexpr uint8_t kConnVersion = 1;              ///< rs_conn_data version
constexpr uint8_t kConnFlagNet = 1 << 0;         ///< the sender is big-endian
constexpr uint8_t kConnFlagIomap = 1 << 1;       ///< target_iomap_size is meaningful
constexpr int kSglSize = 2;                      ///< entries of a target SGL (RS_SGL_SIZE)
constexpr uint32_t kSndLowat = 2048;             ///< send space that makes a socket writable
constexpr uint32_t kOlapStart = 2048;            ///< first transfer of a send (RS_OLAP_START_SIZE)
constexpr uint32_t kMaxTransfer = 65536;         ///< largest single transfer (RS_MAX_TRANSFER)
constexpr uint16_t kQpMinSize = 16;              ///< smallest SQ / RQ
constexpr uint16_t kQpMaxSize = 0xFFFE;          ///< largest SQ / RQ
constexpr unsigned kQpCtrlSize = 4;              ///< send WRs kept for control messages
constexpr int kConnRetries = 6;                  ///< resolve retries on ETIMEDOUT (1 s << n each)
constexpr uint32_t kMaxCtrlMsg = sizeof(RsSge);  ///< largest control message payload
constexpr uint32_t kMaxBufSize = 64u << 20;      ///< SO_RCVBUF / SO_SNDBUF cap (Linux caps too)

/// @brief Upper 3 bits of the immediate (rs_msg_op): what the message is.
enum class MsgOp : uint32_t {
  Data = 0,      ///< bits 28:0 = bytes written into the current target buffer
  Write = 2,     ///< riowrite: a plain RDMA WRITE; only ever in a local wr_id, never on the wire
  Sgl = 4,       ///< credit update: bits 28:0 = the new credit limit; may carry a target SGE
  IomapSgl = 6,  ///< bits 15:0 = the iomap entry just written
  Ctrl = 7,      ///< bits 28:0 = a CtrlMsg
};
/// @brief Control messages (RS_CTRL_*).
enum class CtrlMsg : uint32_t { Disconnect = 0, Keepalive = 1, Shutdown = 2 };

/// @brief The 32-bit message: op in bits 31:29, data below (rs_msg_set).
constexpr uint32_t msg_set(MsgOp op, uint32_t data) { return (uint32_t(op) << 29) | data; }
/// @brief The op of a message.
constexpr MsgOp msg_op(uint32_t msg) { return MsgOp(msg >> 29); }
/// @brief The data of a message.
constexpr uint32_t msg_data(uint32_t msg) { return msg & 0x1FFFFFFF; }

/// @brief wr_id bit of receive WRs (send WRs carry the message they sent in their low 32 bits).
constexpr uint64_t kWrIdRecv = uint64_t(1) << 63;

/// @brief rdma-core's 8-bit encoding of an iomap size (rs_value_to_scale): small values as they
///        are, larger ones as 0x80 | value >> 8.
constexpr int scale_of(int value) { return value <= 128 ? value : 0x80 | (value >> 8); }
/// @brief The inverse (rs_scale_to_value).
constexpr int value_of(int scale) { return scale <= 128 ? scale : (scale & 0x7F) << 8; }

// ---- defaults (/etc/rdma/rsocket/*) ------------------------------------------------------------

/// @brief rdma-core's defaults, overridden by the files of /etc/rdma/rsocket (rsocket(7)).
struct Config {
  uint16_t iomap_size = 0;      ///< iomap_size
  uint16_t inline_size = 64;    ///< inline_default
  uint16_t sqsize = 384;        ///< sqsize_default
  uint16_t rqsize = 384;        ///< rqsize_default
  uint32_t mem = 1u << 17;      ///< mem_default: receive buffer bytes
  uint32_t wmem = 1u << 17;     ///< wmem_default: send buffer bytes
  uint32_t polling_time = 10;   ///< polling_time: microseconds of busy polling before blocking
  int wake_up_interval = 5000;  ///< wake_up_interval: rpoll's longest sleep, milliseconds
};
/**
 * @brief The configuration, read once from RS_CONF_DIR (/etc/rdma/rsocket, or the directory
 *        named by HCASIM_RSOCKET_CONF_DIR, for tests) with rdma-core's rules.
 */
const Config& config();

// ---- the socket ---------------------------------------------------------------------------------

/// @brief rsocket states (rdma-core's rs_state: passive, opening, connected, closed, in order).
enum State : uint32_t {
  kInit = 0,
  kBound = 0x0001,
  kListening = 0x0002,
  kOpening = 0x0004,
  kResolvingAddr = kOpening | 0x0010,
  kResolvingRoute = kOpening | 0x0020,
  kConnecting = kOpening | 0x0040,
  kAccepting = kOpening | 0x0080,
  kConnected = 0x0100,
  kWritable = 0x0200,
  kReadable = 0x0400,
  kConnectRdwr = kConnected | kReadable | kWritable,
  kConnectError = 0x0800,
  kDisconnected = 0x1000,
  kError = 0x2000,
};

/// @brief A received data message not yet read: bytes left of it in the receive buffer.
struct RecvMsg {
  MsgOp op;       ///< always Data once queued
  uint32_t data;  ///< bytes not yet read
};

/// @brief A buffer registered with riomap.
struct IomapMr {
  uint64_t offset = 0;   ///< the offset it stands for
  ibv_mr* mr = nullptr;  ///< its registration
  int index = -1;        ///< entry in the peer's target iomap, -1 for a local-only mapping
  bool sent = false;     ///< the peer has been told (for remote mappings)
};

/**
 * @brief One rsocket. Everything below @c mu is protected by it; @c send_mu and @c recv_mu
 *        serialize whole send and receive calls (so two senders never interleave their bytes)
 *        and are taken before @c mu.
 */
struct RSocket {
  int index = -1;              ///< the descriptor the program holds
  pid_t owner = 0;             ///< the process that made it (a forked child cannot use it)
  std::mutex send_mu;          ///< one sender at a time
  std::mutex recv_mu;          ///< one receiver at a time
  std::mutex mu;               ///< the state below
  std::condition_variable cv;  ///< state changes and the end of a CQ wait

  rdma_cm_id* cm_id = nullptr;  ///< the connection's id (synchronous: created without a channel)
  uint32_t state = kInit;       ///< State bits
  int err = 0;                  ///< pending error (SO_ERROR)
  int fd_flags = 0;             ///< O_NONBLOCK and friends (rfcntl)
  bool swap_sgl = false;        ///< the peer's byte order differs (RS_OPT_SWAP_SGL)
  bool cm_watched = false;      ///< the service thread reads this id's CM events
  bool keepalive = false;       ///< SO_KEEPALIVE is on (the service sends keepalives)
  bool shut_wr = false;         ///< the program shut down writing (EPIPE rather than ECONNRESET)
  bool peer_gone = false;       ///< the peer's side went away without a disconnect message
  int retries = 0;              ///< resolve attempts so far (rs_do_connect)
  uint64_t so_opts = 0, tcp_opts = 0, ipv6_opts = 0;  ///< boolean options, bit = optname
  unsigned keepalive_time = 0;                        ///< seconds between keepalives (TCP_KEEPIDLE)
  std::vector<uint8_t> route;                         ///< RDMA_ROUTE as set (struct ibv_path_data array)

  uint32_t sbuf_size = 0, rbuf_size = 0;  ///< send / receive buffer bytes
  uint16_t sq_size = 0, rq_size = 0;      ///< queue sizes
  uint16_t sq_inline = 0;                 ///< inline bytes
  uint16_t target_iomap_size = 0;         ///< iomap entries the peer may use

  // flow control (rdma-core's names)
  unsigned ctrl_seqno = 0, ctrl_max_seqno = kQpCtrlSize;  ///< control messages posted / allowed
  uint16_t sseq_no = 0, sseq_comp = 0;                    ///< messages sent / credit limit
  uint16_t rseq_no = 0, rseq_comp = 0;                    ///< messages consumed / when to grant credits
  int sqe_avail = 0;                                      ///< send WRs for data
  int remote_sge = 0;                                     ///< next entry of the peer's target SGL to write
  RsSge remote_sgl{};                                     ///< the peer's target SGL
  RsSge remote_iomap{};                                   ///< the peer's target iomap

  // what the peer publishes to us: written by the peer into target_buf, read only after the
  // completion that announces it, into local copies (tsgl, tiomap)
  ibv_mr* target_mr = nullptr;    ///< registration of target_buf (remote write)
  uint8_t* target_buf = nullptr;  ///< target SGL, then target iomap
  RsSge tsgl[kSglSize]{};         ///< the peer's receive buffers as last published, and what is left
  int target_sge = 0;             ///< the entry being filled
  int tsgl_next = 1;              ///< the entry the peer's next SGE update writes
  std::vector<RsIomap> tiomap;    ///< the peer's iomap as last published

  uint8_t* rbuf = nullptr;  ///< receive buffer (two halves published in turn)
  ibv_mr* rmr = nullptr;    ///< its registration (remote write)
  uint32_t rbuf_bytes_avail = 0, rbuf_free_offset = 0, rbuf_offset = 0;  ///< receive accounting
  std::vector<RecvMsg> rmsg;  ///< received data messages (a ring of rq_size + 1)
  int rmsg_head = 0, rmsg_tail = 0;

  uint8_t* sbuf = nullptr;        ///< send buffer (a ring), then kQpCtrlSize control message slots
  ibv_mr* smr = nullptr;          ///< its registration
  uint32_t sbuf_bytes_avail = 0;  ///< free send buffer bytes
  uint32_t sbuf_pos = 0;          ///< where the next copy into the ring goes

  bool cq_armed = false;   ///< a completion event has been requested
  bool cq_waiter = false;  ///< a thread waits on the completion channel

  std::list<IomapMr> iomaps;   ///< riomap registrations
  bool iomap_pending = false;  ///< some remote mapping is not yet sent

  int accept_fd = -1;                 ///< listening: eventfd counting queued connections
  std::deque<RSocket*> accept_queue;  ///< listening: established, not yet raccept()ed
  std::list<RSocket*> pending;        ///< listening: accepted, waiting for the RTU
  bool closing = false;               ///< listening: rclose has taken the queues
  RSocket* parent = nullptr;          ///< accepted: the listener, until the connection is queued there
  bool queued = false;                ///< accepted: moved to the listener's accept queue
};

/// @brief A test of a socket's state, evaluated with its mutex held.
using Test = std::function<bool(RSocket&)>;
/// @brief The lock of RSocket::mu, as the state functions take it.
using Lock = std::unique_lock<std::mutex>;

// ---- descriptors (rsocket_index.cpp) ----------------------------------------------------------

/// @brief A new stream socket with the defaults, or inheriting @p parent's sizes.
RSocket* alloc(const RSocket* parent);
/// @brief Records @p rs under @p index; -1 with errno on failure (ENOMEM, EBADF).
int insert(RSocket* rs, int index);
/// @brief Frees a stream socket's verbs resources, its id, and the socket.
void free_socket(RSocket* rs);
/// @brief The socket with descriptor @p fd in this process, or nullptr with errno (EBADF, or
///        EOPNOTSUPP in a forked child).
RSocket* lookup(int fd);

// ---- connections (rsocket_conn.cpp) -----------------------------------------------------------

/// @brief Drives the connection state machine one step (rs_do_connect); -1 with EINPROGRESS
///        when it has to wait for the CM. Caller holds @p l.
int do_connect(RSocket& rs, Lock& l);
/// @brief Accepts the connection requests queued on listener @p ls (service thread).
void accept_requests(RSocket& ls);
/// @brief Reads one CM event of a watched connecting or connected socket (service thread);
///        false when the socket is to be freed (an accepted connection that never came up).
bool handle_cm_event(RSocket& rs);
/// @brief Moves the QP to the error state so that its receives flush (wakes blocked waiters).
void flush_qp(RSocket& rs);

// ---- data path (rsocket_data.cpp) -------------------------------------------------------------

/// @brief Polls completions and grants credits until @p test holds (rs_process_cq/rs_get_comp):
///        0, or -1 with errno (EWOULDBLOCK when @p nonblock and it does not hold).
int progress(RSocket& rs, Lock& l, bool nonblock, const Test& test);
/// @brief Posts a 0-byte RDMA WRITE WITH IMM carrying @p msg (rs_post_msg).
int post_msg(RSocket& rs, uint32_t msg);
/// @brief Posts an RDMA WRITE, with the immediate @p msg when @p imm (rs_post_write(_msg)).
int post_write(RSocket& rs, ibv_sge* sgl, int nsge, uint32_t msg, bool imm, int flags, uint64_t addr,
               uint32_t rkey);
/// @brief Whether a data transfer may be posted now (rs_can_send).
bool can_send(const RSocket& rs);
/// @brief Whether received data is queued (rs_have_rdata).
bool have_rdata(const RSocket& rs);
/// @brief Whether a control message may be posted now (rs_ctrl_avail).
bool ctrl_avail(const RSocket& rs);
/// @brief A position in an iovec array: where the next byte is read from or written to.
struct IovCursor {
  const iovec* iov;  ///< current vector
  int cnt;           ///< vectors left, the current one included
  size_t off = 0;    ///< bytes of the current vector already used
  /// @brief Bytes left in the current vector (0 at the end).
  size_t contiguous() const { return cnt > 0 ? iov->iov_len - off : 0; }
  /// @brief The current byte.
  uint8_t* here() const { return static_cast<uint8_t*>(iov->iov_base) + off; }
  /// @brief Moves on by @p n bytes.
  void skip(size_t n);
  /// @brief Copies the next @p n bytes out to @p dst.
  void take(uint8_t* dst, size_t n);
  /// @brief Copies @p n bytes from @p src in.
  void put(const uint8_t* src, size_t n);
};
/// @brief Total bytes of @p iov; -1 with EINVAL for a bad count or a sum that overflows ssize_t.
ssize_t iov_total(const iovec* iov, int iovcnt);

/// @brief Posts @p len bytes taken from @p src as one RDMA WRITE (inline, or copied into the send
///        ring) to @p addr / @p rkey, with the immediate @p msg unless @p direct (rs_write_*).
int write_iov(RSocket& rs, IovCursor& src, uint32_t len, uint32_t msg, bool direct, uint64_t addr,
              uint32_t rkey);
/// @brief Waits until the socket may send (rsend's wait); 0, or -1 with errno.
int wait_send(RSocket& rs, Lock& l, bool nonblock);
/// @brief The bytes of one transfer: olen (doubling up to kMaxTransfer), capped by what is left.
uint32_t next_xfer(uint32_t& olen, size_t left);
/// @brief CLOCK_MONOTONIC in microseconds (busy-poll budgets, rpoll timeouts, keepalive timers).
uint64_t mono_us();
/// @brief Whether calls on @p rs with @p flags must not block.
bool nonblocking(const RSocket& rs, int flags);
/// @brief Waits (or EAGAIN) while the socket is still being connected or accepted; 0 once
///        connected, -1 with errno otherwise. Caller holds @p l.
int wait_connected(RSocket& rs, Lock& l, bool nonblock);

// ---- control (rsocket_ctrl.cpp) ---------------------------------------------------------------

/// @brief Sends the credit update if one is due (rs_update_credits).
void update_credits(RSocket& rs);
/// @brief Sends a keepalive (a 0-byte RDMA WRITE) if a control slot is free (service thread).
void send_keepalive(RSocket& rs);
/// @brief rshutdown's work on a stream socket; caller holds nothing.
int shutdown_stream(RSocket& rs, int how);

// ---- iomap (rsocket_iomap.cpp) ----------------------------------------------------------------

/// @brief Sends the iomap entries not yet sent to the peer (rs_send_iomaps). Caller holds @p l.
int send_iomaps(RSocket& rs, Lock& l, int flags);
/// @brief Reads iomap entry @p index the peer just wrote into our target iomap.
void iomap_updated(RSocket& rs, uint32_t index);
/// @brief Deregisters every riomap buffer.
void free_iomaps(RSocket& rs);

// ---- the service thread (rsocket_svc.cpp) ------------------------------------------------------

/// @brief The service watches @p rs's CM events (listeners: connection requests).
///        No svc_* function may be called with a socket's mutex held.
int svc_watch(RSocket* rs);
/// @brief Keepalives for @p rs every @p seconds start (on) or stop; the timer restarts when @p on
///        is repeated.
int svc_keepalive(RSocket* rs, bool on, unsigned seconds = 0);
/// @brief Forgets @p rs; returns once the service no longer touches it.
void svc_forget(RSocket* rs);
/// @brief Wakes every thread blocked in rpoll/rselect so it looks again (rs_poll_signal).
void poll_signal();
/// @brief This thread's rpoll wake-up descriptor (an eventfd, made on first use).
int poll_sleeper_fd();
/// @brief From now on poll_signal() writes to @p fd (the caller is about to sleep in poll).
void poll_sleep_begin(int fd);
/// @brief poll_signal() forgets @p fd again, and its signal is drained.
void poll_sleep_end(int fd);

}  // namespace hcasim::rdmacm::rs

#endif  // HCASIM_RDMACM_RSOCKET_H
