// SPDX-License-Identifier: Apache-2.0
// ibv_attach_mcast / ibv_detach_mcast: a UD QP joins or leaves a multicast group's deliveries at
// its port (a firmware command; on RoCE the group's LID is unused).
#include <cerrno>
#include <cstring>

#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

int attach_mcast(ibv_qp* qp, const ibv_gid* gid, bool attach) {
  // ibv_attach_mcast(3): only a UD QP, and only to a multicast GID; the errno value is returned.
  if (!qp || !gid || qp->qp_type != IBV_QPT_UD || !hw::is_multicast_gid(gid->raw)) return EINVAL;
  SimQp* q = sim(qp);
  hw::GidQuery in{};
  std::memcpy(in.gid, gid->raw, 16);
  hw::CmdMailbox mb =
      hw::make_cmd_with(attach ? hw::CmdOpcode::AttachMcast : hw::CmdOpcode::DetachMcast, in, q->qpn);
  return q->ctx->kdev->command(mb);
}

}  // namespace hcasim::drv
