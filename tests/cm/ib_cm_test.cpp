// SPDX-License-Identifier: Apache-2.0
// The kernel's connection manager (driver/cm) between two simulated hosts in one process: the
// GSI QP, REQ/REP/RTU driving two RC QPs to RTS, a SEND over the result, DREQ/DREP and time
// wait; a REQ for a service nobody listens on; a REQ nobody answers. Each MAD crosses the model
// as a RoCEv2 packet to QP1, so the test fails if the model, the GSI QP or the CM is wrong.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "hcasim/sim_control.h"
#include "ib_cm.h"
#include "verbs_core.h"

namespace cm = hcasim::drv::cm;
namespace mad = hcasim::wire::mad;
namespace drv = hcasim::drv;

namespace {

constexpr uint64_t kService = 0x0000000001060000ull | 7471;  // rdma_cm's TCP port space, port 7471

/** One host's verbs objects: an RC QP and a registered buffer. */
struct Host {
  ibv_device* dev = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64] = {};
  std::vector<cm::CmEventType> events;
  std::vector<uint16_t> reasons;
  cm::CmId* id = nullptr;

  void open(ibv_device* d) {
    dev = d;
    ASSERT_NE(ctx = drv::open_device(d), nullptr);
    ASSERT_NE(pd = drv::alloc_pd(ctx), nullptr);
    ASSERT_NE(cq = drv::create_cq(ctx, 16, nullptr, nullptr, 0), nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ASSERT_NE(qp = drv::create_qp(pd, &ia), nullptr);
    ASSERT_NE(mr = drv::reg_mr(pd, buf, sizeof buf, uintptr_t(buf), IBV_ACCESS_LOCAL_WRITE), nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    ASSERT_EQ(drv::modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
              0);
  }
  void close() {
    if (qp) drv::destroy_qp(qp);
    if (mr) drv::dereg_mr(mr);
    if (cq) drv::destroy_cq(cq);
    if (pd) drv::dealloc_pd(pd);
    if (ctx) drv::close_device(ctx);
  }
  cm::CmHandler handler() {
    return [this](const cm::CmEvent& e) {
      events.push_back(e.type);
      reasons.push_back(e.reason);
      if (e.type == cm::CmEventType::ReqReceived) id = e.id;
    };
  }
  bool got(cm::CmEventType t) const {
    for (auto e : events)
      if (e == t) return true;
    return false;
  }
};

/** Run the CM until @p done, at most 10 s of wall time. */
bool run_until(const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    if (!cm::Cm::get().progress()) cm::Cm::get().wait(20);
  }
  return true;
}

/** RTR then RTS toward @p peer_qpn, whose first PSN is @p peer_psn; our own first PSN is @p psn. */
void connect_qp(ibv_qp* qp, const uint8_t* dgid, uint32_t peer_qpn, uint32_t peer_psn, uint32_t psn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = cm::kCmGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  std::memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
  ASSERT_EQ(drv::modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  ASSERT_EQ(drv::modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
}

mad::Req make_req(const Host& h, uint64_t service, uint8_t response_timeout, uint8_t retries) {
  mad::Req r;
  r.service_id = service;
  r.local_qpn = h.qp->qp_num;
  r.starting_psn = 0x1234;
  r.responder_resources = r.initiator_depth = 1;
  r.remote_cm_response_timeout = r.local_cm_response_timeout = response_timeout;
  r.retry_count = r.rnr_retry_count = 7;
  r.max_cm_retries = retries;
  r.partition_key = 0xffff;
  r.path_mtu = IBV_MTU_1024;
  r.primary.local_ack_timeout = 14;
  r.primary.hop_limit = 64;
  return r;
}

class IbCm : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    devs_ = drv::get_device_list(&n);
    ASSERT_GE(n, 2) << "the in-process world has two hosts by default";
    a_.open(devs_[0]);
    b_.open(devs_[1]);
  }
  void TearDown() override {
    a_.close();
    b_.close();
    drv::free_device_list(devs_);
  }
  const uint8_t* gid_of(Host& h) { return cm::Cm::get().agent(h.dev)->gid(); }
  ibv_device** devs_ = nullptr;
  Host a_, b_;
};

TEST_F(IbCm, GsiQpIsNumberOneAndThereIsOnlyOne) {
  cm::MadAgent* agent = cm::Cm::get().agent(a_.dev);
  ASSERT_NE(agent, nullptr);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = a_.cq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  errno = 0;
  EXPECT_EQ(drv::create_gsi_qp(a_.pd, &ia), nullptr) << "the agent owns QP1 already";
  EXPECT_EQ(errno, EBUSY);
  ia.qp_type = IBV_QPT_RC;
  errno = 0;
  EXPECT_EQ(drv::create_gsi_qp(a_.pd, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(IbCm, ReqRepRtuConnectsTwoRcQpsThenDreqDrepAndTimewait) {
  cm::Cm& c = cm::Cm::get();
  cm::CmId* listener = c.create_id(b_.handler());
  ASSERT_EQ(c.listen(listener, b_.dev, kService), 0);
  EXPECT_EQ(c.listen(c.create_id(nullptr), b_.dev, kService), EADDRINUSE);
  a_.id = c.create_id(a_.handler());
  const uint8_t* bgid = gid_of(b_);
  ASSERT_EQ(c.send_req(a_.id, a_.dev, make_req(a_, kService, 16, 3), bgid), 0);
  EXPECT_EQ(a_.id->state(), cm::CmState::ReqSent);
  ASSERT_TRUE(run_until([&] { return b_.got(cm::CmEventType::ReqReceived); }));
  ASSERT_NE(b_.id, nullptr);
  EXPECT_EQ(b_.id->state(), cm::CmState::ReqRcvd);
  EXPECT_EQ(b_.id->remote_comm_id(), a_.id->local_comm_id());
  EXPECT_EQ(std::memcmp(b_.id->remote_gid(), gid_of(a_), 16), 0)
      << "the REQ's source GID, from its network header";
  // The passive side: its QP to RTS toward the REQ's QP and PSN, then the REP.
  connect_qp(b_.qp, b_.id->remote_gid(), a_.qp->qp_num, 0x1234, 0x5678);
  mad::Rep rep;
  rep.local_qpn = b_.qp->qp_num;
  rep.starting_psn = 0x5678;
  rep.rnr_retry_count = 7;
  ASSERT_EQ(c.send_rep(b_.id, rep), 0);
  ASSERT_TRUE(run_until([&] { return a_.got(cm::CmEventType::RepReceived); }));
  EXPECT_EQ(a_.id->remote_comm_id(), b_.id->local_comm_id());
  connect_qp(a_.qp, bgid, b_.qp->qp_num, 0x5678, 0x1234);
  ASSERT_EQ(c.send_rtu(a_.id, nullptr, 0), 0);
  EXPECT_EQ(a_.id->state(), cm::CmState::Established);
  ASSERT_TRUE(run_until([&] { return b_.got(cm::CmEventType::RtuReceived); }));
  EXPECT_EQ(b_.id->state(), cm::CmState::Established);

  // The connection carries a SEND.
  ibv_sge rs{uintptr_t(b_.buf), sizeof b_.buf, b_.mr->lkey};
  ibv_recv_wr rwr{};
  ibv_recv_wr* rbad = nullptr;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b_.qp, &rwr, &rbad), 0);
  std::strcpy(a_.buf, "over a CM connection");
  ibv_sge ss{uintptr_t(a_.buf), sizeof a_.buf, a_.mr->lkey};
  ibv_send_wr swr{};
  ibv_send_wr* sbad = nullptr;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(a_.qp, &swr, &sbad), 0);
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ibv_poll_cq(b_.cq, 1, &wc) == 0) ASSERT_LT(std::chrono::steady_clock::now(), end);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(b_.buf, "over a CM connection");

  // The active side disconnects; both reach time wait, then leave it.
  ASSERT_EQ(c.send_dreq(a_.id, nullptr, 0), 0);
  ASSERT_TRUE(run_until([&] { return a_.got(cm::CmEventType::DrepReceived); }));
  EXPECT_TRUE(b_.got(cm::CmEventType::DreqReceived));
  ASSERT_TRUE(run_until(
      [&] { return a_.got(cm::CmEventType::TimewaitExit) && b_.got(cm::CmEventType::TimewaitExit); }));
  EXPECT_EQ(a_.id->state(), cm::CmState::Idle);
  EXPECT_EQ(b_.id->state(), cm::CmState::Idle);
}

TEST_F(IbCm, ReqForAServiceNobodyListensOnIsRejectedWithInvalidServiceId) {
  cm::Cm& c = cm::Cm::get();
  ASSERT_NE(c.agent(b_.dev), nullptr);  // the peer's CM is up, but listens on nothing
  a_.id = c.create_id(a_.handler());
  ASSERT_EQ(c.send_req(a_.id, a_.dev, make_req(a_, kService + 1, 16, 3), gid_of(b_)), 0);
  ASSERT_TRUE(run_until([&] { return a_.got(cm::CmEventType::RejReceived); }));
  EXPECT_EQ(a_.reasons.back(), uint16_t(mad::RejReason::InvalidServiceId));
  EXPECT_EQ(a_.id->state(), cm::CmState::Idle);
}

// A passive side slow to accept: the resent REQ finds the request still in REQ_RCVD and gets an
// MRA (IBTA 12.6.6, rdma_cm's delayed MRA); the active side then waits the MRA's service timeout
// instead of giving up after its resends, and connects once the REP comes.
TEST_F(IbCm, SlowAcceptGetsAnMraAndTheRequesterKeepsWaiting) {
  cm::Cm& c = cm::Cm::get();
  cm::CmId* listener = c.create_id(b_.handler());
  ASSERT_EQ(c.listen(listener, b_.dev, kService), 0);
  a_.id = c.create_id(a_.handler());
  // 4.096 us * 2^10 = 4.2 ms per try and 2 resends: without the MRA it gives up after ~13 ms.
  ASSERT_EQ(c.send_req(a_.id, a_.dev, make_req(a_, kService, 10, 2), gid_of(b_)), 0);
  ASSERT_TRUE(run_until([&] { return b_.got(cm::CmEventType::ReqReceived); }));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
  run_until([&] { return std::chrono::steady_clock::now() > until; });  // the program dawdles
  EXPECT_FALSE(a_.got(cm::CmEventType::ReqError)) << "the MRA asked for 69 s more";
  EXPECT_EQ(a_.id->state(), cm::CmState::ReqSent);
  mad::Rep rep;
  rep.local_qpn = b_.qp->qp_num;
  ASSERT_EQ(c.send_rep(b_.id, rep), 0);
  ASSERT_TRUE(run_until([&] { return a_.got(cm::CmEventType::RepReceived); }));
}

// A lost REP is sent again (IBTA 12.9.6): the passive CM resends it when its response timeout
// passes, and answers the requester's resent REQ with the same REP (Linux cm_dup_req_handler);
// here both happen, 4 ms apart. The connection completes and the listener sees one request.
TEST_F(IbCm, LostRepIsSentAgain) {
  cm::Cm& c = cm::Cm::get();
  cm::CmId* listener = c.create_id(b_.handler());
  ASSERT_EQ(c.listen(listener, b_.dev, kService), 0);
  a_.id = c.create_id(a_.handler());
  ASSERT_EQ(c.send_req(a_.id, a_.dev, make_req(a_, kService, 10, 3), gid_of(b_)), 0);
  ASSERT_TRUE(run_until([&] { return b_.got(cm::CmEventType::ReqReceived); }));
  ASSERT_EQ(hcasim_sim_drop_rx("hcasim0", 1, 0xffffffff, 1), 0) << "the next MAD hcasim0's QP1 gets is lost";
  mad::Rep rep;
  rep.local_qpn = b_.qp->qp_num;
  ASSERT_EQ(c.send_rep(b_.id, rep), 0);
  ASSERT_TRUE(
      run_until([&] { return a_.got(cm::CmEventType::RepReceived) || a_.got(cm::CmEventType::ReqError); }));
  EXPECT_TRUE(a_.got(cm::CmEventType::RepReceived)) << "the REP sent again for the resent REQ";
  EXPECT_EQ(b_.reasons.size(), 1u) << "the duplicate REQ made no second request event";
}

TEST_F(IbCm, UnansweredReqIsResentThenFailsWithReqError) {
  cm::Cm& c = cm::Cm::get();
  a_.id = c.create_id(a_.handler());
  uint8_t nobody[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 200};
  // 4.096 us * 2^10 = 4.2 ms per try, 2 resends.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(c.send_req(a_.id, a_.dev, make_req(a_, kService, 10, 2), nobody), 0);
  ASSERT_TRUE(run_until([&] { return a_.got(cm::CmEventType::ReqError); }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(3 * 4194));
  EXPECT_EQ(a_.id->state(), cm::CmState::Idle);
}

}  // namespace
