// SPDX-License-Identifier: Apache-2.0
/**
 * @file fault_soak.cpp
 * @brief A long, verified RC (or UC) stream over many QPs and hosts, for runs under random wire
 *        faults (`hcasim run --faults ...`): every byte of every message, every completion and
 *        every atomic checked as it completes.
 *
 * Plain ibverbs, nothing of the simulator's: it runs on any RDMA device (rxe, hardware) as well,
 * and reads the simulator's counters only if it finds them (dlsym "hcasim_sim_counter").
 *
 * QP q joins host q % H (the requester) to host (q + 1 + q / H) % H (the responder; with two
 * hosts always the other one). Each QP carries --messages messages, at most --window in flight,
 * each a SEND, SEND with immediate, RDMA WRITE, WRITE with immediate, RDMA READ, FETCH_ADD or
 * CMP_SWP (RC; UC: the first four) chosen at random, of a random size from 0 B to --max-size
 * (mostly up to 4 KiB, one in 32 larger; atomics 8 B). Every WR is signaled.
 *
 * Checks, as each completion is polled:
 *  - requester completions arrive once each, in posting order per QP, with the right opcode and
 *    status SUCCESS; the data a WRITE placed or a READ fetched is the message's pattern, byte
 *    for byte; the value an atomic fetched is the number of earlier atomics of its kind on that
 *    QP (so none ran twice or was skipped);
 *  - receive completions arrive once each, in order, with the right opcode, length, immediate
 *    and payload (RC: every message that consumes a receive; UC: a subset, messages may be lost
 *    but each one delivered is whole and correct);
 *  - at the end: no completion more than expected, and each QP's FETCH_ADD counter equals the
 *    number of FETCH_ADDs it posted.
 * A stall (no completion for --stall-seconds of wall time) is a failure, never a hang.
 *
 * Exit status 0 and "fault_soak: PASS" when every check held; 1 and the first failed check
 * otherwise; 2 for a bad option.
 */
#include "test_pattern.h"

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "fault_soak: FAIL: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(1);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "fault_soak: %s\n"
               "usage: fault_soak [--hosts N] [--qps N] [--messages N] [--max-size SIZE] [--window N]\n"
               "                  [--qp-type rc|uc] [--mtu 256|512|1024|2048|4096] [--timeout 1..31]\n"
               "                  [--seed N] [--stall-seconds N] [--expect-faults]\n",
               why);
  std::exit(2);
}

struct Options {
  int hosts = 2;
  int qps = 16;
  uint64_t messages = 1000;
  uint32_t max_size = 1u << 20;
  int window = 8;
  ibv_qp_type type = IBV_QPT_RC;
  ibv_mtu mtu = IBV_MTU_1024;
  int timeout = 8;  // 4.096 us << 8 = 1 ms local ACK timeout
  uint64_t seed = 1;
  int stall_seconds = 60;
  bool expect_faults = false;  // fail unless the simulator injected faults and RC recovered
};

/** A whole number in [lo, hi], with an optional K/M suffix; exits with a message naming @p opt. */
uint64_t number(const char* opt, const char* v, uint64_t lo, uint64_t hi) {
  char* end = nullptr;
  errno = 0;
  if (!v || !*v || *v == '-') usage((std::string(opt) + " needs a whole number").c_str());
  uint64_t n = std::strtoull(v, &end, 10);
  if (*end == 'K' || *end == 'k')
    n <<= 10, ++end;
  else if (*end == 'M' || *end == 'm')
    n <<= 20, ++end;
  if (errno || *end || n < lo || n > hi) {
    char b[160];
    std::snprintf(b, sizeof b, "%s %s: want a whole number from %" PRIu64 " to %" PRIu64, opt, v, lo, hi);
    usage(b);
  }
  return n;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--hosts")
      o.hosts = int(number("--hosts", v, 2, 64));
    else if (a == "--qps")
      o.qps = int(number("--qps", v, 1, 1024));
    else if (a == "--messages")
      o.messages = number("--messages", v, 1, 100'000'000);
    else if (a == "--max-size")
      o.max_size = uint32_t(number("--max-size", v, 8, 1u << 30));
    else if (a == "--window")
      o.window = int(number("--window", v, 1, 64));
    else if (a == "--timeout")
      o.timeout = int(number("--timeout", v, 1, 31));
    else if (a == "--seed")
      o.seed = number("--seed", v, 0, UINT64_MAX >> 1);
    else if (a == "--stall-seconds")
      o.stall_seconds = int(number("--stall-seconds", v, 1, 3600));
    else if (a == "--mtu") {
      const uint64_t m = number("--mtu", v, 256, 4096);
      if (m & (m - 1)) usage("--mtu: want 256, 512, 1024, 2048 or 4096");
      o.mtu = m == 256    ? IBV_MTU_256
              : m == 512  ? IBV_MTU_512
              : m == 1024 ? IBV_MTU_1024
              : m == 2048 ? IBV_MTU_2048
                          : IBV_MTU_4096;
    } else if (a == "--qp-type") {
      if (!v || (std::strcmp(v, "rc") && std::strcmp(v, "uc"))) usage("--qp-type: want rc or uc");
      o.type = std::strcmp(v, "rc") ? IBV_QPT_UC : IBV_QPT_RC;
    } else if (a == "--expect-faults") {
      o.expect_faults = true;
      continue;
    } else if (a == "--help" || a == "-h") {
      usage("a verified RC/UC stream for runs under --faults");
    } else {
      usage(("unknown option " + a).c_str());
    }
    ++i;
  }
  return o;
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

using e2e::pattern_byte;

/** Offset of the first byte of [p + from, p + n) that is not the pattern, or n. */
size_t first_wrong(const uint8_t* p, size_t n, uint32_t seed, size_t from = 0) {
  for (size_t i = from; i < n; ++i)
    if (p[i] != pattern_byte(seed, i)) return i;
  return n;
}

enum Op : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kFetchAdd, kCmpSwap, kOps };
const char* const kOpName[kOps] = {"SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "FETCH_ADD", "CMP_SWP"};
const ibv_wr_opcode kWrOp[kOps] = {
    IBV_WR_SEND,      IBV_WR_SEND_WITH_IMM,        IBV_WR_RDMA_WRITE,        IBV_WR_RDMA_WRITE_WITH_IMM,
    IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP};
const ibv_wc_opcode kWcOp[kOps] = {IBV_WC_SEND,      IBV_WC_SEND,      IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
                                   IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP};

struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* scq = nullptr;
  ibv_cq* rcq = nullptr;
  ibv_gid gid{};
  std::vector<uint8_t*> areas;  // one per QP end, freed at the end
  std::string name;
};

/** One message in flight: what was posted and what its completions must show. */
struct Message {
  uint64_t index;
  Op op;
  uint32_t size;
  uint32_t seed;
  uint64_t fetched_want;  // atomics
};

/** A QP's two ends and its buffers: slots on each side, receive slots, two atomic words. */
struct Qp {
  int req_host, rsp_host;
  ibv_qp* req = nullptr;
  ibv_qp* rsp = nullptr;
  ibv_mr* req_mr = nullptr;
  ibv_mr* rsp_mr = nullptr;
  uint8_t* req_buf = nullptr;  // window slots (sources, READ targets, fetched values)
  uint8_t* rsp_buf = nullptr;  // window slots (WRITE targets, READ sources), then receive slots, then atomics
  uint64_t posted = 0, completed = 0, received = 0, recv_posted = 0;
  uint64_t fetch_adds = 0, cmp_swaps = 0;
  std::deque<Message> in_flight;
  std::deque<Message> want_recv;  // RC: messages owed a receive, in order
  uint64_t uc_owed = 0;           // UC: messages sent that consume a receive
  uint64_t uc_received = 0;       // UC: of those, received at least once
  std::vector<bool> delivered;    // UC: by index, received at least once
};

struct Soak {
  Options o;
  size_t slot = 0;
  int recv_slots = 0;
  std::vector<Host> hosts;
  std::vector<Qp> qps;
  std::map<uint32_t, int> qp_of;  // qp_num (either end) -> index
  uint64_t op_count[kOps] = {};
  uint64_t payload_bytes = 0, recv_done = 0, lost = 0, uc_repeats = 0;
  uint64_t uc_delivered_bytes = 0;  // UC: payload of the receives, first delivery of each

  uint8_t* req_slot(Qp& q, uint64_t i) { return q.req_buf + (i % o.window) * slot; }
  uint8_t* rsp_slot(Qp& q, uint64_t i) { return q.rsp_buf + (i % o.window) * slot; }
  uint8_t* recv_slot(Qp& q, uint64_t r) { return q.rsp_buf + (o.window + r % recv_slots) * slot; }
  uint64_t* atomic_word(Qp& q, int which) {
    return reinterpret_cast<uint64_t*>(q.rsp_buf + size_t(o.window + recv_slots) * slot + 8 * which);
  }
  bool rc() const { return o.type == IBV_QPT_RC; }
};

void open_hosts(Soak& s) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) fail("no RDMA device (ibv_get_device_list: %s)", strerror(errno));
  // One device (rxe0, a single NIC): every host is that device, the QPs loop back through it.
  if (n < s.o.hosts && n != 1)
    fail("--hosts %d but only %d RDMA devices (under hcasim run: --hosts %d)", s.o.hosts, n, s.o.hosts);
  const int cqe = s.o.qps * (s.o.window + 2 * s.o.window) + 16;
  for (int h = 0; h < s.o.hosts; ++h) {
    Host x;
    ibv_device* dev = list[h < n ? h : 0];
    x.name = ibv_get_device_name(dev);
    x.ctx = ibv_open_device(dev);
    if (!x.ctx) fail("ibv_open_device(%s): %s", x.name.c_str(), strerror(errno));
    x.pd = ibv_alloc_pd(x.ctx);
    x.scq = ibv_create_cq(x.ctx, cqe, nullptr, nullptr, 0);
    x.rcq = ibv_create_cq(x.ctx, cqe, nullptr, nullptr, 0);
    if (!x.pd || !x.scq || !x.rcq) fail("%s: PD/CQ: %s", x.name.c_str(), strerror(errno));
    if (ibv_query_gid(x.ctx, 1, 1, &x.gid))
      fail("%s: ibv_query_gid(port 1, index 1): %s", x.name.c_str(), strerror(errno));
    s.hosts.push_back(x);
  }
  ibv_free_device_list(list);
}

uint8_t* area(Host& h, size_t n) {
  void* p = std::aligned_alloc(4096, (n + 4095) & ~size_t(4095));
  if (!p) fail("out of memory for a %zu B buffer", n);
  std::memset(p, 0, n);
  h.areas.push_back(static_cast<uint8_t*>(p));
  return static_cast<uint8_t*>(p);
}

ibv_qp* make_qp(Soak& s, Host& h, bool requester) {
  ibv_qp_init_attr ia{};
  ia.send_cq = h.scq;
  ia.recv_cq = h.rcq;
  ia.qp_type = s.o.type;
  ia.cap.max_send_wr = requester ? uint32_t(s.o.window) : 1;
  ia.cap.max_recv_wr = requester ? 1 : uint32_t(s.recv_slots);
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(h.pd, &ia);
  if (!qp) fail("%s: ibv_create_qp: %s", h.name.c_str(), strerror(errno));
  return qp;
}

void modify(ibv_qp* qp, ibv_qp_attr& a, int mask, const char* what) {
  if (int e = ibv_modify_qp(qp, &a, mask)) fail("ibv_modify_qp to %s: %s", what, strerror(e));
}

/** RESET -> INIT -> RTR -> RTS for @p qp towards @p peer (QP number, GID). */
void connect(Soak& s, ibv_qp* qp, const Host& peer, uint32_t peer_qpn) {
  const bool rc = s.rc();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (rc ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
  modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = s.o.mtu;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 0x100;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (rc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  modify(qp, a, mask, "RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x100;
  a.timeout = uint8_t(s.o.timeout);
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rc) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  modify(qp, a, mask, "RTS");
}

void post_recv(Soak& s, Qp& q) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.recv_slot(q, q.recv_posted)), uint32_t(s.slot), q.rsp_mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = q.recv_posted++;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int e = ibv_post_recv(q.rsp, &wr, &bad)) fail("ibv_post_recv: %s", strerror(e));
}

void build(Soak& s) {
  s.slot = (size_t(s.o.max_size) + 63) & ~size_t(63);
  s.recv_slots = 2 * s.o.window;
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     (s.rc() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  const int H = s.o.hosts;
  s.qps.resize(size_t(s.o.qps));
  for (int i = 0; i < s.o.qps; ++i) {
    Qp& q = s.qps[size_t(i)];
    q.req_host = i % H;
    q.rsp_host = (i + 1 + i / H % (H - 1)) % H;
    Host& a = s.hosts[size_t(q.req_host)];
    Host& b = s.hosts[size_t(q.rsp_host)];
    const size_t req_len = size_t(s.o.window) * s.slot;
    const size_t rsp_len = size_t(s.o.window + s.recv_slots) * s.slot + 64;
    q.req_buf = area(a, req_len);
    q.rsp_buf = area(b, rsp_len);
    q.req_mr = ibv_reg_mr(a.pd, q.req_buf, req_len, access);
    q.rsp_mr = ibv_reg_mr(b.pd, q.rsp_buf, rsp_len, access);
    if (!q.req_mr || !q.rsp_mr) fail("ibv_reg_mr: %s", strerror(errno));
    q.req = make_qp(s, a, true);
    q.rsp = make_qp(s, b, false);
    s.qp_of[q.req->qp_num] = i;
    s.qp_of[q.rsp->qp_num] = i;
    connect(s, q.req, b, q.rsp->qp_num);
    connect(s, q.rsp, a, q.req->qp_num);
    while (q.recv_posted < uint64_t(s.recv_slots)) post_recv(s, q);
  }
}

/** A random size from @p r: mostly 0..4 KiB, one in 32 from 4 KiB to --max-size (log-uniform). */
uint32_t pick_size(const Soak& s, uint64_t r) {
  const uint32_t small = std::min<uint32_t>(4096, s.o.max_size);
  if ((r & 31) != 0 || s.o.max_size <= 4096) return uint32_t((r >> 8) % (small + 1));
  const int bits = 12 + int((r >> 8) % uint64_t(32 - __builtin_clz(s.o.max_size) - 12 + 1));
  const uint64_t hi = std::min<uint64_t>(uint64_t(1) << bits, s.o.max_size);
  const uint64_t lo = hi / 2 + 1;
  return uint32_t(lo + (r >> 24) % (hi - lo + 1));
}

/** Message @p index of QP @p q: its operation, size and pattern follow from (seed, q, index) alone,
 *  so a UC receive can be checked whichever message it turns out to be. */
Message message(const Soak& s, int q, uint64_t index) {
  uint64_t g = s.o.seed * 0x2545f4914f6cdd1dull ^ (uint64_t(q) << 40) ^ index;
  Message m{};
  m.index = index;
  m.op = Op(splitmix(g) % (s.rc() ? kOps : kRead));
  m.size = m.op >= kFetchAdd ? 8 : pick_size(s, splitmix(g));
  // UC: a SEND's payload must tell which message it is (messages may be lost, duplicated or
  // reordered), in its first 4 bytes.
  if (!s.rc() && m.op == kSend && m.size < 4) m.size = 4;
  m.seed = uint32_t(splitmix(g)) | 1;
  return m;
}

Message next_message(Soak& s, Qp& q) {
  Message m = message(s, int(&q - s.qps.data()), q.posted);
  if (m.op == kFetchAdd) m.fetched_want = q.fetch_adds++;
  if (m.op == kCmpSwap) m.fetched_want = q.cmp_swaps++;
  return m;
}

void post(Soak& s, Qp& q) {
  Message m = next_message(s, q);
  uint8_t* local = s.req_slot(q, m.index);
  uint8_t* remote = s.rsp_slot(q, m.index);
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), m.size, q.req_mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = m.index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = kWrOp[m.op];
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(uint32_t(m.index));
  if (m.op <= kWriteImm) e2e::fill_pattern(local, m.size, m.seed);
  if (!s.rc() && m.op == kSend) std::memcpy(local, &m.index, 4);  // which message (UC)
  if (m.op == kRead) e2e::fill_pattern(remote, m.size, m.seed);
  if (m.op >= kWrite && m.op <= kRead) {
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(remote);
    wr.wr.rdma.rkey = q.rsp_mr->rkey;
  } else if (m.op >= kFetchAdd) {
    wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(s.atomic_word(q, m.op == kCmpSwap));
    wr.wr.atomic.rkey = q.rsp_mr->rkey;
    wr.wr.atomic.compare_add = m.op == kFetchAdd ? 1 : m.fetched_want;
    wr.wr.atomic.swap = m.fetched_want + 1;
  }
  if (int e = ibv_post_send(q.req, &wr, &bad))
    fail("QP %d message %" PRIu64 ": ibv_post_send: %s", int(&q - s.qps.data()), m.index, strerror(e));
  if (m.op == kSend || m.op == kSendImm || m.op == kWriteImm) {
    if (s.rc())
      q.want_recv.push_back(m);
    else
      ++q.uc_owed;
  }
  q.in_flight.push_back(m);
  ++q.posted;
  ++s.op_count[m.op];
}

/** The requester's completion of the oldest message in flight on @p q. */
void requester_done(Soak& s, Qp& q, const ibv_wc& wc) {
  const int qi = int(&q - s.qps.data());
  if (q.in_flight.empty()) fail("QP %d: a completion (wr_id %" PRIu64 ") for no WR in flight", qi, wc.wr_id);
  const Message m = q.in_flight.front();
  q.in_flight.pop_front();
  if (wc.status != IBV_WC_SUCCESS)
    fail("QP %d message %" PRIu64 " (%s, %u B): status %s", qi, m.index, kOpName[m.op], m.size,
         ibv_wc_status_str(wc.status));
  if (wc.wr_id != m.index)
    fail("QP %d: completion wr_id %" PRIu64 ", want %" PRIu64 " (out of order or twice)", qi, wc.wr_id,
         m.index);
  if (wc.opcode != kWcOp[m.op])
    fail("QP %d message %" PRIu64 ": opcode %d, want %d", qi, m.index, int(wc.opcode), int(kWcOp[m.op]));
  if ((m.op == kWrite || m.op == kWriteImm) && s.rc()) {
    const size_t bad = first_wrong(s.rsp_slot(q, m.index), m.size, m.seed);
    if (bad != m.size)
      fail("QP %d message %" PRIu64 ": WRITE data wrong at byte %zu of %u", qi, m.index, bad, m.size);
  }
  if (m.op == kRead) {
    const size_t bad = first_wrong(s.req_slot(q, m.index), m.size, m.seed);
    if (bad != m.size)
      fail("QP %d message %" PRIu64 ": READ data wrong at byte %zu of %u", qi, m.index, bad, m.size);
  }
  if (m.op >= kFetchAdd) {
    uint64_t got;
    std::memcpy(&got, s.req_slot(q, m.index), 8);
    if (got != m.fetched_want)
      fail("QP %d message %" PRIu64 ": %s fetched %" PRIu64 ", want %" PRIu64
           " (an atomic ran twice or not at all)",
           qi, m.index, kOpName[m.op], got, m.fetched_want);
  }
  if (m.op != kFetchAdd && m.op != kCmpSwap) s.payload_bytes += m.size;
  ++q.completed;
}

/** RC: the receive is the oldest message owed one, in order. */
Message rc_receive_owed(Soak& s, Qp& q, int qi) {
  if (q.want_recv.empty()) fail("QP %d: a receive completion for no message sent", qi);
  const Message m = q.want_recv.front();
  q.want_recv.pop_front();
  return m;
}

/** UC: the receive names its message (immediate, or a SEND's first 4 bytes); messages may be
 *  lost, and a duplicated or reordered packet may deliver one twice or late (IBTA 9.8.3: UC's
 *  responder takes any first or only packet as a new message; rxe does the same), but only a
 *  message that was sent, and whole. */
Message uc_receive_named(Soak& s, Qp& q, int qi, const ibv_wc& wc, const uint8_t* buf) {
  uint32_t which = 0;
  if (wc.wc_flags & IBV_WC_WITH_IMM)
    which = ntohl(wc.imm_data);
  else if (wc.byte_len >= 4)
    std::memcpy(&which, buf, 4);
  else
    fail("QP %d: a %u-byte SEND: shorter than any UC SEND posted", qi, wc.byte_len);
  // The index's upper bits: the posted message with those low 32 bits nearest below q.posted.
  const uint64_t index = (q.posted - 1) - uint32_t(uint32_t(q.posted - 1) - which);
  if (index >= q.posted) fail("QP %d: a receive names message %u, never posted", qi, which);
  const Message m = message(s, qi, index);
  if (m.op != kSend && m.op != kSendImm && m.op != kWriteImm)
    fail("QP %d: a receive names message %" PRIu64 ", a %s (consumes no receive)", qi, index, kOpName[m.op]);
  if (q.delivered.size() < q.posted) q.delivered.resize(s.o.messages);
  if (q.delivered[index]) {
    ++s.uc_repeats;
  } else {
    q.delivered[index] = true, ++q.uc_received;
    s.uc_delivered_bytes += m.size;
  }
  return m;
}

/** Checks a delivered receive against the message it must be, then posts the receive again. */
void receive_done(Soak& s, Qp& q, const ibv_wc& wc) {
  const int qi = int(&q - s.qps.data());
  if (wc.status != IBV_WC_SUCCESS)
    fail("QP %d receive %" PRIu64 ": status %s", qi, q.received, ibv_wc_status_str(wc.status));
  const uint8_t* buf = s.recv_slot(q, wc.wr_id);
  const Message m = s.rc() ? rc_receive_owed(s, q, qi) : uc_receive_named(s, q, qi, wc, buf);
  const ibv_wc_opcode op = m.op == kWriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  if (wc.opcode != op || wc.byte_len != m.size || bool(wc.wc_flags & IBV_WC_WITH_IMM) != (m.op != kSend) ||
      (m.op != kSend && ntohl(wc.imm_data) != uint32_t(m.index)))
    fail("QP %d message %" PRIu64 " (%s, %u B): receive opcode %d byte_len %u imm 0x%x wrong", qi, m.index,
         kOpName[m.op], m.size, int(wc.opcode), wc.byte_len, ntohl(wc.imm_data));
  const uint8_t* data = m.op == kWriteImm ? s.rsp_slot(q, m.index) : buf;
  const size_t skip = !s.rc() && m.op == kSend ? 4 : 0;
  // A WRITE_IMM's slot may already hold a later message's data once that one was posted
  // (RC checked it whole at the requester's completion, which comes first).
  // Not even read otherwise: the HCA may be writing that later message into it right now.
  const bool slot_still_ours = m.op != kWriteImm || q.posted <= m.index + uint64_t(s.o.window);
  const size_t bad = slot_still_ours ? first_wrong(data, m.size, m.seed, skip) : m.size;
  if (bad != m.size)
    fail("QP %d message %" PRIu64 " (%s): payload wrong at byte %zu of %u", qi, m.index, kOpName[m.op], bad,
         m.size);
  ++q.received;
  ++s.recv_done;
  post_recv(s, q);
}

/** Polls every CQ once; the number of completions taken. */
int poll_all(Soak& s) {
  ibv_wc wc[64];
  int taken = 0;
  for (Host& h : s.hosts) {
    for (ibv_cq* cq : {h.scq, h.rcq}) {
      const int n = ibv_poll_cq(cq, 64, wc);
      if (n < 0) fail("%s: ibv_poll_cq: %d", h.name.c_str(), n);
      for (int i = 0; i < n; ++i) {
        auto it = s.qp_of.find(wc[i].qp_num);
        if (it == s.qp_of.end()) fail("%s: a completion for unknown QP 0x%x", h.name.c_str(), wc[i].qp_num);
        Qp& q = s.qps[size_t(it->second)];
        if (cq == h.scq)
          requester_done(s, q, wc[i]);
        else
          receive_done(s, q, wc[i]);
      }
      taken += n;
    }
  }
  return taken;
}

bool all_posted_and_done(Soak& s) {
  for (Qp& q : s.qps) {
    if (q.completed < s.o.messages) return false;
    // RC: every message that consumes a receive must be received.
    if (s.rc() && !q.want_recv.empty()) return false;
  }
  return true;
}

void run(Soak& s) {
  using Clock = std::chrono::steady_clock;
  auto last_progress = Clock::now();
  while (!all_posted_and_done(s)) {
    for (Qp& q : s.qps)
      while (q.posted < s.o.messages && q.in_flight.size() < size_t(s.o.window)) post(s, q);
    if (poll_all(s) > 0) {
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > std::chrono::seconds(s.o.stall_seconds)) {
      uint64_t done = 0;
      for (Qp& q : s.qps) done += q.completed;
      fail("no completion for %d s of wall time (%" PRIu64 " of %" PRIu64 " messages completed): stalled",
           s.o.stall_seconds, done, s.o.messages * uint64_t(s.o.qps));
    }
  }
}

/** After the stream: nothing more completes, and each QP's counters equal its atomics. */
void final_checks(Soak& s) {
  // A completion more than the WRs posted fails in its handler (no WR in flight, no receive
  // owed); UC receives still on their way are taken and checked like the others.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) poll_all(s);
  for (Qp& q : s.qps) {
    const int qi = int(&q - s.qps.data());
    if (!s.rc()) {
      s.lost += q.uc_owed - q.uc_received;
      continue;
    }
    if (*s.atomic_word(q, 0) != q.fetch_adds)
      fail("QP %d: FETCH_ADD counter %" PRIu64 " after %" PRIu64 " FETCH_ADDs", qi, *s.atomic_word(q, 0),
           q.fetch_adds);
    if (*s.atomic_word(q, 1) != q.cmp_swaps)
      fail("QP %d: CMP_SWP word %" PRIu64 " after %" PRIu64 " CMP_SWPs", qi, *s.atomic_word(q, 1),
           q.cmp_swaps);
  }
}

/** Sum of a simulator counter over the hosts; -1 when this is not the simulator. */
int64_t counter(Soak& s, const char* name) {
  using Fn = int (*)(const char*, const char*, uint64_t*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "hcasim_sim_counter"));
  if (!fn) return -1;
  int64_t sum = 0;
  for (Host& h : s.hosts) {
    uint64_t v = 0;
    if (fn(h.name.c_str(), name, &v) != 0) return -1;
    sum += int64_t(v);
  }
  return sum;
}

double sim_seconds() {
  using Fn = uint64_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns"));
  return fn ? double(fn()) * 1e-9 : 0;
}

void report(Soak& s, double wall, double sim) {
  const uint64_t total = s.o.messages * uint64_t(s.o.qps);
  std::printf("fault_soak: %s, %d hosts, %d QPs, %" PRIu64 " messages each (%" PRIu64
              "), window %d, sizes 0..%u B, MTU %u, seed %" PRIu64 "\n",
              s.rc() ? "RC" : "UC", s.o.hosts, s.o.qps, s.o.messages, total, s.o.window, s.o.max_size,
              128u << unsigned(s.o.mtu), s.o.seed);
  std::printf("ops:");
  for (int i = 0; i < kOps; ++i)
    if (s.op_count[i]) std::printf(" %s %" PRIu64, kOpName[i], s.op_count[i]);
  std::printf("\nchecked: %" PRIu64 " requester completions in order, %" PRIu64 " receives, %" PRIu64
              " payload bytes",
              total, s.recv_done, s.payload_bytes);
  if (s.rc())
    std::printf(", every atomic exactly once\n");
  else
    std::printf(", %" PRIu64 " messages lost whole, %" PRIu64 " delivered again or late, none in part\n",
                s.lost, s.uc_repeats);
  // UC's requester completes a message once it has left, delivered or not; what arrived is what
  // the receives saw (a WRITE without immediate leaves no trace at the responder).
  if (sim > 0 && s.rc())
    std::printf("simulated: %.6f s, goodput %.3f Gb/s\n", sim, double(s.payload_bytes) * 8 / sim * 1e-9);
  else if (sim > 0)
    std::printf("simulated: %.6f s, sent %.3f Gb/s, delivered in receives %.3f Gb/s\n", sim,
                double(s.payload_bytes) * 8 / sim * 1e-9, double(s.uc_delivered_bytes) * 8 / sim * 1e-9);
  const char* names[] = {"injected_losses",
                         "injected_duplicates",
                         "injected_reorders",
                         "injected_corruptions",
                         "icrc_errors",
                         "retransmits",
                         "naks",
                         "duplicates",
                         "tx_packets"};
  if (counter(s, "tx_packets") >= 0) {
    std::printf("counters:");
    for (const char* n : names) std::printf(" %s=%" PRId64, n, counter(s, n));
    std::printf("\n");
  }
  std::printf("wall: %.1f s\nfault_soak: PASS\n", wall);
}

/** --expect-faults: the run met every kind of fault the simulator injects, and RC recovered. */
void check_faults_met(Soak& s) {
  if (counter(s, "tx_packets") < 0)
    fail("--expect-faults: this is not the simulator (no hcasim_sim_counter)");
  for (const char* n :
       {"injected_losses", "injected_duplicates", "injected_reorders", "injected_corruptions", "icrc_errors"})
    if (counter(s, n) <= 0)
      fail("--expect-faults: %s is 0: the faults did not reach the wire (HCASIM_FAULTS / --faults?)", n);
  if (s.rc() && counter(s, "retransmits") <= 0)
    fail("--expect-faults: no retransmission: RC recovered from nothing");
  if (!s.rc() && s.lost == 0) fail("--expect-faults: no UC message lost");
}

void teardown(Soak& s) {
  for (Qp& q : s.qps) {
    if (ibv_destroy_qp(q.req) || ibv_destroy_qp(q.rsp)) fail("ibv_destroy_qp: %s", strerror(errno));
    if (ibv_dereg_mr(q.req_mr) || ibv_dereg_mr(q.rsp_mr)) fail("ibv_dereg_mr: %s", strerror(errno));
  }
  for (Host& h : s.hosts) {
    if (ibv_destroy_cq(h.scq) || ibv_destroy_cq(h.rcq) || ibv_dealloc_pd(h.pd) || ibv_close_device(h.ctx))
      fail("%s: teardown: %s", h.name.c_str(), strerror(errno));
    for (uint8_t* p : h.areas) std::free(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Soak s;
  s.o = parse(argc, argv);
  const auto t0 = std::chrono::steady_clock::now();
  open_hosts(s);
  build(s);
  const double sim0 = sim_seconds();
  run(s);
  final_checks(s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s.o.expect_faults) check_faults_met(s);
  report(s, wall, sim_seconds() - sim0);
  teardown(s);
  return 0;
}
