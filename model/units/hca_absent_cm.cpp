// SPDX-License-Identifier: Apache-2.0
// QP1 when no program on this host has started a connection manager. On a real host the
// kernel's CM owns QP1 from the moment the device appears, so a connection request to a host
// where nothing listens is rejected at once (REJ reason 8) and the requester's rdma_connect()
// fails with RDMA_CM_EVENT_REJECTED. Here the CM lives in the programs (driver/cm), and QP1
// exists only while one of them has it open; until then this answers for the host's CM as a
// CM without state does (wire::mad::answer_without_state), instead of leaving the request to
// be resent seconds later. Likewise the kernel's CM ends the connections of a process that
// ends without ending them (killed): the program's CM leaves each established connection's DREQ
// here (SetLeftDreq), and the HCA sends those when its owner is gone.
#include <cstring>
#include <string>

#include "hca.h"
#include "ib_mad.h"

namespace hcasim::model {

namespace {

// The headers of a datagram from this host's QP1 back to the sender of @p f, on the path it came.
wire::Headers reply_headers(const wire::ParsedFrame& f, const uint8_t src_mac[6]) {
  wire::Headers h{};
  std::memcpy(h.dst_mac, f.h.src_mac, 6);
  std::memcpy(h.src_mac, src_mac, 6);
  uint8_t their_gid[16], our_gid[16];
  wire::gids_from_l3(f.h, their_gid, our_gid);
  wire::set_l3_from_gids(h, our_gid, their_gid);
  h.ttl = 64;
  h.udp_sport = wire::roce_udp_sport(hw::kGsiQpn, f.h.deth.src_qp);
  h.opcode = wire::BthOpcode::UD_SEND_ONLY;
  h.pkey = f.h.pkey;
  h.dest_qp = f.h.deth.src_qp;
  h.deth.qkey = wire::mad::kGsiQkey;
  h.deth.src_qp = hw::kGsiQpn;
  return h;
}

// The description of the MAD at @p mad (@p len bytes) for a trace line.
std::string describe_mad(const uint8_t* mad, size_t len = wire::mad::kMadSize) {
  char what[192];
  wire::mad::describe(mad, len, what, sizeof what);
  return what;
}

}  // namespace

void Hca::set_left_dreq(hw::CmdMailbox& mb) {
  const bool leave = mb.arg1 != 0;
  if (leave)
    left_dreqs_[mb.arg0] = hw::cmd_in<hw::LeftDreq>(mb);
  else if (!left_dreqs_.erase(mb.arg0))
    return void(mb.status = uint8_t(hw::CmdStatus::BadParam));
  mb.status = uint8_t(hw::CmdStatus::Ok);
}

void Hca::send_left_dreqs() {
  for (const auto& [local_id, d] : left_dreqs_) {
    wire::mad::Dreq dreq;
    dreq.local_comm_id = local_id;
    dreq.remote_comm_id = d.remote_comm_id;
    dreq.remote_qpn_eecn = d.remote_qpn;
    uint8_t mad[wire::mad::kMadSize];
    wire::mad::encode(dreq, d.tid, mad);
    wire::Headers h{};
    if (!core_.frames.gsi_headers(d.path, h)) continue;  // nothing owns the peer's GID any more
    if (tracer_.on() && tracer_.wants(trace::TraceUnit::Responder, trace::TraceKind::Note))
      HCASIM_TRACE(tracer_, Responder, Note, hw::kGsiQpn, TraceFields(),
                   "the owner is gone: its kernel's CM ends connection 0x%08x with %s", local_id,
                   describe_mad(mad).c_str());
    core_.frames.send_frame(h, mad, sizeof mad, now_ps() + core_.prof.irq_ps);
  }
  left_dreqs_.clear();
}

void Hca::answer_without_cm(const wire::ParsedFrame& f) {
  uint8_t out[wire::mad::kMadSize];
  if (f.h.opcode != wire::BthOpcode::UD_SEND_ONLY ||
      !wire::mad::answer_without_state(f.payload, f.payload_len, out))
    return;
  if (tracer_.on() && tracer_.wants(trace::TraceUnit::Responder, trace::TraceKind::Note))
    HCASIM_TRACE(tracer_, Responder, Note, hw::kGsiQpn, TraceFields().set_peer_qpn(f.h.deth.src_qp),
                 "no program on this host has started a CM (no QP1): its kernel's CM answers %s with %s",
                 describe_mad(f.payload, f.payload_len).c_str(), describe_mad(out).c_str());
  // The host's answer leaves an interrupt's latency later; its software time is not modelled.
  core_.frames.send_frame(reply_headers(f, core_.id.mac), out, sizeof out, now_ps() + core_.prof.irq_ps);
}

}  // namespace hcasim::model
