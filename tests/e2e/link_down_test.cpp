// SPDX-License-Identifier: Apache-2.0
// A scripted link fault (--faults link-down=HOST@T1..T2; here HCASIM_FAULTS, set per test before
// the world starts): the port's state and the async events a program sees, and RC across it.
// ibv_get_async_event(3): IBV_EVENT_PORT_ERR when the link goes down, IBV_EVENT_PORT_ACTIVE when
// it comes back, both with element.port_num; ibv_query_port(3) reports IBV_PORT_DOWN in between.
// rxe does the same when its netdev loses and regains carrier; mlx5 when the physical link does.
// As on hardware, an outage shorter than the retry budget (retry_cnt x local ACK timeout) costs
// only retransmissions; a longer one ends the sender's WR with IBV_WC_RETRY_EXC_ERR and the QP
// in the error state. Built twice: two hosts on a cable (pulling it takes both ports down) and
// four on a switch (only the named host's port goes down; the others' traffic goes on).
#include <fcntl.h>

#include <cstdlib>

#include "verbs_fixture.h"

namespace e2e {
namespace {

constexpr uint64_t kUs = 1000;  // ns
constexpr uint64_t kMs = 1000 * kUs;

/**
 * Where the test's times start: 0, or LINK_DOWN_T0_MS milliseconds when the world started long
 * before the test (a fabric's device process, whose --faults the harness shifts by as much).
 */
uint64_t t0_ns() {
  const char* v = getenv("LINK_DOWN_T0_MS");
  return v ? std::strtoull(v, nullptr, 10) * kMs : 0;
}

/**
 * The fixture with HCASIM_FAULTS set before the simulated world starts: hcasim1's link down from
 * @p DownMs to @p UpMs milliseconds after t0_ns() (@p UpMs 0: for good).
 */
template <uint64_t DownMs, uint64_t UpMs>
class LinkDownAt : public VerbsFixture {
 protected:
  void SetUp() override {
    const uint64_t t0 = t0_ns() / kMs;
    std::string spec = "link-down=hcasim1@" + std::to_string(t0 + DownMs) + "ms";
    if (UpMs) spec += ".." + std::to_string(t0 + UpMs) + "ms";
    ASSERT_EQ(setenv("HCASIM_FAULTS", spec.c_str(), 1), 0);
    VerbsFixture::SetUp();
  }
  /** Simulated time since t0_ns() (0 before it). */
  static uint64_t Now() {
    const uint64_t now = sim_now_ns(), t0 = t0_ns();
    return now > t0 ? now - t0 : 0;
  }
  /** Hosts on a switch: four of them, or a fabric (LINK_DOWN_SWITCH=1: its device holds more HCAs than the
   * test sees). */
  bool Switched() const { return ndev_ >= 4 || getenv("LINK_DOWN_SWITCH"); }

  /** The next async event of @p h (blocks; the device runs meanwhile). */
  static ibv_async_event NextEvent(Host& h) {
    ibv_async_event ev{};
    EXPECT_EQ(ibv_get_async_event(h.ctx, &ev), 0) << h.name << ": ibv_get_async_event: " << strerror(errno);
    ibv_ack_async_event(&ev);
    return ev;
  }
  /** No async event is waiting for @p h. */
  static bool NoEvent(Host& h) {
    const int fl = fcntl(h.ctx->async_fd, F_GETFL);
    fcntl(h.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    ibv_async_event ev{};
    const int r = ibv_get_async_event(h.ctx, &ev);
    fcntl(h.ctx->async_fd, F_SETFL, fl);
    if (r == 0) ibv_ack_async_event(&ev);
    return r != 0 && errno == EAGAIN;
  }
  static ibv_port_attr Port(Host& h) {
    ibv_port_attr pa{};
    EXPECT_EQ(ibv_query_port(h.ctx, 1, &pa), 0) << h.name;
    return pa;
  }

  /**
   * Messages @p first, @p first + 1, ... from @p x to @p y, one at a time, each checked byte for
   * byte on arrival, until simulated time passes @p until_ns or @p most went; returns the number
   * of the next one. A failed send stops it: @p failed gets its completion.
   */
  int Stream(Host& x, Host& y, int first, uint64_t until_ns, ibv_wc* failed = nullptr, int most = 1 << 30) {
    constexpr uint32_t kLen = 4000;
    int m = first;
    while (Now() < until_ns && m - first < most) {
      fill_pattern(x.buf, kLen, uint32_t(m) + 1);
      std::memset(y.buf, 0, kLen);
      EXPECT_EQ(PostRecv(y, uint64_t(m), {y.sge(0, kLen)}), 0);
      EXPECT_EQ(PostSend(x, uint64_t(m), IBV_WR_SEND, {x.sge(0, kLen)}), 0);
      ibv_wc wc{};
      EXPECT_TRUE(PollOne(x.scq, wc));
      if (wc.status != IBV_WC_SUCCESS) {
        if (failed) *failed = wc;
        return m;
      }
      EXPECT_TRUE(wc_is(wc, WcExpect{uint64_t(m), IBV_WC_SEND, x.qp->qp_num}));
      ibv_wc rc{};
      EXPECT_TRUE(PollOne(y.rcq, rc));
      EXPECT_TRUE(wc_is(rc, WcExpect{uint64_t(m), IBV_WC_RECV, y.qp->qp_num, kLen})) << "message " << m;
      const auto want = make_pattern(kLen, uint32_t(m) + 1);
      EXPECT_TRUE(same_bytes(y.buf, want.data(), kLen, "SEND payload")) << "message " << m;
      if (::testing::Test::HasFailure()) return m;
      ++m;
    }
    return m;
  }

  /** Blocks until host @p h's port goes down (simulated time runs to it); checks the event. */
  static void AwaitPortErr(Host& h) {
    const ibv_async_event ev = NextEvent(h);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR) << h.name << ": " << ibv_event_type_str(ev.event_type);
  }

  /** Opens @p h on device @p i with the fixture's options (one CQ; closed by Close). */
  void Open(Host& h, int i, const Options& o) { OpenHost(h, device(i), o); }
  static void Close(Host& h) {
    EXPECT_EQ(ibv_destroy_qp(h.qp), 0);
    EXPECT_EQ(ibv_dereg_mr(h.mr), 0);
    EXPECT_EQ(ibv_destroy_cq(h.scq), 0);
    EXPECT_EQ(ibv_destroy_comp_channel(h.channel), 0);
    EXPECT_EQ(ibv_dealloc_pd(h.pd), 0);
    EXPECT_EQ(ibv_close_device(h.ctx), 0);
    free(h.buf);
    h = Host{};
  }
};

// hcasim1's link is down from 2 ms to 4 ms of simulated time.
using LinkDownEvents = LinkDownAt<2, 4>;

TEST_F(LinkDownEvents, PortErrThenPortActiveAndThePortStateFollows) {
  ASSERT_TRUE(sim_present()) << "this test needs the simulator's link faults";
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_LT(Now(), 2 * kMs) << "the setup ran past the link-down";
  for (Host* h : {&a_, &b_}) {
    const ibv_port_attr pa = Port(*h);
    EXPECT_EQ(pa.state, IBV_PORT_ACTIVE) << h->name;
    EXPECT_EQ(pa.phys_state, 5) << h->name << ": LINK_UP";
  }
  // At 2 ms: PORT_ERR, for port 1.
  ibv_async_event ev = NextEvent(b_);
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.port_num, 1);
  const uint64_t down_at = Now();
  EXPECT_GE(down_at, 2 * kMs);
  EXPECT_LT(down_at, 4 * kMs) << "seen while the link is down (at once in-process; a fabric delivers later)";
  ibv_port_attr pa = Port(b_);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);
  EXPECT_EQ(pa.phys_state, 2) << "POLLING: no link partner";
  EXPECT_STREQ(ibv_port_state_str(pa.state), "down");
  // On a cable the other end loses its link too; on a switch hcasim0's own link stays up.
  if (Switched()) {
    EXPECT_EQ(Port(a_).state, IBV_PORT_ACTIVE);
    EXPECT_TRUE(NoEvent(a_)) << "hcasim0's port did not change";
  } else {
    EXPECT_EQ(Port(a_).state, IBV_PORT_DOWN);
    ev = NextEvent(a_);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR) << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(ev.element.port_num, 1);
  }
  // At 4 ms: PORT_ACTIVE, and the port is ACTIVE again.
  ev = NextEvent(b_);
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.port_num, 1);
  EXPECT_GE(Now(), 4 * kMs);
  pa = Port(b_);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.phys_state, 5);
  if (!Switched()) {
    ev = NextEvent(a_);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE) << ibv_event_type_str(ev.event_type);
  }
  EXPECT_TRUE(NoEvent(b_)) << "one PORT_ERR and one PORT_ACTIVE, nothing more";
  EXPECT_EQ(sim_counter(Dev(b_), "link_changes"), 2u);
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS) << "a link going down leaves QPs alone";
}

// 2 ms down against a budget of 8 local ACK timeouts of ~1 ms: retransmissions hide it.
using ShortLinkDown = LinkDownAt<1, 3>;

TEST_F(ShortLinkDown, RcRetransmitsAndDeliversEveryMessageExactlyOnce) {
  ASSERT_TRUE(sim_present()) << "this test needs the simulator's link faults";
  Options o;
  o.timeout = 8;  // 4.096 us * 2^8 = 1.05 ms
  o.retry_cnt = 7;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  int sent = Stream(a_, b_, 0, 1 * kMs, nullptr, 5);  // before
  ASSERT_FALSE(HasFailure());
  AwaitPortErr(b_);
  EXPECT_GE(Now(), 1 * kMs);
  sent = Stream(a_, b_, sent, 5 * kMs);  // across the outage and after it
  EXPECT_GT(sent, 10);
  EXPECT_TRUE(NoCompletion(b_.rcq, 200)) << "a message arrived twice";
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
  EXPECT_GT(sim_counter(Dev(a_), "link_down_losses") + sim_counter(Dev(b_), "link_down_losses"), 0u);
  EXPECT_GT(sim_counter(Dev(a_), "retransmits"), 0u) << "the outage cost no retransmission";
  std::printf("%d messages across a 2 ms link-down; %llu frames lost to it, %llu retransmits\n", sent,
              (unsigned long long)(sim_counter(Dev(a_), "link_down_losses") +
                                   sim_counter(Dev(b_), "link_down_losses")),
              (unsigned long long)sim_counter(Dev(a_), "retransmits"));
}

// Down for good from 1 ms, against a budget of 3 local ACK timeouts of ~1 ms.
using LongLinkDown = LinkDownAt<1, 0>;

TEST_F(LongLinkDown, RcSenderGetsRetryExceededAndTheQpGoesToError) {
  ASSERT_TRUE(sim_present()) << "this test needs the simulator's link faults";
  Options o;
  o.timeout = 8;  // 1.05 ms
  o.retry_cnt = 2;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_wc failed{};
  failed.status = IBV_WC_SUCCESS;
  int sent = Stream(a_, b_, 0, 1 * kMs, &failed, 5);  // before
  EXPECT_EQ(sent, 5) << "messages before the link went down";
  AwaitPortErr(b_);
  sent = Stream(a_, b_, sent, 50 * kMs, &failed);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(failed.status, IBV_WC_RETRY_EXC_ERR) << describe(failed);
  EXPECT_EQ(failed.wr_id, uint64_t(sent)) << "the first message after the link went down";
  const uint64_t at = Now();
  const uint64_t timeout_ns = 4096ull * (1u << 8);
  EXPECT_GE(at, 1 * kMs + 2 * timeout_ns) << "gave up before its retries ran out";
  EXPECT_LE(at, 1 * kMs + 5 * timeout_ns) << "kept retrying past its budget";
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  // The QP is in error: a new WR completes flushed.
  ASSERT_EQ(PostSend(a_, 999, IBV_WR_SEND, {a_.sge(0, 8)}), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << describe(wc);
  // The receiver took every message before the outage once; the lost one never arrived.
  EXPECT_TRUE(NoCompletion(b_.rcq, 200));
  ibv_async_event ev{};
  if (!Switched()) {
    ev = NextEvent(a_);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR) << ibv_event_type_str(ev.event_type);
  }
}

// On a switch: hcasim1's link goes down for good; hcasim2 and hcasim3 talk on as if nothing happened.
using LinkDownOnSwitch = LinkDownAt<1, 0>;

TEST_F(LinkDownOnSwitch, OtherHostsTrafficIsUnaffected) {
  ASSERT_TRUE(sim_present()) << "this test needs the simulator's link faults";
  if (!Switched()) GTEST_SKIP() << "needs four hosts on a switch (HCASIM_HOSTS=4)";
  Options o;
  o.timeout = 8;
  o.retry_cnt = 2;
  o.separate_cqs = false;
  o.connect = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  Host c, d;
  ASSERT_NO_FATAL_FAILURE(Open(c, 2, o));
  ASSERT_NO_FATAL_FAILURE(Open(d, 3, o));
  ASSERT_NO_FATAL_FAILURE(Link(c, d));
  // hcasim0 -> hcasim1 fails once hcasim1's link is gone ...
  ibv_wc failed{};
  AwaitPortErr(b_);
  Stream(a_, b_, 0, 50 * kMs, &failed);
  EXPECT_EQ(failed.status, IBV_WC_RETRY_EXC_ERR) << describe(failed);
  // ... while hcasim2 -> hcasim3 goes on, every message once, without a single retransmission.
  const int sent = Stream(c, d, 0, Now() + 3 * kMs);
  EXPECT_GT(sent, 10);
  EXPECT_EQ(sim_counter(Dev(c), "retransmits"), 0u);
  EXPECT_EQ(sim_counter(Dev(c), "link_down_losses") + sim_counter(Dev(d), "link_down_losses"), 0u);
  EXPECT_GT(sim_counter(Dev(a_), "link_down_losses"), 0u);
  EXPECT_EQ(Port(c).state, IBV_PORT_ACTIVE);
  EXPECT_EQ(Port(a_).state, IBV_PORT_ACTIVE);
  EXPECT_EQ(Port(b_).state, IBV_PORT_DOWN);
  EXPECT_TRUE(NoEvent(c)) << "hcasim2's port never changed";
  EXPECT_TRUE(NoEvent(a_)) << "hcasim0's port never changed";
  Close(c);
  Close(d);
}

}  // namespace
}  // namespace e2e
