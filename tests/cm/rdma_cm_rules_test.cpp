// SPDX-License-Identifier: Apache-2.0
// Connection-management rules as a librdmacm program meets them (through the drop-in
// librdmacm.so.1), between two simulated hosts in one process, one thread, one event channel.
// Each test names its source: the rdma_cm man pages, IBTA Vol 1 chapter 12, Linux's cm.c/cma.c.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sockaddr_util.h"

namespace {

class RdmaCmRules : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(ch_ = rdma_create_event_channel(), nullptr);
    ASSERT_EQ(rdma_create_id(ch_, &listener_, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in at = addr("192.0.2.2", 7471);
    ASSERT_EQ(rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&at)), 0);
    ASSERT_EQ(rdma_listen(listener_, 4), 0);
  }
  void TearDown() override {
    if (listener_) rdma_destroy_id(listener_);
    rdma_destroy_event_channel(ch_);
  }
  /** The next event, which must be @p type; acked unless @p keep. */
  rdma_cm_event* expect(rdma_cm_event_type type, bool keep = false) {
    rdma_cm_event* e = nullptr;
    EXPECT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
    if (!e) return nullptr;
    EXPECT_EQ(e->event, type) << rdma_event_str(e->event) << " (status " << e->status << "), expected "
                              << rdma_event_str(type);
    if (!keep) rdma_ack_cm_event(e);
    return keep ? e : nullptr;
  }
  /** A client id with its route to 192.0.2.2:@p port and a QP. */
  rdma_cm_id* client(uint16_t port = 7471) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = addr("192.0.2.2", port);
    EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    expect(RDMA_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(rdma_resolve_route(id, 2000), 0);
    expect(RDMA_CM_EVENT_ROUTE_RESOLVED);
    make_qp(id);
    return id;
  }
  static void make_qp(rdma_cm_id* id) {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 2;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    EXPECT_EQ(rdma_create_qp(id, nullptr, &a), 0) << strerror(errno);
  }
  /** Connect @p c; returns the passive side's id (its QP made, the request acked). */
  rdma_cm_id* request(rdma_cm_id* c, const char* pd = nullptr, uint8_t pd_len = 0) {
    rdma_conn_param p{};
    p.responder_resources = p.initiator_depth = 1;
    p.retry_count = p.rnr_retry_count = 7;
    p.private_data = pd;
    p.private_data_len = pd_len;
    EXPECT_EQ(rdma_connect(c, &p), 0) << strerror(errno);
    rdma_cm_event* e = expect(RDMA_CM_EVENT_CONNECT_REQUEST, true);
    rdma_cm_id* s = e ? e->id : nullptr;
    if (e) rdma_ack_cm_event(e);
    if (s) make_qp(s);
    return s;
  }
  void accept(rdma_cm_id* s) {
    rdma_conn_param p{};
    p.responder_resources = p.initiator_depth = 1;
    p.rnr_retry_count = 7;
    ASSERT_EQ(rdma_accept(s, &p), 0) << strerror(errno);
  }
  void close(rdma_cm_id* id) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
};

// rdma_accept(3) answers a connection request once: the CM has sent its REP and is no longer in
// REQ_RCVD (IBTA 12.9.6; Linux ib_send_cm_rep: -EINVAL in any other state).
TEST_F(RdmaCmRules, SecondAcceptOfTheSameRequestIsEinval) {
  rdma_cm_id* c = client();
  rdma_cm_id* s = request(c);
  ASSERT_NE(s, nullptr);
  accept(s);
  rdma_conn_param p{};
  errno = 0;
  EXPECT_EQ(rdma_accept(s, &p), -1);
  EXPECT_EQ(errno, EINVAL);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  close(c);
  close(s);
}

// rdma_get_cm_event(3) / rdma_create_event_channel(3): the channel's fd may be polled, and the
// kernel's CM takes a connection request whether or not the program is in a librdmacm call
// (Linux ucma.c ucma_poll: readable once an event is queued). Here the program only waits in
// poll(2): the request must still make the listener's channel readable.
TEST_F(RdmaCmRules, ChannelBecomesReadableWhileTheProgramOnlyPolls) {
  rdma_cm_id* c = client();
  rdma_conn_param p{};
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = p.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(c, &p), 0) << strerror(errno);
  pollfd pfd{ch_->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "the connection request never made the channel readable";
  rdma_cm_event* e = expect(RDMA_CM_EVENT_CONNECT_REQUEST, true);
  ASSERT_NE(e, nullptr);
  rdma_cm_id* s = e->id;
  rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_reject(s, nullptr, 0), 0);
  expect(RDMA_CM_EVENT_REJECTED);
  close(c);
  rdma_destroy_id(s);
}

// rdma_reject(3): the active side gets RDMA_CM_EVENT_REJECTED with the REJ's reason, 28
// ("consumer reject", IBTA 12.6.7 Table 103), and the passive side's private data.
TEST_F(RdmaCmRules, RejectCarriesReason28AndPrivateData) {
  rdma_cm_id* c = client();
  rdma_cm_id* s = request(c);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(rdma_reject(s, "busy", 4), 0);
  rdma_cm_event* e = expect(RDMA_CM_EVENT_REJECTED, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 28);
  ASSERT_GE(e->param.conn.private_data_len, 4);
  EXPECT_EQ(std::memcmp(e->param.conn.private_data, "busy", 4), 0);
  rdma_ack_cm_event(e);
  close(c);
  close(s);
}

// Private data limits: rdma_connect(3) carries at most 56 bytes on RDMA_PS_TCP (the REQ's 92,
// IBTA 12.6.5, less rdma_cm's 36-byte header); 57 is EINVAL and nothing is sent.
TEST_F(RdmaCmRules, ConnectPrivateDataIsAtMost56Bytes) {
  rdma_cm_id* c = client();
  char pd[57];
  std::memset(pd, 'x', sizeof pd);
  rdma_conn_param p{};
  p.private_data = pd;
  p.private_data_len = 57;
  errno = 0;
  EXPECT_EQ(rdma_connect(c, &p), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_cm_id* s = request(c, pd, 56);
  ASSERT_NE(s, nullptr);
  accept(s);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  close(c);
  close(s);
}

// Both sides disconnect at once: the DREQs cross; each CM answers the other's DREQ with a DREP
// and ignores the DREP for its own (IBTA 12.9.6, DREQ_SENT receiving a DREQ). Each side gets one
// RDMA_CM_EVENT_DISCONNECTED, then RDMA_CM_EVENT_TIMEWAIT_EXIT.
TEST_F(RdmaCmRules, BothSidesDisconnectingAtOnceGetOneDisconnectedEach) {
  rdma_cm_id* c = client();
  rdma_cm_id* s = request(c);
  ASSERT_NE(s, nullptr);
  accept(s);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(rdma_disconnect(c), 0);
  ASSERT_EQ(rdma_disconnect(s), 0);
  int disconnected[2] = {0, 0}, exited[2] = {0, 0};
  for (int i = 0; i < 4; ++i) {
    rdma_cm_event* e = nullptr;
    ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0);
    const int side = e->id == c ? 0 : 1;
    if (e->event == RDMA_CM_EVENT_DISCONNECTED) disconnected[side]++;
    if (e->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) exited[side]++;
    rdma_ack_cm_event(e);
  }
  EXPECT_EQ(disconnected[0], 1);
  EXPECT_EQ(disconnected[1], 1);
  EXPECT_EQ(exited[0], 1);
  EXPECT_EQ(exited[1], 1);
  close(c);
  close(s);
}

// rdma_destroy_id(3) with events queued but not yet read: the kernel drops them with the id
// (Linux ucma_destroy_id frees its unread events), so the channel's next event is another id's.
TEST_F(RdmaCmRules, DestroyingAnIdDropsItsUnreadEvents) {
  rdma_cm_id* gone = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &gone, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = addr("192.0.2.2", 7471);
  ASSERT_EQ(rdma_resolve_addr(gone, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ASSERT_EQ(rdma_destroy_id(gone), 0) << "its ADDR_RESOLVED unread";
  rdma_cm_id* other = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &other, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_resolve_addr(other, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  rdma_cm_event* e = expect(RDMA_CM_EVENT_ADDR_RESOLVED, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, other);
  rdma_ack_cm_event(e);
  rdma_destroy_id(other);
}

// A REQ for another QP type than the listener's is refused: the passive side's id takes the
// REQ's type (cm_req_get_qp_type: transport 3 with extended type 1 is XRC), rdma_cm refuses a
// type its listener does not serve (cma.c cma_ib_check_req_qp_type), and the CM rejects for its
// consumer (reason 28). Here an XRC initiator meets an RC listener, both on RDMA_PS_IB.
TEST_F(RdmaCmRules, RequestOfAnotherQpTypeThanTheListenersIsRejected) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_IB;
  hints.ai_qp_type = IBV_QPT_RC;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.2", "7999", &hints, &res), 0);
  rdma_cm_id* rc_listener = nullptr;
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  ASSERT_EQ(rdma_create_ep(&rc_listener, res, nullptr, &attr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  ASSERT_EQ(rdma_listen(rc_listener, 1), 0);

  hints = rdma_addrinfo{};
  hints.ai_port_space = RDMA_PS_IB;
  hints.ai_qp_type = IBV_QPT_XRC_SEND;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.2", "7999", &hints, &res), 0);
  rdma_cm_id* xrc = nullptr;
  attr = ibv_qp_init_attr{};
  attr.cap.max_send_wr = attr.cap.max_send_sge = 1;
  ASSERT_EQ(rdma_create_ep(&xrc, res, nullptr, &attr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  errno = 0;
  EXPECT_EQ(rdma_connect(xrc, nullptr), -1);  // a synchronous id: the REJ is its answer
  EXPECT_EQ(errno, ECONNREFUSED);
  ASSERT_NE(xrc->event, nullptr);
  EXPECT_EQ(xrc->event->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(xrc->event->status, 28);
  rdma_destroy_ep(xrc);
  rdma_destroy_ep(rc_listener);
}

// ------------------------------------------------------------------ IPv6
// The simulated hosts' IPv6 addresses are their link-local GIDs (fe80::/64 from the MAC, GID
// index 0), as a RoCEv2 host's are: hcasim0 is fe80::48:43ff:fe41:1, hcasim1 ...:2.
constexpr const char* kHost0V6 = "fe80::48:43ff:fe41:1";
constexpr const char* kHost1V6 = "fe80::48:43ff:fe41:2";

std::string text_of(const sockaddr* a) {
  char b[INET6_ADDRSTRLEN] = "?";
  if (a->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, b, sizeof b);
  else if (a->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, b, sizeof b);
  return b;
}

class RdmaCmIpv6 : public RdmaCmRules {
 protected:
  /** An id listening on @p at. */
  rdma_cm_id* listen_on(const sockaddr* at) {
    rdma_cm_id* l = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &l, nullptr, RDMA_PS_TCP), 0);
    EXPECT_EQ(rdma_bind_addr(l, const_cast<sockaddr*>(at)), 0) << strerror(errno);
    EXPECT_EQ(rdma_listen(l, 4), 0);
    return l;
  }
  /** A client id routed to @p dst, with a QP. */
  rdma_cm_id* client_to(const sockaddr* dst) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    EXPECT_EQ(rdma_resolve_addr(id, nullptr, const_cast<sockaddr*>(dst), 2000), 0) << strerror(errno);
    expect(RDMA_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(rdma_resolve_route(id, 2000), 0);
    expect(RDMA_CM_EVENT_ROUTE_RESOLVED);
    make_qp(id);
    return id;
  }
};

// rdma_cm(7) takes IPv6 addresses as it takes IPv4 ones; on RoCEv2 the address is the GID, so
// both ends, the path and every packet are IPv6 (Linux cma.c: cma_hdr with IP version 6, the
// source GID of the address's kind). The passive side sees the client's address and port.
TEST_F(RdmaCmIpv6, LinkLocalAddressesConnectAndAreReportedAsIpv6) {
  const sockaddr_in6 at = addr6(kHost1V6, 7481);
  rdma_cm_id* l = listen_on(reinterpret_cast<const sockaddr*>(&at));
  rdma_cm_id* c = client_to(reinterpret_cast<const sockaddr*>(&at));
  ASSERT_EQ(rdma_get_local_addr(c)->sa_family, AF_INET6);
  EXPECT_EQ(text_of(rdma_get_local_addr(c)), kHost0V6) << "the source is the host's own link-local address";
  ASSERT_NE(c->route.path_rec, nullptr);
  char sgid[INET6_ADDRSTRLEN], dgid[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, c->route.path_rec->sgid.raw, sgid, sizeof sgid);
  inet_ntop(AF_INET6, c->route.path_rec->dgid.raw, dgid, sizeof dgid);
  EXPECT_STREQ(sgid, kHost0V6);
  EXPECT_STREQ(dgid, kHost1V6);
  rdma_cm_id* s = request(c);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(rdma_get_peer_addr(s)->sa_family, AF_INET6);
  EXPECT_EQ(text_of(rdma_get_peer_addr(s)), kHost0V6);
  EXPECT_EQ(rdma_get_dst_port(s), rdma_get_src_port(c));
  EXPECT_EQ(text_of(rdma_get_local_addr(s)), kHost1V6);
  accept(s);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  close(c);
  close(s);
  rdma_destroy_id(l);
}

// An id bound to an IPv4 address takes IPv4 requests only (Linux: rdma_bind_addr makes an
// AF_INET id "afonly", and cma_match_private_data refuses another IP version). The IB CM has a
// listener for the port's service ID, so rdma_cm turns the request down as its consumer: REJ
// reason 28 (cm.c cm_destroy_id in REQ_RCVD). rxe between two guests gives the same (rping -s -a
// 192.0.2.2, rping -c -a fe80::...%eth0: "RDMA_CM_EVENT_REJECTED, error 28").
TEST_F(RdmaCmIpv6, AnIpv4ListenerRefusesAnIpv6Request) {
  const sockaddr_in6 dst = addr6(kHost1V6, 7471);  // the fixture's listener: 192.0.2.2:7471
  rdma_cm_id* c = client_to(reinterpret_cast<const sockaddr*>(&dst));
  rdma_conn_param p{};
  p.retry_count = p.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(c, &p), 0);
  rdma_cm_event* e = expect(RDMA_CM_EVENT_REJECTED, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 28);
  rdma_ack_cm_event(e);
  close(c);
}

// An IPv6 wildcard (::) takes IPv4 requests too (Linux: an AF_INET6 id is afonly only with
// net.ipv6.bindv6only set, 0 by default); the request's addresses stay IPv4.
TEST_F(RdmaCmIpv6, AnIpv6WildcardListenerTakesIpv4Requests) {
  const sockaddr_in6 any = addr6("::", 7482);
  rdma_cm_id* l = listen_on(reinterpret_cast<const sockaddr*>(&any));
  const sockaddr_in dst = addr("192.0.2.2", 7482);
  rdma_cm_id* c = client_to(reinterpret_cast<const sockaddr*>(&dst));
  rdma_cm_id* s = request(c);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(rdma_get_peer_addr(s)->sa_family, AF_INET);
  EXPECT_EQ(text_of(rdma_get_peer_addr(s)), "192.0.2.1");
  accept(s);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  expect(RDMA_CM_EVENT_ESTABLISHED);
  close(c);
  close(s);
  rdma_destroy_id(l);
}

// Address errors, as Linux gives them: an id keeps one family (cma_resolve_addr: EINVAL when the
// destination's differs from the bound source's); an IPv6 address off the one link has no route
// (ADDR_ERROR, -ENETUNREACH); binding an address no local host has is EADDRNOTAVAIL.
TEST_F(RdmaCmIpv6, AddressErrors) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in src = addr("192.0.2.1", 0);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)), 0);
  sockaddr_in6 dst = addr6(kHost1V6, 7471);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 100), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_destroy_id(id);

  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in6 off = addr6("2001:db8::1", 7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&off), 100), 0);
  rdma_cm_event* e = expect(RDMA_CM_EVENT_ADDR_ERROR, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, -ENETUNREACH);
  rdma_ack_cm_event(e);
  rdma_destroy_id(id);

  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in6 foreign = addr6("fe80::1", 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&foreign)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  rdma_destroy_id(id);
}

}  // namespace
