// SPDX-License-Identifier: Apache-2.0
// Extended verbs: ibv_create_qp_ex(3) and the ibv_wr_* API (ibv_wr_post(3)), ibv_create_cq_ex(3)
// with its start/next/end_poll iterator, ibv_query_device_ex(3), ibv_alloc_td(3) and
// ibv_alloc_parent_domain(3), ibv_resize_cq(3), ibv_rereg_mr(3), ibv_advise_mr(3) and
// ibv_query_qp(3) on an extended QP. A feature the device refuses with EOPNOTSUPP makes the
// test SKIP (rxe has no thread/parent domains, CQE timestamps or ibv_rereg_mr).
#include <unistd.h>

#include "conformance.h"

namespace conformance {
namespace {

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ;
constexpr uint64_t kAtomicOps = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
constexpr uint64_t kWcFlags = IBV_WC_STANDARD_FLAGS;

class ExtendedVerbs : public VerbsFixture {
 protected:
  /** ibv_qp_init_attr_ex for an RC QP on @p h's CQs with the fixture's capabilities. */
  ibv_qp_init_attr_ex QpAttrEx(Host& h, ibv_pd* pd, uint64_t send_ops) const {
    ibv_qp_init_attr_ex a{};
    a.send_cq = h.scq;
    a.recv_cq = h.rcq;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = opts_.sq_sig_all ? 1 : 0;
    a.cap.max_send_wr = opts_.max_send_wr;
    a.cap.max_recv_wr = opts_.max_recv_wr;
    a.cap.max_send_sge = opts_.max_send_sge;
    a.cap.max_recv_sge = opts_.max_recv_sge;
    a.cap.max_inline_data = opts_.max_inline_data;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | (send_ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
    a.pd = pd;
    a.send_ops_flags = send_ops;
    return a;
  }

  /** Replace @p h's CQ by an extended one with @p wc_flags (SKIP if the device refuses them). */
  void UseCqEx(Host& h, uint64_t wc_flags) {
    ASSERT_EQ(ibv_destroy_cq(h.scq), 0);
    h.scq = h.rcq = nullptr;
    ibv_cq_init_attr_ex ca{};
    ca.cqe = opts_.cqe;
    ca.channel = h.channel;
    ca.wc_flags = wc_flags;
    cqx_[&h == &a_ ? 0 : 1] = ibv_create_cq_ex(h.ctx, &ca);
    ibv_cq_ex* cqx = cqx_[&h == &a_ ? 0 : 1];
    if (!cqx && errno == EOPNOTSUPP) GTEST_SKIP() << "ibv_create_cq_ex: wc_flags 0x" << std::hex << wc_flags;
    ASSERT_NE(cqx, nullptr) << "ibv_create_cq_ex: " << strerror(errno);
    h.scq = h.rcq = ibv_cq_ex_to_cq(cqx);
  }

  /**
   * Both hosts with RC QPs made by ibv_create_qp_ex with @p send_ops (and, with @p wc_flags,
   * extended CQs), connected. qpx_[0]/[1] are their ibv_qp_ex.
   */
  void BuildEx(uint64_t send_ops, Options o = Options(), uint64_t wc_flags = 0) {
    o.connect = false;
    o.separate_cqs = false;
    ASSERT_NO_FATAL_FAILURE(Build(o));
    Host* hs[2] = {&a_, &b_};
    for (int i = 0; i < 2; ++i) {
      Host& h = *hs[i];
      ASSERT_EQ(ibv_destroy_qp(h.qp), 0);
      h.qp = nullptr;
      if (wc_flags) {
        ASSERT_NO_FATAL_FAILURE(UseCqEx(h, wc_flags));
        if (IsSkipped()) return;
      }
      ibv_qp_init_attr_ex a = QpAttrEx(h, h.pd, send_ops);
      h.qp = ibv_create_qp_ex(h.ctx, &a);
      ASSERT_NE(h.qp, nullptr) << "ibv_create_qp_ex: " << strerror(errno);
      h.cap = a.cap;
      qpx_[i] = ibv_qp_to_qp_ex(h.qp);
      ASSERT_NE(qpx_[i], nullptr) << "ibv_qp_to_qp_ex: " << strerror(errno);
    }
    ASSERT_NO_FATAL_FAILURE(Connect());
  }

  /** Lets the device run (empty polls of a CQ nothing arrives on, plus wall time for rxe). */
  void LetDeviceRun(ibv_cq* idle_cq) {
    EXPECT_TRUE(NoCompletion(idle_cq, 3000));
    usleep(50 * 1000);
  }

  ibv_qp_ex* qpx_[2] = {nullptr, nullptr};
  ibv_cq_ex* cqx_[2] = {nullptr, nullptr};
};

// ibv_create_qp_ex(3) NOTES, ibv_wr_post(3) USAGE: with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS the QP
// has an ibv_qp_ex (its qp_base is the QP); a QP made by ibv_create_qp has none.
TEST_F(ExtendedVerbs, QpToQpExGivesTheQpOnlyWithSendOpsFlags) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_EQ(ibv_qp_to_qp_ex(a_.qp), nullptr) << "a QP made by ibv_create_qp has no ibv_wr_* API";
  ibv_qp_init_attr_ex a = QpAttrEx(a_, a_.pd, IBV_QP_EX_WITH_SEND);
  ibv_qp* qp = ibv_create_qp_ex(a_.ctx, &a);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  EXPECT_GE(a.cap.max_send_wr, opts_.max_send_wr) << "cap is updated to what was created";
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(qpx, nullptr);
  EXPECT_EQ(&qpx->qp_base, qp);
  EXPECT_NE(qpx->wr_send, nullptr);
  EXPECT_NE(qpx->wr_start, nullptr);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// ibv_wr_post(3) USAGE: "If the QP does not support all the requested work request types then
// QP creation will fail" (TSO is for UD/raw packet QPs); unsupported create flags fail too.
TEST_F(ExtendedVerbs, CreateQpExRejectsUnsupportedSendOpsAndCreateFlags) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_qp_init_attr_ex a = QpAttrEx(a_, a_.pd, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO);
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(a_.ctx, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  a = QpAttrEx(a_, a_.pd, IBV_QP_EX_WITH_SEND);
  a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
  a.create_flags = IBV_QP_CREATE_SCATTER_FCS;  // an Ethernet raw-packet feature
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(a_.ctx, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// ibv_wr_post(3) Message Send, DATA setters: SEND gathers an SGE list in order, SEND_WITH_IMM
// carries its immediate; the receiver gets the bytes.
TEST_F(ExtendedVerbs, WrSendAndSendImmDeliverTheirBytes) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps));
  e2e::fill_pattern(a_.buf, 8192, 11);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 4096)}), 0);
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(4096, 4096)}), 0);
  ibv_qp_ex* x = qpx_[0];
  const ibv_sge list[3] = {a_.sge(0, 100), a_.sge(1000, 200), a_.sge(3000, 300)};
  ibv_wr_start(x);
  x->wr_id = 10;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(x);
  ibv_wr_set_sge_list(x, 3, list);
  x->wr_id = 11;
  ibv_wr_send_imm(x, htonl(0x12345678));
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(5000), 777);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(b_.rcq, 2, w));
  EXPECT_TRUE(e2e::wc_is(w[0], WcExpect{1, IBV_WC_RECV, b_.qp->qp_num, 600}));
  EXPECT_TRUE(e2e::wc_is(w[1], WcExpect{2, IBV_WC_RECV, b_.qp->qp_num, 777, true, 0x12345678}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 100, "SGE 0"));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 100, a_.buf + 1000, 200, "SGE 1"));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 300, a_.buf + 3000, 300, "SGE 2"));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 4096, a_.buf + 5000, 777, "SEND_WITH_IMM"));
  std::vector<ibv_wc> s;
  ASSERT_TRUE(PollCq(a_.scq, 2, s));
  EXPECT_TRUE(e2e::wc_is(s[0], WcExpect{10, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(e2e::wc_is(s[1], WcExpect{11, IBV_WC_SEND, a_.qp->qp_num}));
}

// ibv_wr_post(3) RDMA: WRITE places the bytes; WRITE_WITH_IMM also consumes a receive that
// reports IBV_WC_RECV_RDMA_WITH_IMM with the immediate.
TEST_F(ExtendedVerbs, WrRdmaWriteAndWriteImmPlaceTheirBytes) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps));
  const uint32_t len = 3 * e2e::mtu_bytes(opts_.mtu) + 17;
  e2e::fill_pattern(a_.buf, 2 * len, 12);
  ASSERT_EQ(PostRecv(b_, 3, {}), 0);
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 20;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(8192));
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), len);
  x->wr_id = 21;
  ibv_wr_rdma_write_imm(x, b_.mr->rkey, b_.addr(65536), htonl(0xabcdef01));
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(len), len);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{3, IBV_WC_RECV_RDMA_WITH_IMM, b_.qp->qp_num, len, true, 0xabcdef01}));
  std::vector<ibv_wc> s;
  ASSERT_TRUE(PollCq(a_.scq, 2, s));
  EXPECT_TRUE(e2e::wc_is(s[0], WcExpect{20, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(e2e::wc_is(s[1], WcExpect{21, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 8192, a_.buf, len, "WRITE"));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 65536, a_.buf + len, len, "WRITE_WITH_IMM"));
}

// ibv_wr_post(3) RDMA: READ brings the remote bytes into the DATA buffers (here an SGE list).
TEST_F(ExtendedVerbs, WrRdmaReadFetchesIntoTheSgeList) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps));
  e2e::fill_pattern(b_.buf + 16384, 5000, 13);
  ibv_qp_ex* x = qpx_[0];
  const ibv_sge list[2] = {a_.sge(0, 3000), a_.sge(10000, 2000)};
  ibv_wr_start(x);
  x->wr_id = 30;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_read(x, b_.mr->rkey, b_.addr(16384));
  ibv_wr_set_sge_list(x, 2, list);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{30, IBV_WC_RDMA_READ, a_.qp->qp_num, 5000}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf, b_.buf + 16384, 3000, "first SGE"));
  EXPECT_TRUE(e2e::same_bytes(a_.buf + 10000, b_.buf + 19384, 2000, "second SGE"));
}

// ibv_wr_post(3) Atomic operations: CMP_AND_SWP swaps when equal; FETCH_AND_ADD adds; both
// return the original value into the 8-byte DATA buffer.
TEST_F(ExtendedVerbs, WrAtomicsCompareSwapAndFetchAdd) {
  ibv_context* probe = ibv_open_device(device(0));
  ASSERT_NE(probe, nullptr);
  const bool atomics = device_has_atomics(probe);
  ASSERT_EQ(ibv_close_device(probe), 0);
  if (!atomics) GTEST_SKIP() << "device has no atomics";
  Options o;
  o.qp_access |= IBV_ACCESS_REMOTE_ATOMIC;
  o.mr_access |= IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps | kAtomicOps, o));
  uint64_t v = 1000;
  memcpy(b_.buf + 64, &v, 8);
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 40;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_cmp_swp(x, b_.mr->rkey, b_.addr(64), 1000, 2000);
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 8);
  x->wr_id = 41;
  ibv_wr_atomic_fetch_add(x, b_.mr->rkey, b_.addr(64), 5);
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(8), 8);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  std::vector<ibv_wc> s;
  ASSERT_TRUE(PollCq(a_.scq, 2, s));
  EXPECT_TRUE(e2e::wc_is(s[0], WcExpect{40, IBV_WC_COMP_SWAP, a_.qp->qp_num, 8}));
  EXPECT_TRUE(e2e::wc_is(s[1], WcExpect{41, IBV_WC_FETCH_ADD, a_.qp->qp_num, 8}));
  uint64_t orig_cas, orig_fa, now;
  memcpy(&orig_cas, a_.buf, 8);
  memcpy(&orig_fa, a_.buf + 8, 8);
  memcpy(&now, b_.buf + 64, 8);
  EXPECT_EQ(orig_cas, 1000u);
  EXPECT_EQ(orig_fa, 2000u);
  EXPECT_EQ(now, 2005u);
}

// ibv_wr_post(3) DATA setters: inline data is copied during the setter ("allows the caller to
// immediately re-use the buffer"); the list form concatenates its buffers.
TEST_F(ExtendedVerbs, WrInlineDataIsCopiedAtTheSetter) {
  Options o;
  o.max_inline_data = 128;
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, o));
  uint8_t one[100], two[3][20];
  e2e::fill_pattern(one, sizeof one, 14);
  for (int i = 0; i < 3; ++i) e2e::fill_pattern(two[i], 20, 15 + i);
  uint8_t want[160];
  memcpy(want, one, 100);
  for (int i = 0; i < 3; ++i) memcpy(want + 100 + 20 * i, two[i], 20);
  ASSERT_EQ(PostRecv(b_, 4, {b_.sge(0, 256)}), 0);
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 50;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, one, sizeof one);
  x->wr_id = 51;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(1024));
  const ibv_data_buf bufs[3] = {{two[0], 20}, {two[1], 20}, {two[2], 20}};
  ibv_wr_set_inline_data_list(x, 3, bufs);
  memset(one, 0, sizeof one);  // the setters copied: these must not be what arrives
  memset(two, 0, sizeof two);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{4, IBV_WC_RECV, b_.qp->qp_num, 100}));
  std::vector<ibv_wc> s;
  ASSERT_TRUE(PollCq(a_.scq, 2, s));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, want, 100, "inline SEND"));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 1024, want + 100, 60, "inline WRITE from a list"));
}

// ibv_wr_post(3) USAGE: each builder takes wr_id and wr_flags as they are when it is called;
// an unsignaled WR that succeeds completes silently (ibv_post_send(3)).
TEST_F(ExtendedVerbs, WrIdAndWrFlagsAreTakenAtEachBuilder) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps));
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 60;
  x->wr_flags = 0;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(0));
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 64);
  x->wr_id = 61;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(64));
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(64), 64);
  x->wr_id = 99;  // after the builder: must not change the WR
  x->wr_flags = 0;
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{61, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(NoCompletion(a_.scq, 200)) << "the unsignaled WR completed";
}

// ibv_wr_post(3): "ibv_wr_abort() will discard all work prepared since ibv_wr_start()"; the QP
// then takes the next batch.
TEST_F(ExtendedVerbs, WrAbortPostsNothing) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps));
  memset(a_.buf, 0x5a, 256);
  memset(b_.buf, 0xee, 256);
  ASSERT_EQ(PostRecv(b_, 5, {b_.sge(1024, 256)}), 0);
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 70;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(0));
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 256);
  ibv_wr_send(x);
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 16);
  ibv_wr_abort(x);
  EXPECT_TRUE(NoCompletion(a_.scq, 500));
  EXPECT_TRUE(NoCompletion(b_.rcq, 500));
  EXPECT_TRUE(e2e::all_bytes(b_.buf, 256, 0xee, "aborted WRITE target"));
  ibv_wr_start(x);
  x->wr_id = 71;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 16);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{5, IBV_WC_RECV, b_.qp->qp_num, 16}));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.wr_id, 71u);
}

// ibv_wr_post(3) RETURN VALUE: "If a failure is detected during operation, for instance due to
// an invalid argument, then ibv_wr_complete() will return failure and the entire posting will
// be aborted": a WR with more SGEs than max_send_sge fails the batch, the good WR before it
// included.
TEST_F(ExtendedVerbs, WrErrorInOneWrFailsTheWholeBatch) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps));
  ASSERT_EQ(PostRecv(b_, 6, {b_.sge(0, 256)}), 0);
  std::vector<ibv_sge> too_many(a_.cap.max_send_sge + 1, a_.sge(0, 8));
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 80;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 16);
  x->wr_id = 81;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(0));
  ibv_wr_set_sge_list(x, too_many.size(), too_many.data());
  EXPECT_NE(ibv_wr_complete(x), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 500)) << "part of a failed batch was posted";
  EXPECT_TRUE(NoCompletion(b_.rcq, 500)) << "the SEND of a failed batch arrived";
}

// ibv_wr_post(3) DATA setters: inline data is limited to max_inline_data; above it the batch
// fails at ibv_wr_complete and nothing is posted.
TEST_F(ExtendedVerbs, WrInlineAboveMaxInlineDataFailsTheBatch) {
  Options o;
  o.max_inline_data = 64;
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, o));
  std::vector<uint8_t> big(a_.cap.max_inline_data + 1, 0x42);
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_id = 90;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(0));
  ibv_wr_set_inline_data(x, big.data(), big.size());
  EXPECT_NE(ibv_wr_complete(x), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 500));
  EXPECT_TRUE(e2e::all_bytes(b_.buf, big.size(), 0, "WRITE target"));
}

// ibv_create_cq_ex(3) start_poll: "When no completions are available on the CQ, ENOENT is
// returned, but the CQ remains in a valid state".
TEST_F(ExtendedVerbs, CqExStartPollOnEmptyCqIsEnoent) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, Options(), kWcFlags));
  if (IsSkipped()) return;
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cqx_[0], &pa), ENOENT);
  EXPECT_EQ(ibv_start_poll(cqx_[0], &pa), ENOENT) << "the CQ must stay usable after ENOENT";
}

/** Start a poll batch, retrying ENOENT until a completion is there (bounded). */
int StartPollWaiting(ibv_cq_ex* cq) {
  ibv_poll_cq_attr pa{};
  for (int i = 0; i < 200000; ++i) {
    const int rc = ibv_start_poll(cq, &pa);
    if (rc != ENOENT) return rc;
  }
  return ENOENT;
}

/** Every ibv_wc_read_* getter of the current completion against a classic ibv_wc. */
void ExpectGettersMatch(ibv_cq_ex* cq, const ibv_wc& want, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(cq->status, want.status);
  EXPECT_EQ(ibv_wc_read_opcode(cq), want.opcode);
  EXPECT_EQ(ibv_wc_read_vendor_err(cq), want.vendor_err);
  EXPECT_EQ(ibv_wc_read_byte_len(cq), want.byte_len);
  EXPECT_EQ(ibv_wc_read_qp_num(cq), want.qp_num);
  EXPECT_EQ(ibv_wc_read_src_qp(cq), want.src_qp);
  EXPECT_EQ(ibv_wc_read_wc_flags(cq), unsigned(want.wc_flags));
  if (want.wc_flags & IBV_WC_WITH_IMM) {
    EXPECT_EQ(ibv_wc_read_imm_data(cq), want.imm_data);
  }
  EXPECT_EQ(ibv_wc_read_slid(cq), want.slid);
  EXPECT_EQ(ibv_wc_read_sl(cq), want.sl);
  EXPECT_EQ(ibv_wc_read_dlid_path_bits(cq), want.dlid_path_bits);
}

// ibv_create_cq_ex(3) "Polling fields in the completion": wr_id, status and every getter give
// what ibv_poll_cq gives. Each operation is done twice; the first completion is polled the
// classic way through ibv_cq_ex_to_cq, its twin with start_poll, and the two must agree
// field by field (wr_id aside), besides matching the values the operation must produce.
TEST_F(ExtendedVerbs, CqExGettersMatchTheClassicWorkCompletion) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, Options(), kWcFlags));
  if (IsSkipped()) return;
  ibv_qp_ex* x = qpx_[0];
  for (int i = 0; i < 2; ++i) ASSERT_EQ(PostRecv(b_, 100 + i, {b_.sge(0, 4096)}), 0);
  ibv_wr_start(x);
  x->wr_flags = IBV_SEND_SIGNALED;
  for (int i = 0; i < 2; ++i) {
    x->wr_id = 200 + i;
    ibv_wr_rdma_write_imm(x, b_.mr->rkey, b_.addr(8192), htonl(0x0badcafe));
    ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(0), 1500);
  }
  ASSERT_EQ(ibv_wr_complete(x), 0);
  struct Side {
    Host& h;
    ibv_cq_ex* cq;
    uint64_t first_id;
    ibv_wc_opcode op;
  } sides[2] = {{b_, cqx_[1], 100, IBV_WC_RECV_RDMA_WITH_IMM}, {a_, cqx_[0], 200, IBV_WC_RDMA_WRITE}};
  for (Side& s : sides) {
    ibv_wc classic;
    ASSERT_TRUE(PollOne(ibv_cq_ex_to_cq(s.cq), classic));
    EXPECT_EQ(classic.wr_id, s.first_id);
    EXPECT_EQ(classic.opcode, s.op);
    EXPECT_EQ(classic.qp_num, s.h.qp->qp_num);
    ASSERT_EQ(StartPollWaiting(s.cq), 0);
    EXPECT_EQ(s.cq->wr_id, s.first_id + 1);
    ExpectGettersMatch(s.cq, classic, s.op == IBV_WC_RDMA_WRITE ? "requester" : "responder");
    if (s.op != IBV_WC_RDMA_WRITE) {
      EXPECT_EQ(ibv_wc_read_byte_len(s.cq), 1500u);
      EXPECT_EQ(ntohl(ibv_wc_read_imm_data(s.cq)), 0x0badcafeu);
      EXPECT_TRUE(ibv_wc_read_wc_flags(s.cq) & IBV_WC_WITH_IMM);
    }
    ibv_end_poll(s.cq);
  }
}

// ibv_create_cq_ex(3) next_poll: walks the completions of one batch in order, then ENOENT
// (end_poll is still called); a new batch starts with start_poll.
TEST_F(ExtendedVerbs, CqExNextPollWalksTheBatchInOrderThenEnoent) {
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, Options(), kWcFlags));
  if (IsSkipped()) return;
  ibv_qp_ex* x = qpx_[0];
  ibv_wr_start(x);
  x->wr_flags = IBV_SEND_SIGNALED;
  for (int i = 0; i < 5; ++i) {
    x->wr_id = 300 + i;
    ibv_wr_rdma_write(x, b_.mr->rkey, b_.addr(64 * i));
    ibv_wr_set_sge(x, a_.mr->lkey, a_.addr(64 * i), 64);
  }
  ASSERT_EQ(ibv_wr_complete(x), 0);
  LetDeviceRun(b_.rcq);  // all five CQEs land
  ASSERT_EQ(StartPollWaiting(cqx_[0]), 0);
  std::vector<uint64_t> ids{cqx_[0]->wr_id};
  int rc;
  while ((rc = ibv_next_poll(cqx_[0])) == 0) {
    EXPECT_EQ(cqx_[0]->status, IBV_WC_SUCCESS);
    EXPECT_EQ(ibv_wc_read_opcode(cqx_[0]), IBV_WC_RDMA_WRITE);
    ids.push_back(cqx_[0]->wr_id);
  }
  EXPECT_EQ(rc, ENOENT);
  ibv_end_poll(cqx_[0]);
  EXPECT_EQ(ids, (std::vector<uint64_t>{300, 301, 302, 303, 304}));
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cqx_[0], &pa), ENOENT);
}

// ibv_create_cq_ex(3) ibv_wc_read_completion_ts ("in HCA clock units") with
// ibv_query_device_ex(3) hca_core_clock (kHz): timestamps never go back, and a 1 MiB WRITE
// takes a plausible time in them (at least its wire time at 400 Gb/s, at most 10 ms).
TEST_F(ExtendedVerbs, CqExCompletionTimestampsAreNonDecreasingHcaClockTicks) {
  Options o;
  o.buf_size = 2 << 20;
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, o, kWcFlags | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP));
  if (IsSkipped()) return;
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(a_.ctx, nullptr, &dx), 0);
  ASSERT_GT(dx.hca_core_clock, 0u) << "timestamps offered without a clock rate";
  ASSERT_NE(dx.completion_timestamp_mask, 0u);
  const uint32_t sizes[4] = {64, 4096, 1 << 20, 64};
  uint64_t ts[4];
  for (int i = 0; i < 4; ++i) {
    ibv_wr_start(qpx_[0]);
    qpx_[0]->wr_id = 400 + i;
    qpx_[0]->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx_[0], b_.mr->rkey, b_.addr(0));
    ibv_wr_set_sge(qpx_[0], a_.mr->lkey, a_.addr(0), sizes[i]);
    ASSERT_EQ(ibv_wr_complete(qpx_[0]), 0);
    ASSERT_EQ(StartPollWaiting(cqx_[0]), 0);
    EXPECT_EQ(cqx_[0]->wr_id, uint64_t(400 + i));
    ts[i] = ibv_wc_read_completion_ts(cqx_[0]) & dx.completion_timestamp_mask;
    ibv_end_poll(cqx_[0]);
    if (i) {
      EXPECT_GE(ts[i], ts[i - 1]) << "completion " << i << " is earlier than the one before";
    }
  }
  const double ns = double(ts[2] - ts[1]) * 1e6 / double(dx.hca_core_clock);
  EXPECT_GE(ns, (1 << 20) * 8.0 / 400.0) << "1 MiB in less than its wire time at 400 Gb/s";
  EXPECT_LE(ns, 10e6) << "1 MiB WRITE took more than 10 ms: not ns ticks?";
}

// ibv_create_cq_ex(3) wc_flags: a field the device cannot report (flow tag needs flow
// steering) makes creation fail rather than return garbage (EOPNOTSUPP, as mlx5 and rxe).
TEST_F(ExtendedVerbs, CreateCqExRejectsWcFlagsItCannotReport) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_FLOW_TAG;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(a_.ctx, &ca), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// ibv_query_device_ex(3): orig_attr is what ibv_query_device returns; no ODP on any transport
// (every MR is pinned) unless advertised; a clock rate goes with a timestamp mask; an input
// comp_mask nobody defined is EINVAL.
TEST_F(ExtendedVerbs, QueryDeviceExExtendsQueryDevice) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_device_attr classic{};
  ASSERT_EQ(ibv_query_device(a_.ctx, &classic), 0);
  ibv_device_attr_ex dx;
  memset(&dx, 0xa5, sizeof dx);
  ASSERT_EQ(ibv_query_device_ex(a_.ctx, nullptr, &dx), 0);
  EXPECT_EQ(memcmp(&dx.orig_attr, &classic, sizeof classic), 0) << "orig_attr differs from ibv_query_device";
  if (!(dx.odp_caps.general_caps & IBV_ODP_SUPPORT)) {
    EXPECT_EQ(dx.odp_caps.per_transport_caps.rc_odp_caps, 0u);
    EXPECT_EQ(dx.odp_caps.per_transport_caps.uc_odp_caps, 0u);
    EXPECT_EQ(dx.odp_caps.per_transport_caps.ud_odp_caps, 0u);
  }
  EXPECT_EQ(dx.completion_timestamp_mask != 0, dx.hca_core_clock != 0);
  EXPECT_EQ(uint32_t(dx.device_cap_flags_ex), uint32_t(classic.device_cap_flags))
      << "the low 32 bits of device_cap_flags_ex are device_cap_flags";
  ibv_query_device_ex_input in{};
  in.comp_mask = 1;
  EXPECT_EQ(ibv_query_device_ex(a_.ctx, &in, &dx), EINVAL);
}

// ibv_alloc_parent_domain(3): "A parent domain is completely interchangeable with the struct
// ibv_pd used to create it": MRs and QPs made on it, and a CQ given it, work with MRs of its
// PD; the PD and the thread domain cannot go while it uses them (ibv_dealloc_pd(3) EBUSY).
TEST_F(ExtendedVerbs, ParentDomainWorksAsItsProtectionDomain) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_td_init_attr ta{};
  ibv_td* td = ibv_alloc_td(a_.ctx, &ta);
  if (!td && errno == EOPNOTSUPP) GTEST_SKIP() << "no thread domains";
  ASSERT_NE(td, nullptr) << strerror(errno);
  ibv_parent_domain_init_attr pa{};
  pa.pd = a_.pd;
  pa.td = td;
  ibv_pd* domain = ibv_alloc_parent_domain(a_.ctx, &pa);
  if (!domain && errno == EOPNOTSUPP) GTEST_SKIP() << "no parent domains";
  ASSERT_NE(domain, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dealloc_pd(a_.pd), EBUSY) << "the PD under a parent domain was freed";
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY) << "the TD of a parent domain was freed";
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  ca.parent_domain = domain;
  ibv_cq_ex* cq = ibv_create_cq_ex(a_.ctx, &ca);
  ASSERT_NE(cq, nullptr) << strerror(errno);
  ibv_mr* mr = ibv_reg_mr(domain, a_.buf + 65536, 4096, int(e2e::kAllAccess));
  ASSERT_NE(mr, nullptr) << strerror(errno);
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(cq);
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {8, 8, 2, 2, 0};
  a_.qp = ibv_create_qp(domain, &ia);
  ASSERT_NE(a_.qp, nullptr) << strerror(errno);
  ASSERT_NO_FATAL_FAILURE(Connect());
  e2e::fill_pattern(a_.buf, 64, 16);
  e2e::fill_pattern(a_.buf + 65536, 64, 17);
  // One SGE from the plain PD's MR, one from the parent domain's.
  ASSERT_EQ(PostRecv(b_, 7, {b_.sge(0, 256)}), 0);
  ASSERT_EQ(PostSend(a_, 8, IBV_WR_SEND, {a_.sge(0, 64), ibv_sge{a_.addr(65536), 64, mr->lkey}}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{7, IBV_WC_RECV, b_.qp->qp_num, 128}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 64, "plain PD's MR"));
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 64, a_.buf + 65536, 64, "parent domain's MR"));
  ASSERT_TRUE(PollOne(ibv_cq_ex_to_cq(cq), wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{8, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_EQ(ibv_dealloc_pd(domain), EBUSY) << "a parent domain in use was freed";
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = nullptr;
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  EXPECT_EQ(ibv_dealloc_pd(domain), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
}

// ibv_resize_cq(3): the CQ gets at least cqe entries and cq->cqe says how many; completions not
// yet polled survive (here across a ring wrap); cqe below the unpolled count fails.
TEST_F(ExtendedVerbs, ResizeCqKeepsUnpolledCompletions) {
  Options o;
  o.cqe = 15;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const int first = a_.scq->cqe;
  auto post_writes = [&](uint64_t id0, int n) {
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(PostSend(a_, id0 + i, IBV_WR_RDMA_WRITE, {a_.sge(0, 32)}, IBV_SEND_SIGNALED, 0, b_.addr(0),
                         b_.mr->rkey),
                0);
  };
  std::vector<ibv_wc> w;
  ASSERT_NO_FATAL_FAILURE(post_writes(500, 12));
  ASSERT_TRUE(PollCq(a_.scq, 12, w));  // the consumer index is now near the end of the ring
  ASSERT_NO_FATAL_FAILURE(post_writes(600, 10));
  LetDeviceRun(b_.rcq);  // the ten CQEs land, wrapping the ring
  EXPECT_NE(ibv_resize_cq(a_.scq, 4), 0) << "resized below the ten unpolled completions";
  ASSERT_EQ(ibv_resize_cq(a_.scq, 100), 0) << strerror(errno);
  EXPECT_GE(a_.scq->cqe, 100);
  EXPECT_NE(a_.scq->cqe, first);
  w.clear();
  ASSERT_TRUE(PollCq(a_.scq, 10, w));
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(e2e::wc_is(w[i], WcExpect{uint64_t(600 + i), IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(NoCompletion(a_.scq, 200));
  w.clear();
  ASSERT_NO_FATAL_FAILURE(post_writes(700, 30));  // more than the old ring held
  LetDeviceRun(b_.rcq);
  ASSERT_TRUE(PollCq(a_.scq, 30, w));
  EXPECT_EQ(w.back().wr_id, 729u);
}

// ibv_rereg_mr(3): IBV_REREG_MR_CHANGE_ACCESS | CHANGE_TRANSLATION give the MR new rights over
// a new range (its keys may change); the peer can then write there with the MR's rkey.
TEST_F(ExtendedVerbs, RereggedMrChangesAccessAndAddress) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_mr* mr = ibv_reg_mr(a_.pd, a_.buf + 65536, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  errno = 0;
  const int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_TRANSLATION, nullptr,
                              a_.buf + 131072, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (rc != 0 && errno == EOPNOTSUPP) {
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    GTEST_SKIP() << "no ibv_rereg_mr";
  }
  ASSERT_EQ(rc, 0) << strerror(errno);
  EXPECT_EQ(mr->addr, a_.buf + 131072);
  EXPECT_EQ(mr->length, 8192u);
  EXPECT_EQ(mr->pd, a_.pd);
  e2e::fill_pattern(b_.buf, 8192, 18);
  ASSERT_EQ(
      PostSend(b_, 9, IBV_WR_RDMA_WRITE, {b_.sge(0, 8192)}, IBV_SEND_SIGNALED, 0, a_.addr(131072), mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{9, IBV_WC_RDMA_WRITE, b_.qp->qp_num}));
  EXPECT_TRUE(e2e::same_bytes(a_.buf + 131072, b_.buf, 8192));
  // The old range is no longer covered: a WRITE there is a remote access error.
  ASSERT_EQ(
      PostSend(b_, 10, IBV_WR_RDMA_WRITE, {b_.sge(0, 64)}, IBV_SEND_SIGNALED, 0, a_.addr(65536), mr->rkey),
      0);
  ASSERT_TRUE(PollOne(b_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << e2e::describe(wc);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ibv_rereg_mr(3) RETURN VALUE: IBV_REREG_MR_ERR_INPUT leaves the old MR valid (unknown flags;
// access flags without IBV_REREG_MR_CHANGE_ACCESS; a translation without an address).
TEST_F(ExtendedVerbs, RereggedMrInputErrorsLeaveTheMrValid) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_EQ(ibv_rereg_mr(a_.mr, 1 << 6, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(ibv_rereg_mr(a_.mr, IBV_REREG_MR_CHANGE_PD, a_.pd, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(ibv_rereg_mr(a_.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 4096, 0),
            IBV_REREG_MR_ERR_INPUT);
  e2e::fill_pattern(a_.buf, 512, 19);
  ASSERT_EQ(
      PostSend(a_, 11, IBV_WR_RDMA_WRITE, {a_.sge(0, 512)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey),
      0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{11, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, a_.buf, 512));
}

// ibv_advise_mr(3): "EOPNOTSUPP libibverbs or provider driver doesn't support the
// ibv_advise_mr() verb" — advice is for ODP MRs, and a device without ODP has no such verb.
TEST_F(ExtendedVerbs, AdviseMrWithoutOdpIsEopnotsupp) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(a_.ctx, nullptr, &dx), 0);
  if (dx.odp_caps.general_caps & IBV_ODP_SUPPORT) GTEST_SKIP() << "device has ODP";
  ibv_sge sge = a_.sge(0, 4096);
  EXPECT_EQ(ibv_advise_mr(a_.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EOPNOTSUPP);
}

// ibv_query_qp(3) on a QP made by ibv_create_qp_ex: every attribute set at creation and on the
// way to RTS is reported back (init_attr: the CQs, capabilities, type, sq_sig_all, context).
TEST_F(ExtendedVerbs, QueryQpOfAnExtendedQpReportsEveryAttributeSet) {
  Options o;
  o.sq_sig_all = true;
  o.max_inline_data = 32;
  ASSERT_NO_FATAL_FAILURE(BuildEx(kRcOps, o));
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  const int all = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_AV |
                  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                  IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_CAP;
  ASSERT_EQ(ibv_query_qp(a_.qp, &q, all, &qi), 0);
  const ibv_qp_attr rtr = RtrAttr(b_), rts = RtsAttr(a_);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.pkey_index, 0);
  EXPECT_EQ(q.port_num, 1);
  EXPECT_EQ(q.qp_access_flags, int(opts_.qp_access));
  EXPECT_EQ(q.path_mtu, rtr.path_mtu);
  EXPECT_EQ(q.dest_qp_num, b_.qp->qp_num);
  EXPECT_EQ(q.rq_psn, rtr.rq_psn);
  EXPECT_EQ(q.max_dest_rd_atomic, rtr.max_dest_rd_atomic);
  EXPECT_EQ(q.min_rnr_timer, rtr.min_rnr_timer);
  EXPECT_EQ(q.ah_attr.is_global, 1);
  EXPECT_EQ(q.ah_attr.port_num, 1);
  EXPECT_EQ(memcmp(q.ah_attr.grh.dgid.raw, b_.gid.raw, 16), 0);
  EXPECT_EQ(q.ah_attr.grh.sgid_index, rtr.ah_attr.grh.sgid_index);
  EXPECT_EQ(q.ah_attr.grh.hop_limit, rtr.ah_attr.grh.hop_limit);
  EXPECT_EQ(q.timeout, rts.timeout);
  EXPECT_EQ(q.retry_cnt, rts.retry_cnt);
  EXPECT_EQ(q.rnr_retry, rts.rnr_retry);
  EXPECT_EQ(q.sq_psn, rts.sq_psn);
  EXPECT_EQ(q.max_rd_atomic, rts.max_rd_atomic);
  EXPECT_EQ(q.cap.max_send_wr, a_.cap.max_send_wr);
  EXPECT_EQ(q.cap.max_inline_data, a_.cap.max_inline_data);
  EXPECT_GE(q.cap.max_inline_data, 32u);
  EXPECT_EQ(qi.send_cq, a_.scq);
  EXPECT_EQ(qi.recv_cq, a_.rcq);
  EXPECT_EQ(qi.qp_type, IBV_QPT_RC);
  EXPECT_EQ(qi.sq_sig_all, 1);
  EXPECT_EQ(qi.cap.max_send_sge, a_.cap.max_send_sge);
  EXPECT_EQ(qi.cap.max_recv_wr, a_.cap.max_recv_wr);
}

}  // namespace
}  // namespace conformance
