// SPDX-License-Identifier: Apache-2.0
/**
 * @file kernel_device.h
 * @brief The kernel-side control path of one HCA: issues firmware commands (mapping their
 *        status to errno), owns the IOVA space and doorbell-record pages, the event queue and
 *        its interrupt handler, and routes events to completion channels and async-event queues.
 */
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "dma_buffer.h"

namespace hcasim::drv {

/** @brief Receives what the interrupt handler finds in the EQ. */
class EventTarget {
 public:
  virtual ~EventTarget() = default;
  /** @brief A completion event for a CQ (called from the interrupt handler). */
  virtual void completion_event() {}
  /** @brief An asynchronous event (EqeType) for this resource. */
  virtual void async_event(hw::EqeType type) {}
  /** @brief Port @p port's link went down (@p active false) or became active (a port listener). */
  virtual void port_event(uint8_t port, bool active) {}
};

class KernelDevice {
 public:
  explicit KernelDevice(HcaLink& link);
  ~KernelDevice();
  KernelDevice(const KernelDevice&) = delete;
  KernelDevice& operator=(const KernelDevice&) = delete;

  HcaLink& link() { return link_; }
  IovaSpace& iova() { return iova_; }
  DbrecPool& dbrecs() { return dbrecs_; }
  const hw::HcaCaps& caps() const { return caps_; }
  uint32_t comp_eqn() const { return eqn_; }
  bool ok() const { return ok_; }

  /** @brief Run a command; returns 0 or the errno its status stands for. */
  int command(hw::CmdMailbox& mb);

  void add_cq(uint32_t cqn, EventTarget* t);
  void add_qp(uint32_t qpn, EventTarget* t);
  /** @brief Route the SRQ's limit event to @p t. */
  void add_srq(uint32_t srqn, EventTarget* t);
  /** @brief Tell @p t about every port change (each open context of the device is one). */
  void add_port_listener(EventTarget* t);
  /** @brief Stop telling @p t; no call to it is running or follows once this returns. */
  void remove_port_listener(EventTarget* t);
  /** @brief The state of port @p port (QueryPort); 0 or the errno (EINVAL: no such port). */
  int query_port(uint8_t port, hw::PortInfo& out);
  void remove_cq(uint32_t cqn);
  void remove_qp(uint32_t qpn);
  void remove_srq(uint32_t srqn);

 private:
  void isr(uint32_t vector);

  HcaLink& link_;
  IovaSpace iova_;
  DbrecPool dbrecs_;
  hw::HcaCaps caps_{};
  std::unique_ptr<QueueBuffer> eq_;
  uint32_t eqn_ = 0, eq_log_ = 12, eq_ci_ = 0;
  bool ok_ = false;
  std::mutex mu_;
  std::unordered_map<uint32_t, EventTarget*> cqs_, qps_, srqs_;
  std::vector<EventTarget*> port_listeners_;
};

/** @brief The KernelDevice of a link (created on first use; lives as long as the process). */
KernelDevice& kernel_device(HcaLink& link);

}  // namespace hcasim::drv
