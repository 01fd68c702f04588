// SPDX-License-Identifier: Apache-2.0
// Bad input at the verbs API that no other suite pins: memory registration with access flags
// ibv_reg_mr(3) forbids, address ranges that wrap, QP and CQ sizes beyond the device's limits,
// out-of-range ports, GID indexes and attribute values, unknown opcodes and QP states, too many
// receive SGEs. Each call must fail with the errno the man page (or rdma-core's kernel side)
// gives, change nothing, and leave the objects usable. docs/errors.md lists every row.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "verbs_fixture.h"

namespace e2e {
namespace {

class BadInput : public VerbsFixture {
 protected:
  /** ibv_reg_mr on host A's buffer: nullptr and errno @p want, or a failure naming what came back. */
  ::testing::AssertionResult RegMrFails(void* addr, size_t len, unsigned access, int want) {
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(a_.pd, addr, len, int(access));
    if (mr) {
      ibv_dereg_mr(mr);
      return ::testing::AssertionFailure() << "ibv_reg_mr succeeded";
    }
    if (errno != want)
      return ::testing::AssertionFailure()
             << "errno " << errno << " (" << strerror(errno) << "), want " << want;
    return ::testing::AssertionSuccess();
  }
  /** ibv_create_qp on host A with @p cap: nullptr and EINVAL. */
  ::testing::AssertionResult CreateQpFails(ibv_qp_cap cap) {
    ibv_qp_init_attr ia{};
    ia.send_cq = a_.scq;
    ia.recv_cq = a_.rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = cap;
    errno = 0;
    ibv_qp* qp = ibv_create_qp(a_.pd, &ia);
    if (qp) {
      ibv_destroy_qp(qp);
      return ::testing::AssertionFailure() << "ibv_create_qp succeeded";
    }
    if (errno != EINVAL) return ::testing::AssertionFailure() << "errno " << errno << ", want EINVAL";
    return ::testing::AssertionSuccess();
  }
  static ibv_qp_cap SmallCap() {
    ibv_qp_cap c{};
    c.max_send_wr = c.max_recv_wr = 4;
    c.max_send_sge = c.max_recv_sge = 1;
    return c;
  }
  ibv_device_attr DeviceAttr() {
    ibv_device_attr d{};
    EXPECT_EQ(ibv_query_device(a_.ctx, &d), 0);
    return d;
  }
  /** After a refused call the connection still carries a SEND. */
  void ExpectConnectionWorks(uint64_t wr_id) {
    ASSERT_EQ(PostRecv(b_, wr_id, {b_.sge(0, 64)}), 0);
    ASSERT_EQ(PostSend(a_, wr_id, IBV_WR_SEND, {a_.sge(0, 64)}), 0);
    ibv_wc wc;
    ASSERT_TRUE(PollOne(a_.scq, wc));
    EXPECT_TRUE(wc_is(wc, {wr_id, IBV_WC_SEND, a_.qp->qp_num}));
    ASSERT_TRUE(PollOne(b_.rcq, wc));
    EXPECT_TRUE(wc_is(wc, {wr_id, IBV_WC_RECV, b_.qp->qp_num, 64}));
  }
};

// ---------------------------------------------------------------- memory registration

// A range whose end wraps past the top of the address space: ib_umem_get's overflow check
// (EINVAL). It must not try to build a page table for it.
TEST_F(BadInput, RegMrRangeThatWrapsIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(a_.buf, SIZE_MAX - 100, IBV_ACCESS_LOCAL_WRITE, EINVAL));
  EXPECT_TRUE(RegMrFails(a_.buf, SIZE_MAX, 0, EINVAL));
}

// A range with pages the process has not mapped cannot be pinned (the kernel's pin fails with
// EFAULT): a NULL address with a length, and a region running past the end of a mapping.
TEST_F(BadInput, RegMrOverUnmappedMemoryIsEfault) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(nullptr, 4096, IBV_ACCESS_LOCAL_WRITE, EFAULT)) << "NULL address";
  const size_t page = size_t(getpagesize());
  void* two = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(two, MAP_FAILED);
  ASSERT_EQ(munmap(static_cast<char*>(two) + page, page), 0);  // the second page is gone
  EXPECT_TRUE(RegMrFails(two, 2 * page, IBV_ACCESS_LOCAL_WRITE, EFAULT)) << "past the end of a mapping";
  ibv_mr* first = ibv_reg_mr(a_.pd, two, page, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_NE(first, nullptr) << "the mapped page alone registers: " << strerror(errno);
  if (first) {
    EXPECT_EQ(ibv_dereg_mr(first), 0);
  }
  EXPECT_EQ(munmap(two, page), 0);
}

}  // namespace
}  // namespace e2e
