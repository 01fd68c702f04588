// SPDX-License-Identifier: Apache-2.0
// How simulated time moves while a program polls (lockstep clock, docs/architecture.md): an
// empty ibv_poll_cq lets the device run on until something becomes visible, because on
// hardware an idle program's polls cost nanoseconds each. A program that polls several CQs in
// turn must still see a completion in one before time moves again on its poll of the next:
// on hardware that poll costs nanoseconds too. Skipped on real devices.
#include <hcasim/sim_control.h>

#include "verbs_fixture.h"

namespace e2e {
namespace {

class PollTime : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    if (!hcasim_sim_present()) GTEST_SKIP() << "not the simulator";
    Options o;
    o.separate_cqs = true;
    o.rnr_retry = 7;  // retried for ever: nothing visible happens until a receive is posted
    ASSERT_NO_FATAL_FAILURE(Build(o));
    // B's SEND finds no receive at A: the device keeps retrying it, showing software nothing,
    // so an empty poll of A's receive CQ lets time run on (a retry interval, or a wait quantum).
    ASSERT_EQ(PostSend(b_, 7, IBV_WR_SEND, {b_.sge(0, 64)}), 0);
  }
  void TearDown() override {
    if (a_.qp && b_.qp) {  // let B's SEND land, so nothing is in flight at the destroy
      EXPECT_EQ(PostRecv(a_, 9, {a_.sge(4096, 64)}), 0);
      ibv_wc wc;
      EXPECT_TRUE(PollOne(a_.rcq, wc));
      EXPECT_TRUE(wc_is(wc, {9, IBV_WC_RECV, a_.qp->qp_num, 64}));
      EXPECT_TRUE(PollOne(b_.scq, wc));
      EXPECT_TRUE(wc_is(wc, {7, IBV_WC_SEND, b_.qp->qp_num}));
    }
    VerbsFixture::TearDown();
  }
  /** One poll of the empty @p cq: whether simulated time moved during it. */
  static bool PollMovesTime(ibv_cq* cq) {
    const uint64_t t0 = hcasim_sim_now_ns();
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0) << describe(wc);
    return hcasim_sim_now_ns() != t0;
  }
};

// Poll the send CQ, then the receive CQ, in a loop (as a progress engine over several queues
// does): once the WRITE's completion is found, the poll of the other, empty CQ in the same
// round does not move time; the program acts at the instant it found it.
TEST_F(PollTime, AnotherCqPolledAfterACompletionDoesNotMoveTime) {
  ASSERT_EQ(
      PostSend(a_, 1, IBV_WR_RDMA_WRITE, {a_.sge(0, 4096)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  bool found = false;
  for (int round = 0; round < 100000 && !found; ++round) {
    ibv_wc wc;
    const int s = ibv_poll_cq(a_.scq, 1, &wc);
    ASSERT_GE(s, 0);
    const uint64_t t = hcasim_sim_now_ns();
    ibv_wc other;
    ASSERT_EQ(ibv_poll_cq(a_.rcq, 1, &other), 0) << describe(other);
    if (s == 0) continue;
    found = true;
    EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
    EXPECT_EQ(hcasim_sim_now_ns(), t)
        << "simulated time moved on the poll of the empty CQ after the completion";
  }
  ASSERT_TRUE(found) << "the WRITE never completed";
}

// The first look at an empty CQ after the device showed something is free; looking again
// lets the device run: a program that only polls still gets its time.
TEST_F(PollTime, AnEmptyCqPolledAgainLetsTimeMove) {
  EXPECT_FALSE(PollMovesTime(a_.rcq)) << "the first look at the CQ moved time";
  EXPECT_TRUE(PollMovesTime(a_.rcq)) << "a second empty poll of the same CQ did not move time";
  // And every further one.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(PollMovesTime(a_.rcq)) << "empty poll " << i + 3;
  // (TearDown: the SEND, retried meanwhile, lands once a receive is there.)
}

}  // namespace
}  // namespace e2e
