// SPDX-License-Identifier: Apache-2.0
// The port's link state as the driver sees it: QueryPort, and the port-change events a link
// going down or coming back raises (hca.h: set_link).
#include "hca.h"

namespace hcasim::model {

void Hca::set_link(bool up) {
  if (up == link_up_) return;
  link_up_ = up;
  ++link_changes_;
  HCASIM_TRACE(tracer_, Port, Note, kTraceNone, TraceFields().set_count(link_changes_),
               "port 1: link %s, port state %s: port-change EQE", up ? "up" : "down", up ? "ACTIVE" : "DOWN");
  // mlx5 reports port changes on its async EQ; this HCA's driver runs one EQ per process that
  // carries every event, so each EQ hears it (each process that opened the device).
  const hw::PortChangeSubtype what = up ? hw::PortChangeSubtype::Active : hw::PortChangeSubtype::Down;
  for (uint32_t eqn : core_.eq.ids()) core_.eq.post_port_change(eqn, what, 1);
}

void Hca::query_port(hw::CmdMailbox& mb) {
  if (mb.arg0 != 1) {
    mb.status = uint8_t(hw::CmdStatus::BadParam);
    return;
  }
  hw::PortInfo info{};
  info.state = uint8_t(link_up_ ? hw::PortState::Active : hw::PortState::Down);
  // A pulled cable: the PHY polls for a link partner (rxe says POLLING too when its netdev is
  // up without carrier; DISABLED is an administratively downed port).
  info.phys_state = uint8_t(link_up_ ? hw::PortPhysState::LinkUp : hw::PortPhysState::Polling);
  info.link_changes = uint32_t(link_changes_);
  mb.status = uint8_t(hw::CmdStatus::Ok);
  hw::set_cmd_out(mb, info);
}

void Hca::resolve_gid(hw::CmdMailbox& mb) {
  const auto q = hw::cmd_in<hw::GidQuery>(mb);
  hw::Neighbour n{};
  const bool found = core_.frames.resolve(q.gid, n.mac);
  mb.status = uint8_t(found ? hw::CmdStatus::Ok : hw::CmdStatus::BadParam);
  if (found) hw::set_cmd_out(mb, n);
}

}  // namespace hcasim::model
