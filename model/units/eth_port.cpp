// SPDX-License-Identifier: Apache-2.0
#include "eth_port.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace hcasim::model {

namespace {

/** The one-line description of a parsed frame (see describe_frame). */
void describe_parsed(const wire::ParsedFrame& f, char* buf, size_t cap) {
  int n = snprintf(buf, cap, "%-16s psn=%-8u dqp=0x%06x payload=%-5zu%s%s", wire::opcode_name(f.h.opcode),
                   f.h.psn, f.h.dest_qp, f.payload_len, f.h.se ? " SE" : "", f.h.ackreq ? " AckReq" : "");
  if (n < 0 || size_t(n) >= cap) return;
  if (wire::has_aeth(f.h.opcode)) {
    const char* kind = "ACK";
    switch (wire::aeth_kind(f.h.aeth.syndrome)) {
      case wire::AethKind::RnrNak: kind = "RNR-NAK"; break;
      case wire::AethKind::Nak: kind = wire::nak_code_name(wire::aeth_nak_code(f.h.aeth.syndrome)); break;
      default: break;
    }
    n += snprintf(buf + n, cap - n, " AETH[%s msn=%u]", kind, f.h.aeth.msn);
  }
  if (n > 0 && size_t(n) < cap && wire::has_reth(f.h.opcode))
    snprintf(buf + n, cap - n, " RETH[va=0x%" PRIx64 " rkey=0x%x len=%u]", f.h.reth.va, f.h.reth.rkey,
             f.h.reth.dma_len);
}

/** The typed facts of a frame on the port: BTH opcode, PSN, destination QP, SE and AckReq. */
TraceFields frame_fields(const wire::ParsedFrame& f) {
  return TraceFields()
      .set_opcode(uint16_t(f.h.opcode))
      .set_psn(f.h.psn)
      .set_peer_qpn(f.h.dest_qp)
      .set_flag(kTfSe, f.h.se)
      .set_flag(kTfAckReq, f.h.ackreq);
}

/** Parse @p pkt once: its description into @p buf, its facts into @p fields (left empty if malformed). */
void describe_with_fields(const Packet& pkt, char* buf, size_t cap, TraceFields& fields) {
  wire::ParsedFrame f;
  wire::ParseError e = wire::parse_frame(pkt.data, pkt.len, f, false);
  if (e != wire::ParseError::Ok) {
    snprintf(buf, cap, "malformed frame (%s) len=%u", wire::parse_error_name(e), pkt.len);
    return;
  }
  fields = frame_fields(f);
  describe_parsed(f, buf, cap);
}

}  // namespace

void describe_frame(const Packet& pkt, char* buf, size_t cap) {
  TraceFields unused;
  describe_with_fields(pkt, buf, cap, unused);
}

EthPort::EthPort(const TimingProfile& prof, Tracer& tracer, const uint8_t mac[6])
    : prof_(prof), tracer_(tracer), loopback_("port.loop", [this](PacketPtr& p) { receive(std::move(p)); }) {
  std::memcpy(mac_, mac, 6);
  sc_core::sc_spawn_options opts;
  opts.spawn_method();
  opts.set_sensitivity(&wake_);
  opts.dont_initialize();
  sc_core::sc_spawn([this] { run_tx(); }, sc_core::sc_gen_unique_name("port.tx"), &opts);
}

void EthPort::describe(const char* dir, const Packet& pkt) {
  char buf[256];
  TraceFields f;
  describe_with_fields(pkt, buf, sizeof buf, f);
  if (f.opcode != kTraceNone16) f.set_count(pkt.len);  // a frame that parsed: its size on the wire
  HCASIM_TRACE(tracer_, Port, PktTx, kTraceNone, f, "%s %s (%u B on wire)", dir, buf, pkt.len);
}

void EthPort::transmit(PacketPtr pkt, uint64_t ready_ps) {
  if (!up_) {
    ++drops_;
    report_sent(*pkt, now_ps());
    return;
  }
  const uint64_t now = now_ps();
  if (ready_ps < now) ready_ps = now;
  // Ready now on an idle port with nothing queued: it starts at once, as run_tx() would in the
  // next delta cycle with nothing else to choose from (an ACK, most often).
  if (ready_ps == now && busy_until_ <= now && pending_.empty() && !armed_) return send(std::move(pkt), now);
  pending_.push(Pending{ready_ps, seq_++, std::move(pkt)});
  arm(std::max(pending_.top().ready, busy_until_));
}

void EthPort::report_sent(Packet& pkt, uint64_t tx_end_ps) {
  if (!pkt.report_sent) return;
  pkt.report_sent = false;
  if (sent_) sent_(pkt, tx_end_ps);
}

void EthPort::arm(uint64_t at_ps) {
  if (armed_ && armed_at_ <= at_ps) return;  // an earlier wake-up will look again
  const uint64_t now = now_ps();
  wake_.cancel();
  wake_.notify(sc_core::sc_time::from_value(at_ps > now ? at_ps - now : 0));
  armed_ = true;
  armed_at_ = at_ps;
}

void EthPort::run_tx() {
  armed_ = false;
  const uint64_t now = now_ps();
  if (!pending_.empty() && pending_.top().ready <= now && busy_until_ <= now) {
    PacketPtr pkt = std::move(pending_.top().pkt);
    pending_.pop();
    send(std::move(pkt), now);
  }
  if (!pending_.empty()) arm(std::max(pending_.top().ready, busy_until_));
}

void EthPort::send(PacketPtr pkt, uint64_t now) {
  const uint64_t end = now + prof_.wire_ps(pkt->len);
  busy_until_ = end;
  ++tx_pkts_;
  tx_bytes_ += pkt->len;
  // Describing a frame costs more than sending it: only when a sink wants the line (the error
  // sink that is always attached does not).
  if (tracer_.on() && tracer_.wants(TraceUnit::Port, TraceKind::PktTx)) describe("TX", *pkt);
  if (tap_) tap_(now, *pkt);
  report_sent(*pkt, end);
  if (std::memcmp(pkt->data, mac_, 6) == 0) {  // to ourselves: internal loopback, no wire
    loopback_.push(end, std::move(pkt));
  } else if (wire_) {
    wire_->carry(std::move(pkt), end);
  } else {
    ++drops_;
  }
}

void EthPort::receive(PacketPtr pkt) {
  if (!up_) {
    ++drops_;
    return;
  }
  ++rx_pkts_;
  rx_bytes_ += pkt->len;
  if (tracer_.on() && tracer_.wants(TraceUnit::Port, TraceKind::PktRx)) {
    char buf[256];
    TraceFields f;
    describe_with_fields(*pkt, buf, sizeof buf, f);
    HCASIM_TRACE(tracer_, Port, PktRx, kTraceNone, f, "RX %s", buf);
  }
  if (rx_) rx_(std::move(pkt));
}

}  // namespace hcasim::model
