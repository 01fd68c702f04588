/* SPDX-License-Identifier: Apache-2.0 */
/* Golden scenario: the solicited-event arm decision. B arms its CQ for solicited completions
 * only (ibv_req_notify_cq(cq, 1)) and sleeps in ibv_get_cq_event. A sends two messages: the
 * first without IBV_SEND_SOLICITED (the trace shows "no event: armed solicited-only and this
 * CQE is an unsolicited receive"), the second with it (SE set on the wire; "EVENT: armed
 * solicited-only, CQE is a solicited receive"), which wakes B. */
#include "scenario.h"

int main(void) {
  struct host a, b;
  struct ibv_device** list = setup(&a, &b, IBV_MTU_1024, 1);
  struct ibv_wc wc;
  fill(a.buf, 512, 4);
  post_recv(&b, 201, 0, 1024);
  post_recv(&b, 202, 1024, 1024);
  CHECK(ibv_req_notify_cq(b.cq, 1) == 0, "ibv_req_notify_cq(solicited_only)");
  post_send(&a, 11, IBV_WR_SEND, IBV_SEND_SIGNALED, 0, 256, 0, 0, 0);
  post_send(&a, 12, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 256, 256, 0, 0, 0);
  struct ibv_cq* ev_cq;
  void* ev_ctx;
  CHECK(ibv_get_cq_event(b.channel, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event: %s", strerror(errno));
  CHECK(ev_cq == b.cq && ev_ctx == &b, "event for the wrong CQ");
  ibv_ack_cq_events(ev_cq, 1);
  wait_one(&b, &wc, IBV_WC_RECV, "first RECV");
  CHECK(wc.wr_id == 201, "first RECV: wr_id %llu", (unsigned long long)wc.wr_id);
  wait_one(&b, &wc, IBV_WC_RECV, "second RECV");
  CHECK(wc.wr_id == 202, "second RECV: wr_id %llu", (unsigned long long)wc.wr_id);
  wait_one(&a, &wc, IBV_WC_SEND, "first SEND");
  wait_one(&a, &wc, IBV_WC_SEND, "second SEND");
  CHECK(memcmp(a.buf, b.buf, 256) == 0 && memcmp(a.buf + 256, b.buf + 1024, 256) == 0, "payload differs");
  teardown(&a, &b, list);
  printf("solicited: ok\n");
  return 0;
}
