// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/buffer.h"

#include <cerrno>

#include "hcasim/verbs/device.h"
#include "hcasim/verbs/error.h"
#include "hcasim/verbs/pair.h"

namespace hcasim::verbs {

MemoryRegion::MemoryRegion(std::shared_ptr<Device> dev, void* ptr, size_t size, int access)
    : dev_(std::move(dev)), ptr_(ptr), size_(size) {
  // Some devices refuse zero-length registrations; register one byte so the keys exist.
  static uint8_t dummy[64];
  void* p = size ? ptr : dummy;
  mr_ = ibv_reg_mr(dev_->pd(), p, size ? size : 1, access);
  if (!mr_)
    throwSystemError(dev_->name() + ": ibv_reg_mr(" + std::to_string(size) + " bytes, access " +
                         std::to_string(access) + ")",
                     errno);
}

MemoryRegion::~MemoryRegion() {
  if (mr_) ibv_dereg_mr(mr_);
}

SlotBuffer::SlotBuffer(Pair* pair, uint32_t slot, std::shared_ptr<MemoryRegion> mr, size_t offset,
                       size_t size)
    : pair_(pair), slot_(slot), mr_(std::move(mr)), offset_(offset), size_(size) {}
void* SlotBuffer::ptr() const { return static_cast<uint8_t*>(mr_->ptr()) + offset_; }

SendBuffer::~SendBuffer() { pair_->removeSendBuffer(this); }
void SendBuffer::send(size_t offset, size_t length, size_t roffset) {
  pair_->sendWrite(this, offset, length, roffset);
}
void SendBuffer::waitSend(std::optional<std::chrono::milliseconds> timeout) {
  pair_->waitSend(this, 0, timeout);
}
void SendBuffer::waitOutstanding(uint64_t atMost, std::optional<std::chrono::milliseconds> timeout) {
  pair_->waitSend(this, atMost, timeout);
}
uint64_t SendBuffer::outstanding() const { return pair_->outstanding(this); }

RecvBuffer::~RecvBuffer() { pair_->removeRecvBuffer(this); }
void RecvBuffer::grant(uint32_t count) { pair_->grant(this, count); }
uint32_t RecvBuffer::waitRecv(std::optional<std::chrono::milliseconds> timeout) {
  return pair_->waitRecv(this, timeout);
}
uint64_t RecvBuffer::ready() const { return pair_->ready(this); }

}  // namespace hcasim::verbs
