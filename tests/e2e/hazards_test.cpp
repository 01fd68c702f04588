// SPDX-License-Identifier: Apache-2.0
// Hazard reports: a program that destroys a QP, a CQ or an MR while work touching it is still
// in flight gets a "hazard:" trace event, a `hazards` count and a line on stderr. Each case has
// a control: the same program, waiting for its completions first, is reported nothing. The
// suite runs twice: in the default clock (lockstep: one thread) and with HCASIM_CLOCK=realtime,
// where dropped frames keep the work in flight however fast the device runs.
//
// The world traces command errors to stderr (set before the first verbs call, so before the
// world is built), and each check captures stderr around the destroy: the hazard line and the
// trace event both appear there. Simulator only.
#include <hcasim/sim_control.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>

#include "verbs_fixture.h"

namespace e2e {
namespace {

constexpr uint32_t kAny = 0xffffffff;

class Hazards : public VerbsFixture {
 protected:
  void SetUp() override {
    setenv("HCASIM_TRACE", "-", 1);
    setenv("HCASIM_TRACE_FILTER", "unit=cmd;kind=error", 1);
    VerbsFixture::SetUp();
    if (!hcasim_sim_present()) GTEST_SKIP() << "not the simulator";
    ASSERT_NO_FATAL_FAILURE(Build());
    a0_ = Count(a_);
    b0_ = Count(b_);
  }
  static uint64_t Count(const Host& h) {
    uint64_t v = 0;
    EXPECT_EQ(hcasim_sim_counter(Dev(h), "hazards", &v), 0);
    return v;
  }
  /** Hazards reported on each host since SetUp. */
  uint64_t NewA() const { return Count(a_) - a0_; }
  uint64_t NewB() const { return Count(b_) - b0_; }
  /** Let the device run a little (the WQE is fetched, decoded and transmitted). */
  void Advance() { ASSERT_TRUE(NoCompletion(a_.scq, 50)); }
  static std::string Hex(uint32_t v) {
    char b[16];
    snprintf(b, sizeof b, "0x%x", v);
    return b;
  }
  static bool OnFabric() {
    const char* f = std::getenv("HCASIM_FABRIC");
    return f && *f;
  }
  /** The realtime clock (HCASIM_CLOCK=realtime): the device runs on while the program does not wait. */
  static bool Realtime() {
    const char* c = std::getenv("HCASIM_CLOCK");
    return c && std::string(c) == "realtime";
  }
  /** The hazard trace event (unit cmd, kind error) and the stderr line, naming @p what and
   *  containing each of @p more. */
  static void ExpectReported(const std::string& err, const std::string& what,
                             std::initializer_list<std::string> more = {}) {
    std::fputs(err.c_str(), stdout);  // the report as a program's user sees it, in the test log
    // On a cross-process fabric the device process prints the line and the trace (the fabric
    // test tests/fabric "hazards" checks its output); here only the counters are checked.
    if (OnFabric()) return;
    EXPECT_NE(err.find("cmd       error"), std::string::npos) << "no hazard trace event in:\n" << err;
    EXPECT_NE(err.find("hazard: " + what), std::string::npos) << "no '" << what << "' in:\n" << err;
    const std::string why = Realtime() ? "this run lost it (realtime clock)" : "here it is certain";
    EXPECT_NE(err.find("on hardware this is a race; " + why), std::string::npos) << err;
    for (const std::string& m : more)
      EXPECT_NE(err.find(m), std::string::npos) << "no '" << m << "' in:\n" << err;
  }
  /** Runs @p destroy (a destroy/dereg call) and returns its result with what it printed on stderr. */
  template <typename F>
  static std::pair<int, std::string> StderrOf(F&& destroy) {
    ::testing::internal::CaptureStderr();
    const int rc = destroy();
    return {rc, ::testing::internal::GetCapturedStderr()};
  }
  uint64_t a0_ = 0, b0_ = 0;
};

// Case 1: the SEND's frames are dropped at the receiver, so it stays unacknowledged.
TEST_F(Hazards, QpDestroyedWithUnacknowledgedSend) {
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(hcasim_sim_drop_rx(Dev(b_), b_.qp->qp_num, kAny, 1000), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ASSERT_NO_FATAL_FAILURE(Advance());
  const uint32_t qpn = a_.qp->qp_num;
  const auto [rc, err] = StderrOf([&] { return ibv_destroy_qp(a_.qp); });
  ASSERT_EQ(rc, 0);
  a_.qp = nullptr;
  EXPECT_EQ(NewA(), 1u);
  EXPECT_EQ(NewB(), 0u);
  ExpectReported(err, "QP " + Hex(qpn) + " destroyed with 1 unacknowledged SEND (WQE 0, PSN ");
}

// Case 1b: destroyed right after ibv_post_send, before the device even fetched the WQE (the
// doorbell has not landed: the posted counter is read from the QP's doorbell record). Lockstep
// only: in the realtime clock the device runs on while the program does not wait, so it is a
// real race.
TEST_F(Hazards, QpDestroyedRightAfterPostingIsAHazardToo) {
  if (OnFabric() || Realtime()) GTEST_SKIP() << "a race in the realtime clock, not a certainty";
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  const uint32_t qpn = a_.qp->qp_num;
  const auto [rc, err] = StderrOf([&] { return ibv_destroy_qp(a_.qp); });
  ASSERT_EQ(rc, 0);
  a_.qp = nullptr;
  EXPECT_EQ(NewA(), 1u);
  ExpectReported(err, "QP " + Hex(qpn) + " destroyed with ");
}

TEST_F(Hazards, QpDestroyedAfterItsSendCompletedIsNoHazard) {
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  const auto [rc, err] = StderrOf([&] { return ibv_destroy_qp(a_.qp); });
  EXPECT_EQ(rc, 0);
  a_.qp = nullptr;
  EXPECT_EQ(NewA(), 0u);
  EXPECT_EQ(err.find("hazard"), std::string::npos) << err;
}

// Case 2: B received the SEND (its receive CQE is in B's CQ) but never polls it.
TEST_F(Hazards, CqDestroyedWithUnpolledCqe) {
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  ASSERT_NO_FATAL_FAILURE(Advance());
  // ibv_destroy_cq fails with EBUSY while a QP uses the CQ: the QP goes first (its work is done).
  ASSERT_EQ(ibv_destroy_qp(b_.qp), 0);
  b_.qp = nullptr;
  const auto [rc, err] = StderrOf([&] { return ibv_destroy_cq(b_.scq); });
  ASSERT_EQ(rc, 0);
  b_.scq = b_.rcq = nullptr;
  EXPECT_EQ(NewB(), 1u);
  EXPECT_EQ(NewA(), 0u);
  ExpectReported(err, "CQ ", {"destroyed with 1 CQE never polled"});
}

TEST_F(Hazards, CqDestroyedAfterPollingIsNoHazard) {
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(ibv_destroy_qp(b_.qp), 0);
  b_.qp = nullptr;
  const auto [rc, err] = StderrOf([&] { return ibv_destroy_cq(b_.scq); });
  EXPECT_EQ(rc, 0);
  b_.scq = b_.rcq = nullptr;
  EXPECT_EQ(NewB(), 0u);
  EXPECT_EQ(err.find("hazard"), std::string::npos) << err;
}

// Case 3: A's RDMA WRITE into B's MR is dropped at B, so it stays in flight at A while B
// deregisters the MR. The report is B's (the MR's owner) and names A's QP and WQE.
TEST_F(Hazards, MrDeregisteredWithWriteInFlight) {
  ASSERT_EQ(hcasim_sim_drop_rx(Dev(b_), b_.qp->qp_num, kAny, 1000), 0);
  ASSERT_EQ(
      PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 4096)}, IBV_SEND_SIGNALED, 0, b_.addr(4096), b_.mr->rkey),
      0);
  ASSERT_NO_FATAL_FAILURE(Advance());
  const uint32_t rkey = b_.mr->rkey;
  const auto [rc, err] = StderrOf([&] { return ibv_dereg_mr(b_.mr); });
  ASSERT_EQ(rc, 0);
  b_.mr = nullptr;
  EXPECT_EQ(NewB(), 1u);
  EXPECT_EQ(NewA(), 0u);
  ExpectReported(err, "MR key " + Hex(rkey) + " deregistered with an RDMA WRITE of 4096 bytes",
                 {"from " + a_.name + " QP " + Hex(a_.qp->qp_num) + " WQE 0"});
  // Flush the WRITE (QP to ERR) so tearing down reports nothing more.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &attr, IBV_QP_STATE), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(Hazards, MrDeregisteredAfterTheWriteCompletedIsNoHazard) {
  ASSERT_EQ(
      PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 4096)}, IBV_SEND_SIGNALED, 0, b_.addr(4096), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  const auto [rc, err] = StderrOf([&] { return ibv_dereg_mr(b_.mr); });
  EXPECT_EQ(rc, 0);
  b_.mr = nullptr;
  EXPECT_EQ(NewB(), 0u);
  EXPECT_EQ(err.find("hazard"), std::string::npos) << err;
}

// A WRITE the responder has placed whole is no longer at risk, though its ACK has not reached the
// requester: a duplicate would be acknowledged again, not executed again (IBTA 9.7.5.1.1).
// (A loses every ACK here, so its WRITE stays unacknowledged; B has taken the receive completion.)
TEST_F(Hazards, MrDeregisteredAfterTheWriteWasPlacedIsNoHazard) {
  ASSERT_EQ(hcasim_sim_drop_rx(Dev(a_), a_.qp->qp_num, kAny, 1000), 0);
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 0)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE_WITH_IMM, {a_.sge(0, 4096)}, IBV_SEND_SIGNALED, 5,
                     b_.addr(4096), b_.mr->rkey),
            0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  const auto [rc, err] = StderrOf([&] { return ibv_dereg_mr(b_.mr); });
  EXPECT_EQ(rc, 0);
  b_.mr = nullptr;
  EXPECT_EQ(NewB(), 0u);
  EXPECT_EQ(err.find("hazard"), std::string::npos) << err;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &attr, IBV_QP_STATE), 0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
}

}  // namespace
}  // namespace e2e
