// SPDX-License-Identifier: Apache-2.0
/**
 * @file extended.h
 * @brief The extended verbs: the provider functions open_device installs in verbs_context
 *        (ibv_create_qp_ex, ibv_create_cq_ex, ibv_query_device_ex, thread and parent domains)
 *        and the helpers other provider files call.
 *
 * rdma-core's verbs.h reaches these through inline dispatchers (verbs_get_ctx_op), so they are
 * not exported symbols: each is a verbs_context member. Signatures mirror those members; every
 * function sets errno and returns NULL / an errno value as the man page of the ibv_ function it
 * backs says. qp_ex.cpp holds the QP side (create_qp_ex and the ibv_wr_* family), cq_ex.cpp the
 * CQ side (create_cq_ex, the start/next/end_poll iterator and ibv_wc_read_*, resize_cq) and
 * device_ex.cpp the rest.
 */
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace hcasim::drv {

/**
 * @brief Simulated HCA clock in kHz: the CQE timestamp counts simulated nanoseconds, so the
 *        clock ticks 10^9 times a second (ibv_query_device_ex hca_core_clock).
 */
constexpr uint64_t kHcaCoreClockKhz = 1'000'000;

/** @brief verbs_context::create_qp_ex (ibv_create_qp_ex(3)). */
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);

/** @brief verbs_context::create_cq_ex (ibv_create_cq_ex(3)). */
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);

/** @brief verbs_context::query_device_ex (ibv_query_device_ex(3)); 0 or an errno value. */
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size);

/** @brief verbs_context::alloc_td (ibv_alloc_td(3)). */
ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr);

/** @brief verbs_context::dealloc_td (ibv_dealloc_td(3)); EBUSY while a parent domain uses it. */
int dealloc_td(ibv_td* td);

/** @brief verbs_context::alloc_parent_domain (ibv_alloc_parent_domain(3)). */
ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr);

/** @brief ibv_dealloc_pd(3) of a parent domain (SimPd::parent_domain); 0 or an errno value. */
int dealloc_parent_domain(ibv_pd* pd);

// XRC (xrc.cpp).
/** @brief verbs_context::open_xrcd (ibv_open_xrcd(3)). */
ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr);
/** @brief verbs_context::close_xrcd (ibv_close_xrcd(3)); EBUSY while SRQs or QPs use it. */
int close_xrcd(ibv_xrcd* xrcd);
/** @brief verbs_context::create_srq_ex (ibv_create_srq_ex(3)): basic and XRC SRQs. */
ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr);
/** @brief verbs_context::get_srq_num (ibv_get_srq_num(3)). */
int get_srq_num(ibv_srq* srq, uint32_t* srq_num);
/** @brief An XRC receive QP (create_qp_ex with IBV_QPT_XRC_RECV and an XRC domain). */
ibv_qp* create_xrc_recv_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);
/** @brief verbs_context::open_qp (ibv_open_qp(3)): another handle on an XRC receive QP. */
ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* attr);

}  // namespace hcasim::drv
