/* SPDX-License-Identifier: Apache-2.0 */
/* Golden scenario: one SEND of 2500 bytes (3 packets at MTU 1024) into a posted receive. */
#include "scenario.h"

int main(void) {
  struct host a, b;
  struct ibv_device** list = setup(&a, &b, IBV_MTU_1024, 0);
  struct ibv_wc wc;
  fill(a.buf, 2500, 1);
  post_recv(&b, 101, 0, 4096);
  post_send(&a, 1, IBV_WR_SEND, IBV_SEND_SIGNALED, 0, 2500, 0, 0, 0);
  wait_one(&a, &wc, IBV_WC_SEND, "SEND (sender)");
  wait_one(&b, &wc, IBV_WC_RECV, "SEND (receiver)");
  CHECK(wc.wr_id == 101 && wc.byte_len == 2500, "RECV: wr_id %llu byte_len %u", (unsigned long long)wc.wr_id,
        wc.byte_len);
  CHECK(memcmp(a.buf, b.buf, 2500) == 0, "SEND: payload differs");
  teardown(&a, &b, list);
  printf("send_recv: ok\n");
  return 0;
}
