// SPDX-License-Identifier: Apache-2.0
/**
 * @file ucma.h
 * @brief The kernel's RDMA connection manager and its user interface (Linux's cma.c and
 *        ucma.c): ids with IP addresses and ports over the IB CM's connections, the commands
 *        of <rdma/rdma_user_cm.h> and the event channels librdmacm reads.
 *
 * An id belongs to a channel (a descriptor from hcasim_ucma_open). Addresses are the simulated
 * hosts' IPv4 addresses (the IPv4-mapped GID at index 1 of each port); a port space and port
 * make the IB service ID (0x0000000001060000 + port for RDMA_PS_TCP), and rdma_cm's 36-byte IP
 * header leads the REQ's private data, as on every RoCE host.
 */
#pragma once

#include <netinet/in.h>
#include <rdma/rdma_user_cm.h>
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "ib_cm.h"

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
  sockaddr_in src{}, dst{};
  bool reuse_addr = false;
  MadAgent* agent = nullptr;  ///< the device the address lives on (null: wildcard)
  CmId* cm = nullptr;
  uint32_t qpn = 0, psn = 0, remote_qpn = 0, remote_psn = 0;
  uint8_t responder_resources = 0, initiator_depth = 0, retry_count = 7, rnr_retry_count = 7, srq = 0;
  uint8_t tos = 0, ack_timeout = 17;  ///< RoCE: packet lifetime 16, plus 1 (cma.c)
  uint32_t events_reported = 0;
  std::vector<UcmaId*> listen_children;  ///< a wildcard listener's per-device CM ids are in cm_listens
  std::vector<CmId*> cm_listens;
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
};

/** @brief The process's rdma_cm: every channel and id. */
class Ucma {
 public:
  static Ucma& get();
  int open();
  int close(int fd);
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
  int start_resolve(UcmaId& id, const sockaddr* src, const sockaddr* dst, uint32_t timeout_ms);
  MadAgent* device_of(uint32_t ipv4_host_order);
  bool port_in_use(const UcmaId& self, uint16_t port) const;
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
  void on_cm_event(UcmaId& id, const CmEvent& e);
  void on_connect_request(UcmaId& listener, const CmEvent& e);
  void on_sidr_request(UcmaId& listener, const CmEvent& e);
  void on_sidr_reply(UcmaId& id, const CmEvent& e);
  int connect_ud(UcmaId& id, const rdma_ucm_conn_param& cp);
  int accept_ud(UcmaId& id, const rdma_ucm_conn_param& cp);
  CmHandler handler_for(uint32_t handle);

  std::map<int, std::unique_ptr<UcmaChannel>> channels_;
  std::map<uint32_t, std::unique_ptr<UcmaId>> ids_;
  uint32_t next_handle_ = 1;
  uint16_t next_port_ = 49152;
};

}  // namespace hcasim::drv::cm
