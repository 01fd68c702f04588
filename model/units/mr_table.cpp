// SPDX-License-Identifier: Apache-2.0
#include "mr_table.h"

#include <cinttypes>

#include "strprintf.h"

namespace hcasim::model {

const char* mr_check_name(MrCheck c) {
  switch (c) {
    case MrCheck::Ok: return "ok";
    case MrCheck::BadKey: return "invalid key";
    case MrCheck::BadPd: return "PD mismatch";
    case MrCheck::OutOfBounds: return "out of bounds";
    case MrCheck::NoAccess: return "access not granted";
    case MrCheck::NotBound: return "window not bound";
    case MrCheck::TagMismatch: return "key tag mismatch (window rebound or invalidated)";
    case MrCheck::BadQp: return "type 2 window bound to another QP";
  }
  return "?";
}

const char* mw_op_name(MwOp r) {
  switch (r) {
    case MwOp::Ok: return "ok";
    case MwOp::NoWindow: return "no such window";
    case MwOp::WrongType: return "wrong window type";
    case MwOp::BadPd: return "PD mismatch";
    case MwOp::NoMr: return "invalid MR key";
    case MwOp::NoBindAccess: return "MR not registered with MW_BIND access";
    case MwOp::OutOfBounds: return "window outside the MR";
    case MwOp::BadAccess: return "remote write/atomic needs local write on the MR";
    case MwOp::Bound: return "window already bound";
    case MwOp::NotBound: return "window not bound";
    case MwOp::TagMismatch: return "key tag mismatch";
    case MwOp::BadQp: return "window bound to another QP";
  }
  return "?";
}

bool MrTable::add_window(uint32_t key, uint32_t pdn, uint8_t type) {
  MwEntry w;
  w.pdn = pdn;
  w.type = type;
  w.tag = hw::key_tag(key);
  return windows_.emplace(hw::key_index(key), w).second;
}

bool MrTable::remove_window(uint32_t key) { return windows_.erase(hw::key_index(key)) != 0; }

const MwEntry* MrTable::find_window(uint32_t key) const {
  auto it = windows_.find(hw::key_index(key));
  return it == windows_.end() ? nullptr : &it->second;
}

MwOp MrTable::bind(const hw::BindInfo& b, uint32_t pdn, uint32_t qpn) {
  auto it = windows_.find(hw::key_index(b.new_rkey));
  if (it == windows_.end()) return MwOp::NoWindow;
  MwEntry& w = it->second;
  const bool type2 = (b.flags & hw::kBindType2) != 0;
  if ((w.type == 2) != type2) return MwOp::WrongType;
  if (w.pdn != pdn) return MwOp::BadPd;
  if (type2 && w.bound) return MwOp::Bound;
  if (b.length == 0 && !type2) {  // a zero-length type 1 bind unbinds the window
    w.bound = false;
    w.tag = hw::key_tag(b.new_rkey);
    return MwOp::Ok;
  }
  const MrEntry* mr = entry(b.mr_lkey);
  if (!mr) return MwOp::NoMr;
  const hw::MkeyCtx& c = mr->ctx;
  if (c.pdn != pdn) return MwOp::BadPd;
  if (!(c.access & hw::kAccessMwBind)) return MwOp::NoBindAccess;
  if (b.addr < c.start || b.addr - c.start > c.length || b.length > c.length - (b.addr - c.start))
    return MwOp::OutOfBounds;
  if ((b.access & (hw::kAccessRemoteWrite | hw::kAccessRemoteAtomic)) && !(c.access & hw::kAccessLocalWrite))
    return MwOp::BadAccess;
  w.bound = true;
  w.tag = hw::key_tag(b.new_rkey);
  w.mr_key = b.mr_lkey;
  w.start = b.addr;
  w.length = b.length;
  w.access = b.access;
  w.zero_based = (b.flags & hw::kBindZeroBased) != 0;
  w.qpn = qpn;
  return MwOp::Ok;
}

MwOp MrTable::invalidate(uint32_t rkey, uint32_t pdn, uint32_t qpn) {
  auto it = windows_.find(hw::key_index(rkey));
  if (it == windows_.end()) return MwOp::NoWindow;
  MwEntry& w = it->second;
  if (w.type != 2) return MwOp::WrongType;  // IBTA 10.6.7.3: only type 2 windows are invalidated
  if (!w.bound) return MwOp::NotBound;
  if (w.tag != hw::key_tag(rkey)) return MwOp::TagMismatch;
  if (w.pdn != pdn) return MwOp::BadPd;
  if (w.qpn != qpn) return MwOp::BadQp;
  w.bound = false;
  return MwOp::Ok;
}

MrCheck MrTable::check_window(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t access,
                              uint32_t qpn, uint32_t& mr_key, uint64_t& mr_va) const {
  auto it = windows_.find(hw::key_index(key));
  if (it == windows_.end()) return MrCheck::BadKey;
  const MwEntry& w = it->second;
  if (!w.bound) return MrCheck::NotBound;
  if (w.tag != hw::key_tag(key)) return MrCheck::TagMismatch;
  if (w.pdn != pdn) return MrCheck::BadPd;
  if (w.type == 2 && w.qpn != qpn) return MrCheck::BadQp;
  const uint64_t base = w.zero_based ? 0 : w.start;
  if (va < base || va - base > w.length || len > w.length - (va - base)) return MrCheck::OutOfBounds;
  if ((w.access & access) != access) return MrCheck::NoAccess;
  mr_key = w.mr_key;
  mr_va = w.start + (va - base);
  return MrCheck::Ok;
}

MrEntry* MrTable::resolve(uint32_t key, uint64_t& va) {
  if (MrEntry* mr = entry(key)) return mr;
  auto w = windows_.find(hw::key_index(key));
  if (w == windows_.end() || !w->second.bound || w->second.tag != hw::key_tag(key)) return nullptr;
  va = w->second.start + (va - (w->second.zero_based ? 0 : w->second.start));
  return entry(w->second.mr_key);
}

bool MrTable::add(const hw::MkeyCtx& ctx) { return table_.emplace(ctx.key, MrEntry{ctx, {}}).second; }
bool MrTable::remove(uint32_t key) {
  if (key == last_key_) last_ = nullptr;
  return table_.erase(key) != 0;
}
const MrEntry* MrTable::find(uint32_t key) const { return entry(key); }

MrCheck MrTable::check(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t access, uint32_t qpn,
                       const char* why) {
  ++checks_;
  if (len == 0) return MrCheck::Ok;
  MrCheck r = MrCheck::Ok;
  uint32_t mr_key = key;
  uint64_t mr_va = va;
  const MrEntry* mr = entry(key);
  if (!mr) {
    r = check_window(key, pdn, va, len, access, qpn, mr_key, mr_va);
  } else {
    const auto& c = mr->ctx;
    if (c.pdn != pdn)
      r = MrCheck::BadPd;
    else if (va < c.start || va - c.start > c.length || len > c.length - (va - c.start))
      r = MrCheck::OutOfBounds;
    else if ((c.access & access) != access)
      r = MrCheck::NoAccess;
  }
  if (r != MrCheck::Ok) ++violations_;
  HCASIM_TRACE(
      tracer_, Mr, MrXlate, qpn,
      TraceFields().set_key(key).set_addr(va).set_count(uint32_t(len)).set_flag(kTfError, r != MrCheck::Ok),
      "%s key=0x%x va=0x%" PRIx64 " len=%" PRIu64 " -> %s%s", why, key, va, len, mr_check_name(r),
      mr_key != key ? strprintf(" (window on MR 0x%x at va 0x%" PRIx64 ")", mr_key, mr_va).c_str() : "");
  return r;
}

template <bool kWrite>
int MrTable::copy(uint32_t key, uint64_t va, uint8_t* buf, uint64_t len, uint32_t qpn, ReadFor why) {
  MrEntry* found = resolve(key, va);
  if (!found) return -1;
  MrEntry& e = *found;
  int reads = 0;
  uint64_t off = va - e.ctx.start;
  uint64_t done = 0;
  while (done < len) {
    BtResult t = bt_.translate(e.ctx.pages, off + done, e.cursor, qpn, "mr");
    if (!t.ok) return -1;
    reads += int(t.reads);
    uint64_t n = t.contiguous < len - done ? t.contiguous : len - done;
    bool ok = kWrite ? dma_.post_write(t.dma, buf + done, n, qpn, "payload")
                     : dma_.read(t.dma, buf + done, n, qpn, "payload", why);
    if (!ok) return -1;
    done += n;
  }
  return reads;
}

int MrTable::read(uint32_t key, uint64_t va, void* dst, uint64_t len, uint32_t qpn, ReadFor why) {
  return copy<false>(key, va, static_cast<uint8_t*>(dst), len, qpn, why);
}
int MrTable::write(uint32_t key, uint64_t va, const void* src, uint64_t len, uint32_t qpn) {
  return copy<true>(key, va, const_cast<uint8_t*>(static_cast<const uint8_t*>(src)), len, qpn,
                    ReadFor::Device);
}

}  // namespace hcasim::model
