/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared helpers of the golden-trace scenarios: two hosts (the first two ibverbs devices), one
 * QP each (RC unless scn_qp_type says otherwise, optionally on a shared receive queue),
 * connected at a given path MTU, plain ibverbs API only.
 *
 * Buffers are mapped at fixed virtual addresses, so the addresses a trace shows (MR translations,
 * RETH) do not depend on how large the program or its libraries are; with `hcasim run` (ASLR
 * off) and --idle-us 0 (time advances only in verbs calls) every run gives the same trace.
 */
#ifndef HCASIM_TRACE_SCENARIO_H
#define HCASIM_TRACE_SCENARIO_H

#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "scn_check.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SCN_BUF_SIZE (64 * 1024)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_comp_channel* channel;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_srq* srq; /* with scn_use_srq */
  struct ibv_ah* ah;   /* UD: towards the other host */
  struct ibv_mr* mr;
  uint8_t* buf;
  union ibv_gid gid;
};

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */
static const uint32_t kQkey = 0x11111111;

/* Set before setup(): the QPs' transport, and whether they take receives from an SRQ. */
static enum ibv_qp_type scn_qp_type = IBV_QPT_RC;
static int scn_use_srq = 0;

/* Host i's buffer lives at 0x7e0000000000 + i * 16 MiB. */
static uint8_t* fixed_buffer(int i) {
  void* want = (void*)(uintptr_t)(0x7e0000000000ull + (uint64_t)i * (16u << 20));
  void* p = mmap(want, SCN_BUF_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK(p == want, "mmap at %p: %s", want, p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
  return (uint8_t*)p;
}

static void open_host(struct host* h, struct ibv_device* dev, int index, int with_channel) {
  memset(h, 0, sizeof *h);
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  if (with_channel) {
    h->channel = ibv_create_comp_channel(h->ctx);
    CHECK(h->channel, "ibv_create_comp_channel: %s", strerror(errno));
  }
  h->cq = ibv_create_cq(h->ctx, 16, h, h->channel, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  h->buf = fixed_buffer(index);
  h->mr = ibv_reg_mr(h->pd, h->buf, SCN_BUF_SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  if (scn_use_srq) {
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
    h->srq = ibv_create_srq(h->pd, &sa);
    CHECK(h->srq, "ibv_create_srq: %s", strerror(errno));
  }
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq,
      .recv_cq = h->cq,
      .srq = h->srq,
      .qp_type = scn_qp_type,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

/* UD: RESET -> INIT (Q_Key) -> RTR -> RTS, and an address handle towards @peer. */
static void connect_ud(struct host* h, const struct host* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = kQkey};
  CHECK(ibv_modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0,
        "INIT: %s", strerror(errno));
  a.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(h->qp, &a, IBV_QP_STATE) == 0, "RTR: %s", strerror(errno));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  CHECK(ibv_modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "RTS: %s", strerror(errno));
  struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
  aa.grh.dgid = peer->gid;
  aa.grh.sgid_index = kGidIndex;
  aa.grh.hop_limit = 64;
  h->ah = ibv_create_ah(h->pd, &aa);
  CHECK(h->ah, "ibv_create_ah: %s", strerror(errno));
}

static void connect_qp(struct host* h, const struct host* peer, enum ibv_mtu mtu) {
  if (scn_qp_type == IBV_QPT_UD) {
    connect_ud(h, peer);
    return;
  }
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  CHECK(ibv_modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = peer->qp->qp_num;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(h->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "RTR: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 100;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(h->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

/* Two connected hosts; B gets a completion channel if asked. */
static struct ibv_device** setup(struct host* a, struct host* b, enum ibv_mtu mtu, int b_channel) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n >= 2, "needs two RDMA devices (run under hcasim run)");
  open_host(a, list[0], 0, 0);
  open_host(b, list[1], 1, b_channel);
  connect_qp(a, b, mtu);
  connect_qp(b, a, mtu);
  return list;
}

/* Poll until one completion (every empty poll lets simulated time advance). */
static void wait_one(struct host* h, struct ibv_wc* wc, enum ibv_wc_opcode op, const char* what) {
  int n;
  do {
    n = ibv_poll_cq(h->cq, 1, wc);
  } while (n == 0);
  CHECK(n == 1, "%s: ibv_poll_cq returned %d", what, n);
  CHECK(wc->status == IBV_WC_SUCCESS, "%s: completion status %s", what, ibv_wc_status_str(wc->status));
  CHECK(wc->opcode == op, "%s: completion opcode %d, expected %d", what, wc->opcode, op);
}

static void post_recv(struct host* h, uint64_t wr_id, uint32_t offset, uint32_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
  if (h->srq)
    CHECK(ibv_post_srq_recv(h->srq, &wr, &bad) == 0, "ibv_post_srq_recv: %s", strerror(errno));
  else
    CHECK(ibv_post_recv(h->qp, &wr, &bad) == 0, "ibv_post_recv: %s", strerror(errno));
}

static void post_send(struct host* h, uint64_t wr_id, enum ibv_wr_opcode op, unsigned flags, uint32_t offset,
                      uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = flags,
                           .imm_data = htonl(imm)},
                     *bad;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  CHECK(ibv_post_send(h->qp, &wr, &bad) == 0, "ibv_post_send: %s", strerror(errno));
}

/* UD: a SEND (with immediate) of @len bytes at @offset to @to's QP through @ah. */
static void post_ud_send(struct host* h, struct ibv_ah* ah, uint32_t remote_qpn, uint64_t wr_id,
                         uint32_t offset, uint32_t len, uint32_t imm) {
  struct ibv_sge sge = {.addr = (uintptr_t)h->buf + offset, .length = len, .lkey = h->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(imm)},
                     *bad;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = remote_qpn;
  wr.wr.ud.remote_qkey = kQkey;
  CHECK(ibv_post_send(h->qp, &wr, &bad) == 0, "ibv_post_send: %s", strerror(errno));
}

static void fill(uint8_t* p, uint32_t len, uint8_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed + i * 7);
}

static void teardown(struct host* a, struct host* b, struct ibv_device** list) {
  struct host* hs[2] = {a, b};
  for (int i = 0; i < 2; ++i) {
    struct host* h = hs[i];
    CHECK(!h->ah || ibv_destroy_ah(h->ah) == 0, "ibv_destroy_ah: %s", strerror(errno));
    CHECK(ibv_destroy_qp(h->qp) == 0 && (!h->srq || ibv_destroy_srq(h->srq) == 0) &&
              ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->cq) == 0 &&
              (!h->channel || ibv_destroy_comp_channel(h->channel) == 0) && ibv_dealloc_pd(h->pd) == 0 &&
              ibv_close_device(h->ctx) == 0,
          "teardown: %s", strerror(errno));
    munmap(h->buf, SCN_BUF_SIZE);
  }
  ibv_free_device_list(list);
}

#endif
