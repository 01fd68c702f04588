// SPDX-License-Identifier: Apache-2.0
// XRC (ibv_open_xrcd(3), ibv_create_srq_ex(3) with IBV_SRQT_XRC, ibv_create_qp_ex(3) with
// IBV_QPT_XRC_SEND / IBV_QPT_XRC_RECV, ibv_get_srq_num(3), ibv_open_qp(3)). An XRC receive QP has
// no queues of its own: every request names an XRC SRQ of its domain, which gives the receive
// WQE, the PD for the key checks and the CQ the completion goes to.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "extended.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

void register_qp(SimQp* qp);
void unregister_qp(SimQp* qp);

namespace {

std::mutex xrcd_mu;
/** Domains opened through a file, by device and inode: reopening the file gives the same domain. */
std::map<std::pair<KernelDevice*, uint64_t>, SimXrcd*>& by_inode() {
  static auto* m = new std::map<std::pair<KernelDevice*, uint64_t>, SimXrcd*>;
  return *m;
}

/** Handles ibv_open_qp gave out, by device and QPN. */
std::map<std::pair<KernelDevice*, uint32_t>, int>& opened() {
  static auto* m = new std::map<std::pair<KernelDevice*, uint32_t>, int>;
  return *m;
}

/** The domain key of @p fd's inode, or 0 for a domain without a file. */
bool inode_key(int fd, uint64_t& key) {
  key = 0;
  if (fd < 0) return true;
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  key = (uint64_t(st.st_dev) << 40) ^ uint64_t(st.st_ino) ^ 1;
  return true;
}

SimXrcd* new_xrcd(ibv_context* context, uint64_t key) {
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::AllocXrcd);
  if (int e = sim(context)->kdev->command(mb)) {
    errno = e;
    return nullptr;
  }
  auto* x = new SimXrcd{};
  x->xrcd.context = context;
  x->xrcdn = mb.arg0;
  x->inode_key = key;
  return x;
}

}  // namespace

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* a) {
  constexpr uint32_t kKnown = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (!a || (a->comp_mask & ~kKnown) || !(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
      ((a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) && (a->oflags & ~(O_CREAT | O_EXCL)))) {
    errno = EINVAL;
    return nullptr;
  }
  const int oflags = (a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ? a->oflags : 0;
  uint64_t key = 0;
  if (!inode_key(a->fd, key)) {
    errno = EBADF;
    return nullptr;
  }
  KernelDevice* k = sim(context)->kdev;
  std::lock_guard<std::mutex> g(xrcd_mu);
  if (key) {
    auto it = by_inode().find({k, key});
    if (it != by_inode().end()) {
      // ibv_open_xrcd(3): O_EXCL fails if the file already has a domain.
      if (oflags & O_EXCL) {
        errno = EEXIST;
        return nullptr;
      }
      ++it->second->opens;
      return &it->second->xrcd;
    }
    if (!(oflags & O_CREAT)) {  // no domain on this file yet, and not asked to make one
      errno = EINVAL;
      return nullptr;
    }
  }
  SimXrcd* x = new_xrcd(context, key);
  if (!x) return nullptr;
  x->opens = 1;
  if (key) by_inode()[{k, key}] = x;
  return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  auto* x = reinterpret_cast<SimXrcd*>(xrcd);
  KernelDevice* k = sim(xrcd->context)->kdev;
  std::lock_guard<std::mutex> g(xrcd_mu);
  if (x->opens > 1) {
    --x->opens;
    return 0;
  }
  if (x->users.load()) return EBUSY;
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DeallocXrcd, x->xrcdn);
  if (int e = k->command(mb)) return e;
  if (x->inode_key) by_inode().erase({k, x->inode_key});
  delete x;
  return 0;
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* a) {
  constexpr uint32_t kKnown =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if (!a || (a->comp_mask & ~kKnown) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
      a->pd->context != context) {
    errno = a && (a->comp_mask & ~kKnown) ? EOPNOTSUPP : EINVAL;
    return nullptr;
  }
  const ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
  if (type == IBV_SRQT_BASIC) return create_srq_on(a->pd, a->srq_context, a->attr, nullptr, nullptr);
  if (type != IBV_SRQT_XRC) {  // tag matching
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // ibv_create_srq_ex(3): an XRC SRQ needs its domain and the CQ its completions go to.
  const uint32_t need = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if ((a->comp_mask & need) != need || !a->xrcd || !a->cq || a->cq->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  return create_srq_on(a->pd, a->srq_context, a->attr, reinterpret_cast<SimXrcd*>(a->xrcd), a->cq);
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  // Any SRQ has a number (mlx5 gives it for every SRQ too); XRC requests name XRC SRQs by it.
  *srq_num = sim(srq)->srqn;
  return 0;
}

ibv_qp* create_xrc_recv_qp(ibv_context* context, ibv_qp_init_attr_ex* a) {
  if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  auto* x = reinterpret_cast<SimXrcd*>(a->xrcd);
  SimContext* c = sim(context);
  KernelDevice& k = *c->kdev;
  auto* q = new SimQp{};
  q->events.qp = q;
  q->ctx = c;
  uint64_t dbrec_iova = 0;
  q->dbrec = static_cast<hw::QpDbrec*>(k.dbrecs().alloc(dbrec_iova));
  hw::Qpc qpc{};
  qpc.type = uint8_t(hw::QpType::XrcRecv);
  qpc.xrcdn = x->xrcdn;
  qpc.srqn = hw::kNoSrq;
  qpc.dbrec_addr = dbrec_iova;
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::CreateQp, qpc);
  if (int e = q->dbrec ? k.command(mb) : ENOMEM) {
    if (q->dbrec) k.dbrecs().free(q->dbrec);
    delete q;
    errno = e;
    return nullptr;
  }
  q->qpn = mb.arg0;
  q->xrcd = x;
  ibv_qp& qp = q->qp;
  qp.context = context;
  qp.qp_context = a->qp_context;
  // The device ignores a PD here, but libibverbs keeps the one given (cmd_qp.c's set_qp), and
  // librdmacm takes it from the QP for the XRC SRQ it makes next (rdma_xserver -c x).
  qp.pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : nullptr;
  qp.handle = qp.qp_num = q->qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  a->cap = ibv_qp_cap{};
  x->users++;
  register_qp(q);
  k.add_qp(q->qpn, &q->events);
  return &q->qp;
}

ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* a) {
  constexpr uint32_t kNeed = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (!a || (a->comp_mask & kNeed) != kNeed || a->qp_type != IBV_QPT_XRC_RECV || !a->xrcd ||
      a->xrcd->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  // The QP must exist in this domain: ask the device for its context.
  auto* x = reinterpret_cast<SimXrcd*>(a->xrcd);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::QueryQp, a->qp_num);
  const int e = sim(context)->kdev->command(mb);
  const hw::Qpc c = hw::cmd_out<hw::Qpc>(mb);
  if (e != 0 || c.type != uint8_t(hw::QpType::XrcRecv) || c.xrcdn != x->xrcdn) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new SimQp{};
  q->events.qp = q;
  q->ctx = sim(context);
  q->qpn = a->qp_num;
  q->xrcd = x;
  q->xrc_opened = true;
  ibv_qp& qp = q->qp;
  qp.context = context;
  qp.qp_context = a->qp_context;
  qp.handle = qp.qp_num = q->qpn;
  qp.state = ibv_qp_state(c.state);
  qp.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  {
    std::lock_guard<std::mutex> g(xrcd_mu);
    ++opened()[{q->ctx->kdev, q->qpn}];
  }
  x->users++;
  return &q->qp;
}

int destroy_xrc_recv_qp(SimQp* q) {
  KernelDevice& k = *q->ctx->kdev;
  {
    std::lock_guard<std::mutex> g(xrcd_mu);
    auto it = opened().find({&k, q->qpn});
    if (q->xrc_opened) {  // ibv_destroy_qp of an opened handle closes just that handle
      if (it != opened().end() && --it->second == 0) opened().erase(it);
    } else if (it != opened().end()) {
      return EBUSY;  // the kernel refuses too: other handles still use the QP
    }
  }
  if (!q->xrc_opened) {
    k.remove_qp(q->qpn);
    unregister_qp(q);
    hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DestroyQp, q->qpn);
    if (int e = k.command(mb)) return e;
    k.dbrecs().free(q->dbrec);
  }
  q->xrcd->users--;
  pthread_mutex_destroy(&q->qp.mutex);
  pthread_cond_destroy(&q->qp.cond);
  delete q;
  return 0;
}

}  // namespace hcasim::drv
