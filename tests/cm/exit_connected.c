// SPDX-License-Identifier: Apache-2.0
/*
 * exit_connected server ADDR PORT [poll] | client ADDR PORT destroy|exit|kill|kill_now
 *
 * A client that ends a connected rdma_cm connection by going away, not by rdma_disconnect(3):
 * "destroy" calls rdma_destroy_qp and rdma_destroy_id and exits at once; "exit" exits without
 * either; "kill" is killed (SIGKILL) 200 ms after ESTABLISHED instead, "kill_now" at once. On Linux the
 * kernel's CM sends the DREQ every way (rdma_destroy_id(3) on a connected id, or the process's rdma_cm file
 * closing at its end, however it ends), so the server, which waits for nothing else, sees
 * RDMA_CM_EVENT_DISCONNECTED. It prints "exit_connected: server saw DISCONNECTED" and exits 0, or says what
 * it saw instead, or after 20 s that it saw nothing, and exits 1. With "poll" the server waits for each event
 * in poll(2) on the channel's descriptor before it takes the event, as event loops do, rather than in
 * rdma_get_cm_event: the kernel's CM makes the descriptor readable whatever the program does. Public
 * librdmacm and ibverbs only: runs on any device (rxe too).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char* what) {
  perror(what);
  exit(1);
}

static const char* g_waiting_for = "";
static int g_poll; /* wait in poll(2) before each rdma_get_cm_event */

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "exit_connected: timed out waiting for ";
  if (write(2, msg, sizeof msg - 1) < 0 || write(2, g_waiting_for, strlen(g_waiting_for)) < 0 ||
      write(2, "\n", 1) < 0) {
  }
  _exit(1);
}

/* The next event on @p ch (a blocking rdma_get_cm_event, as most programs wait, or with g_poll
 * poll(2) first), which must be @p want within @p s seconds; its id in *@p id. */
static void expect(struct rdma_event_channel* ch, enum rdma_cm_event_type want, unsigned s,
                   struct rdma_cm_id** id) {
  g_waiting_for = rdma_event_str(want);
  alarm(s);
  struct pollfd p = {ch->fd, POLLIN, 0};
  while (g_poll && poll(&p, 1, -1) < 0)
    if (errno != EINTR) die("poll");
  struct rdma_cm_event* ev;
  if (rdma_get_cm_event(ch, &ev)) die("rdma_get_cm_event");
  alarm(0);
  if (ev->event != want) {
    fprintf(stderr, "exit_connected: %s (status %d) where %s was expected\n", rdma_event_str(ev->event),
            ev->status, rdma_event_str(want));
    exit(1);
  }
  if (id) *id = ev->id;
  rdma_ack_cm_event(ev);
}

static void make_qp(struct rdma_cm_id* id) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, NULL, &a)) die("rdma_create_qp");
}

static struct rdma_addrinfo* lookup(const char* addr, const char* port, int passive) {
  struct rdma_addrinfo hints, *res;
  memset(&hints, 0, sizeof hints);
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  if (rdma_getaddrinfo(addr, port, &hints, &res)) die("rdma_getaddrinfo");
  return res;
}

static int server(struct rdma_event_channel* ch, const char* addr, const char* port) {
  struct rdma_cm_id *listener, *conn;
  struct rdma_addrinfo* ai = lookup(addr, port, 1);
  if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP)) die("rdma_create_id");
  if (rdma_bind_addr(listener, ai->ai_src_addr)) die("rdma_bind_addr");
  if (rdma_listen(listener, 1)) die("rdma_listen");
  expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 60, &conn);
  make_qp(conn);
  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  if (rdma_accept(conn, &cp)) die("rdma_accept");
  expect(ch, RDMA_CM_EVENT_ESTABLISHED, 20, NULL);
  expect(ch, RDMA_CM_EVENT_DISCONNECTED, 20, NULL);
  printf("exit_connected: server saw DISCONNECTED\n");
  rdma_disconnect(conn);
  rdma_destroy_qp(conn);
  rdma_destroy_id(conn);
  rdma_destroy_id(listener);
  rdma_freeaddrinfo(ai);
  return 0;
}

static int client(struct rdma_event_channel* ch, const char* addr, const char* port, const char* how) {
  struct rdma_cm_id* id;
  struct rdma_addrinfo* ai = lookup(addr, port, 0);
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) die("rdma_create_id");
  if (rdma_resolve_addr(id, NULL, ai->ai_dst_addr, 2000)) die("rdma_resolve_addr");
  expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 20, NULL);
  if (rdma_resolve_route(id, 2000)) die("rdma_resolve_route");
  expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 20, NULL);
  make_qp(id);
  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.retry_count = 7;
  if (rdma_connect(id, &cp)) die("rdma_connect");
  expect(ch, RDMA_CM_EVENT_ESTABLISHED, 20, NULL);
  printf("exit_connected: client connected, leaving (%s)\n", how);
  fflush(stdout);
  /* "kill" waits until the RTU it sent has left. Linux's kernel CM sends the RTU before the
   * program hears ESTABLISHED, and sends it whatever becomes of the process ("kill_now" shows it
   * on rxe); the simulator's CM posts it from the program, and a process killed at once still
   * takes it along (a known difference, docs/connection-management.md). */
  if (!strcmp(how, "kill")) usleep(200000);
  if (!strncmp(how, "kill", 4)) kill(getpid(), SIGKILL);
  if (!strcmp(how, "destroy")) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
      (!strcmp(argv[1], "client") &&
       (argc < 5 || (strcmp(argv[4], "destroy") && strcmp(argv[4], "exit") && strcmp(argv[4], "kill") &&
                     strcmp(argv[4], "kill_now")))) ||
      (!strcmp(argv[1], "server") && argc > 4 && strcmp(argv[4], "poll"))) {
    fprintf(stderr,
            "usage: exit_connected server ADDR PORT [poll] | client ADDR PORT destroy|exit|kill|kill_now\n");
    return 2;
  }
  g_poll = !strcmp(argv[1], "server") && argc > 4;
  signal(SIGALRM, on_alarm);
  struct rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) die("rdma_create_event_channel");
  if (!strcmp(argv[1], "server")) return server(ch, argv[2], argv[3]);
  return client(ch, argv[2], argv[3], argv[4]);
}
