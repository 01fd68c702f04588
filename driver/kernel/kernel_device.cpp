// SPDX-License-Identifier: Apache-2.0
#include "kernel_device.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

namespace hcasim::drv {

KernelDevice::KernelDevice(HcaLink& link) : link_(link), dbrecs_(link, iova_) {
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::QueryHcaCap);
  if (command(mb) != 0) return;
  caps_ = hw::cmd_out<hw::HcaCaps>(mb);
  // One EQ carries completion and asynchronous events; its interrupt drives event delivery.
  eq_ = std::make_unique<QueueBuffer>(link_, iova_, (1u << eq_log_) * hw::kEqeSize);
  if (!eq_->ok()) return;
  hw::Eqc eqc{};
  eqc.log_size = uint8_t(eq_log_);
  eqc.irq_vector = 0;
  eqc.buf = eq_->desc();
  // EQEs start owned by hardware: owner bit 1 until the first pass writes 0.
  for (uint32_t i = 0; i < (1u << eq_log_); ++i) hw::eqe_init(eq_->data() + uint64_t(i) * hw::kEqeSize);
  hw::CmdMailbox c = hw::make_cmd_with(hw::CmdOpcode::CreateEq, eqc);
  if (command(c) != 0) return;
  eqn_ = c.arg0;
  link_.set_irq_handler([this](uint32_t v) { isr(v); });
  ok_ = true;
}

KernelDevice::~KernelDevice() = default;

int KernelDevice::command(hw::CmdMailbox& mb) {
  link_.exec(mb);
  switch (hw::CmdStatus(mb.status)) {
    case hw::CmdStatus::Ok: return 0;
    case hw::CmdStatus::NoResources:
    case hw::CmdStatus::ExceedLimit: return ENOMEM;
    case hw::CmdStatus::ResourceBusy: return EBUSY;
    case hw::CmdStatus::BadOpcode: return EOPNOTSUPP;
    case hw::CmdStatus::InternalError: return EIO;
    default: return EINVAL;
  }
}

void KernelDevice::add_cq(uint32_t cqn, EventTarget* t) {
  std::lock_guard<std::mutex> g(mu_);
  cqs_[cqn] = t;
}
void KernelDevice::add_qp(uint32_t qpn, EventTarget* t) {
  std::lock_guard<std::mutex> g(mu_);
  qps_[qpn] = t;
}
void KernelDevice::add_srq(uint32_t srqn, EventTarget* t) {
  std::lock_guard<std::mutex> g(mu_);
  srqs_[srqn] = t;
}
void KernelDevice::remove_srq(uint32_t srqn) {
  std::lock_guard<std::mutex> g(mu_);
  srqs_.erase(srqn);
}
void KernelDevice::add_port_listener(EventTarget* t) {
  std::lock_guard<std::mutex> g(mu_);
  port_listeners_.push_back(t);
}
void KernelDevice::remove_port_listener(EventTarget* t) {
  std::lock_guard<std::mutex> g(mu_);
  port_listeners_.erase(std::remove(port_listeners_.begin(), port_listeners_.end(), t),
                        port_listeners_.end());
}

int KernelDevice::query_port(uint8_t port, hw::PortInfo& out) {
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::QueryPort, port);
  const int r = command(mb);
  if (r == 0) out = hw::cmd_out<hw::PortInfo>(mb);
  return r;
}

void KernelDevice::remove_cq(uint32_t cqn) {
  std::lock_guard<std::mutex> g(mu_);
  cqs_.erase(cqn);
}
void KernelDevice::remove_qp(uint32_t qpn) {
  std::lock_guard<std::mutex> g(mu_);
  qps_.erase(qpn);
}

void KernelDevice::isr(uint32_t /*vector*/) {
  const uint32_t size = 1u << eq_log_;
  for (;;) {
    const uint8_t* e = eq_->data() + (eq_ci_ & (size - 1)) * hw::kEqeSize;
    if (!hw::eqe_ready(hw::eqe_load_owner(e), eq_ci_, eq_log_)) break;
    hw::Eqe eqe;
    std::memcpy(&eqe, e, sizeof eqe);
    ++eq_ci_;
    const uint32_t res = hw::eqe_resource(eqe);
    const auto type = hw::eqe_type(eqe);
    if (link_.trace_on(trace::TraceKind::Interrupt)) {
      char buf[96];
      snprintf(buf, sizeof buf, "ISR: EQ %u EQE[%u] type=0x%02x resource=0x%x -> %s", eqn_,
               (eq_ci_ - 1) & (size - 1), unsigned(type), res,
               type == hw::EqeType::Completion ? "completion channel fd" : "async event fd");
      const auto f = trace::TraceFields().set_queue(eqn_).set_index(eq_ci_).set_opcode(uint16_t(type));
      link_.trace(trace::TraceKind::Interrupt, trace::kTraceNone, false, 0, f, buf);
    }
    std::lock_guard<std::mutex> g(mu_);
    if (type == hw::EqeType::Completion) {
      auto it = cqs_.find(res);
      if (it != cqs_.end()) it->second->completion_event();
    } else if (type == hw::EqeType::CqError) {
      auto it = cqs_.find(res);
      if (it != cqs_.end()) it->second->async_event(type);
    } else if (type == hw::EqeType::PortChange) {
      const bool active = hw::eqe_port_change(eqe) == hw::PortChangeSubtype::Active;
      for (EventTarget* t : port_listeners_) t->port_event(uint8_t(res), active);
    } else if (type == hw::EqeType::SrqLimit) {
      auto it = srqs_.find(res);
      if (it != srqs_.end()) it->second->async_event(type);
    } else {
      auto it = qps_.find(res);
      if (it != qps_.end()) it->second->async_event(type);
    }
  }
  link_.mmio_write64(hw::kUarEqArm, hw::eq_arm_value(eqn_, eq_ci_));
}

KernelDevice& kernel_device(HcaLink& link) {
  // Never destroyed: programs may still poll from other threads while the process exits.
  static auto* mu = new std::mutex;
  static auto* devs = new std::map<HcaLink*, std::unique_ptr<KernelDevice>>;
  std::lock_guard<std::mutex> g(*mu);
  auto& d = (*devs)[&link];
  if (!d) d = std::make_unique<KernelDevice>(link);
  return *d;
}

}  // namespace hcasim::drv
