/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Golden scenario: a shared receive queue behind an RC QP. B posts two receives to its SRQ; A
 * sends two messages; each takes the next SRQ WQE (fetched through the SRQ's buffer table, its
 * producer counter read from the SRQ's doorbell record).
 */
#include "scenario.h"

int main(void) {
  scn_use_srq = 1;
  struct host a, b;
  struct ibv_device** list = setup(&a, &b, IBV_MTU_1024, 0);
  struct ibv_wc wc;
  fill(a.buf, 1500, 9);
  post_recv(&b, 301, 0, 2048);
  post_recv(&b, 302, 2048, 2048);
  post_send(&a, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, 0, 1500, 0, 0, 0);
  post_send(&a, 2, IBV_WR_SEND, IBV_SEND_SIGNALED, 0, 300, 0, 0, 0);
  wait_one(&a, &wc, IBV_WC_SEND, "SEND 1 (sender)");
  wait_one(&a, &wc, IBV_WC_SEND, "SEND 2 (sender)");
  wait_one(&b, &wc, IBV_WC_RECV, "SEND 1 (receiver)");
  CHECK(wc.wr_id == 301 && wc.byte_len == 1500, "RECV 1: wr_id %llu byte_len %u",
        (unsigned long long)wc.wr_id, wc.byte_len);
  wait_one(&b, &wc, IBV_WC_RECV, "SEND 2 (receiver)");
  CHECK(wc.wr_id == 302 && wc.byte_len == 300, "RECV 2: wr_id %llu byte_len %u", (unsigned long long)wc.wr_id,
        wc.byte_len);
  CHECK(memcmp(a.buf, b.buf, 1500) == 0 && memcmp(a.buf, b.buf + 2048, 300) == 0, "SRQ: payload differs");
  teardown(&a, &b, list);
  printf("srq_send: ok\n");
  return 0;
}
