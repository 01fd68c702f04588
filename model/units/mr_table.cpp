// SPDX-License-Identifier: Apache-2.0
#include "mr_table.h"

#include <cinttypes>

namespace hcasim::model {

const char* mr_check_name(MrCheck c) {
  switch (c) {
    case MrCheck::Ok: return "ok";
    case MrCheck::BadKey: return "invalid key";
    case MrCheck::BadPd: return "PD mismatch";
    case MrCheck::OutOfBounds: return "out of bounds";
    case MrCheck::NoAccess: return "access not granted";
  }
  return "?";
}

bool MrTable::add(const hw::MkeyCtx& ctx) { return table_.emplace(ctx.key, MrEntry{ctx, {}}).second; }
bool MrTable::remove(uint32_t key) { return table_.erase(key) != 0; }
const MrEntry* MrTable::find(uint32_t key) const {
  auto it = table_.find(key);
  return it == table_.end() ? nullptr : &it->second;
}

MrCheck MrTable::check(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t access, uint32_t qpn,
                       const char* why) {
  ++checks_;
  if (len == 0) return MrCheck::Ok;
  MrCheck r = MrCheck::Ok;
  auto it = table_.find(key);
  if (it == table_.end()) {
    r = MrCheck::BadKey;
  } else {
    const auto& c = it->second.ctx;
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
      "%s key=0x%x va=0x%" PRIx64 " len=%" PRIu64 " -> %s", why, key, va, len, mr_check_name(r));
  return r;
}

template <bool kWrite>
int MrTable::copy(uint32_t key, uint64_t va, uint8_t* buf, uint64_t len, uint32_t qpn) {
  auto it = table_.find(key);
  if (it == table_.end()) return -1;
  MrEntry& e = it->second;
  int reads = 0;
  uint64_t off = va - e.ctx.start;
  uint64_t done = 0;
  while (done < len) {
    BtResult t = bt_.translate(e.ctx.pages, off + done, e.cursor, qpn, "mr");
    if (!t.ok) return -1;
    reads += int(t.reads);
    uint64_t n = t.contiguous < len - done ? t.contiguous : len - done;
    bool ok = kWrite ? dma_.write(t.dma, buf + done, n, qpn, "payload")
                     : dma_.read(t.dma, buf + done, n, qpn, "payload");
    if (!ok) return -1;
    done += n;
  }
  return reads;
}

int MrTable::read(uint32_t key, uint64_t va, void* dst, uint64_t len, uint32_t qpn) {
  return copy<false>(key, va, static_cast<uint8_t*>(dst), len, qpn);
}
int MrTable::write(uint32_t key, uint64_t va, const void* src, uint64_t len, uint32_t qpn) {
  return copy<true>(key, va, const_cast<uint8_t*>(static_cast<const uint8_t*>(src)), len, qpn);
}

}  // namespace hcasim::model
