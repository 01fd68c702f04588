// SPDX-License-Identifier: Apache-2.0
#include "hca_link.h"

#include <mutex>

namespace hcasim::drv {
namespace {
LinkEnumerator& enumerator() {
  static LinkEnumerator e;
  return e;
}
}  // namespace

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
