// SPDX-License-Identifier: Apache-2.0
// TcpStore: rank 0 runs a small key/value server (one thread, poll(2) over its clients);
// every rank, rank 0 included, talks to it over one TCP connection.
// The protocol (framing, requests, replies) is store_tcp_protocol.h.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "hcasim/verbs/error.h"
#include "hcasim/verbs/store.h"
#include "store_tcp_protocol.h"

namespace hcasim::verbs {
namespace {

using Clock = std::chrono::steady_clock;
using namespace tcp_store;

addrinfo* resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) throw StoreError("tcp store: cannot resolve " + host + ": " + gai_strerror(rc));
  return res;
}

// Reads/writes exactly n bytes before the deadline.
void ioFull(int fd, uint8_t* p, size_t n, bool writing, Clock::time_point deadline, const std::string& who) {
  while (n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw TimeoutError(who + ": no answer from the server in time");
    pollfd pf{fd, short(writing ? POLLOUT : POLLIN), 0};
    const int pr = poll(&pf, 1, int(std::min<long long>(left, 1000)));
    if (pr < 0 && errno != EINTR) throw StoreError(who + ": poll: " + std::strerror(errno));
    if (pr <= 0) continue;
    const ssize_t r = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw StoreError(who + ": " + (writing ? "send: " : "recv: ") + std::strerror(errno));
    }
    if (r == 0) throw StoreError(who + ": the server closed the connection");
    p += r;
    n -= size_t(r);
  }
}

struct Client {
  int fd;
  Bytes in;
};

bool sendAll(int fd, const Bytes& b) {
  size_t off = 0;
  while (off < b.size()) {
    const ssize_t r = send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd pf{fd, POLLOUT, 0};
        if (poll(&pf, 1, 5000) <= 0) return false;
        continue;
      }
      return false;
    }
    off += size_t(r);
  }
  return true;
}

}  // namespace

// ---- server ------------------------------------------------------------------------------

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port) {
  addrinfo* res = resolve(host, port, true);
  std::string err = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      listenFd_ = fd;
      break;
    }
    err = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  if (listenFd_ < 0)
    throw StoreError("tcp store server: cannot listen on " + host + ":" + std::to_string(port) + ": " + err);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(listenFd_, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  uint64_t one = 1;
  if (write(wakeFd_, &one, sizeof one) < 0) { /* the thread polls with a timeout anyway */
  }
  if (thread_.joinable()) thread_.join();
  close(listenFd_);
  close(wakeFd_);
}

void TcpStoreServer::serve() {
  std::vector<Client> clients;
  for (;;) {
    std::vector<pollfd> pfs;
    pfs.push_back({wakeFd_, POLLIN, 0});
    pfs.push_back({listenFd_, POLLIN, 0});
    for (auto& c : clients) pfs.push_back({c.fd, POLLIN, 0});
    if (poll(pfs.data(), pfs.size(), 1000) < 0 && errno != EINTR) break;
    if (pfs[0].revents) break;
    for (size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      if (!(pfs[2 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      uint8_t buf[65536];
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      bool drop = n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN));
      if (n > 0) c.in.insert(c.in.end(), buf, buf + n);
      // Serve every complete frame; a frame length out of range drops the client.
      Bytes out;
      if (!drop && !serve_frames(c.in, map_, out)) drop = true;
      if (!out.empty() && !sendAll(c.fd, out)) drop = true;
      if (drop) {
        close(c.fd);
        clients.erase(clients.begin() + long(i));
        pfs.erase(pfs.begin() + long(2 + i));
        --i;
      }
    }
    // New connections last: pfs[2 + i] describes clients[i] only for the clients polled above.
    if (pfs[1].revents & POLLIN) {
      const int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        clients.push_back({fd, {}});
      }
    }
  }
  for (auto& c : clients) close(c.fd);
}

// ---- client ------------------------------------------------------------------------------

TcpStore::TcpStore(const std::string& host, uint16_t port, bool serve, std::chrono::milliseconds timeout)
    : host_(host), port_(port), ioTimeout_(timeout) {
  if (serve) {
    server_ = std::make_unique<TcpStoreServer>(host, port);
    port_ = server_->port();
  }
  const auto deadline = Clock::now() + timeout;
  std::string err;
  for (;;) {
    addrinfo* res = resolve(host, port_, false);
    for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        err = std::strerror(errno);
        close(fd);
      }
    }
    freeaddrinfo(res);
    if (fd_ >= 0) break;
    if (Clock::now() >= deadline)
      throw TimeoutError("tcp store: cannot connect to " + host + ":" + std::to_string(port_) + " within " +
                         std::to_string(timeout.count()) + " ms: " + err);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
  server_.reset();
}

std::string TcpStore::describe() const {
  return "tcp store " + host_ + ":" + std::to_string(port_) + (server_ ? " (serving)" : "");
}

Bytes TcpStore::call(uint8_t op, const std::vector<Bytes>& args, uint8_t& status) {
  std::lock_guard<std::mutex> g(mu_);
  Bytes frame = request_frame(op, args);
  const auto deadline = Clock::now() + ioTimeout_;
  const std::string who = describe();
  ioFull(fd_, frame.data(), frame.size(), true, deadline, who);
  uint8_t hdr[4];
  ioFull(fd_, hdr, 4, false, deadline, who);
  const uint32_t len = get32(hdr);
  if (len < 1 || len > kMaxFrame) throw StoreError(who + ": malformed reply");
  Bytes reply(len);
  ioFull(fd_, reply.data(), len, false, deadline, who);
  status = reply[0];
  if (status == kBad) throw StoreError(who + ": the server rejected the request");
  return Bytes(reply.begin() + 1, reply.end());
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  uint8_t st;
  call(kSet, {Bytes(key.begin(), key.end()), value}, st);
}

bool TcpStore::tryGet(const std::string& key, Bytes& value) {
  uint8_t st;
  Bytes r = call(kGet, {Bytes(key.begin(), key.end())}, st);
  if (st != kOk) return false;
  value.swap(r);
  return true;
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  std::vector<Bytes> args;
  for (const auto& k : keys) args.emplace_back(k.begin(), k.end());
  uint8_t st;
  call(kCheck, args, st);
  return st == kOk;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  uint8_t st;
  Bytes r = call(kAdd, {Bytes(key.begin(), key.end()), i64Bytes(delta)}, st);
  if (r.size() != 8) throw StoreError(describe() + ": malformed ADD reply");
  return bytesI64(r.data());
}

void TcpStore::erase(const std::string& key) {
  uint8_t st;
  call(kDel, {Bytes(key.begin(), key.end())}, st);
}

}  // namespace hcasim::verbs
