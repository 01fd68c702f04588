// SPDX-License-Identifier: Apache-2.0
#include "client_writes.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hcasim::fabric {

void ClientWrites::add(uint64_t hva, const void* src, uint64_t len) {
  if (len == 0) return;
  const uint64_t off = bytes_.size();
  bytes_.resize(off + len);
  std::memcpy(bytes_.data() + off, src, len);
  ++writes_;
  // The next page of the same payload (a posted write lands page by page): one iovec.
  if (!items_.empty() && items_.back().hva + items_.back().len == hva) {
    items_.back().len += len;
    return;
  }
  items_.push_back({hva, off, len});
}

bool ClientWrites::overlaps(uint64_t hva, uint64_t len) const {
  for (const Item& i : items_)
    if (i.hva < hva + len && hva < i.hva + i.len) return true;
  return false;
}

bool ClientWrites::flush(pid_t pid) {
  bool alive = true;
  for (size_t i = 0; i < items_.size();) {
    const size_t last = std::min(items_.size(), i + kMaxItems);
    const std::ptrdiff_t stop = write_run(pid, i, last);
    if (stop < 0) {
      alive = false;
      break;
    }
    i = size_t(stop) == last ? last : size_t(stop) + 1;  // past the one that failed
  }
  clear();
  return alive;
}

std::ptrdiff_t ClientWrites::write_run(pid_t pid, size_t first, size_t last) {
  iovec local[kMaxItems], remote[kMaxItems];
  size_t n = 0;
  uint64_t total = 0;
  for (size_t k = first; k < last; ++k, ++n) {
    local[n] = {bytes_.data() + items_[k].off, items_[k].len};
    remote[n] = {reinterpret_cast<void*>(uintptr_t(items_[k].hva)), items_[k].len};
    total += items_[k].len;
  }
  ++calls_;
  const ssize_t w = process_vm_writev(pid, local, n, remote, n, 0);
  if (w >= 0 && uint64_t(w) == total) return std::ptrdiff_t(last);
  if (w < 0 && errno == ESRCH) return -1;
  // The call stops at the first range it cannot write; everything before it was written.
  uint64_t done = w > 0 ? uint64_t(w) : 0;
  size_t k = first;
  for (; k < last && done >= items_[k].len; ++k) done -= items_[k].len;
  return std::ptrdiff_t(k);
}

void ClientWrites::clear() {
  items_.clear();
  bytes_.clear();
}

}  // namespace hcasim::fabric
