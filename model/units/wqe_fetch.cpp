// SPDX-License-Identifier: Apache-2.0
#include "wqe_fetch.h"

#include <cstring>

namespace hcasim::model {
namespace {

constexpr uint32_t kWqeBbShift = 6;  // log2(hw::kWqeBasicBlock)
static_assert((1u << kWqeBbShift) == hw::kWqeBasicBlock);

bool is_atomic(hw::WqeOpcode op) {
  return op == hw::WqeOpcode::AtomicCmpSwap || op == hw::WqeOpcode::AtomicFetchAdd;
}
/** Opcodes whose WQE carries a remote address segment after the control segment. */
bool has_raddr(hw::WqeOpcode op) {
  return op == hw::WqeOpcode::RdmaWrite || op == hw::WqeOpcode::RdmaWriteImm ||
         op == hw::WqeOpcode::RdmaRead || is_atomic(op);
}

template <typename Seg>
Seg load_seg(const uint8_t* raw, uint32_t seg) {
  Seg s;
  std::memcpy(&s, hw::wqe_segment(raw, seg), sizeof s);
  return s;
}

/** The payload of a send WQE from segment @p seg on: inline data or a gather list. */
bool decode_payload(const uint8_t* raw, uint32_t seg, uint32_t ds, SendWqe& w) {
  if (seg >= ds) return true;
  if (hw::seg_is_inline(hw::wqe_segment(raw, seg))) {
    w.is_inline = true;
    w.length = hw::inline_seg_length(load_seg<hw::InlineSeg>(raw, seg));
    if (w.length > kMaxInline || sizeof(hw::InlineSeg) + w.length > (ds - seg) * hw::kSegmentSize)
      return false;
    std::memcpy(w.inline_buf, hw::wqe_segment(raw, seg) + sizeof(hw::InlineSeg), w.length);
    return true;
  }
  for (; seg < ds && w.nsge < kMaxSge; ++seg) {
    const auto d = load_seg<hw::DataSeg>(raw, seg);
    Sge& s = w.sge[w.nsge++];
    s.len = hw::data_seg_length(d);
    s.lkey = hw::data_seg_lkey(d);
    s.addr = hw::data_seg_addr(d);
    w.length += s.len;
  }
  return true;
}

}  // namespace

WorkQueue send_queue(QpContext& qp) {
  return WorkQueue{&qp.qpc.sq_buf,
                   qp.qpc.sq_log_size,
                   kWqeBbShift,
                   &qp.sq_cursor,
                   qp.qpc.qpn,
                   "sq",
                   "wqe",
                   hw::is_datagram(hw::QpType(qp.qpc.type)),
                   hw::QpType(qp.qpc.type) == hw::QpType::XrcSend};
}

WorkQueue recv_queue(QpContext& qp) {
  return WorkQueue{&qp.qpc.rq_buf, qp.qpc.rq_log_size, qp.qpc.rq_log_stride, &qp.rq_cursor, qp.qpc.qpn, "rq",
                   "rq.wqe"};
}

bool WqeFetchUnit::read_entry(const WorkQueue& q, uint32_t index, uint8_t* dst, uint32_t len,
                              uint32_t& table_reads) {
  const uint32_t ring = 1u << q.log_entries;
  const uint64_t off = uint64_t(index & (ring - 1)) << q.log_stride;
  BtResult t = bt_.translate(*q.buf, off, *q.cursor, q.qpn, q.table_tag);
  if (!t.ok) return false;
  table_reads += t.reads;
  return dma_.read(t.dma, dst, len, q.qpn, q.dma_tag);
}

bool WqeFetchUnit::pushed_entry(const WorkQueue& q, uint32_t index, uint8_t* dst, uint32_t len) const {
  const uint32_t ring = 1u << q.log_entries;
  const BtResult t = bt_.peek(*q.buf, uint64_t(index & (ring - 1)) << q.log_stride);
  return t.ok && dma_.peek(t.dma, dst, len);
}

uint32_t WqeFetchUnit::fetch_send(const WorkQueue& sq, uint16_t index, SendWqe& w, uint32_t& table_reads) {
  return send_wqe(sq, index, w, &table_reads);
}

uint32_t WqeFetchUnit::take_pushed_send(const WorkQueue& sq, uint16_t index, SendWqe& w) {
  return send_wqe(sq, index, w, nullptr);
}

uint32_t WqeFetchUnit::send_wqe(const WorkQueue& sq, uint16_t index, SendWqe& w, uint32_t* table_reads) {
  uint8_t raw[hw::kMaxSendWqeBbs * hw::kWqeBasicBlock];
  uint32_t nbb = 1;
  for (uint32_t bb = 0; bb < nbb; ++bb) {
    uint8_t* dst = raw + bb * hw::kWqeBasicBlock;
    // A pushed WQE (no table_reads): the bytes the CPU stored into the BlueFlame buffer, which
    // it copied from this ring slot; read from there without a DMA read or a table walk.
    if (table_reads ? !read_entry(sq, index + bb, dst, hw::kWqeBasicBlock, *table_reads)
                    : !pushed_entry(sq, index + bb, dst, hw::kWqeBasicBlock))
      return 0;
    if (bb == 0) {  // the control segment says how many WQEBBs follow
      nbb = hw::wqe_bbs_for_segments(hw::ctrl_ds(load_seg<hw::CtrlSeg>(raw, 0)));
      if (nbb == 0 || nbb > hw::kMaxSendWqeBbs) return 0;
    }
  }
  return decode_send_wqe(raw, nbb, index, w, sq.datagram, sq.xrc) ? nbb : 0;
}

bool decode_send_wqe(const uint8_t* raw, uint32_t nbb, uint16_t index, SendWqe& w, bool datagram, bool xrc) {
  const auto ctrl = load_seg<hw::CtrlSeg>(raw, 0);
  const uint32_t ds = hw::ctrl_ds(ctrl);
  w = SendWqe{};
  w.index = index;
  w.nbb = uint8_t(nbb);
  w.op = hw::ctrl_opcode(ctrl);
  w.flags = hw::ctrl_flags(ctrl);
  w.imm = hw::ctrl_imm(ctrl);
  uint32_t seg = 1;
  if (xrc) {
    if (ds < 2) return false;
    w.xrc_srqn = hw::xrc_seg_srqn(load_seg<hw::XrcSeg>(raw, seg++));
  }
  if (datagram) {
    if (ds < seg + hw::kDatagramSegs) return false;
    w.av = hw::get_datagram_seg(load_seg<hw::DatagramSeg>(raw, seg));
    seg += hw::kDatagramSegs;
  }
  if (w.op == hw::WqeOpcode::BindMw) {
    if (ds < seg + hw::kBindSegs) return false;
    w.bind = hw::get_bind_seg(load_seg<hw::BindSeg>(raw, seg));
    return true;
  }
  // Every segment the opcode implies must lie inside the WQE's ds: a program can write any
  // ds, and a segment past it lies past the WQEBBs fetched (found by tests/fuzz, send_wqe).
  if (has_raddr(w.op)) {
    if (seg >= ds) return false;
    const auto r = load_seg<hw::RaddrSeg>(raw, seg++);
    w.raddr = hw::raddr_seg_addr(r);
    w.rkey = hw::raddr_seg_rkey(r);
  }
  if (is_atomic(w.op)) {
    if (seg >= ds) return false;
    const auto a = load_seg<hw::AtomicSeg>(raw, seg++);
    w.swap_add = hw::atomic_seg_swap_add(a);
    w.compare = hw::atomic_seg_compare(a);
  }
  return decode_payload(raw, seg, ds, w);
}

bool WqeFetchUnit::fetch_recv(const WorkQueue& rq, uint16_t index, Sge* sge, uint32_t& nsge) {
  uint8_t raw[kMaxSge * sizeof(hw::DataSeg)];
  const uint32_t stride = 1u << rq.log_stride;
  const uint32_t bytes = stride < sizeof raw ? stride : uint32_t(sizeof raw);
  uint32_t table_reads = 0;
  if (!read_entry(rq, index, raw, bytes, table_reads)) return false;
  nsge = 0;
  for (uint32_t i = 0; i < bytes / sizeof(hw::DataSeg); ++i) {
    const auto d = load_seg<hw::DataSeg>(raw, i);
    if (hw::data_seg_is_terminator(d)) break;
    sge[nsge++] = Sge{hw::data_seg_addr(d), hw::data_seg_length(d), hw::data_seg_lkey(d)};
  }
  return true;
}

bool WqeFetchUnit::recv_producer(uint64_t dbrec, uint32_t qpn, uint16_t& pi, const char* tag) {
  hw::QpDbrec rec{};
  if (!dma_.read(dbrec, &rec, sizeof rec, qpn, tag)) return false;
  pi = hw::qp_dbrec_rq(rec);
  return true;
}

uint64_t WqeFetchUnit::send_cost_ps(uint32_t nbb, uint32_t table_reads, bool pipelined) const {
  const uint32_t bytes = nbb * hw::kWqeBasicBlock;
  return (pipelined ? prof_.pcie_xfer_ps(bytes) : dma_.read_latency_ps(bytes)) +
         table_reads * prof_.pcie_read_ps;
}

}  // namespace hcasim::model
