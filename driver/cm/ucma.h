// SPDX-License-Identifier: Apache-2.0
/**
 * @file ucma.h
 * @brief The kernel's RDMA connection manager and its user interface (Linux's cma.c and
 *        ucma.c): ids with IP addresses and ports over the IB CM's connections, the commands
 *        of <rdma/rdma_user_cm.h> and the event channels librdmacm reads.
 *
 * An id belongs to a channel (a descriptor from hcasim_ucma_open). Addresses are the simulated
 * hosts' IPv4 addresses (the IPv4-mapped GID at index 1 of each port) and IPv6 link-local
 * addresses (GID index 0; ip_addr.h); a port space and port make the IB service ID
 * (0x0000000001060000 + port for RDMA_PS_TCP), and rdma_cm's 36-byte IP header leads the REQ's
 * private data, as on every RoCE host.
 */
#pragma once

#include <hcasim/hca_hw.h>
#include <netinet/in.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_cm.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "ib_cm.h"
#include "ip_addr.h"

namespace hcasim::drv::cm {

/**
 * @brief The events of the kernel's rdma_cm (include/rdma/rdma_cm.h), the values librdmacm's
 * enum rdma_cm_event_type has.
 */
enum CmaEvent : uint32_t {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kDeviceRemoval = 11,
  kMulticastJoin = 12,
  kMulticastError = 13,
  kAddrChange = 14,
  kTimewaitExit = 15,
};

/** @brief rdma_cm's id states (Linux's enum rdma_cm_state). */
enum class UcmaState : uint8_t {
  Idle,
  AddrQuery,
  AddrResolved,
  RouteQuery,
  RouteResolved,
  Connect,
  Disconnect,
  AddrBound,
  Listen,
};

struct UcmaChannel;

/** @brief One rdma_cm id (Linux's rdma_id_private plus ucma_context). */
struct UcmaId {
  uint32_t handle = 0;  ///< what the library names the id by
  uint64_t uid = 0;     ///< the library's own pointer, given back in events
  UcmaChannel* ch = nullptr;
  uint16_t ps = 0;  ///< port space (RDMA_PS_TCP, ...)
  uint8_t qp_type = 0;
  UcmaState state = UcmaState::Idle;
  IpAddr src, dst;  ///< bound (or resolved) and destination addresses
  bool reuse_addr = false;
  bool child = false;         ///< made by a listener for a request: it owns no port
  MadAgent* agent = nullptr;  ///< the device the address lives on (null: wildcard)
  CmId* cm = nullptr;
  uint32_t qpn = 0, psn = 0, remote_qpn = 0, remote_psn = 0;
  uint8_t responder_resources = 0, initiator_depth = 0, retry_count = 7, rnr_retry_count = 7, srq = 0;
  uint8_t tos = 0, ack_timeout = 17;  ///< RoCE: packet lifetime 16, plus 1 (cma.c)
  uint32_t events_reported = 0;
  std::vector<UcmaId*> listen_children;  ///< a wildcard listener's per-device CM ids are in cm_listens
  std::vector<CmId*> cm_listens;
};

/** @brief A multicast group an id joined (rdma_join_multicast). */
struct UcmaMc {
  uint32_t handle = 0;  ///< names the join in LEAVE_MCAST
  uint64_t uid = 0;     ///< the library's, given back in its MULTICAST_JOIN event
  uint32_t id = 0;      ///< the id that joined
  IpAddr addr;          ///< the group's address
  uint32_t events_reported = 0;
};

/** @brief An event waiting to be read, with the time it may be read from (address timeouts). */
struct UcmaEvent {
  rdma_ucm_event_resp resp{};
  uint64_t due_ns = 0;
  uint32_t credit = 0;  ///< the id whose events_reported counts it (a request: the listener)
};

/** @brief An event channel: its descriptor (an eventfd counting queued events) and queue. */
struct UcmaChannel {
  int fd = -1;
  std::deque<UcmaEvent> events;
  /// Closed while a thread waited in GET_EVENT on it: that thread waits on, as on Linux, where
  /// the blocked write(2) holds the file open; it can get no event any more.
  bool closed = false;
};

constexpr size_t kCmaHdrLen = 36;          ///< rdma_cm's IP header leading a REQ's/SIDR_REQ's private data
constexpr uint32_t kUdpQkey = 0x01234567;  ///< RDMA_UDP_QKEY: the Q_Key of rdma_cm's UD port spaces

/** @brief A command's struct: its first bytes as the library sent them, zero-filled if fewer. */
template <typename T>
T ucma_command(const void* in, size_t len) {
  T t{};
  std::memcpy(&t, in, len < sizeof t ? len : sizeof t);
  return t;
}
/** @brief rdma_cm's header (cma.c's struct cma_hdr): version 0, IP version 4 or 6, source port,
 *  both addresses (IPv4 in the last 4 of their 16 bytes). */
void put_cma_hdr(uint8_t* p, const IpAddr& src, const IpAddr& dst);
/**
 * @brief The addresses in rdma_cm's header of a request to @p listener_port: @p from the
 * requester's, @p to the one it asked for; false if the header is not rdma_cm's.
 */
bool get_cma_hdr(const uint8_t* p, uint16_t listener_port, IpAddr& from, IpAddr& to);
/** @brief Whether a listener bound to @p listener takes a request for @p to (Linux's rules). */
bool listener_takes(const IpAddr& listener, const IpAddr& to);
/** @brief A RoCE address vector (always with a GRH, from the GID of @p peer's kind) toward @p peer. */
void fill_av(const IpAddr& peer, uint8_t tos, uint8_t hop_limit, ib_uverbs_ah_attr& ah);
/** @brief @p len bytes of private data into an event's connection parameters. */
void copy_conn_pd(rdma_ucm_conn_param& c, const uint8_t* pd, size_t len);

/**
 * @brief The first PSN of an id's QP, fixed when the id is made (Linux draws a random one then:
 * librdmacm moves a passive QP to RTS before it accepts): the same on every run here.
 */
inline uint32_t first_psn(uint32_t handle) { return (handle * 0x9e3779b1u) & 0xffffff; }

/** @brief The process's rdma_cm: every channel and id. */
class Ucma {
 public:
  static Ucma& get();
  int open();
  int close(int fd);
  /**
   * @brief At the process's end: close every channel still open, as the kernel closes the
   * process's rdma_cm files, so a connected id still sends its DREQ (rdma_destroy_id(3)), and
   * let the MADs sent leave before the process does (Cm::settle_sends).
   */
  void close_all();
  /** @brief One command; returns 0 or a negative errno (as the kernel's ucma_write). */
  int write(int fd, const void* buf, size_t len);

 private:
  Ucma() = default;
  using Handler = int (Ucma::*)(UcmaChannel&, const void* in, size_t in_len);
  int dispatch(UcmaChannel& ch, uint32_t cmd, const void* in, size_t in_len);
  UcmaId* find(uint32_t handle, UcmaChannel* ch = nullptr);

  // ids and channels (ucma_ids.cpp)
  int create_id(UcmaChannel& ch, const void* in, size_t len);
  int destroy_id(UcmaChannel& ch, const void* in, size_t len);
  int migrate_id(UcmaChannel& ch, const void* in, size_t len);
  int get_event(UcmaChannel& ch, const void* in, size_t len);
  int set_option(UcmaChannel& ch, const void* in, size_t len);
  void forget(UcmaId& id);
  void queue(UcmaId& id, uint32_t event, int status, uint64_t due_ns = 0);
  UcmaEvent& queue_event(UcmaId& id, uint32_t event, int status, uint64_t due_ns = 0);

  // addresses and routes (ucma_addr.cpp)
  int bind(UcmaChannel& ch, const void* in, size_t len);
  int bind_ip(UcmaChannel& ch, const void* in, size_t len);
  int resolve_addr(UcmaChannel& ch, const void* in, size_t len);
  int resolve_ip(UcmaChannel& ch, const void* in, size_t len);
  int resolve_route(UcmaChannel& ch, const void* in, size_t len);
  int query(UcmaChannel& ch, const void* in, size_t len);
  int query_route(UcmaChannel& ch, const void* in, size_t len);
  int bind_addr(UcmaId& id, const sockaddr* sa, size_t size);
  int start_resolve(UcmaId& id, const sockaddr* src, size_t src_len, const sockaddr* dst, size_t dst_len,
                    uint32_t timeout_ms);
  /** @brief The device that owns @p gid (any device when @p gid is null). */
  MadAgent* device_of(const uint8_t* gid);
  /** @brief 0 if @p self may bind @p at, else -EADDRINUSE or -EADDRNOTAVAIL. */
  int port_conflict(const UcmaId& self, const IpAddr& at) const;
  uint16_t ephemeral_port();
  void fill_addr_resp(const UcmaId& id, rdma_ucm_query_addr_resp& r) const;

  // connections (ucma_conn.cpp)
  int connect(UcmaChannel& ch, const void* in, size_t len);
  int listen(UcmaChannel& ch, const void* in, size_t len);
  int accept(UcmaChannel& ch, const void* in, size_t len);
  int reject(UcmaChannel& ch, const void* in, size_t len);
  int disconnect(UcmaChannel& ch, const void* in, size_t len);
  int init_qp_attr(UcmaChannel& ch, const void* in, size_t len);
  int notify(UcmaChannel& ch, const void* in, size_t len);

  // multicast (ucma_mcast.cpp)
  int join_mcast(UcmaChannel& ch, const void* in, size_t len);
  int join_ip_mcast(UcmaChannel& ch, const void* in, size_t len);
  int leave_mcast(UcmaChannel& ch, const void* in, size_t len);
  int join(UcmaChannel& ch, uint32_t id, uint64_t uid, const sockaddr* addr, uint64_t response);
  void on_cm_event(UcmaId& id, const CmEvent& e);
  void on_connect_request(UcmaId& listener, const CmEvent& e);
  void on_sidr_request(UcmaId& listener, const CmEvent& e);
  void on_sidr_reply(UcmaId& id, const CmEvent& e);
  int connect_ud(UcmaId& id, const rdma_ucm_conn_param& cp);
  int accept_ud(UcmaId& id, const rdma_ucm_conn_param& cp);
  CmHandler handler_for(uint32_t handle);

  std::map<int, std::shared_ptr<UcmaChannel>> channels_;  ///< shared: a command in progress keeps its own
  std::map<uint32_t, std::unique_ptr<UcmaId>> ids_;
  std::map<uint32_t, UcmaMc> mcs_;
  uint32_t next_handle_ = 1;
  uint16_t next_port_ = 49152;
};

}  // namespace hcasim::drv::cm
