// SPDX-License-Identifier: Apache-2.0
// rsockets (<rdma/rsocket.h>) through the drop-in librdmacm.so.1, between the two simulated hosts
// of one process (192.0.2.1 and 192.0.2.2), server and client as threads.
//
// RsocketRules (label conformance): each test pins one rule and names its source: the socket
// man pages for the socket API, rsocket(7), and rdma-core 44's librdmacm/docs/rsocket and
// rsocket.c for the protocol (there a hand-written RC peer, made from rdma_cm and verbs only,
// checks the bytes and immediates an rsocket puts on the wire, and sends its own).
// Rsocket (label e2e): streams, polling and teardown as programs use them.
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "sockaddr_util.h"

namespace {

using namespace std::chrono_literals;

std::atomic<uint16_t> next_port{7600};

const sockaddr* sa(const sockaddr_in& a) { return reinterpret_cast<const sockaddr*>(&a); }

/// A pattern that differs at every offset of a long stream (so a lost, doubled or reordered
/// transfer shows).
std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

/// Sends all of @p len (blocking socket).
bool send_all(int fd, const uint8_t* p, size_t len) {
  while (len) {
    const ssize_t n = rsend(fd, p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

/// Receives exactly @p len bytes (blocking socket); false on EOF or error.
bool recv_all(int fd, uint8_t* p, size_t len) {
  while (len) {
    const ssize_t n = rrecv(fd, p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

/// A listening rsocket on 192.0.2.2 and its port.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
  explicit Listener(std::function<void(int)> before_listen = nullptr) {
    port = next_port++;
    fd = rsocket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return;
    if (before_listen) before_listen(fd);
    sockaddr_in a = addr("192.0.2.2", port);
    if (rbind(fd, sa(a), sizeof a) || rlisten(fd, 8)) {
      rclose(fd);
      fd = -1;
    }
  }
  ~Listener() {
    if (fd >= 0) rclose(fd);
  }
};

/// A connected pair: client (192.0.2.1) and the server's accepted socket.
struct Pair {
  int client = -1, server = -1;
  ~Pair() {
    if (client >= 0) rclose(client);
    if (server >= 0) rclose(server);
  }
};

/// Connects a new client to @p l (options set on it first by @p before_connect) and accepts it.
void connect_pair(Listener& l, Pair& p, std::function<void(int)> before_connect = nullptr) {
  ASSERT_GE(l.fd, 0) << strerror(errno);
  p.client = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(p.client, 0) << strerror(errno);
  if (before_connect) before_connect(p.client);
  auto connected = std::async(std::launch::async, [&] {
    sockaddr_in a = addr("192.0.2.2", l.port);
    return rconnect(p.client, sa(a), sizeof a) ? errno : 0;
  });
  pollfd pf{l.fd, POLLIN, 0};
  const int ready = rpoll(&pf, 1, 20000);
  const int e = connected.get();
  EXPECT_EQ(e, 0) << "rconnect: " << strerror(e);
  ASSERT_EQ(ready, 1) << "no connection reached the listener";
  p.server = raccept(l.fd, nullptr, nullptr);
  ASSERT_GE(p.server, 0) << strerror(errno);
}

void set_int(int fd, int level, int name, int v) {
  ASSERT_EQ(rsetsockopt(fd, level, name, &v, sizeof v), 0) << strerror(errno);
}

int get_int(int fd, int level, int name) {
  int v = -12345;
  socklen_t len = sizeof v;
  EXPECT_EQ(rgetsockopt(fd, level, name, &v, &len), 0) << strerror(errno);
  EXPECT_EQ(len, sizeof v);
  return v;
}

// ===========================================================================================
// The stream as programs use it (e2e)
// ===========================================================================================

// Sizes from 1 byte to several MiB, each echoed back and compared byte for byte. The receive
// buffers are 128 KiB (rdma-core's default), so the larger transfers wait for the peer's credit
// updates and new target buffers many times over.
TEST(Rsocket, EchoOfManySizesArrivesIntact) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  const std::vector<size_t> sizes{1,    7,     63,    64,     65,      2047,          2048,
                                  4097, 65535, 65536, 100000, 1 << 20, (3 << 20) + 17};
  std::thread echo([&] {
    std::vector<uint8_t> buf(1 << 16);
    for (;;) {
      const ssize_t n = rrecv(p.server, buf.data(), buf.size(), 0);
      if (n <= 0 || !send_all(p.server, buf.data(), size_t(n))) return;
    }
  });
  uint32_t seed = 1;
  for (size_t n : sizes) {
    const std::vector<uint8_t> out = pattern(n, seed++);
    std::vector<uint8_t> in(n);
    auto sent = std::async(std::launch::async, [&] { return send_all(p.client, out.data(), n); });
    ASSERT_TRUE(recv_all(p.client, in.data(), n)) << n << " bytes: " << strerror(errno);
    ASSERT_TRUE(sent.get());
    ASSERT_EQ(in, out) << n << " bytes came back changed";
  }
  ASSERT_EQ(rshutdown(p.client, SHUT_RDWR), 0);
  echo.join();
}

// Both directions at once, each 4 MiB, with small buffers (SO_RCVBUF 8 KiB: 16 KiB receive
// buffers) and queues (RDMA_SQSIZE / RDMA_RQSIZE 16): credits and buffers run out all the time.
TEST(Rsocket, BothDirectionsAtOnceWithSmallBuffersAndQueues) {
  auto small = [](int fd) {
    set_int(fd, SOL_SOCKET, SO_RCVBUF, 8192);
    set_int(fd, SOL_SOCKET, SO_SNDBUF, 8192);
    set_int(fd, SOL_RDMA, RDMA_SQSIZE, 16);
    set_int(fd, SOL_RDMA, RDMA_RQSIZE, 16);
  };
  Listener l(small);
  Pair p;
  connect_pair(l, p, small);
  const size_t n = 4 << 20;
  const std::vector<uint8_t> a = pattern(n, 11), b = pattern(n, 12);
  std::vector<uint8_t> at_server(n), at_client(n);
  auto s1 = std::async(std::launch::async, [&] { return send_all(p.client, a.data(), n); });
  auto s2 = std::async(std::launch::async, [&] { return send_all(p.server, b.data(), n); });
  auto r1 = std::async(std::launch::async, [&] { return recv_all(p.server, at_server.data(), n); });
  ASSERT_TRUE(recv_all(p.client, at_client.data(), n)) << strerror(errno);
  ASSERT_TRUE(r1.get());
  ASSERT_TRUE(s1.get());
  ASSERT_TRUE(s2.get());
  EXPECT_EQ(at_server, a);
  EXPECT_EQ(at_client, b);
}

// rwritev gathers, rreadv / rrecvmsg scatter over every vector, in order.
TEST(Rsocket, VectorsAreGatheredAndScattered) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  const std::vector<uint8_t> data = pattern(300000, 3);
  iovec out[3] = {{const_cast<uint8_t*>(data.data()), 5},
                  {const_cast<uint8_t*>(data.data()) + 5, 100000},
                  {const_cast<uint8_t*>(data.data()) + 100005, 199995}};
  auto sent = std::async(std::launch::async, [&] {
    ssize_t total = 0;
    while (total < ssize_t(data.size())) {
      const ssize_t n = total ? rsend(p.client, data.data() + total, data.size() - size_t(total), 0)
                              : rwritev(p.client, out, 3);
      if (n <= 0) return ssize_t(-1);
      total += n;
    }
    return total;
  });
  std::vector<uint8_t> in(data.size());
  size_t got = 0;
  while (got < in.size()) {
    const size_t left = in.size() - got;
    iovec v[2] = {{in.data() + got, std::min<size_t>(left, 3)},
                  {in.data() + got + std::min<size_t>(left, 3), left - std::min<size_t>(left, 3)}};
    msghdr m{};
    m.msg_iov = v;
    m.msg_iovlen = 2;
    const ssize_t n = got % 2 ? rreadv(p.server, v, 2) : rrecvmsg(p.server, &m, 0);
    ASSERT_GT(n, 0) << strerror(errno);
    got += size_t(n);
  }
  EXPECT_EQ(sent.get(), ssize_t(data.size()));
  EXPECT_EQ(in, data);
}

// rpoll over an rsocket and a pipe together: each wakes it on its own, and nothing ready is a
// timeout (0).
TEST(Rsocket, RpollMixesRsocketsAndOrdinaryDescriptors) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pollfd fds[2] = {{p.server, POLLIN, 0}, {pipefd[0], POLLIN, 0}};
  EXPECT_EQ(rpoll(fds, 2, 100), 0) << "nothing is ready";
  std::thread w([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(write(pipefd[1], "x", 1), 1);
  });
  ASSERT_EQ(rpoll(fds, 2, 5000), 1);
  w.join();
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_EQ(fds[1].revents, POLLIN);
  char c;
  ASSERT_EQ(read(pipefd[0], &c, 1), 1);
  std::thread s([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(rsend(p.client, "y", 1, 0), 1);
  });
  ASSERT_EQ(rpoll(fds, 2, 5000), 1) << "the rsocket's data must wake rpoll";
  s.join();
  EXPECT_EQ(fds[0].revents, POLLIN);
  EXPECT_EQ(fds[1].revents, 0);
  fds[0].events = POLLOUT;
  ASSERT_EQ(rpoll(fds, 1, 0), 1);
  EXPECT_EQ(fds[0].revents, POLLOUT) << "credits and a target buffer: writable";
  close(pipefd[0]);
  close(pipefd[1]);
}

// rselect: the same with fd_sets; only the ready descriptors stay set.
TEST(Rsocket, RselectMixesRsocketsAndOrdinaryDescriptors) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  ASSERT_EQ(rsend(p.client, "z", 1, 0), 1);
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(p.server, &rd);
  FD_SET(pipefd[0], &rd);
  timeval tv{5, 0};
  ASSERT_EQ(rselect(std::max(p.server, pipefd[0]) + 1, &rd, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(p.server, &rd));
  EXPECT_FALSE(FD_ISSET(pipefd[0], &rd));
  close(pipefd[0]);
  close(pipefd[1]);
}

// The program closes with data it never read: the peer reads what it can, then the end (0), and
// its sends fail; neither side hangs.
TEST(Rsocket, CloseWithUnreadDataEndsThePeer) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  const std::vector<uint8_t> data = pattern(50000, 5);
  ASSERT_TRUE(send_all(p.server, data.data(), data.size()));
  auto closed = std::async(std::launch::async, [&] { return rclose(std::exchange(p.client, -1)); });
  ASSERT_EQ(closed.wait_for(20s), std::future_status::ready) << "rclose hung";
  EXPECT_EQ(closed.get(), 0);
  char c;
  EXPECT_EQ(rrecv(p.server, &c, 1, 0), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rsend(p.server, "x", 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
}

// A throughput run of rstream's shape: 1 MiB messages one way, a 16-byte answer back.
TEST(Rsocket, LargeMessagesWithShortAnswers) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  const std::vector<uint8_t> msg = pattern(1 << 20, 7);
  std::thread server([&] {
    std::vector<uint8_t> in(msg.size());
    for (int i = 0; i < 8; ++i) {
      if (!recv_all(p.server, in.data(), in.size()) || in != msg) return;
      if (!send_all(p.server, in.data(), 16)) return;
    }
  });
  uint8_t ack[16];
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(send_all(p.client, msg.data(), msg.size()));
    ASSERT_TRUE(recv_all(p.client, ack, sizeof ack)) << "round " << i;
    ASSERT_EQ(std::memcmp(ack, msg.data(), 16), 0);
  }
  server.join();
}

// ===========================================================================================
// A hand-written rsocket peer: rdma_cm and verbs only
// ===========================================================================================

// rdma-core 44's wire structures, written here from librdmacm/docs/rsocket and rsocket.c
// independently of the library's own definitions: a change on either side shows.
struct WireSge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
struct WireConnData {  // struct rs_conn_data, every field big-endian
  uint8_t version;
  uint8_t flags;
  uint16_t credits;
  uint8_t reserved[3];
  uint8_t target_iomap_size;
  WireSge target_sgl;
  WireSge data_buf;
};
static_assert(sizeof(WireConnData) == 40, "rs_conn_data is 40 bytes");
constexpr uint32_t kOpData = 0, kOpSgl = 4, kOpIomapSgl = 6, kOpCtrl = 7;
constexpr uint32_t kCtrlDisconnect = 0, kCtrlShutdown = 2;
constexpr uint32_t msg(uint32_t op, uint32_t data) { return op << 29 | data; }

/// An RC endpoint that speaks the rsocket protocol by hand: it publishes one receive buffer
/// and a two-entry target SGL in its connection data, and reads what arrives.
class RawPeer {
 public:
  static constexpr uint32_t kHalf = 4096;
  RawPeer() {
    ch_ = rdma_create_event_channel();
    rbuf_.resize(2 * kHalf);
  }
  ~RawPeer() {
    drain();
    if (id_) {
      if (id_->qp) rdma_destroy_qp(id_);
      dereg();
      rdma_destroy_id(id_);
    }
    if (cq_) ibv_destroy_cq(cq_);
    if (listen_) rdma_destroy_id(listen_);
    rdma_destroy_event_channel(ch_);
  }
  void listen(uint16_t port) {
    ASSERT_EQ(rdma_create_id(ch_, &listen_, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in a = addr("192.0.2.2", port);
    ASSERT_EQ(rdma_bind_addr(listen_, const_cast<sockaddr*>(sa(a))), 0);
    ASSERT_EQ(rdma_listen(listen_, 2), 0);
  }
  /// Waits for a connection request; returns its private data.
  std::vector<uint8_t> request() {
    rdma_cm_event* e = event(RDMA_CM_EVENT_CONNECT_REQUEST);
    if (!e) return {};
    id_ = e->id;
    const auto* p = static_cast<const uint8_t*>(e->param.conn.private_data);
    std::vector<uint8_t> pd(p, p + e->param.conn.private_data_len);
    rdma_ack_cm_event(e);
    return pd;
  }
  /// Accepts the request with @p credits and our buffers; waits for ESTABLISHED.
  void accept(const std::vector<uint8_t>& req, uint16_t credits) {
    ASSERT_GE(req.size(), sizeof theirs_);
    std::memcpy(&theirs_, req.data(), sizeof theirs_);
    make_qp();
    WireConnData mine = conn_data(credits);
    rdma_conn_param p{};
    p.private_data = &mine;
    p.private_data_len = sizeof mine;
    p.rnr_retry_count = 7;
    ASSERT_EQ(rdma_accept(id_, &p), 0) << strerror(errno);
    rdma_ack_cm_event(event(RDMA_CM_EVENT_ESTABLISHED));
  }
  /// Refuses the request.
  void reject() {
    ASSERT_EQ(rdma_reject(id_, nullptr, 0), 0);
    rdma_destroy_id(std::exchange(id_, nullptr));
  }
  /// Connects to an rsocket listening on 192.0.2.2:@p port with @p credits.
  void connect(uint16_t port, uint16_t credits) {
    ASSERT_EQ(rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = addr("192.0.2.2", port);
    ASSERT_EQ(rdma_resolve_addr(id_, nullptr, const_cast<sockaddr*>(sa(dst)), 2000), 0);
    rdma_ack_cm_event(event(RDMA_CM_EVENT_ADDR_RESOLVED));
    ASSERT_EQ(rdma_resolve_route(id_, 2000), 0);
    rdma_ack_cm_event(event(RDMA_CM_EVENT_ROUTE_RESOLVED));
    make_qp();
    WireConnData mine = conn_data(credits);
    rdma_conn_param p{};
    p.private_data = &mine;
    p.private_data_len = sizeof mine;
    p.retry_count = p.rnr_retry_count = 7;
    ASSERT_EQ(rdma_connect(id_, &p), 0);
    rdma_cm_event* e = event(RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_NE(e, nullptr);
    ASSERT_GE(e->param.conn.private_data_len, sizeof theirs_);
    std::memcpy(&theirs_, e->param.conn.private_data, sizeof theirs_);
    rdma_ack_cm_event(e);
  }
  struct Msg {
    uint32_t imm = 0;  // host order (the wire's big-endian value, decoded)
    uint32_t len = 0;
    bool ok = false;
  };
  /// The next message the peer wrote with an immediate.
  Msg next(std::chrono::milliseconds wait = 5000ms) {
    const auto end = std::chrono::steady_clock::now() + wait;
    ibv_wc wc{};
    while (std::chrono::steady_clock::now() < end) {
      const int n = ibv_poll_cq(cq_, 1, &wc);
      if (n == 0) {
        std::this_thread::sleep_for(200us);
        continue;
      }
      if (!(wc.wr_id & 1)) continue;  // our own send
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
      EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      repost();
      return Msg{be32toh(wc.imm_data), wc.byte_len, true};
    }
    return Msg{};
  }
  /// The next message that is not a credit update (those are counted).
  Msg next_not_sgl() {
    for (;;) {
      Msg m = next();
      if (!m.ok || m.imm >> 29 != kOpSgl) return m;
      ++sgl_seen;
    }
  }
  /// An RDMA WRITE WITH IMM of @p len bytes to @p raddr / @p rkey, immediate @p imm (host order).
  void write(uint32_t imm, const void* data, uint32_t len, uint64_t raddr, uint32_t rkey) {
    if (len) std::memcpy(sbuf_, data, len);
    ibv_sge sge{reinterpret_cast<uintptr_t>(sbuf_), len, smr_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 0;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htobe32(imm);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ASSERT_EQ(ibv_post_send(id_->qp, &wr, &bad), 0);
  }
  /// Data into the rsocket's first receive buffer (its data_buf), at @p off.
  void write_data(const void* data, uint32_t len, uint32_t off = 0) {
    write(msg(kOpData, len), data, len, be64toh(theirs_.data_buf.addr) + off, be32toh(theirs_.data_buf.key));
  }
  /// A control message (0 bytes).
  void write_ctrl(uint32_t op, uint32_t data) { write(msg(op, data), nullptr, 0, 0, 0); }
  /// A new target buffer into entry @p entry of the rsocket's target SGL, with @p credits.
  void publish(int entry, uint64_t buf, uint32_t key, uint32_t len, uint32_t credits) {
    const WireSge s{buf, key, len};  // host order: both ends are little-endian (no NET flag)
    write(msg(kOpSgl, credits), &s, sizeof s, be64toh(theirs_.target_sgl.addr) + entry * sizeof s,
          be32toh(theirs_.target_sgl.key));
  }
  /// Gone without a word: the QP vanishes, the CM id stays (no DREQ).
  void drop_qp() {
    drain();
    rdma_destroy_qp(id_);
  }
  /// Gone as a killed process on Linux is: its CM id is destroyed (a DREQ), no disconnect message.
  void drop_id() {
    drain();
    rdma_destroy_qp(id_);
    dereg();
    rdma_destroy_id(std::exchange(id_, nullptr));
  }
  uint8_t* rbuf() { return rbuf_.data(); }
  WireSge target_entry(int i) const {
    WireSge s;
    std::memcpy(&s, target_ + i * sizeof s, sizeof s);
    return s;
  }
  const WireConnData& theirs() const { return theirs_; }
  uint32_t rkey() const { return rmr_->rkey; }
  int sgl_seen = 0;

 private:
  rdma_cm_event* event(rdma_cm_event_type want) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(ch_, &e)) {
      ADD_FAILURE() << "rdma_get_cm_event: " << strerror(errno);
      return nullptr;
    }
    EXPECT_EQ(e->event, want) << rdma_event_str(e->event) << " status " << e->status;
    return e;
  }
  void make_qp() {
    cq_ = ibv_create_cq(id_->verbs, 64, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    ASSERT_EQ(rdma_create_qp(id_, nullptr, &a), 0) << strerror(errno);
    constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    rmr_ = ibv_reg_mr(id_->pd, rbuf_.data(), rbuf_.size(), kRemote);
    tmr_ = ibv_reg_mr(id_->pd, target_, sizeof target_, kRemote);
    smr_ = ibv_reg_mr(id_->pd, sbuf_, sizeof sbuf_, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(rmr_ && tmr_ && smr_);
    for (int i = 0; i < 16; ++i) repost();
  }
  /// Takes our own send completions (a CQ is not destroyed with completions unseen).
  void drain() {
    ibv_wc wc[8];
    while (cq_ && ibv_poll_cq(cq_, 8, wc) > 0) {
    }
  }
  void repost() {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = 1;
    ASSERT_EQ(ibv_post_recv(id_->qp, &wr, &bad), 0);
  }
  void dereg() {
    for (ibv_mr** mr : {&rmr_, &tmr_, &smr_})
      if (*mr) ibv_dereg_mr(std::exchange(*mr, nullptr));
  }
  WireConnData conn_data(uint16_t credits) {
    WireConnData c{};
    c.version = 1;
    c.flags = 2;  // iomap size given (none), little-endian
    c.credits = htobe16(credits);
    c.target_sgl = WireSge{htobe64(reinterpret_cast<uintptr_t>(target_)), htobe32(tmr_->rkey), htobe32(2)};
    c.data_buf =
        WireSge{htobe64(reinterpret_cast<uintptr_t>(rbuf_.data())), htobe32(rmr_->rkey), htobe32(kHalf)};
    return c;
  }
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listen_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr *rmr_ = nullptr, *tmr_ = nullptr, *smr_ = nullptr;
  std::vector<uint8_t> rbuf_;
  alignas(64) uint8_t target_[2 * sizeof(WireSge)] = {};
  alignas(64) uint8_t sbuf_[4096] = {};
  WireConnData theirs_{};
};

/// An rsocket client (options by @p setup) connecting in the background to a RawPeer listening
/// on a fresh port; the peer holds the request.
struct RawServer {
  RawPeer peer;
  uint16_t port = next_port++;
  int fd = -1;
  std::future<int> connected;
  std::vector<uint8_t> req;
  explicit RawServer(std::function<void(int)> setup = nullptr) {
    peer.listen(port);
    fd = rsocket(AF_INET, SOCK_STREAM, 0);
    if (setup) setup(fd);
    connected = std::async(std::launch::async, [this] {
      sockaddr_in a = addr("192.0.2.2", port);
      return rconnect(fd, sa(a), sizeof a) ? errno : 0;
    });
    req = peer.request();
  }
  ~RawServer() {
    if (connected.valid()) connected.wait();
    rclose(fd);
  }
};

// ===========================================================================================
// Rules, each with its source (conformance)
// ===========================================================================================

// rsocket's connection request (librdmacm/docs/rsocket "Connection Establishment"; rsocket.c
// rs_format_conn_data): the REQ's private data is a 40-byte struct rs_conn_data, big-endian:
// version 1; flags RS_CONN_FLAG_IOMAP (and RS_CONN_FLAG_NET only on a big-endian host); the
// initial credits = the receive queue size; the scaled iomap size; the target SGL (2 entries)
// and the first receive buffer, half the receive buffer (SO_RCVBUF doubled, as on Linux).
// A rejection is connect(2)'s ECONNREFUSED.
TEST(RsocketRules, ConnectRequestCarriesRsConnDataInRdmaCoresLayout) {
  RawServer s([](int fd) {
    set_int(fd, SOL_RDMA, RDMA_RQSIZE, 100);
    set_int(fd, SOL_SOCKET, SO_RCVBUF, 4096);
    set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 3);
  });
  ASSERT_GE(s.req.size(), sizeof(WireConnData));
  WireConnData c;
  std::memcpy(&c, s.req.data(), sizeof c);
  EXPECT_EQ(c.version, 1);
  EXPECT_EQ(c.flags, __BYTE_ORDER == __BIG_ENDIAN ? 3 : 2);
  EXPECT_EQ(be16toh(c.credits), 100);
  EXPECT_EQ(c.reserved[0] | c.reserved[1] | c.reserved[2], 0);
  EXPECT_EQ(c.target_iomap_size, 3);
  EXPECT_EQ(be32toh(c.target_sgl.length), 2u) << "RS_SGL_SIZE entries";
  EXPECT_NE(be64toh(c.target_sgl.addr), 0u);
  EXPECT_EQ(be32toh(c.data_buf.length), 4096u) << "half of the 8 KiB receive buffer";
  EXPECT_NE(be64toh(c.data_buf.addr), 0u);
  s.peer.reject();
  ASSERT_EQ(s.connected.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(s.connected.get(), ECONNREFUSED);
  errno = 0;
  EXPECT_EQ(rsend(s.fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE) << "a socket that never connected";
}

// rsocket messages (librdmacm/docs/rsocket "Message Format"; rsocket.c rs_msg_set, rs_post_msg,
// rs_send_credits, rshutdown): data is an RDMA WRITE WITH IMM into the buffer the peer
// published, the immediate (big-endian on the wire) 000b in bits 31:29 and the byte count
// below; a credit update is 100b with the new credit limit (received + the receive queue size),
// writing the next free half of the receive buffer into entry 1, then 0, ... of the peer's
// target SGL; SHUT_WR sends control 111b/2 (shutdown) with no data. In the other direction the
// rsocket takes data written into its first buffer, and control 111b/0 (disconnect) ends it:
// the reader sees the end (0) and writing is ECONNRESET.
TEST(RsocketRules, MessagesAreRdmaWritesWithRdmaCoresImmediates) {
  RawServer s;
  s.peer.accept(s.req, 16);
  ASSERT_EQ(s.connected.get(), 0);
  const WireConnData c = s.peer.theirs();
  ASSERT_EQ(rsend(s.fd, "hello", 5, 0), 5);
  RawPeer::Msg m = s.peer.next_not_sgl();
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(m.imm, msg(kOpData, 5));
  EXPECT_EQ(m.len, 5u);
  EXPECT_EQ(std::memcmp(s.peer.rbuf(), "hello", 5), 0) << "data lands at the start of the published buffer";

  char b[8];
  EXPECT_EQ(rrecv(s.fd, b, sizeof b, MSG_DONTWAIT), -1);  // its first look at completions grants credits
  EXPECT_EQ(errno, EAGAIN);
  if (!s.peer.sgl_seen) {
    m = s.peer.next();
    ASSERT_TRUE(m.ok);
    EXPECT_EQ(m.imm, msg(kOpSgl, 384)) << "0 received + the default receive queue of 384";
    EXPECT_EQ(m.len, 16u) << "with a new buffer";
  }
  const WireSge e1 = s.peer.target_entry(1);
  EXPECT_EQ(e1.addr, be64toh(c.data_buf.addr) + be32toh(c.data_buf.length)) << "the second half";
  EXPECT_EQ(e1.length, be32toh(c.data_buf.length));
  EXPECT_EQ(e1.key, be32toh(c.data_buf.key));

  s.peer.write_data("world", 5);
  ASSERT_EQ(rrecv(s.fd, b, sizeof b, 0), 5);
  EXPECT_EQ(std::memcmp(b, "world", 5), 0);

  ASSERT_EQ(rshutdown(s.fd, SHUT_WR), 0);
  m = s.peer.next_not_sgl();
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(m.imm, msg(kOpCtrl, kCtrlShutdown));
  EXPECT_EQ(m.len, 0u);
  errno = 0;
  EXPECT_EQ(rsend(s.fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE) << "send(2) after shutdown(SHUT_WR)";

  s.peer.write_ctrl(kOpCtrl, kCtrlDisconnect);
  EXPECT_EQ(rrecv(s.fd, b, sizeof b, 0), 0) << strerror(errno);
}

// Flow control (librdmacm/docs/rsocket "Data Streaming"): sending needs a credit (one per
// message, as many as the peer's connection data or last credit update grants) and room in the
// current target buffer; a buffer is used up before the next, which the peer publishes by
// writing an SGE into the target SGL (entry 1 first, since entry 0 came in the connection data).
TEST(RsocketRules, SendingWaitsForCreditsAndPublishedBuffers) {
  RawServer s;
  s.peer.accept(s.req, 2);
  ASSERT_EQ(s.connected.get(), 0);
  std::vector<uint8_t> data = pattern(RawPeer::kHalf, 9);
  ASSERT_EQ(rsend(s.fd, data.data(), 100, MSG_DONTWAIT), 100);
  ASSERT_EQ(rsend(s.fd, data.data() + 100, 100, MSG_DONTWAIT), 100);
  errno = 0;
  EXPECT_EQ(rsend(s.fd, data.data() + 200, 100, MSG_DONTWAIT), -1) << "2 credits, 2 messages";
  EXPECT_EQ(errno, EAGAIN);
  pollfd pf{s.fd, POLLOUT, 0};
  EXPECT_EQ(rpoll(&pf, 1, 50), 0) << "not writable without credits";
  for (int i = 0; i < 2; ++i) {
    const RawPeer::Msg m = s.peer.next_not_sgl();
    EXPECT_EQ(m.imm, msg(kOpData, 100));
  }
  s.peer.write_ctrl(kOpSgl, 100);  // credits up to 100, no new buffer (0 bytes)
  ASSERT_EQ(rpoll(&pf, 1, 5000), 1);
  size_t sent = 200;
  while (sent < data.size()) {  // fill the rest of the first buffer
    const ssize_t n = rsend(s.fd, data.data() + sent, data.size() - sent, MSG_DONTWAIT);
    ASSERT_GT(n, 0) << strerror(errno);
    sent += size_t(n);
  }
  errno = 0;
  EXPECT_EQ(rsend(s.fd, "abc", 3, MSG_DONTWAIT), -1) << "the published buffer is full";
  EXPECT_EQ(errno, EAGAIN);
  for (size_t got = 200; got < data.size();) got += s.peer.next_not_sgl().len;
  EXPECT_EQ(std::memcmp(s.peer.rbuf(), data.data(), data.size()), 0);
  s.peer.publish(1, reinterpret_cast<uintptr_t>(s.peer.rbuf()) + RawPeer::kHalf, s.peer.rkey(),
                 RawPeer::kHalf, 100);
  ASSERT_EQ(rpoll(&pf, 1, 5000), 1);
  ASSERT_EQ(rsend(s.fd, "abc", 3, 0), 3);
  const RawPeer::Msg m = s.peer.next_not_sgl();
  EXPECT_EQ(m.imm, msg(kOpData, 3));
  EXPECT_EQ(std::memcmp(s.peer.rbuf() + RawPeer::kHalf, "abc", 3), 0) << "into the buffer just published";
}

// A peer that dies: its kernel destroys its CM id, which sends a DREQ, but no rsocket disconnect
// message comes (Linux ucma_close; IBTA 12.9.6). A receive blocked on the accepted socket ends
// as recv(2) does when the peer's end is gone: 0; a send is ECONNRESET.
TEST(RsocketRules, PeerWhoseCmIdIsDestroyedEndsABlockedReceive) {
  Listener l;
  ASSERT_GE(l.fd, 0);
  auto accepted = std::async(std::launch::async, [&] { return raccept(l.fd, nullptr, nullptr); });
  RawPeer peer;
  peer.connect(l.port, 16);
  ASSERT_EQ(accepted.wait_for(20s), std::future_status::ready);
  const int fd = accepted.get();
  ASSERT_GE(fd, 0);
  auto received = std::async(std::launch::async, [fd] {
    char c;
    return rrecv(fd, &c, 1, 0);
  });
  EXPECT_EQ(received.wait_for(200ms), std::future_status::timeout) << "nothing to read yet";
  peer.drop_id();
  ASSERT_EQ(received.wait_for(20s), std::future_status::ready) << "the receive never ended";
  EXPECT_EQ(received.get(), 0);
  errno = 0;
  EXPECT_EQ(rsend(fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  rclose(fd);
}

// SO_KEEPALIVE with TCP_KEEPIDLE (rsocket(7); rsocket.c tcp_svc_send_keepalive: a 0-byte RDMA
// WRITE every keepalive time): a peer that vanished without a word (its QP gone, no CM
// message, as a process killed on the simulator's fabric) is found, and a blocked receive
// fails instead of waiting for ever.
TEST(RsocketRules, KeepaliveFindsAPeerThatVanished) {
  RawServer s([](int fd) {
    set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
    set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, 1);
  });
  s.peer.accept(s.req, 16);
  ASSERT_EQ(s.connected.get(), 0);
  EXPECT_EQ(get_int(s.fd, SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(get_int(s.fd, IPPROTO_TCP, TCP_KEEPIDLE), 1);
  auto received = std::async(std::launch::async, [&] {
    char c;
    const ssize_t n = rrecv(s.fd, &c, 1, 0);
    return n < 0 ? -errno : n;
  });
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(received.wait_for(0s), std::future_status::timeout) << "a live peer answers the keepalives";
  EXPECT_EQ(s.peer.next(0ms).ok, false) << "keepalives take no receive";
  s.peer.drop_qp();
  ASSERT_EQ(received.wait_for(40s), std::future_status::ready) << "the vanished peer was never noticed";
  EXPECT_EQ(received.get(), -ECONNRESET);
}

// connect(2) on a non-blocking socket (rsocket(7): O_NONBLOCK): EINPROGRESS, then the socket
// polls writable once connected and SO_ERROR reads 0; to a port nobody listens on it polls
// with POLLERR and SO_ERROR is ECONNREFUSED (the REJ, IBTA 12.6.7 reason 8).
TEST(RsocketRules, NonblockingConnectIsEinprogressThenWritable) {
  Listener l;
  ASSERT_GE(l.fd, 0);
  const int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rfcntl(fd, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(rfcntl(fd, F_GETFL), O_NONBLOCK);
  sockaddr_in a = addr("192.0.2.2", l.port);
  errno = 0;
  auto accepted = std::async(std::launch::async, [&] { return raccept(l.fd, nullptr, nullptr); });
  const int ret = rconnect(fd, sa(a), sizeof a);
  if (ret) {  // it may also have connected at once
    ASSERT_EQ(errno, EINPROGRESS);
    errno = 0;
    EXPECT_EQ(rconnect(fd, sa(a), sizeof a), -1);
    EXPECT_TRUE(errno == EALREADY || errno == EISCONN) << strerror(errno);
  }
  pollfd pf{fd, POLLOUT, 0};
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(rpoll(&pf, 1, 10000), 1);
  // Woken when the connection comes up, not at rpoll's next periodic look (wake_up_interval, 5 s).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_EQ(pf.revents, POLLOUT);
  EXPECT_EQ(get_int(fd, SOL_SOCKET, SO_ERROR), 0);
  const int server = accepted.get();
  ASSERT_GE(server, 0);
  EXPECT_EQ(rsend(fd, "ok", 2, 0), 2);
  char b[2];
  ASSERT_EQ(rrecv(server, b, 2, MSG_WAITALL), 2);
  errno = 0;
  EXPECT_EQ(rconnect(fd, sa(a), sizeof a), -1);
  EXPECT_EQ(errno, EISCONN);
  rclose(server);
  rclose(fd);

  const int lone = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in nobody = addr("192.0.2.2", next_port++);
  errno = 0;
  ASSERT_EQ(rconnect(lone, sa(nobody), sizeof nobody), -1);
  if (errno != ECONNREFUSED) {  // the REJ may be there before rconnect returns
    ASSERT_EQ(errno, EINPROGRESS);
    pf = pollfd{lone, POLLOUT, 0};
    ASSERT_EQ(rpoll(&pf, 1, 10000), 1);
    EXPECT_TRUE(pf.revents & POLLERR);
    EXPECT_EQ(get_int(lone, SOL_SOCKET, SO_ERROR), ECONNREFUSED);
  }
  EXPECT_EQ(get_int(lone, SOL_SOCKET, SO_ERROR), 0) << "reading SO_ERROR clears it";
  rclose(lone);
}

// recv(2) MSG_PEEK returns data without taking it; the next receive returns it again.
TEST(RsocketRules, MsgPeekLeavesTheDataQueued) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  ASSERT_EQ(rsend(p.client, "abcdef", 6, 0), 6);
  char b[8] = {};
  pollfd pf{p.server, POLLIN, 0};
  ASSERT_EQ(rpoll(&pf, 1, 5000), 1);
  ASSERT_EQ(rrecv(p.server, b, 4, MSG_PEEK), 4);
  EXPECT_EQ(std::string(b, 4), "abcd");
  ASSERT_EQ(rrecv(p.server, b, 8, MSG_PEEK), 6);
  EXPECT_EQ(std::string(b, 6), "abcdef");
  ASSERT_EQ(rrecv(p.server, b, 2, 0), 2);
  EXPECT_EQ(std::string(b, 2), "ab");
  ASSERT_EQ(rrecv(p.server, b, 8, MSG_PEEK), 4);
  EXPECT_EQ(std::string(b, 4), "cdef");
  ASSERT_EQ(rrecv(p.server, b, 8, 0), 4);
  EXPECT_EQ(std::string(b, 4), "cdef");
  errno = 0;
  EXPECT_EQ(rrecv(p.server, b, 8, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
}

// shutdown(2): after SHUT_WR the peer reads what was sent, then the end (0), and can still
// send back; the shut-down side's sends are EPIPE; after SHUT_RD its own receives return 0.
// SHUT_RDWR ends both, and the peer's reads end too.
TEST(RsocketRules, ShutdownGivesThePeerEndOfFileAfterTheData) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  ASSERT_EQ(rsend(p.client, "last", 4, 0), 4);
  ASSERT_EQ(rshutdown(p.client, SHUT_WR), 0);
  char b[8];
  ASSERT_EQ(rrecv(p.server, b, 8, MSG_WAITALL), 4) << "the data, then the end";
  EXPECT_EQ(rrecv(p.server, b, 8, 0), 0);
  errno = 0;
  EXPECT_EQ(rsend(p.client, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  ASSERT_EQ(rsend(p.server, "back", 4, 0), 4) << "the other direction still works";
  ASSERT_EQ(rrecv(p.client, b, 4, MSG_WAITALL), 4);
  EXPECT_EQ(std::string(b, 4), "back");
  ASSERT_EQ(rshutdown(p.server, SHUT_RD), 0);
  EXPECT_EQ(rrecv(p.server, b, 8, 0), 0) << "after SHUT_RD";
  ASSERT_EQ(rshutdown(p.server, SHUT_RDWR), 0);
  EXPECT_EQ(rrecv(p.client, b, 8, 0), 0) << "the peer's end";
  errno = 0;
  EXPECT_EQ(rshutdown(p.client, 7), -1);
  EXPECT_EQ(errno, EINVAL);
}

// accept(2) and recv(2) with O_NONBLOCK / MSG_DONTWAIT: EAGAIN when nothing is there; a
// listener polls readable once a connection waits; MSG_WAITALL waits for all the bytes.
TEST(RsocketRules, NonblockingAcceptAndReceiveSayEagain) {
  Listener l;
  ASSERT_EQ(rfcntl(l.fd, F_SETFL, O_NONBLOCK), 0);
  errno = 0;
  EXPECT_EQ(raccept(l.fd, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);
  const int c = rsocket(AF_INET, SOCK_STREAM, 0);
  auto connected = std::async(std::launch::async, [&] {
    sockaddr_in a = addr("192.0.2.2", l.port);
    return rconnect(c, sa(a), sizeof a);
  });
  pollfd pf{l.fd, POLLIN, 0};
  ASSERT_EQ(rpoll(&pf, 1, 10000), 1);
  EXPECT_EQ(pf.revents, POLLIN);
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  const int s = raccept(l.fd, reinterpret_cast<sockaddr*>(&peer), &len);
  ASSERT_GE(s, 0) << strerror(errno);
  EXPECT_EQ(len, sizeof peer);
  EXPECT_EQ(peer.sin_addr.s_addr, addr("192.0.2.1", 0).sin_addr.s_addr);
  ASSERT_EQ(connected.get(), 0);
  char b[6];
  errno = 0;
  EXPECT_EQ(rrecv(s, b, 6, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  std::thread w([&] {
    EXPECT_EQ(rsend(c, "abc", 3, 0), 3);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(rsend(c, "def", 3, 0), 3);
  });
  EXPECT_EQ(rrecv(s, b, 6, MSG_WAITALL), 6);
  EXPECT_EQ(std::string(b, 6), "abcdef");
  w.join();
  rclose(s);
  rclose(c);
}

// rsocket(7) riomap / riowrite: a buffer mapped PROT_WRITE at an offset (the peer allows
// RDMA_IOMAPSIZE mappings) is written directly by the peer's riowrite, no receive involved;
// data sent after it arrives after it. riounmap removes the mapping; only PROT_NONE / PROT_WRITE
// are taken; more mappings than the peer allows are ENOMEM; an offset nothing maps is EINVAL.
TEST(RsocketRules, RiowriteLandsInTheMappedBuffer) {
  auto two = [](int fd) { set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 2); };
  Listener l(two);
  Pair p;
  connect_pair(l, p, two);
  std::vector<uint8_t> target(100000, 0);
  ASSERT_EQ(riomap(p.server, target.data(), target.size(), PROT_WRITE, 0, 4096), 4096);
  std::vector<uint8_t> other(64);
  EXPECT_EQ(riomap(p.server, other.data(), other.size(), PROT_WRITE, 0, -1),
            off_t(reinterpret_cast<uintptr_t>(other.data())));
  errno = 0;
  EXPECT_EQ(riomap(p.server, other.data(), other.size(), PROT_WRITE, 0, 0), -1) << "the peer allows 2";
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(riomap(p.server, other.data(), other.size(), PROT_READ, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rsend(p.server, "m", 1, 0), 1);  // takes the mappings along
  char c;
  ASSERT_EQ(rrecv(p.client, &c, 1, 0), 1);
  const std::vector<uint8_t> data = pattern(90000, 4);
  ASSERT_EQ(riowrite(p.client, data.data(), data.size(), 4096 + 1000, 0), data.size());
  ASSERT_EQ(rsend(p.client, "d", 1, 0), 1);
  ASSERT_EQ(rrecv(p.server, &c, 1, 0), 1);
  EXPECT_EQ(c, 'd');
  EXPECT_TRUE(std::equal(data.begin(), data.end(), target.begin() + 1000));
  EXPECT_EQ(target[999], 0);
  EXPECT_EQ(riowrite(p.client, data.data(), 20000, 4096 + 90000, 0), 10000u) << "up to the mapping's end";
  errno = 0;
  EXPECT_EQ(riowrite(p.client, data.data(), 10, 200000, 0), size_t(-1)) << "nothing maps it";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(riounmap(p.server, target.data(), target.size()), 0);
  errno = 0;
  EXPECT_EQ(riounmap(p.server, target.data(), target.size()), -1);
  EXPECT_EQ(errno, EINVAL);
}

// rsocket(7) options: each set value reads back (SO_RCVBUF / SO_SNDBUF doubled as on Linux,
// SO_LINGER's on/off, RDMA_IOMAPSIZE rounded to what its 8-bit scale carries, the queue sizes
// clamped to at least 16 once connected); SOL_RDMA options are fixed once connecting started
// (EINVAL); RDMA_ROUTE reads the connection's path (ibv_path_data, "exactly" selectors), and
// TCP_MAXSEG its MTU.
TEST(RsocketRules, OptionsReadBackWhatWasSet) {
  const int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  set_int(fd, SOL_SOCKET, SO_RCVBUF, 10000);
  EXPECT_EQ(get_int(fd, SOL_SOCKET, SO_RCVBUF), 20000);
  set_int(fd, SOL_SOCKET, SO_SNDBUF, 100);
  EXPECT_EQ(get_int(fd, SOL_SOCKET, SO_SNDBUF), 4096) << "at least twice RS_SNDLOWAT";
  for (int opt : {SO_REUSEADDR, SO_KEEPALIVE, SO_OOBINLINE}) {
    EXPECT_EQ(get_int(fd, SOL_SOCKET, opt), 0);
    set_int(fd, SOL_SOCKET, opt, 1);
    EXPECT_EQ(get_int(fd, SOL_SOCKET, opt), 1) << opt;
    set_int(fd, SOL_SOCKET, opt, 0);
    EXPECT_EQ(get_int(fd, SOL_SOCKET, opt), 0) << opt;
  }
  linger lg{};
  socklen_t len = sizeof lg;
  ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
  EXPECT_EQ(lg.l_onoff, 1) << "rsockets linger by default";
  lg.l_onoff = 0;
  ASSERT_EQ(rsetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
  EXPECT_EQ(lg.l_onoff, 0);
  set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  EXPECT_EQ(get_int(fd, IPPROTO_TCP, TCP_NODELAY), 1);
  set_int(fd, IPPROTO_TCP, TCP_MAXSEG, 1000);  // taken, and ignored
  EXPECT_EQ(get_int(fd, IPPROTO_TCP, TCP_MAXSEG), 2048) << "no path yet";
  EXPECT_EQ(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), 7200) << "Linux's tcp_keepalive_time";
  set_int(fd, SOL_RDMA, RDMA_SQSIZE, 10);
  set_int(fd, SOL_RDMA, RDMA_RQSIZE, 40);
  set_int(fd, SOL_RDMA, RDMA_INLINE, 0);
  set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 300);
  EXPECT_EQ(get_int(fd, SOL_RDMA, RDMA_SQSIZE), 10);
  EXPECT_EQ(get_int(fd, SOL_RDMA, RDMA_RQSIZE), 40);
  EXPECT_EQ(get_int(fd, SOL_RDMA, RDMA_INLINE), 0);
  EXPECT_EQ(get_int(fd, SOL_RDMA, RDMA_IOMAPSIZE), 256) << "300 in rdma-core's 8-bit scale";
  rclose(fd);

  Listener l;
  Pair p;
  connect_pair(l, p, [](int c) {
    set_int(c, SOL_RDMA, RDMA_SQSIZE, 10);
    set_int(c, SOL_RDMA, RDMA_INLINE, 0);
  });
  EXPECT_EQ(get_int(p.client, SOL_RDMA, RDMA_SQSIZE), 16) << "at least RS_QP_MIN_SIZE";
  int v = 64;
  errno = 0;
  EXPECT_EQ(rsetsockopt(p.client, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v), -1);
  EXPECT_EQ(errno, EINVAL) << "the QP exists";
  ASSERT_EQ(rsend(p.client, "inline 0: copied", 16, 0), 16);
  char b[16];
  ASSERT_EQ(rrecv(p.server, b, 16, MSG_WAITALL), 16);
  ibv_path_data path[2];
  len = sizeof path;
  ASSERT_EQ(rgetsockopt(p.client, SOL_RDMA, RDMA_ROUTE, path, &len), 0) << strerror(errno);
  ASSERT_EQ(len, sizeof path[0]) << "one path";
  EXPECT_EQ(path[0].path.mtu >> 6, 2) << "selector: exactly";
  EXPECT_EQ(get_int(p.client, IPPROTO_TCP, TCP_MAXSEG), 1 << (7 + (path[0].path.mtu & 0x3f)));

  // That path given to a new socket (rstream -T r does this with rdma_getaddrinfo's route):
  // read back as set, and the connection still comes up (this CM resolves routes itself).
  Pair q;
  connect_pair(l, q, [&](int c) {
    ASSERT_EQ(rsetsockopt(c, SOL_RDMA, RDMA_ROUTE, path, sizeof path[0]), 0) << strerror(errno);
    ibv_path_data back{};
    socklen_t blen = sizeof back;
    ASSERT_EQ(rgetsockopt(c, SOL_RDMA, RDMA_ROUTE, &back, &blen), 0);
    EXPECT_EQ(blen, sizeof back);
    EXPECT_EQ(std::memcmp(&back, path, sizeof back), 0);
  });
  ASSERT_EQ(rsend(q.client, "r", 1, 0), 1);
  ASSERT_EQ(rrecv(q.server, b, 1, 0), 1);
}

// Misuse gets the errno the socket call would: EBADF for a descriptor that is not an rsocket,
// ENOPROTOOPT for an option or level nobody knows, EINVAL for a short option, EFAULT for a
// missing one, ENOTCONN / EPIPE on a socket that never connected, EINVAL for accept without
// listen, and socket(2)'s EAFNOSUPPORT / ESOCKTNOSUPPORT / EPROTONOSUPPORT.
TEST(RsocketRules, MisuseGetsTheSocketErrno) {
  auto expect_errno = [](long ret, int e, const char* what) {
    EXPECT_EQ(ret, -1) << what;
    EXPECT_EQ(errno, e) << what << ": " << strerror(errno);
    errno = 0;
  };
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  char b[4];
  int v = 1;
  socklen_t len = sizeof v;
  errno = 0;
  expect_errno(rsend(pipefd[1], "x", 1, 0), EBADF, "rsend on a pipe");
  expect_errno(rrecv(pipefd[0], b, 1, 0), EBADF, "rrecv on a pipe");
  expect_errno(rclose(pipefd[0]), EBADF, "rclose on a pipe");
  expect_errno(rsetsockopt(pipefd[0], SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v), EBADF,
               "rsetsockopt on a pipe");
  expect_errno(rfcntl(-1, F_GETFL), EBADF, "rfcntl(-1)");
  expect_errno(rsocket(AF_UNIX, SOCK_STREAM, 0), EAFNOSUPPORT, "AF_UNIX");
  expect_errno(rsocket(AF_INET, SOCK_RAW, 0), ESOCKTNOSUPPORT, "SOCK_RAW");
  expect_errno(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT, "a stream over UDP");
  expect_errno(rsocket(AF_INET, SOCK_DGRAM, 0), EOPNOTSUPP, "datagram rsockets are not provided");

  const int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  expect_errno(rsetsockopt(fd, SOL_SOCKET, 4242, &v, sizeof v), ENOPROTOOPT, "unknown SOL_SOCKET option");
  expect_errno(rgetsockopt(fd, 4242, SO_RCVBUF, &v, &len), ENOPROTOOPT, "unknown level");
  expect_errno(rgetsockopt(fd, SOL_RDMA, 42, &v, &len), ENOPROTOOPT, "unknown SOL_RDMA option");
  expect_errno(rsetsockopt(fd, SOL_SOCKET, SO_ERROR, &v, sizeof v), ENOPROTOOPT, "SO_ERROR is read-only");
  expect_errno(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, 2), EINVAL, "a short int");
  expect_errno(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, nullptr, sizeof v), EFAULT, "no value");
  socklen_t shortlen = 2;
  expect_errno(rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &shortlen), EINVAL, "a short buffer");
  v = 0;
  expect_errno(rsetsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof v), EINVAL, "TCP_KEEPIDLE 0");
  expect_errno(rfcntl(fd, F_GETFD), EINVAL, "an fcntl command rsockets do not take");
  expect_errno(rrecv(fd, b, 1, 0), ENOTCONN, "rrecv unconnected");
  expect_errno(rsend(fd, "x", 1, 0), EPIPE, "rsend unconnected");
  expect_errno(rshutdown(fd, SHUT_RDWR), ENOTCONN, "rshutdown unconnected");
  sockaddr_in a{};
  socklen_t alen = sizeof a;
  expect_errno(rgetpeername(fd, reinterpret_cast<sockaddr*>(&a), &alen), ENOTCONN,
               "rgetpeername unconnected");
  expect_errno(raccept(fd, nullptr, nullptr), EINVAL, "raccept without rlisten");
  expect_errno(riomap(fd, b, sizeof b, PROT_WRITE, 0, 0), EINVAL, "riomap before the socket has a device");
  sockaddr_in six{};
  six.sin_family = AF_INET;
  expect_errno(rbind(fd, reinterpret_cast<sockaddr*>(&six), 4), EINVAL, "a short address");
  six.sin_family = AF_UNIX;
  expect_errno(rconnect(fd, reinterpret_cast<sockaddr*>(&six), sizeof six), EAFNOSUPPORT,
               "an AF_UNIX address");
  expect_errno(riomap(fd, nullptr, 16, PROT_WRITE, 0, 0), EINVAL, "riomap of no buffer");
  char control[16];
  iovec iov{b, sizeof b};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  expect_errno(rrecvmsg(fd, &m, 0), ENOTSUP, "ancillary data");
  expect_errno(rsendmsg(fd, &m, 0), ENOTSUP, "ancillary data");
  EXPECT_EQ(rclose(fd), 0);
  expect_errno(rclose(fd), EBADF, "rclose twice");
  Listener l;
  ASSERT_GE(l.fd, 0);
  sockaddr_in elsewhere = addr("192.0.2.2", next_port++);
  expect_errno(rconnect(l.fd, sa(elsewhere), sizeof elsewhere), EISCONN, "rconnect on a listener");
  close(pipefd[0]);
  close(pipefd[1]);
}

// The defaults come from /etc/rdma/rsocket (rsocket(7); here the directory named by
// HCASIM_RSOCKET_CONF_DIR): sqsize_default, rqsize_default, inline_default, mem_default,
// wmem_default (at least 2 * RS_SNDLOWAT), iomap_size (rounded to its scale). Read once per
// process, so the check runs in a fresh one.
TEST(RsocketRules, ConfigurationFilesSetTheDefaults) {
  char dir[] = "/tmp/rsocket_conf_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto put = [&](const char* name, const char* value) {
    FILE* f = std::fopen((std::string(dir) + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(value, f);
    std::fclose(f);
  };
  put("sqsize_default", "100\n");
  put("rqsize_default", "200\n");
  put("inline_default", "32\n");
  put("mem_default", "65536\n");
  put("wmem_default", "1000\n");
  put("iomap_size", "700\n");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("HCASIM_RSOCKET_CONF_DIR", dir, 1);
        const int fd = rsocket(AF_INET, SOCK_STREAM, 0);
        const bool ok =
            get_int(fd, SOL_RDMA, RDMA_SQSIZE) == 100 && get_int(fd, SOL_RDMA, RDMA_RQSIZE) == 200 &&
            get_int(fd, SOL_RDMA, RDMA_INLINE) == 32 && get_int(fd, SOL_SOCKET, SO_RCVBUF) == 65536 &&
            get_int(fd, SOL_SOCKET, SO_SNDBUF) == 4096 && get_int(fd, SOL_RDMA, RDMA_IOMAPSIZE) == 512;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  for (const char* f :
       {"sqsize_default", "rqsize_default", "inline_default", "mem_default", "wmem_default", "iomap_size"})
    unlink((std::string(dir) + "/" + f).c_str());
  rmdir(dir);
}

// fork(2): an rsocket's QP and registered memory stay the parent's; the child cannot use it and
// is told so (EOPNOTSUPP) rather than corrupting the connection. rdma-core supports fork only
// through its preload library, which this library does not provide.
TEST(RsocketRules, ForkedChildCannotUseTheParentsSocket) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    errno = 0;
    const bool refused = rsend(p.client, "x", 1, 0) == -1 && errno == EOPNOTSUPP;
    _exit(refused ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(rsend(p.client, "y", 1, 0), 1) << "the parent's connection is intact";
  char c;
  ASSERT_EQ(rrecv(p.server, &c, 1, 0), 1);
  EXPECT_EQ(c, 'y');
}

// getsockname(2) / getpeername(2): the two ends' addresses; a short buffer gets the start and
// the full length.
TEST(RsocketRules, NamesAreTheConnectionsAddresses) {
  Listener l;
  Pair p;
  connect_pair(l, p);
  sockaddr_in a{}, b{};
  socklen_t alen = sizeof a, blen = sizeof b;
  ASSERT_EQ(rgetsockname(p.client, reinterpret_cast<sockaddr*>(&a), &alen), 0);
  ASSERT_EQ(rgetpeername(p.server, reinterpret_cast<sockaddr*>(&b), &blen), 0);
  EXPECT_EQ(alen, sizeof a);
  EXPECT_EQ(a.sin_family, AF_INET);
  EXPECT_EQ(a.sin_addr.s_addr, addr("192.0.2.1", 0).sin_addr.s_addr);
  EXPECT_EQ(a.sin_port, b.sin_port) << "the client's port, seen from both ends";
  EXPECT_NE(a.sin_port, 0);
  ASSERT_EQ(rgetpeername(p.client, reinterpret_cast<sockaddr*>(&a), &alen), 0);
  EXPECT_EQ(a.sin_port, htons(l.port));
  socklen_t shortlen = 4;
  sockaddr_in c{};
  ASSERT_EQ(rgetsockname(p.server, reinterpret_cast<sockaddr*>(&c), &shortlen), 0);
  EXPECT_EQ(shortlen, sizeof c);
  EXPECT_EQ(c.sin_addr.s_addr, 0u) << "only 4 bytes copied";
}

}  // namespace
