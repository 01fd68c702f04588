// SPDX-License-Identifier: Apache-2.0
/**
 * @file mad_agent.h
 * @brief The kernel's MAD layer for one HCA port: the GSI QP (QP1) that carries the connection
 *        manager's management datagrams, with its receive buffers, send slots and address
 *        handles. Built on the provider's verbs, as the kernel's MAD layer is built on its verbs.
 */
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "ip_addr.h"

namespace hcasim::drv {
class HcaLink;
}

namespace hcasim::drv::cm {

constexpr size_t kMadBytes = 256;   ///< every MAD is 256 bytes (IBTA 13.4.1)
constexpr uint8_t kCmGidIndex = 1;  ///< the IPv4-mapped GID rdma_cm uses on RoCEv2

/** @brief A MAD that arrived on the GSI QP. */
struct ReceivedMad {
  const uint8_t* mad;  ///< kMadBytes bytes
  uint8_t sgid[16];    ///< the sender's GID (from the network header)
  uint32_t src_qp;     ///< the sender's QP (1 for a CM)
};

/** @brief The GSI QP of port 1 of one device and what it needs to send and receive MADs. */
class MadAgent {
 public:
  /** @brief Open @p dev's GSI QP; nullptr with errno set when the device refuses. */
  static std::unique_ptr<MadAgent> open(ibv_device* dev);
  ~MadAgent();
  MadAgent(const MadAgent&) = delete;
  MadAgent& operator=(const MadAgent&) = delete;

  /** @brief The agent's own context on the device (the kernel's, not a program's). */
  ibv_context* context() const { return ctx_; }
  /** @brief The link to the device (for waiting and tracing). */
  HcaLink& link() const;
  /** @brief Port 1's GID at kCmGidIndex, the IPv4-mapped one (the host's IPv4 address). */
  const uint8_t* gid() const { return gids_[kCmGidIndex].raw; }
  /** @brief The port's GID of the same kind as @p dgid (link-local IPv6 or IPv4-mapped): the
   *  source of the CM's messages to @p dgid and of the path to it. */
  const uint8_t* gid_for(const uint8_t dgid[16]) const { return gids_[sgid_index_for(dgid)].raw; }
  /** @brief Whether @p g is one of the port's GIDs (an address of this host). */
  bool owns(const uint8_t g[16]) const;
  /** @brief The device's node GUID in host order. */
  uint64_t node_guid() const { return guid_; }

  /**
   * @brief The port's neighbour lookup (ARP for a RoCE netdev): true and the MAC if a port on
   * the network owns @p gid (a firmware command, ResolveGid).
   */
  bool resolve(const uint8_t gid[16], uint8_t mac[6]);
  /** @brief Send one MAD to the GSI QP of the port owning @p dgid; 0 or an errno. */
  int send(const uint8_t dgid[16], const uint8_t mad[kMadBytes]);
  /**
   * @brief Take every completion of the GSI QP: each MAD received goes to @p on_mad, then its
   * buffer is posted again. Returns the number of MADs received.
   */
  int progress(const std::function<void(const ReceivedMad&)>& on_mad);
  /** @brief Whether a MAD sent is still waiting for its send completion (progress() takes them). */
  bool sends_pending() const;
  /**
   * @brief Leave with the HCA (@p leave) the DREQ that ends connection @p local_id should this
   * process end without ending it, as the host's kernel CM would send it; or take it back.
   */
  void leave_dreq(uint32_t local_id, bool leave, const uint8_t dgid[16] = nullptr, uint32_t remote_id = 0,
                  uint32_t remote_qpn = 0, uint64_t tid = 0);
  /** @brief Whether a completion (a MAD received or sent) waits for progress(); only a look. */
  bool has_completion() const;
  /** @brief Arm the CQ (unless it is), so its next completion raises an event on event_fd(). */
  void arm();
  /** @brief Readable when the armed CQ has a completion event; take it with take_event(). */
  int event_fd() const { return channel_->fd; }
  /** @brief Take and acknowledge pending completion events (non-blocking). */
  void take_events();

 private:
  MadAgent() = default;
  int setup(ibv_device* dev);
  int bring_up_qp();
  int post_recv(uint32_t slot);
  ibv_ah* ah_for(const uint8_t dgid[16]);

  static constexpr uint32_t kRecvSlots = 64, kSendSlots = 64;
  static constexpr size_t kRecvBytes = 40 + kMadBytes;  ///< network header, then the MAD

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  static constexpr uint64_t kBufBytes = kRecvSlots * kRecvBytes + kSendSlots * kMadBytes;
  /// kRecvSlots receive buffers, then kSendSlots send buffers: driver memory (HcaLink::alloc_dma_pages),
  /// as the kernel's MAD buffers are, so a MAD posted as the process ends can still be read.
  uint8_t* buf_ = nullptr;
  std::vector<bool> send_busy_;
  uint32_t next_send_ = 0;
  bool armed_ = false;  ///< the CQ will raise an event at its next completion
  std::map<std::array<uint8_t, 16>, ibv_ah*> ahs_;
  ibv_gid gids_[hw::kGidTableLen]{};  ///< the port's GID table
  uint64_t guid_ = 0;
};

}  // namespace hcasim::drv::cm
