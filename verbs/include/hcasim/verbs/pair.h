// SPDX-License-Identifier: Apache-2.0
/**
 * @file pair.h
 * @brief One end of an RC connection to one peer: a QP and its CQ, address exchange,
 *        connect, flow-controlled messages and slot buffers.
 *
 * Life cycle: the constructor creates the CQ (on the device's completion channel in event
 * mode) and the QP, moves it RESET -> INIT and posts every receive, so whatever the peer
 * sends after connecting finds a receive. address() is then exchanged out of band (a Store);
 * connect() moves the QP INIT -> RTR -> RTS.
 *
 * What travels on the QP (see docs/verbs.md for the byte formats):
 *
 * | operation            | immediate            | payload                      | class |
 * |----------------------|----------------------|------------------------------|-------|
 * | SEND                 | none                 | message header + bytes       | data  |
 * | SEND_WITH_IMM        | slot                 | grant {count, rkey, addr, len}| data  |
 * | RDMA_WRITE           | none                 | a chunk of a buffer send     | data (no receive) |
 * | RDMA_WRITE_WITH_IMM  | slot                 | the (last chunk of a) send   | data  |
 * | SEND_WITH_IMM        | (data << 16) \| acks | none (zero length)           | ack   |
 *
 * Data items are flow-controlled with credits (FlowControl); acks return credits. Messages,
 * grants and the last write of a send carry IBV_SEND_SOLICITED (the peer is waiting for
 * them); acks do not. In event mode the CQ is armed solicited-only unless something local
 * needs any completion (queued items, an ack that waits for credits, a thread in waitSend).
 *
 * Thread safety: every public member may be called from any thread.
 */
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hcasim/verbs/address.h"
#include "hcasim/verbs/buffer.h"
#include "hcasim/verbs/flow_control.h"

namespace hcasim::verbs {

class Device;

struct PairOptions {
  uint32_t dataWr = 32;                      ///< data WRs in flight per direction (see FlowControl)
  uint32_t ackWr = 8;                        ///< ack WRs in flight per direction, >= 4
  uint32_t maxMessageBytes = 1024;           ///< largest Pair::send() payload
  size_t maxWriteBytes = size_t(1) << 30;    ///< RDMA writes are cut into WRs of at most this
  std::chrono::milliseconds timeout{30000};  ///< default for every wait
  bool solicited = true;                     ///< SE on what the peer waits for; arm solicited-only
  uint8_t qpTimeout = 14;                    ///< local ACK timeout, 4.096 us * 2^14 = 67 ms
  uint8_t retryCnt = 7;
  uint8_t rnrRetry = 7;      ///< 7 = retry forever (an RNR NAK is a bug here anyway)
  uint8_t minRnrTimer = 12;  ///< 0.64 ms
  /// Inline bytes asked for at QP creation; if the device refuses, 64, then 0. Writes and
  /// messages up to what it grants go inline (the data travels in the WQE).
  uint32_t maxInlineData = 128;
  int psn = -1;  ///< initial PSN; -1: random
  /**
   * A wait that has lasted this long without its condition coming true sends a liveness probe
   * (a zero-length RDMA WRITE, which needs no receive and no key at the peer) on every pair of
   * the device, and again each time this much more passes; 0: never. A probe over a dead link
   * runs out of retries and fails its pair with the WC status, which then ends the waits of the
   * group and reaches the peers (PairGroup). Without it, a rank with nothing in flight over the
   * broken link (waiting to receive from a healthy peer that waits on it in turn) would only
   * learn of the failure from its timeout.
   */
  std::chrono::milliseconds probeInterval{1000};
};

class Pair;

/**
 * @brief Pairs that fail together (a Context's): the first transport error on any of them ends
 * every wait on all of them, with an IoError that names both the waiting pair and the failed
 * one (its WC status). A collective cannot finish once one link of it is broken; without this,
 * a rank whose own peers are fine would only learn it from a timeout.
 *
 * The failure also crosses to the peers: the first wait that ends on it sends an abort message
 * with the error over every pair of the group still working, and a peer that receives one fails
 * its pair (and so its own group) with that error. Every rank of a collective then ends with an
 * IoError naming the pair that broke and its WC status, however far it is from the broken link.
 */
class PairGroup {
 public:
  /** @brief Record @p what (the failed pair's error) unless an earlier failure is recorded. */
  void fail(const std::string& what);
  /** @brief The first failure, or empty. */
  std::string error() const;
  /** @brief Some pair of the group failed (cheap: for wait loops). */
  bool failed() const { return failed_.load(std::memory_order_acquire); }

 private:
  friend class Pair;
  void join(Pair* p);
  void leave(Pair* p);
  /** @brief The members, if this is the first call since the failure (the one that tells peers). */
  std::vector<Pair*> claimAbort();

  mutable std::mutex mu_;
  std::string error_;
  std::atomic<bool> failed_{false};
  std::vector<Pair*> members_;
  bool aborted_ = false;  ///< the peers were told
};

class Pair {
 public:
  /**
   * @brief The tag of the last message a side sends on a pair (Context::close). Once the
   * peer's has arrived and nothing of ours waits for credits, neither side needs credits from
   * the other: no more acks are sent, since one sent then may reach a peer that has already
   * destroyed its QP and never complete.
   */
  static constexpr uint32_t kCloseTag = 0xffffffffu;
  /** @brief @p label names the pair in errors, e.g. "pair 0->2". */
  Pair(std::shared_ptr<Device> dev, const PairOptions& opts = PairOptions(), std::string label = "");
  ~Pair();
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  // ---- connection ------------------------------------------------------------------------
  const Address& address() const { return self_; }
  std::vector<uint8_t> addressBytes() const { return self_.bytes(); }
  /** @brief INIT -> RTR -> RTS towards @p peer. Throws IoError/AddressError. */
  void connect(const Address& peer);
  void connect(const std::vector<uint8_t>& peerBytes) { connect(Address::fromBytes(peerBytes)); }
  /**
   * @brief INIT -> RTR -> RTS with attributes computed elsewhere: the rdma_cm bootstrap passes
   * rdma_init_qp_attr(3)'s (destination QPN, both PSNs, address vector, path MTU, RDMA read
   * depths, as the CM negotiated them). This pair's PairOptions still set min_rnr_timer,
   * timeout, retry_cnt and rnr_retry, so a broken link fails it as fast as after
   * connect(Address). peer() is then taken from @p rtr and address().psn from @p rts.
   * Throws std::invalid_argument if @p rtrMask lacks IBV_QP_DEST_QPN or IBV_QP_AV or
   * @p rtsMask IBV_QP_SQ_PSN, IoError if the device refuses a transition.
   */
  void connect(const ibv_qp_attr& rtr, int rtrMask, const ibv_qp_attr& rts, int rtsMask);
  bool connected() const { return connected_; }
  const Address& peer() const { return peer_; }
  const std::string& label() const { return label_; }
  const PairOptions& options() const { return opts_; }
  Device& device() const { return *dev_; }
  ibv_qp* qp() const { return qp_; }
  /** @brief The inline bytes the QP was created with (PairOptions::maxInlineData or less). */
  uint32_t maxInline() const { return maxInline_; }

  // ---- messages --------------------------------------------------------------------------
  /** @brief Queues a message of at most options().maxMessageBytes; returns at once. */
  void send(uint32_t tag, const void* data, size_t len);
  /** @brief The next message with @p tag (messages with other tags stay queued). */
  std::vector<uint8_t> recv(uint32_t tag, std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool tryRecv(uint32_t tag, std::vector<uint8_t>& out);

  // ---- buffers ---------------------------------------------------------------------------
  std::unique_ptr<SendBuffer> createSendBuffer(uint32_t slot, void* ptr, size_t size);
  std::unique_ptr<SendBuffer> createSendBuffer(uint32_t slot, std::shared_ptr<MemoryRegion> mr, size_t offset,
                                               size_t size);
  /** @brief Registers, then grants the peer @p grants writes (0: grant later). */
  std::unique_ptr<RecvBuffer> createRecvBuffer(uint32_t slot, void* ptr, size_t size, uint32_t grants = 1);
  std::unique_ptr<RecvBuffer> createRecvBuffer(uint32_t slot, std::shared_ptr<MemoryRegion> mr, size_t offset,
                                               size_t size, uint32_t grants = 1);

  /**
   * @brief Waits until everything queued is posted and completed (the peer's HCA has it).
   * Flow-control acks are not waited for: see FlowControl::dataQuiescent().
   */
  void drain(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // ---- introspection ---------------------------------------------------------------------
  struct Stats {
    uint64_t messagesSent = 0, messagesReceived = 0;
    uint64_t grantsSent = 0, grantsReceived = 0;
    uint64_t writesSent = 0, writeWrsPosted = 0, writesReceived = 0;
    uint64_t acksSent = 0, acksReceived = 0;
    uint64_t completions = 0, events = 0, pollCalls = 0;
    uint64_t maxQueued = 0;   ///< most data items ever waiting for credits
    uint64_t probesSent = 0;  ///< liveness probes (PairOptions::probeInterval)
  };
  Stats stats() const;
  /** @brief Credits, queue, slots: for error messages and debugging. */
  std::string state() const;
  /** @brief The first transport error, or empty. */
  std::string error() const;
  /** @brief Join @p group (before use): this pair's failure ends the group's waits, and theirs ours. */
  void setGroup(std::shared_ptr<PairGroup> group);

 private:
  /** @brief INIT -> RTR -> RTS (mu_ held), our timers and retry counts over the caller's. */
  void toRts(ibv_qp_attr rtr, int rtrMask, ibv_qp_attr rts, int rtsMask, const Address& peer);
  /** @brief At teardown: wait up to @p timeout for the flow-control acks too (see pair.cpp). */
  void settleAcks(std::chrono::milliseconds timeout);
  friend class Device;
  friend class SendBuffer;
  friend class RecvBuffer;

  struct WriteOp {
    uint64_t id;
    uint32_t slot;
    uint64_t laddr;
    uint32_t lkey;
    size_t length, roffset;
    uint64_t raddr = 0;
    uint32_t rkey = 0;
    uint32_t wrs = 1;
    uint32_t completedWrs = 0;
  };
  struct Grant {
    uint64_t addr;
    uint64_t length;
    uint32_t rkey;
    uint32_t count;
  };
  struct SendSlot {
    SendBuffer* buf = nullptr;
    std::deque<Grant> grants;
    std::deque<WriteOp> waiting;  ///< sends without a grant yet
    uint64_t issued = 0, completed = 0;
    std::string error;
  };
  struct RecvSlot {
    RecvBuffer* buf = nullptr;
    uint64_t arrived = 0, taken = 0, granted = 0;
    std::deque<uint32_t> lengths;
  };
  struct Message {
    uint32_t tag;
    std::vector<uint8_t> bytes;
  };
  using Clock = std::chrono::steady_clock;

  // All of these run with mu_ held.
  void postRecv(uint32_t idx);
  void postAck(uint32_t imm);
  void postItem(uint64_t cookie, uint32_t index, uint32_t wrs);
  void enqueueControl(uint8_t type, uint32_t tagOrSlot, const void* body, size_t len);
  void matchWrites(uint32_t slot);
  void handle(const ibv_wc& wc);
  int pollLocked();
  void afterChange();
  bool needAnyCompletion() const;
  void ensureArmed();
  void rearm();
  void fail(const std::string& what);
  /** @brief Throws IoError if this pair failed (telling the peers first: abortPeers). */
  void throwIfFailed();
  /** @brief Once per group, after a failure: an abort message to every peer still reachable. */
  void abortPeers();
  /** @brief Queue the abort message carrying @p why, unless this pair itself failed. */
  void sendAbortLocked(const std::string& why);
  /**
   * @brief A liveness probe on this pair (PairOptions::probeInterval), unless it is busy (its
   * lock is taken), not connected, failed, or its last probe has not completed. Takes the lock.
   */
  void probe();
  /** @brief "; hcasim1 port 1 is down" when the device's port is not active, else empty (timeouts). */
  std::string portNote() const;
  std::string describeWc(const ibv_wc& wc) const;
  std::string state_locked() const;

  /** Waits (busy-polling or on cv_) until pred() holds; throws on error or deadline. */
  template <class Pred>
  void waitFor(std::unique_lock<std::mutex>& lk, Pred pred, Clock::time_point deadline, const char* what);
  Clock::time_point deadline(std::optional<std::chrono::milliseconds> t) const;
  /** @brief Wait, as a sender, until @p done (throws on timeout or failure, like waitFor). */
  template <typename Pred>
  void waitSends(Pred done, std::optional<std::chrono::milliseconds> timeout, const char* what);

  void removeSendBuffer(SendBuffer* b);
  void removeRecvBuffer(RecvBuffer* b);
  void sendWrite(SendBuffer* b, size_t offset, size_t length, size_t roffset);
  void waitSend(SendBuffer* b, uint64_t atMost, std::optional<std::chrono::milliseconds> timeout);
  uint64_t outstanding(const SendBuffer* b) const;
  void grant(RecvBuffer* b, uint32_t count);
  uint32_t waitRecv(RecvBuffer* b, std::optional<std::chrono::milliseconds> timeout);
  uint64_t ready(const RecvBuffer* b) const;

  // Called by Device.
  /** @brief Busy mode: poll once (try-lock); unless @p always, only if work is held up here. */
  int progress(bool always);
  void onEvent(ibv_cq* cq);  ///< event mode: the loop thread got an event for our CQ

  std::shared_ptr<Device> dev_;
  PairOptions opts_;
  std::string label_;
  Address self_, peer_;
  bool connected_ = false;
  bool peerClosed_ = false;  ///< the peer's kCloseTag message has arrived
  bool event_ = false;

  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t maxInline_ = 0;
  size_t slotBytes_ = 0;  ///< header + maxMessageBytes
  std::vector<uint8_t> recvStaging_, sendStaging_;
  ibv_mr* recvMr_ = nullptr;
  ibv_mr* sendMr_ = nullptr;
  std::vector<uint32_t> freeSendStaging_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  FlowControl fc_;
  std::unordered_map<uint64_t, std::vector<uint8_t>> controls_;  ///< queued SENDs by cookie id
  std::unordered_map<uint64_t, WriteOp> writes_;                 ///< posted writes by id
  uint64_t nextId_ = 1;
  std::map<uint32_t, SendSlot> sendSlots_;
  std::map<uint32_t, RecvSlot> recvSlots_;
  std::deque<Message> inbox_;
  std::string error_;
  std::shared_ptr<PairGroup> group_;  ///< the pairs that fail with this one (may be null)
  bool armedNext_ = false;
  bool probeOutstanding_ = false;  ///< a liveness probe awaits its completion
  int sendWaiters_ = 0;
  uint64_t writesWithoutGrant_ = 0;  ///< sends waiting in SendSlot::waiting, over all slots
  unsigned eventsUnacked_ = 0;
  Stats stats_;
};

}  // namespace hcasim::verbs
