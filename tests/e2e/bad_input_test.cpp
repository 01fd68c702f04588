// SPDX-License-Identifier: Apache-2.0
// Bad input at the verbs API that no other suite pins: memory registration with
// access flags ibv_reg_mr(3) forbids, address ranges that wrap, QP and CQ sizes
// beyond the device's limits, out-of-range ports, GID indexes and attribute
// values, unknown opcodes and QP states, too many receive SGEs. Each call must
// fail with the errno the man page (or rdma-core's kernel side) gives, change
// nothing, and leave the objects usable. docs/errors.md lists every row.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "verbs_fixture.h"

namespace e2e {
namespace {

class BadInput : public VerbsFixture {
 protected:
  /** ibv_reg_mr on host A's buffer: nullptr and errno @p want, or a failure
   * naming what came back. */
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

// ---------------------------------------------------------------- memory
// registration

// ibv_reg_mr(3): "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC is
// set, then IBV_ACCESS_LOCAL_WRITE must be set too." The kernel's
// ib_check_mr_access returns EINVAL.
TEST_F(BadInput, RegMrRemoteWriteWithoutLocalWriteIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(a_.buf, 4096, IBV_ACCESS_REMOTE_WRITE, EINVAL));
  EXPECT_TRUE(RegMrFails(a_.buf, 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, EINVAL));
  ibv_mr* ok = ibv_reg_mr(a_.pd, a_.buf, 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(ok, nullptr) << "with LOCAL_WRITE it is fine: " << strerror(errno);
  EXPECT_EQ(ibv_dereg_mr(ok), 0);
}

TEST_F(BadInput, RegMrRemoteAtomicWithoutLocalWriteIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(a_.buf, 4096, IBV_ACCESS_REMOTE_ATOMIC, EINVAL));
  EXPECT_TRUE(RegMrFails(a_.buf, 4096, IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ, EINVAL));
}

// An access bit no verb defines (bit 15): the kernel refuses flags outside
// IB_ACCESS_SUPPORTED.
TEST_F(BadInput, RegMrUnknownAccessBitIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(a_.buf, 4096, IBV_ACCESS_LOCAL_WRITE | (1u << 15), EINVAL));
}

// A range whose end wraps past the top of the address space: ib_umem_get's
// overflow check (EINVAL). It must not try to build a page table for it.
TEST_F(BadInput, RegMrRangeThatWrapsIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(a_.buf, SIZE_MAX - 100, IBV_ACCESS_LOCAL_WRITE, EINVAL));
  EXPECT_TRUE(RegMrFails(a_.buf, SIZE_MAX, 0, EINVAL));
}

// A range with pages the process has not mapped cannot be pinned (the kernel's
// pin fails with EFAULT): a NULL address with a length, and a region running
// past the end of a mapping.
TEST_F(BadInput, RegMrOverUnmappedMemoryIsEfault) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_TRUE(RegMrFails(nullptr, 4096, IBV_ACCESS_LOCAL_WRITE, EFAULT)) << "NULL address";
  const size_t page = size_t(getpagesize());
  void* two = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(two, MAP_FAILED);
  ASSERT_EQ(munmap(static_cast<char*>(two) + page, page),
            0);  // the second page is gone
  EXPECT_TRUE(RegMrFails(two, 2 * page, IBV_ACCESS_LOCAL_WRITE, EFAULT)) << "past the end of a mapping";
  ibv_mr* first = ibv_reg_mr(a_.pd, two, page, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_NE(first, nullptr) << "the mapped page alone registers: " << strerror(errno);
  if (first) {
    EXPECT_EQ(ibv_dereg_mr(first), 0);
  }
  EXPECT_EQ(munmap(two, page), 0);
}

// Zero bytes at a page boundary span no page, and the kernel's ib_umem_get refuses a region of
// no pages: EINVAL (a NULL address with length 0 too). Elsewhere the zero bytes lie in one
// page, which the kernel pins: accepted, an MR of length 0.
TEST_F(BadInput, RegMrOfZeroLengthAtAPageBoundaryIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(b_.buf) % 4096, 0u);
  EXPECT_TRUE(RegMrFails(b_.buf, 0, IBV_ACCESS_LOCAL_WRITE, EINVAL)) << "page-aligned";
  EXPECT_TRUE(RegMrFails(nullptr, 0, IBV_ACCESS_LOCAL_WRITE, EINVAL)) << "NULL";
  ibv_mr* mr = ibv_reg_mr(b_.pd, b_.buf + 100, 0, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << "inside a page: " << strerror(errno);
  EXPECT_EQ(mr->length, 0u);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ---------------------------------------------------------------- object sizes
// beyond the device

// ibv_create_qp(3): the capabilities may not exceed the device's
// (ibv_query_device(3) max_qp_wr, max_sge); the call fails with EINVAL.
TEST_F(BadInput, CreateQpAboveDeviceLimitsIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const ibv_device_attr d = DeviceAttr();
  ibv_qp_cap c = SmallCap();
  c.max_send_wr = uint32_t(d.max_qp_wr) + 1;
  EXPECT_TRUE(CreateQpFails(c)) << "max_send_wr " << c.max_send_wr;
  c = SmallCap();
  c.max_recv_wr = uint32_t(d.max_qp_wr) + 1;
  EXPECT_TRUE(CreateQpFails(c)) << "max_recv_wr " << c.max_recv_wr;
  c = SmallCap();
  c.max_send_sge = uint32_t(d.max_sge) + 1;
  EXPECT_TRUE(CreateQpFails(c)) << "max_send_sge " << c.max_send_sge;
  c = SmallCap();
  c.max_recv_sge = uint32_t(d.max_sge) + 1;
  EXPECT_TRUE(CreateQpFails(c)) << "max_recv_sge " << c.max_recv_sge;
  c = SmallCap();
  c.max_inline_data = 1u << 20;
  EXPECT_TRUE(CreateQpFails(c)) << "max_inline_data 1 MiB";
}

// ibv_create_cq(3): cqe must be at least 1 and at most the device's max_cqe:
// EINVAL otherwise.
TEST_F(BadInput, CreateCqWithZeroOrTooManyEntriesIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  const ibv_device_attr d = DeviceAttr();
  for (int cqe : {0, -1, d.max_cqe + 1}) {
    errno = 0;
    ibv_cq* cq = ibv_create_cq(a_.ctx, cqe, nullptr, nullptr, 0);
    EXPECT_EQ(cq, nullptr) << "cqe " << cqe;
    if (cq) {
      ibv_destroy_cq(cq);
    } else {
      EXPECT_EQ(errno, EINVAL) << "cqe " << cqe;
    }
  }
}

// ---------------------------------------------------------------- ports, GIDs,
// P_Keys

// The device has one port (phys_port_cnt 1): port 0 and port 2 are EINVAL; GID
// indexes beyond gid_tbl_len and P_Key indexes beyond pkey_tbl_len fail.
TEST_F(BadInput, PortGidAndPkeyOutOfRangeFail) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ibv_port_attr pa{};
  EXPECT_EQ(ibv_query_port(a_.ctx, 0, &pa), EINVAL);
  EXPECT_EQ(ibv_query_port(a_.ctx, 2, &pa), EINVAL);
  ASSERT_EQ(ibv_query_port(a_.ctx, 1, &pa), 0);
  ibv_gid gid;
  EXPECT_NE(ibv_query_gid(a_.ctx, 1, pa.gid_tbl_len, &gid), 0);
  EXPECT_NE(ibv_query_gid(a_.ctx, 2, 0, &gid), 0);
  __be16 pkey;
  EXPECT_NE(ibv_query_pkey(a_.ctx, 1, pa.pkey_tbl_len, &pkey), 0);
}

// ----------------------------------------------------------------
// ibv_modify_qp values

// A qp_state that is no state: EINVAL, the QP stays where it was.
TEST_F(BadInput, ModifyQpToAnUnknownStateIsEinval) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  ibv_qp_attr a{};
  a.qp_state = ibv_qp_state(42);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), EINVAL);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a_.qp, &q, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RESET);
}

// ibv_modify_qp(3): max_rd_atomic may not exceed the device's
// max_qp_init_rd_atom and max_dest_rd_atomic not its max_qp_rd_atom
// (ibv_query_device(3)): EINVAL.
TEST_F(BadInput, RdAtomicDepthsAboveTheDeviceAreEinval) {
  Options o;
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  const ibv_device_attr d = DeviceAttr();
  ASSERT_EQ(ToInit(a_), 0);
  ASSERT_EQ(ToInit(b_), 0);
  ibv_qp_attr rtr = RtrAttr(b_);
  rtr.max_dest_rd_atomic = uint8_t(d.max_qp_rd_atom + 1);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &rtr, kRtrMask), EINVAL) << "max_dest_rd_atomic " << d.max_qp_rd_atom + 1;
  EXPECT_EQ(QpState(a_), IBV_QPS_INIT);
  ASSERT_EQ(ToRtr(a_, b_), 0);
  ibv_qp_attr rts = RtsAttr(a_);
  rts.max_rd_atomic = uint8_t(d.max_qp_init_rd_atom + 1);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &rts, kRtsMask), EINVAL) << "max_rd_atomic " << d.max_qp_init_rd_atom + 1;
  EXPECT_EQ(QpState(a_), IBV_QPS_RTR);
}

// ---------------------------------------------------------------- posting

// ibv_post_recv(3): more SGEs than the QP's max_recv_sge is an invalid WR:
// EINVAL, bad_wr set, nothing posted.
TEST_F(BadInput, PostRecvWithMoreSgesThanMaxRecvSgeIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  std::vector<ibv_sge> too_many(b_.cap.max_recv_sge + 1, b_.sge(0, 8));
  EXPECT_EQ(PostRecv(b_, 1, too_many), EINVAL);
  ASSERT_NO_FATAL_FAILURE(ExpectConnectionWorks(2));
}

// An opcode that is no ibv_wr_opcode: EINVAL, bad_wr set, nothing posted, the
// QP stays in RTS.
TEST_F(BadInput, UnknownSendOpcodeIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  EXPECT_EQ(PostSend(a_, 1, ibv_wr_opcode(0x7f), {a_.sge(0, 8)}), EINVAL);
  EXPECT_TRUE(NoCompletion(a_.scq, 50));
  EXPECT_EQ(QpState(a_), IBV_QPS_RTS);
  ASSERT_NO_FATAL_FAILURE(ExpectConnectionWorks(2));
}

// ibv_alloc_mw(3): the type is IBV_MW_TYPE_1 or IBV_MW_TYPE_2; anything else is
// EINVAL.
TEST_F(BadInput, AllocMwOfAnUnknownTypeIsEinval) {
  ASSERT_NO_FATAL_FAILURE(Build());
  errno = 0;
  ibv_mw* mw = ibv_alloc_mw(a_.pd, ibv_mw_type(7));
  EXPECT_EQ(mw, nullptr);
  if (mw) {
    ibv_dealloc_mw(mw);
  } else {
    EXPECT_EQ(errno, EINVAL);
  }
}

}  // namespace
}  // namespace e2e
