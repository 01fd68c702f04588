// SPDX-License-Identifier: Apache-2.0
/**
 * @file dma_engine.h
 * @brief The HCA's PCIe DMA engine: reads and writes host memory by IOVA through the IOMMU.
 *
 * Data moves functionally when the access is issued (memcpy-class, once per burst); the
 * caller accounts the time with read_latency_ps()/write_latency_ps() and schedules the
 * consequence. Host memory is reached through a HostMemory port so a device process can
 * serve client processes (process_vm_readv/writev) as well as its own address space.
 */
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "host_visible.h"
#include "iommu.h"
#include "packet.h"
#include "timed_queue.h"
#include "timing_profile.h"
#include "trace.h"

namespace hcasim::model {

/**
 * @brief What a DMA read fetches, which tells a device in another process whether it may serve
 *        the read from a copy of the memory it made earlier.
 */
enum class ReadFor : uint8_t {
  /** Bytes software may change at any moment (an RDMA READ or atomic target, a ring, a record). */
  Device,
  /**
   * The payload of a posted send work request: software must not change it between posting and
   * the completion (ibv_post_send(3)), so a copy made after the doorbell that announced it is
   * as good as memory.
   */
  PostedPayload,
};

/** @brief How the device reaches the memory behind an IOVA mapping. Default: this process. */
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual bool read(const uint8_t* hva, void* dst, uint64_t len, ReadFor why);
  virtual bool write(uint8_t* hva, const void* src, uint64_t len);
  /**
   * @brief Whether software may be looking at this memory now, so that a write into it should
   * end a waiting program's step (host_visible.h). Always, in the program's own process.
   */
  virtual bool watched() const { return true; }
};

class DmaEngine {
 public:
  DmaEngine(Iommu& iommu, const TimingProfile& prof, Tracer& tracer)
      : iommu_(iommu),
        prof_(prof),
        tracer_(tracer),
        landing_("dma_posted", [this](uint64_t&) { land_due(); }) {}
  ~DmaEngine();
  DmaEngine(const DmaEngine&) = delete;
  DmaEngine& operator=(const DmaEngine&) = delete;
  void set_host_memory(HostMemory* mem) { mem_ = mem; }

  /**
   * @brief For its scope, the received frame the HCA acts on: a posted write whose bytes lie in
   * it holds the frame (hold_packet()) until it lands instead of copying them. The frame is not
   * changed after it is received, so the bytes that land are the ones posted, one copy fewer
   * per payload (a 4 KiB WRITE's payload was copied three times).
   */
  class ActingOn {
   public:
    ActingOn(DmaEngine& dma, Packet* frame) : dma_(dma), before_(dma.frame_) { dma.frame_ = frame; }
    ~ActingOn() { dma_.frame_ = before_; }
    ActingOn(const ActingOn&) = delete;
    ActingOn& operator=(const ActingOn&) = delete;

   private:
    DmaEngine& dma_;
    Packet* before_;
  };

  /**
   * @brief Read @p len bytes at @p iova; false on an IOMMU fault. Posted writes to those bytes
   * land first: a PCIe read does not pass the writes issued before it. @p why is passed to the
   * HostMemory port; it changes nothing in the model.
   */
  bool read(uint64_t iova, void* dst, uint64_t len, uint32_t qpn, const char* what,
            ReadFor why = ReadFor::Device);
  /**
   * @brief A posted write of payload: checked against the IOMMU now (false on a fault), its
   * bytes reach host memory, and so software, write_latency_ps(@p len) later, and no sooner
   * than its transfer time after the posted write before it (PCIe keeps posted writes in order
   * and moves them one after the other). Traced when it lands.
   */
  bool post_write(uint64_t iova, const void* src, uint64_t len, uint32_t qpn, const char* what);
  /** @brief When the last posted write lands: what is written after it (a CQE) lands no sooner. */
  uint64_t posted_until() const { return posted_until_; }
  /** @brief Land the posted writes due by now (before a CQE due at the same instant). */
  void land_due();
  /**
   * @brief Write @p len bytes at @p iova, now (the caller accounted its latency). With
   * @p release_last, the final byte is stored last with release semantics (the CQE/EQE owner
   * byte), so a poller that sees it sees the rest. Posted writes due by now land first.
   */
  bool write(uint64_t iova, const void* src, uint64_t len, uint32_t qpn, const char* what,
             bool release_last = false);

  /**
   * @brief Read @p len bytes at @p iova as firmware does at command time (a destroy command
   * checking a doorbell record): not traced, not counted, no IOTLB effect, so a check that
   * finds nothing leaves the trace and the counters as they were. False if not mapped.
   */
  bool peek(uint64_t iova, void* dst, uint64_t len) const;

  uint64_t read_latency_ps(uint64_t len) const { return prof_.pcie_read_ps + prof_.pcie_xfer_ps(len); }
  uint64_t write_latency_ps(uint64_t len) const { return prof_.pcie_write_ps + prof_.pcie_xfer_ps(len); }

  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t faults() const { return faults_; }

 private:
  /** IOMMU translation of @p iova (@p contig bytes are contiguous from it); nullptr (counted
   *  and traced as a fault) when nothing is mapped there. */
  uint8_t* map(uint64_t iova, uint64_t& contig, uint32_t qpn, const char* direction);
  /** A posted write on its way to host memory. */
  struct Posted {
    uint64_t at;  ///< when it lands
    uint64_t iova;
    uint32_t qpn;
    const char* what;
    uint64_t len;
    Packet* frame;              ///< held, its bytes at @c in; or nullptr, the bytes in @c copy
    const uint8_t* in;          ///< with @c frame
    std::vector<uint8_t> copy;  ///< without @c frame
    const uint8_t* bytes() const { return frame ? in : copy.data(); }
  };
  /** Takes the first posted write off the queue and lands it. */
  void land_first();
  /** Land, now, every posted write up to the last one that overlaps [@p iova, +@p len). */
  void land_overlapping(uint64_t iova, uint64_t len);
  /** Land @p p: an unmapped range (the MR went while the write was in flight) is dropped. */
  void land(Posted& p);
  /** A landed copy's byte buffer, kept for the next copy (bytes not in a held frame, such as an
   *  atomic's old value), which would otherwise allocate. */
  std::vector<uint8_t> take_spare();
  void keep_spare(std::vector<uint8_t>&& b);
  static constexpr size_t kMaxSpare = 64;
  Iommu& iommu_;
  const TimingProfile& prof_;
  Tracer& tracer_;
  HostMemory* mem_ = nullptr;  // nullptr: this process, plain memcpy
  uint64_t bytes_read_ = 0, bytes_written_ = 0, faults_ = 0;
  std::deque<Posted> posted_;  ///< in issue order, which is landing order
  uint64_t posted_until_ = 0;
  std::vector<std::vector<uint8_t>> spare_;  ///< landed copies' buffers, reused by post_write
  TimedQueue<uint64_t> landing_;
  Packet* frame_ = nullptr;  ///< ActingOn's frame
};

}  // namespace hcasim::model
