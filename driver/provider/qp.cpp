// SPDX-License-Identifier: Apache-2.0
// Queue pairs: ring sizing, the QP state machine as ibv_modify_qp(3) defines it, WR -> WQE bytes.
#include <cerrno>
#include <cstring>

#include "../libibverbs/core_extra.h"
#include "enum_bits.h"
#include "handoff.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

void register_qp(SimQp* qp);
void unregister_qp(SimQp* qp);

namespace {

uint32_t log2_ceil(uint32_t v) {
  uint32_t l = 0;
  while ((1u << l) < v) ++l;
  return l;
}

int fail(int e) {
  errno = e;
  return e;
}

/**
 * WQEBBs a send WQE needs for these limits (ctrl [+ XRC] + raddr + atomic + data or inline).
 * The data part always holds as many inline bytes as the scatter list holds SGEs × 16, as rxe's
 * and mlx5's do (rxe sizes it max(max_sge × 16, max_inline)): programs such as rdma-core's
 * rdma_xclient ask for no inline data and post 16 bytes inline on a one-SGE QP.
 */
uint32_t send_wqe_bbs(uint32_t max_sge, uint32_t max_inline, bool xrc) {
  const uint32_t inline_bytes = std::max(max_inline, max_sge * uint32_t(sizeof(hw::DataSeg)));
  const uint32_t data = std::max(max_sge, hw::inline_segments(inline_bytes));
  return hw::wqe_bbs_for_segments(3 + (xrc ? 1 : 0) + data);
}

// Transition table (IBTA 10.3.1 / the kernel's qp_state_table) for RC QPs: required and
// optional attribute masks for every legal current -> next state.
struct Transition {
  bool valid;
  int req;
  int opt;
};

Transition rc_transition(ibv_qp_state cur, ibv_qp_state next) {
  constexpr int kPath = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return {true, 0, 0};
  switch (cur) {
    case IBV_QPS_RESET:
      if (next == IBV_QPS_INIT) return {true, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0};
      break;
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) return {true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
      if (next == IBV_QPS_RTR)
        return {true,
                IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                    IBV_QP_MIN_RNR_TIMER,
                IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
      break;
    case IBV_QPS_RTR:
      if (next == IBV_QPS_RTS)
        return {
            true,
            IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
            IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | kPath};
      break;
    case IBV_QPS_RTS:
      if (next == IBV_QPS_RTS)
        return {true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | kPath};
      if (next == IBV_QPS_SQD) return {true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY};
      break;
    case IBV_QPS_SQD:
      if (next == IBV_QPS_RTS)
        return {true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | kPath};
      if (next == IBV_QPS_SQD)
        return {true, 0,
                IBV_QP_PKEY_INDEX | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ACCESS_FLAGS |
                    IBV_QP_MIN_RNR_TIMER | kPath};
      break;
    case IBV_QPS_SQE:
      if (next == IBV_QPS_RTS)
        return {true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER};
      break;
    default: break;
  }
  return {false, 0, 0};
}

/**
 * The same table for UC and UD. UD has no path, PSN checks or remote access: its INIT sets the
 * Q_Key instead of access flags, and RTR needs nothing. UC is RC without the READ/atomic and
 * retry attributes.
 */
Transition unreliable_transition(bool ud, ibv_qp_state cur, ibv_qp_state next) {
  constexpr int kPath = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
  const int keys = ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
  const int rts_opt = IBV_QP_CUR_STATE | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS | kPath);
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return {true, 0, 0};
  switch (cur) {
    case IBV_QPS_RESET:
      if (next == IBV_QPS_INIT) return {true, IBV_QP_PKEY_INDEX | IBV_QP_PORT | keys, 0};
      break;
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) return {true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | keys};
      if (next == IBV_QPS_RTR && ud) return {true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
      if (next == IBV_QPS_RTR)
        return {true, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
      break;
    case IBV_QPS_RTR:
      if (next == IBV_QPS_RTS) return {true, IBV_QP_SQ_PSN, rts_opt};
      break;
    case IBV_QPS_RTS:
      if (next == IBV_QPS_RTS) return {true, 0, rts_opt};
      if (next == IBV_QPS_SQD) return {true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY};
      break;
    case IBV_QPS_SQD:
      if (next == IBV_QPS_RTS) return {true, 0, rts_opt};
      if (next == IBV_QPS_SQD)
        return {true, 0,
                ud ? IBV_QP_PKEY_INDEX | IBV_QP_QKEY
                   : IBV_QP_AV | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | kPath};
      break;
    case IBV_QPS_SQE:
      if (next == IBV_QPS_RTS) return {true, 0, IBV_QP_CUR_STATE | keys};
      break;
    default: break;
  }
  return {false, 0, 0};
}

/**
 * XRC (the kernel's qp_state_table for XRC_INI / XRC_TGT): a send QP's INIT->RTR takes no
 * responder attributes, a receive QP's RTR->RTS needs only TIMEOUT and SQ_PSN (it never sends
 * a request); everything else is RC's.
 */
Transition xrc_transition(bool recv, ibv_qp_state cur, ibv_qp_state next) {
  Transition t = rc_transition(cur, next);
  constexpr int kResponder = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (!recv && cur == IBV_QPS_INIT && next == IBV_QPS_RTR) t.req &= ~kResponder;
  if (recv && cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
    t.req = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
    t.opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
            IBV_QP_PATH_MIG_STATE;
  }
  return t;
}

/** The legal transition table of ibv_modify_qp(3) for @p type. */
Transition qp_transition(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next) {
  if (type == IBV_QPT_RC) return rc_transition(cur, next);
  if (type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV)
    return xrc_transition(type == IBV_QPT_XRC_RECV, cur, next);
  return unreliable_transition(type == IBV_QPT_UD, cur, next);
}

/** ibv_modify_qp(3)'s value checks (IBTA field widths, device limits) for the attributes in @p mask. */
bool attr_values_valid(const ibv_qp_attr& a, int mask, const hw::HcaCaps& caps) {
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return false;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index != 0) return false;
  if ((mask & IBV_QP_PATH_MTU) &&
      (enum_bits(a.path_mtu) < IBV_MTU_256 || enum_bits(a.path_mtu) > IBV_MTU_4096))
    return false;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return false;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return false;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return false;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return false;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > caps.max_qp_init_rd_atom) return false;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > caps.max_qp_rd_atom) return false;
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a.qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC)))
    return false;
  if (mask & IBV_QP_AV) {
    // RoCE: addresses are GIDs; a GRH is mandatory and the source GID must exist.
    if (!a.ah_attr.is_global || a.ah_attr.grh.sgid_index >= hw::kGidTableLen || a.ah_attr.port_num > 1)
      return false;
  }
  return true;
}

/** The QPC fields a modify command carries (the device applies those in its mask). */
hw::Qpc qpc_from_attr(const ibv_qp_attr& a, int mask, ibv_qp_state next) {
  hw::Qpc in{};
  in.state = uint8_t(next);
  in.pkey_index = a.pkey_index;
  in.port = a.port_num;
  in.access_flags = a.qp_access_flags;
  if (mask & IBV_QP_AV) {
    std::memcpy(in.path.dgid, a.ah_attr.grh.dgid.raw, 16);
    in.path.sgid_index = a.ah_attr.grh.sgid_index;
    in.path.hop_limit = a.ah_attr.grh.hop_limit;
    in.path.traffic_class = a.ah_attr.grh.traffic_class;
    in.path.flow_label = a.ah_attr.grh.flow_label;
  }
  // Only what the mask names is defined (ibv_modify_qp(3)): an unset path_mtu may hold any bits,
  // not even a valid enum value (ibv_xsrq_pingpong leaves it uninitialised).
  if (mask & IBV_QP_PATH_MTU) in.path_mtu_log = uint8_t(7 + int(a.path_mtu));
  in.dest_qpn = a.dest_qp_num;
  in.rq_psn = a.rq_psn;
  in.sq_psn = a.sq_psn;
  in.max_dest_rd_atomic = a.max_dest_rd_atomic;
  in.max_rd_atomic = a.max_rd_atomic;
  in.min_rnr_timer = a.min_rnr_timer;
  in.timeout = a.timeout;
  in.retry_cnt = a.retry_cnt;
  in.rnr_retry = a.rnr_retry;
  in.sqd_notify = (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify ? 1 : 0;
  in.qkey = a.qkey;
  return in;
}

/** Ring geometry for the requested capabilities; @p cap is rounded up to what the rings hold. */
void size_queues(const hw::HcaCaps& caps, ibv_qp_cap& cap, SimQp& q, bool xrc) {
  if (cap.max_send_sge == 0) cap.max_send_sge = 1;
  if (cap.max_recv_sge == 0) cap.max_recv_sge = 1;
  const uint32_t bbs = send_wqe_bbs(cap.max_send_sge, cap.max_inline_data, xrc);
  q.sq_log = log2_ceil(std::max(1u, cap.max_send_wr) * bbs);
  q.rq_log = log2_ceil(std::max(1u, cap.max_recv_wr));
  q.rq_stride_log = log2_ceil(cap.max_recv_sge * uint32_t(sizeof(hw::DataSeg)));
  if (q.rq_stride_log < 4) q.rq_stride_log = 4;
  cap.max_send_wr = (1u << q.sq_log) / bbs;
  cap.max_recv_wr = 1u << q.rq_log;
  cap.max_recv_sge = (1u << q.rq_stride_log) / sizeof(hw::DataSeg);
  cap.max_inline_data = std::min<uint32_t>(
      caps.max_inline_data,
      bbs * hw::kWqeBasicBlock - (3 + (xrc ? 1 : 0)) * hw::kSegmentSize - uint32_t(sizeof(hw::InlineSeg)));
  q.cap = cap;
}

void init_ibv_qp(ibv_qp& qp, ibv_pd* pd, const ibv_qp_init_attr& a, uint32_t qpn) {
  qp.context = pd->context;
  qp.qp_context = a.qp_context;
  qp.pd = pd;
  qp.send_cq = a.send_cq;
  qp.recv_cq = a.recv_cq;
  qp.srq = a.srq;
  qp.handle = qpn;
  qp.qp_num = qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = a.qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
}

}  // namespace

void QpEvents::async_event(hw::EqeType type) {
  ibv_async_event ev{};
  ev.element.qp = &qp->qp;
  switch (type) {
    case hw::EqeType::CommEstablished: ev.event_type = IBV_EVENT_COMM_EST; break;
    case hw::EqeType::SqDrained: ev.event_type = IBV_EVENT_SQ_DRAINED; break;
    case hw::EqeType::WqCatastrophic: ev.event_type = IBV_EVENT_QP_FATAL; break;
    case hw::EqeType::WqInvalidRequest: ev.event_type = IBV_EVENT_QP_REQ_ERR; break;
    case hw::EqeType::WqAccessError: ev.event_type = IBV_EVENT_QP_ACCESS_ERR; break;
    case hw::EqeType::SrqLastWqe: ev.event_type = IBV_EVENT_QP_LAST_WQE_REACHED; break;
    default: return;
  }
  push_async_event(qp->ctx, ev);
}

namespace {

/** The context CreateQp programs for a QP whose rings @p q already holds. */
hw::Qpc create_qpc(const SimQp& q, const ibv_qp_init_attr& a, const ibv_qp_cap& cap, const hw::HcaCaps& caps,
                   uint64_t dbrec_iova, bool gsi) {
  hw::Qpc qpc{};
  qpc.pdn = q.spd->pdn;
  qpc.send_cqn = sim(a.send_cq)->cqn;
  qpc.recv_cqn = sim(a.recv_cq ? a.recv_cq : a.send_cq)->cqn;  // an XRC send QP has none
  qpc.sq_log_size = uint8_t(q.sq_log);
  qpc.rq_log_size = uint8_t(q.rq_log);
  qpc.rq_log_stride = uint8_t(q.rq_stride_log);
  qpc.max_inline = uint16_t(cap.max_inline_data);
  qpc.type = uint8_t(gsi ? hw::QpType::Gsi : hw::QpType(a.qp_type));
  qpc.srqn = a.srq ? sim(a.srq)->srqn : hw::kNoSrq;
  // A UD QP has no path: its messages are one packet of at most the port's MTU.
  if (a.qp_type == IBV_QPT_UD) qpc.path_mtu_log = caps.active_mtu_log;
  qpc.sq_buf = q.sq->desc();
  qpc.rq_buf = q.rq->desc();
  qpc.dbrec_addr = dbrec_iova;
  return qpc;
}

}  // namespace

namespace {

ibv_qp* create_any_qp(ibv_pd* pd, ibv_qp_init_attr* a, bool gsi) {
  SimContext* c = sim(pd->context);
  KernelDevice& k = *c->kdev;
  const hw::HcaCaps& caps = k.caps();
  // An XRC send QP has no receive side: its receive CQ may be left out.
  const bool xrc = a && a->qp_type == IBV_QPT_XRC_SEND;
  if (!a || !a->send_cq || (!a->recv_cq && !xrc) || a->send_cq->context != pd->context ||
      (a->recv_cq && a->recv_cq->context != pd->context)) {
    errno = EINVAL;
    return nullptr;
  }
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD && !xrc) {
    errno = EOPNOTSUPP;  // raw packet QPs are not modelled; XRC receive QPs come from create_qp_ex
    return nullptr;
  }
  if (a->srq && a->srq->context != pd->context) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_cap cap = a->cap;
  if (a->srq || xrc) cap.max_recv_wr = cap.max_recv_sge = 0;  // ibv_create_qp(3): ignored with an SRQ
  if (cap.max_send_wr > caps.max_qp_wr || cap.max_recv_wr > caps.max_qp_wr ||
      cap.max_send_sge > caps.max_sge || cap.max_recv_sge > caps.max_sge ||
      cap.max_inline_data > caps.max_inline_data) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new SimQp{};
  q->events.qp = q;
  q->ctx = c;
  q->spd = sim(pd);
  q->sq_sig_all = a->sq_sig_all != 0;
  size_queues(caps, cap, *q, xrc);
  q->sq = std::make_unique<QueueBuffer>(k.link(), k.iova(), uint64_t(hw::kWqeBasicBlock) << q->sq_log);
  q->rq = std::make_unique<QueueBuffer>(k.link(), k.iova(), uint64_t(1) << (q->rq_log + q->rq_stride_log));
  uint64_t dbrec_iova = 0;
  q->dbrec = static_cast<hw::QpDbrec*>(k.dbrecs().alloc(dbrec_iova));
  if (!q->sq->ok() || !q->rq->ok() || !q->dbrec) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  q->sq_wrid.assign(1u << q->sq_log, 0);
  q->sq_nbb.assign(1u << q->sq_log, 1);
  q->sq_wrs_at.assign(1u << q->sq_log, 0);
  q->rq_wrid.assign(1u << q->rq_log, 0);
  hw::CmdMailbox mb =
      hw::make_cmd_with(hw::CmdOpcode::CreateQp, create_qpc(*q, *a, cap, caps, dbrec_iova, gsi));
  if (int e = k.command(mb)) {
    k.dbrecs().free(q->dbrec);
    delete q;
    errno = e;
    return nullptr;
  }
  q->qpn = mb.arg0;
  init_ibv_qp(q->qp, pd, *a, q->qpn);
  if (a->srq || xrc) {
    cap.max_recv_wr = cap.max_recv_sge = 0;
    q->cap = cap;
  }
  if (a->srq) sim(a->srq)->users++;
  a->cap = cap;
  q->spd->users++;
  sim(a->send_cq)->users++;
  if (a->recv_cq) sim(a->recv_cq)->users++;
  register_qp(q);
  k.add_qp(q->qpn, &q->events);
  return &q->qp;
}

}  // namespace

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* a) { return create_any_qp(pd, a, false); }

ibv_qp* create_gsi_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (!a || a->qp_type != IBV_QPT_UD) {
    errno = EINVAL;
    return nullptr;
  }
  return create_any_qp(pd, a, true);
}

int modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  SimQp* q = sim(ibqp);
  KernelDevice& k = *q->ctx->kdev;
  const hw::HcaCaps& caps = k.caps();
  // The device may have moved the QP to ERR on its own; start from its view.
  hw::CmdMailbox qm = hw::make_cmd(hw::CmdOpcode::QueryQp, q->qpn);
  if (k.command(qm) == 0) ibqp->state = ibv_qp_state(hw::cmd_out<hw::Qpc>(qm).state);
  const ibv_qp_state cur = ibqp->state;
  if ((mask & IBV_QP_CUR_STATE) && enum_bits(attr->cur_qp_state) != cur) return fail(EINVAL);
  if ((mask & IBV_QP_STATE) && enum_bits(attr->qp_state) > IBV_QPS_ERR) return fail(EINVAL);  // no such state
  const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
  const Transition t = qp_transition(ibqp->qp_type, cur, next);
  const int given = mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE);
  if (!t.valid || (given & t.req) != t.req || (given & ~(t.req | t.opt)) != 0) return fail(EINVAL);
  if (!attr_values_valid(*attr, mask, caps)) return fail(EINVAL);
  const hw::Qpc in = qpc_from_attr(*attr, mask, next);
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::ModifyQp, in, q->qpn, uint32_t(mask | IBV_QP_STATE));
  if (int e = k.command(mb)) return fail(e);
  if (next == IBV_QPS_RESET) {  // rings restart from zero, as the hardware's did
    std::lock_guard<std::mutex> gs(q->sq_mu);
    std::lock_guard<std::mutex> gr(q->rq_mu);
    q->sq_head = 0;
    q->sq_tail = 0;
    q->sq_wrs = 0;
    q->sq_wrs_done = 0;
    q->rq_head = 0;
    q->rq_tail = 0;
    std::memset(q->dbrec, 0, sizeof *q->dbrec);
  }
  ibqp->state = next;
  return 0;
}

int query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int /*mask*/, ibv_qp_init_attr* init) {
  SimQp* q = sim(ibqp);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::QueryQp, q->qpn);
  if (int e = q->ctx->kdev->command(mb)) return fail(e);
  const hw::Qpc c = hw::cmd_out<hw::Qpc>(mb);
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = ibv_qp_state(c.state);
  attr->cur_qp_state = attr->qp_state;
  ibqp->state = attr->qp_state;
  attr->path_mtu = c.path_mtu_log >= 8 ? ibv_mtu(c.path_mtu_log - 7) : ibv_mtu(0);
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->qp_access_flags = int(c.access_flags);
  attr->pkey_index = c.pkey_index;
  attr->port_num = c.port;
  attr->dest_qp_num = c.dest_qpn;
  attr->rq_psn = c.rq_psn;
  attr->sq_psn = c.sq_psn;
  attr->timeout = c.timeout;
  attr->retry_cnt = c.retry_cnt;
  attr->rnr_retry = c.rnr_retry;
  attr->min_rnr_timer = c.min_rnr_timer;
  attr->max_rd_atomic = c.max_rd_atomic;
  attr->max_dest_rd_atomic = c.max_dest_rd_atomic;
  attr->qkey = c.qkey;
  attr->ah_attr.is_global = 1;
  attr->ah_attr.port_num = c.port;
  std::memcpy(attr->ah_attr.grh.dgid.raw, c.path.dgid, 16);
  attr->ah_attr.grh.sgid_index = c.path.sgid_index;
  attr->ah_attr.grh.hop_limit = c.path.hop_limit;
  attr->ah_attr.grh.traffic_class = c.path.traffic_class;
  attr->ah_attr.grh.flow_label = c.path.flow_label;
  attr->cap = q->cap;
  if (init) {
    std::memset(init, 0, sizeof *init);
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->cap = q->cap;
    init->qp_type = ibqp->qp_type;
    init->srq = ibqp->srq;
    init->sq_sig_all = q->sq_sig_all;
  }
  return 0;
}

int destroy_qp(ibv_qp* ibqp) {
  SimQp* q = sim(ibqp);
  if (ibqp->qp_type == IBV_QPT_XRC_RECV) return destroy_xrc_recv_qp(q);
  KernelDevice& k = *q->ctx->kdev;
  k.remove_qp(q->qpn);
  unregister_qp(q);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DestroyQp, q->qpn);
  if (int e = k.command(mb)) return fail(e);
  wait_events_acked(*q->ctx->sdev->link, "ibv_destroy_qp", q->qpn, &ibqp->mutex, &ibqp->cond, &q->async_taken,
                    &ibqp->events_completed);
  q->spd->users--;
  sim(ibqp->send_cq)->users--;
  if (ibqp->recv_cq) sim(ibqp->recv_cq)->users--;
  if (ibqp->srq) sim(ibqp->srq)->users--;
  k.dbrecs().free(q->dbrec);
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  delete q;
  return 0;
}

// ------------------------------------------------------------------ data path

static const char* wr_opcode_name(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_SEND: return "SEND";
    case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
    case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
    case IBV_WR_RDMA_READ: return "RDMA_READ";
    case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
    case IBV_WR_SEND_WITH_INV: return "SEND_WITH_INV";
    case IBV_WR_BIND_MW: return "BIND_MW";
    case IBV_WR_LOCAL_INV: return "LOCAL_INV";
    default: return "?";
  }
}

static bool wqe_opcode(std::underlying_type_t<ibv_wr_opcode> op, hw::WqeOpcode& out) {
  switch (op) {
    case IBV_WR_SEND: out = hw::WqeOpcode::Send; return true;
    case IBV_WR_SEND_WITH_IMM: out = hw::WqeOpcode::SendImm; return true;
    case IBV_WR_RDMA_WRITE: out = hw::WqeOpcode::RdmaWrite; return true;
    case IBV_WR_RDMA_WRITE_WITH_IMM: out = hw::WqeOpcode::RdmaWriteImm; return true;
    case IBV_WR_RDMA_READ: out = hw::WqeOpcode::RdmaRead; return true;
    case IBV_WR_ATOMIC_CMP_AND_SWP: out = hw::WqeOpcode::AtomicCmpSwap; return true;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: out = hw::WqeOpcode::AtomicFetchAdd; return true;
    case IBV_WR_SEND_WITH_INV: out = hw::WqeOpcode::SendInv; return true;
    case IBV_WR_BIND_MW: out = hw::WqeOpcode::BindMw; return true;
    case IBV_WR_LOCAL_INV: out = hw::WqeOpcode::LocalInv; return true;
    default: return false;  // TSO, memory registration WRs: not modelled
  }
}

namespace {

/** A send WR checked against ibv_post_send(3), with what building its WQE needs. */
struct SendPlan {
  hw::WqeOpcode op = hw::WqeOpcode::Nop;
  bool atomic = false;
  bool inl = false;
  uint32_t inline_len = 0;
  bool type1_bind = false;  ///< a bind from ibv_bind_mw (a type 1 window), not from a WR
};

/**
 * Whether QPs of @p type carry @p op (UD: SEND only; UC: SEND, RDMA WRITE and the window
 * operations, which never reach the wire; SEND_WITH_INV is RC's).
 */
bool opcode_allowed(ibv_qp_type type, hw::WqeOpcode op) {
  const bool send = op == hw::WqeOpcode::Send || op == hw::WqeOpcode::SendImm;
  const bool write = op == hw::WqeOpcode::RdmaWrite || op == hw::WqeOpcode::RdmaWriteImm;
  const bool window = op == hw::WqeOpcode::BindMw || op == hw::WqeOpcode::LocalInv;
  if (type == IBV_QPT_UD) return send;
  if (type == IBV_QPT_UC) return send || write || window;
  return true;
}

/**
 * A bind's structural checks (the device checks MR, PD, bounds and access and completes a bad
 * bind with IBV_WC_MW_BIND_ERR): a window of the right type for the way it is bound (IBTA
 * o10-37.2.34/35: type 1 only through ibv_bind_mw, type 2 only through a WR), its new key on
 * the window's own index.
 */
int validate_bind(const SimQp& q, const ibv_send_wr& wr, bool type1_bind) {
  const ibv_mw* mw = wr.bind_mw.mw;
  if (!mw || mw->context != q.qp.context) return EINVAL;
  if ((mw->type == IBV_MW_TYPE_1) != type1_bind) return EINVAL;
  if (hw::key_index(wr.bind_mw.rkey) != hw::key_index(mw->rkey)) return EINVAL;
  const unsigned known =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;
  if (wr.bind_mw.bind_info.mw_access_flags & ~known) return EINVAL;
  if (!wr.bind_mw.bind_info.mr && (wr.bind_mw.bind_info.length || !type1_bind)) return EINVAL;
  return 0;
}

/** ibv_post_send(3)'s checks on one WR; 0 or the errno to return. */
int validate_send_wr(const SimQp& q, const ibv_send_wr& wr, SendPlan& p) {
  if (!wqe_opcode(enum_bits(wr.opcode), p.op) || !opcode_allowed(q.qp.qp_type, p.op)) return EINVAL;
  if (p.op == hw::WqeOpcode::BindMw) return validate_bind(q, wr, p.type1_bind);
  if (p.op == hw::WqeOpcode::LocalInv) return 0;
  if (q.qp.qp_type == IBV_QPT_UD && (!wr.wr.ud.ah || wr.wr.ud.ah->pd->context != q.qp.context)) return EINVAL;
  p.atomic = p.op == hw::WqeOpcode::AtomicCmpSwap || p.op == hw::WqeOpcode::AtomicFetchAdd;
  // An atomic returns the original 8 bytes into exactly one 8-byte SGE.
  if (p.atomic && (wr.num_sge != 1 || wr.sg_list[0].length != 8)) return EINVAL;
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > q.cap.max_send_sge) return EINVAL;
  p.inl = (wr.send_flags & IBV_SEND_INLINE) && p.op != hw::WqeOpcode::RdmaRead && !p.atomic;
  p.inline_len = 0;
  if (p.inl) {
    for (int i = 0; i < wr.num_sge; ++i) p.inline_len += wr.sg_list[i].length;
    if (p.inline_len > q.cap.max_inline_data) return EINVAL;
  }
  return 0;
}

/**
 * Remote-address (and atomic) segments from segment @p seg on, or a UD WR's datagram segment;
 * returns the next segment.
 */
uint32_t build_remote_segments(const SimQp& q, const ibv_send_wr& wr, const SendPlan& p, uint8_t* wqe,
                               uint32_t seg) {
  if (p.op == hw::WqeOpcode::BindMw) {
    const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
    hw::BindInfo i;
    i.new_rkey = wr.bind_mw.rkey;
    i.mr_lkey = b.mr ? b.mr->lkey : 0;
    i.addr = b.addr;
    i.length = b.length;
    i.access = b.mw_access_flags & (hw::kAccessRemoteWrite | hw::kAccessRemoteRead | hw::kAccessRemoteAtomic);
    i.flags = uint8_t(((b.mw_access_flags & IBV_ACCESS_ZERO_BASED) ? hw::kBindZeroBased : 0) |
                      (p.type1_bind ? 0 : hw::kBindType2));
    hw::set_bind_seg(*reinterpret_cast<hw::BindSeg*>(hw::wqe_segment(wqe, seg)), i);
    return seg + hw::kBindSegs;
  }
  if (q.qp.qp_type == IBV_QPT_XRC_SEND)  // every XRC request names the remote XRC SRQ
    hw::set_xrc_seg(*reinterpret_cast<hw::XrcSeg*>(hw::wqe_segment(wqe, seg++)), wr.qp_type.xrc.remote_srqn);
  if (q.qp.qp_type == IBV_QPT_UD) {
    hw::DatagramAddr av = sim(wr.wr.ud.ah)->av;
    av.dqpn = wr.wr.ud.remote_qpn;
    av.qkey = wr.wr.ud.remote_qkey;
    hw::set_datagram_seg(*reinterpret_cast<hw::DatagramSeg*>(hw::wqe_segment(wqe, seg)), av);
    return seg + hw::kDatagramSegs;
  }
  if (p.atomic) {
    const bool cas = p.op == hw::WqeOpcode::AtomicCmpSwap;
    hw::set_raddr_seg(*reinterpret_cast<hw::RaddrSeg*>(hw::wqe_segment(wqe, seg++)), wr.wr.atomic.remote_addr,
                      wr.wr.atomic.rkey);
    hw::set_atomic_seg(*reinterpret_cast<hw::AtomicSeg*>(hw::wqe_segment(wqe, seg++)),
                       cas ? wr.wr.atomic.swap : wr.wr.atomic.compare_add,
                       cas ? wr.wr.atomic.compare_add : 0);
  } else if (p.op != hw::WqeOpcode::Send && p.op != hw::WqeOpcode::SendImm) {
    hw::set_raddr_seg(*reinterpret_cast<hw::RaddrSeg*>(hw::wqe_segment(wqe, seg++)), wr.wr.rdma.remote_addr,
                      wr.wr.rdma.rkey);
  }
  return seg;
}

/** Payload segments (inline bytes or one data segment per SGE) from @p seg; returns the next. */
uint32_t build_payload_segments(const ibv_send_wr& wr, const SendPlan& p, uint8_t* wqe, uint32_t seg) {
  if (p.op == hw::WqeOpcode::BindMw || p.op == hw::WqeOpcode::LocalInv) return seg;  // no data
  if (p.inl) {
    uint8_t* at = hw::wqe_segment(wqe, seg);
    hw::set_inline_seg(*reinterpret_cast<hw::InlineSeg*>(at), p.inline_len);
    uint32_t off = sizeof(hw::InlineSeg);
    for (int i = 0; i < wr.num_sge; ++i) {
      std::memcpy(at + off, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      off += wr.sg_list[i].length;
    }
    return seg + hw::inline_segments(p.inline_len);
  }
  for (int i = 0; i < wr.num_sge; ++i)
    hw::set_data_seg(*reinterpret_cast<hw::DataSeg*>(hw::wqe_segment(wqe, seg++)), wr.sg_list[i].addr,
                     wr.sg_list[i].length, wr.sg_list[i].lkey);
  return seg;
}

uint8_t ctrl_flags_for(const SimQp& q, const ibv_send_wr& wr) {
  return uint8_t(((wr.send_flags & IBV_SEND_SIGNALED) || q.sq_sig_all ? hw::kCtrlCqUpdate : 0) |
                 (wr.send_flags & IBV_SEND_SOLICITED ? hw::kCtrlSolicited : 0) |
                 (wr.send_flags & IBV_SEND_FENCE ? hw::kCtrlFence : 0));
}

/** Copy a staged WQE's @p nbb WQEBBs into the ring at the producer (the ring may wrap). */
void copy_to_sq(SimQp& q, const uint8_t* wqe, uint32_t nbb) {
  const uint32_t ring = 1u << q.sq_log;
  for (uint32_t bb = 0; bb < nbb; ++bb)
    std::memcpy(q.sq->data() + uint64_t((q.sq_head + bb) & (ring - 1)) * hw::kWqeBasicBlock,
                wqe + bb * hw::kWqeBasicBlock, hw::kWqeBasicBlock);
}

void trace_post_send(HcaLink& link, const SimQp& q, const ibv_send_wr& wr, const SendPlan& p, uint32_t nbb,
                     uint8_t flags) {
  const auto f = trace::TraceFields()
                     .set_wqe(q.sq_head)
                     .set_count(nbb)
                     .set_flag(trace::kTfSignaled, flags & hw::kCtrlCqUpdate)
                     .set_flag(trace::kTfSolicited, flags & hw::kCtrlSolicited);
  char buf[160];
  uint32_t len = p.inl ? p.inline_len : 0;  // the message length: every SGE's
  for (int i = 0; !p.inl && i < wr.num_sge; ++i) len += wr.sg_list[i].length;
  snprintf(buf, sizeof buf, "post_send: %s len=%u -> SQ WQE %u (%u WQEBB)%s%s", wr_opcode_name(wr.opcode),
           len, f.wqe, f.count, f.has(trace::kTfSignaled) ? " signaled" : "",
           f.has(trace::kTfSolicited) ? " solicited" : "");
  link.trace(trace::TraceKind::Post, q.qpn, true, wr.wr_id, f, buf);
}

/** The control segment's immediate: the WR's immediate, or the rkey an invalidation names. */
uint32_t ctrl_imm_for(const SendPlan& p, const ibv_send_wr& wr) {
  if (p.op == hw::WqeOpcode::SendImm || p.op == hw::WqeOpcode::RdmaWriteImm) return wr.imm_data;
  if (p.op == hw::WqeOpcode::SendInv || p.op == hw::WqeOpcode::LocalInv) return wr.invalidate_rkey;
  return 0;
}

/** Validate one WR, build its WQE and place it in the SQ; 0 or the errno for ibv_post_send. */
int post_one_send(SimQp& q, HcaLink& link, const ibv_send_wr& wr, bool type1_bind) {
  SendPlan p;
  p.type1_bind = type1_bind;
  if (int e = validate_send_wr(q, wr, p)) return e;
  // Staged with room to spare: 16 SGEs behind the control, datagram, address and atomic segments
  // take 21 segments, more than the 16 a WQE may have (4 WQEBBs), which is refused below.
  uint8_t wqe[(hw::kMaxSendWqeBbs + 2) * hw::kWqeBasicBlock] = {};
  uint32_t ds = build_remote_segments(q, wr, p, wqe, 1);
  ds = build_payload_segments(wr, p, wqe, ds);
  if (ds > hw::kMaxSendWqeBbs * (hw::kWqeBasicBlock / hw::kSegmentSize)) return EINVAL;  // WQE too big
  const uint32_t nbb = hw::wqe_bbs_for_segments(ds);
  const uint16_t used = uint16_t(q.sq_head - q.sq_tail.load(std::memory_order_acquire));
  if (used + nbb > (1u << q.sq_log) || q.sq_outstanding() >= q.cap.max_send_wr) return ENOMEM;  // full
  const uint8_t flags = ctrl_flags_for(q, wr);
  hw::set_ctrl_seg(*reinterpret_cast<hw::CtrlSeg*>(wqe), q.sq_head, p.op, q.qpn, ds, flags,
                   ctrl_imm_for(p, wr));
  copy_to_sq(q, wqe, nbb);
  const uint32_t slot = q.sq_head & ((1u << q.sq_log) - 1);
  q.sq_wrid[slot] = wr.wr_id;
  q.sq_nbb[slot] = uint8_t(nbb);
  q.sq_wrs_at[slot] = ++q.sq_wrs;
  if (link.trace_on(trace::TraceKind::Post)) trace_post_send(link, q, wr, p, nbb, flags);
  q.sq_head = uint16_t(q.sq_head + nbb);
  return 0;
}

/**
 * Doorbell record first (the device may re-read it), then the MMIO doorbell; with @p irqs, one
 * whose interrupt handlers run on this thread (handoff.h). A call that posted one WQE of at most
 * hw::kBlueFlameBytes (@p wqes, @p wqebbs) rings the BlueFlame register instead, as mlx5 does
 * by default: the WQE goes to the adapter with the store, which then need not read it by DMA.
 */
void ring_sq_doorbell(SimQp& q, HcaLink& link, uint16_t producer, bool irqs, int wqes, uint32_t wqebbs) {
  hw::qp_dbrec_set_sq(*q.dbrec, producer);
  const uint64_t v = hw::sq_doorbell_value(q.qpn, producer);
  const bool blueflame = wqes == 1 && wqebbs * hw::kWqeBasicBlock <= hw::kBlueFlameBytes;
  const uint32_t reg = blueflame ? hw::kUarSqBlueFlame : hw::kUarSqDoorbell;
  if (irqs)
    link.mmio_write64_irqs(reg, v);
  else
    link.mmio_write64(reg, v);
}

void trace_post_recv(HcaLink& link, const SimQp& q, const ibv_recv_wr& wr) {
  const auto f =
      trace::TraceFields().set_wqe(q.rq_head).set_count(uint32_t(wr.num_sge)).set_flag(trace::kTfRq);
  char buf[128];
  snprintf(buf, sizeof buf, "post_recv: %d SGE(s) -> RQ WQE %u", wr.num_sge, f.wqe);
  link.trace(trace::TraceKind::Post, q.qpn, true, wr.wr_id, f, buf);
}

}  // namespace

void write_recv_wqe(uint8_t* slot, uint32_t stride, const ibv_recv_wr& wr) {
  const uint32_t max_sge = stride / sizeof(hw::DataSeg);
  auto* seg = reinterpret_cast<hw::DataSeg*>(slot);
  for (int i = 0; i < wr.num_sge; ++i)
    hw::set_data_seg(seg[i], wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey);
  if (uint32_t(wr.num_sge) < max_sge) hw::set_recv_terminator(seg[wr.num_sge]);
}

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return post_send_wrs(ibqp, wr, bad, false);
}

int post_send_wrs(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad, bool type1_bind) {
  SimQp* q = sim(ibqp);
  HcaLink& link = *q->ctx->sdev->link;
  Handoff handoff(sim(ibqp->send_cq), q->qpn);
  int err;
  {
    std::lock_guard<std::mutex> g(q->sq_mu);
    const uint16_t start = q->sq_head;
    // ibv_post_send(3): the QP must be able to send (RTS, or later states that flush); an XRC
    // receive QP has no send queue.
    const ibv_qp_state st = ibqp->state;
    err = st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR || ibqp->qp_type == IBV_QPT_XRC_RECV
              ? EINVAL
              : 0;
    int wqes = 0;
    for (; wr && !err; wr = wr->next, ++wqes)
      if ((err = post_one_send(*q, link, *wr, type1_bind))) break;
    if (err && bad) *bad = wr;
    if (q->sq_head != start)
      ring_sq_doorbell(*q, link, q->sq_head, handoff.wanted(), wqes, uint16_t(q->sq_head - start));
  }
  handoff.finish();  // outside the SQ lock: the woken reader may post on this QP
  return err;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  SimQp* q = sim(ibqp);
  HcaLink& link = *q->ctx->sdev->link;
  std::lock_guard<std::mutex> g(q->rq_mu);
  // ibv_post_recv(3): not in RESET; a QP with an SRQ takes its receives from there; XRC QPs
  // have no receive queue.
  const bool no_rq = ibqp->srq || ibqp->qp_type == IBV_QPT_XRC_SEND || ibqp->qp_type == IBV_QPT_XRC_RECV;
  int err = ibqp->state == IBV_QPS_RESET || no_rq ? EINVAL : 0;
  const uint16_t start = q->rq_head;
  for (; wr && !err; wr = wr->next) {
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > q->cap.max_recv_sge)
      err = EINVAL;
    else if (uint16_t(q->rq_head - q->rq_tail.load(std::memory_order_acquire)) >= (1u << q->rq_log))
      err = ENOMEM;
    if (err) break;
    const uint32_t slot = q->rq_head & ((1u << q->rq_log) - 1);
    write_recv_wqe(q->rq->data() + (uint64_t(slot) << q->rq_stride_log), 1u << q->rq_stride_log, *wr);
    q->rq_wrid[q->rq_head & ((1u << q->rq_log) - 1)] = wr->wr_id;
    if (link.trace_on(trace::TraceKind::Post)) trace_post_recv(link, *q, *wr);
    ++q->rq_head;
  }
  if (err && bad) *bad = wr;
  if (q->rq_head == start) return err;
  hw::qp_dbrec_set_rq(*q->dbrec, q->rq_head);
  // Receives posted to a QP in ERR complete with a flush error (IBTA 10.3.1). The HCA reads
  // the RQ doorbell record only when a request arrives, which never happens in ERR: ring the
  // SQ doorbell (same producer index) so it looks at the QP and flushes them.
  if (ibqp->state == IBV_QPS_ERR)
    link.mmio_write64(hw::kUarSqDoorbell, hw::sq_doorbell_value(q->qpn, hw::qp_dbrec_sq(*q->dbrec)));
  return err;
}

}  // namespace hcasim::drv
