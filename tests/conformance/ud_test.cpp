// SPDX-License-Identifier: Apache-2.0
// Unreliable Datagram rules: IBTA vol.1 9.8 (UD: one packet per message, DETH with Q_Key and
// source QP, no acknowledgement), 10.2.5 (Q_Key checks and the privileged Q_Key), 11.4.1.1 and
// ibv_poll_cq(3) (the 40-byte GRH at the start of every UD receive buffer, IBV_WC_GRH, src_qp),
// ibv_create_ah(3) / ibv_create_ah_from_wc(3), ibv_modify_qp(3) (UD's state table).
#include "conformance.h"

namespace conformance {
namespace {

constexpr uint32_t kGrh = 40;

class Ud : public VerbsFixture {
 protected:
  void BuildUd(Options o = Options()) {
    o.qp_type = IBV_QPT_UD;
    ASSERT_NO_FATAL_FAILURE(Build(o));
  }
  /** Active MTU of @p h's port in bytes: the largest UD message. */
  static uint32_t PortMtu(const Host& h) {
    ibv_port_attr pa{};
    EXPECT_EQ(ibv_query_port(h.ctx, 1, &pa), 0);
    return 128u << unsigned(pa.active_mtu);
  }
};

TEST_F(Ud, SendDeliversTheGrhThenThePayload) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  const uint32_t n = 300;
  e2e::fill_pattern(a_.buf, n, 7);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + n)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, n)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << e2e::describe(wc);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, kGrh + n);  // ibv_poll_cq(3): the GRH counts in byte_len
  EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
  EXPECT_EQ(wc.src_qp, a_.qp->qp_num);
  EXPECT_EQ(wc.qp_num, b_.qp->qp_num);
  EXPECT_EQ(wc.pkey_index, 0);
  const auto want = e2e::make_pattern(n, 7);
  EXPECT_TRUE(e2e::same_bytes(b_.buf + kGrh, want.data(), n));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{2, IBV_WC_SEND, a_.qp->qp_num}));
}

// RoCE v2 over IPv4 (GID index 1): 20 unused bytes, then the IPv4 header as received.
TEST_F(Ud, GrhHoldsTheSendersIpv4Header) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 8)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 8)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  const uint8_t* ip = b_.buf + 20;
  EXPECT_EQ(ip[0], 0x45);  // IPv4, no options
  EXPECT_EQ(ip[9], 17);    // UDP
  EXPECT_EQ(memcmp(ip + 12, a_.gid.raw + 12, 4), 0) << "source address";
  EXPECT_EQ(memcmp(ip + 16, b_.gid.raw + 12, 4), 0) << "destination address";
}

TEST_F(Ud, AhFromWcAnswersTheSender) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 16)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 16)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  ibv_wc sent;
  ASSERT_TRUE(PollOne(a_.scq, sent));  // A's send completion, out of the way
  ibv_ah* reply = ibv_create_ah_from_wc(b_.pd, &wc, reinterpret_cast<ibv_grh*>(b_.buf), 1);
  ASSERT_NE(reply, nullptr) << "ibv_create_ah_from_wc: " << strerror(errno);
  e2e::fill_pattern(b_.buf + 4096, 16, 9);
  ASSERT_EQ(PostRecv(a_, 3, {a_.sge(8192, kGrh + 16)}), 0);
  ibv_sge sge = b_.sge(4096, 16);
  ibv_send_wr wr{};
  wr.wr_id = 4;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = reply;
  wr.wr.ud.remote_qpn = wc.src_qp;
  wr.wr.ud.remote_qkey = opts_.qkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(b_.qp, &wr, &bad), 0);
  ASSERT_TRUE(PollOne(a_.rcq, wc));
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.src_qp, b_.qp->qp_num);
  const auto want = e2e::make_pattern(16, 9);
  EXPECT_TRUE(e2e::same_bytes(a_.buf + 8192 + kGrh, want.data(), 16));
  ASSERT_TRUE(PollOne(b_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_destroy_ah(reply), 0);
}

TEST_F(Ud, SendWithImmCarriesTheImmediate) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 4)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 4)}, opts_.qkey, IBV_WR_SEND_WITH_IMM, 0xfeed1234), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xfeed1234u);
}

// IBTA 10.2.5 / C10-15: a packet whose Q_Key differs from the QP's is silently dropped.
TEST_F(Ud, QkeyMismatchIsDroppedSilently) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 8)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 8)}, opts_.qkey + 1), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);  // unreliable: the sender never learns
  EXPECT_TRUE(NoCompletion(b_.rcq));
  if (e2e::sim_present()) {
    EXPECT_EQ(e2e::sim_counter(Dev(b_), "qkey_violations"), 1u);
  }
  // The receive WQE is still there for the next matching packet.
  ASSERT_EQ(PostUdSend(a_, b_, 3, {a_.sge(0, 8)}, opts_.qkey), 0);
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.wr_id, 1u);
}

// IBTA 10.2.5: a send WR whose Q_Key has the high bit set uses the QP's own Q_Key.
TEST_F(Ud, PrivilegedQkeyInTheWrSendsTheQpsQkey) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 8)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 8)}, 0x80000000u), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));  // arrives with opts_.qkey, the sender QP's Q_Key
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// IBTA 9.8: UD has no RNR: with no receive WQE the message is dropped, never retried.
TEST_F(Ud, NoReceiveWqeDropsTheMessage) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 8)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  // The send completes when its packet has left, not when B has taken it: give B the time to
  // receive (and drop) it before a receive is posted.
  EXPECT_TRUE(NoCompletion(b_.rcq));
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 8)}), 0);
  EXPECT_TRUE(NoCompletion(b_.rcq));  // nothing is resent
  if (e2e::sim_present()) {
    EXPECT_EQ(e2e::sim_counter(Dev(b_), "unreliable_drops"), 1u);
    EXPECT_EQ(e2e::sim_counter(Dev(b_), "rnr_naks"), 0u);
  }
}

// IBTA 9.8.2: a UD message is one packet, so at most the path MTU.
TEST_F(Ud, MessageLongerThanTheMtuFailsWithLocalLengthError) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  const uint32_t mtu = PortMtu(a_);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + mtu + 1)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, mtu + 1)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_LOC_LEN_ERR) << e2e::describe(wc);
  EXPECT_TRUE(NoCompletion(b_.rcq));
}

TEST_F(Ud, MessageOfExactlyTheMtuIsDelivered) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  const uint32_t mtu = PortMtu(a_);
  e2e::fill_pattern(a_.buf, mtu, 11);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + mtu)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, mtu)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, kGrh + mtu);
  const auto want = e2e::make_pattern(mtu, 11);
  EXPECT_TRUE(e2e::same_bytes(b_.buf + kGrh, want.data(), mtu));
}

// A receive WQE too short for the 40-byte header and the message completes in error; the UD QP
// keeps working (it has no connection to lose).
TEST_F(Ud, ReceiveWqeShorterThanGrhPlusMessageCompletesInError) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 7)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 2, {a_.sge(0, 8)}, opts_.qkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_LEN_ERR) << e2e::describe(wc);
  EXPECT_EQ(QpState(b_), IBV_QPS_RTS);
  ASSERT_EQ(PostRecv(b_, 3, {b_.sge(0, kGrh + 8)}), 0);
  ASSERT_EQ(PostUdSend(a_, b_, 4, {a_.sge(0, 8)}, opts_.qkey), 0);
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// ibv_post_send(3): UD QPs take SEND and SEND_WITH_IMM only.
TEST_F(Ud, RdmaOpcodesAreRejectedAtPost) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE_WITH_IMM}) {
    EXPECT_EQ(PostUdSend(a_, b_, 1, {a_.sge(0, 8)}, opts_.qkey, op), EINVAL) << op;
  }
}

// ibv_modify_qp(3): UD's RESET->INIT needs the Q_Key (and no access flags), INIT->RTR needs
// nothing, RTR->RTS the SQ PSN; ibv_query_qp(3) returns the Q_Key.
TEST_F(Ud, StateMachineTakesAQkeyAndNoPath) {
  Options o;
  o.qp_type = IBV_QPT_UD;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 0x1234;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), EINVAL);
  a.sq_psn = 5;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a_.qp, &q, IBV_QP_QKEY | IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qkey, 0x1234u);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(qi.qp_type, IBV_QPT_UD);
}

// ibv_wr_post(3): a UD QP from ibv_create_qp_ex sends through ibv_wr_send + ibv_wr_set_ud_addr.
TEST_F(Ud, ExtendedApiSendsWithWrSetUdAddr) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_UD;
  ia.send_cq = a_.scq;
  ia.recv_cq = a_.rcq;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = a_.pd;
  ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  ibv_qp* qp = ibv_create_qp_ex(a_.ctx, &ia);
  if (!qp && errno == EOPNOTSUPP) GTEST_SKIP() << "no extended QPs";
  ASSERT_NE(qp, nullptr) << strerror(errno);
  Host x = a_;
  x.qp = qp;
  ASSERT_EQ(ToInit(x), 0);
  ASSERT_EQ(ToRtr(x, b_), 0);
  ASSERT_EQ(ToRts(x), 0);
  e2e::fill_pattern(a_.buf, 24, 17);
  ASSERT_EQ(PostRecv(b_, 1, {b_.sge(0, kGrh + 24)}), 0);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(qx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 9;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send_imm(qx, htonl(0x5151));
  ibv_wr_set_ud_addr(qx, a_.ah, b_.qp->qp_num, opts_.qkey);
  ibv_wr_set_sge(qx, a_.mr->lkey, a_.addr(0), 24);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(b_.rcq, wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << e2e::describe(wc);
  EXPECT_EQ(wc.src_qp, qp->qp_num);
  EXPECT_EQ(ntohl(wc.imm_data), 0x5151u);
  const auto want = e2e::make_pattern(24, 17);
  EXPECT_TRUE(e2e::same_bytes(b_.buf + kGrh, want.data(), 24));
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// ibv_create_ah(3) on RoCE: every address is a GID, so the GRH fields are required.
TEST_F(Ud, AddressHandleWithoutGrhIsRejectedOnRoce) {
  ASSERT_NO_FATAL_FAILURE(BuildUd());
  ibv_ah_attr aa{};
  aa.port_num = 1;
  aa.dlid = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_ah(a_.pd, &aa), nullptr);
  EXPECT_NE(errno, 0);
}

}  // namespace
}  // namespace conformance
