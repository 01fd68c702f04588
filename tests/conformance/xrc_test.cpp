// SPDX-License-Identifier: Apache-2.0
// XRC rules: IBTA vol.1 9.x / 10.2.x (XRC: a send QP's requests each name an XRC SRQ of the
// receive side's XRC domain; the receive QP has no queues; completions go to the SRQ's CQ),
// ibv_open_xrcd(3), ibv_close_xrcd(3), ibv_create_srq_ex(3), ibv_get_srq_num(3),
// ibv_create_qp_ex(3), ibv_open_qp(3), ibv_modify_qp(3) (the XRC_INI / XRC_TGT state tables).
// rxe has no XRC: every test SKIPs where ibv_open_xrcd is not supported.
#include "conformance.h"

namespace conformance {
namespace {

class Xrc : public VerbsFixture {
 protected:
  void SetUp() override {
    VerbsFixture::SetUp();
    Options o;
    o.connect = false;
    ASSERT_NO_FATAL_FAILURE(Build(o));
    xrcd_ = OpenXrcd(b_.ctx, -1, 0);
    if (!xrcd_ && errno == EOPNOTSUPP) GTEST_SKIP() << "the device has no XRC (rxe has none)";
    ASSERT_NE(xrcd_, nullptr) << strerror(errno);
  }
  void TearDown() override {
    for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) EXPECT_EQ(ibv_destroy_qp(*it), 0);
    for (ibv_srq* s : srqs_) EXPECT_EQ(ibv_destroy_srq(s), 0);
    for (ibv_cq* c : cqs_) EXPECT_EQ(ibv_destroy_cq(c), 0);
    if (xrcd_) {
      EXPECT_EQ(ibv_close_xrcd(xrcd_), 0);
    }
    VerbsFixture::TearDown();
  }
  static ibv_xrcd* OpenXrcd(ibv_context* ctx, int fd, int oflags) {
    ibv_xrcd_init_attr a{};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = fd;
    a.oflags = oflags;
    return ibv_open_xrcd(ctx, &a);
  }
  /** An XRC SRQ on B in @p xrcd, completing into a CQ of its own (returned in @p cq). */
  ibv_srq* XrcSrq(ibv_xrcd* xrcd, ibv_cq*& cq) {
    cq = ibv_create_cq(b_.ctx, 16, nullptr, nullptr, 0);
    EXPECT_NE(cq, nullptr);
    cqs_.push_back(cq);
    ibv_srq_init_attr_ex a{};
    a.attr.max_wr = 8;
    a.attr.max_sge = 1;
    a.comp_mask =
        IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
    a.srq_type = IBV_SRQT_XRC;
    a.xrcd = xrcd;
    a.cq = cq;
    a.pd = b_.pd;
    ibv_srq* s = ibv_create_srq_ex(b_.ctx, &a);
    EXPECT_NE(s, nullptr) << strerror(errno);
    if (s) srqs_.push_back(s);
    return s;
  }
  ibv_qp* RecvQp(ibv_xrcd* xrcd) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_RECV;
    a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    a.xrcd = xrcd;
    ibv_qp* q = ibv_create_qp_ex(b_.ctx, &a);
    EXPECT_NE(q, nullptr) << strerror(errno);
    if (q) qps_.push_back(q);
    return q;
  }
  ibv_qp* SendQp() {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.send_cq = a_.scq;
    a.cap.max_send_wr = 8;
    a.cap.max_send_sge = 2;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = a_.pd;
    ibv_qp* q = ibv_create_qp_ex(a_.ctx, &a);
    EXPECT_NE(q, nullptr) << strerror(errno);
    if (q) qps_.push_back(q);
    return q;
  }
  /** RESET -> RTS for the pair, with the XRC masks ibv_xsrq_pingpong uses. */
  void ConnectXrc(ibv_qp* send, ibv_qp* recv) {
    Host s = a_, r = b_;
    s.qp = send;
    r.qp = recv;
    ASSERT_EQ(ToInit(s), 0);
    ASSERT_EQ(ToInit(r), 0);
    ibv_qp_attr rr = RtrAttr(s);
    rr.rq_psn = 0x100;
    ASSERT_EQ(ibv_modify_qp(recv, &rr, kRtrMask), 0) << strerror(errno);
    ibv_qp_attr rs{};
    rs.qp_state = IBV_QPS_RTS;
    rs.timeout = 14;
    rs.sq_psn = 0x200;
    ASSERT_EQ(ibv_modify_qp(recv, &rs, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), 0) << strerror(errno);
    ibv_qp_attr sr = RtrAttr(r);
    sr.rq_psn = 0x200;
    ASSERT_EQ(ibv_modify_qp(send, &sr, kUcRtrMask), 0) << strerror(errno);
    ibv_qp_attr ss = RtsAttr(s);
    ss.sq_psn = 0x100;
    ASSERT_EQ(ibv_modify_qp(send, &ss, kRtsMask), 0) << strerror(errno);
  }
  int PostXrc(ibv_qp* send, uint64_t wr_id, ibv_wr_opcode op, uint32_t srqn, ibv_sge sge, uint64_t raddr = 0,
              uint32_t rkey = 0) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.qp_type.xrc.remote_srqn = srqn;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(send, &wr, &bad);
  }
  static int PostSrq(ibv_srq* s, uint64_t wr_id, ibv_sge sge) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(s, &wr, &bad);
  }
  static uint32_t SrqNum(ibv_srq* s) {
    uint32_t n = 0;
    EXPECT_EQ(ibv_get_srq_num(s, &n), 0);
    return n;
  }
  ibv_xrcd* xrcd_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_srq*> srqs_;
  std::vector<ibv_cq*> cqs_;
};

// Each request names its XRC SRQ: one receive QP serves two SRQs, each with its own CQ.
TEST_F(Xrc, SendReachesTheSrqItNames) {
  ibv_cq *cq1, *cq2;
  ibv_srq* s1 = XrcSrq(xrcd_, cq1);
  ibv_srq* s2 = XrcSrq(xrcd_, cq2);
  ibv_qp* recv = RecvQp(xrcd_);
  ibv_qp* send = SendQp();
  ASSERT_TRUE(s1 && s2 && recv && send);
  ASSERT_NO_FATAL_FAILURE(ConnectXrc(send, recv));
  ASSERT_EQ(PostSrq(s1, 11, b_.sge(0, 4096)), 0);
  ASSERT_EQ(PostSrq(s2, 22, b_.sge(4096, 4096)), 0);
  e2e::fill_pattern(a_.buf, 3000, 1);
  ASSERT_EQ(PostXrc(send, 1, IBV_WR_SEND, SrqNum(s2), a_.sge(0, 3000)), 0);  // 2 packets at MTU 1024... 3
  ASSERT_EQ(PostXrc(send, 2, IBV_WR_SEND, SrqNum(s1), a_.sge(0, 100)), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(cq2, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{22, IBV_WC_RECV, recv->qp_num, 3000}));
  ASSERT_TRUE(PollOne(cq1, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{11, IBV_WC_RECV, recv->qp_num, 100}));
  const auto want = e2e::make_pattern(3000, 1);
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 4096, want.data(), 3000));
  EXPECT_TRUE(e2e::same_bytes(b_.buf, want.data(), 100));
  std::vector<ibv_wc> s;
  ASSERT_TRUE(PollCq(a_.scq, 2, s));
  EXPECT_TRUE(e2e::wc_is(s[0], WcExpect{1, IBV_WC_SEND, send->qp_num}));
  EXPECT_TRUE(e2e::wc_is(s[1], WcExpect{2, IBV_WC_SEND, send->qp_num}));
}

// RDMA WRITE and READ through XRC: the rkey is checked in the PD of the SRQ the request names.
TEST_F(Xrc, WriteAndReadThroughAnXrcConnection) {
  ibv_cq* cq;
  ibv_srq* s = XrcSrq(xrcd_, cq);
  ibv_qp* recv = RecvQp(xrcd_);
  ibv_qp* send = SendQp();
  ASSERT_TRUE(s && recv && send);
  ASSERT_NO_FATAL_FAILURE(ConnectXrc(send, recv));
  e2e::fill_pattern(a_.buf, 2000, 2);
  ASSERT_EQ(PostXrc(send, 1, IBV_WR_RDMA_WRITE, SrqNum(s), a_.sge(0, 2000), b_.addr(8192), b_.mr->rkey), 0);
  ASSERT_EQ(PostXrc(send, 2, IBV_WR_RDMA_READ, SrqNum(s), a_.sge(16384, 2000), b_.addr(8192), b_.mr->rkey),
            0);
  std::vector<ibv_wc> w;
  ASSERT_TRUE(PollCq(a_.scq, 2, w));
  EXPECT_TRUE(e2e::wc_is(w[0], WcExpect{1, IBV_WC_RDMA_WRITE, send->qp_num}));
  EXPECT_TRUE(e2e::wc_is(w[1], WcExpect{2, IBV_WC_RDMA_READ, send->qp_num, 2000}));
  const auto want = e2e::make_pattern(2000, 2);
  EXPECT_TRUE(e2e::same_bytes(b_.buf + 8192, want.data(), 2000));
  EXPECT_TRUE(e2e::same_bytes(a_.buf + 16384, want.data(), 2000));
}

// ibv_wr_post(3): an XRC send QP from ibv_create_qp_ex names the SRQ with ibv_wr_set_xrc_srqn.
TEST_F(Xrc, ExtendedApiNamesTheSrqWithWrSetXrcSrqn) {
  ibv_cq* cq;
  ibv_srq* s = XrcSrq(xrcd_, cq);
  ibv_qp* recv = RecvQp(xrcd_);
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;
  a.send_cq = a_.scq;
  a.cap.max_send_wr = 4;
  a.cap.max_send_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = a_.pd;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  ibv_qp* send = ibv_create_qp_ex(a_.ctx, &a);
  ASSERT_TRUE(s && recv && send) << strerror(errno);
  qps_.push_back(send);
  ASSERT_NO_FATAL_FAILURE(ConnectXrc(send, recv));
  ASSERT_EQ(PostSrq(s, 31, b_.sge(0, 64)), 0);
  a_.buf[0] = 0x6e;
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(send);
  ASSERT_NE(qx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 4;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_xrc_srqn(qx, SrqNum(s));
  ibv_wr_set_sge(qx, a_.mr->lkey, a_.addr(0), 1);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(cq, wc));
  EXPECT_TRUE(e2e::wc_is(wc, WcExpect{31, IBV_WC_RECV, recv->qp_num, 1}));
  EXPECT_EQ(b_.buf[0], 0x6e);
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.wr_id, 4u);
}

// An XRCETH naming an SRQ outside the receive QP's domain is an invalid request.
TEST_F(Xrc, SrqOfAnotherDomainIsAnInvalidRequest) {
  ibv_xrcd* other = OpenXrcd(b_.ctx, -1, 0);
  ASSERT_NE(other, nullptr);
  ibv_cq* cq;
  ibv_srq* foreign = XrcSrq(other, cq);
  ibv_qp* recv = RecvQp(xrcd_);
  ibv_qp* send = SendQp();
  ASSERT_TRUE(foreign && recv && send);
  ASSERT_NO_FATAL_FAILURE(ConnectXrc(send, recv));
  ASSERT_EQ(PostSrq(foreign, 11, b_.sge(0, 64)), 0);
  ASSERT_EQ(PostXrc(send, 1, IBV_WR_SEND, SrqNum(foreign), a_.sge(0, 8)), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(a_.scq, wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << e2e::describe(wc);
  EXPECT_TRUE(NoCompletion(cq));
  ASSERT_EQ(ibv_destroy_qp(qps_.back()), 0);  // free the domains' users before closing
  qps_.pop_back();
  ASSERT_EQ(ibv_destroy_qp(qps_.back()), 0);
  qps_.pop_back();
  ASSERT_EQ(ibv_destroy_srq(foreign), 0);
  srqs_.clear();
  EXPECT_EQ(ibv_close_xrcd(other), 0);
}

// An XRC receive QP has no queues; an XRC send QP has no receive queue.
TEST_F(Xrc, XrcQpsHaveOnlyTheQueuesTheirRoleNeeds) {
  ibv_qp* recv = RecvQp(xrcd_);
  ibv_qp* send = SendQp();
  ASSERT_TRUE(recv && send);
  ibv_sge sge = a_.sge(0, 8);
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  EXPECT_NE(ibv_post_recv(recv, &rwr, &rbad), 0);
  EXPECT_NE(ibv_post_recv(send, &rwr, &rbad), 0);
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* sbad = nullptr;
  EXPECT_NE(ibv_post_send(recv, &swr, &sbad), 0);
}

// ibv_open_xrcd(3): a file's domain is shared; O_EXCL on it fails; without O_CREAT a file with
// no domain fails.
TEST_F(Xrc, XrcdThroughAFileIsSharedAndHonoursOflags) {
  char path[] = "/tmp/hcasim-xrcd-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  errno = 0;
  EXPECT_EQ(OpenXrcd(b_.ctx, fd, 0), nullptr);  // no domain yet, O_CREAT not given
  ibv_xrcd* x1 = OpenXrcd(b_.ctx, fd, O_CREAT);
  ASSERT_NE(x1, nullptr) << strerror(errno);
  ibv_xrcd* x2 = OpenXrcd(b_.ctx, fd, O_CREAT);
  ASSERT_NE(x2, nullptr);
  errno = 0;
  EXPECT_EQ(OpenXrcd(b_.ctx, fd, O_CREAT | O_EXCL), nullptr);
  EXPECT_EQ(errno, EEXIST);
  // One domain: an SRQ made through one handle serves a receive QP made through the other.
  ibv_cq* cq;
  ibv_srq* s = XrcSrq(x1, cq);
  ibv_qp* recv = RecvQp(x2);
  ibv_qp* send = SendQp();
  ASSERT_TRUE(s && recv && send);
  ASSERT_NO_FATAL_FAILURE(ConnectXrc(send, recv));
  ASSERT_EQ(PostSrq(s, 5, b_.sge(0, 64)), 0);
  ASSERT_EQ(PostXrc(send, 1, IBV_WR_SEND, SrqNum(s), a_.sge(0, 8)), 0);
  ibv_wc wc;
  ASSERT_TRUE(PollOne(cq, wc));
  EXPECT_EQ(wc.wr_id, 5u);
  for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) EXPECT_EQ(ibv_destroy_qp(*it), 0);
  qps_.clear();
  EXPECT_EQ(ibv_destroy_srq(s), 0);
  srqs_.clear();
  EXPECT_EQ(ibv_close_xrcd(x2), 0);
  EXPECT_EQ(ibv_close_xrcd(x1), 0);
  close(fd);
}

TEST_F(Xrc, CloseXrcdInUseIsEbusy) {
  ibv_cq* cq;
  ASSERT_NE(XrcSrq(xrcd_, cq), nullptr);
  EXPECT_EQ(ibv_close_xrcd(xrcd_), EBUSY);
}

// ibv_open_qp(3): another handle on an XRC receive QP; the QP stays while a handle is open.
TEST_F(Xrc, OpenQpGivesAnotherHandleOnTheReceiveQp) {
  ibv_qp* recv = RecvQp(xrcd_);
  ASSERT_NE(recv, nullptr);
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = recv->qp_num;
  oa.xrcd = xrcd_;
  oa.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* h = ibv_open_qp(b_.ctx, &oa);
  ASSERT_NE(h, nullptr) << strerror(errno);
  EXPECT_EQ(h->qp_num, recv->qp_num);
  EXPECT_EQ(h->qp_type, IBV_QPT_XRC_RECV);
  Host r = b_;
  r.qp = h;
  ASSERT_EQ(ToInit(r), 0);  // modifying through the handle changes the one QP
  EXPECT_EQ(QpState(Host{b_.name, b_.ctx, b_.pd, nullptr, nullptr, nullptr, recv}), IBV_QPS_INIT);
  EXPECT_EQ(ibv_destroy_qp(recv), EBUSY);
  EXPECT_EQ(ibv_destroy_qp(h), 0);
  oa.qp_num = 0xabcdef;  // no such QP
  errno = 0;
  EXPECT_EQ(ibv_open_qp(b_.ctx, &oa), nullptr);
}

// ibv_modify_qp(3), the kernel's XRC_INI / XRC_TGT rows: the send QP's INIT->RTR takes no
// responder attributes; the receive QP's RTR->RTS needs only TIMEOUT and SQ_PSN.
TEST_F(Xrc, StateTablesOfTheSendAndReceiveSides) {
  ibv_qp* recv = RecvQp(xrcd_);
  ibv_qp* send = SendQp();
  ASSERT_TRUE(recv && send);
  Host s = a_, r = b_;
  s.qp = send;
  r.qp = recv;
  ASSERT_EQ(ToInit(s), 0);
  ASSERT_EQ(ToInit(r), 0);
  ibv_qp_attr sr = RtrAttr(r);
  EXPECT_EQ(ibv_modify_qp(send, &sr, kRtrMask), EINVAL);
  ASSERT_EQ(ibv_modify_qp(send, &sr, kUcRtrMask), 0);
  ibv_qp_attr rr = RtrAttr(s);
  ASSERT_EQ(ibv_modify_qp(recv, &rr, kRtrMask), 0);
  ibv_qp_attr rs = RtsAttr(r);
  EXPECT_EQ(ibv_modify_qp(recv, &rs, kRtsMask), EINVAL);
  EXPECT_EQ(ibv_modify_qp(recv, &rs, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), 0);
}

}  // namespace
}  // namespace conformance
