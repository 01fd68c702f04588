// SPDX-License-Identifier: Apache-2.0
#include "hca_core.h"
#include "ib_mad.h"

#include <cstring>

namespace hcasim::model {

void derive_gids(HcaIdentity& id) {
  static_assert(sizeof id.gid / sizeof id.gid[0] == hw::kGidTableLen);
  for (uint32_t i = 0; i < hw::kGidTableLen; ++i) hw::port_gid(i, id.mac, id.ipv4, id.gid[i]);
}

HcaCore::HcaCore(const TimingProfile& p, Tracer& t, const HcaIdentity& ident)
    : prof(p),
      tracer(t),
      id(ident),
      dma(iommu, p, t),
      bt(dma, t),
      qpc(p, t, p.qpc_cache_entries),
      fetch(bt, dma, p),
      mrs(bt, dma, t),
      eq(dma, bt, p, t),
      cq(dma, bt, eq, p, t),
      port(p, t, ident.mac),
      frames(id, port, t) {}

bool FrameBuilder::address(const hw::PathDesc& path, uint32_t src_qpn, uint32_t dst_qpn,
                           wire::Headers& h) const {
  const uint8_t* sgid = id_.gid[path.sgid_index < hw::kGidTableLen ? path.sgid_index : 1];
  // A multicast group has no neighbour: its frames go to the group's MAC (IBTA A17.4.5). Asked
  // only when the neighbour table fails, so a unicast packet pays no extra check.
  if (!resolve_ || !resolve_(path.dgid, h.dst_mac)) {
    if (!hw::is_multicast_gid(path.dgid)) return false;
    hw::multicast_mac(path.dgid, h.dst_mac);
  }
  std::memcpy(h.src_mac, id_.mac, 6);
  wire::set_l3_from_gids(h, sgid, path.dgid);
  h.ttl = path.hop_limit ? path.hop_limit : 64;
  h.traffic_class = path.traffic_class;
  h.flow_label = path.flow_label;
  h.udp_sport = wire::roce_udp_sport(src_qpn, dst_qpn);
  h.dest_qp = dst_qpn;
  h.pkey = 0xffff;
  return true;
}

bool FrameBuilder::gsi_headers(const hw::PathDesc& path, wire::Headers& h) const {
  if (!address(path, hw::kGsiQpn, hw::kGsiQpn, h)) return false;
  h.opcode = wire::BthOpcode::UD_SEND_ONLY;
  h.deth.qkey = wire::mad::kGsiQkey;
  h.deth.src_qp = hw::kGsiQpn;
  return true;
}

bool FrameBuilder::headers_for(const QpContext& qp, wire::BthOpcode op, uint32_t psn,
                               wire::Headers& h) const {
  if (!address(qp.qpc.path, qp.qpc.qpn, qp.qpc.dest_qpn, h)) return false;
  h.opcode = wire::in_transport(op, qp_transport(qp));
  h.psn = psn & wire::kPsnMask;
  return true;
}

bool FrameBuilder::datagram_headers(const QpContext& qp, const hw::DatagramAddr& av, wire::BthOpcode op,
                                    uint32_t psn, wire::Headers& h) const {
  hw::PathDesc path{};
  std::memcpy(path.dgid, av.dgid, 16);
  path.sgid_index = av.sgid_index;
  path.hop_limit = av.hop_limit;
  path.traffic_class = av.traffic_class;
  path.flow_label = av.flow_label;
  if (!address(path, qp.qpc.qpn, av.dqpn, h)) return false;
  h.opcode = op;
  h.psn = psn & wire::kPsnMask;
  // IBTA 10.2.5: a Q_Key with its high bit set is privileged; the QP's own Q_Key goes out instead.
  h.deth.qkey = (av.qkey & 0x80000000u) ? qp.qpc.qkey : av.qkey;
  h.deth.src_qp = qp.qpc.qpn;
  return true;
}

void FrameBuilder::send_frame(const wire::Headers& h, const void* payload, uint32_t len, uint64_t ready_ps) {
  PacketPtr pkt = make_packet();
  pkt->len = uint32_t(wire::build_frame(h, payload, len, pkt->data, sizeof pkt->data));
  if (pkt->len == 0) {
    HCASIM_TRACE(tracer_, Port, Error, h.dest_qp,
                 TraceFields()
                     .set_opcode(uint16_t(h.opcode))
                     .set_psn(h.psn)
                     .set_peer_qpn(h.dest_qp)
                     .set_count(len)
                     .set_flag(kTfError),
                 "frame build failed (opcode %s, %u B)", wire::opcode_name(h.opcode), len);
    return;
  }
  port_.transmit(std::move(pkt), ready_ps);
}

}  // namespace hcasim::model
