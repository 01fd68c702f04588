// SPDX-License-Identifier: Apache-2.0
#include "client_reads.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hcasim::fabric {

namespace {
constexpr uint64_t kPage = 4096;
/** Remote ranges of one fill: a page each, so a read stops at the first unmapped page. */
constexpr size_t kMaxPieces = ClientReads::kWindow / kPage + 3;
}  // namespace

bool ClientReads::find(uint64_t hva, void* dst, uint64_t len) {
  if (hva < base_ || hva - base_ > len_ || len > len_ - (hva - base_)) return false;
  std::memcpy(dst, bytes_.data() + (hva - base_), len);
  used_ = std::max(used_, hva - base_ + len);
  ++hits_;
  return true;
}

bool ClientReads::fill(pid_t pid, uint64_t hva, void* dst, uint64_t len) {
  if (fills_) ahead_ = std::min(kWindow, 2 * used_);  // what the last copy served, twice
  len_ = used_ = 0;
  const uint64_t want = reach(len);
  bytes_.resize(std::max<uint64_t>(bytes_.size(), want));
  iovec local{bytes_.data(), want}, remote[kMaxPieces];
  size_t n = 0;
  uint64_t at = hva;
  for (; at < hva + want && n < kMaxPieces; ++n) {
    const uint64_t end = std::min(hva + want, (at & ~(kPage - 1)) + kPage);
    remote[n] = {reinterpret_cast<void*>(uintptr_t(at)), end - at};
    at = end;
  }
  if (at < hva + len) {  // a payload longer than the window: the rest in one piece
    remote[n - 1].iov_len += hva + len - at;
    at = hva + len;
  }
  local.iov_len = at - hva;
  ++fills_;
  const ssize_t got = process_vm_readv(pid, &local, 1, remote, n, 0);
  if (got < 0) return false;
  if (uint64_t(got) < len) {
    errno = EFAULT;
    return false;
  }
  base_ = hva;
  len_ = uint64_t(got);
  used_ = len;
  std::memcpy(dst, bytes_.data(), len);
  return true;
}

void ClientReads::update(uint64_t hva, const void* src, uint64_t len) {
  const uint64_t lo = std::max(hva, base_), hi = std::min(hva + len, base_ + len_);
  if (lo < hi)
    std::memcpy(bytes_.data() + (lo - base_), static_cast<const uint8_t*>(src) + (lo - hva), hi - lo);
}

}  // namespace hcasim::fabric
