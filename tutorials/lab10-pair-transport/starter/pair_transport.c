/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 10: a pair transport in the style of Gloo's ibverbs transport. Two ranks, each with one
 * RC QP and one CQ, in one process driven by one thread: rank 0 on the first device, rank 1 on
 * the second (the same device twice if there is only one).
 *   1. Rendezvous: the ranks find each other through a file store, a fresh directory under
 *      /tmp. Each publishes its address (GID, QPN, first PSN) under its own key; set() writes a
 *      temporary file and renames it into place, get() waits until the key's file exists. Each
 *      reads the other's address and connects its QP to it.
 *   2. Buffers: rank 1 registers two receive buffers, slots 3 and 7, and announces each to
 *      rank 0 with a SEND with immediate: the payload says where the buffer is (address, rkey,
 *      size), the immediate names the slot. Every receive WQE of a rank points at a small inbox
 *      that such a descriptor can land in.
 *   3. Data: rank 0 writes 200 bytes into slot 7 and 3000 bytes into slot 3 with RDMA WRITE
 *      WITH IMMEDIATE, the immediate naming the slot. Rank 1 learns of each write from a
 *      receive completion (IBV_WC_RECV_RDMA_WITH_IMM): the WRITE consumed one of its receive
 *      WQEs without using its buffer. Rank 1 re-posts each receive WQE it used.
 *   4. A stream: rank 0 writes COUNT messages of SIZE bytes into slot 3, message i at offset
 *      i * SIZE, back to back. Rank 1 checks each one when its notification arrives: on RC the
 *      notifications arrive in order, and a message's data is in memory when its completion is
 *      seen. Then rank 0 waits for its own send completions (it "drains") before tearing down.
 * Every received byte and every completion is checked. Exit status 0 means every check passed.
 *
 *   pair_transport [COUNT [SIZE]] [--no-drain]    (defaults: 8 messages of 1024 bytes)
 *
 * --no-drain tears down without waiting for rank 0's last send completions, as a transport
 * that only waits for what the receiver saw would: on hardware a race, see the handout.
 *
 * Lab 10 handout: tutorials/lab10-pair-transport/README.md. This is the STARTER: the places marked
 * "LAB GAP" are yours to fill in (README.md, steps 2 to 4).
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECV_DEPTH 8  /* receive WQEs each rank keeps posted (Gloo's kMaxBuffers is 8 too) */
#define SEND_DEPTH 72 /* send WQEs: a stream of at most MAX_COUNT, plus the few before it */
#define MAX_COUNT 64
#define MAX_SIZE (1u << 20)
#define MAX_SLOTS 8
#define ADDR_BYTES 24 /* a rank's address in the store: GID (16), QPN (4), PSN (4) */
#define DESC_BYTES 16 /* a buffer descriptor: address (8), rkey (4), size (4) */
#define STORE_TIMEOUT_MS 10000
#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "pair_transport: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                                   \
      exit(1);                                                 \
    }                                                          \
  } while (0)

/* A buffer this rank registered for a slot. */
struct local_buf {
  uint8_t* mem;
  size_t size;
  struct ibv_mr* mr;
};

/* A buffer the peer announced for a slot: where an RDMA WRITE may put data. */
struct remote_buf {
  int known;
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
};

/* One notification: an RDMA WRITE WITH IMMEDIATE that has landed. */
struct note {
  uint32_t slot;
  uint32_t len;
};

/* One rank: one end of the pair. */
struct rank {
  int id;
  const char* dev_name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq; /* send and receive completions of the QP */
  struct ibv_qp* qp;
  union ibv_gid gid;
  uint32_t psn;                          /* the first PSN this rank sends with */
  uint8_t inbox[RECV_DEPTH][DESC_BYTES]; /* receive WQE i lands a descriptor in inbox[i] */
  struct ibv_mr* inbox_mr;
  uint8_t outbox[MAX_SLOTS][DESC_BYTES]; /* the descriptors this rank sends, by slot */
  struct ibv_mr* outbox_mr;
  struct local_buf local[MAX_SLOTS];   /* buffers this rank registered, by slot */
  struct remote_buf remote[MAX_SLOTS]; /* buffers the peer announced, by slot */
  int send_pending;                    /* signaled sends not yet completed (Gloo: sendPending_) */
  struct note notes[2 * MAX_COUNT];    /* notifications in the order they completed */
  int notes_in, notes_out;
};

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the file store -------------------------------------------------------------------- */

/* set(key, value): the value goes into a temporary file first, which is then renamed to the
 * key's name. rename(2) replaces the name atomically, so a reader either finds no file or the
 * whole value, never a half-written one. */
static void store_set(const char* dir, const char* key, const uint8_t* value, size_t len) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, key);
  snprintf(path, sizeof path, "%s/%s", dir, key);
  /* LAB GAP 1: write the len bytes at value into the temporary file tmp (fopen, fwrite,
   * fclose: check each), then give it its final name path with rename(2). A reader polls for
   * path and must never see it half written. Then set gap1_done to 1. */
  (void)value; /* unused until the gap is filled in */
  (void)len;
  int gap1_done = 0;
  CHECK(gap1_done,
        "LAB GAP 1 is not filled in: store_set must write a temporary file and rename it "
        "into place (README step 2)");
}

/* get(key): waits (at most STORE_TIMEOUT_MS, checking every 10 ms) until the key's file exists,
 * then reads it; the value must be exactly len bytes. */
static void store_get(const char* dir, const char* key, uint8_t* value, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, key);
  const double deadline = now_s() + STORE_TIMEOUT_MS / 1000.0;
  FILE* f;
  while (!(f = fopen(path, "rb"))) {
    CHECK(errno == ENOENT, "store: cannot open %s: %s", path, strerror(errno));
    CHECK(now_s() < deadline, "store: key '%s' not set within %d ms", key, STORE_TIMEOUT_MS);
    const struct timespec ten_ms = {0, 10 * 1000 * 1000};
    nanosleep(&ten_ms, NULL);
  }
  uint8_t extra;
  const size_t got = fread(value, 1, len, f);
  CHECK(got == len && fread(&extra, 1, 1, f) == 0, "store: key '%s' holds %s than %zu bytes", key,
        got < len ? "fewer" : "more", len);
  fclose(f);
}

/* The store's directory, removed at exit if a check failed on the way (best effort). */
static char store_dir[64];
static const char* const store_keys[] = {"rank0.addr", "rank1.addr", ".rank0.addr.tmp", ".rank1.addr.tmp"};

static void store_cleanup(void) {
  if (!store_dir[0]) return;
  char path[512];
  for (size_t i = 0; i < sizeof store_keys / sizeof store_keys[0]; ++i) {
    snprintf(path, sizeof path, "%s/%s", store_dir, store_keys[i]);
    unlink(path);
  }
  rmdir(store_dir);
}

static void store_remove(const char* dir, const char* key) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, key);
  CHECK(unlink(path) == 0, "store: unlink %s: %s", path, strerror(errno));
}

/* ---- encodings: big-endian fields, so both ends agree whatever their CPUs --------------- */

static void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (24 - 8 * i));
}
static uint32_t get32(const uint8_t* p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put64(uint8_t* p, uint64_t v) {
  put32(p, (uint32_t)(v >> 32));
  put32(p + 4, (uint32_t)v);
}
static uint64_t get64(const uint8_t* p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* A rank's address: what its peer needs to connect a QP to it. */
static void encode_addr(const struct rank* r, uint8_t out[ADDR_BYTES]) {
  memcpy(out, r->gid.raw, 16);
  put32(out + 16, r->qp->qp_num);
  put32(out + 20, r->psn);
}

/* ---- the pair -------------------------------------------------------------------------- */

static void post_recv(struct rank* r, int i) {
  struct ibv_sge sge = {.addr = (uintptr_t)r->inbox[i], .length = DESC_BYTES, .lkey = r->inbox_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(r->qp, &wr, &bad) == 0, "rank %d: ibv_post_recv: %s", r->id, strerror(errno));
}

/* Opens the device, creates the CQ and the QP, moves the QP to INIT and posts every receive WQE
 * at once, before anything is connected: whatever the peer sends finds a receive. */
static void open_rank(struct rank* r, int id, struct ibv_device* dev, uint32_t psn) {
  memset(r, 0, sizeof *r);
  r->id = id;
  r->psn = psn;
  r->dev_name = ibv_get_device_name(dev);
  r->ctx = ibv_open_device(dev);
  CHECK(r->ctx, "ibv_open_device(%s): %s", r->dev_name, strerror(errno));
  r->pd = ibv_alloc_pd(r->ctx);
  CHECK(r->pd, "ibv_alloc_pd: %s", strerror(errno));
  r->cq = ibv_create_cq(r->ctx, SEND_DEPTH + RECV_DEPTH, NULL, NULL, 0);
  CHECK(r->cq, "ibv_create_cq: %s", strerror(errno));
  struct ibv_qp_init_attr ia = {
      .send_cq = r->cq,
      .recv_cq = r->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = SEND_DEPTH, .max_recv_wr = RECV_DEPTH, .max_send_sge = 1, .max_recv_sge = 1}};
  r->qp = ibv_create_qp(r->pd, &ia);
  CHECK(r->qp, "ibv_create_qp: %s", strerror(errno));
  CHECK(ibv_query_gid(r->ctx, 1, kGidIndex, &r->gid) == 0, "ibv_query_gid: %s", strerror(errno));
  r->inbox_mr = ibv_reg_mr(r->pd, r->inbox, sizeof r->inbox, IBV_ACCESS_LOCAL_WRITE);
  r->outbox_mr = ibv_reg_mr(r->pd, r->outbox, sizeof r->outbox, 0);
  CHECK(r->inbox_mr && r->outbox_mr, "ibv_reg_mr: %s", strerror(errno));
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT: %s", strerror(errno));
  for (int i = 0; i < RECV_DEPTH; ++i) post_recv(r, i);
}

/* INIT -> RTR -> RTS towards the peer whose address (as published in the store) is addr. */
static void connect_rank(struct rank* r, const uint8_t addr[ADDR_BYTES]) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  memcpy(a.ah_attr.grh.dgid.raw, addr, 16);
  a.dest_qp_num = get32(addr + 16);
  a.rq_psn = get32(addr + 20);
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12; /* 0.64 ms (IBTA table 45); Gloo asks for 20, 10.24 ms */
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(r->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "rank %d: RTR: %s", r->id, strerror(errno));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = r->psn;
  a.max_rd_atomic = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  CHECK(ibv_modify_qp(r->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "rank %d: RTS: %s", r->id, strerror(errno));
}

/* Registers a receive buffer of size bytes for slot and tells the peer where it is: a SEND
 * with immediate whose payload is the descriptor and whose immediate is the slot (Gloo's
 * createRecvBuffer and sendMemoryRegion). */
static void announce_buffer(struct rank* r, uint32_t slot, size_t size) {
  struct local_buf* b = &r->local[slot];
  b->size = size;
  b->mem = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
  CHECK(b->mem, "out of memory");
  memset(b->mem, 0, size);
  b->mr = ibv_reg_mr(r->pd, b->mem, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(b->mr, "ibv_reg_mr: %s", strerror(errno));
  uint8_t* d = r->outbox[slot];
  put64(d, (uintptr_t)b->mem);
  put32(d + 8, b->mr->rkey);
  put32(d + 12, (uint32_t)size);
  struct ibv_sge sge = {.addr = (uintptr_t)d, .length = DESC_BYTES, .lkey = r->outbox_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = slot,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(slot)},
                     *bad;
  CHECK(ibv_post_send(r->qp, &wr, &bad) == 0, "rank %d: ibv_post_send: %s", r->id, strerror(errno));
  r->send_pending++;
}

/* Writes len bytes from src (registered as mr) to offset roffset of the peer's buffer for slot,
 * and tells the peer with the slot as immediate: one RDMA WRITE WITH IMMEDIATE (Gloo's
 * Pair::send). The peer must have announced the slot. */
static void write_with_imm(struct rank* r, struct ibv_mr* mr, const uint8_t* src, uint32_t len, uint32_t slot,
                           uint32_t roffset) {
  const struct remote_buf* peer = &r->remote[slot];
  CHECK(peer->known, "rank %d: slot %u was never announced by the peer", r->id, slot);
  CHECK((uint64_t)roffset + len <= peer->size, "rank %d: %u bytes at offset %u overflow slot %u (%u bytes)",
        r->id, len, roffset, slot, peer->size);
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = len, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  /* LAB GAP 2: make wr an RDMA WRITE WITH IMMEDIATE into the peer's buffer for slot: the
   * opcode, the immediate (the slot, in network byte order: htonl), and where the data goes
   * (wr.wr.rdma.remote_addr and .rkey, from *peer, roffset bytes into the buffer). Then set
   * gap2_done to 1. */
  int gap2_done = 0;
  CHECK(gap2_done, "LAB GAP 2 is not filled in: post the RDMA WRITE WITH IMMEDIATE (README step 3)");
  CHECK(ibv_post_send(r->qp, &wr, &bad) == 0, "rank %d: ibv_post_send: %s", r->id, strerror(errno));
  r->send_pending++;
}

/* A receive completion that carries a buffer descriptor (opcode IBV_WC_RECV, the immediate
 * names the slot, the descriptor is in the inbox of the receive WQE that completed). */
static void on_descriptor(struct rank* r, const struct ibv_wc* wc) {
  CHECK(wc->wc_flags & IBV_WC_WITH_IMM, "rank %d: a descriptor without an immediate", r->id);
  const uint32_t slot = ntohl(wc->imm_data);
  CHECK(slot < MAX_SLOTS && wc->byte_len == DESC_BYTES, "rank %d: descriptor for slot %u of %u bytes", r->id,
        slot, wc->byte_len);
  const uint8_t* d = r->inbox[wc->wr_id];
  r->remote[slot] =
      (struct remote_buf){.known = 1, .addr = get64(d), .rkey = get32(d + 8), .size = get32(d + 12)};
  post_recv(r, (int)wc->wr_id); /* backfill */
}

/* A receive completion of an RDMA WRITE WITH IMMEDIATE: a notification. The immediate names the
 * slot the data went to, byte_len says how much; the receive WQE's inbox was not touched. */
static void on_notification(struct rank* r, const struct ibv_wc* wc) {
  CHECK(wc->wc_flags & IBV_WC_WITH_IMM, "rank %d: RECV_RDMA_WITH_IMM without IBV_WC_WITH_IMM", r->id);
  CHECK(r->notes_in < 2 * MAX_COUNT, "rank %d: too many notifications", r->id);
  /* LAB GAP 3: the slot is the immediate (wc->imm_data, network byte order: ntohl). Check that
   * this rank has a buffer for it (r->local[slot].mem), record the notification in
   * r->notes[r->notes_in++] (the slot, and wc->byte_len bytes), and post a receive WQE again
   * in place of the one the WRITE used up: post_recv(r, (int)wc->wr_id). Then set gap3_done
   * to 1. */
  int gap3_done = 0;
  CHECK(gap3_done,
        "LAB GAP 3 is not filled in: take the slot from the immediate and re-post the "
        "receive (README step 4)");
}

/* Takes one completion off r's CQ (waiting at most 5 s of wall time) and acts on it, as Gloo's
 * Pair::handleCompletion does: status first, then the opcode says what completed. */
static void progress(struct rank* r, const char* waiting_for) {
  struct ibv_wc wc;
  const double deadline = now_s() + 5.0;
  int n;
  while ((n = ibv_poll_cq(r->cq, 1, &wc)) == 0)
    CHECK(now_s() < deadline, "rank %d: no completion within 5 s while waiting for %s", r->id, waiting_for);
  CHECK(n == 1, "rank %d: ibv_poll_cq returned %d", r->id, n);
  CHECK(wc.status == IBV_WC_SUCCESS, "rank %d: completion of wr_id %llu: %s (while waiting for %s)", r->id,
        (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), waiting_for);
  switch (wc.opcode) {
    case IBV_WC_SEND:       /* a descriptor went out */
    case IBV_WC_RDMA_WRITE: /* a WRITE WITH IMMEDIATE was acknowledged */
      CHECK(r->send_pending > 0, "rank %d: a send completion with no send pending", r->id);
      r->send_pending--;
      break;
    case IBV_WC_RECV: on_descriptor(r, &wc); break;
    case IBV_WC_RECV_RDMA_WITH_IMM: on_notification(r, &wc); break;
    default: CHECK(0, "rank %d: unexpected completion opcode %d", r->id, wc.opcode);
  }
}

/* The next notification at r, in the order they arrived. */
static struct note next_notification(struct rank* r) {
  while (r->notes_out == r->notes_in) progress(r, "a notification");
  return r->notes[r->notes_out++];
}

/* Waits until every send r posted has completed (Gloo checks sendPending_ == 0 before a buffer
 * may go away). */
static void drain(struct rank* r) {
  while (r->send_pending > 0) progress(r, "its send completions");
}

static void fill(uint8_t* p, uint32_t len, uint32_t seed) {
  for (uint32_t i = 0; i < len; ++i) p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

/* The next notification at r must be len bytes into slot, and the bytes at offset of the slot's
 * buffer must equal want. */
static void expect_note(struct rank* r, uint32_t slot, uint32_t len, uint32_t offset, const uint8_t* want,
                        const char* what) {
  const struct note n = next_notification(r);
  CHECK(n.slot == slot && n.len == len,
        "%s: notification for slot %u with %u bytes, expected slot %u, %u bytes", what, n.slot, n.len, slot,
        len);
  CHECK(memcmp(r->local[slot].mem + offset, want, len) == 0, "%s: the bytes in slot %u differ", what, slot);
}

static void close_rank(struct rank* r) {
  CHECK(ibv_destroy_qp(r->qp) == 0, "ibv_destroy_qp: %s", strerror(errno));
  for (int s = 0; s < MAX_SLOTS; ++s)
    if (r->local[s].mr) {
      CHECK(ibv_dereg_mr(r->local[s].mr) == 0, "ibv_dereg_mr: %s", strerror(errno));
      free(r->local[s].mem);
    }
  CHECK(ibv_dereg_mr(r->inbox_mr) == 0 && ibv_dereg_mr(r->outbox_mr) == 0 && ibv_destroy_cq(r->cq) == 0 &&
            ibv_dealloc_pd(r->pd) == 0 && ibv_close_device(r->ctx) == 0,
        "teardown: %s", strerror(errno));
}

int main(int argc, char** argv) {
  uint32_t count = 8, size = 1024;
  int drain_at_end = 1, positional = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--no-drain") == 0) {
      drain_at_end = 0;
    } else {
      const long v = strtol(argv[i], NULL, 10);
      CHECK(positional < 2 && v > 0, "usage: pair_transport [COUNT [SIZE]] [--no-drain]");
      if (positional++ == 0)
        count = (uint32_t)v;
      else
        size = (uint32_t)v;
    }
  }
  CHECK(count <= MAX_COUNT && size <= MAX_SIZE, "COUNT is at most %d and SIZE at most %u", MAX_COUNT,
        MAX_SIZE);

  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  static struct rank rank[2];
  open_rank(&rank[0], 0, list[0], 1000);
  open_rank(&rank[1], 1, list[n > 1 ? 1 : 0], 5000);

  /* 1. Rendezvous through the file store. */
  char dir[] = "/tmp/pair_transport.XXXXXX";
  CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  snprintf(store_dir, sizeof store_dir, "%s", dir);
  atexit(store_cleanup);
  const char* const* key = store_keys;
  for (int i = 0; i < 2; ++i) {
    uint8_t addr[ADDR_BYTES];
    encode_addr(&rank[i], addr);
    store_set(dir, key[i], addr, sizeof addr);
  }
  for (int i = 0; i < 2; ++i) {
    uint8_t peer[ADDR_BYTES];
    store_get(dir, key[1 - i], peer, sizeof peer);
    printf("rank %d (%s): QPN 0x%x, first PSN %u; from key '%s': peer QPN 0x%x, peer PSN %u\n", i,
           rank[i].dev_name, rank[i].qp->qp_num, rank[i].psn, key[1 - i], get32(peer + 16), get32(peer + 20));
    connect_rank(&rank[i], peer);
  }
  printf("1. rendezvous through the file store %s: connected\n", dir);

  /* 2. Rank 1 registers slots 3 and 7 and announces them; rank 0 waits until it knows both. */
  const uint32_t stream_bytes = count * size;
  announce_buffer(&rank[1], 3, stream_bytes > 4096 ? stream_bytes : 4096);
  announce_buffer(&rank[1], 7, 1024);
  while (!rank[0].remote[3].known || !rank[0].remote[7].known) progress(&rank[0], "the slot descriptors");
  printf("2. rank 1 announced slot 3 (%u bytes, rkey 0x%x) and slot 7 (%u bytes, rkey 0x%x)\n",
         rank[0].remote[3].size, rank[0].remote[3].rkey, rank[0].remote[7].size, rank[0].remote[7].rkey);

  /* Rank 0's source buffer. */
  const size_t src_size = stream_bytes > 8192 ? stream_bytes : 8192;
  uint8_t* src = aligned_alloc(4096, (src_size + 4095) & ~(size_t)4095);
  CHECK(src, "out of memory");
  struct ibv_mr* src_mr = ibv_reg_mr(rank[0].pd, src, src_size, IBV_ACCESS_LOCAL_WRITE);
  CHECK(src_mr, "ibv_reg_mr: %s", strerror(errno));

  /* 3. Two writes into two slots; the immediate tells rank 1 which. */
  fill(src, 200, 7);
  fill(src + 4096, 3000, 3);
  write_with_imm(&rank[0], src_mr, src, 200, 7, 0);
  write_with_imm(&rank[0], src_mr, src + 4096, 3000, 3, 0);
  expect_note(&rank[1], 7, 200, 0, src, "write into slot 7");
  expect_note(&rank[1], 3, 3000, 0, src + 4096, "write into slot 3");
  drain(&rank[0]); /* the source buffer is about to be refilled */
  printf("3. 200 bytes into slot 7, 3000 bytes into slot 3: rank 1 told by immediates 7 and 3, data ok\n");

  /* 4. The stream: count messages of size bytes into slot 3, message i at offset i * size. */
  for (uint32_t i = 0; i < count; ++i) fill(src + (size_t)i * size, size, 100 + i);
  for (uint32_t i = 0; i < count; ++i)
    write_with_imm(&rank[0], src_mr, src + (size_t)i * size, size, 3, i * size);
  for (uint32_t i = 0; i < count; ++i)
    expect_note(&rank[1], 3, size, i * size, src + (size_t)i * size, "stream into slot 3");
  printf("4. %u messages of %u bytes into slot 3: %u notifications in order, data ok\n", count, size, count);

  if (drain_at_end) {
    drain(&rank[0]);
    drain(&rank[1]);
    printf("   drained: every send of both ranks has completed\n");
  } else {
    printf("   --no-drain: tearing down with %d of rank 0's sends not seen complete\n", rank[0].send_pending);
  }
  CHECK(ibv_dereg_mr(src_mr) == 0, "ibv_dereg_mr: %s", strerror(errno));
  free(src);
  for (int i = 0; i < 2; ++i) close_rank(&rank[i]);
  ibv_free_device_list(list);
  for (int i = 0; i < 2; ++i) store_remove(dir, key[i]);
  CHECK(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
  store_dir[0] = 0;
  printf("all checks passed\n");
  return 0;
}
