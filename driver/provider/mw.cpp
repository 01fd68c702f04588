// SPDX-License-Identifier: Apache-2.0
// Memory windows (ibv_alloc_mw(3), ibv_bind_mw(3), IBV_WR_BIND_MW / IBV_WR_LOCAL_INV /
// IBV_WR_SEND_WITH_INV in ibv_post_send(3)): the device keeps the windows beside the MRs (they
// share one key space); binds and local invalidations are WQEs the HCA executes in order.
#include <cerrno>

#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (!pd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
    errno = EINVAL;
    return nullptr;
  }
  SimPd* p = sim(pd);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::AllocMw, p->pdn, uint32_t(type));
  if (int e = sim(pd->context)->kdev->command(mb)) {
    errno = e;
    return nullptr;
  }
  auto* w = new SimMw{};
  w->mw.context = pd->context;
  w->mw.pd = pd;
  w->mw.rkey = mb.arg0;
  w->mw.handle = mb.arg0;
  w->mw.type = type;
  p->users++;
  return &w->mw;
}

int dealloc_mw(ibv_mw* mw) {
  // A bound window may be deallocated: it stops granting access (rxe does the same).
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DeallocMw, mw->rkey);
  if (int e = sim(mw->context)->kdev->command(mb)) {
    errno = e;
    return e;
  }
  sim(mw->pd)->users--;
  delete reinterpret_cast<SimMw*>(mw);
  return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* b) {
  // ibv_bind_mw(3): type 1 windows only (type 2 are bound with IBV_WR_BIND_MW), on the QP's PD.
  if (!qp || !mw || !b || mw->type != IBV_MW_TYPE_1 || mw->pd != qp->pd) return EINVAL;
  const uint32_t new_rkey = ibv_inc_rkey(mw->rkey);
  ibv_send_wr wr{};
  wr.wr_id = b->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = b->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = new_rkey;
  wr.bind_mw.bind_info = b->bind_info;
  ibv_send_wr* bad = nullptr;
  if (int e = post_send_wrs(qp, &wr, &bad, true)) return e;
  mw->rkey = new_rkey;  // the key the program hands out once the bind completes
  return 0;
}

}  // namespace hcasim::drv
