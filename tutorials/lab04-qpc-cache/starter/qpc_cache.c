/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 4: QP context lookup. The HCA keeps the contexts (QPCs) of recently used QPs in a small
 * cache; every doorbell and every arriving packet looks its QP up there. This program creates
 * N RC QP pairs between host A and host B and round-robins 64-byte RDMA WRITEs over them:
 * each round writes once on pair 0, then pair 1, ..., pair N-1, each WRITE waited for before
 * the next. How many of those lookups hit depends on N and on the order of the WRITEs.
 *
 *   qpc_cache [N [ROUNDS]]    N QP pairs (default 17), ROUNDS rounds (default 2)
 *
 * Every WRITE is verified in B's memory. Exit status 0 means every check passed. The cache
 * itself is invisible to the program: read it in the step trace (`qpc.lookup` lines) or count
 * it with `hcasim run --stats`.
 *
 * Lab 4 handout: tutorials/lab04-qpc-cache/README.md. This is the STARTER: the places marked
 * "LAB GAP" are yours to fill in (README.md, steps 2 and 3).
 *
 * Nothing here knows about the simulator: it runs on RoCE hardware, on rxe, or under
 * `hcasim run`.
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_QPS 256
#define MSG_SIZE 64
#define BUF_SIZE (MAX_QPS * MSG_SIZE)
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "qpc_cache: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      exit(1);                                            \
    }                                                     \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq; /* one CQ for all of this host's QPs */
  struct ibv_mr* mr;
  uint8_t* buf; /* MSG_SIZE bytes per QP pair: slot i belongs to pair i */
  union ibv_gid gid;
  struct ibv_qp* qp[MAX_QPS];
};

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */

static void open_host(struct host* h, struct ibv_device* dev) {
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  h->cq = ibv_create_cq(h->ctx, 16, NULL, NULL, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

static struct ibv_qp* create_qp(struct host* h) {
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq,
      .recv_cq = h->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(h->pd, &ia);
  CHECK(qp, "ibv_create_qp: %s", strerror(errno));
  return qp;
}

/* RESET -> INIT -> RTR -> RTS, the attributes ibv_modify_qp(3) requires at each step. */
static void connect_qp(struct ibv_qp* qp, const struct host* peer, uint32_t dest_qpn) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 1000;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "RTR: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 1000;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

/* Pair i: A's qp[i] <-> B's qp[i]. */
static void setup_pair(struct host* a, struct host* b, int i) {
  a->qp[i] = create_qp(a);
  b->qp[i] = create_qp(b);
  connect_qp(a->qp[i], b, b->qp[i]->qp_num);
  connect_qp(b->qp[i], a, a->qp[i]->qp_num);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void fill(uint8_t* p, uint32_t len, uint32_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed * 31 + i * 7);
}

/* One signaled 64-byte RDMA WRITE on pair i, from A's slot i to B's slot i; waits for its
 * completion and checks the bytes arrived. */
static void write_on_pair(struct host* a, struct host* b, int i, uint32_t seed) {
  uint8_t* src = a->buf + i * MSG_SIZE;
  uint8_t* dst = b->buf + i * MSG_SIZE;
  fill(src, MSG_SIZE, seed);
  /* LAB GAP 2: post on A's QP of pair i (a->qp[i]) one signaled IBV_WR_RDMA_WRITE (wr_id seed)
   * of the MSG_SIZE bytes at src to B's address dst: one SGE with A's lkey, and the remote
   * address and rkey in wr.wr.rdma (ibv_post_send(3)). Set gap2_done to 1 when done. */
  int gap2_done = 0;
  CHECK(gap2_done, "LAB GAP 2 is not filled in: post the RDMA WRITE on pair %d (README step 3)", i);
  struct ibv_wc wc;
  const double deadline = now_s() + 5.0;
  int n;
  while ((n = ibv_poll_cq(a->cq, 1, &wc)) == 0)
    CHECK(now_s() < deadline, "pair %d: no completion within 5 s (is the WRITE signaled?)", i);
  CHECK(n == 1, "pair %d: ibv_poll_cq returned %d", i, n);
  CHECK(wc.status == IBV_WC_SUCCESS, "pair %d: completion status %s", i, ibv_wc_status_str(wc.status));
  CHECK(wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == seed && wc.qp_num == a->qp[i]->qp_num,
        "pair %d: completion opcode %d wr_id %llu qp 0x%x", i, wc.opcode, (unsigned long long)wc.wr_id,
        wc.qp_num);
  CHECK(memcmp(src, dst, MSG_SIZE) == 0, "pair %d: the WRITE's bytes differ at B", i);
}

static int parse_arg(int argc, char** argv, int index, int def, int max) {
  if (argc <= index) return def;
  char* end;
  long v = strtol(argv[index], &end, 10);
  CHECK(*end == 0 && v >= 1 && v <= max, "usage: qpc_cache [N (1..%d) [ROUNDS (1..1000)]]", MAX_QPS);
  return (int)v;
}

int main(int argc, char** argv) {
  const int n_qps = parse_arg(argc, argv, 1, 17, MAX_QPS);
  const int rounds = parse_arg(argc, argv, 2, 2, 1000);
  int num_devices = 0;
  struct ibv_device** list = ibv_get_device_list(&num_devices);
  CHECK(list && num_devices > 0, "no RDMA devices found");
  static struct host a, b; /* static: MAX_QPS QP pointers each */
  open_host(&a, list[0]);
  open_host(&b, list[num_devices > 1 ? 1 : 0]);

  for (int i = 0; i < n_qps; ++i) setup_pair(&a, &b, i);
  printf("A = %s, B = %s: %d QP pairs (A's QPs 0x%x..0x%x), %d round(s)\n", a.name, b.name, n_qps,
         a.qp[0]->qp_num, a.qp[n_qps - 1]->qp_num, rounds);

  /* rounds * n_qps WRITEs, one at a time; the order of the pairs is what this lab is about. */
  for (int k = 0; k < rounds * n_qps; ++k) {
    /* LAB GAP 1: set i, the pair WRITE k uses, so that the WRITEs go round-robin over the
     * n_qps pairs: 0, 1, ..., n_qps - 1, then 0 again. Set gap1_done to 1 when done. */
    int i = 0;
    int gap1_done = 0;
    CHECK(gap1_done, "LAB GAP 1 is not filled in: choose WRITE %d's pair round-robin (README step 2)", k);
    CHECK(i >= 0 && i < n_qps, "WRITE %d: pair %d does not exist", k, i);
    write_on_pair(&a, &b, i, (uint32_t)(k + 1));
    if ((k + 1) % n_qps == 0)
      printf("round %d: %d RDMA WRITEs of %d B, one per QP pair: ok\n", (k + 1) / n_qps, n_qps, MSG_SIZE);
  }

  struct host* hs[2] = {&a, &b};
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < n_qps; ++i)
      CHECK(ibv_destroy_qp(hs[h]->qp[i]) == 0, "ibv_destroy_qp: %s", strerror(errno));
    CHECK(ibv_dereg_mr(hs[h]->mr) == 0 && ibv_destroy_cq(hs[h]->cq) == 0 && ibv_dealloc_pd(hs[h]->pd) == 0 &&
              ibv_close_device(hs[h]->ctx) == 0,
          "teardown: %s", strerror(errno));
    free(hs[h]->buf);
  }
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
