// SPDX-License-Identifier: Apache-2.0
/**
 * @file handoff.h
 * @brief Core hand-off: a thread whose SQ doorbell raised a completion event that another
 *        thread is waiting for lets that thread run first.
 *
 * On hardware the HCA works beside the CPUs. The interrupt that announces a completion wakes
 * the thread sleeping on the completion channel, and it runs on a core of its own while the
 * thread that rang the doorbell goes on. In the simulator's realtime clock the device's next
 * few microseconds run inside the doorbell itself (docs/architecture.md, "Time"), so the
 * interrupt is raised on the posting thread; and the machine running the simulation often has
 * fewer cores than the program has threads. The woken reader then waits for a core while the
 * poster runs on, which hardware would not make it do, and a program that races its own
 * completion handling (Gloo's buffer teardown, docs/verbs.md) loses far more often than on
 * hardware. So the poster waits, for at most kHandoffMaxUs of wall time, until the reader has
 * polled the CQ: the order a core per thread would give.
 *
 * Only for a completion channel whose last reader (ibv_get_cq_event) is another thread; a
 * thread that waits on its own channel, or a program that only polls, never waits here.
 */
#pragma once

#include <chrono>
#include <cstdint>

namespace hcasim::drv {

struct SimCq;
struct SimChannel;
class HcaLink;

/** @brief Longest a poster waits for the woken reader to take the event (wall time). */
constexpr uint32_t kHandoffMaxUs = 200;
/**
 * @brief Longest it then waits for the reader to poll. Short: a reader that took the event but
 * does not poll is held by something else, often a lock the poster itself holds (Gloo posts
 * under its pair mutex, which its loop thread takes to poll), and waiting on would stall both.
 */
constexpr uint32_t kHandoffPollUs = 50;

/** @brief This thread takes events from @p ch (called by ibv_get_cq_event). */
void note_channel_reader(SimChannel& ch);
/** @brief ibv_get_cq_event took an event of @p cq (wakes a poster waiting for it). */
void note_event_taken(SimCq& cq);

/**
 * @brief One ibv_post_send's hand-off. Before the doorbell: wanted() says whether the send
 * CQ's channel is read by another thread (the doorbell should then run its interrupt handlers
 * before it returns: HcaLink::mmio_write64_irqs). After it: finish() waits, if an event was
 * queued on that CQ meanwhile, until the reader took it and polled the CQ.
 */
class Handoff {
 public:
  /**
   * @param send_cq the posting QP's send CQ
   * @param qpn the posting QP's number (for the trace)
   */
  Handoff(SimCq* send_cq, uint32_t qpn);
  /** @brief Whether the doorbell should run its interrupt handlers before it returns. */
  bool wanted() const { return wanted_; }
  /** @brief After the doorbell: wait for the reader if an event was queued meanwhile. */
  void finish();

 private:
  enum class Outcome { Polled, NotPolled, NotTaken };
  Outcome wait_for_reader(unsigned delivered);
  void trace_note(HcaLink& link, Outcome o, std::chrono::steady_clock::duration waited);

  SimCq* cq_;
  uint32_t qpn_;
  bool wanted_ = false;
  uint32_t ci_ = 0;      ///< the CQ's consumer index before the doorbell
  unsigned events_ = 0;  ///< its completion events delivered before the doorbell
};

}  // namespace hcasim::drv
