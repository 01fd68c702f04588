// SPDX-License-Identifier: Apache-2.0
// cm_event_log.so: an LD_PRELOAD shim for the differential suite's rdma_cm comparison
// (tests/diff/run-cm-diff, docs/differential.md). It logs every event an unmodified program
// takes with rdma_get_cm_event(3), one line each ("0x55d0c0 CONNECT_REQUEST status=0": the id the
// event is for, then the event and its status), to the file
// named by CM_EVENT_LOG, and touches CM_READY_FILE once the program listens (rdma_listen(3)
// succeeded) or has joined a multicast group (RDMA_CM_EVENT_MULTICAST_JOIN), so its peer can
// start without being rejected first. It calls the next library's functions (rdma-core's
// librdmacm on rxe, the simulator's drop-in on the simulator), so it changes nothing else.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static const char* event_name(enum rdma_cm_event_type t) {
  static const char* const names[] = {
      "ADDR_RESOLVED",   "ADDR_ERROR",       "ROUTE_RESOLVED", "ROUTE_ERROR",
      "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR",  "UNREACHABLE",
      "REJECTED",        "ESTABLISHED",      "DISCONNECTED",   "DEVICE_REMOVAL",
      "MULTICAST_JOIN",  "MULTICAST_ERROR",  "ADDR_CHANGE",    "TIMEWAIT_EXIT"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "UNKNOWN";
}

static void touch_ready(void) {
  const char* path = getenv("CM_READY_FILE");
  if (!path) return;
  const int fd = open(path, O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) close(fd);
}

static void log_line(const char* line) {
  const char* path = getenv("CM_EVENT_LOG");
  if (!path) return;
  pthread_mutex_lock(&log_mu);
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    if (write(fd, line, strlen(line)) < 0) { /* nothing to do: the comparison shows the gap */
    }
    close(fd);
  }
  pthread_mutex_unlock(&log_mu);
}

int rdma_get_cm_event(struct rdma_event_channel* channel, struct rdma_cm_event** event) {
  static int (*next)(struct rdma_event_channel*, struct rdma_cm_event**);
  if (!next) next = (int (*)(struct rdma_event_channel*, struct rdma_cm_event**))dlsym(RTLD_NEXT, __func__);
  const int ret = next(channel, event);
  if (ret == 0 && event && *event) {
    char line[128];
    snprintf(line, sizeof line, "%p %s status=%d\n", (void*)(*event)->id, event_name((*event)->event),
             (*event)->status);
    log_line(line);
    if ((*event)->event == RDMA_CM_EVENT_MULTICAST_JOIN) touch_ready();
  }
  return ret;
}

// The program's own rdma_disconnect(3), logged as "ID disconnect() status=RET": what an id gets
// after it depends on whether the program waits for it before it exits (rping's client does not).
int rdma_disconnect(struct rdma_cm_id* id) {
  static int (*next)(struct rdma_cm_id*);
  if (!next) next = (int (*)(struct rdma_cm_id*))dlsym(RTLD_NEXT, __func__);
  const int ret = next(id);
  char line[96];
  snprintf(line, sizeof line, "%p disconnect() status=%d\n", (void*)id, ret);
  log_line(line);
  return ret;
}

int rdma_listen(struct rdma_cm_id* id, int backlog) {
  static int (*next)(struct rdma_cm_id*, int);
  if (!next) next = (int (*)(struct rdma_cm_id*, int))dlsym(RTLD_NEXT, __func__);
  const int ret = next(id, backlog);
  if (ret == 0) touch_ready();
  return ret;
}
