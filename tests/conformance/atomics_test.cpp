// SPDX-License-Identifier: Apache-2.0
// Atomic operations: ibv_post_send(3) IBV_WR_ATOMIC_CMP_AND_SWP / IBV_WR_ATOMIC_FETCH_AND_ADD,
// IBTA vol.1 9.4.5 (8-byte, naturally aligned; the original value is returned) and o9-23
// (a misaligned address is an invalid request: NAK, IBV_WC_REM_INV_REQ_ERR).
// The remote word is read and written in the responder's host byte order and the original
// value lands in the requester's buffer in host order, as rxe does (docs/conformance.md).
#include "conformance.h"

namespace conformance {
namespace {

class Atomics : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    Options o;
    o.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    o.mr_access = e2e::kAllAccess | IBV_ACCESS_REMOTE_ATOMIC;
    ASSERT_NO_FATAL_FAILURE(Build(o));
    if (!device_has_atomics(a_.ctx)) GTEST_SKIP() << "device does not advertise atomics";
  }
  uint64_t& remote_word(size_t off) { return *reinterpret_cast<uint64_t*>(b_.buf + off); }
  uint64_t local_word(size_t off) { return *reinterpret_cast<uint64_t*>(a_.buf + off); }
};

TEST_F(Atomics, CompareAndSwapSwapsWhenEqualAndReturnsOriginal) {
  remote_word(64) = 0x1122334455667788ull;
  ASSERT_EQ(PostAtomic(a_, 7, IBV_WR_ATOMIC_CMP_AND_SWP, 0, b_.addr(64), b_.mr->rkey, 0x1122334455667788ull,
                       0xa5a5a5a5deadbeefull),
            0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{7, IBV_WC_COMP_SWAP, a_.qp->qp_num, 8}));
  EXPECT_EQ(local_word(0), 0x1122334455667788ull);
  EXPECT_EQ(remote_word(64), 0xa5a5a5a5deadbeefull);
}

TEST_F(Atomics, CompareAndSwapLeavesMemoryWhenDifferent) {
  remote_word(64) = 42;
  ASSERT_EQ(PostAtomic(a_, 8, IBV_WR_ATOMIC_CMP_AND_SWP, 0, b_.addr(64), b_.mr->rkey, 41, 99), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(local_word(0), 42u);
  EXPECT_EQ(remote_word(64), 42u);
}

TEST_F(Atomics, FetchAndAddAddsAndReturnsOriginal) {
  remote_word(128) = 1000;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(PostAtomic(a_, 10 + i, IBV_WR_ATOMIC_FETCH_AND_ADD, 8 * i, b_.addr(128), b_.mr->rkey, 7, 0), 0);
  }
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 5, wcs));
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(e2e::wc_is(wcs[i], WcExpect{uint64_t(10 + i), IBV_WC_FETCH_ADD, a_.qp->qp_num, 8}));
    EXPECT_EQ(local_word(8 * i), 1000u + 7u * i) << "fetch-add " << i << " returned the wrong original";
  }
  EXPECT_EQ(remote_word(128), 1035u);
}

// IBTA o9-23: the remote address of an atomic must be 8-byte aligned.
TEST_F(Atomics, MisalignedAddressIsRemoteInvalidRequest) {
  ASSERT_EQ(PostAtomic(a_, 9, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, b_.addr(68), b_.mr->rkey, 1, 0), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << e2e::describe(wc);
  EXPECT_EQ(wc.wr_id, 9u);
}

// IBTA 9.4.5: atomics need IBV_ACCESS_REMOTE_ATOMIC on the target MR.
TEST_F(Atomics, MrWithoutAtomicAccessIsRemoteAccessError) {
  ibv_mr* ro = ibv_reg_mr(b_.pd, b_.buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(ro, nullptr);
  ASSERT_EQ(PostAtomic(a_, 11, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, b_.addr(0), ro->rkey, 1, 0), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << e2e::describe(wc);
  EXPECT_EQ(ibv_dereg_mr(ro), 0);
}

// ibv_modify_qp(3) max_rd_atomic: at most that many READs/atomics outstanding; more are held
// back, not failed, so a long mixed burst still completes in order.
TEST_F(Atomics, ManyOutstandingReadsAndAtomicsCompleteInOrder) {
  remote_word(256) = 0;
  for (int i = 0; i < 12; ++i) {
    if (i % 2) {
      ASSERT_EQ(PostSend(a_, 100 + i, IBV_WR_RDMA_READ, {a_.sge(1024 + 64 * i, 64)}, IBV_SEND_SIGNALED, 0,
                         b_.addr(2048), b_.mr->rkey),
                0);
    } else {
      ASSERT_EQ(PostAtomic(a_, 100 + i, IBV_WR_ATOMIC_FETCH_AND_ADD, 8 * i, b_.addr(256), b_.mr->rkey, 1, 0),
                0);
    }
  }
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 12, wcs));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[i].wr_id, uint64_t(100 + i));
  }
  EXPECT_EQ(remote_word(256), 6u);
}

// A READ's first response is lost and the ATOMIC ACK behind it arrives first: the requester
// keeps the atomic's result but cannot complete it before the READ (completions are in order).
// After the local ACK timeout both go again; the responder answers the READ again and replays
// the atomic's saved result without executing it again (IBTA 9.7.5.2.3), and that replayed
// ATOMIC ACK completes the atomic. The requester used to drop the replay as a duplicate of a
// response it already had, so the atomic never completed and the QP failed with
// IBV_WC_RETRY_EXC_ERR (found by --faults).
TEST_F(Atomics, AtomicAnsweredBeforeALostReadResponseCompletesAfterTheReplay) {
  REQUIRE_SIM_FAULT_HOOKS();
  e2e::fill_pattern(b_.buf + 4096, 2048, 21);
  remote_word(512) = 5;
  ASSERT_EQ(drop_rx_hook()(Dev(a_), a_.qp->qp_num, a_.sq_psn, 1), 0);  // READ_RESPONSE_FIRST
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_RDMA_READ, {a_.sge(4096, 2048)}, IBV_SEND_SIGNALED, 0, b_.addr(4096),
                     b_.mr->rkey),
            0);
  ASSERT_EQ(PostAtomic(a_, 2, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, b_.addr(512), b_.mr->rkey, 3, 0), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(a_.scq, 2, wcs, 30));
  EXPECT_TRUE(e2e::wc_is(wcs[0], WcExpect{1, IBV_WC_RDMA_READ, a_.qp->qp_num, 2048}));
  EXPECT_TRUE(e2e::wc_is(wcs[1], WcExpect{2, IBV_WC_FETCH_ADD, a_.qp->qp_num, 8}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf + 4096, b_.buf + 4096, 2048));
  EXPECT_EQ(local_word(0), 5u);
  EXPECT_EQ(remote_word(512), 8u) << "the FETCH_ADD was executed more or less than once";
}

}  // namespace
}  // namespace conformance
