/* SPDX-License-Identifier: Apache-2.0 */
/* Golden scenario: one RDMA READ of 4000 bytes at MTU 1024: one READ request, four response
 * packets (FIRST, MIDDLE, MIDDLE, LAST). */
#include "scenario.h"

int main(void) {
  struct host a, b;
  struct ibv_device** list = setup(&a, &b, IBV_MTU_1024, 0);
  struct ibv_wc wc;
  fill(b.buf + 8192, 4000, 3);
  post_send(&a, 3, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, 0, 4000, (uintptr_t)b.buf + 8192, b.mr->rkey, 0);
  wait_one(&a, &wc, IBV_WC_RDMA_READ, "READ");
  CHECK(wc.byte_len == 4000, "READ byte_len %u", wc.byte_len);
  CHECK(memcmp(a.buf, b.buf + 8192, 4000) == 0, "READ: payload differs");
  teardown(&a, &b, list);
  printf("read_multi_mtu: ok\n");
  return 0;
}
