/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Golden scenario: one connection made by librdmacm, the way rping and most tutorials make it,
 * in one thread on one event channel: hcasim1 listens on 192.0.2.2:7471, hcasim0 resolves that
 * address and its route, connects with 5 bytes of private data; the passive side accepts; one
 * SEND crosses the connection; the active side disconnects. The trace shows each CM MAD on the
 * GSI QP, the CM's state changes and the QP transitions librdmacm makes from them.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "scn_check.h"

struct end {
  struct rdma_cm_id* id;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_mr* mr;
  char* buf;
};

/* Fixed buffer addresses, so the trace's addresses do not depend on the program's layout. */
static char* fixed_buffer(int i) {
  void* want = (void*)(uintptr_t)(0x7e0000000000ull + (uint64_t)i * 0x100000);
  void* p =
      mmap(want, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK(p == want, "mmap at %p", want);
  return p;
}

static struct rdma_cm_event* expect(struct rdma_event_channel* ch, enum rdma_cm_event_type type) {
  struct rdma_cm_event* e;
  CHECK(rdma_get_cm_event(ch, &e) == 0, "rdma_get_cm_event: %s", strerror(errno));
  CHECK(e->event == type, "got %s (status %d), expected %s", rdma_event_str(e->event), e->status,
        rdma_event_str(type));
  return e;
}

static void make_qp(struct end* x, int i) {
  struct ibv_qp_init_attr a;
  x->buf = fixed_buffer(i);
  CHECK((x->pd = ibv_alloc_pd(x->id->verbs)) != NULL, "ibv_alloc_pd");
  CHECK((x->cq = ibv_create_cq(x->id->verbs, 8, NULL, NULL, 0)) != NULL, "ibv_create_cq");
  CHECK((x->mr = ibv_reg_mr(x->pd, x->buf, 4096, IBV_ACCESS_LOCAL_WRITE)) != NULL, "ibv_reg_mr");
  memset(&a, 0, sizeof a);
  a.send_cq = a.recv_cq = x->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  CHECK(rdma_create_qp(x->id, x->pd, &a) == 0, "rdma_create_qp: %s", strerror(errno));
}

static void wait_wc(struct end* x, enum ibv_wc_opcode op) {
  struct ibv_wc wc;
  int n;
  while ((n = ibv_poll_cq(x->cq, 1, &wc)) == 0) {
  }
  CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == op, "completion: %s",
        ibv_wc_status_str(wc.status));
}

static void sockaddr_of(struct sockaddr_in* a, const char* ip) {
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_port = htons(7471);
  inet_pton(AF_INET, ip, &a->sin_addr);
}

static void connect_both(struct rdma_event_channel* ch, struct end* c, struct end* s) {
  struct rdma_conn_param p;
  struct rdma_cm_event* e;
  memset(&p, 0, sizeof p);
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = p.rnr_retry_count = 7;
  p.private_data = "hello";
  p.private_data_len = 5;
  CHECK(rdma_connect(c->id, &p) == 0, "rdma_connect: %s", strerror(errno));
  e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(memcmp(e->param.conn.private_data, "hello", 5) == 0, "private data");
  s->id = e->id;
  rdma_ack_cm_event(e);
  make_qp(s, 1);
  memset(&p, 0, sizeof p);
  p.responder_resources = p.initiator_depth = 1;
  p.rnr_retry_count = 7;
  CHECK(rdma_accept(s->id, &p) == 0, "rdma_accept: %s", strerror(errno));
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED)); /* the active side */
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED)); /* the passive side */
}

int main(void) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* listener;
  struct end c, s;
  struct sockaddr_in at;
  struct ibv_sge sge;
  struct ibv_recv_wr rw, *rbad;
  struct ibv_send_wr sw, *sbad;
  memset(&c, 0, sizeof c);
  memset(&s, 0, sizeof s);
  CHECK(ch != NULL, "rdma_create_event_channel: %s", strerror(errno));
  CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
  sockaddr_of(&at, "192.0.2.2");
  CHECK(rdma_bind_addr(listener, (struct sockaddr*)&at) == 0, "rdma_bind_addr: %s", strerror(errno));
  CHECK(rdma_listen(listener, 1) == 0, "rdma_listen: %s", strerror(errno));
  CHECK(rdma_create_id(ch, &c.id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
  CHECK(rdma_resolve_addr(c.id, NULL, (struct sockaddr*)&at, 2000) == 0, "rdma_resolve_addr");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
  CHECK(rdma_resolve_route(c.id, 2000) == 0, "rdma_resolve_route");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
  make_qp(&c, 0);
  connect_both(ch, &c, &s);

  memset(&rw, 0, sizeof rw);
  sge.addr = (uintptr_t)s.buf;
  sge.length = 64;
  sge.lkey = s.mr->lkey;
  rw.sg_list = &sge;
  rw.num_sge = 1;
  CHECK(ibv_post_recv(s.id->qp, &rw, &rbad) == 0, "ibv_post_recv");
  strcpy(c.buf, "over rdma_cm");
  memset(&sw, 0, sizeof sw);
  sge.addr = (uintptr_t)c.buf;
  sge.lkey = c.mr->lkey;
  sw.sg_list = &sge;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  CHECK(ibv_post_send(c.id->qp, &sw, &sbad) == 0, "ibv_post_send");
  wait_wc(&c, IBV_WC_SEND);
  wait_wc(&s, IBV_WC_RECV);
  CHECK(strcmp(s.buf, "over rdma_cm") == 0, "payload");

  CHECK(rdma_disconnect(c.id) == 0, "rdma_disconnect: %s", strerror(errno));
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
  rdma_destroy_qp(c.id);
  rdma_destroy_qp(s.id);
  rdma_destroy_id(c.id);
  rdma_destroy_id(s.id);
  rdma_destroy_id(listener);
  rdma_destroy_event_channel(ch);
  printf("cm_connect: ok\n");
  return 0;
}
