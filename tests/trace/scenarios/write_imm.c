/* SPDX-License-Identifier: Apache-2.0 */
/* Golden scenario: one RDMA_WRITE_WITH_IMM of 3000 bytes (3 packets at MTU 1024, immediate
 * 0xC0FFEE) consuming a posted receive; both sides poll. */
#include "scenario.h"

int main(void) {
  struct host a, b;
  struct ibv_device** list = setup(&a, &b, IBV_MTU_1024, 0);
  struct ibv_wc wc;
  fill(a.buf + 4096, 3000, 2);
  post_recv(&b, 102, 0, 0);
  post_send(&a, 2, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED, 4096, 3000, (uintptr_t)b.buf + 4096,
            b.mr->rkey, 0xC0FFEE);
  wait_one(&a, &wc, IBV_WC_RDMA_WRITE, "WRITE_WITH_IMM (sender)");
  wait_one(&b, &wc, IBV_WC_RECV_RDMA_WITH_IMM, "WRITE_WITH_IMM (receiver)");
  CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xC0FFEE && wc.byte_len == 3000,
        "imm 0x%x byte_len %u", ntohl(wc.imm_data), wc.byte_len);
  CHECK(memcmp(a.buf + 4096, b.buf + 4096, 3000) == 0, "payload differs");
  teardown(&a, &b, list);
  printf("write_imm: ok\n");
  return 0;
}
