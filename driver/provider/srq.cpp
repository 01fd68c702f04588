// SPDX-License-Identifier: Apache-2.0
// Shared receive queues (ibv_create_srq(3), ibv_modify_srq(3), ibv_post_srq_recv(3)): a ring
// of receive WQEs behind a buffer table, with a producer counter in a doorbell record, that
// the device fetches from for every QP attached to it.
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {
namespace {

int fail(int e) {
  errno = e;
  return e;
}

uint32_t log2_ceil(uint32_t v) {
  uint32_t l = 0;
  while ((1u << l) < v) ++l;
  return l;
}

/** Ring geometry for ibv_srq_init_attr::attr; false if the device cannot hold it. */
bool size_srq(const hw::HcaCaps& caps, ibv_srq_attr& a, SimSrq& s) {
  if (a.max_wr == 0 || a.max_wr > caps.max_srq_wr || a.max_sge > caps.max_srq_sge) return false;
  if (a.max_sge == 0) a.max_sge = 1;
  s.log = log2_ceil(a.max_wr);
  s.stride_log = std::max(4u, log2_ceil(a.max_sge * uint32_t(sizeof(hw::DataSeg))));
  s.max_wr = 1u << s.log;
  s.max_sge = (1u << s.stride_log) / sizeof(hw::DataSeg);
  a.max_wr = s.max_wr;  // ibv_create_srq(3): the actual values are returned
  a.max_sge = s.max_sge;
  return true;
}

void trace_post_srq_recv(HcaLink& link, const SimSrq& s, const ibv_recv_wr& wr) {
  const auto f = trace::TraceFields()
                     .set_wqe(s.head)
                     .set_count(uint32_t(wr.num_sge))
                     .set_queue(s.srqn)
                     .set_flag(trace::kTfRq)
                     .set_flag(trace::kTfSrq);
  char buf[128];
  snprintf(buf, sizeof buf, "post_srq_recv: %d SGE(s) -> SRQ 0x%x WQE %u", wr.num_sge, s.srqn, f.wqe);
  link.trace(trace::TraceKind::Post, trace::kTraceNone, true, wr.wr_id, f, buf);
}

std::mutex srq_map_mu;
std::map<std::pair<KernelDevice*, uint32_t>, SimSrq*>& srq_map() {
  static auto* m = new std::map<std::pair<KernelDevice*, uint32_t>, SimSrq*>;
  return *m;
}

}  // namespace

void register_srq(SimSrq* s) {
  std::lock_guard<std::mutex> g(srq_map_mu);
  srq_map()[{s->ctx->kdev, s->srqn}] = s;
}

void unregister_srq(SimSrq* s) {
  std::lock_guard<std::mutex> g(srq_map_mu);
  srq_map().erase({s->ctx->kdev, s->srqn});
}

SimSrq* find_srq(KernelDevice* k, uint32_t srqn) {
  std::lock_guard<std::mutex> g(srq_map_mu);
  auto it = srq_map().find({k, srqn});
  return it == srq_map().end() ? nullptr : it->second;
}

void SrqEvents::async_event(hw::EqeType type) {
  if (type != hw::EqeType::SrqLimit) return;
  ibv_async_event ev{};
  ev.element.srq = &srq->srq;
  ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
  push_async_event(srq->ctx, ev);
}

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  if (!pd || !a) {
    errno = EINVAL;
    return nullptr;
  }
  return create_srq_on(pd, a->srq_context, a->attr, nullptr, nullptr);
}

ibv_srq* create_srq_on(ibv_pd* pd, void* srq_context, ibv_srq_attr& attr, SimXrcd* xrcd, ibv_cq* cq) {
  SimContext* c = sim(pd->context);
  KernelDevice& k = *c->kdev;
  auto* s = new SimSrq{};
  s->events.srq = s;
  s->ctx = c;
  s->spd = sim(pd);
  ibv_srq_attr a = attr;
  if (!size_srq(k.caps(), a, *s)) {
    delete s;
    errno = EINVAL;
    return nullptr;
  }
  s->ring = std::make_unique<QueueBuffer>(k.link(), k.iova(), uint64_t(1) << (s->log + s->stride_log));
  uint64_t dbrec_iova = 0;
  s->dbrec = static_cast<hw::QpDbrec*>(k.dbrecs().alloc(dbrec_iova));
  if (!s->ring->ok() || !s->dbrec) {
    if (s->dbrec) k.dbrecs().free(s->dbrec);
    delete s;
    errno = ENOMEM;
    return nullptr;
  }
  s->wrid.assign(s->max_wr, 0);
  s->done.assign(s->max_wr, 0);
  hw::Srqc srqc{};
  srqc.pdn = s->spd->pdn;
  srqc.eqn = k.comp_eqn();
  srqc.log_size = uint8_t(s->log);
  srqc.log_stride = uint8_t(s->stride_log);
  srqc.buf = s->ring->desc();
  srqc.dbrec_addr = dbrec_iova;
  srqc.xrcdn = xrcd ? xrcd->xrcdn : 0;
  srqc.cqn = cq ? sim(cq)->cqn : 0;
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::CreateSrq, srqc);
  if (int e = k.command(mb)) {
    k.dbrecs().free(s->dbrec);
    delete s;
    errno = e;
    return nullptr;
  }
  s->srqn = mb.arg0;
  s->srq.context = pd->context;
  s->srq.srq_context = srq_context;
  s->srq.pd = pd;
  s->srq.handle = s->srqn;
  s->xrcd = xrcd;
  s->cq = cq;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  attr = a;
  s->spd->users++;
  if (xrcd) xrcd->users++;
  if (cq) sim(cq)->users++;
  k.add_srq(s->srqn, &s->events);
  register_srq(s);
  return &s->srq;
}

int modify_srq(ibv_srq* ibsrq, ibv_srq_attr* a, int mask) {
  SimSrq* s = sim(ibsrq);
  if (!a || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))) return fail(EINVAL);
  // Resizing needs IBV_DEVICE_SRQ_RESIZE, which this device does not advertise (rxe does).
  if (mask & IBV_SRQ_MAX_WR) return fail(EINVAL);
  if (!(mask & IBV_SRQ_LIMIT)) return 0;
  if (a->srq_limit > s->max_wr) return fail(EINVAL);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::ArmSrq, s->srqn, a->srq_limit);
  if (int e = s->ctx->kdev->command(mb)) return fail(e);
  return 0;
}

int query_srq(ibv_srq* ibsrq, ibv_srq_attr* a) {
  SimSrq* s = sim(ibsrq);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::QuerySrq, s->srqn);
  if (int e = s->ctx->kdev->command(mb)) return fail(e);
  a->max_wr = s->max_wr;
  a->max_sge = s->max_sge;
  a->srq_limit = hw::cmd_out<hw::Srqc>(mb).limit;  // 0 once the limit event has fired
  return 0;
}

int destroy_srq(ibv_srq* ibsrq) {
  SimSrq* s = sim(ibsrq);
  if (s->users.load()) return fail(EBUSY);
  KernelDevice& k = *s->ctx->kdev;
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DestroySrq, s->srqn);
  if (int e = k.command(mb)) return fail(e);
  wait_events_acked(*s->ctx->sdev->link, "ibv_destroy_srq", trace::kTraceNone, &ibsrq->mutex, &ibsrq->cond,
                    &s->async_taken, &ibsrq->events_completed);
  k.remove_srq(s->srqn);
  unregister_srq(s);
  if (s->xrcd) s->xrcd->users--;
  if (s->cq) sim(s->cq)->users--;
  k.dbrecs().free(s->dbrec);
  s->spd->users--;
  pthread_mutex_destroy(&ibsrq->mutex);
  pthread_cond_destroy(&ibsrq->cond);
  delete s;
  return 0;
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  SimSrq* s = sim(ibsrq);
  HcaLink& link = *s->ctx->sdev->link;
  std::lock_guard<std::mutex> g(s->mu);
  const uint16_t start = s->head;
  int err = 0;
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > s->max_sge)
      err = EINVAL;
    else if (uint16_t(s->head - s->tail) >= s->max_wr)
      err = ENOMEM;  // every slot is posted or waits for an earlier one to complete
    if (err) break;
    const uint32_t slot = s->head & (s->max_wr - 1);
    write_recv_wqe(s->ring->data() + (uint64_t(slot) << s->stride_log), 1u << s->stride_log, *wr);
    s->wrid[slot] = wr->wr_id;
    s->done[slot] = 0;
    if (link.trace_on(trace::TraceKind::Post)) trace_post_srq_recv(link, *s, *wr);
    ++s->head;
  }
  if (err && bad) *bad = wr;
  if (s->head != start) hw::qp_dbrec_set_rq(*s->dbrec, s->head);
  return err;
}

uint64_t srq_complete(SimSrq& s, uint16_t index) {
  std::lock_guard<std::mutex> g(s.mu);
  const uint32_t mask = s.max_wr - 1;
  const uint64_t id = s.wrid[index & mask];
  s.done[index & mask] = 1;
  while (s.tail != s.head && s.done[s.tail & mask]) {
    s.done[s.tail & mask] = 0;
    ++s.tail;
  }
  return id;
}

}  // namespace hcasim::drv
