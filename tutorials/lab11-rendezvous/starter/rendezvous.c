/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lab 11: rendezvous. Host A (first device) holds named tensors; host B (second device; the same
 * device twice if there is only one) wants them. B always starts the transfer, by asking for a
 * tensor by name, as TensorFlow's receivers do. Two ways to move the bytes are compared, for a
 * small tensor (64 B, connection 1) and a large one (1 MiB, connection 2):
 *   pull: B SENDs a REQUEST (the name); A answers with a META_DATA SEND (size, address and rkey of
 *         the tensor, which A registered with IBV_ACCESS_REMOTE_READ); B RDMA READs the tensor
 *         into its own buffer, then SENDs DONE so that A may reuse or free the tensor's memory;
 *   push: B's REQUEST already carries a buffer of B's (address, rkey, size, registered with
 *         IBV_ACCESS_REMOTE_WRITE); A RDMA WRITEs the tensor straight into it, WITH IMMEDIATE
 *         (the request's number), which completes a receive at B.
 * For each transfer the program prints the messages it took and when each side learned that it
 * was complete. The times come from the simulator's clock under `hcasim run`, from the wall clock
 * elsewhere; no check depends on them. Every byte received is verified. Exit status 0 means
 * every check passed.
 *
 * Lab 11 handout: tutorials/lab11-rendezvous/README.md. This is the STARTER: the places marked
 * "LAB GAP" are yours to fill in (README.md, steps 2 to 4).
 *
 * Nothing here depends on the simulator (its clock is looked up by name, and the wall clock taken
 * when it is not there): build it with `cc rendezvous.c -libverbs` (add -ldl before glibc 2.34)
 * and run it on RoCE hardware, on rxe, or under `hcasim run`.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SMALL 64u
#define LARGE (1024u * 1024u)
#define GUARD 64u /* bytes after each receive buffer that no transfer may touch */
#define SLOTS 4   /* control-message receives kept posted on each QP */
#define MAX_EVENTS 64
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "rendezvous: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                               \
      exit(1);                                             \
    }                                                      \
  } while (0)

/* The control messages, one SEND each, always 64 bytes. */
enum msg_type { MSG_HELLO = 1, MSG_REQUEST, MSG_META_DATA, MSG_DONE, MSG_REQUEST_WITH_BUFFER };
struct msg {
  uint32_t type;
  uint32_t request; /* chosen by B; also the immediate of a push's WRITE */
  uint64_t addr;    /* META_DATA: the tensor at A; REQUEST_WITH_BUFFER: B's buffer */
  uint64_t size;    /* META_DATA: the tensor's size; REQUEST_WITH_BUFFER: room in B's buffer */
  uint32_t rkey;    /* the key that lets the peer's HCA into that memory */
  char name[36];    /* REQUEST, REQUEST_WITH_BUFFER: the tensor's name */
};

/* Work request ids: request number * 10 + what. Receives: 100 + slot. */
enum op { OP_REQUEST = 1, OP_META_DATA, OP_READ, OP_DONE, OP_WRITE_IMM, OP_HELLO };
#define WR_ID(request, op) ((uint64_t)(request)*10 + (op))
#define RECV_ID 100

/* A completion, with the time the program saw it. */
struct event {
  struct ibv_wc wc;
  uint64_t t;
};

struct host {
  const char* name;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq; /* sends and receives of both connections */
  struct ibv_qp* qp[2];
  struct msg* ctrl; /* per connection: SLOTS receive slots, then one send slot per message type */
  struct ibv_mr* ctrl_mr;
  union ibv_gid gid;
  struct event ev[MAX_EVENTS]; /* completions polled but not yet taken */
  int n_ev;
};

/* A tensor at A. The same memory is registered twice: for pull, so that B's HCA may read it; for
 * push, for A's own HCA only (no remote access at all). */
struct tensor {
  const char* name;
  uint32_t size;
  uint8_t* data;
  struct ibv_mr* mr_read;
  struct ibv_mr* mr_local;
};

/* B's two landing areas (LARGE + GUARD bytes each): one its HCA writes into on a READ (local
 * access only), one A's HCA writes into on a push (remote write). */
struct landing {
  uint8_t* buf;
  struct ibv_mr* mr;
};

/* What one transfer cost and when each side knew it was over (ns, the clock of now_ns). */
struct result {
  int sends, reads, writes;
  uint64_t t_request;  /* B posts its request */
  uint64_t t_data;     /* the READ or the WRITE is posted */
  uint64_t t_receiver; /* B knows the tensor is in its buffer */
  uint64_t t_sender;   /* A knows it may reuse the tensor's memory */
  uint64_t t_open;     /* the exposed buffer's address and key leave their owner */
  uint64_t t_closed;   /* its owner learns that the peer is done with it */
};

/* Everything, driven by one thread: A, B, A's tensors, B's two landing areas. */
struct world {
  struct host a, b;
  struct tensor tensors[2];
  struct landing read_into;    /* B's HCA writes the READ responses here: local write only */
  struct landing written_into; /* A's WRITEs land here: remote write */
};

static const int kGidIndex = 1; /* the IPv4-mapped RoCEv2 GID */
static const uint32_t kPsn = 1000;

/* Under `hcasim run` the simulated network's clock (its libibverbs exports hcasim_sim_now_ns);
 * the wall clock would only say how fast the simulation runs. Elsewhere the wall clock. */
typedef uint64_t (*now_fn)(void);
static now_fn sim_now;

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void) { return sim_now ? sim_now() : wall_ns(); }

/* Page-aligned, zeroed memory. aligned_alloc wants a size that is a multiple of the alignment
 * (C11 7.22.3.1; AddressSanitizer checks it): round up. */
static void* alloc_zeroed(size_t size) {
  const size_t rounded = (size + 4095) / 4096 * 4096;
  void* p = aligned_alloc(4096, rounded);
  CHECK(p, "out of memory");
  memset(p, 0, rounded);
  return p;
}

static struct msg* recv_slot(struct host* h, int c, int slot) { return &h->ctrl[c * (SLOTS + 8) + slot]; }
static struct msg* send_slot(struct host* h, int c, enum msg_type t) {
  return &h->ctrl[c * (SLOTS + 8) + SLOTS + t];
}

static void post_recv_slot(struct host* h, int c, int slot) {
  struct ibv_sge sge = {
      .addr = (uintptr_t)recv_slot(h, c, slot), .length = sizeof(struct msg), .lkey = h->ctrl_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = RECV_ID + slot, .sg_list = &sge, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(h->qp[c], &wr, &bad) == 0, "ibv_post_recv: %s", strerror(errno));
}

static void open_host(struct host* h, struct ibv_device* dev, int qp_access) {
  memset(h, 0, sizeof *h);
  h->name = ibv_get_device_name(dev);
  h->ctx = ibv_open_device(dev);
  CHECK(h->ctx, "ibv_open_device(%s): %s", h->name, strerror(errno));
  h->pd = ibv_alloc_pd(h->ctx);
  CHECK(h->pd, "ibv_alloc_pd: %s", strerror(errno));
  h->cq = ibv_create_cq(h->ctx, 64, NULL, NULL, 0);
  CHECK(h->cq, "ibv_create_cq: %s", strerror(errno));
  const size_t ctrl_size = 2 * (SLOTS + 8) * sizeof(struct msg);
  h->ctrl = alloc_zeroed(ctrl_size);
  h->ctrl_mr = ibv_reg_mr(h->pd, h->ctrl, ctrl_size, IBV_ACCESS_LOCAL_WRITE);
  CHECK(h->ctrl_mr, "ibv_reg_mr (control messages): %s", strerror(errno));
  CHECK(ibv_query_gid(h->ctx, 1, kGidIndex, &h->gid) == 0, "ibv_query_gid: %s", strerror(errno));
  for (int c = 0; c < 2; ++c) {
    struct ibv_qp_init_attr ia = {
        .send_cq = h->cq,
        .recv_cq = h->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 8, .max_recv_wr = SLOTS, .max_send_sge = 1, .max_recv_sge = 1}};
    h->qp[c] = ibv_create_qp(h->pd, &ia);
    CHECK(h->qp[c], "ibv_create_qp: %s", strerror(errno));
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = qp_access};
    CHECK(ibv_modify_qp(h->qp[c], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
              0,
          "INIT: %s", strerror(errno));
    for (int s = 0; s < SLOTS; ++s) post_recv_slot(h, c, s);
  }
}

/* INIT -> RTR -> RTS. One READ may be outstanding in each direction (max_rd_atomic,
 * max_dest_rd_atomic): an RDMA READ needs both. */
static void connect_qp(struct ibv_qp* qp, const struct host* peer, uint32_t peer_qpn) {
  struct ibv_qp_attr a = {0};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = kPsn;
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
  a.sq_psn = kPsn;
  a.max_rd_atomic = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS: %s", strerror(errno));
}

/* Polls h's CQ once and keeps what came, stamped with the time it was seen. Returns how many
 * completions failed (they are printed). */
static int poll_host(struct host* h) {
  struct ibv_wc wc[8];
  const int n = ibv_poll_cq(h->cq, 8, wc);
  CHECK(n >= 0, "ibv_poll_cq (%s): %d", h->name, n);
  const uint64_t t = now_ns();
  int failed = 0;
  for (int k = 0; k < n; ++k) {
    if (wc[k].status != IBV_WC_SUCCESS) {
      fprintf(stderr, "rendezvous: %s: wr_id %llu completed with %s\n", h->name,
              (unsigned long long)wc[k].wr_id, ibv_wc_status_str(wc[k].status));
      ++failed;
      continue;
    }
    CHECK(h->n_ev < MAX_EVENTS, "%s: too many completions not taken", h->name);
    h->ev[h->n_ev].wc = wc[k];
    h->ev[h->n_ev++].t = t;
  }
  return failed;
}

/* Like poll_host, but a failed completion ends the program: nothing in this protocol may fail.
 * The other side of the same failure may still be on its way: both hosts are polled for 100 ms
 * more (wall time) so that it is printed too (the error, not only the flushes it causes). */
static void poll_or_fail(struct world* w, struct host* h) {
  if (!poll_host(h)) return;
  const uint64_t until = wall_ns() + 100000000u;
  while (wall_ns() < until) poll_host(&w->a), poll_host(&w->b);
  CHECK(0,
        "a work request failed (wr_id = request * 10 + 1 REQUEST, 2 META_DATA, 3 READ, 4 DONE, "
        "5 WRITE_WITH_IMM, 6 HELLO; 100-103 receives)");
}

/* Waits for the completion on h of work request wr_id on connection c, or of the next receive
 * there (wr_id 0), and takes it, with the time it was first seen. Only h's CQ is polled: an
 * empty poll is where a simulator in lockstep lets time run, up to h's next completion, so the
 * stamp is exact. Completions of the other host are stamped when that host is next waited for:
 * the program waits for each in the order they happen. Gives up after 5 s of wall time. */
static struct event await_wc(struct world* w, struct host* h, int c, uint64_t wr_id, const char* what) {
  const uint64_t deadline = wall_ns() + 5000000000u;
  for (;;) {
    for (int i = 0; i < h->n_ev; ++i) {
      const struct ibv_wc* wc = &h->ev[i].wc;
      const int is_recv = (wc->opcode & IBV_WC_RECV) != 0;
      if (wc->qp_num != h->qp[c]->qp_num || (wr_id ? wc->wr_id != wr_id : !is_recv)) continue;
      struct event e = h->ev[i];
      memmove(&h->ev[i], &h->ev[i + 1], (size_t)(h->n_ev - i - 1) * sizeof e);
      --h->n_ev;
      return e;
    }
    CHECK(wall_ns() < deadline, "%s: %s: no completion within 5 s", h->name, what);
    poll_or_fail(w, h);
  }
}

/* Waits for the next control message on h's connection c, checks its type and request number,
 * and returns a copy (its receive slot is posted again at once). */
static struct msg await_msg(struct world* w, struct host* h, int c, enum msg_type type, uint32_t request,
                            uint64_t* t) {
  struct event e = await_wc(w, h, c, 0, "control message");
  CHECK(e.wc.opcode == IBV_WC_RECV && e.wc.byte_len == sizeof(struct msg),
        "%s: expected a %zu-byte control message, got opcode %d with %u bytes", h->name, sizeof(struct msg),
        e.wc.opcode, e.wc.byte_len);
  const int slot = (int)(e.wc.wr_id - RECV_ID);
  struct msg m = *recv_slot(h, c, slot);
  post_recv_slot(h, c, slot);
  CHECK(m.type == (uint32_t)type && m.request == request,
        "%s: got message type %u for request %u, expected %u/%u", h->name, m.type, m.request, type, request);
  if (t) *t = e.t;
  return m;
}

/* SENDs control message m on h's connection c (signaled; its completion is taken later). */
static void send_msg(struct host* h, int c, const struct msg* m, uint64_t wr_id) {
  struct msg* slot = send_slot(h, c, (enum msg_type)m->type);
  *slot = *m;
  struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = sizeof *m, .lkey = h->ctrl_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  CHECK(ibv_post_send(h->qp[c], &wr, &bad) == 0, "ibv_post_send (SEND): %s", strerror(errno));
}

static void post_rdma(struct host* h, int c, struct ibv_send_wr* wr) {
  struct ibv_send_wr* bad;
  CHECK(ibv_post_send(h->qp[c], wr, &bad) == 0, "ibv_post_send (wr_id %llu): %s",
        (unsigned long long)wr->wr_id, strerror(errno));
}

static uint8_t pattern(const char* name, uint32_t i) { return (uint8_t)(name[0] * 13 + i * 7 + (i >> 8)); }

/* A tensor of A's, filled with its pattern and registered twice: for pull (B's HCA may read
 * it) and for push (A's own HCA only: access flags 0). */
static struct tensor make_tensor(struct host* a, const char* name, uint32_t size) {
  struct tensor t = {.name = name, .size = size, .data = alloc_zeroed(size)};
  for (uint32_t i = 0; i < size; ++i) t.data[i] = pattern(name, i);
  t.mr_read = ibv_reg_mr(a->pd, t.data, size, IBV_ACCESS_REMOTE_READ);
  CHECK(t.mr_read, "ibv_reg_mr (%s, remote read): %s", name, strerror(errno));
  t.mr_local = ibv_reg_mr(a->pd, t.data, size, 0);
  CHECK(t.mr_local, "ibv_reg_mr (%s, local only): %s", name, strerror(errno));
  return t;
}

/* A looks a requested tensor up by name. */
static const struct tensor* find_tensor(const struct world* w, const char* name) {
  for (int i = 0; i < 2; ++i)
    if (strcmp(w->tensors[i].name, name) == 0) return &w->tensors[i];
  CHECK(0, "A has no tensor \"%s\"", name);
  return NULL;
}

static struct landing make_landing(struct host* b, int access) {
  struct landing l = {.buf = alloc_zeroed(LARGE + GUARD)};
  l.mr = ibv_reg_mr(b->pd, l.buf, LARGE + GUARD, access);
  CHECK(l.mr, "ibv_reg_mr (B's landing area): %s", strerror(errno));
  memset(l.buf, 0xEE, LARGE + GUARD);
  return l;
}

/* Every byte of the tensor arrived, and nothing after it was touched; then the landing area is
 * set back to 0xEE for the next transfer. */
static void verify(struct landing* l, const struct tensor* t, const char* how) {
  for (uint32_t i = 0; i < t->size; ++i)
    CHECK(l->buf[i] == pattern(t->name, i), "%s of %s: byte %u is 0x%02x, expected 0x%02x", how, t->name, i,
          l->buf[i], pattern(t->name, i));
  for (uint32_t i = t->size; i < t->size + GUARD; ++i)
    CHECK(l->buf[i] == 0xEE, "%s of %s: byte %u after the tensor was overwritten", how, t->name, i - t->size);
  memset(l->buf, 0xEE, t->size);
}

static struct msg request_for(enum msg_type type, uint32_t request, const char* name) {
  struct msg m = {.type = type, .request = request};
  snprintf(m.name, sizeof m.name, "%s", name);
  return m;
}

/* Pull: B asks for the tensor by name; A answers with its size, address and rkey; B READs it
 * into its own buffer, then tells A it is DONE. */
static struct result pull(struct world* w, int c, const char* name, uint32_t request) {
  struct host *a = &w->a, *b = &w->b;
  struct result r = {.sends = 3, .reads = 1};

  /* B: "send me <name>" */
  const struct msg req = request_for(MSG_REQUEST, request, name);
  r.t_request = now_ns();
  send_msg(b, c, &req, WR_ID(request, OP_REQUEST));

  /* A: look the tensor up and answer with its meta data. From now on B's HCA may read it. */
  const struct msg got = await_msg(w, a, c, MSG_REQUEST, request, NULL);
  const struct tensor* t = find_tensor(w, got.name);
  struct msg meta = {.type = MSG_META_DATA, .request = request};
  /* LAB GAP 1: tell B how to reach the tensor: meta.size (the tensor's size), meta.addr (where
   * its bytes are in A's memory) and meta.rkey, the key that lets B's HCA read them. Of the
   * tensor's two registrations (make_tensor), only one allows a remote READ. Then set gap1_done
   * to 1. */
  int gap1_done = 0;
  CHECK(gap1_done,
        "LAB GAP 1 is not filled in: put the tensor's size, address and rkey into META_DATA "
        "(README step 2)");
  r.t_open = now_ns();
  send_msg(a, c, &meta, WR_ID(request, OP_META_DATA));

  /* B: the meta data says how much to read, from where, with which key. */
  const struct msg md = await_msg(w, b, c, MSG_META_DATA, request, NULL);
  CHECK(md.size <= LARGE, "META_DATA: %llu bytes do not fit B's buffer", (unsigned long long)md.size);
  r.t_data = now_ns();
  struct ibv_sge sge = {0};
  struct ibv_send_wr wr = {
      .wr_id = WR_ID(request, OP_READ), .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED};
  /* LAB GAP 2: make wr an RDMA READ of the tensor. sge is where the bytes go: md.size bytes at
   * w->read_into.buf, local key w->read_into.mr->lkey. wr needs the opcode, and in wr.wr.rdma
   * where to read from: md.addr at A, with md.rkey. Then set gap2_done to 1. */
  int gap2_done = 0;
  CHECK(gap2_done,
        "LAB GAP 2 is not filled in: make B's work request an RDMA READ of the tensor (README step 3)");
  post_rdma(b, c, &wr);
  const struct event e = await_wc(w, b, c, WR_ID(request, OP_READ), "RDMA READ");
  CHECK(e.wc.opcode == IBV_WC_RDMA_READ && e.wc.byte_len == t->size, "READ: opcode %d, %u bytes", e.wc.opcode,
        e.wc.byte_len);
  r.t_receiver = e.t;
  verify(&w->read_into, t, "pull");

  /* B: "done with it". Until this arrives, A must leave the tensor as it is. */
  const struct msg done = {.type = MSG_DONE, .request = request};
  send_msg(b, c, &done, WR_ID(request, OP_DONE));
  await_msg(w, a, c, MSG_DONE, request, &r.t_sender);
  r.t_closed = r.t_sender;

  await_wc(w, b, c, WR_ID(request, OP_REQUEST), "SEND REQUEST");
  await_wc(w, a, c, WR_ID(request, OP_META_DATA), "SEND META_DATA");
  await_wc(w, b, c, WR_ID(request, OP_DONE), "SEND DONE");
  return r;
}

/* Push: B's request names a buffer of its own, of the size B expects; A WRITEs the tensor into
 * it, with the request's number as immediate data, which completes one of B's receives. */
static struct result push(struct world* w, int c, const char* name, uint32_t request, uint32_t expected) {
  struct host *a = &w->a, *b = &w->b;
  struct result r = {.sends = 1, .writes = 1};

  /* B: "send me <name>, here". From now on A's HCA may write into B's buffer. */
  struct msg req = request_for(MSG_REQUEST_WITH_BUFFER, request, name);
  req.addr = (uintptr_t)w->written_into.buf;
  req.size = expected;
  req.rkey = w->written_into.mr->rkey;
  r.t_request = r.t_open = now_ns();
  send_msg(b, c, &req, WR_ID(request, OP_REQUEST));

  /* A: look the tensor up; it must fit. Then write it straight into B's buffer. */
  const struct msg got = await_msg(w, a, c, MSG_REQUEST_WITH_BUFFER, request, NULL);
  const struct tensor* t = find_tensor(w, got.name);
  CHECK(got.size >= t->size, "B's buffer (%llu bytes) is too small for %s (%u bytes)",
        (unsigned long long)got.size, t->name, t->size);
  r.t_data = now_ns();
  struct ibv_sge sge = {0};
  struct ibv_send_wr wr = {
      .wr_id = WR_ID(request, OP_WRITE_IMM), .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED};
  /* LAB GAP 3: make wr an RDMA WRITE WITH IMMEDIATE of the tensor into B's buffer. sge is where
   * the bytes come from: t->size bytes at t->data, local key t->mr_local->lkey (the registration
   * without any remote access). wr needs the opcode, the immediate data (the request number, in
   * network byte order: htonl) and, in wr.wr.rdma, where to write: got.addr with got.rkey. Then
   * set gap3_done to 1. */
  int gap3_done = 0;
  CHECK(gap3_done,
        "LAB GAP 3 is not filled in: make A's work request an RDMA WRITE WITH IMM into B's buffer "
        "(README step 4)");
  post_rdma(a, c, &wr);

  /* B learns from the receive that the immediate completed; A from its WRITE's completion. */
  const struct event eb = await_wc(w, b, c, 0, "the receive for the WRITE's immediate");
  CHECK(eb.wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (eb.wc.wc_flags & IBV_WC_WITH_IMM) &&
            ntohl(eb.wc.imm_data) == request && eb.wc.byte_len == t->size,
        "push: B's completion: opcode %d, immediate %u (expected %u), %u bytes", eb.wc.opcode,
        ntohl(eb.wc.imm_data), request, eb.wc.byte_len);
  post_recv_slot(b, c, (int)(eb.wc.wr_id - RECV_ID)); /* the WRITE used up a receive, not its buffer */
  r.t_receiver = r.t_closed = eb.t;
  verify(&w->written_into, t, "push");
  const struct event ea = await_wc(w, a, c, WR_ID(request, OP_WRITE_IMM), "RDMA WRITE WITH IMM");
  CHECK(ea.wc.opcode == IBV_WC_RDMA_WRITE, "push: A's completion: opcode %d", ea.wc.opcode);
  r.t_sender = ea.t;

  await_wc(w, b, c, WR_ID(request, OP_REQUEST), "SEND REQUEST_WITH_BUFFER");
  return r;
}

/* Before any tensor moves, B and A greet each other once on connection c (request 0). A QP's
 * first message pays for loading its context and its send queue's page table into the HCA's
 * caches (labs 3 and 4); after this, pull and push start equal. */
static void hello(struct world* w, int c) {
  const struct msg m = {.type = MSG_HELLO};
  send_msg(&w->b, c, &m, WR_ID(0, OP_HELLO));
  await_msg(w, &w->a, c, MSG_HELLO, 0, NULL);
  send_msg(&w->a, c, &m, WR_ID(0, OP_HELLO));
  await_msg(w, &w->b, c, MSG_HELLO, 0, NULL);
  await_wc(w, &w->b, c, WR_ID(0, OP_HELLO), "SEND HELLO");
  await_wc(w, &w->a, c, WR_ID(0, OP_HELLO), "SEND HELLO");
}

static double us(uint64_t from, uint64_t to) { return (double)(to - from) / 1e3; }

static void print_row(const char* name, uint32_t size, const char* how, const struct result* r,
                      const char* exposed) {
  printf("%-6s %8u  %-4s  %5d %4d %5d  %10.3f %10.3f %10.3f %10.3f  %s\n", name, size, how, r->sends,
         r->reads, r->writes, us(r->t_request, r->t_receiver), us(r->t_data, r->t_receiver),
         us(r->t_request, r->t_sender), us(r->t_open, r->t_closed), exposed);
}

static void close_host(struct host* h) {
  for (int c = 0; c < 2; ++c) CHECK(ibv_destroy_qp(h->qp[c]) == 0, "ibv_destroy_qp: %s", strerror(errno));
  CHECK(ibv_dereg_mr(h->ctrl_mr) == 0 && ibv_destroy_cq(h->cq) == 0 && ibv_dealloc_pd(h->pd) == 0 &&
            ibv_close_device(h->ctx) == 0,
        "teardown: %s", strerror(errno));
  free(h->ctrl);
}

static void teardown(struct world* w) {
  for (int i = 0; i < 2; ++i) {
    struct tensor* t = &w->tensors[i];
    CHECK(ibv_dereg_mr(t->mr_read) == 0 && ibv_dereg_mr(t->mr_local) == 0, "ibv_dereg_mr: %s",
          strerror(errno));
    free(t->data);
  }
  struct landing* ls[2] = {&w->read_into, &w->written_into};
  for (int i = 0; i < 2; ++i) {
    CHECK(ibv_dereg_mr(ls[i]->mr) == 0, "ibv_dereg_mr: %s", strerror(errno));
    free(ls[i]->buf);
  }
  close_host(&w->a);
  close_host(&w->b);
}

int main(void) {
  sim_now = (now_fn)dlsym(RTLD_DEFAULT, "hcasim_sim_now_ns");
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0, "no RDMA devices found");
  static struct world w;
  open_host(&w.a, list[0], IBV_ACCESS_REMOTE_READ);              /* A's QPs serve B's READs */
  open_host(&w.b, list[n > 1 ? 1 : 0], IBV_ACCESS_REMOTE_WRITE); /* B's QPs take A's WRITEs */
  for (int c = 0; c < 2; ++c) {
    connect_qp(w.a.qp[c], &w.b, w.b.qp[c]->qp_num);
    connect_qp(w.b.qp[c], &w.a, w.a.qp[c]->qp_num);
    printf("connection %d: A = %s qp 0x%x, B = %s qp 0x%x\n", c + 1, w.a.name, w.a.qp[c]->qp_num, w.b.name,
           w.b.qp[c]->qp_num);
    hello(&w, c);
  }
  w.tensors[0] = make_tensor(&w.a, "small", SMALL);
  w.tensors[1] = make_tensor(&w.a, "large", LARGE);
  w.read_into = make_landing(&w.b, IBV_ACCESS_LOCAL_WRITE);
  w.written_into = make_landing(&w.b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

  /* Each tensor is pulled first: B learns its size from the META_DATA, as TensorFlow's receivers
   * fill their meta-data cache. Then it is pushed into a buffer of that size. The small tensor
   * goes on connection 1, the large one on connection 2 (so that connection 1's trace is short). */
  const struct result r1 = pull(&w, 0, "small", 1);
  const struct result r2 = push(&w, 0, "small", 2, SMALL);
  const struct result r3 = pull(&w, 1, "large", 3);
  const struct result r4 = push(&w, 1, "large", 4, LARGE);

  printf("clock: %s; times in us from B's request\n", sim_now ? "simulated time" : "wall clock");
  printf("%-6s %8s  %-4s  %5s %4s %5s  %10s %10s %10s %10s  %s\n", "tensor", "bytes", "how", "SENDs", "READ",
         "WRITE", "B has it", "(data op)", "A is free", "exposed", "exposed buffer");
  print_row("small", SMALL, "pull", &r1, "A's tensor, remote read");
  print_row("small", SMALL, "push", &r2, "B's buffer, remote write");
  print_row("large", LARGE, "pull", &r3, "A's tensor, remote read");
  print_row("large", LARGE, "push", &r4, "B's buffer, remote write");
  printf("every byte of the 4 transfers verified\n");

  teardown(&w);
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
