/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Golden scenario: Unreliable Datagram. A sends 200 bytes with an immediate to B's UD QP; B's
 * receive buffer gets the 40-byte network header, then the payload; B answers through an
 * address handle made from the completion (ibv_create_ah_from_wc) with 100 bytes.
 */
#include "scenario.h"

int main(void) {
  scn_qp_type = IBV_QPT_UD;
  struct host a, b;
  struct ibv_device** list = setup(&a, &b, IBV_MTU_1024, 0);
  struct ibv_wc wc;
  fill(a.buf, 200, 3);
  post_recv(&b, 201, 0, 40 + 200);
  post_ud_send(&a, a.ah, b.qp->qp_num, 1, 0, 200, 0xabcd);
  wait_one(&a, &wc, IBV_WC_SEND, "UD SEND (sender)");
  wait_one(&b, &wc, IBV_WC_RECV, "UD SEND (receiver)");
  CHECK(wc.wr_id == 201 && wc.byte_len == 240 && (wc.wc_flags & IBV_WC_GRH) && wc.src_qp == a.qp->qp_num,
        "RECV: wr_id %llu byte_len %u wc_flags 0x%x src_qp 0x%x", (unsigned long long)wc.wr_id, wc.byte_len,
        wc.wc_flags, wc.src_qp);
  CHECK(memcmp(a.buf, b.buf + 40, 200) == 0, "UD SEND: payload differs");
  struct ibv_ah* reply = ibv_create_ah_from_wc(b.pd, &wc, (struct ibv_grh*)b.buf, 1);
  CHECK(reply, "ibv_create_ah_from_wc: %s", strerror(errno));
  fill(b.buf + 4096, 100, 5);
  post_recv(&a, 202, 8192, 40 + 100);
  post_ud_send(&b, reply, wc.src_qp, 2, 4096, 100, 0x1234);
  wait_one(&b, &wc, IBV_WC_SEND, "reply (sender)");
  wait_one(&a, &wc, IBV_WC_RECV, "reply (receiver)");
  CHECK(memcmp(b.buf + 4096, a.buf + 8192 + 40, 100) == 0, "reply: payload differs");
  CHECK(ibv_destroy_ah(reply) == 0, "ibv_destroy_ah: %s", strerror(errno));
  teardown(&a, &b, list);
  printf("ud_send: ok\n");
  return 0;
}
