// SPDX-License-Identifier: Apache-2.0
#include "hca_link.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace hcasim::drv {
namespace {
LinkEnumerator& enumerator() {
  static LinkEnumerator e;
  return e;
}
}  // namespace

void HcaLink::wait_activity(std::vector<pollfd>& fds, int timeout_ms) {
  fds.push_back({activity_fd(), POLLIN, 0});
  poll(fds.data(), nfds_t(fds.size()), timeout_ms);
  fds.pop_back();
}

uint8_t* HcaLink::alloc_dma_pages(uint64_t bytes) {
  constexpr uint64_t kPage = 4096;
  void* p = nullptr;
  if (posix_memalign(&p, kPage, bytes ? bytes : kPage) != 0) return nullptr;
  std::memset(p, 0, bytes);
  return static_cast<uint8_t*>(p);
}

void HcaLink::free_dma_pages(uint8_t* p, uint64_t) { std::free(p); }

void register_link_enumerator(LinkEnumerator e) { enumerator() = std::move(e); }

const std::vector<HcaLink*>& links() {
  static std::once_flag once;
  static std::vector<HcaLink*> list;
  std::call_once(once, [] {
    if (enumerator()) list = enumerator()();
  });
  return list;
}

}  // namespace hcasim::drv
