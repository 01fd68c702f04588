// SPDX-License-Identifier: Apache-2.0
#include "dma_engine.h"

#include <systemc>

#include <cinttypes>
#include <cstring>

namespace hcasim::model {

bool HostMemory::read(const uint8_t* hva, void* dst, uint64_t len, ReadFor) {
  std::memcpy(dst, hva, len);
  return true;
}
bool HostMemory::write(uint8_t* hva, const void* src, uint64_t len) {
  std::memcpy(hva, src, len);
  return true;
}

uint8_t* DmaEngine::map(uint64_t iova, uint64_t& contig, uint32_t qpn, const char* direction) {
  uint8_t* hva = iommu_.translate(iova, contig);
  if (!hva) {
    ++faults_;
    HCASIM_TRACE(tracer_, Dma, Error, qpn, TraceFields().set_addr(iova).set_flag(kTfError),
                 "IOMMU fault %s iova=0x%" PRIx64, direction, iova);
  }
  return hva;
}

bool DmaEngine::peek(uint64_t iova, void* dst, uint64_t len) const {
  uint64_t contig = 0;
  uint8_t* hva = iommu_.lookup(iova, contig);
  if (!hva || contig < len) return false;
  if (mem_) return mem_->read(hva, dst, len, ReadFor::Device);
  std::memcpy(dst, hva, len);
  return true;
}

bool DmaEngine::read(uint64_t iova, void* dst, uint64_t len, uint32_t qpn, const char* what, ReadFor why) {
  if (!posted_.empty()) land_overlapping(iova, len);
  HCASIM_TRACE(tracer_, Dma, DmaRead, qpn, TraceFields().set_addr(iova).set_count(uint32_t(len)),
               "%-10s iova=0x%" PRIx64 " len=%" PRIu64, what, iova, len);
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < len) {
    uint64_t contig = 0;
    uint8_t* hva = map(iova + done, contig, qpn, "reading");
    if (!hva) return false;
    uint64_t n = contig < len - done ? contig : len - done;
    if (mem_) {
      if (!mem_->read(hva, out + done, n, why)) return false;
    } else if (n == 8 && (uintptr_t(hva) & 7) == 0) {
      // A doorbell record (or another word software updates with a release store): read it
      // as one acquire load, like the device's single PCIe read of it, so what software wrote
      // before it (the WQEs it announces) is seen too.
      const uint64_t v = __atomic_load_n(reinterpret_cast<const uint64_t*>(hva), __ATOMIC_ACQUIRE);
      std::memcpy(out + done, &v, 8);
    } else if (n == 4 && (uintptr_t(hva) & 3) == 0) {
      const uint32_t v = __atomic_load_n(reinterpret_cast<const uint32_t*>(hva), __ATOMIC_ACQUIRE);
      std::memcpy(out + done, &v, 4);
    } else {
      std::memcpy(out + done, hva, n);
    }
    done += n;
  }
  bytes_read_ += len;
  return true;
}

bool DmaEngine::write(uint64_t iova, const void* src, uint64_t len, uint32_t qpn, const char* what,
                      bool release_last) {
  if (!posted_.empty()) land_due();  // a CQE due now lands after the payload due now, never before
  HCASIM_TRACE(tracer_, Dma, DmaWrite, qpn, TraceFields().set_addr(iova).set_count(uint32_t(len)),
               "%-10s iova=0x%" PRIx64 " len=%" PRIu64, what, iova, len);
  auto* in = static_cast<const uint8_t*>(src);
  uint64_t body = release_last && len > 0 ? len - 1 : len;
  uint64_t done = 0;
  while (done < len) {
    uint64_t contig = 0;
    uint8_t* hva = map(iova + done, contig, qpn, "writing");
    if (!hva) return false;
    uint64_t limit = done < body ? body : len;
    uint64_t n = contig < limit - done ? contig : limit - done;
    if (done >= body) {
      // The owner byte: publish after everything before it (through the host-memory port when
      // there is one: the hva may belong to another process).
      n = 1;
      if (mem_) {
        if (!mem_->write(hva, in + done, 1)) return false;
      } else {
        __atomic_store_n(hva, in[done], __ATOMIC_RELEASE);
      }
    } else if (mem_) {
      if (!mem_->write(hva, in + done, n)) return false;
    } else {
      std::memcpy(hva, in + done, n);
    }
    done += n;
  }
  bytes_written_ += len;
  note_host_visible(!mem_ || mem_->watched());
  return true;
}

bool DmaEngine::post_write(uint64_t iova, const void* src, uint64_t len, uint32_t qpn, const char* what) {
  for (uint64_t done = 0; done < len;) {  // a fault is found when the write is issued
    uint64_t contig = 0;
    if (!map(iova + done, contig, qpn, "writing")) return false;
    done += contig < len - done ? contig : len - done;
  }
  const auto* in = static_cast<const uint8_t*>(src);
  Posted p{now_ps() + write_latency_ps(len), iova, qpn, what, len, nullptr, nullptr, {}};
  if (frame_ && in >= frame_->data && in + len <= frame_->data + sizeof frame_->data) {
    hold_packet(frame_);
    p.frame = frame_;
    p.in = in;
  } else {
    p.copy = take_spare();
    p.copy.assign(in, in + len);
  }
  // Behind the writes before it, it still crosses the link after them (its transfer time).
  if (p.at < posted_until_ + prof_.pcie_xfer_ps(len)) p.at = posted_until_ + prof_.pcie_xfer_ps(len);
  posted_until_ = p.at;
  landing_.push(p.at, p.at);
  posted_.push_back(std::move(p));
  return true;
}

DmaEngine::~DmaEngine() {
  for (Posted& p : posted_)
    if (p.frame) release_packet_hold(p.frame);
}

void DmaEngine::land_first() {
  Posted p = std::move(posted_.front());
  posted_.pop_front();
  land(p);
  if (p.frame)
    release_packet_hold(p.frame);
  else
    keep_spare(std::move(p.copy));
}

void DmaEngine::land_due() {
  const uint64_t now = now_ps();
  while (!posted_.empty() && posted_.front().at <= now) land_first();
}

void DmaEngine::land_overlapping(uint64_t iova, uint64_t len) {
  size_t through = 0;  // how many to land: up to the last that overlaps
  for (size_t i = 0; i < posted_.size(); ++i)
    if (posted_[i].iova < iova + len && iova < posted_[i].iova + posted_[i].len) through = i + 1;
  for (; through > 0; --through) land_first();
}

std::vector<uint8_t> DmaEngine::take_spare() {
  if (spare_.empty()) return {};
  std::vector<uint8_t> b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

void DmaEngine::keep_spare(std::vector<uint8_t>&& b) {
  if (spare_.size() < kMaxSpare) spare_.push_back(std::move(b));
}

void DmaEngine::land(Posted& p) {
  const uint64_t len = p.len;
  for (uint64_t done = 0; done < len;) {
    uint64_t contig = 0;
    uint8_t* hva = iommu_.lookup(p.iova + done, contig);
    if (!hva) return;
    const uint64_t n = contig < len - done ? contig : len - done;
    if (mem_) {
      if (!mem_->write(hva, p.bytes() + done, n)) return;  // the program is gone
    } else {
      std::memcpy(hva, p.bytes() + done, n);
    }
    done += n;
  }
  HCASIM_TRACE(tracer_, Dma, DmaWrite, p.qpn, TraceFields().set_addr(p.iova).set_count(uint32_t(len)),
               "%-10s iova=0x%" PRIx64 " len=%" PRIu64, p.what, p.iova, len);
  bytes_written_ += len;
  note_host_visible(!mem_ || mem_->watched());
}

}  // namespace hcasim::model
