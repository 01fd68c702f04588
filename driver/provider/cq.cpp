// SPDX-License-Identifier: Apache-2.0
// Completion queues: ring allocation, CQE parsing in poll_cq, arming, event delivery.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "cqe_decode.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {
namespace {

// QPN -> QP, for turning a CQE's WQE counter back into the program's wr_id.
std::mutex qp_map_mu;
std::unordered_map<uint64_t, SimQp*>& qp_map() {
  static auto* m = new std::unordered_map<uint64_t, SimQp*>;
  return *m;
}
uint64_t qp_key(KernelDevice* k, uint32_t qpn) { return (reinterpret_cast<uint64_t>(k) << 24) ^ qpn; }

std::atomic<uint64_t> moves{0};

}  // namespace

bool wait_device(HcaLink& link) {
  if (!link.wait_progress()) return false;
  moves.fetch_add(1, std::memory_order_relaxed);
  return true;
}

uint64_t device_moves() { return moves.load(std::memory_order_relaxed); }

void register_qp(SimQp* qp) {
  std::lock_guard<std::mutex> g(qp_map_mu);
  qp_map()[qp_key(qp->ctx->kdev, qp->qpn)] = qp;
}
void unregister_qp(SimQp* qp) {
  std::lock_guard<std::mutex> g(qp_map_mu);
  qp_map().erase(qp_key(qp->ctx->kdev, qp->qpn));
}
static SimQp* find_qp(KernelDevice* k, uint32_t qpn) {
  std::lock_guard<std::mutex> g(qp_map_mu);
  auto it = qp_map().find(qp_key(k, qpn));
  return it == qp_map().end() ? nullptr : it->second;
}

void CqEvents::completion_event() {
  SimChannel* ch = cq->channel;
  if (!ch) return;
  std::lock_guard<std::mutex> g(ch->mu);
  if (cq->armed.exchange(false)) ch->armed--;
  ch->pending.push_back(cq);
  cq->events_delivered++;
  uint64_t one = 1;
  if (write(ch->ch.fd, &one, sizeof one) < 0) { /* eventfd cannot overflow here */
  }
}

void CqEvents::async_event(hw::EqeType type) {
  if (type != hw::EqeType::CqError) return;
  ibv_async_event ev{};
  ev.element.cq = &cq->cq;
  ev.event_type = IBV_EVENT_CQ_ERR;
  push_async_event(cq->ctx, ev);
}

ibv_cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector) {
  SimContext* c = sim(context);
  const hw::HcaCaps& caps = c->kdev->caps();
  if (cqe < 1 || uint32_t(cqe) > caps.max_cqe || comp_vector < 0 ||
      comp_vector >= context->num_comp_vectors || (channel && channel->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new SimCq{};
  q->events.cq = q;
  q->ctx = c;
  q->channel = channel ? sim(channel) : nullptr;
  uint32_t log = 0;
  while ((1u << log) < uint32_t(cqe) + 1) ++log;
  q->log_size = log;
  KernelDevice& k = *c->kdev;
  q->ring = std::make_unique<QueueBuffer>(k.link(), k.iova(), uint64_t(hw::kCqeSize) << log);
  uint64_t dbrec_iova = 0;
  q->dbrec = static_cast<hw::CqDbrec*>(k.dbrecs().alloc(dbrec_iova));
  if (!q->ring->ok() || !q->dbrec) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  for (uint32_t i = 0; i < (1u << log); ++i) hw::cqe_init(q->ring->data() + uint64_t(i) * hw::kCqeSize);
  hw::Cqc cqc{};
  cqc.eqn = k.comp_eqn();
  cqc.log_size = uint8_t(log);
  cqc.buf = q->ring->desc();
  cqc.dbrec_addr = dbrec_iova;
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::CreateCq, cqc);
  if (int e = k.command(mb)) {
    k.dbrecs().free(q->dbrec);
    delete q;
    errno = e;
    return nullptr;
  }
  q->cqn = mb.arg0;
  q->cq.context = context;
  q->cq.channel = channel;
  q->cq.cq_context = cq_context;
  q->cq.cqe = int((1u << log) - 1);
  q->cq.handle = q->cqn;
  pthread_mutex_init(&q->cq.mutex, nullptr);
  pthread_cond_init(&q->cq.cond, nullptr);
  if (q->channel) q->channel->users++;
  k.add_cq(q->cqn, &q->events);
  return &q->cq;
}

int destroy_cq(ibv_cq* cq) {
  SimCq* q = sim(cq);
  if (q->users.load()) {
    errno = EBUSY;
    return EBUSY;
  }
  KernelDevice& k = *q->ctx->kdev;
  k.remove_cq(q->cqn);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DestroyCq, q->cqn);
  k.command(mb);
  const uint32_t comp_taken = q->events_taken.load();
  wait_events_acked(*q->ctx->sdev->link, "ibv_destroy_cq", trace::kTraceNone, &cq->mutex, &cq->cond,
                    &q->async_taken, &cq->async_events_completed, &comp_taken, &cq->comp_events_completed);
  if (q->channel) {
    std::lock_guard<std::mutex> g(q->channel->mu);
    // The CQ's queued events die with it. The channel's eventfd counts queued events (one
    // read per ibv_get_cq_event), so take one count per dropped event too: otherwise the fd
    // stays readable with nothing to take and a non-blocking ibv_get_cq_event spins.
    for (auto it = q->channel->pending.begin(); it != q->channel->pending.end();) {
      if (*it != q) {
        ++it;
        continue;
      }
      it = q->channel->pending.erase(it);
      uint64_t one;
      if (read(q->channel->ch.fd, &one, sizeof one) < 0) { /* count and queue move together */
      }
    }
    if (q->armed.exchange(false)) q->channel->armed--;
    q->channel->users--;
  }
  k.dbrecs().free(q->dbrec);
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete q;
  return 0;
}

/** The CQE at the consumer index if the device has written it, else nullptr (under q.mu). */
static const uint8_t* next_cqe(const SimCq& q) {
  const uint8_t* raw = q.ring->data() + uint64_t(q.ci & ((1u << q.log_size) - 1)) * hw::kCqeSize;
  return hw::cqe_ready(hw::cqe_load_op_own(raw), q.ci, q.log_size) ? raw : nullptr;
}

static int poll_once(SimCq* q, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> g(q->mu);
  int got = 0;
  SimQp* last = nullptr;
  while (got < n) {
    const uint8_t* raw = next_cqe(*q);
    if (!raw) break;
    const DecodedCqe d = decode_cqe(raw);
    ++q->ci;
    ibv_wc& w = wc[got++];
    w = d.wc;
    const uint16_t idx = d.wqe_counter;
    if (!last || last->qpn != w.qp_num) last = find_qp(q->ctx->kdev, w.qp_num);
    if (d.from_srq) {
      // The CQE names its SRQ: an XRC receive QP may not even belong to this process.
      if (SimSrq* s = find_srq(q->ctx->kdev, d.srqn)) w.wr_id = srq_complete(*s, idx);
    } else if (last) {
      if (d.is_send) {
        // The poster stored the slot (wr_id, size, count) before its doorbell record, and the
        // device wrote this CQE only after reading that record. The path through the device
        // (another thread or process) orders nothing for the compiler or ThreadSanitizer: the
        // acquire load of the record does.
        (void)hw::qp_dbrec_sq(*last->dbrec);
        const uint32_t m = (1u << last->sq_log) - 1;
        w.wr_id = last->sq_wrid[idx & m];
        // One CQE retires its WQE and every unsignaled WQE before it.
        last->sq_wrs_done.store(last->sq_wrs_at[idx & m], std::memory_order_release);
        last->sq_tail.store(uint16_t(idx + last->sq_nbb[idx & m]), std::memory_order_release);
      } else {
        (void)hw::qp_dbrec_rq(*last->dbrec);  // as for the SQ above
        const uint32_t m = (1u << last->rq_log) - 1;
        w.wr_id = last->rq_wrid[idx & m];
        last->rq_tail.store(uint16_t(idx + 1), std::memory_order_release);
      }
    }
    q->last_cqe_ts_ns = d.timestamp_ns;  // for ibv_wc_read_completion_ts (cq_ex.cpp)
  }
  if (got) hw::cq_dbrec_set_ci(*q->dbrec, q->ci);
  if (got && q->poll_waiters) q->polled.notify_all();
  return got;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  SimCq* q = sim(cq);
  if (n < 0) return -EINVAL;
  int got = poll_once(q, n, wc);
  if (got > 0 || n == 0) return got;
  // An empty poll lets a simulator's time run on until something becomes visible (on hardware
  // it costs nanoseconds). Only on a CQ already found empty since the device last did so: a
  // program that polls several CQs in turn then looks at each of them once before time moves
  // again, instead of leaving a completion unseen in one while it waits on the next.
  const uint64_t m = device_moves();
  if (q->empty_at_move.exchange(m, std::memory_order_relaxed) != m) return 0;
  if (wait_device(*q->ctx->sdev->link)) {
    const uint64_t seen = device_moves();  // this look follows that move (a later one is not seen yet)
    got = poll_once(q, n, wc);
    if (got == 0) q->empty_at_move.store(seen, std::memory_order_relaxed);
  }
  return got;
}

bool cq_has_completion(ibv_cq* cq) {
  SimCq* q = sim(cq);
  std::lock_guard<std::mutex> g(q->mu);
  return next_cqe(*q) != nullptr;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  SimCq* q = sim(cq);
  uint32_t ci;
  {
    std::lock_guard<std::mutex> g(q->mu);
    ci = q->ci;
  }
  const uint64_t v = hw::cq_arm_value(q->cqn, ci, q->arm_sn, solicited_only != 0);
  hw::cq_dbrec_set_arm(*q->dbrec, v);
  if (q->channel) {
    q->channel->unarmed_told = false;
    q->channel->unarmed_polls = 0;
    if (!q->armed.exchange(true)) q->channel->armed++;
  }
  q->ctx->sdev->link->mmio_write64(hw::kUarCqArm, v);
  return 0;
}

}  // namespace hcasim::drv
