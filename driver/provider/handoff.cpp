// SPDX-License-Identifier: Apache-2.0
// Core hand-off between a poster and the thread its completion event wakes (handoff.h).
#include "handoff.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "objects.h"

namespace hcasim::drv {
namespace {

long this_tid() {
  thread_local const long tid = syscall(SYS_gettid);
  return tid;
}

}  // namespace

void note_channel_reader(SimChannel& ch) { ch.reader.store(this_tid(), std::memory_order_relaxed); }

Handoff::Handoff(SimCq* send_cq, uint32_t qpn) : cq_(send_cq), qpn_(qpn) {
  if (!cq_ || !cq_->channel) return;
  const long reader = cq_->channel->reader.load(std::memory_order_relaxed);
  wanted_ = reader != 0 && reader != this_tid();
  if (!wanted_) return;
  events_ = cq_->events_delivered.load();
  std::lock_guard<std::mutex> g(cq_->mu);
  ci_ = cq_->ci;
}

void Handoff::finish() {
  // The doorbell ran its interrupt handlers before returning (mmio_write64_irqs), on this
  // thread or the link's interrupt thread: an event since the constructor is the doorbell's.
  if (!wanted_ || cq_->events_delivered.load() == events_) return;
  const auto start = std::chrono::steady_clock::now();
  bool polled;
  {
    std::unique_lock<std::mutex> l(cq_->mu);
    ++cq_->poll_waiters;
    polled =
        cq_->polled.wait_for(l, std::chrono::microseconds(kHandoffMaxUs), [this] { return cq_->ci != ci_; });
    --cq_->poll_waiters;
  }
  HcaLink& link = *cq_->ctx->sdev->link;
  if (!link.trace_on()) return;
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  char buf[160];
  if (polled)
    snprintf(
        buf, sizeof buf,
        "handoff: CQ %u's event is for another thread (its channel's reader); it polled %.1f us (wall) later",
        cq_->cqn, us);
  else
    snprintf(
        buf, sizeof buf,
        "handoff: CQ %u's event is for another thread (its channel's reader); it had not polled after %u us",
        cq_->cqn, kHandoffMaxUs);
  link.trace(trace::TraceKind::Note, qpn_, false, 0, trace::TraceFields().set_queue(cq_->cqn), buf);
}

}  // namespace hcasim::drv
