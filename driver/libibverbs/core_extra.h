// SPDX-License-Identifier: Apache-2.0
/**
 * @file core_extra.h
 * @brief Provider functions the exported ABI layer needs beyond driver/provider/verbs_core.h.
 *
 * Same conventions as verbs_core.h (signatures mirror <infiniband/verbs.h>, errno set on
 * failure). The provider implements these; driver/libibverbs only calls them.
 */
#pragma once

#include <infiniband/verbs.h>

namespace hcasim::drv {

/**
 * The extended QP behind @p qp, for ibv_qp_to_qp_ex (IBVERBS_1.6).
 *
 * Only the provider knows whether a QP was created through verbs_context::create_qp_ex with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (and so lives inside an ibv_qp_ex whose qp_base is @p qp).
 * Returns that ibv_qp_ex, or NULL (errno EOPNOTSUPP / EINVAL) for QPs without the extended
 * send API. perftest and other ibv_wr_* users call this right after ibv_create_qp_ex.
 */
ibv_qp_ex* qp_to_qp_ex(ibv_qp* qp);

/**
 * Re-register @p mr (ibv_rereg_mr(3)) with the properties @p flags names changed, after the
 * exported ibv_rereg_mr checked its input. A new registration is made first and the old one
 * dropped after, so on failure @p mr is untouched. @p mr gets the new keys. Returns 0 or an
 * errno value (errno set).
 */
int rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access);

}  // namespace hcasim::drv
