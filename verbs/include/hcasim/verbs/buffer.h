// SPDX-License-Identifier: Apache-2.0
/**
 * @file buffer.h
 * @brief Registered memory and the per-slot buffers RDMA writes move data between.
 *
 * A slot is a 32-bit number both sides agree on. The receiver's RecvBuffer for slot s
 * publishes its memory region to the sender with a SEND_WITH_IMM (imm = s) carrying
 * {addr, length, rkey, count}: a *grant* of @c count writes. The sender's SendBuffer for slot
 * s takes grants in order; each SendBuffer::send() uses one grant and becomes RDMA_WRITEs of
 * at most PairOptions::maxWriteBytes, the last one RDMA_WRITE_WITH_IMM (imm = s) so the
 * receiver gets one completion per send. RecvBuffer::waitRecv() waits for the next one.
 *
 * Grants make overwrites impossible by construction: the receiver grants again only when it
 * is done with the region the next write lands in. Contract: every grant a RecvBuffer gives
 * must be used by a send before the RecvBuffer is destroyed (its memory is deregistered).
 * Grants a SendBuffer leaves unused when it is destroyed are dropped with it, not kept for a
 * later SendBuffer of the same slot: a slot is one buffer's on each side for its lifetime
 * (the collectives take a new slot per instance), and the grants the internal algorithms give
 * ahead would otherwise name memory their peer has already deregistered.
 */
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace hcasim::verbs {

class Device;
class Pair;

/** @brief ibv_reg_mr over [ptr, ptr+size) in the device's PD; deregistered on destruction. */
class MemoryRegion {
 public:
  static constexpr int kDefaultAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  MemoryRegion(std::shared_ptr<Device> dev, void* ptr, size_t size, int access = kDefaultAccess);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  ibv_mr* mr() const { return mr_; }

 private:
  std::shared_ptr<Device> dev_;
  void* ptr_;
  size_t size_;
  ibv_mr* mr_ = nullptr;
};

/** @brief What both sides of a slot are: [offset, offset+size) of a memory region, on a pair. */
class SlotBuffer {
 public:
  SlotBuffer(const SlotBuffer&) = delete;
  SlotBuffer& operator=(const SlotBuffer&) = delete;

  uint32_t slot() const { return slot_; }
  size_t size() const { return size_; }
  void* ptr() const;

 protected:
  friend class Pair;
  SlotBuffer(Pair* pair, uint32_t slot, std::shared_ptr<MemoryRegion> mr, size_t offset, size_t size);
  ~SlotBuffer() = default;
  Pair* pair_;
  uint32_t slot_;
  std::shared_ptr<MemoryRegion> mr_;
  size_t offset_, size_;
};

/** @brief The sending side of a slot: [offset, offset+size) of a memory region. */
class SendBuffer : public SlotBuffer {
 public:
  ~SendBuffer();  ///< waits (bounded by the pair timeout) for outstanding sends

  /**
   * @brief Writes @p length bytes at @p offset of this buffer to @p roffset of the peer's
   * RecvBuffer for this slot. Returns at once: the write waits for a grant, then for credits.
   */
  void send(size_t offset, size_t length, size_t roffset = 0);
  void send() { send(0, size_, 0); }
  /** @brief Waits until every send so far completed (the data is at the peer). */
  void waitSend(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /**
   * @brief Waits until at most @p atMost sends are outstanding. A pair completes its sends in
   * the order they were issued, so after waitOutstanding(k) every send but the last k is at
   * the peer and its source memory may be reused.
   */
  void waitOutstanding(uint64_t atMost, std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /** @brief Sends issued and not completed yet. */
  uint64_t outstanding() const;

 private:
  friend class Pair;
  using SlotBuffer::SlotBuffer;
};

/** @brief The receiving side of a slot: [offset, offset+size) of a memory region. */
class RecvBuffer : public SlotBuffer {
 public:
  ~RecvBuffer();

  /** @brief Lets the peer send @p count more writes into this buffer. */
  void grant(uint32_t count = 1);
  /** @brief Waits for the next write into this buffer; returns the byte count of its last WR. */
  uint32_t waitRecv(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /** @brief Writes that arrived and were not taken by waitRecv() yet. */
  uint64_t ready() const;

 private:
  friend class Pair;
  using SlotBuffer::SlotBuffer;
};

}  // namespace hcasim::verbs
