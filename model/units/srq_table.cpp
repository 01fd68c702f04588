// SPDX-License-Identifier: Apache-2.0
#include "srq_table.h"

namespace hcasim::model {

WorkQueue srq_queue(SrqContext& srq, uint32_t qpn) {
  return WorkQueue{&srq.srqc.buf, srq.srqc.log_size, srq.srqc.log_stride, &srq.cursor, qpn, "srq", "srq.wqe"};
}

bool SrqTable::create(const hw::Srqc& c) {
  auto& slot = table_[c.srqn];
  if (slot) return false;
  slot = std::make_unique<SrqContext>();
  slot->srqc = c;
  return true;
}

bool SrqTable::destroy(uint32_t srqn) { return table_.erase(srqn) != 0; }

SrqContext* SrqTable::find(uint32_t srqn) {
  auto it = table_.find(srqn);
  return it == table_.end() ? nullptr : it->second.get();
}

const SrqContext* SrqTable::peek(uint32_t srqn) const {
  auto it = table_.find(srqn);
  return it == table_.end() ? nullptr : it->second.get();
}

std::vector<uint32_t> SrqTable::ids() const {
  std::vector<uint32_t> v;
  for (const auto& [n, s] : table_) v.push_back(n);
  return v;
}

}  // namespace hcasim::model
