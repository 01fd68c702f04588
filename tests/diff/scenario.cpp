// SPDX-License-Identifier: Apache-2.0
/**
 * @file scenario.cpp
 * @brief The differential suite's scenario program: the same RC, UC, UD, SRQ and memory-window scenarios on
 * any ibverbs device (the simulator, Soft-RoCE, hardware), each printing a canonical, normalised log of what
 * the application can observe — every post's return code, every completion (status, opcode, byte_len,
 * imm_data, wc_flags, in poll order per CQ), completion events, QP states and the contents of the buffers the
 * operations touched.
 *
 * Only <infiniband/verbs.h> and POSIX: built against the simulator's drop-in library
 * (hcasim::ibverbs) it runs on the simulator; with LD_LIBRARY_PATH pointing at rdma-core's
 * library (tests/diff/run-diff does that in the rxe guests) the same binary runs on rxe.
 *
 *   diff_scenario [--local] [--scenario LIST]            both QPs in this process: A on the
 *                                                        first device, B on the second (the
 *                                                        same device twice if there is only one)
 *   diff_scenario --server PORT [--scenario LIST]        side B; waits for the client
 *   diff_scenario --client HOST:PORT [--scenario LIST]   side A
 *
 * Side A is the requester of every scenario, B the responder. In the two-process mode the
 * processes exchange QP attributes over TCP and meet at every step boundary (sync()), so each
 * side does exactly what it does in --local mode, in the same order.
 *
 * Log format (stdout), one observation per line:
 *
 *   <scenario> <side> <observation>
 *   # comment: device names, QPNs, initial PSNs (ignored by the comparison, used by the pcap
 *   #          normaliser to map QPNs and PSNs to sides)
 *
 * Nothing in an observation depends on the device, the process or the time: QPNs are printed as
 * the side they belong to, addresses as buffer offsets, keys not at all (memory-window keys by
 * the names the scenario gives them); byte_len only where
 * ibv_poll_cq(3) defines it (receive completions; RDMA READ and atomics, where it is the number
 * of bytes written locally) and no field but wr_id and status of an error completion. The
 * lines of one side of one scenario come out in the same order in every mode, so a --local log
 * and the merged logs of a --client/--server pair compare line by line.
 * docs/differential.md describes the suite.
 */
#include <infiniband/verbs.h>

#include "../e2e/wc_names.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// ---- small helpers -----------------------------------------------------------------------------

[[noreturn]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "diff_scenario: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stdout);
  exit(2);
}

std::string strf(const char* fmt, ...) {
  char b[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  return b;
}

/** Is this the simulator (its control interface is there)? Only used to skip wall-clock waits
 *  that exist for rxe's kernel tasks: on the simulator every verbs call lets the device run. */
bool on_simulator() {
  static const bool sim = dlsym(RTLD_DEFAULT, "hcasim_sim_counter") != nullptr;
  return sim;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/** The suite's deterministic byte pattern (same as tests/e2e/verbs_fixture.h). */
uint8_t pattern_byte(uint32_t seed, size_t i) {
  uint32_t x = seed * 0x9e3779b1u + uint32_t(i) * 0x85ebca6bu + uint32_t(i >> 8) * 0xc2b2ae35u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  return uint8_t(x);
}

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// clang-format off
const char* status_name(ibv_wc_status s) {
  switch (s) {
#define S(x) \
  case IBV_WC_##x: return #x;
    S(SUCCESS) S(LOC_LEN_ERR) S(LOC_QP_OP_ERR) S(LOC_EEC_OP_ERR) S(LOC_PROT_ERR) S(WR_FLUSH_ERR)
    S(MW_BIND_ERR) S(BAD_RESP_ERR) S(LOC_ACCESS_ERR) S(REM_INV_REQ_ERR) S(REM_ACCESS_ERR)
    S(REM_OP_ERR) S(RETRY_EXC_ERR) S(RNR_RETRY_EXC_ERR) S(LOC_RDD_VIOL_ERR) S(REM_INV_RD_REQ_ERR)
    S(REM_ABORT_ERR) S(INV_EECN_ERR) S(INV_EEC_STATE_ERR) S(FATAL_ERR) S(RESP_TIMEOUT_ERR)
    S(GENERAL_ERR)
#undef S
    default: return "STATUS?";
  }
}
// clang-format on

/** The IBV_WC_* opcode's name; LOCAL_INV here, as tests/e2e/wc_names.h lacks it. */
const char* wc_opcode_name(int op) { return op == IBV_WC_LOCAL_INV ? "LOCAL_INV" : e2e::wc_opcode_name(op); }

const char* wr_opcode_name(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_SEND: return "SEND";
    case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
    case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
    case IBV_WR_RDMA_READ: return "RDMA_READ";
    case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
    case IBV_WR_BIND_MW: return "BIND_MW";
    case IBV_WR_LOCAL_INV: return "LOCAL_INV";
    case IBV_WR_SEND_WITH_INV: return "SEND_WITH_INV";
    default: return "WR?";
  }
}

const char* qp_state_name(int s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "STATE?";
  }
}

std::string errno_name(int rc) {
  switch (rc) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EAGAIN: return "EAGAIN";
    case EPERM: return "EPERM";
    case EFAULT: return "EFAULT";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return strf("errno%d", rc);
  }
}

// ---- the TCP side channel (two-process mode) ---------------------------------------------------

class Channel {
 public:
  ~Channel() {
    if (fd_ >= 0) close(fd_);
  }
  void serve(int port) {
    int ls = socket(AF_INET6, SOCK_STREAM, 0);
    bool v6 = ls >= 0;
    if (!v6) ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) {
      int zero = 0;
      setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(uint16_t(port));
      a.sin6_addr = in6addr_any;
      if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        die("bind port %d: %s", port, strerror(errno));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(uint16_t(port));
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        die("bind port %d: %s", port, strerror(errno));
    }
    if (listen(ls, 1) != 0) die("listen: %s", strerror(errno));
    fprintf(stderr, "diff_scenario: server listening on port %d\n", port);
    fd_ = accept(ls, nullptr, nullptr);
    if (fd_ < 0) die("accept: %s", strerror(errno));
    close(ls);
    tune();
  }
  void connect_to(const std::string& hostport, double seconds) {
    const size_t colon = hostport.rfind(':');
    if (colon == std::string::npos) die("--client wants HOST:PORT, got '%s'", hostport.c_str());
    const std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);
    const double deadline = now_s() + seconds;
    for (;;) {
      addrinfo hints{}, *res = nullptr;
      hints.ai_socktype = SOCK_STREAM;
      const int g = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
      if (g != 0) die("getaddrinfo %s: %s", hostport.c_str(), gai_strerror(g));
      for (addrinfo* r = res; r; r = r->ai_next) {
        int s = socket(r->ai_family, r->ai_socktype, r->ai_protocol);
        if (s < 0) continue;
        if (::connect(s, r->ai_addr, r->ai_addrlen) == 0) {
          fd_ = s;
          break;
        }
        close(s);
      }
      freeaddrinfo(res);
      if (fd_ >= 0) break;
      if (now_s() > deadline) die("cannot connect to %s: %s", hostport.c_str(), strerror(errno));
      usleep(100 * 1000);
    }
    tune();
  }
  void send_line(const std::string& s) {
    std::string l = s + "\n";
    size_t off = 0;
    while (off < l.size()) {
      ssize_t n = write(fd_, l.data() + off, l.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("side channel: write: %s", strerror(errno));
      off += size_t(n);
    }
  }
  std::string recv_line() {
    for (;;) {
      const size_t nl = in_.find('\n');
      if (nl != std::string::npos) {
        std::string l = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        return l;
      }
      pollfd p{fd_, POLLIN, 0};
      const int pr = poll(&p, 1, 120 * 1000);
      if (pr == 0) die("side channel: the peer said nothing for 120 s");
      if (pr < 0 && errno == EINTR) continue;
      char b[4096];
      ssize_t n = read(fd_, b, sizeof b);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("side channel: the peer closed the connection");
      in_.append(b, size_t(n));
    }
  }
  /** Both ends send @p tag and expect the same from the other. */
  void meet(const std::string& tag) {
    send_line(tag);
    const std::string got = recv_line();
    if (got != tag) die("side channel out of step: sent '%s', got '%s'", tag.c_str(), got.c_str());
  }

 private:
  void tune() {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int fd_ = -1;
  std::string in_;
};

// ---- sides -------------------------------------------------------------------------------------

constexpr size_t kBufSize = 64 * 1024;
constexpr uint8_t kFill = 0xcc;  ///< what every buffer holds before a scenario writes into it
constexpr unsigned kMrAll =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

/** What the peer needs to connect to a side and reach its buffer. */
struct Wire {
  uint32_t qpn = 0, psn = 0, mtu = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  uint64_t addr = 0;
  uint32_t rkey = 0;

  std::string encode() const {
    std::string g;
    for (int i = 0; i < 16; ++i) g += strf("%02x", gid.raw[i]);
    return strf("QP %x %x %u %x %s %llx %x", qpn, psn, mtu, lid, g.c_str(), (unsigned long long)addr, rkey);
  }
  static Wire decode(const std::string& s) {
    Wire w;
    char g[64] = {};
    unsigned long long addr = 0;
    unsigned lid = 0;
    if (sscanf(s.c_str(), "QP %x %x %u %x %40s %llx %x", &w.qpn, &w.psn, &w.mtu, &lid, g, &addr, &w.rkey) !=
            7 ||
        strlen(g) != 32)
      die("side channel: bad QP attributes '%s'", s.c_str());
    w.lid = uint16_t(lid);
    w.addr = addr;
    for (int i = 0; i < 16; ++i) {
      unsigned b = 0;
      sscanf(g + 2 * i, "%2x", &b);
      w.gid.raw[i] = uint8_t(b);
    }
    return w;
  }
};

/** Per-scenario QP and MR settings (identical on both sides). */
struct Config {
  ibv_qp_type qp_type = IBV_QPT_RC;
  bool srq_b = false;          ///< B's QP takes its receives from a shared receive queue
  uint32_t qkey = 0x11111111;  ///< UD: both QPs' Q_Key
  uint32_t max_inline = 0;
  uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 1;
  unsigned mr_access = kMrAll;  ///< B's MR (A's always has every right)
  unsigned qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
};

struct Side {
  char name = '?';
  std::string dev;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* scq = nullptr;  ///< send CQ (not on the channel)
  ibv_cq* rcq = nullptr;  ///< receive CQ, on the channel
  ibv_qp* qp = nullptr;
  ibv_srq* srq = nullptr;  ///< with Config::srq_b, on side B
  ibv_ah* ah = nullptr;    ///< UD: address handle towards the peer's GID
  ibv_qp_cap cap{};
  uint8_t* buf = nullptr;
  ibv_mr* mr = nullptr;
  Wire me, peer;
  int s_seen = 0, r_seen = 0;  ///< completions polled so far, per CQ

  uint64_t addr(size_t off) const { return reinterpret_cast<uintptr_t>(buf) + off; }
  ibv_sge sge(size_t off, uint32_t len) const { return ibv_sge{addr(off), len, mr->lkey}; }
};

struct Options {
  enum Mode { Local, Server, Client } mode = Local;
  int port = 0;
  std::string hostport;
  std::string dev_a, dev_b;
  int gid_index = 1;
  double wait_s = 3.0;  ///< bound on waiting for an expected completion / event
  std::vector<std::string> scenarios;
};

class Run;
using ScenarioFn = void (*)(Run&);
struct Scenario {
  const char* name;
  ScenarioFn fn;
  const char* what;
};

/**
 * One scenario on one or two sides. In --local mode both sides live here and on()/sync() run
 * everything in program order; in the two-process modes on() runs only this process's side.
 */
class Run {
 public:
  Run(const Options& o, Channel* chan, ibv_device** list, int ndev, int index, const char* name)
      : o_(o), chan_(chan), list_(list), ndev_(ndev), index_(index), name_(name) {
    a_.name = 'A';
    b_.name = 'B';
  }

  bool mine(char s) const {
    return o_.mode == Options::Local || (s == 'A' && o_.mode == Options::Client) ||
           (s == 'B' && o_.mode == Options::Server);
  }
  Side& side(char s) { return s == 'A' ? a_ : b_; }

  /** Runs @p fn on side @p s if it lives in this process. */
  void on(char s, const std::function<void(Side&)>& fn) {
    if (mine(s)) fn(side(s));
  }
  /** A step boundary: in two-process mode both processes get here before either goes on. */
  void sync() {
    if (chan_) chan_->meet(strf("SYNC %s %d", name_, ++syncs_));
  }

  // ---- logging
  void log(const Side& s, const char* fmt, ...) {
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    printf("%s %c %s\n", name_, s.name, b);
    fflush(stdout);
  }
  void comment(const char* fmt, ...) {
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    printf("# %s %s\n", name_, b);
    fflush(stdout);
  }

  // ---- setup / teardown
  void setup(const Config& c = Config()) {
    cfg_ = c;
    if (o_.mode == Options::Local) {
      open(a_, o_.dev_a.empty() ? list_[0] : find(o_.dev_a));
      open(b_, o_.dev_b.empty() ? list_[ndev_ > 1 ? 1 : 0] : find(o_.dev_b));
      a_.peer = b_.me;
      b_.peer = a_.me;
    } else {
      Side& s = side(o_.mode == Options::Client ? 'A' : 'B');
      open(s, o_.dev_a.empty() ? list_[0] : find(o_.dev_a));
      chan_->send_line(s.me.encode());
      s.peer = Wire::decode(chan_->recv_line());
    }
    // Path MTU: the smaller active MTU of the two ports, at most 1024 (what rxe on a 1500-byte
    // netdev reports; the simulator reports 4096).
    uint32_t m = IBV_MTU_1024;
    for (char c : {'A', 'B'})
      if (mine(c)) m = std::min({m, side(c).me.mtu, side(c).peer.mtu});
    mtu_ = ibv_mtu(m);
    if (mine('A')) connect(a_);
    if (mine('B')) connect(b_);
    comment("qpn A=0x%06x B=0x%06x psn A=0x%06x B=0x%06x mtu=%u dev A=%s B=%s", qpn('A'), qpn('B'), psn('A'),
            psn('B'), 128u << mtu_, mine('A') ? a_.dev.c_str() : "-", mine('B') ? b_.dev.c_str() : "-");
    sync();
  }
  void teardown() {
    sync();
    if (mine('A')) close_side(a_);
    if (mine('B')) close_side(b_);
  }
  /** Initial send PSN of each side: distinct per scenario, so the PSN names the scenario in a
   *  capture of a whole run (the pcap normaliser relies on it). */
  uint32_t psn(char s) const {
    return (s == 'A' ? 0x100000u : 0x800000u) + uint32_t(index_) * 0x1000u + uint32_t(phase_) * kPhasePsn;
  }
  /** A scenario's later QP pairs (new_qps()) start this far into its PSN range. */
  static constexpr uint32_t kPhasePsn = 0x400;

  /**
   * A fresh QP pair in the middle of a scenario, after an error left the previous one in ERR:
   * both sides destroy their QP, create a new one (initial PSNs the scenario's + kPhasePsn *
   * @p phase, so its frames stay in the scenario's PSN range), exchange the attributes and
   * connect. The PD, CQs, MR and whatever else was allocated on the PD (memory windows) stay; the
   * completion counts go on. The comment line gives the capture normaliser the new QPNs.
   */
  void new_qps(int phase) {
    sync();
    phase_ = phase;
    for (char c : {'A', 'B'})
      if (mine(c)) {
        Side& s = side(c);
        if (ibv_destroy_qp(s.qp)) die("%c: ibv_destroy_qp: %s", s.name, strerror(errno));
        s.qp = nullptr;
        create_qp(s);
      }
    if (o_.mode == Options::Local) {
      a_.peer = b_.me;
      b_.peer = a_.me;
    } else {
      Side& s = side(o_.mode == Options::Client ? 'A' : 'B');
      chan_->send_line(s.me.encode());
      s.peer = Wire::decode(chan_->recv_line());
    }
    if (mine('A')) connect(a_);
    if (mine('B')) connect(b_);
    comment("qps phase=%d qpn A=0x%06x B=0x%06x psn A=0x%06x B=0x%06x", phase, qpn('A'), qpn('B'), psn('A'),
            psn('B'));
    sync();
  }

  /** Memory windows: side @p s calls @p key @p name from now on (wc invalidated_rkey, the
   *  capture's IETH); the value goes to a comment line only, where the capture normaliser reads
   *  it. */
  void name_key(Side& s, uint32_t key, const std::string& name) {
    keys_.emplace_back(key, name);
    comment("key %c %s=0x%08x", s.name, name.c_str(), key);
  }
  std::string key_name(uint32_t key) const {
    for (auto it = keys_.rbegin(); it != keys_.rend(); ++it)
      if (it->first == key) return it->second;
    return "unnamed";
  }
  uint32_t qpn(char s) {
    if (mine(s)) return side(s).qp ? side(s).qp->qp_num : 0;
    return side(mine('A') ? 'A' : 'B').peer.qpn;
  }
  /** Address / rkey of B's buffer as A knows it. */
  uint64_t b_addr(size_t off) const { return a_.peer.addr + off; }
  uint32_t b_rkey() const { return a_.peer.rkey; }
  uint32_t mtu_bytes() const { return 128u << unsigned(mtu_); }

  // ---- operations (each logs what it did and what came back)
  int post_send(Side& s, uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge> sges, unsigned flags,
                uint64_t raddr = 0, uint32_t rkey = 0, uint32_t imm = 0, uint64_t cmp_add = 0,
                uint64_t swap = 0, const char* note = nullptr) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = int(sges.size());
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = raddr;
      wr.wr.atomic.rkey = rkey;
      wr.wr.atomic.compare_add = cmp_add;
      wr.wr.atomic.swap = swap;
    } else {
      wr.wr.rdma.remote_addr = raddr;
      wr.wr.rdma.rkey = rkey;
    }
    return post_wr(s, wr, sges, note);
  }
  /** UD: a SEND (or SEND_WITH_IMM) through address handle @p ah to QP @p remote_qpn with Q_Key
   *  @p qkey. */
  int post_ud_send(Side& s, uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge> sges, unsigned flags,
                   ibv_ah* ah, uint32_t remote_qpn, uint32_t qkey, uint32_t imm = 0,
                   const char* note = nullptr) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = int(sges.size());
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = qkey;
    const std::string n = strf("qpn=%s qkey=0x%08x%s%s", qp_name(s, remote_qpn).c_str(), qkey,
                               note ? " " : "", note ? note : "");
    return post_wr(s, wr, sges, n.c_str());
  }
  int post_wr(Side& s, ibv_send_wr& wr, const std::vector<ibv_sge>& sges, const char* note) {
    const uint64_t wr_id = wr.wr_id;
    const ibv_wr_opcode op = wr.opcode;
    const unsigned flags = wr.send_flags;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(s.qp, &wr, &bad);
    uint64_t len = 0;
    for (auto& g : sges) len += g.length;
    std::string fl;
    if (flags & IBV_SEND_SIGNALED) fl += ",SIGNALED";
    if (flags & IBV_SEND_SOLICITED) fl += ",SOLICITED";
    if (flags & IBV_SEND_INLINE) fl += ",INLINE";
    if (flags & IBV_SEND_FENCE) fl += ",FENCE";
    log(s, "post_send wr=%llu %s len=%s sge=%zu flags=%s%s%s rc=%s", (unsigned long long)wr_id,
        wr_opcode_name(op), len_str(len).c_str(), sges.size(), fl.empty() ? "-" : fl.c_str() + 1,
        note ? " " : "", note ? note : "", errno_name(rc).c_str());
    if (rc != 0 && bad != &wr) log(s, "post_send bad_wr is not the failed WR");
    return rc;
  }
  /** One receive WR to the side's QP, or with @p to_srq to its SRQ; logged with the verb used. */
  int post_recv(Side& s, uint64_t wr_id, std::vector<ibv_sge> sges, bool to_srq = false) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = int(sges.size());
    ibv_recv_wr* bad = nullptr;
    const int rc = to_srq ? ibv_post_srq_recv(s.srq, &wr, &bad) : ibv_post_recv(s.qp, &wr, &bad);
    uint64_t len = 0;
    for (auto& g : sges) len += g.length;
    log(s, "%s wr=%llu len=%s sge=%zu rc=%s", to_srq ? "post_srq_recv" : "post_recv",
        (unsigned long long)wr_id, len_str(len).c_str(), sges.size(), errno_name(rc).c_str());
    return rc;
  }
  int post_srq_recv(Side& s, uint64_t wr_id, std::vector<ibv_sge> sges) {
    return post_recv(s, wr_id, std::move(sges), true);
  }
  /** Side @p s's name for QP number @p qpn: the peer's QP, its own, or the number. The peer first:
   *  on the simulator the two sides' QPs (on two devices) may have the same number. */
  std::string qp_name(const Side& s, uint32_t qpn) const {
    if (qpn == s.peer.qpn) return std::string(1, s.name == 'A' ? 'B' : 'A');
    if (s.qp && qpn == s.qp->qp_num) return std::string(1, s.name);
    return strf("0x%x", qpn);
  }

  /** Polls @p cq of side @p s until @p n completions arrived (or wait_s passed); logs each. */
  void expect_wc(Side& s, bool recv_cq, int n, std::vector<ibv_wc>* out = nullptr) {
    ibv_cq* cq = recv_cq ? s.rcq : s.scq;
    const char* cqn = recv_cq ? "rcq" : "scq";
    int got = 0;
    const double deadline = now_s() + o_.wait_s;
    uint64_t polls = 0;
    while (got < n) {
      ibv_wc wc[2];
      const int k = ibv_poll_cq(cq, std::min(2, n - got), wc);
      if (k < 0) {
        log(s, "poll %s rc=%d", cqn, k);
        return;
      }
      for (int i = 0; i < k; ++i) {
        log_wc(s, cqn, (recv_cq ? ++s.r_seen : ++s.s_seen), wc[i]);
        if (out) out->push_back(wc[i]);
      }
      got += k;
      if (k == 0 && (++polls & 63) == 0 && now_s() > deadline) {
        log(s, "%s timeout: %d of %d completion(s)", cqn, got, n);
        return;
      }
    }
  }
  /**
   * Nothing (more) on the CQ: polls at least @p polls times and for at least @p ms of wall
   * time (on the simulator every poll lets the device run; on rxe the time lets the kernel's
   * tasks run). Logs "<cq> empty" or whatever arrived.
   */
  void expect_empty(Side& s, bool recv_cq, int polls = 200, int ms = 20) {
    ibv_cq* cq = recv_cq ? s.rcq : s.scq;
    const char* cqn = recv_cq ? "rcq" : "scq";
    const double until = now_s() + (on_simulator() ? 0 : ms / 1000.0);
    bool any = false;
    for (int i = 0; i < polls || now_s() < until; ++i) {
      ibv_wc wc;
      const int k = ibv_poll_cq(cq, 1, &wc);
      if (k > 0) {
        log_wc(s, cqn, recv_cq ? ++s.r_seen : ++s.s_seen, wc);
        any = true;
      }
      if (k == 0 && i >= polls) usleep(200);
    }
    if (!any) log(s, "%s empty", cqn);
  }
  void log_wc(Side& s, const char* cqn, int n, const ibv_wc& wc) {
    std::string who = wc.qp_num == s.qp->qp_num ? std::string(1, s.name) : strf("0x%x", wc.qp_num);
    if (wc.status != IBV_WC_SUCCESS) {
      log(s, "wc %s #%d wr=%llu %s qp=%s", cqn, n, (unsigned long long)wc.wr_id, status_name(wc.status),
          who.c_str());
      return;
    }
    std::string len = "-";
    switch (wc.opcode) {
      case IBV_WC_RECV:
      case IBV_WC_RECV_RDMA_WITH_IMM:
      case IBV_WC_RDMA_READ:
      case IBV_WC_COMP_SWAP:
      case IBV_WC_FETCH_ADD: len = len_str(wc.byte_len); break;
      default: break;  // SEND / RDMA_WRITE requester: byte_len undefined (ibv_poll_cq(3))
    }
    // wc_flags: IBV_WC_GRH on its own (ibv_poll_cq(3): "valid only for UD QPs"), the rest by name.
    std::string flags;
    unsigned f = unsigned(wc.wc_flags) & ~unsigned(IBV_WC_GRH);
    if (f & IBV_WC_WITH_IMM) flags += ",WITH_IMM", f &= ~unsigned(IBV_WC_WITH_IMM);
    if (f & IBV_WC_WITH_INV) flags += ",WITH_INV", f &= ~unsigned(IBV_WC_WITH_INV);
    if (f & IBV_WC_IP_CSUM_OK) flags += ",IP_CSUM_OK", f &= ~unsigned(IBV_WC_IP_CSUM_OK);
    if (f) flags += strf(",0x%x", f);
    std::string imm = (wc.wc_flags & IBV_WC_WITH_IMM) ? strf("0x%08x", ntohl(wc.imm_data)) : "-";
    // UD receive completions: the sender's QP (src_qp), by side (ibv_poll_cq(3): "UD only").
    const std::string src = (s.qp->qp_type == IBV_QPT_UD && wc.opcode & IBV_WC_RECV)
                                ? " src_qp=" + qp_name(s, wc.src_qp)
                                : std::string();
    // invalidated_rkey: only with IBV_WC_WITH_INV (ibv_poll_cq(3)), by the name the scenario gave it.
    const std::string inv =
        (wc.wc_flags & IBV_WC_WITH_INV) ? " inv_rkey=" + key_name(wc.invalidated_rkey) : std::string();
    log(s, "wc %s #%d wr=%llu SUCCESS op=%s len=%s imm=%s flags=%s grh=%d qp=%s%s%s", cqn, n,
        (unsigned long long)wc.wr_id, wc_opcode_name(wc.opcode), len.c_str(), imm.c_str(),
        flags.empty() ? "-" : flags.c_str() + 1, (wc.wc_flags & IBV_WC_GRH) ? 1 : 0, who.c_str(), src.c_str(),
        inv.c_str());
  }

  /** Arms the receive CQ (solicited_only or next completion). */
  void arm(Side& s, bool solicited_only) {
    const int rc = ibv_req_notify_cq(s.rcq, solicited_only ? 1 : 0);
    log(s, "arm rcq %s rc=%s", solicited_only ? "solicited" : "next", errno_name(rc).c_str());
  }
  /** Was there a completion event on the channel? Waits up to @p ms when @p expect, else a
   *  short while (the caller has made sure whatever could cause it has completed). */
  void check_event(Side& s, bool expect) {
    const double until = now_s() + (expect ? o_.wait_s : 0.05);
    int got = 0;
    for (int i = 0;; ++i) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      if (ibv_get_cq_event(s.ch, &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        ++got;
        log(s, "event %s", cq == s.rcq ? "rcq" : cq == s.scq ? "scq" : "cq?");
        if (expect) break;
        continue;
      }
      if (i >= 20 && now_s() > until) break;
      pollfd p{s.ch->fd, POLLIN, 0};
      poll(&p, 1, 1);
    }
    if (!got) log(s, "event none");
  }

  void qp_state(Side& s) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    const int rc = ibv_query_qp(s.qp, &a, IBV_QP_STATE, &ia);
    if (rc)
      log(s, "qp state query rc=%s", errno_name(rc).c_str());
    else
      log(s, "qp state=%s", qp_state_name(a.qp_state));
  }
  int modify_state(Side& s, ibv_qp_state st) {
    ibv_qp_attr a{};
    a.qp_state = st;
    const int rc = ibv_modify_qp(s.qp, &a, IBV_QP_STATE);
    log(s, "modify_qp state=%s rc=%s", qp_state_name(st), errno_name(rc).c_str());
    return rc;
  }

  // ---- shared receive queues and asynchronous events
  /** ibv_modify_srq(3) IBV_SRQ_LIMIT: arms the limit event. */
  void arm_srq(Side& s, uint32_t limit) {
    ibv_srq_attr a{};
    a.srq_limit = limit;
    const int rc = ibv_modify_srq(s.srq, &a, IBV_SRQ_LIMIT);
    log(s, "modify_srq limit=%u rc=%s", limit, errno_name(rc).c_str());
  }
  /** ibv_query_srq(3)'s srq_limit (max_wr / max_sge are device-dependent sizes, not logged). */
  void query_srq(Side& s) {
    ibv_srq_attr a{};
    const int rc = ibv_query_srq(s.srq, &a);
    if (rc)
      log(s, "query_srq rc=%s", errno_name(rc).c_str());
    else
      log(s, "query_srq limit=%u", a.srq_limit);
  }
  /** Asynchronous events on the side's context (ibv_get_async_event(3)): waits up to wait_s for
   *  one when @p expect, else checks for a short while that none is there. Each is logged by type
   *  and element (side names, not handles) and acknowledged. */
  void check_async(Side& s, bool expect) {
    const double until = now_s() + (expect ? o_.wait_s : 0.05);
    int got = 0;
    for (int i = 0;; ++i) {
      ibv_async_event ev{};
      if (ibv_get_async_event(s.ctx, &ev) == 0) {
        ++got;
        std::string what;
        switch (ev.event_type) {
          case IBV_EVENT_SRQ_LIMIT_REACHED:
            what = strf("SRQ_LIMIT_REACHED srq=%s",
                        ev.element.srq == s.srq ? std::string(1, s.name).c_str() : "?");
            break;
          case IBV_EVENT_SRQ_ERR: what = "SRQ_ERR"; break;
          case IBV_EVENT_QP_LAST_WQE_REACHED:
            what = strf("QP_LAST_WQE_REACHED qp=%s",
                        ev.element.qp == s.qp ? std::string(1, s.name).c_str() : "?");
            break;
          case IBV_EVENT_COMM_EST: what = "COMM_EST"; break;
          case IBV_EVENT_QP_FATAL: what = "QP_FATAL"; break;
          case IBV_EVENT_CQ_ERR: what = "CQ_ERR"; break;
          default: what = strf("type%d", int(ev.event_type)); break;
        }
        ibv_ack_async_event(&ev);
        log(s, "async %s", what.c_str());
        if (expect) break;
        continue;
      }
      if (i >= 20 && now_s() > until) break;
      pollfd p{s.ctx->async_fd, POLLIN, 0};
      poll(&p, 1, 1);
    }
    if (!got) log(s, "async none");
  }

  // ---- UD: the 40-byte header in front of every UD receive
  /**
   * Logs the 40 bytes at @p off of a UD receive buffer (ibv_poll_cq(3): the GRH). For RoCE v2
   * over IPv4 the IPv4 header is in its last 20 bytes; what depends on the setup (the addresses,
   * the identification, the checksum's value) is printed as facts that do not: the source is the
   * peer's GID, the destination this side's, the checksum is valid. The first 20 bytes are
   * printed as memory.
   */
  void grh(Side& s, size_t off) {
    mem(s, off, 20);
    const uint8_t* ip = s.buf + off + 20;
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += uint32_t(ip[i] << 8 | ip[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    // The source is expected to be the peer, the destination this side (with one device, as rxe's
    // --local, both are the same address).
    auto is = [&](const uint8_t* a, const ibv_gid& g) { return memcmp(a, g.raw + 12, 4) == 0; };
    const char* src = is(ip + 12, s.peer.gid) ? "peer" : is(ip + 12, s.me.gid) ? "self" : "other";
    const char* dst = is(ip + 16, s.me.gid) ? "self" : is(ip + 16, s.peer.gid) ? "peer" : "other";
    log(s,
        "grh ipv4 ver=%u ihl=%u tos=0x%02x len=%u flags=0x%x frag=%u ttl=%u proto=%u csum=%s src=%s dst=%s",
        ip[0] >> 4, ip[0] & 15u, ip[1], unsigned(ip[2] << 8 | ip[3]), ip[6] >> 5,
        unsigned((ip[6] & 0x1f) << 8 | ip[7]), ip[8], ip[9], sum == 0xffff ? "ok" : "bad", src, dst);
  }

  // ---- memory
  void fill_pattern(Side& s, size_t off, size_t len, uint32_t seed) {
    for (size_t i = 0; i < len; ++i) s.buf[off + i] = pattern_byte(seed, i);
  }
  void fill(Side& s, size_t off, size_t len, uint8_t v) { memset(s.buf + off, v, len); }
  /** Logs what [off, off+len) of the side's buffer holds: a known pattern or fill, else a digest
   *  and the first bytes. */
  void mem(Side& s, size_t off, size_t len, uint32_t expect_seed = 0, uint32_t other_seed = 0) {
    const uint8_t* p = s.buf + off;
    auto is_pattern = [&](uint32_t seed) {
      if (seed == 0) return false;
      for (size_t i = 0; i < len; ++i)
        if (p[i] != pattern_byte(seed, i)) return false;
      return true;
    };
    bool is_fill = true;
    for (size_t i = 0; i < len; ++i) is_fill = is_fill && p[i] == p[0];
    std::string what;
    if (len == 0)
      what = "empty";
    else if (is_pattern(expect_seed))
      what = strf("pattern(%u)", expect_seed);
    else if (is_pattern(other_seed))
      what = strf("pattern(%u)", other_seed);
    else if (is_fill)
      what = strf("fill(0x%02x)", p[0]);
    else {
      // Say how much of it is the expected pattern, then a digest.
      size_t good = 0;
      if (expect_seed)
        for (size_t i = 0; i < len; ++i) good += p[i] == pattern_byte(expect_seed, i);
      what = strf("fnv=%016llx first=", (unsigned long long)fnv1a(p, len));
      for (size_t i = 0; i < std::min<size_t>(len, 8); ++i) what += strf("%02x", p[i]);
      if (expect_seed) what += strf(" pattern(%u)-bytes=%zu", expect_seed, good);
    }
    log(s, "mem [%s,+%s) %s", len_str(off).c_str(), len_str(len).c_str(), what.c_str());
  }
  uint64_t u64(Side& s, size_t off) {
    uint64_t v;
    memcpy(&v, s.buf + off, 8);
    return v;
  }
  void set_u64(Side& s, size_t off, uint64_t v) { memcpy(s.buf + off, &v, 8); }
  void log_u64(Side& s, size_t off) { log(s, "u64 [%zu] 0x%016llx", off, (unsigned long long)u64(s, off)); }

  /** A device-dependent length (e.g. cap.max_inline_data) printed by name wherever it appears as
   *  a length, so logs of different devices stay comparable. */
  void alias_len(uint64_t value, const char* name) {
    alias_value_ = value;
    alias_name_ = name;
  }
  std::string len_str(uint64_t v) const {
    if (!alias_name_.empty() && v == alias_value_) return alias_name_;
    if (!alias_name_.empty() && v == alias_value_ + 1) return alias_name_ + "+1";
    return strf("%llu", (unsigned long long)v);
  }
  /** Side @p from's value of @p v becomes the other side's too (two-process mode: over the side
   *  channel; --local: it is the same variable). */
  void share(char from, uint64_t& v) {
    if (!chan_) return;
    const std::string tag = strf("SHARE %s %d", name_, ++syncs_);
    if (mine(from)) {
      chan_->send_line(strf("%s %llu", tag.c_str(), (unsigned long long)v));
    } else {
      const std::string l = chan_->recv_line();
      unsigned long long x = 0;
      if (l.compare(0, tag.size(), tag) != 0 || sscanf(l.c_str() + tag.size(), " %llu", &x) != 1)
        die("side channel out of step: expected '%s <value>', got '%s'", tag.c_str(), l.c_str());
      v = x;
    }
  }

 private:
  ibv_device* find(const std::string& name) {
    for (int i = 0; i < ndev_; ++i)
      if (name == ibv_get_device_name(list_[i])) return list_[i];
    die("no device named %s", name.c_str());
  }
  void open(Side& s, ibv_device* dev) {
    s.dev = ibv_get_device_name(dev);
    s.ctx = ibv_open_device(dev);
    if (!s.ctx) die("ibv_open_device(%s): %s", s.dev.c_str(), strerror(errno));
    s.pd = ibv_alloc_pd(s.ctx);
    if (!s.pd) die("ibv_alloc_pd: %s", strerror(errno));
    s.ch = ibv_create_comp_channel(s.ctx);
    if (!s.ch) die("ibv_create_comp_channel: %s", strerror(errno));
    const int fl = fcntl(s.ch->fd, F_GETFL);
    fcntl(s.ch->fd, F_SETFL, fl | O_NONBLOCK);
    s.scq = ibv_create_cq(s.ctx, 64, &s, nullptr, 0);
    s.rcq = ibv_create_cq(s.ctx, 64, &s, s.ch, 0);
    if (!s.scq || !s.rcq) die("ibv_create_cq: %s", strerror(errno));
    s.buf = static_cast<uint8_t*>(aligned_alloc(4096, kBufSize));
    if (!s.buf) die("out of memory");
    memset(s.buf, kFill, kBufSize);
    s.mr = ibv_reg_mr(s.pd, s.buf, kBufSize, int(s.name == 'B' ? cfg_.mr_access : kMrAll));
    if (!s.mr) die("ibv_reg_mr: %s", strerror(errno));
    s.s_seen = s.r_seen = 0;
    const int afl = fcntl(s.ctx->async_fd, F_GETFL);
    fcntl(s.ctx->async_fd, F_SETFL, afl | O_NONBLOCK);
    if (cfg_.srq_b && s.name == 'B') {
      ibv_srq_init_attr sa{};
      sa.attr.max_wr = 16;
      sa.attr.max_sge = 4;
      s.srq = ibv_create_srq(s.pd, &sa);
      if (!s.srq) die("ibv_create_srq: %s", strerror(errno));
    }
    create_qp(s);
  }
  void create_qp(Side& s) {
    ibv_qp_init_attr ia{};
    ia.send_cq = s.scq;
    ia.recv_cq = s.rcq;
    ia.srq = s.srq;
    ia.qp_type = cfg_.qp_type;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = 4;
    ia.cap.max_recv_sge = 4;
    ia.cap.max_inline_data = cfg_.max_inline;
    s.qp = ibv_create_qp(s.pd, &ia);
    if (!s.qp) die("ibv_create_qp: %s", strerror(errno));
    s.cap = ia.cap;
    ibv_port_attr pa{};
    if (ibv_query_port(s.ctx, 1, &pa) != 0) die("ibv_query_port: %s", strerror(errno));
    if (ibv_query_gid(s.ctx, 1, o_.gid_index, &s.me.gid) != 0) die("ibv_query_gid: %s", strerror(errno));
    s.me.qpn = s.qp->qp_num;
    s.me.psn = psn(s.name);
    s.me.mtu = pa.active_mtu;
    s.me.lid = pa.lid;
    s.me.addr = s.addr(0);
    s.me.rkey = s.mr->rkey;
  }
  void connect(Side& s) {
    if (cfg_.qp_type == IBV_QPT_UD) return connect_ud(s);
    const bool uc = cfg_.qp_type == IBV_QPT_UC;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = int(cfg_.qp_access);
    if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      die("%c: INIT: %s", s.name, strerror(errno));
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu_;
    a.dest_qp_num = s.peer.qpn;
    a.rq_psn = s.peer.psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = cfg_.min_rnr_timer;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = s.peer.gid;
    a.ah_attr.grh.sgid_index = uint8_t(o_.gid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.dlid = s.peer.lid;
    a.ah_attr.port_num = 1;
    // ibv_modify_qp(3): UC has no READ/atomic resources, no RNR timer, no retries.
    if (ibv_modify_qp(s.qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          (uc ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
      die("%c: RTR: %s", s.name, strerror(errno));
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = cfg_.timeout;
    a.retry_cnt = cfg_.retry_cnt;
    a.rnr_retry = cfg_.rnr_retry;
    a.sq_psn = s.me.psn;
    a.max_rd_atomic = 4;
    if (ibv_modify_qp(s.qp, &a,
                      uc ? IBV_QP_STATE | IBV_QP_SQ_PSN
                         : IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      die("%c: RTS: %s", s.name, strerror(errno));
  }
  /** UD (ibv_modify_qp(3)): the Q_Key at INIT, nothing at RTR, the SQ PSN at RTS; then an address
   *  handle towards the peer's GID (ibv_create_ah(3)). */
  void connect_ud(Side& s) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = cfg_.qkey;
    if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
      die("%c: INIT: %s", s.name, strerror(errno));
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE)) die("%c: RTR: %s", s.name, strerror(errno));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = s.me.psn;
    if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) die("%c: RTS: %s", s.name, strerror(errno));
    ibv_ah_attr aa{};
    aa.is_global = 1;
    aa.grh.dgid = s.peer.gid;
    aa.grh.sgid_index = uint8_t(o_.gid_index);
    aa.grh.hop_limit = 64;
    aa.dlid = s.peer.lid;
    aa.port_num = 1;
    s.ah = ibv_create_ah(s.pd, &aa);
    if (!s.ah) die("%c: ibv_create_ah: %s", s.name, strerror(errno));
  }
  void close_side(Side& s) {
    if (s.ah && ibv_destroy_ah(s.ah)) die("%c: ibv_destroy_ah: %s", s.name, strerror(errno));
    if (s.qp && ibv_destroy_qp(s.qp)) die("%c: ibv_destroy_qp: %s", s.name, strerror(errno));
    if (s.srq && ibv_destroy_srq(s.srq)) die("%c: ibv_destroy_srq: %s", s.name, strerror(errno));
    if (s.mr && ibv_dereg_mr(s.mr)) die("%c: ibv_dereg_mr: %s", s.name, strerror(errno));
    if (s.scq && ibv_destroy_cq(s.scq)) die("%c: ibv_destroy_cq: %s", s.name, strerror(errno));
    if (s.rcq && ibv_destroy_cq(s.rcq)) die("%c: ibv_destroy_cq: %s", s.name, strerror(errno));
    if (s.ch && ibv_destroy_comp_channel(s.ch))
      die("%c: ibv_destroy_comp_channel: %s", s.name, strerror(errno));
    if (s.pd && ibv_dealloc_pd(s.pd)) die("%c: ibv_dealloc_pd: %s", s.name, strerror(errno));
    if (s.ctx && ibv_close_device(s.ctx)) die("%c: ibv_close_device: %s", s.name, strerror(errno));
    free(s.buf);
    const char n = s.name;
    s = Side{};
    s.name = n;
  }

  const Options& o_;
  Channel* chan_;
  ibv_device** list_;
  int ndev_;
  int index_;
  const char* name_;
  Config cfg_;
  ibv_mtu mtu_ = IBV_MTU_1024;
  Side a_, b_;
  int syncs_ = 0;
  int phase_ = 0;                                       ///< new_qps()
  std::vector<std::pair<uint32_t, std::string>> keys_;  ///< name_key()
  uint64_t alias_value_ = 0;
  std::string alias_name_;
};

constexpr unsigned SIG = IBV_SEND_SIGNALED;

// ---- the scenarios -----------------------------------------------------------------------------
// Each one: setup(), then steps on A and B separated by sync(), then teardown(). B's buffer is
// all 0xcc before the scenario; "mem" lines show what the operations left there.

// SEND 2500 B (FIRST/MIDDLE/LAST at MTU 1024) into a 4096-byte receive, then a zero-length SEND.
void sc_send(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 4096)});
    r.post_recv(b, 102, {b.sge(8192, 64)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 2500, 1);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 2500)}, SIG);
    r.post_send(a, 2, IBV_WR_SEND, {}, SIG);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2);
    r.mem(b, 0, 2500, 1);
    r.mem(b, 2500, 4096 - 2500);
    r.mem(b, 8192, 64);
  });
  r.teardown();
}

// SEND_WITH_IMM 100 B and a zero-length one; the immediate arrives in host order via ntohl.
void sc_send_imm(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 256)});
    r.post_recv(b, 102, {b.sge(256, 256)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 100, 2);
    r.post_send(a, 1, IBV_WR_SEND_WITH_IMM, {a.sge(0, 100)}, SIG, 0, 0, 0x12345678);
    r.post_send(a, 2, IBV_WR_SEND_WITH_IMM, {}, SIG, 0, 0, 0xfedcba98);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2);
    r.mem(b, 0, 100, 2);
    r.mem(b, 100, 412);
  });
  r.teardown();
}

// RDMA_WRITE 3000 B to B+4096 (3 packets), two SGEs gathered; no receive is consumed.
void sc_write(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 64)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 3000, 3);
    r.post_send(a, 1, IBV_WR_RDMA_WRITE, {a.sge(0, 1000), a.sge(1000, 2000)}, SIG, r.b_addr(4096),
                r.b_rkey());
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true);
    r.mem(b, 4096 - 16, 16);
    r.mem(b, 4096, 3000, 3);
    r.mem(b, 4096 + 3000, 100);
    r.mem(b, 0, 64);
  });
  r.teardown();
}

// RDMA_WRITE_WITH_IMM 3000 B and a zero-length one: each consumes a receive (byte_len = the
// length written, not the receive's), nothing is written to the receive buffer.
void sc_write_imm(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 64)});
    r.post_recv(b, 102, {});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 3000, 4);
    r.post_send(a, 1, IBV_WR_RDMA_WRITE_WITH_IMM, {a.sge(0, 3000)}, SIG, r.b_addr(4096), r.b_rkey(),
                0xc0ffee);
    r.post_send(a, 2, IBV_WR_RDMA_WRITE_WITH_IMM, {}, SIG, r.b_addr(16384), r.b_rkey(), 7);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2);
    r.mem(b, 4096, 3000, 4);
    r.mem(b, 4096 + 3000, 100);
    r.mem(b, 0, 64);
    r.mem(b, 16384, 64);
  });
  r.teardown();
}

// RDMA_READ of 4196 B (5 response packets) into A, scattered over two SGEs.
void sc_read(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.fill_pattern(b, 8192, 4196, 5); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.post_send(a, 1, IBV_WR_RDMA_READ, {a.sge(0, 96), a.sge(96, 4100)}, SIG, r.b_addr(8192), r.b_rkey());
    r.expect_wc(a, false, 1);
    r.mem(a, 0, 4196, 5);
    r.mem(a, 4196, 100);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true);
    r.mem(b, 8192, 4196, 5);
  });
  r.teardown();
}

// FETCH_AND_ADD twice on B's u64 (host byte order at both ends).
void sc_atomic_fa(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.set_u64(b, 64, 0x1000000000000001ull); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.post_send(a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, {a.sge(0, 8)}, SIG, r.b_addr(64), r.b_rkey(), 0, 0x10);
    r.post_send(a, 2, IBV_WR_ATOMIC_FETCH_AND_ADD, {a.sge(8, 8)}, SIG, r.b_addr(64), r.b_rkey(), 0,
                0xf000000000000000ull);
    r.expect_wc(a, false, 2);
    r.log_u64(a, 0);
    r.log_u64(a, 8);
    r.mem(a, 16, 16);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.log_u64(b, 64);
    r.mem(b, 56, 8);
    r.mem(b, 72, 8);
  });
  r.teardown();
}

// CMP_AND_SWP: equal -> swapped; different -> unchanged; both return the original.
void sc_atomic_cs(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.set_u64(b, 128, 0x0123456789abcdefull); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.post_send(a, 1, IBV_WR_ATOMIC_CMP_AND_SWP, {a.sge(0, 8)}, SIG, r.b_addr(128), r.b_rkey(), 0,
                0x0123456789abcdefull, 0x1111111111111111ull);
    r.post_send(a, 2, IBV_WR_ATOMIC_CMP_AND_SWP, {a.sge(8, 8)}, SIG, r.b_addr(128), r.b_rkey(), 0,
                0x0123456789abcdefull, 0x2222222222222222ull);
    r.expect_wc(a, false, 2);
    r.log_u64(a, 0);
    r.log_u64(a, 8);
  });
  r.sync();
  r.on('B', [&](Side& b) { r.log_u64(b, 128); });
  r.teardown();
}

// Lengths around the MTU: SEND of exactly one MTU (ONLY), one MTU + 1 (FIRST/LAST), an
// RDMA_WRITE of 10 MTU + 17, an RDMA_READ of exactly 5 MTU.
void sc_multi_mtu(Run& r) {
  r.setup();
  const uint32_t m = r.mtu_bytes();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 2 * m)});
    r.post_recv(b, 102, {b.sge(2 * m, 2 * m)});
    r.fill_pattern(b, 32768, 5 * m, 13);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, m, 10);
    r.fill_pattern(a, m, m + 1, 11);
    r.fill_pattern(a, 8192, 10 * m + 17, 12);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, m)}, SIG);
    r.post_send(a, 2, IBV_WR_SEND, {a.sge(m, m + 1)}, SIG);
    r.post_send(a, 3, IBV_WR_RDMA_WRITE, {a.sge(8192, 10 * m + 17)}, SIG, r.b_addr(8192), r.b_rkey());
    r.post_send(a, 4, IBV_WR_RDMA_READ, {a.sge(32768, 5 * m)}, SIG, r.b_addr(32768), r.b_rkey());
    r.expect_wc(a, false, 4);
    r.mem(a, 32768, 5 * m, 13);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2);
    r.mem(b, 0, m, 10);
    r.mem(b, m, m);
    r.mem(b, 2 * m, m + 1, 11);
    r.mem(b, 8192, 10 * m + 17, 12);
    r.mem(b, 8192 + 10 * m + 17, 64);
  });
  r.teardown();
}

// IBV_SEND_INLINE: a 64-byte SEND and a 32-byte RDMA_WRITE whose source is overwritten right
// after the post (the data was copied at post time).
void sc_inline(Run& r) {
  Config c;
  c.max_inline = 64;
  r.setup(c);
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 256)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 64, 20);
    r.fill_pattern(a, 64, 32, 21);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 64)}, SIG | IBV_SEND_INLINE);
    r.post_send(a, 2, IBV_WR_RDMA_WRITE, {a.sge(64, 32)}, SIG | IBV_SEND_INLINE, r.b_addr(1024), r.b_rkey());
    r.fill(a, 0, 96, 0);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 0, 64, 20);
    r.mem(b, 1024, 32, 21);
    r.mem(b, 1056, 32);
  });
  r.teardown();
}

// Unsignaled WRs: three unsignaled RDMA_WRITEs and a signaled one -> one completion; an
// unsignaled SEND still consumes (and completes) the receive.
void sc_unsignaled(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 256)});
    r.post_recv(b, 102, {b.sge(256, 256)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    for (int i = 0; i < 4; ++i) r.fill_pattern(a, 1024 * i, 512, 30 + i);
    for (int i = 0; i < 3; ++i)
      r.post_send(a, 10 + i, IBV_WR_RDMA_WRITE, {a.sge(1024 * i, 512)}, 0, r.b_addr(8192 + 1024 * i),
                  r.b_rkey());
    r.post_send(a, 13, IBV_WR_RDMA_WRITE, {a.sge(3072, 512)}, SIG, r.b_addr(8192 + 3072), r.b_rkey());
    r.expect_wc(a, false, 1);
    r.expect_empty(a, false);
    r.fill_pattern(a, 4096, 100, 34);
    r.fill_pattern(a, 4096 + 100, 100, 35);
    r.post_send(a, 14, IBV_WR_SEND, {a.sge(4096, 100)}, 0);
    r.post_send(a, 15, IBV_WR_SEND, {a.sge(4096 + 100, 100)}, SIG);
    r.expect_wc(a, false, 1);
    r.expect_empty(a, false);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2);
    for (int i = 0; i < 4; ++i) r.mem(b, 8192 + 1024 * i, 512, 30 + i);
    r.mem(b, 0, 100, 34);
    r.mem(b, 256, 100, 35);
  });
  r.teardown();
}

// Solicited events: B's receive CQ armed solicited-only; an unsolicited SEND raises no event,
// a solicited SEND does, and (re-armed) a solicited RDMA_WRITE_WITH_IMM does; an unsolicited
// RDMA_WRITE_WITH_IMM after re-arming does not.
void sc_solicited(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    for (int i = 0; i < 4; ++i) r.post_recv(b, 101 + i, {b.sge(256 * i, 256)});
    r.arm(b, true);
  });
  r.sync();
  auto a_step = [&](uint64_t id, ibv_wr_opcode op, unsigned flags) {
    r.on('A', [&](Side& a) {
      r.fill_pattern(a, 0, 16, 40 + uint32_t(id));
      if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
        r.post_send(a, id, op, {a.sge(0, 16)}, flags, r.b_addr(4096 + 64 * id), r.b_rkey(),
                    uint32_t(0x5e000 + id));
      else
        r.post_send(a, id, op, {a.sge(0, 16)}, flags);
      r.expect_wc(a, false, 1);
    });
    r.sync();
  };
  a_step(1, IBV_WR_SEND, SIG);
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);  // the completion is written (and the event decided) before it is polled
    r.check_event(b, false);
  });
  r.sync();
  a_step(2, IBV_WR_SEND, SIG | IBV_SEND_SOLICITED);
  r.on('B', [&](Side& b) {
    r.check_event(b, true);
    r.expect_wc(b, true, 1);
    r.arm(b, true);
  });
  r.sync();
  a_step(3, IBV_WR_RDMA_WRITE_WITH_IMM, SIG);
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.check_event(b, false);
  });
  r.sync();
  a_step(4, IBV_WR_RDMA_WRITE_WITH_IMM, SIG | IBV_SEND_SOLICITED);
  r.on('B', [&](Side& b) {
    r.check_event(b, true);
    r.expect_wc(b, true, 1);
    r.mem(b, 0, 16, 41);
    r.mem(b, 256, 16, 42);
    r.mem(b, 4096 + 64 * 3, 16, 43);
    r.mem(b, 4096 + 64 * 4, 16, 44);
  });
  r.teardown();
}

// Receiver not ready: rnr_retry 7 (retry forever). A SEND without a posted receive is RNR
// NAKed and retried until B posts one; then both complete.
void sc_rnr(Run& r) {
  Config c;
  c.rnr_retry = 7;
  c.min_rnr_timer = 1;  // 0.01 ms
  r.setup(c);
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 300, 50);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 300)}, SIG);
    r.expect_empty(a, false, 200, 100);  // RNR NAKed and retrying
  });
  r.sync();
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 4096)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 0, 300, 50);
  });
  r.teardown();
}

// rnr_retry 0: the first RNR NAK ends the SEND with RNR_RETRY_EXC_ERR and A's QP goes to ERR
// (a SEND posted afterwards is flushed); B's QP is unaffected. One SEND at a time, so what is on
// the wire does not depend on timing.
void sc_rnr_exc(Run& r) {
  Config c;
  c.rnr_retry = 0;
  r.setup(c);
  r.on('A', [&](Side& a) {
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 64)}, SIG);
    r.expect_wc(a, false, 1);
    r.qp_state(a);
    r.post_send(a, 2, IBV_WR_SEND, {a.sge(64, 64)}, SIG);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true);
    r.qp_state(b);
  });
  r.teardown();
}

// Remote access error: an RDMA_WRITE with a wrong rkey -> NAK remote access error ->
// REM_ACCESS_ERR; the requester's QP goes to ERR (WRs posted afterwards are flushed, signaled or
// not); the responder's QP goes to ERR and flushes its posted receive; B's memory is untouched.
void sc_rem_access(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 64)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 256, 60);
    r.post_send(a, 1, IBV_WR_RDMA_WRITE, {a.sge(0, 256)}, SIG, r.b_addr(1024), r.b_rkey() ^ 0x00a5a500u, 0, 0,
                0, "rkey=wrong");
    r.expect_wc(a, false, 1);
    r.qp_state(a);
    r.post_send(a, 2, IBV_WR_RDMA_WRITE, {a.sge(0, 256)}, 0, r.b_addr(2048), r.b_rkey());
    r.post_send(a, 3, IBV_WR_SEND, {a.sge(0, 32)}, SIG);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.qp_state(b);
    r.mem(b, 1024, 256);
    r.mem(b, 2048, 256);
    r.mem(b, 0, 64);
  });
  r.teardown();
}

// Remote access error on a READ (beyond the end of B's MR), with WRs queued behind it that
// cannot start: an RDMA_WRITE with IBV_SEND_FENCE (waits for the READ to complete; unsignaled)
// and a SEND behind that. The READ fails with REM_ACCESS_ERR, the two behind it are flushed
// (the unsignaled one too: errors always complete) without reaching the wire.
void sc_rem_access_read(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 64)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.post_send(a, 1, IBV_WR_RDMA_READ, {a.sge(0, 256)}, SIG, r.b_addr(kBufSize - 128), r.b_rkey(), 0, 0, 0,
                "range=beyond-mr");
    r.post_send(a, 2, IBV_WR_RDMA_WRITE, {a.sge(512, 64)}, IBV_SEND_FENCE, r.b_addr(1024), r.b_rkey());
    r.post_send(a, 3, IBV_WR_SEND, {a.sge(512, 32)}, SIG);
    r.expect_wc(a, false, 3);
    r.qp_state(a);
    r.mem(a, 0, 256);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.qp_state(b);
    r.mem(b, 1024, 64);
  });
  r.teardown();
}

// An atomic on an MR registered without REMOTE_ATOMIC: REM_ACCESS_ERR, memory unchanged.
void sc_rem_access_atomic(Run& r) {
  Config c;
  c.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  r.setup(c);
  r.on('B', [&](Side& b) { r.set_u64(b, 64, 5); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.post_send(a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, {a.sge(0, 8)}, SIG, r.b_addr(64), r.b_rkey(), 0, 1, 0,
                "mr=no-remote-atomic");
    r.expect_wc(a, false, 1);
    r.qp_state(a);
    r.mem(a, 0, 8);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.qp_state(b);
    r.log_u64(b, 64);
  });
  r.teardown();
}

// Flush: receives posted before the QP is moved to ERR complete with WR_FLUSH_ERR in order; so
// do sends posted on a QP in ERR, and receives posted on a QP in ERR (IBTA 10.8.3 / o10-2.2-1:
// a WR posted to a QP in the Error state is completed with flush error).
void sc_flush(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    for (int i = 0; i < 3; ++i) r.post_recv(b, 101 + i, {b.sge(256 * i, 256)});
    r.modify_state(b, IBV_QPS_ERR);
    r.expect_wc(b, true, 3);
    r.qp_state(b);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.modify_state(a, IBV_QPS_ERR);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 32)}, SIG);
    r.post_send(a, 2, IBV_WR_RDMA_WRITE, {a.sge(0, 32)}, 0, r.b_addr(0), r.b_rkey());
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 104, {b.sge(1024, 256)});
    r.expect_wc(b, true, 1);
    r.mem(b, 0, 1024);
  });
  r.teardown();
}

// A SEND longer than the posted receive: the responder completes the receive with LOC_LEN_ERR
// (and, armed solicited-only, still gets an event: error completions always notify), the
// requester gets REM_INV_REQ_ERR (NAK invalid request); both QPs go to ERR.
void sc_len_err(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 16)});
    r.arm(b, true);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 64, 70);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 64)}, SIG);
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.check_event(b, true);
    r.expect_wc(b, true, 1);
    r.qp_state(b);
  });
  r.teardown();
}

// A local protection error: a SEND whose SGE has a wrong lkey completes with LOC_PROT_ERR even
// though it is unsignaled (errors always complete); A's QP goes to ERR; nothing reaches B.
void sc_bad_lkey(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 256)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    ibv_sge g = a.sge(0, 64);
    g.lkey ^= 0x00a5a500u;
    r.post_send(a, 1, IBV_WR_SEND, {g}, 0, 0, 0, 0, 0, 0, "lkey=wrong");
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true);
    r.qp_state(b);
  });
  r.teardown();
}

// A misaligned atomic (remote address not 8-byte aligned): the responder NAKs invalid request
// (IBTA o9-23 ... C9-28) -> REM_INV_REQ_ERR.
void sc_atomic_misaligned(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) { r.set_u64(b, 64, 9); });
  r.sync();
  r.on('A', [&](Side& a) {
    if (r.post_send(a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, {a.sge(0, 8)}, SIG, r.b_addr(68), r.b_rkey(), 0, 1, 0,
                    "raddr=misaligned") == 0)
      r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) { r.log_u64(b, 64); });
  r.teardown();
}

// IBV_SEND_INLINE with exactly cap.max_inline_data bytes (what ibv_create_qp returned for a
// request of 64): allowed by ibv_post_send(3); one byte more is EINVAL.
void sc_inline_max(Run& r) {
  Config c;
  c.max_inline = 64;
  r.setup(c);
  uint64_t cap = 0;
  r.on('A', [&](Side& a) {
    cap = a.cap.max_inline_data;
    r.comment("A cap.max_inline_data=%llu (requested 64)", (unsigned long long)cap);
  });
  r.share('A', cap);
  r.alias_len(cap, "cap");
  r.on('B', [&](Side& b) { r.post_recv(b, 101, {b.sge(0, 4096)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    const uint32_t n = uint32_t(cap);
    r.fill_pattern(a, 0, n + 1, 80);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, n + 1)}, SIG | IBV_SEND_INLINE);
    r.post_send(a, 2, IBV_WR_SEND, {a.sge(0, n)}, SIG | IBV_SEND_INLINE);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 0, cap, 80);
    r.mem(b, cap, 48);
  });
  r.teardown();
}

// IBV_SEND_FENCE (ibv_post_send(3); IBTA 10.8.3.3, Fence indicator): a SEND that gathers the
// very buffer an RDMA_READ before it fills must wait for the READ to complete, so it carries the
// data read (pattern 90), not what the buffer held before (pattern 91).
void sc_fence(Run& r) {
  r.setup();
  r.on('B', [&](Side& b) {
    r.fill_pattern(b, 16384, 4096, 90);
    r.post_recv(b, 101, {b.sge(0, 4096)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 8192, 4096, 91);
    r.post_send(a, 1, IBV_WR_RDMA_READ, {a.sge(8192, 4096)}, SIG, r.b_addr(16384), r.b_rkey());
    r.post_send(a, 2, IBV_WR_SEND, {a.sge(8192, 4096)}, SIG | IBV_SEND_FENCE);
    r.expect_wc(a, false, 2);
    r.mem(a, 8192, 4096, 90, 91);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 0, 4096, 90, 91);
  });
  r.teardown();
}

// ---- beyond RC: UD, UC and shared receive queues

constexpr uint32_t kGrh = 40;  ///< ibv_poll_cq(3): the GRH at the start of every UD receive buffer

// UD (IBTA 9.8, 10.2.5; ibv_post_send(3), ibv_poll_cq(3), ibv_create_ah_from_wc(3)): SEND and
// SEND_WITH_IMM from A to B through an address handle (B's buffers: the 40-byte GRH, then the
// payload; byte_len counts both; IBV_WC_GRH and src_qp set); B answers A through an address
// handle made from the completion; a SEND with the wrong Q_Key is dropped (the sender completes
// successfully; the receive WQE stays for the next message); a SEND to a QP with no receive
// posted is dropped, not retried (no RNR on UD), and the receive posted afterwards takes the next
// message only.
void sc_ud(Run& r) {
  Config c;
  c.qp_type = IBV_QPT_UD;
  r.setup(c);
  const uint32_t qk = c.qkey;
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, kGrh + 256)});
    r.post_recv(b, 102, {b.sge(4096, kGrh + 256)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 200, 100);
    r.fill_pattern(a, 1024, 64, 101);
    r.post_ud_send(a, 1, IBV_WR_SEND, {a.sge(0, 200)}, SIG, a.ah, a.peer.qpn, qk);
    r.post_ud_send(a, 2, IBV_WR_SEND_WITH_IMM, {a.sge(1024, 64)}, SIG, a.ah, a.peer.qpn, qk, 0x0d0d0002);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  std::vector<ibv_wc> got;
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2, &got);
    r.grh(b, 0);
    r.mem(b, kGrh, 200, 100);
    r.mem(b, kGrh + 200, 56);
    r.grh(b, 4096);
    r.mem(b, 4096 + kGrh, 64, 101);
    r.mem(b, 4096 + kGrh + 64, 192);
  });
  r.sync();
  // The reply: an address handle from B's first receive completion and its GRH.
  r.on('A', [&](Side& a) { r.post_recv(a, 103, {a.sge(8192, kGrh + 128)}); });
  r.sync();
  r.on('B', [&](Side& b) {
    ibv_ah* reply =
        got.empty() ? nullptr : ibv_create_ah_from_wc(b.pd, &got[0], reinterpret_cast<ibv_grh*>(b.buf), 1);
    r.log(b, "create_ah_from_wc %s", reply ? "ok" : errno_name(errno).c_str());
    if (!reply) return;
    r.fill_pattern(b, 16384, 100, 102);
    r.post_ud_send(b, 11, IBV_WR_SEND, {b.sge(16384, 100)}, SIG, reply, got[0].src_qp, qk);
    r.expect_wc(b, false, 1);
    r.log(b, "destroy_ah rc=%s", errno_name(ibv_destroy_ah(reply)).c_str());
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.expect_wc(a, true, 1);
    r.grh(a, 8192);
    r.mem(a, 8192 + kGrh, 100, 102);
    r.mem(a, 8192 + kGrh + 100, 28);
  });
  r.sync();
  // The wrong Q_Key (not a privileged one: the high bit is clear): dropped by B.
  r.on('B', [&](Side& b) { r.post_recv(b, 104, {b.sge(8192, kGrh + 256)}); });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 2048, 32, 103);
    r.post_ud_send(a, 3, IBV_WR_SEND, {a.sge(2048, 32)}, SIG, a.ah, a.peer.qpn, 0x22222222, 0, "(wrong)");
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true, 200, 100);
    r.mem(b, 8192, kGrh + 32);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 3072, 32, 104);
    r.post_ud_send(a, 4, IBV_WR_SEND, {a.sge(3072, 32)}, SIG, a.ah, a.peer.qpn, qk);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 8192 + kGrh, 32, 104, 103);
  });
  r.sync();
  // No receive posted: dropped, never resent.
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 4096, 48, 105);
    r.post_ud_send(a, 5, IBV_WR_SEND, {a.sge(4096, 48)}, SIG, a.ah, a.peer.qpn, qk);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true, 200, 100);
    r.post_recv(b, 105, {b.sge(12288, kGrh + 256)});
    r.expect_empty(b, true, 200, 100);
    r.qp_state(b);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 5120, 48, 106);
    r.post_ud_send(a, 6, IBV_WR_SEND, {a.sge(5120, 48)}, SIG, a.ah, a.peer.qpn, qk);
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 12288 + kGrh, 48, 106, 105);
  });
  r.teardown();
}

// UC (IBTA 9.7.6.1, 9.8; ibv_post_send(3)): a 3000-byte SEND (FIRST/MIDDLE/LAST) and an
// RDMA_WRITE_WITH_IMM of 2000 B, with no acknowledgement on the wire; a SEND with no receive
// posted is lost (no RNR NAK, no retry; the sender completes successfully) and the next SEND
// lands in the receive posted afterwards.
void sc_uc(Run& r) {
  Config c;
  c.qp_type = IBV_QPT_UC;
  c.qp_access = IBV_ACCESS_REMOTE_WRITE;
  r.setup(c);
  r.on('B', [&](Side& b) {
    r.post_recv(b, 101, {b.sge(0, 4096)});
    r.post_recv(b, 102, {b.sge(8192, 64)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 3000, 110);
    r.fill_pattern(a, 4096, 2000, 111);
    r.post_send(a, 1, IBV_WR_SEND, {a.sge(0, 3000)}, SIG);
    r.post_send(a, 2, IBV_WR_RDMA_WRITE_WITH_IMM, {a.sge(4096, 2000)}, SIG, r.b_addr(16384), r.b_rkey(),
                0x0c0c0002);
    r.expect_wc(a, false, 2);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 2);
    r.mem(b, 0, 3000, 110);
    r.mem(b, 3000, 1096);
    r.mem(b, 16384, 2000, 111);
    r.mem(b, 16384 + 2000, 100);
    r.mem(b, 8192, 64);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 8192, 64, 112);
    r.post_send(a, 3, IBV_WR_SEND, {a.sge(8192, 64)}, SIG);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_empty(b, true, 200, 100);
    r.post_recv(b, 103, {b.sge(24576, 256)});
    r.expect_empty(b, true, 200, 100);
    r.qp_state(b);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 12288, 100, 113);
    r.post_send(a, 4, IBV_WR_SEND, {a.sge(12288, 100)}, SIG);
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 24576, 100, 113, 112);
    r.mem(b, 24576 + 100, 156);
  });
  r.teardown();
}

// RC with B's QP on a shared receive queue (ibv_create_srq(3), ibv_post_srq_recv(3),
// ibv_modify_srq(3), ibv_query_srq(3); IBTA 10.2.9, 11.6.3): SENDs take the SRQ's WQEs in
// posting order (their wr_ids in B's completions); with the limit armed at 3 of 6 WQEs, no event
// while 3 remain, IBV_EVENT_SRQ_LIMIT_REACHED when 2 remain, the limit then reads 0 (disarmed)
// and a further SEND raises no second event.
void sc_srq(Run& r) {
  Config c;
  c.srq_b = true;
  r.setup(c);
  r.on('B', [&](Side& b) {
    for (int i = 0; i < 6; ++i) r.post_srq_recv(b, 201 + i, {b.sge(1024 * i, 1024)});
    r.arm_srq(b, 3);
    r.query_srq(b);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    for (int i = 0; i < 3; ++i) {
      r.fill_pattern(a, 1024 * i, 100 + 100 * i, 120 + i);
      r.post_send(a, 1 + i, IBV_WR_SEND, {a.sge(1024 * i, 100 + 100 * i)}, SIG);
    }
    r.expect_wc(a, false, 3);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 3);
    for (int i = 0; i < 3; ++i) r.mem(b, 1024 * i, 100 + 100 * i, 120 + i);
    r.check_async(b, false);  // 3 WQEs left: not fewer than the limit
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 4096, 400, 123);
    r.post_send(a, 4, IBV_WR_SEND, {a.sge(4096, 400)}, SIG);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.check_async(b, true);  // 2 left
    r.query_srq(b);
    r.mem(b, 3072, 400, 123);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 5120, 500, 124);
    r.post_send(a, 5, IBV_WR_SEND, {a.sge(5120, 500)}, SIG);
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.check_async(b, false);  // disarmed: no second event
    r.mem(b, 4096, 500, 124);
    r.mem(b, 5120, 1024);
  });
  r.teardown();
}

// ---- memory windows

constexpr unsigned kMwRemote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/** B's buffer range [off, +len) as the window binding's address and length (ibv_mw_bind_info). */
ibv_mw_bind_info mw_range(const Side& b, size_t off, uint64_t len) {
  return ibv_mw_bind_info{b.mr, b.addr(off), len, kMwRemote};
}

/** ibv_alloc_mw(3) of @p type on side @p s's PD; logged as window number @p n. */
ibv_mw* alloc_mw(Run& r, Side& s, int n, ibv_mw_type type) {
  ibv_mw* mw = ibv_alloc_mw(s.pd, type);
  r.log(s, "alloc_mw mw=%d type=%d rc=%s", n, type == IBV_MW_TYPE_1 ? 1 : 2,
        mw ? "0" : errno_name(errno).c_str());
  return mw;
}

/** ibv_bind_mw(3) (type 1) of window @p n over B's [off, +len); the window's new key is named
 *  @p name; logged: whether mw->rkey changed and, against @p prev (a rebind), whether the key's
 *  index (its upper 24 bits) stayed and only the tag changed (ibv_inc_rkey(3)). */
int bind_mw_type1(Run& r, Side& b, ibv_mw* mw, int n, uint64_t wr_id, size_t off, uint64_t len,
                  const char* name, const char* prev = nullptr, uint32_t prev_key = 0) {
  ibv_mw_bind bind{};
  bind.wr_id = wr_id;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = mw_range(b, off, len);
  const uint32_t before = mw->rkey;
  const int rc = ibv_bind_mw(b.qp, mw, &bind);
  std::string key = mw->rkey == before ? "unchanged" : "changed";
  if (prev && mw->rkey != before)
    key += strf(" index%s%s tag%s%s", (mw->rkey >> 8) == (prev_key >> 8) ? "=" : "!=", prev,
                (mw->rkey & 0xff) == (prev_key & 0xff) ? "=" : "!=", prev);
  r.log(b,
        "bind_mw wr=%llu mw=%d range=[%zu,+%llu) access=REMOTE_WRITE,REMOTE_READ flags=SIGNALED rc=%s key %s",
        (unsigned long long)wr_id, n, off, (unsigned long long)len, errno_name(rc).c_str(), key.c_str());
  if (rc == 0) r.name_key(b, mw->rkey, name);
  return rc;
}

/** IBV_WR_BIND_MW (type 2) of window @p n with key @p key (named @p name) over B's [off, +len). */
int bind_mw_wr(Run& r, Side& b, ibv_mw* mw, int n, uint64_t wr_id, uint32_t key, const char* name, size_t off,
               uint64_t len) {
  r.name_key(b, key, name);
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = key;
  wr.bind_mw.bind_info = mw_range(b, off, len);
  const std::string note = strf("mw=%d key=%s range=[%zu,+%llu) access=REMOTE_WRITE,REMOTE_READ", n, name,
                                off, (unsigned long long)len);
  return r.post_wr(b, wr, {}, note.c_str());
}

/** IBV_WR_LOCAL_INV or IBV_WR_SEND_WITH_INV of @p key (named @p name), signaled. */
int post_inv(Run& r, Side& s, uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge> sges, uint32_t key,
             const char* name) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = sges.empty() ? nullptr : sges.data();
  wr.num_sge = int(sges.size());
  wr.invalidate_rkey = key;
  const std::string note = strf("inv=%s", name);
  return r.post_wr(s, wr, sges, note.c_str());
}

/** ibv_dealloc_mw(3), logged. */
void dealloc_mw(Run& r, Side& s, ibv_mw* mw, int n) {
  if (mw) r.log(s, "dealloc_mw mw=%d rc=%s", n, errno_name(ibv_dealloc_mw(mw)).c_str());
}

// Memory windows (IBTA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3), ibv_inc_rkey(3),
// ibv_post_send(3) IBV_WR_BIND_MW / IBV_WR_LOCAL_INV / IBV_WR_SEND_WITH_INV, ibv_poll_cq(3)
// IBV_WC_BIND_MW / IBV_WC_LOCAL_INV / IBV_WC_WITH_INV): B owns the windows, over its MR
// (registered with IBV_ACCESS_MW_BIND), A accesses them. Three QP pairs (new_qps()), each ending
// with the access that fails (REM_ACCESS_ERR moves both QPs to ERR):
//   1. a type 1 window bound with ibv_bind_mw (BIND_MW completion): A WRITEs and READs through
//      it; a rebind elsewhere gives it a new key (same index, new tag), which works, and a WRITE
//      with the old key, inside the old range, fails;
//   2. a type 2 window bound with IBV_WR_BIND_MW: A WRITEs through it, then a SEND_WITH_INV
//      naming it (B's receive completion: IBV_WC_WITH_INV, invalidated_rkey = the window's key);
//      a WRITE with that key then fails;
//   3. a type 2 window bound, WRITE through it, revoked by B's IBV_WR_LOCAL_INV (LOCAL_INV
//      completion); a WRITE with its key then fails.
// Never sent: a SEND_WITH_INV naming a window that is not bound (it panics Linux 6.1's rxe), so
// A sends one only after B's bind completed successfully.
void sc_mw(Run& r) {
  Config c;
  c.mr_access = kMrAll | IBV_ACCESS_MW_BIND;
  r.setup(c);
  ibv_mw *mw1 = nullptr, *mw2 = nullptr, *mw3 = nullptr;
  uint64_t k1a = 0, k1b = 0, k2 = 0, k3 = 0, ok = 0;

  // 1. Type 1: bind, WRITE and READ, rebind, the old key fails.
  r.on('B', [&](Side& b) {
    mw1 = alloc_mw(r, b, 1, IBV_MW_TYPE_1);
    if (mw1 && bind_mw_type1(r, b, mw1, 1, 201, 32768, 8192, "mw1.a") == 0) r.expect_wc(b, false, 1);
    k1a = mw1 ? mw1->rkey : 0;
  });
  r.share('B', k1a);
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 0, 1000, 130);
    r.post_send(a, 1, IBV_WR_RDMA_WRITE, {a.sge(0, 1000)}, SIG, r.b_addr(32768 + 100), uint32_t(k1a), 0, 0, 0,
                "rkey=mw1.a");
    r.post_send(a, 2, IBV_WR_RDMA_READ, {a.sge(4096, 1000)}, SIG, r.b_addr(32768 + 100), uint32_t(k1a), 0, 0,
                0, "rkey=mw1.a");
    r.expect_wc(a, false, 2);
    r.mem(a, 4096, 1000, 130);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.mem(b, 32768, 100);
    r.mem(b, 32768 + 100, 1000, 130);
    r.mem(b, 32768 + 1100, 100);
    if (mw1 && bind_mw_type1(r, b, mw1, 1, 202, 49152, 4096, "mw1.b", "mw1.a", uint32_t(k1a)) == 0)
      r.expect_wc(b, false, 1);
    k1b = mw1 ? mw1->rkey : 0;
  });
  r.share('B', k1b);
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 8192, 512, 131);
    r.post_send(a, 3, IBV_WR_RDMA_WRITE, {a.sge(8192, 512)}, SIG, r.b_addr(49152), uint32_t(k1b), 0, 0, 0,
                "rkey=mw1.b");
    r.expect_wc(a, false, 1);
    r.fill_pattern(a, 12288, 256, 132);
    r.post_send(a, 4, IBV_WR_RDMA_WRITE, {a.sge(12288, 256)}, SIG, r.b_addr(32768 + 2048), uint32_t(k1a), 0,
                0, 0, "rkey=mw1.a");
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.qp_state(b);
    r.mem(b, 49152, 512, 131);
    r.mem(b, 32768 + 2048, 256);
  });

  // 2. Type 2: bind through a WR, WRITE, SEND_WITH_INV revokes it, its key fails.
  r.new_qps(1);
  r.on('B', [&](Side& b) {
    mw2 = alloc_mw(r, b, 2, IBV_MW_TYPE_2);
    if (!mw2) return;
    k2 = ibv_inc_rkey(mw2->rkey);
    if (bind_mw_wr(r, b, mw2, 2, 211, uint32_t(k2), "mw2.a", 40960, 4096) != 0) return;
    std::vector<ibv_wc> w;
    r.expect_wc(b, false, 1, &w);
    ok = w.size() == 1 && w[0].status == IBV_WC_SUCCESS;
  });
  r.share('B', k2);
  r.share('B', ok);
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 16384, 512, 133);
    r.post_send(a, 5, IBV_WR_RDMA_WRITE, {a.sge(16384, 512)}, SIG, r.b_addr(40960 + 512), uint32_t(k2), 0, 0,
                0, "rkey=mw2.a");
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.mem(b, 40960 + 512, 512, 133);
    r.post_recv(b, 102, {b.sge(0, 64)});
  });
  r.sync();
  r.on('A', [&](Side& a) {
    if (!ok) {
      r.log(a, "bind of mw2 failed: no SEND_WITH_INV");  // an unbound window would panic rxe
      return;
    }
    r.fill_pattern(a, 20480, 16, 134);
    post_inv(r, a, 6, IBV_WR_SEND_WITH_INV, {a.sge(20480, 16)}, uint32_t(k2), "mw2.a");
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.expect_wc(b, true, 1);
    r.mem(b, 0, 16, 134);
    r.mem(b, 16, 48);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 24576, 256, 135);
    r.post_send(a, 7, IBV_WR_RDMA_WRITE, {a.sge(24576, 256)}, SIG, r.b_addr(40960 + 1024), uint32_t(k2), 0, 0,
                0, "rkey=mw2.a");
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.qp_state(b);
    r.mem(b, 40960 + 1024, 256);
  });

  // 3. Type 2: bind, WRITE, LOCAL_INV on B, its key fails.
  r.new_qps(2);
  r.on('B', [&](Side& b) {
    mw3 = alloc_mw(r, b, 3, IBV_MW_TYPE_2);
    if (!mw3) return;
    k3 = ibv_inc_rkey(mw3->rkey);
    if (bind_mw_wr(r, b, mw3, 3, 221, uint32_t(k3), "mw3.a", 45056, 4096) == 0) r.expect_wc(b, false, 1);
  });
  r.share('B', k3);
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 28672, 256, 136);
    r.post_send(a, 8, IBV_WR_RDMA_WRITE, {a.sge(28672, 256)}, SIG, r.b_addr(45056), uint32_t(k3), 0, 0, 0,
                "rkey=mw3.a");
    r.expect_wc(a, false, 1);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.mem(b, 45056, 256, 136);
    if (mw3 && post_inv(r, b, 222, IBV_WR_LOCAL_INV, {}, uint32_t(k3), "mw3.a") == 0)
      r.expect_wc(b, false, 1);
  });
  r.sync();
  r.on('A', [&](Side& a) {
    r.fill_pattern(a, 32768, 256, 137);
    r.post_send(a, 9, IBV_WR_RDMA_WRITE, {a.sge(32768, 256)}, SIG, r.b_addr(45056 + 1024), uint32_t(k3), 0, 0,
                0, "rkey=mw3.a");
    r.expect_wc(a, false, 1);
    r.qp_state(a);
  });
  r.sync();
  r.on('B', [&](Side& b) {
    r.qp_state(b);
    r.mem(b, 45056 + 1024, 256);
    dealloc_mw(r, b, mw1, 1);
    dealloc_mw(r, b, mw2, 2);
    dealloc_mw(r, b, mw3, 3);
  });
  r.teardown();
}

const Scenario kScenarios[] = {
    {"send", sc_send, "SEND, multi-packet and zero-length"},
    {"send_imm", sc_send_imm, "SEND_WITH_IMM"},
    {"write", sc_write, "RDMA_WRITE, gathered"},
    {"write_imm", sc_write_imm, "RDMA_WRITE_WITH_IMM, and zero-length"},
    {"read", sc_read, "RDMA_READ, scattered"},
    {"atomic_fa", sc_atomic_fa, "ATOMIC_FETCH_AND_ADD"},
    {"atomic_cs", sc_atomic_cs, "ATOMIC_CMP_AND_SWP, equal and different"},
    {"multi_mtu", sc_multi_mtu, "lengths around the MTU"},
    {"inline", sc_inline, "IBV_SEND_INLINE"},
    {"unsignaled", sc_unsignaled, "unsignaled WRs"},
    {"solicited", sc_solicited, "solicited-only arming and the SE bit"},
    {"rnr", sc_rnr, "RNR NAK and retry until a receive is posted"},
    {"rnr_exc", sc_rnr_exc, "rnr_retry 0: RNR_RETRY_EXC_ERR"},
    {"rem_access", sc_rem_access, "wrong rkey on WRITE: REM_ACCESS_ERR, both QPs to ERR, flush"},
    {"rem_access_read", sc_rem_access_read,
     "READ beyond the MR: REM_ACCESS_ERR; fenced WRs behind it flushed"},
    {"rem_access_atomic", sc_rem_access_atomic, "atomic without REMOTE_ATOMIC: REM_ACCESS_ERR"},
    {"flush", sc_flush, "WR_FLUSH_ERR for WRs in and posted to a QP in ERR"},
    {"len_err", sc_len_err, "SEND longer than the receive: LOC_LEN_ERR / REM_INV_REQ_ERR"},
    {"bad_lkey", sc_bad_lkey, "wrong lkey: LOC_PROT_ERR even unsignaled"},
    {"atomic_misaligned", sc_atomic_misaligned, "misaligned atomic: REM_INV_REQ_ERR"},
    {"inline_max", sc_inline_max, "inline of exactly max_inline_data"},
    {"fence", sc_fence, "IBV_SEND_FENCE: a SEND waits for the READ before it"},
    {"ud", sc_ud, "UD SEND / SEND_WITH_IMM, reply via ibv_create_ah_from_wc, wrong Q_Key, no receive"},
    {"uc", sc_uc, "UC SEND and RDMA_WRITE_WITH_IMM without ACKs; a SEND with no receive is lost"},
    {"srq", sc_srq, "RC on a shared receive queue: WQEs in order, the SRQ limit event"},
    {"mw", sc_mw, "memory windows: type 1 bind/rebind, type 2 with SEND_WITH_INV and LOCAL_INV"},
};

[[noreturn]] void usage(int rc) {
  fprintf(rc ? stderr : stdout,
          "usage: diff_scenario [--local | --server PORT | --client HOST:PORT] [--scenario LIST|all]\n"
          "                     [--dev NAME] [--dev-b NAME] [--gid-index N] [--wait-ms MS] [--list]\n"
          "  --local             both sides in this process (default): A on the first device, B on the\n"
          "                      second (the first again if there is only one)\n"
          "  --server PORT       side B, waiting for a --client on TCP PORT\n"
          "  --client HOST:PORT  side A\n"
          "  --scenario LIST     comma-separated scenario names, or all (default)\n"
          "  --dev NAME          device of side A (or of this process's side); --dev-b: B's in --local\n"
          "  --gid-index N       source GID index (default 1: the IPv4-mapped RoCEv2 GID)\n"
          "  --wait-ms MS        bound on waiting for an expected completion or event (default 3000)\n"
          "  --list              print the scenarios\n");
  exit(rc);
}

}  // namespace

// A scenario that has not finished after this long is stuck in a verbs call (or waiting for a
// peer that died): say which, and exit, instead of hanging until an outer timeout.
static constexpr unsigned kWatchdogSeconds = 90;
static const char* g_running = "setup";
static void on_alarm(int) {
  char b[160];
  const int n = snprintf(b, sizeof b, "\ndiff_scenario: watchdog: scenario %s still running after %u s\n",
                         g_running, kWatchdogSeconds);
  if (n > 0) (void)!write(2, b, size_t(n));
  _exit(3);
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, on_alarm);
  Options o;
  std::string list = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--local")
      o.mode = Options::Local;
    else if (a == "--server")
      o.mode = Options::Server, o.port = atoi(val().c_str());
    else if (a == "--client")
      o.mode = Options::Client, o.hostport = val();
    else if (a == "--scenario")
      list = val();
    else if (a == "--dev")
      o.dev_a = val();
    else if (a == "--dev-b")
      o.dev_b = val();
    else if (a == "--gid-index")
      o.gid_index = atoi(val().c_str());
    else if (a == "--wait-ms")
      o.wait_s = atoi(val().c_str()) / 1000.0;
    else if (a == "--list") {
      for (const auto& s : kScenarios) printf("%-18s %s\n", s.name, s.what);
      return 0;
    } else if (a == "-h" || a == "--help")
      usage(0);
    else
      usage(2);
  }
  std::vector<int> chosen;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t c = list.find(',', pos);
    const std::string n = list.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    pos = c == std::string::npos ? list.size() + 1 : c + 1;
    if (n.empty()) continue;
    bool found = false;
    for (int k = 0; k < int(sizeof kScenarios / sizeof kScenarios[0]); ++k)
      if (n == "all" || n == kScenarios[k].name) chosen.push_back(k), found = true;
    if (!found) die("unknown scenario '%s' (--list shows them)", n.c_str());
  }

  Channel chan;
  Channel* chp = nullptr;
  if (o.mode == Options::Server) {
    chan.serve(o.port);
    chp = &chan;
  } else if (o.mode == Options::Client) {
    chan.connect_to(o.hostport, 30);
    chp = &chan;
  }
  std::string names;
  for (int k : chosen) names += std::string(names.empty() ? "" : ",") + kScenarios[k].name;
  if (chp) chp->meet("HELLO diff_scenario 1 " + names);

  int ndev = 0;
  ibv_device** devs = ibv_get_device_list(&ndev);
  if (!devs || ndev <= 0) die("no RDMA devices");
  printf("# diff_scenario mode=%s scenarios=%s\n",
         o.mode == Options::Local    ? "local"
         : o.mode == Options::Server ? "server"
                                     : "client",
         names.c_str());
  for (int k : chosen) {
    g_running = kScenarios[k].name;
    alarm(kWatchdogSeconds);
    Run r(o, chp, devs, ndev, k, kScenarios[k].name);
    kScenarios[k].fn(r);
  }
  alarm(0);
  if (chp) chp->meet("BYE");
  ibv_free_device_list(devs);
  printf("# diff_scenario done\n");
  return 0;
}
