// SPDX-License-Identifier: Apache-2.0
/**
 * @file hca_link.h
 * @brief How the driver reaches one HCA: the PCIe function's command mailbox, UAR doorbells
 *        and interrupt line, plus the platform IOMMU. The simulator implements it (sim/);
 *        nothing in driver/ knows how.
 */
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <hcasim/hca_hw.h>
#include <hcasim/trace_event.h>

namespace hcasim::drv {

class HcaLink {
 public:
  virtual ~HcaLink() = default;

  /** @brief Device name ("hcasim0"). */
  virtual const std::string& name() const = 0;
  /** @brief Execute a firmware command synchronously. */
  virtual void exec(hw::CmdMailbox& mb) = 0;
  /** @brief 64-bit store into the UAR page. */
  virtual void mmio_write64(uint32_t offset, uint64_t value) = 0;
  /**
   * @brief An SQ doorbell whose completion another thread is waiting for: like mmio_write64,
   * and in the realtime clock the interrupts the doorbell's next few microseconds raise have
   * run their handlers on this thread before it returns (so the driver can hand this thread's
   * core to the woken reader). A link that already runs them inline needs no override.
   */
  virtual void mmio_write64_irqs(uint32_t offset, uint64_t value) { mmio_write64(offset, value); }
  /**
   * @brief Zeroed, page-aligned memory for what the kernel side gives the device (queue rings,
   * buffer tables, doorbell records): DMA-coherent memory, as a host driver allocates it.
   * nullptr when none is left. The default is ordinary process memory; a device in another
   * process may hand out memory it can reach without a system call per access.
   */
  virtual uint8_t* alloc_dma_pages(uint64_t bytes);
  /** @brief Give back what alloc_dma_pages(@p bytes) returned. */
  virtual void free_dma_pages(uint8_t* p, uint64_t bytes);
  /** @brief Program the IOMMU: device address @p iova reaches @p hva for @p len bytes. */
  virtual bool iommu_map(uint64_t iova, void* hva, uint64_t len) = 0;
  virtual void iommu_unmap(uint64_t iova) = 0;
  /** @brief Interrupt handler, called with the MSI-X vector. */
  virtual void set_irq_handler(std::function<void(uint32_t vector)> isr) = 0;

  /**
   * @brief The program found nothing to do (empty poll, blocking wait). In a simulator device
   * time advances only while programs wait, so this lets it run until the device did something
   * software can observe. Returns false if the device had nothing pending.
   */
  virtual bool wait_progress() = 0;
  /** @brief An fd that becomes readable when new device work is scheduled (for blocking waits). */
  virtual int activity_fd() = 0;
  /**
   * @brief Block in poll(2) on @p fds and on new device work for up to @p timeout_ms (after a
   * wait_progress() that found nothing to do). The default polls activity_fd() too; a device
   * may instead wake only threads that block here. Leaves @p fds as it was.
   */
  virtual void wait_activity(std::vector<pollfd>& fds, int timeout_ms);
  /**
   * @brief A value that changes whenever a thread of this process calls into the device
   * (a command, a doorbell, a wait): two equal readings mean no call came in between. 0 when
   * the link does not keep one. (The CM uses it to tell a program that waits outside its
   * calls, in poll(2), from one busy with the device.)
   */
  virtual uint64_t activity_stamp() const { return 0; }

  /**
   * @brief Driver-side trace (post_send, interrupts, errors): true if some sink wants driver events
   * of @p kind, so formatting them is worth it.
   */
  virtual bool trace_on(trace::TraceKind kind) const = 0;
  /**
   * @brief Record a driver trace line (a post, an interrupt): its facts as @p f, @p text their
   * rendering for people. Call only when trace_on(kind).
   */
  virtual void trace(trace::TraceKind kind, uint32_t qpn, bool has_wr, uint64_t wr_id,
                     const trace::TraceFields& f, const char* text) = 0;
};

/** @brief Where device links come from: the simulator registers an enumerator at load time. */
using LinkEnumerator = std::function<std::vector<HcaLink*>()>;
void register_link_enumerator(LinkEnumerator e);
/** @brief All links (enumerated once, on first call). */
const std::vector<HcaLink*>& links();

}  // namespace hcasim::drv
