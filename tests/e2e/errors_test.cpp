// SPDX-License-Identifier: Apache-2.0
// Errors: remote access (bad rkey, missing rights, out of bounds), local protection (bad lkey),
// receive buffer too small, RNR (retried until a receive appears; exhausted with rnr_retry 0),
// flushing after an error, and the verbs-level EINVAL cases (posting in the wrong state,
// invalid ibv_modify_qp attribute masks).
#include <unistd.h>

#include "verbs_fixture.h"

namespace e2e {
namespace {

class Errors : public VerbsFixture {
 protected:
  /** The error completion on @p cq for @p wr_id, then flush errors for @p flushed, in order. */
  ::testing::AssertionResult ErrorThenFlushed(ibv_cq* cq, const Host& h, uint64_t wr_id, ibv_wc_status status,
                                              std::vector<uint64_t> flushed) {
    std::vector<ibv_wc> wcs;
    auto r = PollCq(cq, 1 + flushed.size(), wcs);
    if (!r) return r;
    WcExpect e{wr_id, IBV_WC_SEND, h.qp->qp_num};
    e.status = status;
    r = wc_is(wcs[0], e);
    if (!r) return r << " (the failing WR)";
    for (size_t i = 0; i < flushed.size(); ++i) {
      e.wr_id = flushed[i];
      e.status = IBV_WC_WR_FLUSH_ERR;
      r = wc_is(wcs[1 + i], e);
      if (!r) return r << " (flushed WR " << i << ")";
    }
    return NoCompletion(cq, 20);
  }
};

// ---------------------------------------------------------------- remote access errors

enum class Remote {
  BadRkeyWrite,
  BadRkeyRead,
  BadRkeyWriteImm,
  OutOfBoundsWrite,
  OutOfBoundsRead,
  NoRemoteWriteOnMr,
  NoRemoteReadOnQp
};
const char* remote_name(Remote r) {
  switch (r) {
    case Remote::BadRkeyWrite: return "BadRkeyWrite";
    case Remote::BadRkeyRead: return "BadRkeyRead";
    case Remote::BadRkeyWriteImm: return "BadRkeyWriteImm";
    case Remote::OutOfBoundsWrite: return "OutOfBoundsWrite";
    case Remote::OutOfBoundsRead: return "OutOfBoundsRead";
    case Remote::NoRemoteWriteOnMr: return "NoRemoteWriteOnMr";
    case Remote::NoRemoteReadOnQp: return "NoRemoteReadOnQp";
  }
  return "?";
}

class RemoteAccess : public Errors, public ::testing::WithParamInterface<Remote> {};

// The requester completes the WR with IBV_WC_REM_ACCESS_ERR (IBV_WC_REM_INV_REQ_ERR for a READ
// the QP does not enable), the WRs after it with
// IBV_WC_WR_FLUSH_ERR, and its QP is in ERR. The responder's QP is in ERR too (its posted
// receive is flushed). Nothing is written at the target.
TEST_P(RemoteAccess, RemoteAccessErrorThenFlush) {
  const Remote kind = GetParam();
  Options o;
  if (kind == Remote::NoRemoteWriteOnMr) o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  if (kind == Remote::NoRemoteReadOnQp) o.qp_access = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  memset(b_.buf, 0x77, b_.size);
  fill_pattern(a_.buf, 8192, 4);
  ibv_wr_opcode op = IBV_WR_RDMA_WRITE;
  uint64_t raddr = b_.addr(0);
  uint32_t rkey = b_.mr->rkey, len = 2000;
  switch (kind) {
    case Remote::BadRkeyWrite: rkey ^= 0x5500; break;
    case Remote::BadRkeyRead:
      rkey ^= 0x5500;
      op = IBV_WR_RDMA_READ;
      break;
    case Remote::BadRkeyWriteImm:
      rkey += 1;
      op = IBV_WR_RDMA_WRITE_WITH_IMM;
      break;
    case Remote::OutOfBoundsWrite: raddr = b_.addr(b_.size - 1000); break;
    case Remote::OutOfBoundsRead:
      raddr = b_.addr(b_.size - 1);
      op = IBV_WR_RDMA_READ;
      break;
    case Remote::NoRemoteWriteOnMr: break;
    case Remote::NoRemoteReadOnQp: op = IBV_WR_RDMA_READ; break;
  }
  ASSERT_EQ(PostRecv(b_, 50, {b_.sge(0, 100)}), 0);
  ASSERT_EQ(PostSend(a_, 1, op, {a_.sge(4096, len)}, IBV_SEND_SIGNALED, 0x99, raddr, rkey), 0);
  ASSERT_EQ(
      PostSend(a_, 2, IBV_WR_RDMA_WRITE, {a_.sge(0, 10)}, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 10)}, IBV_SEND_SIGNALED), 0);
  // An operation the responder's QP does not enable is an invalid request, not an access error
  // (as on rxe: docs/conformance.md, QpAccessSemantics.ReadFromQpWithoutRemoteReadIsInvalidRequest).
  const ibv_wc_status want =
      kind == Remote::NoRemoteReadOnQp ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_ACCESS_ERR;
  EXPECT_TRUE(ErrorThenFlushed(a_.scq, a_, 1, want, {2, 3}));
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  // The responder detected the error: its QP went to ERR and flushed the posted receive.
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {50, IBV_WC_RECV, b_.qp->qp_num, -1, false, 0, IBV_WC_WR_FLUSH_ERR}));
  EXPECT_EQ(QpState(b_), IBV_QPS_ERR);
  if (op != IBV_WR_RDMA_READ) {
    EXPECT_TRUE(all_bytes(b_.buf, b_.size, 0x77, "target memory"));
  }

  // A WR posted to a QP in ERR completes with a flush error (ibv_post_send(3)).
  ASSERT_EQ(PostSend(a_, 4, IBV_WR_SEND, {a_.sge(0, 10)}, IBV_SEND_SIGNALED), 0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {4, IBV_WC_SEND, a_.qp->qp_num, -1, false, 0, IBV_WC_WR_FLUSH_ERR}));
  ASSERT_EQ(PostRecv(b_, 51, {b_.sge(0, 100)}), 0);
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {51, IBV_WC_RECV, b_.qp->qp_num, -1, false, 0, IBV_WC_WR_FLUSH_ERR}));
}

INSTANTIATE_TEST_SUITE_P(Kinds, RemoteAccess,
                         ::testing::Values(Remote::BadRkeyWrite, Remote::BadRkeyRead, Remote::BadRkeyWriteImm,
                                           Remote::OutOfBoundsWrite, Remote::OutOfBoundsRead,
                                           Remote::NoRemoteWriteOnMr, Remote::NoRemoteReadOnQp),
                         [](const ::testing::TestParamInfo<Remote>& p) { return remote_name(p.param); });

// ---------------------------------------------------------------- local protection errors

enum class Local { BadLkeySend, BadLkeyWrite, BadLkeyRead, SgeBeyondMr, ReadIntoMrWithoutLocalWrite };
const char* local_name(Local l) {
  switch (l) {
    case Local::BadLkeySend: return "BadLkeySend";
    case Local::BadLkeyWrite: return "BadLkeyWrite";
    case Local::BadLkeyRead: return "BadLkeyRead";
    case Local::SgeBeyondMr: return "SgeBeyondMr";
    case Local::ReadIntoMrWithoutLocalWrite: return "ReadIntoMrWithoutLocalWrite";
  }
  return "?";
}

class LocalProtection : public Errors, public ::testing::WithParamInterface<Local> {};

// The WR completes with IBV_WC_LOC_PROT_ERR and nothing goes on the wire; WRs after it are
// flushed, WRs before it complete normally. The peer's QP is not affected.
TEST_P(LocalProtection, LocalProtectionErrorThenFlush) {
  const Local kind = GetParam();
  Options o;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  fill_pattern(a_.buf, 8192, 5);
  ibv_mr* ro_mr = nullptr;  // for ReadIntoMrWithoutLocalWrite
  ibv_sge sge = a_.sge(0, 1000);
  ibv_wr_opcode op = IBV_WR_SEND;
  switch (kind) {
    case Local::BadLkeySend: sge.lkey ^= 0x700; break;
    case Local::BadLkeyWrite:
      sge.lkey += 3;
      op = IBV_WR_RDMA_WRITE;
      break;
    case Local::BadLkeyRead:
      sge.lkey ^= 0x700;
      op = IBV_WR_RDMA_READ;
      break;
    case Local::SgeBeyondMr: sge = a_.sge(a_.size - 10, 11); break;
    case Local::ReadIntoMrWithoutLocalWrite:
      ro_mr = ibv_reg_mr(a_.pd, a_.buf, 4096, 0);
      ASSERT_NE(ro_mr, nullptr) << strerror(errno);
      sge.lkey = ro_mr->lkey;
      op = IBV_WR_RDMA_READ;
      break;
  }
  ASSERT_EQ(PostRecv(b_, 70, {b_.sge(0, 4096)}), 0);
  ASSERT_EQ(PostRecv(b_, 71, {b_.sge(4096, 4096)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 100)}, IBV_SEND_SIGNALED), 0);  // fine
  ASSERT_EQ(PostSend(a_, 2, op, {sge}, IBV_SEND_SIGNALED, 0, b_.addr(8192), b_.mr->rkey), 0);
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 10)}, IBV_SEND_SIGNALED), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_SEND, a_.qp->qp_num}));
  EXPECT_TRUE(ErrorThenFlushed(a_.scq, a_, 2, IBV_WC_LOC_PROT_ERR, {3}));
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {70, IBV_WC_RECV, b_.qp->qp_num, 100}));
  EXPECT_TRUE(NoCompletion(b_.rcq, 50)) << "the failing WR must not reach the peer";
  EXPECT_EQ(QpState(b_), IBV_QPS_RTS);
  if (ro_mr) {
    EXPECT_EQ(ibv_dereg_mr(ro_mr), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, LocalProtection,
                         ::testing::Values(Local::BadLkeySend, Local::BadLkeyWrite, Local::BadLkeyRead,
                                           Local::SgeBeyondMr, Local::ReadIntoMrWithoutLocalWrite),
                         [](const ::testing::TestParamInfo<Local>& p) { return local_name(p.param); });

// ---------------------------------------------------------------- receive too small

class RecvTooSmall : public Errors, public ::testing::WithParamInterface<std::pair<uint32_t, uint32_t>> {};

// IBV_WC_LOC_LEN_ERR at the responder, IBV_WC_REM_INV_REQ_ERR at the requester, both QPs in ERR,
// later WRs on both sides flushed.
TEST_P(RecvTooSmall, LocalLengthErrorAndRemoteInvalidRequest) {
  const auto [recv_len, send_len] = GetParam();
  ASSERT_NO_FATAL_FAILURE(Build());
  fill_pattern(a_.buf, send_len, 6);
  ASSERT_EQ(PostRecv(b_, 80, {b_.sge(0, recv_len / 2), b_.sge(10000, recv_len - recv_len / 2)}), 0);
  ASSERT_EQ(PostRecv(b_, 81, {b_.sge(20000, 8192)}), 0);
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, send_len)}, IBV_SEND_SIGNALED), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 8)}, IBV_SEND_SIGNALED), 0);
  EXPECT_TRUE(ErrorThenFlushed(a_.scq, a_, 1, IBV_WC_REM_INV_REQ_ERR, {2}));
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(b_.rcq, 2, wcs));
  EXPECT_TRUE(wc_is(wcs[0], {80, IBV_WC_RECV, b_.qp->qp_num, -1, false, 0, IBV_WC_LOC_LEN_ERR}));
  EXPECT_TRUE(wc_is(wcs[1], {81, IBV_WC_RECV, b_.qp->qp_num, -1, false, 0, IBV_WC_WR_FLUSH_ERR}));
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  EXPECT_EQ(QpState(b_), IBV_QPS_ERR);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RecvTooSmall,
                         ::testing::Values(std::make_pair(100u, 101u), std::make_pair(2048u, 3000u),
                                           std::make_pair(1u, 4096u)),
                         [](const ::testing::TestParamInfo<std::pair<uint32_t, uint32_t>>& p) {
                           return "recv" + std::to_string(p.param.first) + "_send" +
                                  std::to_string(p.param.second);
                         });

// ---------------------------------------------------------------- posting in the wrong state

// ibv_post_send(3): EINVAL unless the QP can send (RESET, INIT and RTR cannot). bad_wr names
// the WR and nothing is posted.
TEST_F(Errors, PostSendBeforeRtsIsEinval) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  auto try_send = [&](const char* state) {
    ibv_sge sge = a_.sge(0, 8);
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(a_.qp, &wr, &bad), EINVAL) << "in " << state;
    EXPECT_EQ(bad, &wr) << "in " << state;
  };
  EXPECT_EQ(QpState(a_), IBV_QPS_RESET);
  try_send("RESET");
  ASSERT_EQ(ToInit(a_), 0);
  ASSERT_EQ(ToInit(b_), 0);
  try_send("INIT");
  ASSERT_EQ(ToRtr(a_, b_), 0);
  ASSERT_EQ(ToRtr(b_, a_), 0);
  try_send("RTR");
  ASSERT_EQ(ToRts(a_), 0);
  ASSERT_EQ(ToRts(b_), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 50)) << "a rejected WR must not complete";
  // Now it works, and the first WR to go is this one.
  ASSERT_EQ(PostRecv(b_, 9, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 8)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {9, IBV_WC_RECV, b_.qp->qp_num, 8}));
}

// ibv_post_recv(3): EINVAL in RESET; receives may be posted from INIT on, before the QP is
// connected, and are used once it is.
TEST_F(Errors, PostRecvInResetIsEinval) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_sge sge = b_.sge(0, 64);
  ibv_recv_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(b_.qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  ASSERT_EQ(ToInit(a_), 0);
  ASSERT_EQ(ToInit(b_), 0);
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(0, 64)}), 0) << "post_recv in INIT";
  ASSERT_EQ(ToRtr(a_, b_), 0);
  ASSERT_EQ(ToRtr(b_, a_), 0);
  ASSERT_EQ(ToRts(a_), 0);
  ASSERT_EQ(ToRts(b_), 0);
  fill_pattern(a_.buf, 64, 7);
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_RECV, b_.qp->qp_num, 64}));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, 64));
  ASSERT_TRUE(PollOne(a_.scq, wc));
}

// ---------------------------------------------------------------- ibv_modify_qp attribute masks

// ibv_modify_qp(3) returns EINVAL for a mask that lacks a required attribute or carries one
// the transition does not allow, for an illegal transition, and for bad values; the QP stays
// where it was. The legal sequence then succeeds.
TEST_F(Errors, InvalidModifyQpMasksAreEinval) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_qp_attr a{};
  auto expect_einval = [&](ibv_qp_attr attr, int mask, ibv_qp_state stays, const char* what) {
    EXPECT_EQ(ibv_modify_qp(a_.qp, &attr, mask), EINVAL) << what;
    EXPECT_EQ(QpState(a_), stays) << what << ": the QP moved";
  };
  const int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  expect_einval(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, IBV_QPS_RESET,
                "INIT without ACCESS_FLAGS");
  expect_einval(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, IBV_QPS_RESET,
                "INIT without PORT");
  expect_einval(a, init_mask | IBV_QP_PATH_MTU, IBV_QPS_RESET, "INIT with PATH_MTU");
  expect_einval(a, init_mask | IBV_QP_SQ_PSN, IBV_QPS_RESET, "INIT with SQ_PSN");
  {
    ibv_qp_attr bad = a;
    bad.port_num = 2;
    expect_einval(bad, init_mask, IBV_QPS_RESET, "INIT on port 2");
  }
  {
    ibv_qp_attr rtr = RtrAttr(b_);
    expect_einval(rtr, kRtrMask, IBV_QPS_RESET, "RESET -> RTR");
    ibv_qp_attr rts = RtsAttr(a_);
    expect_einval(rts, kRtsMask, IBV_QPS_RESET, "RESET -> RTS");
  }
  {
    ibv_qp_attr cur = a;
    cur.cur_qp_state = IBV_QPS_RTS;
    expect_einval(cur, init_mask | IBV_QP_CUR_STATE, IBV_QPS_RESET,
                  "CUR_STATE that is not the current state");
  }
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, init_mask), 0) << strerror(errno);
  ASSERT_EQ(ToInit(b_), 0);

  ibv_qp_attr rtr = RtrAttr(b_);
  expect_einval(rtr, kRtrMask & ~IBV_QP_AV, IBV_QPS_INIT, "RTR without AV");
  expect_einval(rtr, kRtrMask & ~IBV_QP_DEST_QPN, IBV_QPS_INIT, "RTR without DEST_QPN");
  expect_einval(rtr, kRtrMask & ~IBV_QP_PATH_MTU, IBV_QPS_INIT, "RTR without PATH_MTU");
  expect_einval(rtr, kRtrMask & ~IBV_QP_RQ_PSN, IBV_QPS_INIT, "RTR without RQ_PSN");
  expect_einval(rtr, kRtrMask & ~IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QPS_INIT, "RTR without MAX_DEST_RD_ATOMIC");
  expect_einval(rtr, kRtrMask & ~IBV_QP_MIN_RNR_TIMER, IBV_QPS_INIT, "RTR without MIN_RNR_TIMER");
  expect_einval(rtr, kRtrMask | IBV_QP_SQ_PSN, IBV_QPS_INIT, "RTR with SQ_PSN");
  expect_einval(rtr, kRtrMask | IBV_QP_TIMEOUT, IBV_QPS_INIT, "RTR with TIMEOUT");
  {
    ibv_qp_attr bad = rtr;
    bad.path_mtu = ibv_mtu(6);
    expect_einval(bad, kRtrMask, IBV_QPS_INIT, "path_mtu 6");
    bad = rtr;
    bad.ah_attr.is_global = 0;
    expect_einval(bad, kRtrMask, IBV_QPS_INIT, "RoCE address without GRH");
  }
  ASSERT_EQ(ToRtr(a_, b_), 0) << strerror(errno);
  ASSERT_EQ(ToRtr(b_, a_), 0);

  ibv_qp_attr rts = RtsAttr(a_);
  expect_einval(rts, kRtsMask & ~IBV_QP_SQ_PSN, IBV_QPS_RTR, "RTS without SQ_PSN");
  expect_einval(rts, kRtsMask & ~IBV_QP_TIMEOUT, IBV_QPS_RTR, "RTS without TIMEOUT");
  expect_einval(rts, kRtsMask & ~IBV_QP_RETRY_CNT, IBV_QPS_RTR, "RTS without RETRY_CNT");
  expect_einval(rts, kRtsMask & ~IBV_QP_RNR_RETRY, IBV_QPS_RTR, "RTS without RNR_RETRY");
  expect_einval(rts, kRtsMask & ~IBV_QP_MAX_QP_RD_ATOMIC, IBV_QPS_RTR, "RTS without MAX_QP_RD_ATOMIC");
  expect_einval(rts, kRtsMask | IBV_QP_PATH_MTU, IBV_QPS_RTR, "RTS with PATH_MTU");
  expect_einval(rts, kRtsMask | IBV_QP_DEST_QPN, IBV_QPS_RTR, "RTS with DEST_QPN");
  {
    ibv_qp_attr bad = rts;
    bad.retry_cnt = 8;
    expect_einval(bad, kRtsMask, IBV_QPS_RTR, "retry_cnt 8");
    bad = rts;
    bad.rnr_retry = 8;
    expect_einval(bad, kRtsMask, IBV_QPS_RTR, "rnr_retry 8");
  }
  {
    ibv_qp_attr back{};
    back.qp_state = IBV_QPS_INIT;
    expect_einval(back, IBV_QP_STATE, IBV_QPS_RTR, "RTR -> INIT");
  }
  ASSERT_EQ(ToRts(a_), 0) << strerror(errno);
  ASSERT_EQ(ToRts(b_), 0);
  {
    ibv_qp_attr again = rts;
    expect_einval(again, kRtsMask, IBV_QPS_RTS, "RTS -> RTS with SQ_PSN");
  }

  // The connection works.
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, 64)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_RECV, b_.qp->qp_num, 64}));

  // Any state -> ERR and -> RESET need nothing but the state.
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &err, IBV_QP_STATE), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &reset, IBV_QP_STATE), 0);
  EXPECT_EQ(QpState(a_), IBV_QPS_RESET);
}

// A QP moved to ERR by the program flushes its posted receives and sends.
TEST_F(Errors, ModifyToErrFlushesPostedWork) {
  ASSERT_NO_FATAL_FAILURE(Build());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(PostRecv(b_, 10 + i, {b_.sge(i * 100, 100)}), 0);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b_.qp, &err, IBV_QP_STATE), 0);
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(PollCq(b_.rcq, 3, wcs));
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(
        wc_is(wcs[i], {uint64_t(10 + i), IBV_WC_RECV, b_.qp->qp_num, -1, false, 0, IBV_WC_WR_FLUSH_ERR}));
  ASSERT_EQ(PostSend(b_, 20, IBV_WR_SEND, {b_.sge(0, 10)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {20, IBV_WC_SEND, b_.qp->qp_num, -1, false, 0, IBV_WC_WR_FLUSH_ERR}));
}

// ---------------------------------------------------------------- RNR

// rnr_retry 7 (infinite): a SEND that finds no receive is RNR-NAKed and retried until the
// responder posts one; then it completes normally, payload intact.
//
// The program waits outside the verbs API (sleeps) while the requester retries: the idle advance
// moves simulated time. RnrWaitDoesNotBlockPolling waits by polling instead.
TEST_F(Errors, RnrRetriedUntilReceivePosted) {
  Options o;
  o.rnr_retry = 7;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint32_t len = 2500;  // 3 packets: the whole message is retried
  fill_pattern(a_.buf, len, 8);
  const uint64_t rnr_start = sim_present() ? sim_counter(Dev(b_), "rnr_naks") : 0;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, len)}), 0);
  usleep(50 * 1000);  // the simulation advances on its own (idle advance) and retries
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(0, 4096)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_RECV, b_.qp->qp_num, len}));
  EXPECT_TRUE(same_bytes(b_.buf, a_.buf, len));
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
  EXPECT_EQ(QpState(b_), IBV_QPS_RTS);
  if (sim_present()) {
    EXPECT_GE(sim_counter(Dev(b_), "rnr_naks"), rnr_start + 1) << "the responder should have sent RNR NAKs";
  }
  // Same for RDMA WRITE with immediate, which needs a receive too.
  const uint64_t rnr0 = sim_present() ? sim_counter(Dev(b_), "rnr_naks") : 0;
  ASSERT_EQ(PostSend(a_, 3, IBV_WR_RDMA_WRITE_WITH_IMM, {a_.sge(0, 100)}, IBV_SEND_SIGNALED, 0x42,
                     b_.addr(8192), b_.mr->rkey),
            0);
  usleep(50 * 1000);
  ASSERT_EQ(PostRecv(b_, 4, {}), 0);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {3, IBV_WC_RDMA_WRITE, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {4, IBV_WC_RECV_RDMA_WITH_IMM, b_.qp->qp_num, 100, true, 0x42}));
  EXPECT_TRUE(same_bytes(b_.buf + 8192, a_.buf, 100));
  if (sim_present()) {
    EXPECT_GT(sim_counter(Dev(b_), "rnr_naks"), rnr0);
  }
}

// While a requester waits out RNR NAKs (rnr_retry 7), ibv_poll_cq must return 0 promptly so a
// single-threaded program can go on and post the receive (the retries never write host memory,
// so a wait that ran "until something visible happens" would never return).
TEST_F(Errors, RnrWaitDoesNotBlockPolling) {
  Options o;
  o.rnr_retry = 7;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint64_t rnr0 = sim_present() ? sim_counter(Dev(b_), "rnr_naks") : 0;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 100)}), 0);
  EXPECT_TRUE(NoCompletion(a_.scq, 100));
  EXPECT_TRUE(NoCompletion(b_.rcq, 100));
  if (sim_present()) {
    EXPECT_GE(sim_counter(Dev(b_), "rnr_naks"), rnr0 + 1) << "polling did not let the RNR retries run";
  }
  ASSERT_EQ(PostRecv(b_, 2, {b_.sge(0, 100)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_SEND, a_.qp->qp_num}));
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_TRUE(wc_is(wc, {2, IBV_WC_RECV, b_.qp->qp_num, 100}));
}

// rnr_retry 0: the first RNR NAK ends it: IBV_WC_RNR_RETRY_EXC_ERR, later WRs flushed.
TEST_F(Errors, RnrRetryZeroFails) {
  Options o;
  o.rnr_retry = 0;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint64_t rnr0 = sim_present() ? sim_counter(Dev(b_), "rnr_naks") : 0;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 100)}), 0);
  ASSERT_EQ(PostSend(a_, 2, IBV_WR_SEND, {a_.sge(0, 100)}), 0);
  EXPECT_TRUE(ErrorThenFlushed(a_.scq, a_, 1, IBV_WC_RNR_RETRY_EXC_ERR, {2}));
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  EXPECT_EQ(QpState(b_), IBV_QPS_RTS) << "an RNR NAK does not hurt the responder";
  if (sim_present()) {
    EXPECT_EQ(sim_counter(Dev(b_), "rnr_naks") - rnr0, 1u);
  }
}

// rnr_retry 2: exactly three tries (the original and two retries), then RNR_RETRY_EXC_ERR.
TEST_F(Errors, RnrRetryCountIsHonoured) {
  Options o;
  o.rnr_retry = 2;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const uint64_t rnr0 = sim_present() ? sim_counter(Dev(b_), "rnr_naks") : 0;
  ASSERT_EQ(PostSend(a_, 1, IBV_WR_SEND, {a_.sge(0, 100)}), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(wc_is(wc, {1, IBV_WC_SEND, a_.qp->qp_num, -1, false, 0, IBV_WC_RNR_RETRY_EXC_ERR}));
  if (sim_present()) {
    EXPECT_EQ(sim_counter(Dev(b_), "rnr_naks") - rnr0, 3u);
  }
}

}  // namespace
}  // namespace e2e

namespace e2e {
namespace {

// A WQE is at most 4 WQEBBs (16 segments). A QP may have max_send_sge 16 (the device's
// max_sge), but an RDMA WRITE with 16 SGEs needs 18 segments (control, remote address, 16 data):
// ibv_post_send refuses it with EINVAL and bad_wr set, and nothing is posted. (It used to
// overflow the driver's staging buffer.) rxe accepts more segments per WQE, so this is the
// simulator's limit, like mlx5's maximum WQE size.
TEST_F(Errors, WqeLargerThanFourBasicBlocksIsEinval) {
  Options o;
  o.max_send_sge = 16;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  std::vector<ibv_sge> sges;
  for (uint32_t i = 0; i < 16; ++i) sges.push_back(a_.sge(i * 64, 64));
  EXPECT_EQ(PostSend(a_, 1, IBV_WR_RDMA_WRITE, sges, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), EINVAL);
  sges.resize(14);  // control + remote address + 14 = 16 segments: fits
  EXPECT_EQ(PostSend(a_, 2, IBV_WR_RDMA_WRITE, sges, IBV_SEND_SIGNALED, 0, b_.addr(0), b_.mr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

}  // namespace
}  // namespace e2e
