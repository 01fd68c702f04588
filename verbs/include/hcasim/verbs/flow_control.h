// SPDX-License-Identifier: Apache-2.0
/**
 * @file flow_control.h
 * @brief Credit-based flow control for SEND/RECV on one RC connection, as pure
 *        logic: no verbs calls, so it is tested on its own with random interleavings.
 *
 * A SEND (or RDMA_WRITE_WITH_IMM) needs a receive WR posted at the peer, or the peer answers
 * with an RNR NAK. The budget on each side:
 *
 *  - send queue:  max_send_wr = dataWr + ackWr, split into data WRs (SEND, RDMA_WRITE,
 *                 RDMA_WRITE_WITH_IMM) and ack WRs (SEND_WITH_IMM, zero length);
 *  - receive queue: max_recv_wr = dataWr + ackWr, so a full send queue of the peer fits;
 *  - completion queue: max_cqe = max_send_wr + max_recv_wr (every WR is signaled).
 *
 * Counters (all start full):
 *  - localData / localAck:   send-queue WRs of each class we may still post; back on completion;
 *  - remoteData / remoteAck: receive WRs the peer has posted for us; back when the peer acks;
 *  - unackedData / unackedAcks: data items and acks we received (and re-posted the receive
 *    for) but have not told the peer about.
 *
 * An ack is a zero-length SEND_WITH_IMM whose immediate packs two u16 counts: (data << 16) |
 * acks. It is sent when unackedData reaches half the data budget or unackedAcks reaches half
 * the ack budget — so a single ack never causes an ack, and ack traffic dies out
 * geometrically. One remote ack credit is held back for acks that return ack credits
 * (unackedAcks at the threshold): otherwise both sides could spend their last ack credit on
 * data acks at the same time, each then waiting for the other's ack-of-acks forever.
 *
 * Data items are posted strictly in FIFO order; items beyond the credits wait in the queue.
 * An item may need several send WRs (an RDMA write cut into chunks): only its last WR
 * consumes a remote receive (the chunks before it are plain RDMA_WRITEs).
 */
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace hcasim::verbs {

class FlowControl {
 public:
  struct Config {
    uint32_t dataWr = 32;  ///< max_send_data_wr: data sends in flight (and receives for them)
    uint32_t ackWr = 8;    ///< max_send_imm_wr: acks in flight (and receives for them), >= 4
  };
  static constexpr uint32_t kMinAckWr = 4;
  static constexpr uint32_t kMaxWr = 0x7fff;

  /** @brief Throws std::invalid_argument for budgets out of range. */
  explicit FlowControl(Config c);

  const Config& config() const { return cfg_; }
  uint32_t sendQueueDepth() const { return cfg_.dataWr + cfg_.ackWr; }
  uint32_t recvQueueDepth() const { return cfg_.dataWr + cfg_.ackWr; }
  uint32_t completionQueueDepth() const { return sendQueueDepth() + recvQueueDepth(); }

  // ---- outgoing data ---------------------------------------------------------------------
  /** @brief Queues an item of @p wrs (>= 1) send WRs, identified by @p cookie. */
  void enqueue(uint64_t cookie, uint32_t wrs);
  /**
   * @brief Posts, in FIFO order, every WR the credits allow: calls post(cookie, index, wrs)
   * for WR @p index (0-based) of an item of @p wrs WRs; the last one (index == wrs - 1)
   * consumes a remote receive. If post throws, the WR counts as not posted.
   * @return WRs posted.
   */
  template <class Post>
  uint32_t flush(Post&& post);

  // ---- acks ------------------------------------------------------------------------------
  struct Ack {
    uint16_t data = 0;
    uint16_t acks = 0;
    uint32_t imm() const { return pack(data, acks); }
  };
  /** @brief An ack to post now (counters already charged), or nothing. */
  std::optional<Ack> takeAck();

  // ---- events ----------------------------------------------------------------------------
  /** @brief A data WR of ours completed: its send-queue slot is free. */
  void onDataCompletion();
  /** @brief An ack WR of ours completed. */
  void onAckCompletion();
  /** @brief We consumed a receive for a data item from the peer and posted it again. */
  void onDataReceived();
  /** @brief We consumed a receive for the peer's ack (and posted it again); its credits return. */
  void onAckReceived(uint32_t imm);
  /** @brief The credits owed to the peer are of no use to it any more (it sends nothing else):
   *  no ack is due for them. */
  void forgetOwedCredits() { unackedData_ = unackedAcks_ = 0; }

  // ---- state -----------------------------------------------------------------------------
  uint32_t localData() const { return localData_; }
  uint32_t localAck() const { return localAck_; }
  uint32_t remoteData() const { return remoteData_; }
  uint32_t remoteAck() const { return remoteAck_; }
  uint32_t unackedData() const { return unackedData_; }
  uint32_t unackedAcks() const { return unackedAcks_; }
  uint32_t dataThreshold() const { return dataThreshold_; }
  uint32_t ackThreshold() const { return ackThreshold_; }
  size_t queued() const { return queue_.size(); }
  /** @brief An ack is due but the credits do not allow it yet. */
  bool ackDue() const { return unackedData_ >= dataThreshold_ || unackedAcks_ >= ackThreshold_; }
  /**
   * @brief Nothing queued and every data WR complete. Acks are left out on purpose: the last
   * acks of a connection go to a peer that may already be gone, and never complete.
   */
  bool dataQuiescent() const { return queue_.empty() && localData_ == cfg_.dataWr; }
  /** @brief Our own WRs of both classes are all complete and nothing waits. */
  bool quiescent() const { return queue_.empty() && localData_ == cfg_.dataWr && localAck_ == cfg_.ackWr; }
  std::string str() const;

  static uint32_t pack(uint16_t data, uint16_t acks) { return (uint32_t(data) << 16) | acks; }
  static std::pair<uint16_t, uint16_t> unpack(uint32_t imm) { return {uint16_t(imm >> 16), uint16_t(imm)}; }

 private:
  struct Item {
    uint64_t cookie;
    uint32_t wrs;
    uint32_t posted;
  };
  Config cfg_;
  uint32_t dataThreshold_, ackThreshold_;
  uint32_t localData_, localAck_, remoteData_, remoteAck_;
  uint32_t unackedData_ = 0, unackedAcks_ = 0;
  std::deque<Item> queue_;
};

template <class Post>
uint32_t FlowControl::flush(Post&& post) {
  uint32_t n = 0;
  while (!queue_.empty()) {
    Item& it = queue_.front();
    while (it.posted < it.wrs) {
      const bool last = it.posted + 1 == it.wrs;
      if (localData_ == 0 || (last && remoteData_ == 0)) return n;
      post(it.cookie, it.posted, it.wrs);
      --localData_;
      if (last) --remoteData_;
      ++it.posted;
      ++n;
    }
    queue_.pop_front();
  }
  return n;
}

}  // namespace hcasim::verbs
