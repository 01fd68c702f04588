// SPDX-License-Identifier: Apache-2.0
// Hazard reports: a program destroyed (or deregistered) an object while work touching it was
// still in flight in the model. In the lockstep clock simulated time stands still between verbs
// calls, so such work is always lost; on hardware it would be a race, and so it is in the
// realtime clock, where the report says the run lost it. The checks run only when
// a destroy command arrives, never per packet, and read state without changing it (no trace
// event, counter or IOTLB effect unless a hazard is found).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "hca.h"
#include "strprintf.h"

namespace hcasim::model {

namespace {

constexpr const char* kRaceLockstep = "on hardware this is a race; here it is certain";
constexpr const char* kRaceRealtime = "on hardware this is a race; this run lost it (realtime clock)";
/** A process that ends with CQEs unpolled lost nothing, but never saw those completions. */
constexpr const char* kNotSeen = "nothing is lost, but the program never saw these completions";

bool is_write(hw::WqeOpcode op) {
  return op == hw::WqeOpcode::RdmaWrite || op == hw::WqeOpcode::RdmaWriteImm;
}

/** @brief Where a send's data comes from, for a report: "from the buffer at 0x... (lkey 0x...)". */
std::string source_of(const SendWqe& w) {
  if (w.is_inline) return "from inline data";
  if (w.nsge == 0) return "with no data";
  return strprintf("from the buffer at 0x%" PRIx64 " (lkey 0x%x, %u bytes)", w.sge[0].addr, w.sge[0].lkey,
                   w.sge[0].len);
}

/** @brief [a, a+alen) and [b, b+blen) share a byte. */
bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return alen && blen && a < b + blen && b < a + alen;
}

}  // namespace

void Hca::execute(hw::CmdMailbox& mb) {
  if (hw::CmdOpcode(mb.opcode) == hw::CmdOpcode::QueryPort)
    return query_port(mb);  // the port's, not a context's
  if (hw::CmdOpcode(mb.opcode) == hw::CmdOpcode::ResolveGid) return resolve_gid(mb);
  if (hw::CmdOpcode(mb.opcode) == hw::CmdOpcode::AttachMcast) return attach_mcast(mb, true);
  if (hw::CmdOpcode(mb.opcode) == hw::CmdOpcode::DetachMcast) return attach_mcast(mb, false);
  if (hw::CmdOpcode(mb.opcode) == hw::CmdOpcode::SetLeftDreq) return set_left_dreq(mb);
  check_hazards(mb);  // before the command, while the object and its state still exist
  cmd_.execute(mb);
}

void Hca::check_hazards(const hw::CmdMailbox& mb) {
  switch (hw::CmdOpcode(mb.opcode)) {
    case hw::CmdOpcode::DestroyQp: qp_hazard(mb.arg0); break;
    case hw::CmdOpcode::DestroyCq: cq_hazard(mb.arg0); break;
    case hw::CmdOpcode::DestroyMkey: mkey_hazard(mb.arg0); break;
    default: break;
  }
}

void Hca::report_hazard(uint32_t qpn, const TraceFields& f, const std::string& what, bool race) {
  ++hazards_;
  HCASIM_TRACE(tracer_, Command, Error, qpn, TraceFields(f).set_flag(kTfError), "hazard: %s", what.c_str());
  // Always printed: it names a real bug in the program (use after destroy), not a setting.
  const char* why = !race ? kNotSeen : realtime_clock_ ? kRaceRealtime : kRaceLockstep;
  std::fprintf(stderr, "%s: hazard: %s \xe2\x80\x94 %s\n", core_.id.name.c_str(), what.c_str(), why);
}

bool Hca::sends_left(const QpContext& qp, TraceFields& f, std::string& what) const {
  const Ring<InflightMsg>& in = qp.inflight;
  if (!in.empty()) {
    const InflightMsg& m = in.front();
    const uint32_t last = last_psn(in[in.size() - 1]);
    f.set_wqe(m.w.index).set_psn_range(m.first_psn, last).set_count(uint32_t(in.size()));
    what =
        in.size() == 1
            ? strprintf("1 unacknowledged %s (WQE %u, PSN %u..%u, %s) in flight", wqe_opcode_name(m.w.op),
                        m.w.index, m.first_psn, last, source_of(m.w).c_str())
            : strprintf("%zu unacknowledged messages (first %s WQE %u, PSN %u..%u, %s) in flight", in.size(),
                        wqe_opcode_name(m.w.op), m.w.index, m.first_psn, last, source_of(m.w).c_str());
    return true;
  }
  // Posted but not started: lost just the same. The doorbell itself may still be on its way
  // (in lockstep it lands only when time moves), so the producer counter is the one software
  // published in the QP's doorbell record, read as the CQ check reads the CQ's.
  // A counter counts only if it is ahead of the fetch point by at most the ring's size.
  const uint32_t ring = 1u << qp.qpc.sq_log_size;
  const auto ahead = [&](uint16_t pi) {
    return uint16_t(pi - qp.sq_fetch) != 0 && uint16_t(pi - qp.sq_fetch) <= ring;
  };
  hw::QpDbrec rec{};
  uint16_t posted = qp.sq_pi;
  if (core_.dma.peek(qp.qpc.dbrec_addr, &rec, sizeof rec) && ahead(hw::qp_dbrec_sq(rec)))
    posted = hw::qp_dbrec_sq(rec);
  if (qp.fetched.empty() && !ahead(posted)) return false;
  const uint32_t first = qp.fetched.empty() ? qp.sq_fetch : qp.fetched.front().index;
  f.set_wqe(first).set_index(posted);
  what = strprintf("posted send WQEs not yet executed (WQE %u up to producer %u)", first, unsigned(posted));
  return true;
}

void Hca::qp_hazard(uint32_t qpn) {
  const QpContext* qp = core_.qpc.peek(qpn);
  TraceFields f;
  std::string what;
  if (qp && sends_left(*qp, f, what))
    report_hazard(qpn, f, strprintf("QP 0x%x destroyed with %s", qpn, what.c_str()));
}

void Hca::owner_gone_hazards(const std::string& owner) {
  // QP1 and its CQs stand for the kernel's MAD layer, which outlives any one program: what they
  // hold when the program that opened them ends (a CM message's send completion, say) is not the
  // program's doing, so it is not reported as the program's race.
  std::vector<uint32_t> gsi_cqs;
  core_.qpc.for_each([&](const QpContext& qp) {
    if (qp.qpc.type != uint8_t(hw::QpType::Gsi)) return;
    gsi_cqs.push_back(qp.qpc.send_cqn);
    gsi_cqs.push_back(qp.qpc.recv_cqn);
  });
  core_.qpc.for_each([&](const QpContext& qp) {
    TraceFields f;
    std::string what;
    if (qp.qpc.type == uint8_t(hw::QpType::Gsi)) return;
    if (sends_left(qp, f, what))
      report_hazard(qp.qpc.qpn, f,
                    strprintf("%s ended with QP 0x%x's %s", owner.c_str(), qp.qpc.qpn, what.c_str()));
  });
  for (uint32_t cqn : core_.cq.ids()) {
    const uint32_t n = core_.cq.unpolled(cqn);
    if (!n || std::find(gsi_cqs.begin(), gsi_cqs.end(), cqn) != gsi_cqs.end()) continue;
    report_hazard(
        kTraceNone, TraceFields().set_queue(cqn).set_count(n).set_index(core_.cq.produced(cqn)),
        strprintf("%s ended with %u CQE%s of CQ %u never polled", owner.c_str(), n, n == 1 ? "" : "s", cqn),
        false);
  }
}

void Hca::cq_hazard(uint32_t cqn) {
  const uint32_t n = core_.cq.unpolled(cqn);
  if (!n) return;
  report_hazard(kTraceNone, TraceFields().set_queue(cqn).set_count(n).set_index(core_.cq.produced(cqn)),
                strprintf("CQ %u destroyed with %u CQE%s never polled", cqn, n, n == 1 ? "" : "s"));
}

void Hca::writes_in_flight_to(const HcaIdentity& target, uint32_t rkey, uint64_t va, uint64_t len,
                              std::vector<InflightWrite>& out) const {
  core_.qpc.for_each([&](const QpContext& qp) {
    if (qp.inflight.empty()) return;
    const uint8_t* dgid = qp.qpc.path.dgid;
    if (std::memcmp(dgid, target.gid[0], 16) != 0 && std::memcmp(dgid, target.gid[1], 16) != 0) return;
    for (const InflightMsg& m : qp.inflight) {
      if (!is_write(m.w.op) || m.w.rkey != rkey || !overlaps(m.w.raddr, m.w.length, va, len)) continue;
      out.push_back(InflightWrite{core_.id.name, qp.qpc.qpn, m.w.index, m.first_psn, last_psn(m), m.w.raddr,
                                  m.w.length, qp.qpc.dest_qpn});
    }
  });
}

void Hca::mkey_hazard(uint32_t key) {
  const MrEntry* mr = core_.mrs.find(key);
  if (!mr) return;
  const uint64_t va = mr->ctx.start, len = mr->ctx.length;
  std::vector<InflightWrite> w;
  if (write_probe_)
    write_probe_(*this, key, va, len, w);
  else
    writes_in_flight_to(core_.id, key, va, len, w);
  // A WRITE this HCA's responder has already placed whole (its QP expects a later PSN) is only
  // waiting for its ACK at the requester: a duplicate would be acknowledged again, not executed
  // again (IBTA 9.7.5.1.1), so deregistering now loses nothing.
  w.erase(std::remove_if(w.begin(), w.end(),
                         [&](const InflightWrite& x) {
                           const QpContext* qp = core_.qpc.peek(x.dest_qpn);
                           return qp && wire::psn_before(x.last_psn, qp->epsn);
                         }),
          w.end());
  // This HCA's responder may be in the middle of placing one (its FIRST packet arrived).
  core_.qpc.for_each([&](const QpContext& qp) {
    if (qp.write_active && qp.write_rkey == key)
      w.push_back(InflightWrite{core_.id.name, qp.qpc.qpn, kTraceNone, kTraceNone, kTraceNone, qp.write_va,
                                qp.write_len});
  });
  if (w.empty()) return;
  const InflightWrite& f = w.front();
  const std::string from = f.wqe == kTraceNone
                               ? strprintf("being received by QP 0x%x", f.qpn)
                               : strprintf("from %s QP 0x%x WQE %u, PSN %u..%u", f.host.c_str(), f.qpn, f.wqe,
                                           f.first_psn, f.last_psn);
  const std::string more = w.size() > 1 ? strprintf(" and %zu more", w.size() - 1) : std::string();
  report_hazard(
      kTraceNone,
      TraceFields().set_key(key).set_addr(f.va).set_wqe(f.wqe).set_peer_qpn(f.qpn).set_count(
          uint32_t(w.size())),
      strprintf("MR key 0x%x deregistered with an RDMA WRITE of %u bytes at 0x%" PRIx64 " into it in flight "
                "(%s)%s",
                key, f.len, f.va, from.c_str(), more.c_str()));
}

}  // namespace hcasim::model
