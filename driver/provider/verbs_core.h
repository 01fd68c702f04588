// SPDX-License-Identifier: Apache-2.0
/**
 * @file verbs_core.h
 * @brief The verbs the hcasim provider implements; the exported libibverbs ABI
 *        (driver/libibverbs) is a thin, versioned layer over these.
 *
 * Signatures mirror <infiniband/verbs.h>. Every function sets errno and returns
 * NULL / -1 / an errno value exactly as the man page of the ibv_ function it backs says.
 * Data-path verbs (post_send, post_recv, poll_cq, req_notify_cq) are reached through
 * ibv_context::ops and verbs_context, not through this header.
 */
#pragma once

#include <infiniband/verbs.h>

namespace hcasim::drv {

ibv_device** get_device_list(int* num_devices);
void free_device_list(ibv_device** list);
uint64_t get_device_guid(ibv_device* device);  ///< network byte order, as ibv_get_device_guid
ibv_context* open_device(ibv_device* device);
int close_device(ibv_context* context);

int query_device(ibv_context* context, ibv_device_attr* attr);
/** Fills the full struct ibv_port_attr (the compat export copies its prefix). */
int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr);
int query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid);
/** GID table entry with type and netdev ifindex; returns 0, or an errno value. */
int query_gid_entry(ibv_context* context, uint32_t port_num, uint32_t index, ibv_gid_entry* entry);
/** Number of GID entries on a port. */
int gid_table_len(ibv_context* context, uint8_t port_num);
int query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey);

ibv_pd* alloc_pd(ibv_context* context);
int dealloc_pd(ibv_pd* pd);

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
int dereg_mr(ibv_mr* mr);

ibv_comp_channel* create_comp_channel(ibv_context* context);
int destroy_comp_channel(ibv_comp_channel* channel);
int get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context);
void ack_cq_events(ibv_cq* cq, unsigned int nevents);

ibv_cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector);
int resize_cq(ibv_cq* cq, int cqe);
int destroy_cq(ibv_cq* cq);

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr);
/**
 * For the connection manager (driver/cm) only, as the kernel's MAD layer creates IB_QPT_GSI:
 * the port's GSI QP, number 1, a datagram QP that verbs treats as UD (@p attr's qp_type must be
 * IBV_QPT_UD). EBUSY if the device's GSI QP exists already.
 */
ibv_qp* create_gsi_qp(ibv_pd* pd, ibv_qp_init_attr* attr);
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
int destroy_qp(ibv_qp* qp);

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr);
int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask);
int query_srq(ibv_srq* srq, ibv_srq_attr* attr);
int destroy_srq(ibv_srq* srq);

ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr);
/** Attach (or detach) UD QP @p qp to the multicast group @p gid; 0 or the errno value. */
int attach_mcast(ibv_qp* qp, const ibv_gid* gid, bool attach);
int destroy_ah(ibv_ah* ah);

int get_async_event(ibv_context* context, ibv_async_event* event);
void ack_async_event(ibv_async_event* event);

}  // namespace hcasim::drv
