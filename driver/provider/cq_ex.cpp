// SPDX-License-Identifier: Apache-2.0
// Extended CQs (ibv_create_cq_ex(3)): the start_poll / next_poll / end_poll iterator and the
// ibv_wc_read_* getters, and ibv_resize_cq(3) for every CQ.
//
// The iterator polls one completion at a time with poll_cq, so CQE parsing stays in cq.cpp;
// the getters read the cached ibv_wc and the CQE timestamp poll_cq kept (SimCq::last_cqe_ts_ns).
#include <cerrno>
#include <cstring>
#include <mutex>

#include "extended.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

/** @brief An extended CQ's iterator state: the completion the getters read. */
struct CqExState {
  /// Held from a successful start_poll to end_poll, as mlx5's CQ lock is: one batch at a time.
  std::mutex batch;
  ibv_wc wc{};
  uint64_t ts_ns = 0;       ///< the completion's CQE timestamp (simulated ns = HCA clock ticks)
  SimPd* domain = nullptr;  ///< parent domain given with IBV_CQ_INIT_ATTR_MASK_PD (holds a user)
};

void CqExStateDeleter::operator()(CqExState* s) const {
  if (s->domain) s->domain->users--;
  delete s;
}

namespace {

/** Completion fields the CQEs carry, plus the simulated clock (see kHcaCoreClockKhz). */
constexpr uint64_t kSupportedWcFlags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
constexpr uint32_t kSupportedCompMask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;

SimCq* simx(ibv_cq_ex* c) { return reinterpret_cast<SimCq*>(c); }
CqExState& state(ibv_cq_ex* c) { return *simx(c)->ex; }

/** Poll one completion into the cache and the public wr_id/status; ENOENT if there is none. */
int poll_one(ibv_cq_ex* c) {
  SimCq* q = simx(c);
  CqExState& s = *q->ex;
  const int got = poll_cq(&q->cq, 1, &s.wc);
  if (got < 0) return EINVAL;
  if (got == 0) return ENOENT;
  {
    std::lock_guard<std::mutex> g(q->mu);  // poll_cq wrote it under this lock
    s.ts_ns = q->last_cqe_ts_ns;
  }
  c->wr_id = s.wc.wr_id;
  c->status = s.wc.status;
  return 0;
}

int start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;  // no poll attributes are defined
  CqExState& s = state(c);
  s.batch.lock();
  const int e = poll_one(c);
  if (e) s.batch.unlock();  // ibv_create_cq_ex(3): after an error, end_poll is not called
  return e;
}

int next_poll(ibv_cq_ex* c) { return poll_one(c); }

void end_poll(ibv_cq_ex* c) { state(c).batch.unlock(); }

ibv_wc_opcode read_opcode(ibv_cq_ex* c) { return state(c).wc.opcode; }
uint32_t read_vendor_err(ibv_cq_ex* c) { return state(c).wc.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) { return state(c).wc.byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) { return state(c).wc.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* c) { return state(c).wc.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) { return state(c).wc.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* c) { return state(c).wc.wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) { return state(c).wc.slid; }
uint8_t read_sl(ibv_cq_ex* c) { return state(c).wc.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) { return state(c).wc.dlid_path_bits; }
uint64_t read_completion_ts(ibv_cq_ex* c) { return state(c).ts_ns; }

void install_poll_ops(ibv_cq_ex& x, uint64_t wc_flags) {
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  // Only the getters of the fields asked for in wc_flags exist, as in mlx5 and rxe.
  if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN) x.read_byte_len = read_byte_len;
  if (wc_flags & IBV_WC_EX_WITH_IMM) x.read_imm_data = read_imm_data;
  if (wc_flags & IBV_WC_EX_WITH_QP_NUM) x.read_qp_num = read_qp_num;
  if (wc_flags & IBV_WC_EX_WITH_SRC_QP) x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  if (wc_flags & IBV_WC_EX_WITH_SLID) x.read_slid = read_slid;
  if (wc_flags & IBV_WC_EX_WITH_SL) x.read_sl = read_sl;
  if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) x.read_dlid_path_bits = read_dlid_path_bits;
  if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) x.read_completion_ts = read_completion_ts;
}

/**
 * ibv_create_cq_ex(3)'s checks; 0 or the errno to fail with. CVLAN, flow tag and tag matching
 * need Ethernet/flow-steering/TM engines the HCA lacks, and it has no wall clock; ignoring
 * overrun would break the overflow rule (IBTA 11.6.2) the CQ unit enforces.
 */
int check_cq_attr(const ibv_cq_init_attr_ex& a) {
  if (a.comp_mask & ~kSupportedCompMask) return EINVAL;
  if (a.wc_flags & ~kSupportedWcFlags) return EOPNOTSUPP;
  if ((a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a.flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
    return EOPNOTSUPP;
  if ((a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && (!a.parent_domain || !sim(a.parent_domain)->parent_domain))
    return EINVAL;  // must be a parent domain, not a plain PD
  return 0;
}

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* a) {
  if (!a) {
    errno = EINVAL;
    return nullptr;
  }
  if (int e = check_cq_attr(*a)) {
    errno = e;
    return nullptr;
  }
  if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && a->parent_domain->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_cq* cq = create_cq(context, int(a->cqe), a->cq_context, a->channel, int(a->comp_vector));
  if (!cq) return nullptr;
  SimCq* q = sim(cq);
  q->ex.reset(new CqExState{});
  if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
    q->ex->domain = sim(a->parent_domain);
    q->ex->domain->users++;
  }
  install_poll_ops(q->cqx, a->wc_flags);
  return &q->cqx;
}

// ------------------------------------------------------------------ resize

namespace {

/** A ring of 2^@p log CQEs, every entry handed to hardware; nullptr if it cannot be mapped. */
std::unique_ptr<QueueBuffer> new_ring(KernelDevice& k, uint32_t log) {
  auto ring = std::make_unique<QueueBuffer>(k.link(), k.iova(), uint64_t(hw::kCqeSize) << log);
  if (!ring->ok()) return nullptr;
  for (uint32_t i = 0; i < (1u << log); ++i) hw::cqe_init(ring->data() + uint64_t(i) * hw::kCqeSize);
  return ring;
}

/**
 * Move the unpolled CQEs [ci, pi) to the same counter positions of the new ring, each with the
 * owner bit of its position there: the poller then finds them exactly where it would have.
 */
void move_unpolled(const SimCq& q, const QueueBuffer& to, uint32_t to_log, uint32_t pi) {
  const uint32_t from_mask = (1u << q.log_size) - 1, to_mask = (1u << to_log) - 1;
  for (uint32_t i = q.ci; i != pi; ++i) {
    hw::Cqe c;
    std::memcpy(&c, q.ring->data() + uint64_t(i & from_mask) * hw::kCqeSize, sizeof c);
    hw::Cqe moved;
    hw::set_cqe(moved, hw::get_cqe(c), hw::cqe_owner_for(i, to_log));
    std::memcpy(to.data() + uint64_t(i & to_mask) * hw::kCqeSize, &moved, sizeof moved);
  }
}

}  // namespace

int resize_cq(ibv_cq* cq, int cqe) {
  SimCq* q = sim(cq);
  KernelDevice& k = *q->ctx->kdev;
  if (cqe < 1 || uint32_t(cqe) > k.caps().max_cqe) return errno = EINVAL;
  uint32_t log = 0;
  while ((1u << log) < uint32_t(cqe) + 1) ++log;  // as create_cq sizes it
  std::lock_guard<std::mutex> g(q->mu);           // no poll sees the ring change under it
  auto ring = new_ring(k, log);
  if (!ring) return errno = ENOMEM;
  hw::Cqc cqc{};
  cqc.cqn = q->cqn;
  cqc.log_size = uint8_t(log);
  cqc.buf = ring->desc();
  // ibv_resize_cq(3): cqe must hold every unpolled CQE; the device checks it at the switch,
  // since CQEs may land until then.
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::ResizeCq, cqc, q->cqn, q->ci);
  if (int e = k.command(mb)) return errno = e;
  move_unpolled(*q, *ring, log, mb.arg0);
  q->ring = std::move(ring);
  q->log_size = log;
  cq->cqe = int((1u << log) - 1);
  return 0;
}

}  // namespace hcasim::drv
