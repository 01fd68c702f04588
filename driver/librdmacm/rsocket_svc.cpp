// SPDX-License-Identifier: Apache-2.0
// The rsocket service thread, rdma-core's listen, connect and keepalive services in one: it
// answers connection requests on listening sockets, reads the CM events of sockets whose
// connection it finishes or watches (a non-blocking rconnect, an accepted connection), and sends
// keepalives. Every CM channel it reads is non-blocking, so one socket's CM never holds up
// another's. It starts with the first socket it serves and ends with the last.
//
// Also the rpoll wake-up: a thread that sleeps in rpoll registers an eventfd, and whoever
// changes a socket's state behind the program's back writes to all of them (rs_poll_signal).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

uint64_t now_ms() { return mono_us() / 1000; }

/// What the service does for one socket.
struct Entry {
  RSocket* rs;
  bool listener = false;   ///< answer its connection requests
  bool cm = false;         ///< read its CM events
  bool keepalive = false;  ///< send keepalives
  uint64_t period_ms = 0;  ///< keepalive interval
  uint64_t due_ms = 0;     ///< next keepalive
};

class Service {
 public:
  int watch(RSocket* rs, bool listener);
  int keepalive(RSocket* rs, bool on, unsigned seconds);
  void forget(RSocket* rs);

 private:
  int start_locked();
  void run();
  /// The descriptors to wait on (wake_fd_ first) and the sockets they are for; the timeout.
  int collect(std::vector<pollfd>& fds, std::vector<RSocket*>& who);
  void serve(RSocket* rs, bool readable);
  Entry* find(RSocket* rs);

  std::mutex mu_;
  std::condition_variable idle_;
  std::vector<Entry> entries_;
  RSocket* busy_ = nullptr;  ///< the socket being served right now (forget waits for it)
  std::thread thread_;
  bool stop_ = false;
  int wake_fd_ = -1;
};

Service& service() {
  static auto* s = new Service;  // never destroyed: the thread may outlive main
  return *s;
}

Entry* Service::find(RSocket* rs) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [rs](const Entry& e) { return e.rs == rs; });
  return it == entries_.end() ? nullptr : &*it;
}

int Service::start_locked() {
  if (thread_.joinable()) return 0;
  if (wake_fd_ < 0 && (wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) return -1;
  stop_ = false;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return err(e.code().value());
  }
  return 0;
}

int Service::watch(RSocket* rs, bool listener) {
  {
    Lock l(rs->mu);
    rs->cm_watched = true;
  }
  std::lock_guard<std::mutex> g(mu_);
  if (start_locked()) return -1;
  Entry* e = find(rs);
  if (!e) {
    entries_.push_back(Entry{rs});
    e = &entries_.back();
  }
  e->listener = listener;
  e->cm = true;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
  }
  return 0;
}

int Service::keepalive(RSocket* rs, bool on, unsigned seconds) {
  std::unique_lock<std::mutex> g(mu_);
  Entry* e = find(rs);
  if (!on) {
    if (e) e->keepalive = false;
    if (e && !e->cm) {
      g.unlock();
      forget(rs);
    }
    return 0;
  }
  if (start_locked()) return -1;
  if (!e) {
    entries_.push_back(Entry{rs});
    e = &entries_.back();
  }
  e->keepalive = true;
  e->period_ms = uint64_t(seconds) * 1000;
  e->due_ms = now_ms() + e->period_ms;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) { /* as above */
  }
  return 0;
}

void Service::forget(RSocket* rs) {
  std::unique_lock<std::mutex> g(mu_);
  entries_.erase(
      std::remove_if(entries_.begin(), entries_.end(), [rs](const Entry& e) { return e.rs == rs; }),
      entries_.end());
  idle_.wait(g, [&] { return busy_ != rs; });
  if (!entries_.empty() || !thread_.joinable() || thread_.get_id() == std::this_thread::get_id()) return;
  stop_ = true;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) { /* as above */
  }
  std::thread t = std::move(thread_);
  g.unlock();
  t.join();
}

int Service::collect(std::vector<pollfd>& fds, std::vector<RSocket*>& who) {
  fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
  who.assign(1, nullptr);
  uint64_t next = UINT64_MAX;
  for (const Entry& e : entries_) {
    if (e.keepalive) next = std::min(next, e.due_ms);
    if (!e.cm) continue;
    fds.push_back(pollfd{e.rs->cm_id->channel->fd, POLLIN, 0});
    who.push_back(e.rs);
  }
  if (next == UINT64_MAX) return -1;
  const uint64_t now = now_ms();
  return next <= now ? 0 : static_cast<int>(std::min<uint64_t>(next - now, 60000));
}

/// One socket's turn: its CM event or connection requests, and its keepalive when due.
void Service::serve(RSocket* rs, bool readable) {
  std::unique_lock<std::mutex> g(mu_);
  Entry* e = find(rs);
  if (!e) return;  // forgotten meanwhile
  const bool listener = e->listener;
  const bool ka = e->keepalive && e->due_ms <= now_ms();
  if (ka) e->due_ms = now_ms() + e->period_ms;
  busy_ = rs;
  g.unlock();
  bool keep = true;
  if (readable) {
    if (listener)
      accept_requests(*rs);
    else
      keep = handle_cm_event(*rs);
  }
  if (ka) send_keepalive(*rs);
  g.lock();
  busy_ = nullptr;
  if (!keep)
    entries_.erase(
        std::remove_if(entries_.begin(), entries_.end(), [rs](const Entry& x) { return x.rs == rs; }),
        entries_.end());
  idle_.notify_all();
  g.unlock();
  if (!keep) free_socket(rs);  // an accepted connection that never came up: nobody else has it
}

void Service::run() {
  std::vector<pollfd> fds;
  std::vector<RSocket*> who;
  for (;;) {
    int timeout;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stop_) return;
      timeout = collect(fds, who);
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) continue;
    uint64_t n;
    if (fds[0].revents && read(wake_fd_, &n, sizeof n) < 0) { /* nothing to drain */
    }
    // The sockets whose CM channel is readable, then those whose keepalive is due.
    std::vector<std::pair<RSocket*, bool>> turns;
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) turns.emplace_back(who[i], true);
    {
      std::lock_guard<std::mutex> g(mu_);
      const uint64_t now = now_ms();
      for (const Entry& e : entries_)
        if (e.keepalive && e.due_ms <= now &&
            std::find(turns.begin(), turns.end(), std::make_pair(e.rs, true)) == turns.end())
          turns.emplace_back(e.rs, false);
    }
    for (auto [rs, readable] : turns) serve(rs, readable);
  }
}

// ---- rpoll's wake-up --------------------------------------------------------------------------

std::mutex wake_mu;
std::vector<int>& sleepers() {
  static auto* v = new std::vector<int>;
  return *v;
}

}  // namespace

int svc_watch(RSocket* rs) { return service().watch(rs, rs->state == kListening); }
int svc_keepalive(RSocket* rs, bool on, unsigned seconds) { return service().keepalive(rs, on, seconds); }
void svc_forget(RSocket* rs) { service().forget(rs); }

void poll_signal() {
  std::lock_guard<std::mutex> g(wake_mu);
  const uint64_t one = 1;
  for (int fd : sleepers())
    if (write(fd, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
    }
}

int poll_sleeper_fd() {
  struct Fd {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ~Fd() {
      if (fd >= 0) close(fd);
    }
  };
  static thread_local Fd mine;
  return mine.fd;
}

void poll_sleep_begin(int fd) {
  std::lock_guard<std::mutex> g(wake_mu);
  sleepers().push_back(fd);
}

void poll_sleep_end(int fd) {
  {
    std::lock_guard<std::mutex> g(wake_mu);
    auto& v = sleepers();
    v.erase(std::remove(v.begin(), v.end(), fd), v.end());
  }
  uint64_t n;
  if (read(fd, &n, sizeof n) < 0) { /* not signalled */
  }
}

}  // namespace hcasim::rdmacm::rs
