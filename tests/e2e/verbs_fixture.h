// SPDX-License-Identifier: Apache-2.0
/**
 * @file verbs_fixture.h
 * @brief End-to-end test fixture written against the public ibverbs API only.
 *
 * Two hosts (the first two devices, normally hcasim0 and hcasim1; the same device twice if
 * there is only one), each with a PD, a completion channel, one CQ (or a send and a receive
 * CQ), an RC QP and one registered buffer. Build() creates everything and, unless told not
 * to, connects the QPs RESET -> INIT -> RTR -> RTS with the chosen path MTU.
 *
 * Every wait is bounded: PollCq() gives up after kMaxPolls polls or a wall-clock deadline,
 * and a watchdog aborts the process if a single verbs call never returns, so a broken model
 * fails the test instead of hanging it.
 *
 * Nothing here includes model or driver headers. Simulator-only facts (counters) are reached
 * through dlsym(RTLD_DEFAULT, "hcasim_sim_counter"), so the file compiles and the
 * non-simulator checks run on any ibverbs device.
 */
#pragma once

#include <infiniband/verbs.h>

#include "test_pattern.h"
#include "wc_names.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace e2e {

/** Poll budget: whichever comes first. */
constexpr uint64_t kMaxPolls = 10'000'000;
constexpr double kPollSeconds = 5.0;
/** A verbs call that has not returned after this long is a hang: the watchdog aborts. */
constexpr int kWatchdogSeconds = 30;
/** Source GID index: the IPv4-mapped RoCEv2 GID (index 0 is the link-local one). */
constexpr int kGidIndex = 1;

constexpr unsigned kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/** Path MTU in bytes. */
inline uint32_t mtu_bytes(ibv_mtu m) { return 128u << unsigned(m); }

inline std::vector<uint8_t> make_pattern(size_t len, uint32_t seed) {
  std::vector<uint8_t> v(len);
  fill_pattern(v.data(), len, seed);
  return v;
}

/** Byte-for-byte comparison that reports the first differing offset. */
inline ::testing::AssertionResult same_bytes(const uint8_t* got, const uint8_t* want, size_t len,
                                             const char* what = "payload") {
  for (size_t i = 0; i < len; ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure()
             << what << " differs at byte " << i << " of " << len << ": got 0x" << std::hex
             << unsigned(got[i]) << ", want 0x" << unsigned(want[i]);
  return ::testing::AssertionSuccess();
}
/** Every byte of [p, p+len) equals @p value (canary / untouched check). */
inline ::testing::AssertionResult all_bytes(const uint8_t* p, size_t len, uint8_t value,
                                            const char* what = "canary") {
  for (size_t i = 0; i < len; ++i)
    if (p[i] != value)
      return ::testing::AssertionFailure()
             << what << " overwritten at byte " << i << " of " << len << ": 0x" << std::hex << unsigned(p[i]);
  return ::testing::AssertionSuccess();
}

/** Simulator counter through the simulator's C interface, if this is the simulator. */
inline bool sim_present() { return dlsym(RTLD_DEFAULT, "hcasim_sim_counter") != nullptr; }
inline uint64_t sim_counter(const char* dev, const char* name) {
  using Fn = int (*)(const char*, const char*, uint64_t*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "hcasim_sim_counter"));
  uint64_t v = 0;
  if (!fn || fn(dev, name, &v) != 0) {
    ADD_FAILURE() << "no simulator counter " << dev << "/" << name;
    return 0;
  }
  return v;
}
/** Simulated time in ns, if this is the simulator (0 elsewhere). */
inline uint64_t sim_now_ns() {
  using Fn = uint64_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns"));
  return fn ? fn() : 0;
}

/** Printable work completion, for failure messages. */
inline std::string describe(const ibv_wc& wc) {
  char b[256];
  snprintf(
      b, sizeof b,
      "{wr_id=0x%llx status=%s opcode=%s byte_len=%u imm=0x%08x wc_flags=0x%x qp_num=0x%x vendor_err=0x%x}",
      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc_opcode_name(wc.opcode), wc.byte_len,
      ntohl(wc.imm_data), unsigned(wc.wc_flags), wc.qp_num, wc.vendor_err);
  return b;
}

/** What a successful completion must look like, field by field. */
struct WcExpect {
  uint64_t wr_id;
  ibv_wc_opcode opcode;
  uint32_t qp_num;
  int64_t byte_len = -1;  ///< -1: not checked (undefined for SEND/RDMA_WRITE requester WCs)
  bool with_imm = false;
  uint32_t imm_host = 0;  ///< immediate in host order
  ibv_wc_status status = IBV_WC_SUCCESS;
};

inline ::testing::AssertionResult wc_is(const ibv_wc& wc, const WcExpect& e) {
  auto fail = [&](const char* field) {
    return ::testing::AssertionFailure() << "completion field " << field << " wrong: " << describe(wc);
  };
  if (wc.status != e.status)
    return ::testing::AssertionFailure() << "status " << ibv_wc_status_str(wc.status) << ", want "
                                         << ibv_wc_status_str(e.status) << ": " << describe(wc);
  if (wc.wr_id != e.wr_id) return fail("wr_id");
  if (wc.qp_num != e.qp_num) return fail("qp_num");
  if (e.status != IBV_WC_SUCCESS) return ::testing::AssertionSuccess();  // other fields undefined
  if (wc.opcode != e.opcode) return fail("opcode");
  if (e.byte_len >= 0 && wc.byte_len != uint32_t(e.byte_len)) return fail("byte_len");
  const unsigned want_flags = e.with_imm ? IBV_WC_WITH_IMM : 0;
  // IBV_WC_GRH means something only for UD QPs (ibv_poll_cq(3)); rxe sets it on RC receive
  // completions as well (tests/diff known difference grh-flag-rc), so RC checks ignore it.
  // IBV_WC_WITH_IMM is "relevant for receive work completions" only; rxe also sets it on the
  // requester's completion of a WR that carried an immediate, so send-side checks ignore it.
  const bool recv = e.opcode == IBV_WC_RECV || e.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
  const unsigned ignored = IBV_WC_GRH | (recv ? 0u : unsigned(IBV_WC_WITH_IMM));
  if ((unsigned(wc.wc_flags) & ~ignored) != want_flags) return fail("wc_flags");
  if (e.with_imm && ntohl(wc.imm_data) != e.imm_host) return fail("imm_data");
  return ::testing::AssertionSuccess();
}

/** Aborts the process if a test stays in one phase longer than kWatchdogSeconds. */
class Watchdog {
 public:
  Watchdog() = default;
  ~Watchdog() { stop(); }
  void start(const std::string& what, int seconds = kWatchdogSeconds) {
    stop();
    stop_ = false;
    t_ = std::thread([this, what, seconds] {
      std::unique_lock<std::mutex> g(mu_);
      if (!cv_.wait_for(g, std::chrono::seconds(seconds), [this] { return stop_; })) {
        fprintf(stderr, "\nwatchdog: %s still running after %d s: a verbs call never returned; aborting\n",
                what.c_str(), seconds);
        fflush(stderr);
        std::abort();
      }
    });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (t_.joinable()) t_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = true;
  std::thread t_;
};

/** How Build() sets the two hosts up. */
struct Options {
  ibv_mtu mtu = IBV_MTU_1024;
  size_t buf_size = 256 * 1024;  ///< per host, one MR over all of it
  uint32_t max_send_wr = 32, max_recv_wr = 32;
  uint32_t max_send_sge = 4, max_recv_sge = 4;
  uint32_t max_inline_data = 0;
  int cqe = 256;
  bool separate_cqs = false;  ///< a send CQ and a receive CQ per host (both on the channel)
  bool channel = true;        ///< false: CQs without a completion channel (pure polling)
  bool sq_sig_all = false;
  unsigned mr_access = kAllAccess;
  unsigned qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7;
  uint8_t min_rnr_timer = 1;                    ///< 0.01 ms: RNR tests stay short
  uint32_t psn_a = 0x001000, psn_b = 0x00b000;  ///< initial send PSN of each side
  bool connect = true;
  ibv_qp_type qp_type = IBV_QPT_RC;  ///< RC, UC or UD
  bool srq = false;                  ///< each QP takes its receives from a shared receive queue
  uint32_t qkey = 0x11111111;        ///< UD: both QPs' Q_Key
};

struct Host {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* scq = nullptr;  ///< send CQ
  ibv_cq* rcq = nullptr;  ///< receive CQ (== scq unless Options::separate_cqs)
  ibv_qp* qp = nullptr;
  ibv_srq* srq = nullptr;  ///< with Options::srq
  ibv_ah* ah = nullptr;    ///< UD: address handle towards the other host (made by Connect)
  ibv_qp_cap cap{};        ///< what ibv_create_qp returned
  uint8_t* buf = nullptr;
  size_t size = 0;
  ibv_mr* mr = nullptr;
  ibv_gid gid{};
  uint32_t sq_psn = 0;

  uint64_t addr(size_t off) const { return reinterpret_cast<uintptr_t>(buf) + off; }
  ibv_sge sge(size_t off, uint32_t len) const { return ibv_sge{addr(off), len, mr->lkey}; }
};

class VerbsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    watchdog_.start(std::string(info->test_suite_name()) + "." + info->name());
    list_ = ibv_get_device_list(&ndev_);
    ASSERT_NE(list_, nullptr) << "ibv_get_device_list: " << strerror(errno);
    ASSERT_GT(ndev_, 0) << "no RDMA devices";
  }

  void TearDown() override {
    Host* hs[2] = {&a_, &b_};
    for (Host* h : hs) {
      if (h->ah) {
        EXPECT_EQ(ibv_destroy_ah(h->ah), 0) << h->name << ": ibv_destroy_ah";
      }
      if (h->qp) {
        EXPECT_EQ(ibv_destroy_qp(h->qp), 0) << h->name << ": ibv_destroy_qp";
      }
      if (h->srq) {
        EXPECT_EQ(ibv_destroy_srq(h->srq), 0) << h->name << ": ibv_destroy_srq";
      }
      if (h->mr) {
        EXPECT_EQ(ibv_dereg_mr(h->mr), 0) << h->name << ": ibv_dereg_mr";
      }
      if (h->rcq && h->rcq != h->scq) {
        EXPECT_EQ(ibv_destroy_cq(h->rcq), 0) << h->name << ": ibv_destroy_cq";
      }
      if (h->scq) {
        EXPECT_EQ(ibv_destroy_cq(h->scq), 0) << h->name << ": ibv_destroy_cq";
      }
      if (h->channel) {
        EXPECT_EQ(ibv_destroy_comp_channel(h->channel), 0) << h->name << ": destroy channel";
      }
      if (h->pd) {
        EXPECT_EQ(ibv_dealloc_pd(h->pd), 0) << h->name << ": ibv_dealloc_pd";
      }
      if (h->ctx) {
        EXPECT_EQ(ibv_close_device(h->ctx), 0) << h->name << ": ibv_close_device";
      }
      free(h->buf);
      *h = Host{};
    }
    if (list_) ibv_free_device_list(list_);
    list_ = nullptr;
    watchdog_.stop();
  }

  /** Device @p i of the list: the second host uses the first device if there is only one. */
  ibv_device* device(int i) const { return list_[i < ndev_ ? i : 0]; }

  void OpenHost(Host& h, ibv_device* dev, const Options& o) {
    h.name = ibv_get_device_name(dev);
    h.ctx = ibv_open_device(dev);
    ASSERT_NE(h.ctx, nullptr) << "ibv_open_device(" << h.name << "): " << strerror(errno);
    h.pd = ibv_alloc_pd(h.ctx);
    ASSERT_NE(h.pd, nullptr) << "ibv_alloc_pd: " << strerror(errno);
    if (o.channel) {
      h.channel = ibv_create_comp_channel(h.ctx);
      ASSERT_NE(h.channel, nullptr) << "ibv_create_comp_channel: " << strerror(errno);
    }
    h.scq = ibv_create_cq(h.ctx, o.cqe, &h, h.channel, 0);
    ASSERT_NE(h.scq, nullptr) << "ibv_create_cq: " << strerror(errno);
    h.rcq = h.scq;
    if (o.separate_cqs) {
      h.rcq = ibv_create_cq(h.ctx, o.cqe, &h, h.channel, 0);
      ASSERT_NE(h.rcq, nullptr) << "ibv_create_cq: " << strerror(errno);
    }
    h.size = o.buf_size;
    h.buf = static_cast<uint8_t*>(aligned_alloc(4096, (o.buf_size + 4095) & ~size_t(4095)));
    ASSERT_NE(h.buf, nullptr);
    memset(h.buf, 0, h.size);
    h.mr = ibv_reg_mr(h.pd, h.buf, h.size, int(o.mr_access));
    ASSERT_NE(h.mr, nullptr) << "ibv_reg_mr: " << strerror(errno);
    if (o.srq) {
      ibv_srq_init_attr sa{};
      sa.attr.max_wr = o.max_recv_wr;
      sa.attr.max_sge = o.max_recv_sge;
      h.srq = ibv_create_srq(h.pd, &sa);
      ASSERT_NE(h.srq, nullptr) << "ibv_create_srq: " << strerror(errno);
    }
    ibv_qp_init_attr ia{};
    ia.send_cq = h.scq;
    ia.recv_cq = h.rcq;
    ia.srq = h.srq;
    ia.qp_type = o.qp_type;
    ia.sq_sig_all = o.sq_sig_all ? 1 : 0;
    ia.cap.max_send_wr = o.max_send_wr;
    ia.cap.max_recv_wr = o.max_recv_wr;
    ia.cap.max_send_sge = o.max_send_sge;
    ia.cap.max_recv_sge = o.max_recv_sge;
    ia.cap.max_inline_data = o.max_inline_data;
    h.qp = ibv_create_qp(h.pd, &ia);
    ASSERT_NE(h.qp, nullptr) << "ibv_create_qp: " << strerror(errno);
    h.cap = ia.cap;
    ASSERT_GE(h.cap.max_send_wr, o.max_send_wr);
    ASSERT_GE(h.cap.max_send_sge, o.max_send_sge);
    if (!o.srq) {  // ibv_create_qp(3): the receive capabilities are ignored with an SRQ
      ASSERT_GE(h.cap.max_recv_wr, o.max_recv_wr);
      ASSERT_GE(h.cap.max_recv_sge, o.max_recv_sge);
    }
    ASSERT_GE(h.cap.max_inline_data, o.max_inline_data);
    ASSERT_EQ(ibv_query_gid(h.ctx, 1, kGidIndex, &h.gid), 0) << "ibv_query_gid: " << strerror(errno);
  }

  /** Creates both hosts and (unless o.connect is false) connects them. */
  void Build(const Options& o = Options()) {
    opts_ = o;
    ASSERT_NO_FATAL_FAILURE(OpenHost(a_, device(0), o));
    ASSERT_NO_FATAL_FAILURE(OpenHost(b_, device(1), o));
    a_.sq_psn = o.psn_a;
    b_.sq_psn = o.psn_b;
    if (o.connect) {
      ASSERT_NO_FATAL_FAILURE(Connect());
    }
  }

  // ---- the QP state machine, one step at a time (each returns ibv_modify_qp's result)
  // (ibv_modify_qp(3)'s required attributes differ by QP type: UD sets a Q_Key at INIT and
  // nothing at RTR; UC has no READ/atomic or retry attributes.)
  bool Ud() const { return opts_.qp_type == IBV_QPT_UD; }
  bool Rc() const { return opts_.qp_type == IBV_QPT_RC; }
  int ToInit(Host& h) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = int(opts_.qp_access);
    a.qkey = opts_.qkey;
    return ibv_modify_qp(
        h.qp, &a,
        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (Ud() ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
  }
  ibv_qp_attr RtrAttr(const Host& peer) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = opts_.mtu;
    a.dest_qp_num = peer.qp->qp_num;
    a.rq_psn = peer.sq_psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = opts_.min_rnr_timer;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.grh.sgid_index = kGidIndex;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    return a;
  }
  static constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  static constexpr int kUcRtrMask =
      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  int ToRtr(Host& h, const Host& peer) {
    ibv_qp_attr a = RtrAttr(peer);
    return ibv_modify_qp(h.qp, &a, Ud() ? IBV_QP_STATE : Rc() ? kRtrMask : kUcRtrMask);
  }
  ibv_qp_attr RtsAttr(const Host& h) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = opts_.timeout;
    a.retry_cnt = opts_.retry_cnt;
    a.rnr_retry = opts_.rnr_retry;
    a.sq_psn = h.sq_psn;
    a.max_rd_atomic = 4;
    return a;
  }
  static constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  int ToRts(Host& h) {
    ibv_qp_attr a = RtsAttr(h);
    return ibv_modify_qp(h.qp, &a, Rc() ? kRtsMask : IBV_QP_STATE | IBV_QP_SQ_PSN);
  }
  /** UD: an address handle on @p h towards @p peer's GID. */
  static ibv_ah* MakeAh(const Host& h, const Host& peer) {
    ibv_ah_attr aa{};
    aa.is_global = 1;
    aa.grh.dgid = peer.gid;
    aa.grh.sgid_index = kGidIndex;
    aa.grh.hop_limit = 64;
    aa.port_num = 1;
    return ibv_create_ah(h.pd, &aa);
  }
  /** INIT, RTR, RTS on both ends of the pair @p x, @p y (hosts beyond a_ and b_, or extra QPs). */
  void Link(Host& x, Host& y) {
    ASSERT_EQ(ToInit(x), 0) << x.name << " INIT: " << strerror(errno);
    ASSERT_EQ(ToInit(y), 0) << y.name << " INIT: " << strerror(errno);
    ASSERT_EQ(ToRtr(x, y), 0) << x.name << " RTR: " << strerror(errno);
    ASSERT_EQ(ToRtr(y, x), 0) << y.name << " RTR: " << strerror(errno);
    ASSERT_EQ(ToRts(x), 0) << x.name << " RTS: " << strerror(errno);
    ASSERT_EQ(ToRts(y), 0) << y.name << " RTS: " << strerror(errno);
  }
  void Connect() {
    ASSERT_EQ(ToInit(a_), 0) << "A INIT: " << strerror(errno);
    ASSERT_EQ(ToInit(b_), 0) << "B INIT: " << strerror(errno);
    ASSERT_EQ(ToRtr(a_, b_), 0) << "A RTR: " << strerror(errno);
    ASSERT_EQ(ToRtr(b_, a_), 0) << "B RTR: " << strerror(errno);
    ASSERT_EQ(ToRts(a_), 0) << "A RTS: " << strerror(errno);
    ASSERT_EQ(ToRts(b_), 0) << "B RTS: " << strerror(errno);
    if (Ud()) {
      a_.ah = MakeAh(a_, b_);
      ASSERT_NE(a_.ah, nullptr) << "ibv_create_ah: " << strerror(errno);
      b_.ah = MakeAh(b_, a_);
      ASSERT_NE(b_.ah, nullptr) << "ibv_create_ah: " << strerror(errno);
    }
  }
  static ibv_qp_state QpState(const Host& h) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(h.qp, &a, IBV_QP_STATE, &ia) != 0) return ibv_qp_state(-1);
    return a.qp_state;
  }

  // ---- posting
  /** One send WR; returns ibv_post_send's result. */
  static int PostSend(Host& h, uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge> sges,
                      unsigned flags = IBV_SEND_SIGNALED, uint32_t imm_host = 0, uint64_t raddr = 0,
                      uint32_t rkey = 0) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = int(sges.size());
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm_host);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(h.qp, &wr, &bad);
    if (rc != 0 && bad != &wr)
      ADD_FAILURE() << "ibv_post_send failed (" << rc << ") but bad_wr is not the WR";
    return rc;
  }
  /** UD: one SEND (or SEND_WITH_IMM) from @p h to @p to's QP through @p h.ah with Q_Key @p qkey. */
  static int PostUdSend(Host& h, const Host& to, uint64_t wr_id, std::vector<ibv_sge> sges, uint32_t qkey,
                        ibv_wr_opcode op = IBV_WR_SEND, uint32_t imm_host = 0) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = int(sges.size());
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm_host);
    wr.wr.ud.ah = h.ah;
    wr.wr.ud.remote_qpn = to.qp->qp_num;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(h.qp, &wr, &bad);
  }
  /** One receive WR, to the host's SRQ if it has one, else to its QP. */
  static int PostRecv(Host& h, uint64_t wr_id, std::vector<ibv_sge> sges) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = int(sges.size());
    ibv_recv_wr* bad = nullptr;
    const int rc = h.srq ? ibv_post_srq_recv(h.srq, &wr, &bad) : ibv_post_recv(h.qp, &wr, &bad);
    if (rc != 0 && bad != &wr)
      ADD_FAILURE() << "ibv_post_recv failed (" << rc << ") but bad_wr is not the WR";
    return rc;
  }

  // ---- completions
  /**
   * Polls @p cq until @p n completions arrived (appended to @p out), at most kMaxPolls polls
   * and kPollSeconds of wall time. Polls a few entries at a time to exercise batching.
   */
  static ::testing::AssertionResult PollCq(ibv_cq* cq, size_t n, std::vector<ibv_wc>& out,
                                           double seconds = kPollSeconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const size_t want = out.size() + n;
    uint64_t polls = 0;
    while (out.size() < want) {
      ibv_wc wc[4];
      const int batch = int(std::min<size_t>(4, want - out.size()));
      const int got = ibv_poll_cq(cq, batch, wc);
      if (got < 0) return ::testing::AssertionFailure() << "ibv_poll_cq returned " << got;
      if (got > batch)
        return ::testing::AssertionFailure() << "ibv_poll_cq returned " << got << " > " << batch;
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
      if (got) continue;
      if (++polls >= kMaxPolls || ((polls & 255) == 0 && std::chrono::steady_clock::now() > deadline))
        return ::testing::AssertionFailure() << "timed out: " << (want - out.size()) << " of " << n
                                             << " completion(s) missing after " << polls << " empty polls";
    }
    return ::testing::AssertionSuccess();
  }
  /** Exactly one completion. */
  static ::testing::AssertionResult PollOne(ibv_cq* cq, ibv_wc& wc, double seconds = kPollSeconds) {
    std::vector<ibv_wc> v;
    auto r = PollCq(cq, 1, v, seconds);
    if (r) wc = v[0];
    return r;
  }
  /** Nothing arrives on @p cq within @p polls polls (each lets the device run to its next step). */
  static ::testing::AssertionResult NoCompletion(ibv_cq* cq, int polls = 2000) {
    for (int i = 0; i < polls; ++i) {
      ibv_wc wc;
      const int got = ibv_poll_cq(cq, 1, &wc);
      if (got != 0)
        return ::testing::AssertionFailure()
               << "unexpected completion (poll returned " << got << "): " << (got > 0 ? describe(wc) : "");
    }
    return ::testing::AssertionSuccess();
  }

  static const char* Dev(const Host& h) { return h.name.c_str(); }

  Options opts_;
  Host a_, b_;
  ibv_device** list_ = nullptr;
  int ndev_ = 0;
  Watchdog watchdog_;
};

/** Post one atomic WR; the original remote value lands in 8 bytes at @p local_off. */
inline int PostAtomic(Host& h, uint64_t wr_id, ibv_wr_opcode op, size_t local_off, uint64_t raddr,
                      uint32_t rkey, uint64_t compare_add, uint64_t swap,
                      unsigned flags = IBV_SEND_SIGNALED) {
  ibv_sge sge = h.sge(local_off, 8);
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.wr.atomic.remote_addr = raddr;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  wr.wr.atomic.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(h.qp, &wr, &bad);
}

}  // namespace e2e
