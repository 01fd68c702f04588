// SPDX-License-Identifier: Apache-2.0
// Step mode's `x wqe|rwqe|cqe|eqe QUEUE INDEX`: one ring entry as the hardware would read it
// from host memory (through the ring's buffer table, read from the IOMMU shadow so the model's
// caches and counters are untouched), its bytes, and its fields decoded with the contract's own
// accessors (hca_hw.h), owner bits against the ring's current pass.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "cq_unit.h"
#include "hca.h"
#include "requester.h"
#include "step_mode.h"
#include "strprintf.h"
#include "wqe_fetch.h"

namespace hcasim::sim {
namespace {

using model::strprintf;

/** Copy @p len bytes at byte @p offset of the buffer @p d (within one page) from @p mem. */
bool read_ring(const hw::BufferDesc& d, uint64_t offset, void* dst, uint32_t len, const IommuShadow* mem) {
  if (!mem) return false;
  const uint64_t page = offset >> d.log_page_size, in_page = offset & ((1ull << d.log_page_size) - 1);
  if (page >= d.npages) return false;
  const uint64_t per_leaf = (1ull << hw::kMinPageShift) / 8;
  uint64_t table = d.bt_root, entry = page, e = 0;
  if (d.levels == 2) {
    if (!mem->read(d.bt_root + (page / per_leaf) * 8, &e, 8) || !hw::bte_valid(e)) return false;
    table = hw::bte_addr(e);
    entry = page % per_leaf;
  }
  if (!mem->read(table + entry * 8, &e, 8) || !hw::bte_valid(e)) return false;
  return mem->read(hw::bte_addr(e) + in_page, dst, len);
}

std::string hex_rows(const uint8_t* p, uint32_t len) {
  std::string s;
  for (uint32_t row = 0; row < len; row += 16) {
    s += strprintf("    +%02x:", row);
    for (uint32_t i = row; i < row + 16 && i < len; ++i) s += strprintf(" %02x", p[i]);
    s += "\n";
  }
  return s;
}

std::string owner_note(uint8_t owner, uint32_t index, uint32_t produced, uint32_t log_size) {
  // Hardware writes entry number i with owner bit (i >> log_size) & 1, so a consumer at pass k of
  // the ring knows the entry is new when the bit equals k & 1.
  const uint32_t size = 1u << log_size, slot = index & (size - 1);
  if (produced <= slot)
    return strprintf("owner bit %u: not written yet (the value software initialised)", owner);
  const uint32_t pass = (produced - 1 - slot) / size;
  return strprintf(
      "owner bit %u: last written as entry %u, in pass %u of the ring (where the hardware writes %u)", owner,
      slot + pass * size, pass, pass & 1);
}

std::string send_wqe(const model::Hca& h, const IommuShadow* mem, uint32_t qpn, uint32_t index) {
  const model::QpContext* q = h.core().qpc.peek(qpn);
  if (!q) return strprintf("%s has no QP 0x%x\n", h.identity().name.c_str(), qpn);
  const uint32_t size = 1u << q->qpc.sq_log_size, slot = index & (size - 1);
  uint8_t raw[hw::kMaxSendWqeBbs * hw::kWqeBasicBlock] = {};
  if (!read_ring(q->qpc.sq_buf, uint64_t(slot) * hw::kWqeBasicBlock, raw, hw::kWqeBasicBlock, mem))
    return "SQ ring not readable\n";
  hw::CtrlSeg c;
  std::memcpy(&c, raw, sizeof c);
  if (hw::ctrl_ds(c) == 0)
    return strprintf("SQ slot %u of QP 0x%06x on %s: no WQE written here yet\n", slot, qpn,
                     h.identity().name.c_str()) +
           hex_rows(raw, hw::kWqeBasicBlock);
  const uint32_t nbb = std::min(hw::wqe_bbs_for_segments(hw::ctrl_ds(c)), hw::kMaxSendWqeBbs);
  for (uint32_t bb = 1; bb < nbb; ++bb)
    read_ring(q->qpc.sq_buf, uint64_t((slot + bb) & (size - 1)) * hw::kWqeBasicBlock,
              raw + bb * hw::kWqeBasicBlock, hw::kWqeBasicBlock, mem);
  std::string s = strprintf("SQ WQE at WQEBB %u (slot %u) of QP 0x%06x on %s: %u WQEBB(s)\n", index, slot,
                            qpn, h.identity().name.c_str(), nbb);
  s += hex_rows(raw, nbb * hw::kWqeBasicBlock);
  s += strprintf("  control: opcode 0x%02x (%s), WQE index %u, QPN 0x%x, %u segment(s), flags 0x%02x%s%s\n",
                 unsigned(hw::ctrl_opcode(c)), model::wqe_opcode_name(hw::ctrl_opcode(c)),
                 hw::ctrl_wqe_index(c), hw::ctrl_qpn(c), hw::ctrl_ds(c), hw::ctrl_flags(c),
                 (hw::ctrl_flags(c) & hw::kCtrlCqUpdate) ? " signaled" : "",
                 (hw::ctrl_flags(c) & hw::kCtrlSolicited) ? " solicited" : "");
  model::SendWqe w;
  const auto type = hw::QpType(q->qpc.type);
  if (!model::decode_send_wqe(raw, nbb, uint16_t(index), w, hw::is_datagram(type),
                              type == hw::QpType::XrcSend))
    return s + "  (malformed: the hardware would refuse it)\n";
  if (w.raddr || w.rkey) s += strprintf("  remote address 0x%" PRIx64 ", rkey 0x%x\n", w.raddr, w.rkey);
  for (uint32_t i = 0; i < w.nsge; ++i)
    s += strprintf("  data: addr 0x%" PRIx64 ", length %u, lkey 0x%x\n", w.sge[i].addr, w.sge[i].len,
                   w.sge[i].lkey);
  if (w.is_inline) s += strprintf("  inline data: %u byte(s)\n", w.length);
  s += strprintf("  message length %u; %s\n", w.length,
                 int32_t(index - q->sq_pi) < 0 ? "covered by the last doorbell" : "not yet rung");
  return s;
}

std::string recv_wqe(const model::Hca& h, const IommuShadow* mem, uint32_t qpn, uint32_t index) {
  const model::QpContext* q = h.core().qpc.peek(qpn);
  if (!q) return strprintf("%s has no QP 0x%x\n", h.identity().name.c_str(), qpn);
  if (q->qpc.srqn != hw::kNoSrq) return strprintf("QP 0x%x receives from SRQ 0x%x\n", qpn, q->qpc.srqn);
  const uint32_t size = 1u << q->qpc.rq_log_size, stride = 1u << q->qpc.rq_log_stride,
                 slot = index & (size - 1);
  uint8_t raw[512] = {};
  if (stride > sizeof raw || !read_ring(q->qpc.rq_buf, uint64_t(slot) * stride, raw, stride, mem))
    return "RQ ring not readable\n";
  std::string s = strprintf("RQ WQE %u (slot %u) of QP 0x%06x on %s: %u bytes\n", index, slot, qpn,
                            h.identity().name.c_str(), stride);
  s += hex_rows(raw, stride);
  for (uint32_t i = 0; i < stride / hw::kSegmentSize; ++i) {
    hw::DataSeg d;
    std::memcpy(&d, hw::wqe_segment(raw, i), sizeof d);
    if (hw::data_seg_is_terminator(d)) {
      s += "  terminator (lkey 0x100)\n";
      break;
    }
    s += strprintf("  data: addr 0x%" PRIx64 ", length %u, lkey 0x%x\n", hw::data_seg_addr(d),
                   hw::data_seg_length(d), hw::data_seg_lkey(d));
  }
  return s;
}

std::string cqe(const model::Hca& h, const IommuShadow* mem, uint32_t cqn, uint32_t index) {
  model::CqUnit::CqView v;
  if (!h.core().cq.peek(cqn, v)) return strprintf("%s has no CQ %u\n", h.identity().name.c_str(), cqn);
  const uint32_t slot = index & ((1u << v.cqc.log_size) - 1);
  hw::Cqe raw{};
  if (!read_ring(v.cqc.buf, uint64_t(slot) * hw::kCqeSize, &raw, sizeof raw, mem))
    return "CQ ring not readable\n";
  const hw::CqeFields f = hw::get_cqe(raw);
  std::string s = strprintf("CQE %u (slot %u) of CQ %u on %s\n", index, slot, cqn, h.identity().name.c_str());
  s += hex_rows(reinterpret_cast<const uint8_t*>(&raw), sizeof raw);
  s += strprintf("  opcode %u (%s), QPN 0x%x, WQE counter %u, byte count %u, syndrome 0x%02x, flags 0x%02x",
                 unsigned(f.opcode), model::cqe_opcode_name(f.opcode), f.qpn, f.wqe_counter, f.byte_cnt,
                 unsigned(f.syndrome), f.flags);
  if (f.flags & hw::kCqeWithImm) s += strprintf(", immediate 0x%08x", hw::from_be32(f.imm));
  s += "\n  " +
       owner_note(hw::cqe_owner(hw::cqe_load_op_own(reinterpret_cast<const uint8_t*>(&raw))), index, v.pi,
                  v.cqc.log_size) +
       "\n";
  return s;
}

std::string eqe(const model::Hca& h, const IommuShadow* mem, uint32_t eqn, uint32_t index) {
  model::EqUnit::EqView v;
  if (!h.core().eq.peek(eqn, v)) return strprintf("%s has no EQ %u\n", h.identity().name.c_str(), eqn);
  const uint32_t slot = index & ((1u << v.eqc.log_size) - 1);
  hw::Eqe raw{};
  if (!read_ring(v.eqc.buf, uint64_t(slot) * hw::kEqeSize, &raw, sizeof raw, mem))
    return "EQ ring not readable\n";
  std::string s = strprintf("EQE %u (slot %u) of EQ %u on %s\n", index, slot, eqn, h.identity().name.c_str());
  s += hex_rows(reinterpret_cast<const uint8_t*>(&raw), sizeof raw);
  s += strprintf("  type 0x%02x, resource 0x%x, timestamp %" PRIu64 " ns\n", unsigned(hw::eqe_type(raw)),
                 hw::eqe_resource(raw), hw::eqe_timestamp_ns(raw));
  s += "  " +
       owner_note(hw::eqe_load_owner(reinterpret_cast<const uint8_t*>(&raw)), index, v.pi, v.eqc.log_size) +
       "\n";
  return s;
}

}  // namespace

std::string HcaInspector::raw(uint32_t host, const std::string& what, uint32_t queue, uint32_t index) {
  if (host >= hcas_.size()) return "no such host\n";
  const model::Hca& h = *hcas_[host];
  const IommuShadow* mem = host < mem_.size() ? mem_[host] : nullptr;
  if (what == "wqe") return send_wqe(h, mem, queue, index);
  if (what == "rwqe") return recv_wqe(h, mem, queue, index);
  if (what == "cqe") return cqe(h, mem, queue, index);
  if (what == "eqe") return eqe(h, mem, queue, index);
  return "x wqe|rwqe|cqe|eqe QUEUE INDEX [HOST]\n";
}

}  // namespace hcasim::sim
