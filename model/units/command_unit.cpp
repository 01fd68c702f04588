// SPDX-License-Identifier: Apache-2.0
#include "command_unit.h"

#include <infiniband/verbs.h>  // attribute-mask bit values only (hw::QpAttrMask equals them)

namespace hcasim::model {

CommandUnit::CommandUnit(Tracer& tracer, QpcCache& qpc, SrqTable& srqs, MrTable& mrs, CqUnit& cq, EqUnit& eq,
                         hw::HcaCaps caps, std::function<void(QpContext&, hw::QpState)> on_state,
                         uint32_t first_qpn)
    : tracer_(tracer),
      qpc_(qpc),
      srqs_(srqs),
      mrs_(mrs),
      cq_(cq),
      eq_(eq),
      caps_(caps),
      on_state_(std::move(on_state)),
      next_qpn_(first_qpn) {}

hw::CmdStatus CommandUnit::modify_qp(QpContext& qp, uint32_t mask, const hw::Qpc& in) {
  hw::Qpc& q = qp.qpc;
  const auto from = hw::QpState(q.state);
  if (mask & IBV_QP_STATE) q.state = in.state;
  if (mask & IBV_QP_PKEY_INDEX) q.pkey_index = in.pkey_index;
  if (mask & IBV_QP_PORT) q.port = in.port;
  if (mask & IBV_QP_ACCESS_FLAGS) q.access_flags = in.access_flags;
  if (mask & IBV_QP_AV) q.path = in.path;
  if (mask & IBV_QP_PATH_MTU) q.path_mtu_log = in.path_mtu_log;
  if (mask & IBV_QP_DEST_QPN) q.dest_qpn = in.dest_qpn & hw::kQpnMask;
  if (mask & IBV_QP_RQ_PSN) q.rq_psn = in.rq_psn & hw::kPsnMask;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q.max_dest_rd_atomic = in.max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) q.min_rnr_timer = in.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) q.timeout = in.timeout;
  if (mask & IBV_QP_RETRY_CNT) q.retry_cnt = in.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q.rnr_retry = in.rnr_retry;
  if (mask & IBV_QP_SQ_PSN) q.sq_psn = in.sq_psn & hw::kPsnMask;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = in.max_rd_atomic;
  if (mask & IBV_QP_QKEY) q.qkey = in.qkey;
  const auto to = hw::QpState(q.state);
  if (mask & IBV_QP_RQ_PSN) qp.epsn = q.rq_psn;
  if (mask & IBV_QP_SQ_PSN) qp.next_psn = q.sq_psn;
  if (mask & IBV_QP_RNR_RETRY) qp.rnr_left = q.rnr_retry;
  if (mask & IBV_QP_RETRY_CNT) qp.retry_left = q.retry_cnt;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) q.sqd_notify = in.sqd_notify;
  if (to == hw::QpState::Reset && from != hw::QpState::Reset) {
    // Back to RESET: the hardware forgets all running state; rings restart at 0.
    hw::Qpc keep = q;
    keep.state = uint8_t(hw::QpState::Reset);
    qp = QpContext{};
    qp.qpc = keep;
  }
  if (to != from) {
    HCASIM_TRACE(tracer_, Command, QpState, q.qpn, TraceFields(), "QP 0x%x %s -> %s", q.qpn,
                 hw::qp_state_name(from), hw::qp_state_name(to));
    if (on_state_) on_state_(qp, from);
  }
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::create_mkey(hw::CmdMailbox& mb) {
  auto m = hw::cmd_in<hw::MkeyCtx>(mb);
  if (!pds_.count(m.pdn)) return hw::CmdStatus::BadResource;
  // Key = index << 8 | variant byte, as mlx5 mkeys are, so stale keys stay invalid.
  m.key = (next_mkey_++ << 8) | mkey_tag_;
  mkey_tag_ = uint8_t(mkey_tag_ * 5 + 1);
  if (!mrs_.add(m)) return hw::CmdStatus::BadResource;
  mb.arg0 = m.key;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::alloc_mw(hw::CmdMailbox& mb) {
  if (!pds_.count(mb.arg0)) return hw::CmdStatus::BadResource;
  if (mb.arg1 != 1 && mb.arg1 != 2) return hw::CmdStatus::BadParam;
  // Windows take their key index from the same space as MRs: a key names one or the other.
  const uint32_t key = (next_mkey_++ << 8) | mkey_tag_;
  mkey_tag_ = uint8_t(mkey_tag_ * 5 + 1);
  if (!mrs_.add_window(key, mb.arg0, uint8_t(mb.arg1))) return hw::CmdStatus::BadResource;
  HCASIM_TRACE(tracer_, Command, Note, kTraceNone, TraceFields().set_key(key),
               "memory window 0x%x (type %u) allocated", key, mb.arg1);
  mb.arg0 = key;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::create_eq(hw::CmdMailbox& mb) {
  auto e = hw::cmd_in<hw::Eqc>(mb);
  e.eqn = next_eqn_++;
  if (!eq_.create(e)) return hw::CmdStatus::BadResource;
  mb.arg0 = e.eqn;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::create_cq(hw::CmdMailbox& mb) {
  auto cq = hw::cmd_in<hw::Cqc>(mb);
  if (!eq_.exists(cq.eqn)) return hw::CmdStatus::BadResource;
  cq.cqn = next_cqn_++;
  if (!cq_.create(cq)) return hw::CmdStatus::BadResource;
  mb.arg0 = cq.cqn;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::resize_cq(hw::CmdMailbox& mb) {
  const auto in = hw::cmd_in<hw::Cqc>(mb);
  uint32_t pi = 0;
  switch (cq_.resize(mb.arg0, in.log_size, in.buf, mb.arg1, pi)) {
    case CqUnit::Resize::Ok: break;
    case CqUnit::Resize::NoSuchCq: return hw::CmdStatus::BadResource;
    case CqUnit::Resize::TooSmall: return hw::CmdStatus::BadParam;
  }
  mb.arg0 = pi;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::check_qp_resources(const hw::Qpc& q) {
  const auto type = hw::QpType(q.type);
  if (type == hw::QpType::XrcRecv)
    return xrcds_.count(q.xrcdn) ? hw::CmdStatus::Ok : hw::CmdStatus::BadResource;
  if (type != hw::QpType::Rc && type != hw::QpType::Uc && !hw::is_datagram(type) &&
      type != hw::QpType::XrcSend)
    return hw::CmdStatus::BadParam;
  if (!pds_.count(q.pdn) || !cq_.exists(q.send_cqn) || !cq_.exists(q.recv_cqn))
    return hw::CmdStatus::BadResource;
  if (q.srqn != hw::kNoSrq && !srqs_.find(q.srqn)) return hw::CmdStatus::BadResource;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::create_qp(hw::CmdMailbox& mb) {
  auto q = hw::cmd_in<hw::Qpc>(mb);
  if (hw::CmdStatus s = check_qp_resources(q); s != hw::CmdStatus::Ok) return s;
  // The GSI QP is number 1 on every HCA (IBTA 13.5.2), so there is at most one.
  const bool gsi = hw::QpType(q.type) == hw::QpType::Gsi;
  if (gsi && qpc_.find(hw::kGsiQpn)) return hw::CmdStatus::ResourceBusy;
  q.qpn = gsi ? hw::kGsiQpn : next_qpn_++;
  q.state = uint8_t(hw::QpState::Reset);
  QpContext* qp = qpc_.create(q.qpn);
  if (!qp) return hw::CmdStatus::BadResource;
  qp->qpc = q;
  mb.arg0 = q.qpn;
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::query_qp(hw::CmdMailbox& mb) {
  QpContext* qp = qpc_.find(mb.arg0);
  if (!qp) return hw::CmdStatus::BadResource;
  hw::Qpc q = qp->qpc;
  q.sq_psn = qp->next_psn;
  q.rq_psn = qp->epsn;
  hw::set_cmd_out(mb, q);
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::create_srq(hw::CmdMailbox& mb) {
  auto c = hw::cmd_in<hw::Srqc>(mb);
  if (!pds_.count(c.pdn) || !eq_.exists(c.eqn)) return hw::CmdStatus::BadResource;
  if (c.xrcdn && (!xrcds_.count(c.xrcdn) || !cq_.exists(c.cqn))) return hw::CmdStatus::BadResource;
  if (c.log_size > 16 || c.log_stride < 4) return hw::CmdStatus::BadParam;
  c.srqn = next_srqn_++;
  if (!srqs_.create(c)) return hw::CmdStatus::BadResource;
  mb.arg0 = c.srqn;
  HCASIM_TRACE(tracer_, Command, Note, kTraceNone, TraceFields().set_queue(c.srqn),
               "SRQ 0x%x created: %u WQEs of %u bytes", c.srqn, 1u << c.log_size, 1u << c.log_stride);
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::arm_srq(hw::CmdMailbox& mb) {
  SrqContext* s = srqs_.find(mb.arg0);
  if (!s) return hw::CmdStatus::BadResource;
  if (mb.arg1 > (1u << s->srqc.log_size)) return hw::CmdStatus::BadParam;
  s->srqc.limit = mb.arg1;
  HCASIM_TRACE(tracer_, Command, Note, kTraceNone, TraceFields().set_queue(mb.arg0).set_count(mb.arg1),
               "SRQ 0x%x limit armed at %u", mb.arg0, mb.arg1);
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::query_srq(hw::CmdMailbox& mb) {
  SrqContext* s = srqs_.find(mb.arg0);
  if (!s) return hw::CmdStatus::BadResource;
  hw::set_cmd_out(mb, s->srqc);
  return hw::CmdStatus::Ok;
}

hw::CmdStatus CommandUnit::destroy_srq(hw::CmdMailbox& mb) {
  bool used = false;
  qpc_.for_each([&](QpContext& qp) { used = used || qp.qpc.srqn == mb.arg0; });
  if (used) return hw::CmdStatus::ResourceBusy;  // ibv_destroy_srq(3): EBUSY while QPs use it
  return srqs_.destroy(mb.arg0) ? hw::CmdStatus::Ok : hw::CmdStatus::BadResource;
}

hw::CmdStatus CommandUnit::dealloc_xrcd(hw::CmdMailbox& mb) {
  bool used = false;
  qpc_.for_each([&](QpContext& qp) {
    used = used || (qp.qpc.type == uint8_t(hw::QpType::XrcRecv) && qp.qpc.xrcdn == mb.arg0);
  });
  for (uint32_t s : srqs_.ids()) used = used || srqs_.find(s)->srqc.xrcdn == mb.arg0;
  if (used) return hw::CmdStatus::ResourceBusy;  // ibv_close_xrcd(3): EBUSY while in use
  return xrcds_.erase(mb.arg0) ? hw::CmdStatus::Ok : hw::CmdStatus::BadResource;
}

void CommandUnit::execute(hw::CmdMailbox& mb) {
  mb.syndrome = 0;
  const auto found = [](bool ok) { return ok ? hw::CmdStatus::Ok : hw::CmdStatus::BadResource; };
  hw::CmdStatus s = hw::CmdStatus::Ok;
  switch (hw::CmdOpcode(mb.opcode)) {
    case hw::CmdOpcode::QueryHcaCap: hw::set_cmd_out(mb, caps_); break;
    case hw::CmdOpcode::AllocPd:
      mb.arg0 = next_pdn_++;
      pds_.insert(mb.arg0);
      break;
    case hw::CmdOpcode::DeallocPd: s = found(pds_.erase(mb.arg0) != 0); break;
    case hw::CmdOpcode::AllocXrcd:
      mb.arg0 = next_pdn_++;
      xrcds_.insert(mb.arg0);
      break;
    case hw::CmdOpcode::DeallocXrcd: s = dealloc_xrcd(mb); break;
    case hw::CmdOpcode::CreateMkey: s = create_mkey(mb); break;
    case hw::CmdOpcode::DestroyMkey: s = found(mrs_.remove(mb.arg0)); break;
    case hw::CmdOpcode::AllocMw: s = alloc_mw(mb); break;
    case hw::CmdOpcode::DeallocMw: s = found(mrs_.remove_window(mb.arg0)); break;
    case hw::CmdOpcode::CreateEq: s = create_eq(mb); break;
    case hw::CmdOpcode::DestroyEq: s = found(eq_.destroy(mb.arg0)); break;
    case hw::CmdOpcode::CreateCq: s = create_cq(mb); break;
    case hw::CmdOpcode::DestroyCq: s = found(cq_.destroy(mb.arg0)); break;
    case hw::CmdOpcode::ResizeCq: s = resize_cq(mb); break;
    case hw::CmdOpcode::CreateQp: s = create_qp(mb); break;
    case hw::CmdOpcode::ModifyQp: {
      QpContext* qp = qpc_.find(mb.arg0);
      s = qp ? modify_qp(*qp, mb.arg1, hw::cmd_in<hw::Qpc>(mb)) : hw::CmdStatus::BadResource;
      break;
    }
    case hw::CmdOpcode::QueryQp: s = query_qp(mb); break;
    case hw::CmdOpcode::DestroyQp: s = found(qpc_.destroy(mb.arg0)); break;
    case hw::CmdOpcode::CreateSrq: s = create_srq(mb); break;
    case hw::CmdOpcode::ArmSrq: s = arm_srq(mb); break;
    case hw::CmdOpcode::QuerySrq: s = query_srq(mb); break;
    case hw::CmdOpcode::DestroySrq: s = destroy_srq(mb); break;
    default: s = hw::CmdStatus::BadOpcode;
  }
  mb.status = uint8_t(s);
}

}  // namespace hcasim::model
