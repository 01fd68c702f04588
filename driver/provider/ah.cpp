// SPDX-License-Identifier: Apache-2.0
// Address handles (ibv_create_ah(3)): the destination of UD sends. On RoCE every address is a
// GID, so the GRH part of the attributes is mandatory; the HCA turns the GID into a next-hop MAC
// when it builds each packet, as it does for a connected QP's path.
#include <cerrno>
#include <cstring>

#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {

ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* a) {
  if (!pd || !a || a->port_num != 1 || !a->is_global || a->grh.sgid_index >= hw::kGidTableLen) {
    errno = EINVAL;
    return nullptr;
  }
  auto* ah = new SimAh{};
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  std::memcpy(ah->av.dgid, a->grh.dgid.raw, 16);
  ah->av.sgid_index = a->grh.sgid_index;
  ah->av.hop_limit = a->grh.hop_limit;
  ah->av.traffic_class = a->grh.traffic_class;
  ah->av.flow_label = a->grh.flow_label;
  sim(pd)->users++;
  return &ah->ah;
}

int destroy_ah(ibv_ah* ibah) {
  SimAh* ah = sim(ibah);
  sim(ibah->pd)->users--;
  delete ah;
  return 0;
}

}  // namespace hcasim::drv
