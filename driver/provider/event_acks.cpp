// SPDX-License-Identifier: Apache-2.0
// Acknowledging events before destroying what they are about, as rdma-core does: every
// completion event a program took with ibv_get_cq_event must be acknowledged with
// ibv_ack_cq_events, and every affiliated async event with ibv_ack_async_event, before
// ibv_destroy_cq / ibv_destroy_qp / ibv_destroy_srq return (ibv_get_cq_event(3),
// ibv_get_async_event(3) NOTES: destroying "will wait for all affiliated events ... to be
// acknowledged"). The counters live where libibverbs keeps them, in ibv_cq, ibv_qp and ibv_srq
// (comp_events_completed, async_events_completed, events_completed), under their mutex.
#include <cstdio>

#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {
namespace {

/** The object an async event is about, as its mutex/cond and its two counters. */
struct Affiliation {
  pthread_mutex_t* mutex = nullptr;
  pthread_cond_t* cond = nullptr;
  uint32_t* taken = nullptr;
  uint32_t* acked = nullptr;
};

Affiliation affiliation(const ibv_async_event& ev) {
  switch (ev.event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq* cq = ev.element.cq;
      return {&cq->mutex, &cq->cond, &sim(cq)->async_taken, &cq->async_events_completed};
    }
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq* s = ev.element.srq;
      return {&s->mutex, &s->cond, &sim(s)->async_taken, &s->events_completed};
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      ibv_qp* qp = ev.element.qp;
      return {&qp->mutex, &qp->cond, &sim(qp)->async_taken, &qp->events_completed};
    }
    default: return {};  // port and device events belong to no object
  }
}

}  // namespace

void note_async_taken(const ibv_async_event& ev) {
  const Affiliation a = affiliation(ev);
  if (!a.mutex) return;
  pthread_mutex_lock(a.mutex);
  ++*a.taken;
  pthread_mutex_unlock(a.mutex);
}

void ack_async_event(ibv_async_event* ev) {
  const Affiliation a = affiliation(*ev);
  if (!a.mutex) return;
  pthread_mutex_lock(a.mutex);
  ++*a.acked;
  pthread_cond_broadcast(a.cond);
  pthread_mutex_unlock(a.mutex);
}

void ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_broadcast(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

void wait_events_acked(HcaLink& link, const char* verb, uint32_t qpn, pthread_mutex_t* mutex,
                       pthread_cond_t* cond, const uint32_t* taken, const uint32_t* acked,
                       const uint32_t* comp_taken, const uint32_t* comp_acked) {
  pthread_mutex_lock(mutex);
  auto pending = [&] { return (*taken - *acked) + (comp_taken ? *comp_taken - *comp_acked : 0); };
  if (pending() && link.trace_on(trace::TraceKind::Error)) {
    char buf[256];
    snprintf(buf, sizeof buf,
             "%s waits for %u event(s) the program took and never acknowledged (ibv_ack_cq_events / "
             "ibv_ack_async_event), as rdma-core's does: from a single thread it never returns",
             verb, pending());
    link.trace(trace::TraceKind::Error, qpn, false, 0, trace::TraceFields().set_flag(trace::kTfError), buf);
  }
  while (pending()) pthread_cond_wait(cond, mutex);
  pthread_mutex_unlock(mutex);
}

}  // namespace hcasim::drv
