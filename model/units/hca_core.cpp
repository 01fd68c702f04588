// SPDX-License-Identifier: Apache-2.0
#include "hca_core.h"

#include <cstring>

namespace hcasim::model {

void derive_gids(HcaIdentity& id) {
  // fe80::/64 with the modified EUI-64 of the MAC, as the kernel derives the link-local GID.
  uint8_t* g0 = id.gid[0];
  std::memset(g0, 0, 16);
  g0[0] = 0xfe;
  g0[1] = 0x80;
  g0[8] = id.mac[0] ^ 0x02;
  g0[9] = id.mac[1];
  g0[10] = id.mac[2];
  g0[11] = 0xff;
  g0[12] = 0xfe;
  g0[13] = id.mac[3];
  g0[14] = id.mac[4];
  g0[15] = id.mac[5];
  wire::ipv4_to_gid(id.ipv4, id.gid[1]);
}

HcaCore::HcaCore(const TimingProfile& p, Tracer& t, const HcaIdentity& ident)
    : prof(p), tracer(t), id(ident), dma(iommu, p, t), bt(dma, t), qpc(p, t, p.qpc_cache_entries),
      mrs(bt, dma, t), eq(dma, bt, p, t), cq(dma, bt, eq, p, t), port(p, t, ident.mac) {}

bool HcaCore::headers_for(const QpContext& qp, wire::BthOpcode op, uint32_t psn, wire::Headers& h) {
  const hw::Qpc& q = qp.qpc;
  const uint8_t* sgid = id.gid[q.path.sgid_index < 2 ? q.path.sgid_index : 1];
  if (!resolve || !resolve(q.path.dgid, h.dst_mac)) return false;
  std::memcpy(h.src_mac, id.mac, 6);
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

void HcaCore::send_frame(const wire::Headers& h, const void* payload, uint32_t len, uint64_t ready_ps) {
  PacketPtr pkt = make_packet();
  pkt->len = uint32_t(wire::build_frame(h, payload, len, pkt->data, sizeof pkt->data));
  if (pkt->len == 0) {
    HCASIM_TRACE(tracer, Port, Error, h.dest_qp, TraceFields(), "frame build failed (opcode %s, %u B)",
                 wire::opcode_name(h.opcode), len);
    return;
  }
  port.transmit(std::move(pkt), ready_ps);
}

}  // namespace hcasim::model
