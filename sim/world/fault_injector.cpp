// SPDX-License-Identifier: Apache-2.0
#include "fault_injector.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace hcasim::sim {

uint64_t FaultDice::next() {
  uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace {

/** @brief The `op=` family of a BTH opcode (any transport: the low five bits say what it is). */
FaultOp family_of(wire::BthOpcode op) {
  const uint8_t low = uint8_t(op) & 0x1f;
  if (low <= 0x05 || low == 0x16 || low == 0x17) return FaultOp::Send;
  if (low <= 0x0b) return FaultOp::Write;
  if (low <= 0x10) return FaultOp::Read;
  if (low == 0x11) return FaultOp::Ack;
  if (low <= 0x14) return FaultOp::Atomic;
  return FaultOp::Any;
}

/** @brief A seed of its own for host @p host's port, from the run's seed. */
uint64_t port_seed(uint64_t seed, uint32_t host) {
  FaultDice d(seed ^ (0xfa017u + uint64_t(host) * 0x100000001b3ull));
  return d.next();
}

}  // namespace

FaultyWire::FaultyWire(const FaultSpec& spec, uint32_t host, model::Hca& hca, model::WireSide* next,
                       HostOfMac host_of, uint64_t seed, const LinkSchedule* links)
    : spec_(spec),
      host_(host),
      hca_(hca),
      next_(next),
      host_of_(std::move(host_of)),
      links_(links),
      dice_(port_seed(seed, host)),
      hold_timer_("fault.hold", [this](uint64_t& gen) {
        if (held_ && gen == held_gen_) release_held(model::now_ps());
      }) {
  for (const FaultClause& c : spec_.clauses)
    needs_headers_ |= c.qpn != FaultClause::kAny || c.op != FaultOp::Any;
}

bool FaultyWire::in_scope(const FaultClause& c, uint32_t to, const wire::ParsedFrame* f) const {
  if (c.host != FaultClause::kAny) {
    const bool tx = c.host == host_, rx = c.host == to;
    if (c.dir == FaultDir::Tx ? !tx : c.dir == FaultDir::Rx ? !rx : !(tx || rx)) return false;
  }
  if (c.qpn != FaultClause::kAny && (!f || f->h.dest_qp != c.qpn)) return false;
  return c.op == FaultOp::Any || (f && family_of(f->h.opcode) == c.op);
}

FaultyWire::Verdict FaultyWire::judge(const model::Packet& p, uint32_t to) {
  wire::ParsedFrame f;
  const bool parsed = needs_headers_ && wire::parse_frame(p.data, p.len, f, false) == wire::ParseError::Ok;
  Verdict v;
  // Every clause in scope throws its dice, whatever the others decided: the draws a frame
  // takes depend only on the frame, so one clause's outcome never shifts another's pattern.
  for (const FaultClause& c : spec_.clauses) {
    if (!in_scope(c, to, parsed ? &f : nullptr)) continue;
    if (c.kind == FaultKind::Delay) {
      v.delay_ps += dice_.between(c.delay_min_ps, c.delay_max_ps);
      continue;
    }
    const bool hit = dice_.unit() < c.probability;
    switch (c.kind) {
      case FaultKind::Loss: v.lose |= hit; break;
      case FaultKind::Duplicate: v.duplicate |= hit; break;
      case FaultKind::Reorder: v.reorder |= hit; break;
      case FaultKind::Corrupt: v.corrupt |= hit; break;
      case FaultKind::Delay: break;
    }
  }
  return v;
}

void FaultyWire::corrupt(model::Packet& p) {
  // A byte the ICRC covers and the parser does not judge first: after the BTH (extension
  // headers, payload, pad or the ICRC itself), so the receiver sees exactly an ICRC error.
  const uint16_t type = uint16_t(p.data[12] << 8 | p.data[13]);
  const size_t ip = type == wire::kEtherTypeIpv6 ? wire::kIpv6HeaderLen : wire::kIpv4HeaderLen;
  const size_t first = wire::kEthHeaderLen + ip + wire::kUdpHeaderLen + wire::kBthLen;
  const size_t at = p.len > first ? size_t(dice_.between(first, p.len - 1)) : p.len - 1;
  const uint8_t mask = uint8_t(1 + dice_.next() % 255);
  char what[96];
  snprintf(what, sizeof what, "corrupted (byte %zu of %u flipped by 0x%02x: the ICRC will not match)", at,
           p.len, unsigned(mask));
  note(p, what);  // the frame as it was sent
  p.data[at] ^= mask;
  p.pristine = false;  // the receiver re-verifies the ICRC (packet.h)
}

void FaultyWire::note(const model::Packet& p, const char* what, uint64_t extra_ps) {
  if (observer_) {
    char by[48] = "";
    if (extra_ps) snprintf(by, sizeof by, " by %.3f us", double(extra_ps) / 1e6);
    observer_(p, std::string(what) + by);
  }
  model::Tracer& t = hca_.tracer();
  if (!t.on() || !t.wants(model::TraceUnit::Wire, model::TraceKind::Fault)) return;
  wire::ParsedFrame f;
  model::TraceFields fields;
  if (wire::parse_frame(p.data, p.len, f, false) == wire::ParseError::Ok)
    fields.set_opcode(uint16_t(f.h.opcode)).set_psn(f.h.psn).set_peer_qpn(f.h.dest_qp);
  fields.set_count(p.len);
  char desc[256];
  model::describe_frame(p, desc, sizeof desc);
  if (extra_ps)
    t.emit(model::TraceUnit::Wire, model::TraceKind::Fault, model::kTraceNone, fields,
           "fault: %s by %.3f us: %s", what, double(extra_ps) / 1e6, desc);
  else
    t.emit(model::TraceUnit::Wire, model::TraceKind::Fault, model::kTraceNone, fields, "fault: %s: %s", what,
           desc);
}

void FaultyWire::release_held(uint64_t tx_end_ps) {
  model::PacketPtr p = std::move(held_);
  ++held_gen_;
  next_->carry(std::move(p), tx_end_ps);
}

bool FaultyWire::lost_to_link_down(const model::Packet& p, uint32_t to) {
  if (!links_) return false;
  const uint32_t down = links_->down(host_) ? host_ : links_->down(to) ? to : FaultClause::kAny;
  if (down == FaultClause::kAny) return false;
  ++hca_.injected_faults().link_down_losses;
  const std::string what = "lost (link down: " + links_->name(down) + ")";
  note(p, what.c_str());
  return true;
}

void FaultyWire::carry(model::PacketPtr pkt, uint64_t tx_end_ps) {
  const uint32_t to = host_of_(pkt->data);
  if (lost_to_link_down(*pkt, to)) return;  // a held frame still waits for the next one that goes through
  const Verdict v = judge(*pkt, to);
  model::InjectedFaults& n = hca_.injected_faults();
  if (v.lose) {
    ++n.losses;
    note(*pkt, "lost");
    return;  // a held frame still waits for the next one that goes through
  }
  if (v.corrupt) {
    ++n.corruptions;
    corrupt(*pkt);
  }
  const uint64_t at = tx_end_ps + v.delay_ps;
  if (v.delay_ps) {
    ++n.delays;
    note(*pkt, "delayed", v.delay_ps);
  }
  model::PacketPtr copy;
  if (v.duplicate) {
    ++n.duplicates;
    note(*pkt, "duplicated");
    copy = model::make_packet();
    copy->len = pkt->len;
    copy->pristine = pkt->pristine;
    std::memcpy(copy->data, pkt->data, pkt->len);
  }
  if (v.reorder && !held_) {
    ++n.reorders;
    note(*pkt, "held back behind the next frame");
    held_ = std::move(pkt);
    held_at_ = at;
    hold_timer_.push(at + kReorderHoldPs, held_gen_);
    if (copy) next_->carry(std::move(copy), at);
    return;
  }
  next_->carry(std::move(pkt), at);
  if (copy) next_->carry(std::move(copy), at);
  if (held_) release_held(std::max(at, held_at_));  // behind this frame: queued after it
}

}  // namespace hcasim::sim
