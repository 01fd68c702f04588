/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 3: queue buffers and the buffer table. A queue's ring is one range of the program's
 * virtual memory, but its pages are scattered in the device's address space; the HCA finds each
 * page through the queue's buffer table, one level deep for a small ring, two for a big one.
 *
 * Host A (first device) and host B (second device; the same device twice if there is only
 * one) each get an RC QP. A's QP has a small send queue (64 WRs of at most 100 inline bytes:
 * 256 basic blocks of 64 bytes, 4 pages) and a big receive queue (16384 receives of up to 16
 * SGEs, 256 bytes each: 4 MiB, 1024 pages). Then:
 *   1. A posts one list of 22 RDMA WRITEs of 100 inline bytes to B; each WQE takes 3 basic
 *      blocks, so the 22nd, WQE 63, runs from the last block of page 0 into page 1;
 *   2. A posts 18 receives, and B sends 18 messages of 64 bytes into them (A's receive WQEs
 *      0..17: page 0 holds 16 of them, the last two are in page 1). `buffer_tables N` fills N
 *      receives instead, in batches of 32: N = 9001 reaches receive WQE 9000, in page 562.
 * Every payload is verified byte for byte. Exit status 0 means every check passed.
 *
 * Lab 3 handout: tutorials/lab03-buffer-tables/README.md. This is the STARTER: the places
 * marked "LAB GAP" are yours to fill in (README.md, steps 2 and 3).
 *
 * Nothing here knows about the simulator: build it with `cc buffer_tables.c -libverbs` and run
 * it on RoCE hardware, on rxe, or under `hcasim run` (which adds the step trace).
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE 8192
#define NWRITES 22 /* step 1: WQE 0, 3, ..., 63 */
#define BATCH 32   /* step 2: receives posted (and SENDs sent) per batch */
#define CHECK(cond, ...)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "buffer_tables: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                                  \
      exit(1);                                                \
    }                                                         \
  } while (0)

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* buf;
  union ibv_gid gid;
};

static const int kGidIndex = 1;       /* the IPv4-mapped RoCEv2 GID */
static const uint32_t kBig = 100;     /* inline bytes of each WRITE of step 1 */
static const uint32_t kMsg = 64;      /* bytes per SEND of step 2 */
static const uint32_t kRecvBuf = 128; /* bytes per receive buffer of step 2 */

/* A's QP: a small send queue and a big receive queue. B's: small queues. */
static struct ibv_qp_cap queue_sizes(int big) {
  struct ibv_qp_cap cap = {
      .max_send_wr = 64, .max_recv_wr = 32, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = kBig};
  if (big) {
    /* LAB GAP 1: make this receive queue big enough that its buffer table needs two levels
     * (README step 2). Set cap.max_recv_sge to 16: each receive WQE is then 16 x 16 = 256
     * bytes. Set cap.max_recv_wr to the smallest power of two for which the ring has more 4 KiB
     * pages than one 4 KiB table page has 8-byte entries. Set gap1_done to 1 when done. */
    int gap1_done = 0;
    CHECK(gap1_done, "LAB GAP 1 is not filled in: size A's big receive queue (README step 2)");
  }
  return cap;
}

static void open_host(struct host* h, struct ibv_device* dev, int big) {
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  h->cq = ibv_create_cq(h->ctx, 64, NULL, NULL, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  h->buf = aligned_alloc(4096, BUF_SIZE);
  CHECK(h->buf, "out of memory");
  memset(h->buf, 0, BUF_SIZE);
  h->mr = ibv_reg_mr(h->pd, h->buf, BUF_SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(h->mr, "ibv_reg_mr: %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = h->cq, .recv_cq = h->cq, .qp_type = IBV_QPT_RC, .cap = queue_sizes(big)};
  h->qp = ibv_create_qp(h->pd, &ia);
  CHECK(h->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ia.cap.max_inline_data >= kBig, "max_inline_data %u", ia.cap.max_inline_data);
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
}

/* RESET -> INIT -> RTR -> RTS, the attributes ibv_modify_qp(3) requires at each step. */
static void connect_qp(struct host* h, const struct host* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  CHECK(ibv_modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer->qp->qp_num;
  a.rq_psn = 1000;
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
  a.sq_psn = 1000;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(h->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

/* Poll one successful completion of opcode @p op and wr_id @p wr_id. */
static void wait_one(struct host* h, enum ibv_wc_opcode op, uint64_t wr_id, const char* what) {
  struct ibv_wc wc;
  int got;
  do {
    got = ibv_poll_cq(h->cq, 1, &wc);
  } while (got == 0);
  CHECK(got == 1, "%s: ibv_poll_cq returned %d", what, got);
  CHECK(wc.status == IBV_WC_SUCCESS, "%s: completion status %s", what, ibv_wc_status_str(wc.status));
  CHECK(wc.opcode == op && wc.wr_id == wr_id, "%s: opcode %d wr_id %llu, expected %d and %llu", what,
        wc.opcode, (unsigned long long)wc.wr_id, op, (unsigned long long)wr_id);
}

static void fill(uint8_t* p, uint32_t len, uint8_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed + i * 7);
}

static void post_send_list(struct host* h, struct ibv_send_wr* first) {
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(h->qp, first, &bad) == 0, "ibv_post_send: %s (bad WR %llu)", strerror(errno),
        bad ? (unsigned long long)bad->wr_id : 0ull);
}

/* An unsignaled RDMA WRITE of A's bytes [offset, offset + len) to the same offset of B's buffer. */
static void rdma_write(struct ibv_send_wr* wr, struct ibv_sge* sge, const struct host* a,
                       const struct host* b, uint64_t wr_id, uint32_t offset, uint32_t len) {
  *sge = (struct ibv_sge){.addr = (uintptr_t)a->buf + offset, .length = len, .lkey = a->mr->lkey};
  *wr = (struct ibv_send_wr){.wr_id = wr_id, .sg_list = sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
  wr->wr.rdma.remote_addr = (uintptr_t)b->buf + offset;
  wr->wr.rdma.rkey = b->mr->rkey;
}

/*
 * 1. One list of 22 WRITEs of 100 bytes on A's small send queue, to B's offsets 0, 100, ...
 * Only the last is signaled: its completion means every WRITE before it is done too (an RC
 * send queue completes in order).
 */
static void writes(struct host* a, struct host* b) {
  static struct ibv_send_wr wr[NWRITES];
  static struct ibv_sge sge[NWRITES];
  fill(a->buf, NWRITES * kBig, 1);
  for (int i = 0; i < NWRITES; ++i) rdma_write(&wr[i], &sge[i], a, b, i, i * kBig, kBig);
  /* LAB GAP 2: send all 22 WRs inline (the 100 bytes travel inside the WQE, which then takes
   * 3 basic blocks), signal only the last one (wait_one below waits for its completion), link
   * them into one list and post it with ONE call of post_send_list() (README step 3). Set
   * gap2_done to 1 when done. */
  int gap2_done = 0;
  CHECK(gap2_done, "LAB GAP 2 is not filled in: post the 22 inline WRITEs as one list (README step 3)");
  wait_one(a, IBV_WC_RDMA_WRITE, NWRITES - 1, "WRITEs");
  CHECK(memcmp(a->buf, b->buf, NWRITES * kBig) == 0, "WRITEs: payload differs");
  printf("1. %d inline RDMA WRITEs of %u B, 1 ibv_post_send call: ok\n", NWRITES, kBig);
}

/* Receives @p first.. @p first + n - 1 on A, a 64-byte SEND from B into each; wr_id = number. */
static void send_batch(struct host* a, struct host* b, int first, int n) {
  struct ibv_recv_wr rwr[BATCH], *rbad = NULL;
  struct ibv_send_wr swr[BATCH];
  struct ibv_sge rsge[BATCH], ssge[BATCH];
  for (int i = 0; i < n; ++i) {
    rsge[i] = (struct ibv_sge){
        .addr = (uintptr_t)a->buf + 4096 + i * kRecvBuf, .length = kRecvBuf, .lkey = a->mr->lkey};
    rwr[i] = (struct ibv_recv_wr){.wr_id = first + i, .sg_list = &rsge[i], .num_sge = 1};
    ssge[i] =
        (struct ibv_sge){.addr = (uintptr_t)b->buf + 4096 + i * kMsg, .length = kMsg, .lkey = b->mr->lkey};
    swr[i] =
        (struct ibv_send_wr){.wr_id = first + i, .sg_list = &ssge[i], .num_sge = 1, .opcode = IBV_WR_SEND};
    if (i) {
      rwr[i - 1].next = &rwr[i];
      swr[i - 1].next = &swr[i];
    }
  }
  CHECK(ibv_post_recv(a->qp, &rwr[0], &rbad) == 0, "ibv_post_recv: %s", strerror(errno));
  fill(b->buf + 4096, n * kMsg, (uint8_t)(first / BATCH + 2));
  swr[n - 1].send_flags = IBV_SEND_SIGNALED;
  post_send_list(b, &swr[0]);
  wait_one(b, IBV_WC_SEND, first + n - 1, "SENDs (sender)");
  for (int i = 0; i < n; ++i) {
    wait_one(a, IBV_WC_RECV, first + i, "SENDs (receiver)");
    CHECK(memcmp(a->buf + 4096 + i * kRecvBuf, b->buf + 4096 + i * kMsg, kMsg) == 0,
          "SEND %d: payload differs", first + i);
  }
}

/* 2. @p count receives on A's big receive queue, in batches of at most 32, each filled by B. */
static void sends(struct host* a, struct host* b, int count) {
  for (int first = 0; first < count; first += BATCH)
    send_batch(a, b, first, count - first < BATCH ? count - first : BATCH);
  printf("2. %d SENDs into %d receives on the big receive queue: ok\n", count, count);
}

/* buffer_tables [RECEIVES]: step 2 fills RECEIVES receive WQEs (default 18, at most 16384). */
int main(int argc, char** argv) {
  const int receives = argc > 1 ? atoi(argv[1]) : 18;
  CHECK(receives >= 1 && receives <= 16384, "usage: buffer_tables [RECEIVES (1..16384, default 18)]");
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  struct host a, b;
  open_host(&a, list[0], 1);
  open_host(&b, list[n > 1 ? 1 : 0], 0);
  connect_qp(&a, &b);
  connect_qp(&b, &a);
  printf("A = %s qp 0x%x, B = %s qp 0x%x\n", a.name, a.qp->qp_num, b.name, b.qp->qp_num);
  writes(&a, &b);
  sends(&a, &b, receives);

  struct host* hs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    struct host* h = hs[i];
    CHECK(ibv_destroy_qp(h->qp) == 0 && ibv_dereg_mr(h->mr) == 0 && ibv_destroy_cq(h->cq) == 0 &&
              ibv_dealloc_pd(h->pd) == 0 && ibv_close_device(h->ctx) == 0,
          "teardown: %s", strerror(errno));
    free(h->buf);
  }
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
