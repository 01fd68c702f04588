// SPDX-License-Identifier: Apache-2.0
// Context::connectFullMesh(const CmBootstrap&): the full mesh connected through librdmacm.
// The only file of verbs/ that calls librdmacm (hcasim_verbs_link gives every program that
// links hcasim_verbs the librdmacm matching its libibverbs).
//
// One event channel per rank, driven by one loop in the calling thread: a listener (if any
// rank is above this one), and an id per lower rank that resolves, routes and connects, and is
// started again after a failure that may pass (nobody listening yet, an address nobody
// answers for yet) until the deadline. Every event is copied and acknowledged at once, so
// destroying an id never waits for an acknowledgement.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "hcasim/verbs/cm_bootstrap.h"
#include "hcasim/verbs/context.h"
#include "hcasim/verbs/error.h"

namespace hcasim::verbs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kResolveMs = 2000;  // one address or route resolution; retried until the deadline
constexpr milliseconds kFirstBackoff{50}, kMaxBackoff{1000};
constexpr uint8_t kRdAtomic = 1;  // as Pair::connect(Address): max_rd_atomic, max_dest_rd_atomic
constexpr int kPollSliceMs = 5;   // see Bootstrap::waitMs

/** The channel and every id that outlives the bootstrap, destroyed ids first. */
struct CmResources {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* listener = nullptr;
  std::vector<rdma_cm_id*> ids;
  ~CmResources() {
    for (rdma_cm_id* id : ids)
      if (id) rdma_destroy_id(id);
    if (listener) rdma_destroy_id(listener);
    if (channel) rdma_destroy_event_channel(channel);
  }
};

/** What the loop needs of an event, copied before rdma_ack_cm_event(3) frees it. */
struct Event {
  rdma_cm_event_type type{};
  int status = 0;
  rdma_cm_id* id = nullptr;
  std::vector<uint8_t> data;  ///< private data
};

enum class Step { Idle, Resolving, Routing, Connecting, Accepted, Done };

const char* stepName(Step s) {
  switch (s) {
    case Step::Idle: return "waiting to retry";
    case Step::Resolving: return "resolving its address";
    case Step::Routing: return "resolving the route";
    case Step::Connecting: return "waiting for its accept";
    case Step::Accepted: return "accepted, waiting for its RTU";
    case Step::Done: return "connected";
  }
  return "?";
}

struct Peer {
  int rank = -1;
  bool active = false;  ///< this rank connects to it (it is lower)
  Step step = Step::Idle;
  rdma_cm_id* id = nullptr;
  Clock::time_point retryAt{};
  int attempts = 0;
  std::string last;  ///< what happened last, for the timeout message
};

sockaddr_in ipv4(const std::string& a, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  if (inet_pton(AF_INET, a.c_str(), &s.sin_addr) != 1)
    throw AddressError("addresses", "rdma_cm bootstrap: '" + a + "' is not a dotted IPv4 address");
  return s;
}

std::string peerName(rdma_cm_id* id) {
  const sockaddr* sa = rdma_get_peer_addr(id);
  if (!sa || sa->sa_family != AF_INET) return "an unknown address";
  const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
  char b[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &in->sin_addr, b, sizeof b);
  return std::string(b) + ":" + std::to_string(ntohs(in->sin_port));
}

std::string describeEvent(const Event& e) {
  std::string s = rdma_event_str(e.type);
  if (e.type == RDMA_CM_EVENT_REJECTED && e.status == 8)
    return s + " (REJ reason 8, invalid service ID: nobody listens there yet)";
  if (e.status < 0) return s + " (" + std::strerror(-e.status) + ")";
  if (e.status > 0) return s + " (status " + std::to_string(e.status) + ")";
  return s;
}

class Bootstrap {
 public:
  Bootstrap(int rank, int size, const CmBootstrap& cm, uint32_t group, Device& dev,
            std::vector<std::unique_ptr<Pair>>& pairs, CmResources& res, milliseconds timeout)
      : rank_(rank),
        size_(size),
        cm_(cm),
        group_(group),
        dev_(dev),
        pairs_(pairs),
        res_(res),
        deadline_(Clock::now() + timeout),
        timeout_(timeout) {
    for (int i = 0; i < size; ++i) {
      Peer p;
      p.rank = i;
      p.active = i < rank;
      peers_.push_back(p);
    }
  }

  /** An attempt still under way when the bootstrap ends (an error): its id goes first. */
  ~Bootstrap() {
    for (Peer& p : peers_)
      if (p.active && p.step != Step::Done && p.id) rdma_destroy_id(p.id);
  }
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  void openChannel() {
    res_.channel = rdma_create_event_channel();
    if (!res_.channel) throwSystemError(who() + "rdma_create_event_channel", errno);
    const int fl = fcntl(res_.channel->fd, F_GETFL);
    if (fl < 0 || fcntl(res_.channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
      throwSystemError(who() + "making the rdma_cm event channel non-blocking", errno);
  }

  /** Listens first: the sooner this rank touches the CM, the sooner its peers' requests find it. */
  void listen() {
    if (rank_ == size_ - 1) return;  // nobody above us
    if (rdma_create_id(res_.channel, &res_.listener, nullptr, RDMA_PS_TCP))
      throwSystemError(who() + "rdma_create_id(listener)", errno);
    sockaddr_in a = ipv4(cm_.addresses[size_t(rank_)], cm_.port(rank_));
    if (rdma_bind_addr(res_.listener, reinterpret_cast<sockaddr*>(&a))) {
      const int e = errno;
      throwSystemError(who() + "rdma_bind_addr(" + cm_.endpoint(rank_) + ", its own address" +
                           (e == EADDRNOTAVAIL ? ": no RDMA device of this host has it" : "") +
                           (e == EADDRINUSE ? ": the port is taken, another group on this base port?" : "") +
                           ")",
                       e);
    }
    checkDevice(res_.listener, "its own address " + cm_.addresses[size_t(rank_)]);
    if (rdma_listen(res_.listener, size_))
      throwSystemError(who() + "rdma_listen(" + cm_.endpoint(rank_) + ")", errno);
  }

  void run() {
    for (Peer& p : peers_)
      if (p.active) start(p);
    while (!allDone()) {
      Event e;
      if (nextEvent(e, waitMs())) handle(e);
      retryDue();
      if (Clock::now() >= deadline_ && !allDone()) throw TimeoutError(timeoutMessage());
    }
  }

 private:
  std::string who() const { return "rank " + std::to_string(rank_) + ": rdma_cm bootstrap: "; }
  std::string about(const Peer& p) const {
    return "rank " + std::to_string(p.rank) + " at " + cm_.endpoint(p.rank);
  }
  Pair& pair(const Peer& p) { return *pairs_[size_t(p.rank)]; }

  bool allDone() const {
    return std::all_of(peers_.begin(), peers_.end(),
                       [&](const Peer& p) { return p.rank == rank_ || p.step == Step::Done; });
  }

  /** The CM picked the device by address: it must be the one our QPs live on. */
  void checkDevice(rdma_cm_id* id, const std::string& what) const {
    const char* name = id->verbs ? ibv_get_device_name(id->verbs->device) : nullptr;
    if (name && name == dev_.name() && id->port_num == dev_.port()) return;
    throw IoError(who() + what + " is on " + (name ? name : "no device") + " port " +
                  std::to_string(id->port_num) + ", but this rank's Device is " + dev_.name() + " port " +
                  std::to_string(dev_.port()) + " (addresses[" + std::to_string(rank_) +
                  "] must belong to it)");
  }

  // ---- events ----------------------------------------------------------------------------

  /**
   * How long to poll the channel before asking for an event anyway. Short: in the simulator's
   * lockstep clock the CM handles the MADs that arrived only when a program calls into it
   * (rdma_get_cm_event), not by itself as a kernel does (docs/connection-management.md).
   */
  int waitMs() const {
    Clock::time_point until = deadline_;
    for (const Peer& p : peers_)
      if (p.active && p.step == Step::Idle) until = std::min(until, p.retryAt);
    const auto ms = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
    return int(std::clamp<long long>(ms + 1, 0, kPollSliceMs));
  }

  bool nextEvent(Event& out, int ms) {
    pollfd pfd{res_.channel->fd, POLLIN, 0};
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR) throwSystemError(who() + "poll(event channel)", errno);
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(res_.channel, &e)) {
      if (errno == EAGAIN || errno == EINTR) return false;
      throwSystemError(who() + "rdma_get_cm_event", errno);
    }
    out.type = e->event;
    out.status = e->status;
    out.id = e->id;
    const auto* pd = static_cast<const uint8_t*>(e->param.conn.private_data);
    if (pd && e->event != RDMA_CM_EVENT_ADDR_RESOLVED && e->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
      out.data.assign(pd, pd + e->param.conn.private_data_len);
    rdma_ack_cm_event(e);
    return true;
  }

  void handle(const Event& e) {
    if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) return onRequest(e);
    Peer* p = static_cast<Peer*>(e.id->context);
    if (!p) return;  // a child id we refused or replaced: nothing left to do with it
    if (p->active)
      onActiveEvent(*p, e);
    else
      onPassiveEvent(*p, e);
  }

  // ---- the active side: this rank connects to a lower one --------------------------------

  void start(Peer& p) {
    ++p.attempts;
    p.step = Step::Resolving;
    if (rdma_create_id(res_.channel, &p.id, &p, RDMA_PS_TCP))
      throwSystemError(who() + "rdma_create_id", errno);
    sockaddr_in src = ipv4(cm_.addresses[size_t(rank_)], 0);
    sockaddr_in dst = ipv4(cm_.addresses[size_t(p.rank)], cm_.port(p.rank));
    if (rdma_resolve_addr(p.id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                          resolveMs()))
      throwSystemError(who() + "rdma_resolve_addr(" + cm_.addresses[size_t(rank_)] + " -> " + about(p) + ")",
                       errno);
  }

  int resolveMs() const {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now()).count();
    return int(std::clamp<long long>(left, 1, kResolveMs));
  }

  void onActiveEvent(Peer& p, const Event& e) {
    switch (e.type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED: return onAddrResolved(p);
      case RDMA_CM_EVENT_ROUTE_RESOLVED: return onRouteResolved(p);
      case RDMA_CM_EVENT_CONNECT_RESPONSE: return onResponse(p, e);
      case RDMA_CM_EVENT_ADDR_ERROR:
      case RDMA_CM_EVENT_ROUTE_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_REJECTED: return onActiveFailure(p, e);
      case RDMA_CM_EVENT_DISCONNECTED: return onDisconnected(p, e);
      default: return;
    }
  }

  void onAddrResolved(Peer& p) {
    checkDevice(p.id, "the route to " + about(p));
    p.step = Step::Routing;
    if (rdma_resolve_route(p.id, resolveMs()))
      throwSystemError(who() + "rdma_resolve_route(" + about(p) + ")", errno);
  }

  void onRouteResolved(Peer& p) {
    const CmHello h = hello(CmHello::kRequest, p.rank);
    const std::vector<uint8_t> pd = h.bytes();
    rdma_conn_param cp = connParam(pair(p), pd);
    p.step = Step::Connecting;
    if (rdma_connect(p.id, &cp)) throwSystemError(who() + "rdma_connect(" + about(p) + ")", errno);
  }

  /** The accept (REP) arrived: check it, move our QP to RTR and RTS, then send the RTU. */
  void onResponse(Peer& p, const Event& e) {
    try {
      CmHello::fromBytes(e.data.data(), e.data.size())
          .check(CmHello::kAccept, rank_, size_, group_, about(p));
    } catch (const AddressError& err) {
      const auto rej = CmHello::rejectBytes(err.field(), err.what());
      rdma_reject(p.id, rej.data(), uint8_t(rej.size()));  // best effort: the peer learns why
      throw;
    }
    connectPair(p, p.id);
    if (rdma_establish(p.id)) throwSystemError(who() + "rdma_establish(" + about(p) + ")", errno);
    done(p);
  }

  void onActiveFailure(Peer& p, const Event& e) {
    std::string field, reason;
    if (e.type == RDMA_CM_EVENT_REJECTED && CmHello::parseReject(e.data.data(), e.data.size(), field, reason))
      throw AddressError(field, who() + about(p) + " refused the connection: " + reason);
    // An address the CM cannot route to at all will not become reachable by waiting.
    if (e.type == RDMA_CM_EVENT_ADDR_ERROR && e.status != -ETIMEDOUT && e.status != -EHOSTUNREACH)
      throw IoError(who() + "cannot reach " + about(p) + ": " + describeEvent(e));
    p.last = describeEvent(e);
    rdma_destroy_id(p.id);  // its events are acknowledged: this does not wait
    p.id = nullptr;
    p.step = Step::Idle;
    const auto backoff = std::min(kMaxBackoff, kFirstBackoff * (1 << std::min(p.attempts - 1, 5)));
    p.retryAt = Clock::now() + backoff;
  }

  void retryDue() {
    const auto now = Clock::now();
    for (Peer& p : peers_)
      if (p.active && p.step == Step::Idle && p.retryAt <= now && now < deadline_) start(p);
  }

  // ---- the passive side: a higher rank connects to this one ------------------------------

  void onRequest(const Event& e) {
    const std::string from = peerName(e.id);
    CmHello h;
    try {
      h = CmHello::fromBytes(e.data.data(), e.data.size());
      h.check(CmHello::kRequest, rank_, size_, group_, from);
      if (peers_[h.rank].step != Step::Idle)
        throw AddressError("rank", "rank " + std::to_string(rank_) + ": connection request from " + from +
                                       ": field 'rank': rank " + std::to_string(h.rank) +
                                       " is already connected or accepted (a duplicate rank?)");
    } catch (const AddressError& err) {
      refuse(e.id, err);
      throw;
    }
    accept(peers_[h.rank], e.id);
  }

  void refuse(rdma_cm_id* child, const AddressError& err) {
    const auto rej = CmHello::rejectBytes(err.field(), err.what());
    rdma_reject(child, rej.data(), uint8_t(rej.size()));
    res_.ids.push_back(child);  // destroyed with the rest: the REJ must leave first
  }

  void accept(Peer& p, rdma_cm_id* child) {
    p.id = child;
    child->context = &p;
    res_.ids.push_back(child);
    checkDevice(child, "the connection from " + about(p));
    connectPair(p, child);  // RTR and RTS before the REP: the RTU may be followed by data at once
    const std::vector<uint8_t> pd = hello(CmHello::kAccept, p.rank).bytes();
    rdma_conn_param cp = connParam(pair(p), pd);
    p.step = Step::Accepted;
    if (rdma_accept(child, &cp)) throwSystemError(who() + "rdma_accept(" + about(p) + ")", errno);
  }

  void onPassiveEvent(Peer& p, const Event& e) {
    std::string field, reason;
    switch (e.type) {
      case RDMA_CM_EVENT_ESTABLISHED: return done(p);
      case RDMA_CM_EVENT_DISCONNECTED: return onDisconnected(p, e);
      case RDMA_CM_EVENT_REJECTED:
        if (CmHello::parseReject(e.data.data(), e.data.size(), field, reason))
          throw AddressError(field, who() + about(p) + " refused this rank's accept: " + reason);
        [[fallthrough]];
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
        // Our QP is in RTS towards that attempt already: a new one could not use it.
        throw IoError(who() + "the connection from " + about(p) +
                      " failed after this rank accepted it: " + describeEvent(e));
      default: return;
    }
  }

  // ---- both sides ------------------------------------------------------------------------

  CmHello hello(CmHello::Kind kind, int peer) const {
    CmHello h;
    h.kind = kind;
    h.size = uint32_t(size_);
    h.rank = uint32_t(rank_);
    h.peer = uint32_t(peer);
    h.group = group_;
    return h;
  }

  rdma_conn_param connParam(Pair& pair, const std::vector<uint8_t>& pd) const {
    rdma_conn_param cp{};
    cp.private_data = pd.data();
    cp.private_data_len = uint8_t(pd.size());
    cp.responder_resources = kRdAtomic;
    cp.initiator_depth = kRdAtomic;
    cp.retry_count = std::min<uint8_t>(pair.options().retryCnt, 7);
    cp.rnr_retry_count = std::min<uint8_t>(pair.options().rnrRetry, 7);
    cp.flow_control = 1;
    cp.qp_num = pair.qp()->qp_num;  // the QP is not attached to the id: the CM only names it
    return cp;
  }

  /** RTR and RTS with the CM's attributes (our QP is in INIT since the Pair was made). */
  void connectPair(Peer& p, rdma_cm_id* id) {
    ibv_qp_attr rtr{}, rts{};
    int rtrMask = 0, rtsMask = 0;
    rtr.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(id, &rtr, &rtrMask))
      throwSystemError(who() + "rdma_init_qp_attr(RTR, " + about(p) + ")", errno);
    rts.qp_state = IBV_QPS_RTS;
    if (rdma_init_qp_attr(id, &rts, &rtsMask))
      throwSystemError(who() + "rdma_init_qp_attr(RTS, " + about(p) + ")", errno);
    pair(p).connect(rtr, rtrMask, rts, rtsMask);
  }

  void done(Peer& p) {
    if (p.step == Step::Done) return;
    if (p.active) res_.ids.push_back(p.id);
    p.step = Step::Done;
  }

  void onDisconnected(Peer& p, const Event& e) {
    throw IoError(who() + about(p) + " disconnected during the bootstrap (" + describeEvent(e) +
                  "; did that rank fail?)");
  }

  std::string timeoutMessage() const {
    std::string s = who() + "not connected within " + std::to_string(timeout_.count()) + " ms:";
    for (const Peer& p : peers_) {
      if (p.rank == rank_ || p.step == Step::Done) continue;
      s += " " + about(p) + " (";
      if (!p.active && p.step == Step::Idle)
        s += "it never connected to this rank";
      else
        s += std::string(stepName(p.step)) + ", attempt " + std::to_string(p.attempts);
      if (!p.last.empty()) s += ", last: " + p.last;
      s += ");";
    }
    s.pop_back();
    return s;
  }

  int rank_, size_;
  const CmBootstrap& cm_;
  uint32_t group_;
  Device& dev_;
  std::vector<std::unique_ptr<Pair>>& pairs_;
  CmResources& res_;
  std::vector<Peer> peers_;  // never resized: ids point at its elements (rdma_cm_id::context)
  Clock::time_point deadline_;
  milliseconds timeout_;
};

}  // namespace

void Context::connectFullMesh(const CmBootstrap& cm) {
  if (!pairs_.empty()) throw std::logic_error("context: already connected");
  cm.validate(size_);
  auto res = std::make_shared<CmResources>();
  std::vector<std::unique_ptr<Pair>> pairs(static_cast<size_t>(size_));
  Bootstrap b(rank_, size_, cm, CmHello::groupTag(opts_.prefix), *dev_, pairs, *res, opts_.pair.timeout);
  if (size_ > 1) {
    b.openChannel();
    b.listen();
  }
  pairs = newPairs();
  if (size_ > 1) b.run();
  cm_ = std::move(res);
  pairs_ = std::move(pairs);
}

}  // namespace hcasim::verbs
