// SPDX-License-Identifier: Apache-2.0
// UD multicast at the port: which QPs a group's datagrams go to (ibv_attach_mcast, as the
// kernel's IGMP/MLD membership leaves the port to do on RoCE), and one copy of each datagram
// sent to QP 0xFFFFFF per attached QP (IBTA 10.5.2.1). The switch floods group MACs.
#include <algorithm>
#include <cstring>

#include "hca.h"

namespace hcasim::model {

namespace {

std::array<uint8_t, 16> group_of(const wire::ParsedFrame& f) {
  std::array<uint8_t, 16> g{};
  if (f.h.ipv6) {
    std::memcpy(g.data(), f.h.ipv6_dst, 16);
  } else {
    g[10] = g[11] = 0xff;
    for (int i = 0; i < 4; ++i) g[12 + i] = uint8_t(f.h.ipv4_dst >> (24 - 8 * i));
  }
  return g;
}

}  // namespace

void Hca::attach_mcast(hw::CmdMailbox& mb, bool attach) {
  const auto q = hw::cmd_in<hw::GidQuery>(mb);
  QpContext* qp = core_.qpc.find(mb.arg0);
  const bool ud = qp && hw::QpType(qp->qpc.type) == hw::QpType::Ud;
  std::array<uint8_t, 16> g;
  std::memcpy(g.data(), q.gid, 16);
  mb.status = uint8_t(hw::CmdStatus::BadParam);
  if (!ud || !hw::is_multicast_gid(q.gid)) return;  // ibv_attach_mcast(3): UD QPs, group GIDs
  std::vector<uint32_t>& members = mcast_[g];
  auto it = std::find(members.begin(), members.end(), mb.arg0);
  if (attach && it == members.end()) members.push_back(mb.arg0);
  if (!attach) {
    if (it == members.end()) return;
    members.erase(it);
  }
  mb.status = uint8_t(hw::CmdStatus::Ok);
  HCASIM_TRACE(tracer_, Command, Note, mb.arg0, TraceFields().set_count(uint32_t(members.size())),
               "QP 0x%x %s multicast group %u.%u.%u.%u (%zu member QP(s) here)", mb.arg0,
               attach ? "joins" : "leaves", g[12], g[13], g[14], g[15], members.size());
}

void Hca::deliver_multicast(PacketPtr pkt, const wire::ParsedFrame& f) {
  auto it = mcast_.find(group_of(f));
  if (it == mcast_.end() || it->second.empty()) {  // no member here: the port filters it out
    ++rx_dropped_;
    return;
  }
  for (uint32_t qpn : it->second) {
    PacketPtr copy = make_packet();
    copy->len = pkt->len;
    copy->pristine = pkt->pristine;
    std::memcpy(copy->data, pkt->data, pkt->len);
    wire::ParsedFrame cf;
    if (wire::parse_frame(copy->data, copy->len, cf, false) != wire::ParseError::Ok) continue;
    cf.h.dest_qp = qpn;  // this copy is for that QP
    QpcCache::Lookup l = core_.qpc.lookup(qpn, "rx multicast");
    if (!l.qp) continue;
    rx_ready_ps_ = std::max(now_ps() + l.latency_ps + core_.prof.pkt_process_ps, rx_ready_ps_);
    rx_stage_.push(rx_ready_ps_, RxWork{std::move(copy), cf});
  }
}

}  // namespace hcasim::model
