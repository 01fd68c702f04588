// SPDX-License-Identifier: Apache-2.0
#include "frame_loss.h"

#include "hca.h"

namespace hcasim::sim {

void FrameLoss::attach(const std::vector<model::Hca*>& hcas) {
  for (uint32_t i = 0; i < hcas.size(); ++i)
    hcas[i]->drop_rx_if([this, i](const wire::ParsedFrame& f) { return lose(i, f.h.dest_qp, f.h.psn); },
                        0xffffffffu);
}

bool FrameLoss::lose(uint32_t host, uint32_t qpn, uint32_t psn) {
  for (auto it = next_.begin(); it != next_.end(); ++it)
    if (*it == host || *it == DropRule::kAny) {
      next_.erase(it);
      return true;
    }
  for (DropRule& r : rules_) {
    if (!r.count || r.host != host) continue;
    if ((r.psn == DropRule::kAny || r.psn == psn) && (r.qpn == DropRule::kAny || r.qpn == qpn)) {
      --r.count;
      return true;
    }
  }
  return false;
}

}  // namespace hcasim::sim
