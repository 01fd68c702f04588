// SPDX-License-Identifier: Apache-2.0
// Extended device verbs: ibv_query_device_ex, thread domains, parent domains, ibv_rereg_mr.
#include <endian.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "../libibverbs/core_extra.h"
#include "extended.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {
namespace {

/** @brief A thread domain: the provider keeps its locks anyway, so it only counts its users. */
struct SimTd {
  ibv_td td;
  std::atomic<int> users{0};  ///< parent domains using it (dealloc -> EBUSY)
};

/**
 * @brief A parent domain: a SimPd carrying its protection domain's PDN, so everything made on
 *        it (QPs, MRs, CQs) is checked by the device against that PD.
 */
struct SimParentDomain {
  SimPd spd;  // must stay first (ibv_pd -> SimPd -> SimParentDomain)
  SimPd* protection = nullptr;
  SimTd* td = nullptr;
  void* pd_context = nullptr;
};

SimTd* sim_td(ibv_td* t) { return reinterpret_cast<SimTd*>(t); }

/** The extended attributes past orig_attr, in a scratch struct the caller copies a prefix of. */
void fill_attr_ex(ibv_context* context, ibv_device_attr_ex& a) {
  query_device(context, &a.orig_attr);
  // CQE timestamps count simulated nanoseconds in 64 bits: a 1 GHz clock that never wraps.
  a.completion_timestamp_mask = ~uint64_t(0);
  a.hca_core_clock = kHcaCoreClockKhz;
  a.device_cap_flags_ex = uint64_t(uint32_t(a.orig_attr.device_cap_flags));
  a.odp_caps = {};  // no on-demand paging: every MR is pinned
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
}

}  // namespace

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  // ibv_query_device_ex(3) and libibverbs' ibv_cmd_query_device_any: no input fields are
  // defined yet, and the caller's struct must hold at least the classic attributes.
  if ((input && input->comp_mask) || !attr || attr_size < sizeof(attr->orig_attr)) return EINVAL;
  ibv_device_attr_ex full{};
  fill_attr_ex(context, full);
  // A caller built against an older, shorter ibv_device_attr_ex gets the prefix it knows; a
  // newer, longer one gets zeros beyond ours.
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  return 0;
}

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (!attr || attr->comp_mask) {  // ibv_alloc_td(3): no optional fields are defined
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new SimTd{};
  t->td.context = context;
  return &t->td;
}

int dealloc_td(ibv_td* td) {
  SimTd* t = sim_td(td);
  if (t->users.load()) return errno = EBUSY;
  delete t;
  return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  // Custom allocators would have to back rings that live in the kernel's DMA memory.
  constexpr uint32_t kSupported = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (!attr || !attr->pd || attr->pd->context != context || sim(attr->pd)->parent_domain ||
      (attr->td && attr->td->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->comp_mask & ~kSupported) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* d = new SimParentDomain{};
  d->protection = sim(attr->pd);
  d->td = attr->td ? sim_td(attr->td) : nullptr;
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) d->pd_context = attr->pd_context;
  d->spd.pd.context = context;
  d->spd.pd.handle = attr->pd->handle;
  d->spd.pdn = d->protection->pdn;
  d->spd.parent_domain = true;
  d->protection->users++;  // the PD cannot go while a parent domain refers to it
  if (d->td) d->td->users++;
  return &d->spd.pd;
}

int dealloc_parent_domain(ibv_pd* pd) {
  auto* d = reinterpret_cast<SimParentDomain*>(sim(pd));
  if (d->spd.users.load()) return errno = EBUSY;  // QPs, MRs, CQs still made on it
  d->protection->users--;
  if (d->td) d->td->users--;
  delete d;
  return 0;
}

int rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  // The old registration keeps the parameters not being changed. ibv_rereg_mr(3) does not say
  // what access an unchanged-access rereg has, so keep the MR's own.
  SimMr* r = sim(mr);
  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
  void* new_addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->addr;
  const size_t new_len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->length;
  const unsigned new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? unsigned(access) : r->access;
  if (!new_pd || new_pd->context != mr->context) return errno = EINVAL;
  // Register first, then drop the old key: on failure the MR is untouched and still valid.
  ibv_mr* fresh = reg_mr(new_pd, new_addr, new_len, reinterpret_cast<uintptr_t>(new_addr), new_access);
  if (!fresh) return errno;
  SimMr* f = sim(fresh);
  const ibv_mr old = *mr;
  std::swap(r->region, f->region);
  std::swap(r->access, f->access);
  *mr = *fresh;  // new keys, PD, address and length in the program's own struct
  *fresh = old;  // the old registration, now owned by the scratch SimMr
  return dereg_mr(fresh);
}

}  // namespace hcasim::drv
