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

void note_event_taken(SimCq& cq) {
  std::lock_guard<std::mutex> g(cq.mu);
  ++cq.events_taken;
  if (cq.poll_waiters) cq.polled.notify_all();
}

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
  if (!wanted_) return;
  const unsigned delivered = cq_->events_delivered.load();
  if (delivered == events_) return;
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = wait_for_reader(delivered);
  HcaLink& link = *cq_->ctx->sdev->link;
  if (link.trace_on(trace::TraceKind::Note)) trace_note(link, o, std::chrono::steady_clock::now() - start);
}

Handoff::Outcome Handoff::wait_for_reader(unsigned delivered) {
  std::unique_lock<std::mutex> l(cq_->mu);
  ++cq_->poll_waiters;
  const auto polled = [this] { return cq_->ci != ci_; };
  const auto taken = [&] { return int(cq_->events_taken - delivered) >= 0; };
  Outcome o = Outcome::NotTaken;
  if (cq_->polled.wait_for(l, std::chrono::microseconds(kHandoffMaxUs), [&] { return polled() || taken(); }))
    o = cq_->polled.wait_for(l, std::chrono::microseconds(kHandoffPollUs), polled) ? Outcome::Polled
                                                                                   : Outcome::NotPolled;
  --cq_->poll_waiters;
  return o;
}

void Handoff::trace_note(HcaLink& link, Outcome o, std::chrono::steady_clock::duration waited) {
  const double us = std::chrono::duration<double, std::micro>(waited).count();
  static const char* const what[] = {"it polled", "it took the event but had not polled",
                                     "it had not taken the event"};
  char buf[192];
  snprintf(buf, sizeof buf,
           "handoff: CQ %u's event is for another thread (its channel's reader); %s after %.1f us", cq_->cqn,
           what[int(o)], us);
  link.trace(trace::TraceKind::Note, qpn_, false, 0, trace::TraceFields().set_queue(cq_->cqn), buf);
}

}  // namespace hcasim::drv
