// SPDX-License-Identifier: Apache-2.0
// The rdma_cm's kernel interface (hcasim/ucma.h): the commands of <rdma/rdma_user_cm.h> as
// librdmacm writes them, between two simulated hosts of one process, through the drop-in
// libibverbs. What a user sees through librdmacm rests on these answers and events.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_user_cm.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "hcasim/ucma.h"

#include "sockaddr_util.h"

namespace {

// Event numbers (librdmacm's enum rdma_cm_event_type; the kernel's include/rdma/rdma_cm.h).
enum : uint32_t {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kMulticastJoin = 12,
  kTimewaitExit = 15,
};

/** One command on channel @p fd, as librdmacm writes it: header, then the command. */
template <typename T>
int cmd(int fd, uint32_t op, const T& c) {
  struct {
    rdma_ucm_cmd_hdr h;
    T c;
  } __attribute__((packed)) m{{op, uint16_t(sizeof c), 0}, c};
  return hcasim_ucma_write(fd, &m, sizeof m) == ssize_t(sizeof m) ? 0 : errno;
}

uint32_t create_id(int fd, uint64_t uid, uint16_t ps = RDMA_PS_TCP, uint8_t qp_type = IBV_QPT_RC) {
  rdma_ucm_create_id_resp r{};
  rdma_ucm_create_id c{};
  c.uid = uid;
  c.response = uintptr_t(&r);
  c.ps = ps;
  c.qp_type = qp_type;
  EXPECT_EQ(cmd(fd, RDMA_USER_CM_CMD_CREATE_ID, c), 0);
  return r.id;
}

int bind(int fd, uint32_t id, const sockaddr_in& a) {
  rdma_ucm_bind c{};
  c.id = id;
  c.addr_size = sizeof a;
  std::memcpy(&c.addr, &a, sizeof a);
  return cmd(fd, RDMA_USER_CM_CMD_BIND, c);
}

int resolve_addr(int fd, uint32_t id, const sockaddr_in& dst, uint32_t timeout_ms) {
  rdma_ucm_resolve_addr c{};
  c.id = id;
  c.timeout_ms = timeout_ms;
  c.dst_size = sizeof dst;
  std::memcpy(&c.dst_addr, &dst, sizeof dst);
  return cmd(fd, RDMA_USER_CM_CMD_RESOLVE_ADDR, c);
}

/** The next event (blocking), or status -1 and errno's value in .id on failure. */
rdma_ucm_event_resp get_event(int fd) {
  rdma_ucm_event_resp r{};
  rdma_ucm_get_event c{};
  c.response = uintptr_t(&r);
  if (int e = cmd(fd, RDMA_USER_CM_CMD_GET_EVENT, c)) {
    r.status = uint32_t(-1);
    r.id = uint32_t(e);
  }
  return r;
}

/** Move @p qp to @p state with the attributes INIT_QP_ATTR gives for @p id. */
int modify_as_told(int fd, uint32_t id, ibv_qp* qp, ibv_qp_state state) {
  ib_uverbs_qp_attr k{};
  rdma_ucm_init_qp_attr c{};
  c.response = uintptr_t(&k);
  c.id = id;
  c.qp_state = state;
  if (int e = cmd(fd, RDMA_USER_CM_CMD_INIT_QP_ATTR, c)) return e;
  ibv_qp_attr a{};
  a.qp_state = ibv_qp_state(k.qp_state);
  a.path_mtu = ibv_mtu(k.path_mtu);
  a.qkey = k.qkey;
  a.rq_psn = k.rq_psn;
  a.sq_psn = k.sq_psn;
  a.dest_qp_num = k.dest_qp_num;
  a.qp_access_flags = k.qp_access_flags;
  std::memcpy(a.ah_attr.grh.dgid.raw, k.ah_attr.grh.dgid, 16);
  a.ah_attr.grh.sgid_index = k.ah_attr.grh.sgid_index;
  a.ah_attr.grh.hop_limit = k.ah_attr.grh.hop_limit;
  a.ah_attr.grh.traffic_class = k.ah_attr.grh.traffic_class;
  a.ah_attr.is_global = k.ah_attr.is_global;
  a.ah_attr.port_num = k.ah_attr.port_num;
  a.pkey_index = k.pkey_index;
  a.max_rd_atomic = k.max_rd_atomic;
  a.max_dest_rd_atomic = k.max_dest_rd_atomic;
  a.min_rnr_timer = k.min_rnr_timer;
  a.port_num = k.port_num;
  a.timeout = k.timeout;
  a.retry_cnt = k.retry_cnt;
  a.rnr_retry = k.rnr_retry;
  return ibv_modify_qp(qp, &a, int(k.qp_attr_mask));
}

/** A host's RC QP and buffer, on the device whose node GUID the kernel names. */
struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64] = {};
  void open(ibv_device* d) {
    ASSERT_NE(ctx = ibv_open_device(d), nullptr);
    ASSERT_NE(pd = ibv_alloc_pd(ctx), nullptr);
    ASSERT_NE(cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0), nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ASSERT_NE(qp = ibv_create_qp(pd, &ia), nullptr);
    ASSERT_NE(mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE), nullptr);
  }
  ~Host() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

/** Destroy what a UD test made on one device. */
void destroy_all(ibv_ah* ah, ibv_qp* qp, ibv_mr* mr, ibv_cq* cq, ibv_pd* pd, ibv_context* ctx) {
  if (ah) ibv_destroy_ah(ah);
  if (qp) ibv_destroy_qp(qp);
  if (mr) ibv_dereg_mr(mr);
  if (cq) ibv_destroy_cq(cq);
  if (pd) ibv_dealloc_pd(pd);
  if (ctx) ibv_close_device(ctx);
}

class Ucma : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    devs_ = ibv_get_device_list(&n);
    ASSERT_GE(n, 2);
    ASSERT_GE(cfd_ = hcasim_ucma_open(), 0);
    ASSERT_GE(sfd_ = hcasim_ucma_open(), 0);
  }
  void TearDown() override {
    hcasim_ucma_close(cfd_);
    hcasim_ucma_close(sfd_);
    ibv_free_device_list(devs_);
  }
  /** A listener on hcasim1's address, port 7471. */
  uint32_t listen_on_host1(uint16_t port = 7471) {
    const uint32_t l = create_id(sfd_, 0x51);
    EXPECT_EQ(bind(sfd_, l, addr("192.0.2.2", port)), 0);
    rdma_ucm_listen c{l, 8};
    EXPECT_EQ(cmd(sfd_, RDMA_USER_CM_CMD_LISTEN, c), 0);
    return l;
  }
  /** A client id with its route to hcasim1 resolved. */
  uint32_t routed_client(uint16_t port = 7471) {
    const uint32_t id = create_id(cfd_, 0xc1);
    EXPECT_EQ(resolve_addr(cfd_, id, addr("192.0.2.2", port), 2000), 0);
    EXPECT_EQ(get_event(cfd_).event, kAddrResolved);
    rdma_ucm_resolve_route r{id, 2000};
    EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_RESOLVE_ROUTE, r), 0);
    EXPECT_EQ(get_event(cfd_).event, kRouteResolved);
    return id;
  }
  ibv_device** devs_ = nullptr;
  int cfd_ = -1, sfd_ = -1;
};

TEST_F(Ucma, ConnectAcceptSendDisconnect) {
  Host a, b;
  a.open(devs_[0]);
  b.open(devs_[1]);
  const uint32_t l = listen_on_host1();
  const uint32_t c = routed_client();
  ASSERT_EQ(modify_as_told(cfd_, c, a.qp, IBV_QPS_INIT), 0);
  rdma_ucm_connect cc{};
  cc.id = c;
  cc.conn_param.qp_num = a.qp->qp_num;
  cc.conn_param.responder_resources = cc.conn_param.initiator_depth = 1;
  cc.conn_param.retry_count = cc.conn_param.rnr_retry_count = 7;
  cc.conn_param.private_data_len = 5;
  std::memcpy(cc.conn_param.private_data, "hello", 5);
  cc.conn_param.valid = 1;
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_CONNECT, cc), 0);

  const rdma_ucm_event_resp req = get_event(sfd_);
  ASSERT_EQ(req.event, kConnectRequest);
  EXPECT_EQ(req.uid, 0x51u) << "a request carries the listener's uid";
  EXPECT_NE(req.id, l) << "and names a new id";
  EXPECT_EQ(req.param.conn.qp_num, a.qp->qp_num);
  EXPECT_EQ(req.param.conn.private_data_len, 56)
      << "92 bytes of REQ private data less rdma_cm's 36-byte header";
  EXPECT_EQ(std::memcmp(req.param.conn.private_data, "hello", 5), 0);
  ASSERT_EQ(modify_as_told(sfd_, req.id, b.qp, IBV_QPS_INIT), 0);
  ASSERT_EQ(modify_as_told(sfd_, req.id, b.qp, IBV_QPS_RTR), 0);
  ASSERT_EQ(modify_as_told(sfd_, req.id, b.qp, IBV_QPS_RTS), 0);
  rdma_ucm_accept ac{};
  ac.uid = 0x52;
  ac.id = req.id;
  ac.conn_param.qp_num = b.qp->qp_num;
  ac.conn_param.responder_resources = ac.conn_param.initiator_depth = 1;
  ac.conn_param.rnr_retry_count = 7;
  ac.conn_param.valid = 1;
  ASSERT_EQ(cmd(sfd_, RDMA_USER_CM_CMD_ACCEPT, ac), 0);

  const rdma_ucm_event_resp rep = get_event(cfd_);
  ASSERT_EQ(rep.event, kConnectResponse);
  EXPECT_EQ(rep.param.conn.qp_num, b.qp->qp_num);
  ASSERT_EQ(modify_as_told(cfd_, c, a.qp, IBV_QPS_RTR), 0);
  ASSERT_EQ(modify_as_told(cfd_, c, a.qp, IBV_QPS_RTS), 0);
  rdma_ucm_accept rtu{};
  rtu.id = c;  // the active side's ACCEPT (no connection parameters): the RTU
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_ACCEPT, rtu), 0);
  const rdma_ucm_event_resp est = get_event(sfd_);
  EXPECT_EQ(est.event, kEstablished);
  EXPECT_EQ(est.uid, 0x52u) << "ACCEPT's uid from then on";

  ibv_sge rs{uintptr_t(b.buf), sizeof b.buf, b.mr->lkey}, ss{uintptr_t(a.buf), sizeof a.buf, a.mr->lkey};
  ibv_recv_wr rw{};
  ibv_recv_wr* rbad;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b.qp, &rw, &rbad), 0);
  std::strcpy(a.buf, "connected by rdma_cm");
  ibv_send_wr sw{};
  ibv_send_wr* sbad;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(a.qp, &sw, &sbad), 0);
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ibv_poll_cq(b.cq, 1, &wc) == 0) ASSERT_LT(std::chrono::steady_clock::now(), end);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(b.buf, "connected by rdma_cm");

  rdma_ucm_disconnect d{c};
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_DISCONNECT, d), 0);
  EXPECT_EQ(get_event(sfd_).event, kDisconnected);
  EXPECT_EQ(get_event(cfd_).event, kDisconnected);
  EXPECT_EQ(get_event(sfd_).event, kTimewaitExit);
  EXPECT_EQ(get_event(cfd_).event, kTimewaitExit);
  rdma_ucm_destroy_id_resp dr{};
  rdma_ucm_destroy_id di{uintptr_t(&dr), c, 0};
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_DESTROY_ID, di), 0);
  // Address, route, connect response, disconnected, time wait exit: the active side's
  // ESTABLISHED is librdmacm's own (after its ACCEPT), never the kernel's.
  EXPECT_EQ(dr.events_reported, 5u);
}

TEST_F(Ucma, UdIdsResolveTheServingQpWithSidr) {
  const uint32_t l = create_id(sfd_, 0x51, RDMA_PS_UDP, IBV_QPT_UD);
  ASSERT_EQ(bind(sfd_, l, addr("192.0.2.2", 7000)), 0);
  rdma_ucm_listen lc{l, 4};
  ASSERT_EQ(cmd(sfd_, RDMA_USER_CM_CMD_LISTEN, lc), 0);
  const uint32_t c = create_id(cfd_, 0xc1, RDMA_PS_UDP, IBV_QPT_UD);
  ASSERT_EQ(resolve_addr(cfd_, c, addr("192.0.2.2", 7000), 2000), 0);
  ASSERT_EQ(get_event(cfd_).event, kAddrResolved);
  rdma_ucm_resolve_route rr{c, 2000};
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_RESOLVE_ROUTE, rr), 0);
  ASSERT_EQ(get_event(cfd_).event, kRouteResolved);
  rdma_ucm_connect cc{};
  cc.id = c;
  cc.conn_param.private_data_len = 3;
  std::memcpy(cc.conn_param.private_data, "udp", 3);
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_CONNECT, cc), 0);
  const rdma_ucm_event_resp req = get_event(sfd_);
  ASSERT_EQ(req.event, kConnectRequest);
  EXPECT_EQ(req.param.ud.private_data_len, 180)
      << "216 bytes of SIDR_REQ private data less the 36-byte header";
  EXPECT_EQ(std::memcmp(req.param.ud.private_data, "udp", 3), 0);
  EXPECT_EQ(req.param.ud.ah_attr.grh.dgid[15], 1) << "toward 192.0.2.1, the requester";
  rdma_ucm_accept ac{};
  ac.id = req.id;
  ac.conn_param.qp_num = 0x10042;
  ASSERT_EQ(cmd(sfd_, RDMA_USER_CM_CMD_ACCEPT, ac), 0);
  const rdma_ucm_event_resp est = get_event(cfd_);
  ASSERT_EQ(est.event, kEstablished);
  EXPECT_EQ(est.param.ud.qp_num, 0x10042u);
  EXPECT_EQ(est.param.ud.qkey, 0x01234567u) << "RDMA_UDP_QKEY when the server names none";
  EXPECT_EQ(est.param.ud.ah_attr.grh.dgid[15], 2) << "toward 192.0.2.2";
  // A resolution nobody listens for: SIDR_REP "service ID not supported" (status 1).
  const uint32_t c2 = create_id(cfd_, 0xc2, RDMA_PS_UDP, IBV_QPT_UD);
  ASSERT_EQ(resolve_addr(cfd_, c2, addr("192.0.2.2", 7001), 2000), 0);
  ASSERT_EQ(get_event(cfd_).event, kAddrResolved);
  rdma_ucm_resolve_route rr2{c2, 2000};
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_RESOLVE_ROUTE, rr2), 0);
  ASSERT_EQ(get_event(cfd_).event, kRouteResolved);
  cc.id = c2;
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_CONNECT, cc), 0);
  const rdma_ucm_event_resp un = get_event(cfd_);
  EXPECT_EQ(un.event, kUnreachable);
  EXPECT_EQ(un.status, 1u);
}

/** A UD QP on @p ctx in RTS with Q_Key @p qkey, and a receive posted into @p buf. */
ibv_qp* ud_qp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, uint32_t qkey) {
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  return qp;
}

TEST_F(Ucma, MulticastJoinGivesTheGroupAndItsDatagramsReachEveryMember) {
  const sockaddr_in group = addr("224.1.2.3", 0);
  ibv_context* ctx[2];
  ibv_pd* pd[2];
  ibv_cq* cq[2];
  ibv_qp* qp[2];
  static char buf[2][128];
  ibv_mr* mr[2];
  rdma_ucm_event_resp joined[2];
  for (int i = 0; i < 2; ++i) {
    const int fd = i ? sfd_ : cfd_;
    const uint32_t id = create_id(fd, 0x10 + i, RDMA_PS_UDP, IBV_QPT_UD);
    ASSERT_EQ(bind(fd, id, addr(i ? "192.0.2.2" : "192.0.2.1", 0)), 0);
    ASSERT_EQ(resolve_addr(fd, id, group, 1000), 0);
    ASSERT_EQ(get_event(fd).event, kAddrResolved) << "a group address resolves without a neighbour";
    rdma_ucm_create_id_resp jr{};
    rdma_ucm_join_mcast j{};
    j.response = uintptr_t(&jr);
    j.uid = 0x70 + i;
    j.id = id;
    j.addr_size = sizeof group;
    std::memcpy(&j.addr, &group, sizeof group);
    ASSERT_EQ(cmd(fd, RDMA_USER_CM_CMD_JOIN_MCAST, j), 0);
    joined[i] = get_event(fd);
    ASSERT_EQ(joined[i].event, kMulticastJoin);
    EXPECT_EQ(joined[i].uid, 0x70u + i) << "the join's uid";
    EXPECT_EQ(joined[i].param.ud.qp_num, 0xffffffu);
    ASSERT_NE(ctx[i] = ibv_open_device(devs_[i]), nullptr);
    pd[i] = ibv_alloc_pd(ctx[i]);
    cq[i] = ibv_create_cq(ctx[i], 8, nullptr, nullptr, 0);
    qp[i] = ud_qp(ctx[i], pd[i], cq[i], joined[i].param.ud.qkey);
    mr[i] = ibv_reg_mr(pd[i], buf[i], sizeof buf[i], IBV_ACCESS_LOCAL_WRITE);
    ibv_gid mgid;
    std::memcpy(mgid.raw, joined[i].param.ud.ah_attr.grh.dgid, 16);
    ASSERT_EQ(ibv_attach_mcast(qp[i], &mgid, 0), 0);
  }
  ibv_gid not_group{};
  EXPECT_EQ(ibv_attach_mcast(qp[0], &not_group, 0), EINVAL) << "ibv_attach_mcast(3): a multicast GID";
  ibv_sge rs{uintptr_t(buf[1]), sizeof buf[1], mr[1]->lkey};
  ibv_recv_wr rw{};
  ibv_recv_wr* rbad;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(qp[1], &rw, &rbad), 0);
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.sgid_index = 1;
  aa.grh.hop_limit = 1;
  std::memcpy(aa.grh.dgid.raw, joined[0].param.ud.ah_attr.grh.dgid, 16);
  ibv_ah* ah = ibv_create_ah(pd[0], &aa);
  ASSERT_NE(ah, nullptr);
  std::strcpy(buf[0], "to the group");
  ibv_sge ss{uintptr_t(buf[0]), 16, mr[0]->lkey};
  ibv_send_wr sw{};
  ibv_send_wr* sbad;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  sw.wr.ud.ah = ah;
  sw.wr.ud.remote_qpn = 0xffffff;
  sw.wr.ud.remote_qkey = joined[0].param.ud.qkey;
  ASSERT_EQ(ibv_post_send(qp[0], &sw, &sbad), 0);
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ibv_poll_cq(cq[1], 1, &wc) == 0) ASSERT_LT(std::chrono::steady_clock::now(), end);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 40u + 16u);
  EXPECT_STREQ(buf[1] + 40, "to the group");
  ibv_gid mgid;
  std::memcpy(mgid.raw, joined[1].param.ud.ah_attr.grh.dgid, 16);
  EXPECT_EQ(ibv_detach_mcast(qp[1], &mgid, 0), 0);
  EXPECT_EQ(ibv_detach_mcast(qp[1], &mgid, 0), EINVAL) << "not attached any more";
  destroy_all(ah, qp[0], mr[0], cq[0], pd[0], ctx[0]);
  destroy_all(nullptr, qp[1], mr[1], cq[1], pd[1], ctx[1]);
}

// Three hosts on a switch: the switch floods a group's frames to every other port, and each
// port hands a copy to each of its member QPs; a non-member port filters the frame out.
TEST(Multicast, SwitchFloodsAndEveryMemberQpGetsACopy) {
  setenv("HCASIM_HOSTS", "3", 1);  // before the world exists (first ibv_get_device_list)
  int n = 0;
  ibv_device** devs = ibv_get_device_list(&n);
  ASSERT_EQ(n, 3);
  ibv_gid mgid{};
  mgid.raw[10] = mgid.raw[11] = 0xff;
  mgid.raw[12] = 239, mgid.raw[13] = 9, mgid.raw[14] = 9, mgid.raw[15] = 9;
  ibv_context* ctx[3];
  ibv_pd* pd[3];
  ibv_cq* cq[3];
  ibv_qp* qp[4];
  static char buf[4][128];
  ibv_mr* mr[3];
  for (int i = 0; i < 3; ++i) {
    ASSERT_NE(ctx[i] = ibv_open_device(devs[i]), nullptr);
    pd[i] = ibv_alloc_pd(ctx[i]);
    cq[i] = ibv_create_cq(ctx[i], 8, nullptr, nullptr, 0);
    qp[i] = ud_qp(ctx[i], pd[i], cq[i], 0x1234);
    mr[i] = ibv_reg_mr(pd[i], buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  }
  qp[3] = ud_qp(ctx[2], pd[2], cq[2], 0x1234);  // host 2 has two members
  for (int q : {1, 2, 3}) {
    ASSERT_EQ(ibv_attach_mcast(qp[q], &mgid, 0), 0);
    ibv_sge rs{uintptr_t(buf[q]), sizeof buf[q], mr[q < 3 ? q : 2]->lkey};
    ibv_recv_wr rw{};
    ibv_recv_wr* bad;
    rw.wr_id = uint64_t(q);
    rw.sg_list = &rs;
    rw.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(qp[q], &rw, &bad), 0);
  }
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.sgid_index = 1;
  aa.grh.hop_limit = 1;
  aa.grh.dgid = mgid;
  ibv_ah* ah = ibv_create_ah(pd[0], &aa);
  std::strcpy(buf[0], "all of you");
  ibv_sge ss{uintptr_t(buf[0]), 16, mr[0]->lkey};
  ibv_send_wr sw{};
  ibv_send_wr* sbad;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.wr.ud.ah = ah;
  sw.wr.ud.remote_qpn = 0xffffff;
  sw.wr.ud.remote_qkey = 0x1234;
  ASSERT_EQ(ibv_post_send(qp[0], &sw, &sbad), 0);
  int got[4] = {};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got[1] + got[2] + got[3] < 3) {
    ASSERT_LT(std::chrono::steady_clock::now(), end);
    for (int h = 1; h < 3; ++h) {
      ibv_wc wc{};
      if (ibv_poll_cq(cq[h], 1, &wc) == 1) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        got[wc.wr_id]++;
      }
    }
  }
  EXPECT_EQ(got[1] + got[2] + got[3], 3);
  for (int q : {1, 2, 3}) EXPECT_STREQ(buf[q] + 40, "all of you") << "member QP " << q;
  ibv_destroy_qp(qp[3]);
  destroy_all(ah, qp[0], mr[0], cq[0], pd[0], ctx[0]);
  for (int i = 1; i < 3; ++i) destroy_all(nullptr, qp[i], mr[i], cq[i], pd[i], ctx[i]);
  ibv_free_device_list(devs);
}

TEST_F(Ucma, ConnectToAPortNobodyListensOnIsRejectedWithReason8) {
  listen_on_host1(7471);
  const uint32_t c = routed_client(7472);
  rdma_ucm_connect cc{};
  cc.id = c;
  cc.conn_param.qp_num = 0x11;
  cc.conn_param.valid = 1;
  ASSERT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_CONNECT, cc), 0);
  const rdma_ucm_event_resp e = get_event(cfd_);
  EXPECT_EQ(e.event, kRejected);
  EXPECT_EQ(e.status, 8u) << "IB_CM_REJ_INVALID_SERVICE_ID, as the kernel reports a REJ's reason";
}

TEST_F(Ucma, AddressesNobodyOwnsGiveAddrError) {
  const uint32_t nobody = create_id(cfd_, 1);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(resolve_addr(cfd_, nobody, addr("192.0.2.200", 1), 50), 0);
  rdma_ucm_event_resp e = get_event(cfd_);
  EXPECT_EQ(e.event, kAddrError);
  EXPECT_EQ(int32_t(e.status), -ETIMEDOUT) << "no neighbour answered within timeout_ms";
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  const uint32_t off = create_id(cfd_, 2);
  ASSERT_EQ(resolve_addr(cfd_, off, addr("10.0.0.1", 1), 50), 0);
  e = get_event(cfd_);
  EXPECT_EQ(e.event, kAddrError);
  EXPECT_EQ(int32_t(e.status), -ENETUNREACH) << "no route off the simulated subnet";
}

TEST_F(Ucma, BadCommandsGetTheKernelsErrno) {
  const uint32_t id = create_id(cfd_, 1);
  EXPECT_EQ(bind(cfd_, id, addr("192.0.2.99", 1)), EADDRNOTAVAIL) << "no host of this process has it";
  const uint32_t l = listen_on_host1(7000);
  const uint32_t l2 = create_id(sfd_, 2);
  EXPECT_EQ(bind(sfd_, l2, addr("192.0.2.2", 7000)), EADDRINUSE) << "listener " << l << " has the port";
  rdma_ucm_listen lc{999, 1};
  EXPECT_EQ(cmd(sfd_, RDMA_USER_CM_CMD_LISTEN, lc), EINVAL) << "no such id";
  rdma_ucm_resolve_route rr{id, 10};
  EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_RESOLVE_ROUTE, rr), EINVAL) << "no address resolved yet";
  const uint32_t c = routed_client();
  rdma_ucm_connect cc{};
  cc.id = c;
  cc.conn_param.private_data_len = 57;  // 56 is rdma_cm's most in a REQ
  EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_CONNECT, cc), EINVAL);
  rdma_ucm_get_event g{};
  EXPECT_EQ(cmd(cfd_, 99, g), EINVAL) << "no such command";
  rdma_ucm_create_id_resp jr{};
  rdma_ucm_join_mcast j{};
  j.response = uintptr_t(&jr);
  j.id = c;
  j.addr_size = sizeof(sockaddr_in);
  const sockaddr_in unicast = addr("192.0.2.1", 0);
  std::memcpy(&j.addr, &unicast, sizeof unicast);
  EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_JOIN_MCAST, j), EINVAL) << "not a group address";
  rdma_ucm_set_option go{};  // GET_OPTION has no struct of its own: the kernel never had it
  EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_GET_OPTION, go), ENOSYS) << "a command the kernel has no handler for";
  EXPECT_EQ(hcasim_ucma_write(12345, &g, sizeof g), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(Ucma, ChannelIsPollableAndNonBlockingGetEventSaysEagain) {
  ASSERT_EQ(fcntl(cfd_, F_SETFL, fcntl(cfd_, F_GETFL) | O_NONBLOCK), 0);
  rdma_ucm_event_resp r{};
  rdma_ucm_get_event g{uintptr_t(&r)};
  EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_GET_EVENT, g), EAGAIN);
  pollfd p{cfd_, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "nothing to read";
  const uint32_t id = create_id(cfd_, 7);
  ASSERT_EQ(resolve_addr(cfd_, id, addr("192.0.2.2", 1), 100), 0);
  EXPECT_EQ(poll(&p, 1, 1000), 1) << "the ADDR_RESOLVED event";
  EXPECT_EQ(cmd(cfd_, RDMA_USER_CM_CMD_GET_EVENT, g), 0);
  EXPECT_EQ(r.event, kAddrResolved);
  EXPECT_EQ(r.uid, 7u);
  EXPECT_EQ(poll(&p, 1, 0), 0) << "taken";
}

}  // namespace
