// SPDX-License-Identifier: Apache-2.0
// Extended QPs: ibv_create_qp_ex and the ibv_wr_* work-request API (ibv_wr_post(3)).
//
// The builders do not write WQEs themselves: they collect classic ibv_send_wr structs (with
// owned copies of SGE lists and inline bytes) between wr_start and wr_complete, and
// wr_complete hands the chain to post_send. The WQE layout, doorbells and tracing therefore
// stay in one place (qp.cpp), and a WR posted either way reaches the device as the same bytes.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "../libibverbs/core_extra.h"
#include "extended.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

/** @brief One WR built by the ibv_wr_* builders, with the memory its pointers refer to. */
struct PendingWr {
  ibv_send_wr wr{};
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_bytes;  ///< copied at the setter call, as ibv_wr_post(3) requires
  bool is_inline = false;
};

/** @brief A QP's ibv_wr_* state: the batch between wr_start and wr_complete / wr_abort. */
struct QpExState {
  /// Held from wr_start to wr_complete/wr_abort: the per-QP critical region of ibv_wr_post(3).
  std::mutex region;
  uint64_t send_ops = 0;  ///< send_ops_flags given at creation
  std::deque<PendingWr> batch;
  /// First error a builder or setter met; wr_complete returns it and posts nothing.
  int err = 0;
};

void QpExStateDeleter::operator()(QpExState* s) const { delete s; }

namespace {

constexpr uint32_t kSupportedCompMask =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/**
 * Operations the simulated HCA executes (post_send's opcodes). One list for both checks: asked
 * for at ibv_create_qp_ex -> EOPNOTSUPP otherwise; built between wr_start and wr_complete ->
 * the batch fails whole (EINVAL, what post_send returns for them) instead of half-posting.
 * LOCAL_INV, BIND_MW and SEND_WITH_INV join this list when post_send accepts them.
 */
uint64_t device_send_ops(const hw::HcaCaps& caps) {
  uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_BIND_MW |
                 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;
  if (caps.atomic_cap != IBV_ATOMIC_NONE)
    ops |= IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  return ops;
}

uint64_t send_op_flag(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE: return IBV_QP_EX_WITH_RDMA_WRITE;
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    case IBV_WR_SEND: return IBV_QP_EX_WITH_SEND;
    case IBV_WR_SEND_WITH_IMM: return IBV_QP_EX_WITH_SEND_WITH_IMM;
    case IBV_WR_RDMA_READ: return IBV_QP_EX_WITH_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    case IBV_WR_LOCAL_INV: return IBV_QP_EX_WITH_LOCAL_INV;
    case IBV_WR_BIND_MW: return IBV_QP_EX_WITH_BIND_MW;
    case IBV_WR_SEND_WITH_INV: return IBV_QP_EX_WITH_SEND_WITH_INV;
    case IBV_WR_TSO: return IBV_QP_EX_WITH_TSO;
    default: return 0;
  }
}

SimQp* simx(ibv_qp_ex* qpx) { return reinterpret_cast<SimQp*>(qpx); }
QpExState& state(ibv_qp_ex* qpx) { return *simx(qpx)->ex; }

void set_err(QpExState& s, int e) {
  if (!s.err) s.err = e;
}

/** Start a WR: wr_id and wr_flags come from the ibv_qp_ex fields as they are now. */
PendingWr& begin_wr(ibv_qp_ex* qpx, ibv_wr_opcode op) {
  QpExState& s = state(qpx);
  PendingWr& p = s.batch.emplace_back();
  p.wr.wr_id = qpx->wr_id;
  p.wr.opcode = op;
  // Inline is chosen by the setter (wr_set_inline_data*), never by the flag.
  p.wr.send_flags = qpx->wr_flags & ~unsigned(IBV_SEND_INLINE);
  return p;
}

/** The WR a setter applies to, or nullptr (setter before any builder: the batch fails). */
PendingWr* last_wr(ibv_qp_ex* qpx) {
  QpExState& s = state(qpx);
  if (s.batch.empty()) {
    set_err(s, EINVAL);
    return nullptr;
  }
  return &s.batch.back();
}

// ---- builders (ibv_wr_post(3) WORK REQUESTS)

void wr_send(ibv_qp_ex* qpx) { begin_wr(qpx, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* qpx, __be32 imm) { begin_wr(qpx, IBV_WR_SEND_WITH_IMM).wr.imm_data = imm; }

void wr_send_inv(ibv_qp_ex* qpx, uint32_t rkey) {
  begin_wr(qpx, IBV_WR_SEND_WITH_INV).wr.invalidate_rkey = rkey;
}

void wr_rdma(ibv_qp_ex* qpx, ibv_wr_opcode op, uint32_t rkey, uint64_t raddr, __be32 imm) {
  PendingWr& p = begin_wr(qpx, op);
  p.wr.wr.rdma.remote_addr = raddr;
  p.wr.wr.rdma.rkey = rkey;
  p.wr.imm_data = imm;
}

void wr_rdma_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t raddr) {
  wr_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, raddr, 0);
}

void wr_rdma_write_imm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t raddr, __be32 imm) {
  wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

void wr_rdma_read(ibv_qp_ex* qpx, uint32_t rkey, uint64_t raddr) {
  wr_rdma(qpx, IBV_WR_RDMA_READ, rkey, raddr, 0);
}

void wr_atomic(ibv_qp_ex* qpx, ibv_wr_opcode op, uint32_t rkey, uint64_t raddr, uint64_t compare_add,
               uint64_t swap) {
  PendingWr& p = begin_wr(qpx, op);
  p.wr.wr.atomic.remote_addr = raddr;
  p.wr.wr.atomic.rkey = rkey;
  p.wr.wr.atomic.compare_add = compare_add;
  p.wr.wr.atomic.swap = swap;
}

void wr_atomic_cmp_swp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t raddr, uint64_t compare, uint64_t swap) {
  wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, raddr, compare, swap);
}

void wr_atomic_fetch_add(ibv_qp_ex* qpx, uint32_t rkey, uint64_t raddr, uint64_t add) {
  wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, raddr, add, 0);
}

void wr_local_inv(ibv_qp_ex* qpx, uint32_t rkey) {
  begin_wr(qpx, IBV_WR_LOCAL_INV).wr.invalidate_rkey = rkey;
}

void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  PendingWr& p = begin_wr(qpx, IBV_WR_BIND_MW);
  p.wr.bind_mw.mw = mw;
  p.wr.bind_mw.rkey = rkey;
  if (info)
    p.wr.bind_mw.bind_info = *info;
  else
    set_err(state(qpx), EINVAL);
}

// TSO segments TCP streams on UD and raw-packet QPs; the simulated HCA has no TSO engine.
void wr_send_tso(ibv_qp_ex* qpx, void* hdr, uint16_t hdr_sz, uint16_t mss) {
  PendingWr& p = begin_wr(qpx, IBV_WR_TSO);
  p.wr.tso.hdr = hdr;
  p.wr.tso.hdr_sz = hdr_sz;
  p.wr.tso.mss = mss;
  set_err(state(qpx), EOPNOTSUPP);
}

// ATOMIC_WRITE (IBTA 1.5) is newer than this ABI's send_ops_flags; the device has no such opcode.
void wr_atomic_write(ibv_qp_ex* qpx, uint32_t, uint64_t, const void*) { set_err(state(qpx), EOPNOTSUPP); }

// ---- setters

void wr_set_sge_list(ibv_qp_ex* qpx, size_t n, const ibv_sge* list) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  p->is_inline = false;
  p->sges.clear();
  // Zero-length entries carry nothing; mlx5 and rxe drop them too.
  for (size_t i = 0; i < n; ++i)
    if (list[i].length) p->sges.push_back(list[i]);
  if (p->sges.size() > simx(qpx)->cap.max_send_sge) set_err(state(qpx), EINVAL);
}

void wr_set_sge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(qpx, 1, &sge);
}

/** ibv_wr_post(3): inline data is valid only for SEND and RDMA_WRITE (and their _IMM forms). */
bool inline_allowed(ibv_wr_opcode op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE ||
         op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_INV;
}

void wr_set_inline_data_list(ibv_qp_ex* qpx, size_t n, const ibv_data_buf* bufs) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  if (!inline_allowed(p->wr.opcode)) return set_err(state(qpx), EINVAL);
  p->is_inline = true;
  p->sges.clear();
  p->inline_bytes.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto* b = static_cast<const uint8_t*>(bufs[i].addr);
    p->inline_bytes.insert(p->inline_bytes.end(), b, b + bufs[i].length);
  }
  // Above max_inline_data is EINVAL, as for ibv_post_send(3) with IBV_SEND_INLINE.
  if (p->inline_bytes.size() > simx(qpx)->cap.max_inline_data) set_err(state(qpx), EINVAL);
}

void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(qpx, 1, &b);
}

// QP-type setters (ibv_wr_post(3) "QP Specific setters"): only for the QP types that take
// them. On RC the UD address would overwrite wr.wr.rdma (a union), so it fails the batch.
void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  if (qpx->qp_base.qp_type != IBV_QPT_UD) return set_err(state(qpx), EINVAL);
  p->wr.wr.ud.ah = ah;
  p->wr.wr.ud.remote_qpn = remote_qpn;
  p->wr.wr.ud.remote_qkey = remote_qkey;
}

void wr_set_xrc_srqn(ibv_qp_ex* qpx, uint32_t remote_srqn) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  if (qpx->qp_base.qp_type != IBV_QPT_XRC_SEND) return set_err(state(qpx), EINVAL);
  p->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

// ---- the critical region

void wr_start(ibv_qp_ex* qpx) {
  QpExState& s = state(qpx);
  s.region.lock();
  s.batch.clear();
  s.err = 0;
}

void wr_abort(ibv_qp_ex* qpx) {
  QpExState& s = state(qpx);
  s.batch.clear();
  s.err = 0;
  s.region.unlock();
}

/**
 * ibv_post_send(3)'s checks that can fail a WR, applied to the whole batch before anything is
 * posted: ibv_wr_post(3) says a failure in wr_complete aborts the entire posting.
 */
int validate_batch(SimQp& q, const QpExState& s) {
  const uint64_t ops = device_send_ops(q.ctx->kdev->caps());
  for (const PendingWr& p : s.batch) {
    if (!(send_op_flag(p.wr.opcode) & ops)) return EINVAL;
    const bool atomic =
        p.wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || p.wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    // An atomic returns the original 8 bytes into exactly one 8-byte buffer.
    if (atomic && (p.sges.size() != 1 || p.sges[0].length != 8)) return EINVAL;
  }
  // Room for the batch. Every WQE of this QP spans at most ring/max_send_wr WQEBBs (the stride
  // the ring was sized with), so this never refuses what max_send_wr promises.
  const uint32_t ring = 1u << q.sq_log;
  const uint32_t per_wr = ring / std::max(1u, q.cap.max_send_wr);
  const uint32_t used = uint16_t(q.sq_head - q.sq_tail.load(std::memory_order_acquire));
  if (used + s.batch.size() * per_wr > ring || q.sq_outstanding() + s.batch.size() > q.cap.max_send_wr)
    return ENOMEM;
  return 0;
}

/** Link the batch into an ibv_send_wr chain whose pointers refer to the batch's own copies. */
ibv_send_wr* chain(QpExState& s) {
  ibv_send_wr* next = nullptr;
  for (auto it = s.batch.rbegin(); it != s.batch.rend(); ++it) {
    PendingWr& p = *it;
    if (p.is_inline) {
      // post_send copies inline bytes from the SGE addresses at post time; lkey is unused.
      p.sges.assign(
          1, ibv_sge{reinterpret_cast<uintptr_t>(p.inline_bytes.data()), uint32_t(p.inline_bytes.size()), 0});
      p.wr.send_flags |= IBV_SEND_INLINE;
    }
    p.wr.sg_list = p.sges.empty() ? nullptr : p.sges.data();
    p.wr.num_sge = int(p.sges.size());
    p.wr.next = next;
    next = &p.wr;
  }
  return next;
}

void trace_complete(SimQp& q, size_t n) {
  HcaLink& link = *q.ctx->sdev->link;
  if (!link.trace_on(trace::TraceKind::Note)) return;
  char buf[96];
  snprintf(buf, sizeof buf, "wr_complete: %zu WR(s) built with ibv_wr_* -> post_send", n);
  link.trace(trace::TraceKind::Note, q.qpn, false, 0, trace::TraceFields().set_count(uint32_t(n)), buf);
}

int wr_complete(ibv_qp_ex* qpx) {
  SimQp& q = *simx(qpx);
  QpExState& s = *q.ex;
  int err = s.err ? s.err : validate_batch(q, s);
  if (!err && !s.batch.empty()) {
    trace_complete(q, s.batch.size());
    ibv_send_wr* bad = nullptr;
    err = post_send(&qpx->qp_base, chain(s), &bad);
  }
  s.batch.clear();
  s.err = 0;
  s.region.unlock();
  return err;
}

void install_wr_ops(ibv_qp_ex& x) {
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_atomic_write = wr_atomic_write;
}

/** ibv_create_qp_ex(3)'s checks on the extended fields; 0 or the errno to fail with. */
int check_init_attr_ex(ibv_context* context, const ibv_qp_init_attr_ex& a) {
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd || a.pd->context != context) return EINVAL;
  if (a.comp_mask & ~kSupportedCompMask) return EOPNOTSUPP;  // XRCD, TSO header, RSS: not modelled
  if ((a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a.create_flags) return EOPNOTSUPP;
  if ((a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
      (a.send_ops_flags & ~device_send_ops(sim(context)->kdev->caps())))
    return EOPNOTSUPP;  // ibv_wr_post(3): creation fails if an asked-for type is unsupported
  return 0;
}

}  // namespace

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* a) {
  if (!a) {
    errno = EINVAL;
    return nullptr;
  }
  if (a->qp_type == IBV_QPT_XRC_RECV) return create_xrc_recv_qp(context, a);
  if (int e = check_init_attr_ex(context, *a)) {
    errno = e;
    return nullptr;
  }
  // ibv_qp_init_attr is the prefix of ibv_qp_init_attr_ex (verbs.h casts one to the other).
  ibv_qp_init_attr classic{};
  std::memcpy(&classic, a, sizeof classic);
  ibv_qp* qp = create_qp(a->pd, &classic);
  if (!qp) return nullptr;
  a->cap = classic.cap;
  if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    SimQp* q = sim(qp);
    q->ex.reset(new QpExState{});
    q->ex->send_ops = a->send_ops_flags;
    install_wr_ops(q->qpx);
  }
  return qp;
}

ibv_qp_ex* qp_to_qp_ex(ibv_qp* qp) {
  SimQp* q = sim(qp);
  if (!q->ex) {
    errno = EOPNOTSUPP;  // made without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: no ibv_wr_* API
    return nullptr;
  }
  return &q->qpx;
}

}  // namespace hcasim::drv
