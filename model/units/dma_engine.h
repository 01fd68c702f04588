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

#include "host_visible.h"
#include "iommu.h"
#include "timing_profile.h"
#include "trace.h"

namespace hcasim::model {

/** @brief How the device reaches the memory behind an IOVA mapping. Default: this process. */
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual bool read(const uint8_t* hva, void* dst, uint64_t len);
  virtual bool write(uint8_t* hva, const void* src, uint64_t len);
};

class DmaEngine {
 public:
  DmaEngine(Iommu& iommu, const TimingProfile& prof, Tracer& tracer)
      : iommu_(iommu), prof_(prof), tracer_(tracer) {}
  void set_host_memory(HostMemory* mem) { mem_ = mem; }

  /** @brief Read @p len bytes at @p iova; false on an IOMMU fault. */
  bool read(uint64_t iova, void* dst, uint64_t len, uint32_t qpn, const char* what);
  /**
   * @brief Write @p len bytes at @p iova. With @p release_last, the final byte is stored last
   * with release semantics (the CQE/EQE owner byte), so a poller that sees it sees the rest.
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
  Iommu& iommu_;
  const TimingProfile& prof_;
  Tracer& tracer_;
  HostMemory* mem_ = nullptr;  // nullptr: this process, plain memcpy
  uint64_t bytes_read_ = 0, bytes_written_ = 0, faults_ = 0;
};

}  // namespace hcasim::model
