// SPDX-License-Identifier: Apache-2.0
#include "hca_core.h"

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

bool FrameBuilder::headers_for(const QpContext& qp, wire::BthOpcode op, uint32_t psn,
                               wire::Headers& h) const {
  const hw::Qpc& q = qp.qpc;
  const uint8_t* sgid = id_.gid[q.path.sgid_index < hw::kGidTableLen ? q.path.sgid_index : 1];
  if (!resolve_ || !resolve_(q.path.dgid, h.dst_mac)) return false;
  std::memcpy(h.src_mac, id_.mac, 6);
  wire::set_l3_from_gids(h, sgid, q.path.dgid);
  h.ttl = q.path.hop_limit ? q.path.hop_limit : 64;
  h.traffic_class = q.path.traffic_class;
  h.flow_label = q.path.flow_label;
  h.udp_sport = wire::roce_udp_sport(q.qpn, q.dest_qpn);
  h.opcode = op;
  h.dest_qp = q.dest_qpn;
  h.psn = psn & wire::kPsnMask;
  h.pkey = 0xffff;
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
