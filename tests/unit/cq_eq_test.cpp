// SPDX-License-Identifier: Apache-2.0
/**
 * @file cq_eq_test.cpp
 * @brief Unit tests of the completion unit and the event queues (model/units/cq_unit.h,
 *        eq_unit.h) under a running SystemC kernel: CQE bytes in the ring, the owner bit, CQ
 *        arming and the event decision, overflow, and the EQ interrupt line.
 *
 * All tests in this executable share one SystemC kernel, so they measure time relative to
 * sim_now_ps() and never assume an absolute time.
 */
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "cq_unit.h"
#include "eq_unit.h"
#include "model_fixture.h"

// libsystemc references sc_main; gtest_main provides main() and never calls it.
extern "C" int sc_main(int, char**) { return 0; }

namespace hcasim::model {
namespace {

using test::DmaRig;
using test::HandTable;
using test::kPage;
using test::run_for_ps;
using test::run_until_idle;
using test::sim_now_ps;

constexpr uint32_t kCqn = 0x15;
constexpr uint32_t kEqn = 3;
constexpr uint32_t kVector = 9;
constexpr uint8_t kRingInit = 0xf1;  // CqeOpcode::Invalid, owner 1: what software initialises

CqeInfo send_cqe(uint16_t wqe) {
  CqeInfo c;
  c.opcode = hw::CqeOpcode::Req;
  c.qpn = 0x42;
  c.wqe_counter = wqe;
  c.req_opcode = hw::WqeOpcode::Send;
  return c;
}
CqeInfo recv_cqe(uint16_t wqe, bool solicited) {
  CqeInfo c;
  c.opcode = hw::CqeOpcode::RespSend;
  c.qpn = 0x42;
  c.wqe_counter = wqe;
  c.byte_cnt = 100;
  c.flags = solicited ? hw::kCqeSolicited : 0;
  return c;
}

class CqEqTest : public ::testing::Test {
 protected:
  const TimingProfile& prof = default_profile();
  DmaRig rig;
  EqUnit eq{rig.dma, rig.bt, prof, rig.tracer};
  CqUnit cq{rig.dma, rig.bt, eq, prof, rig.tracer};
  HandTable cq_ring, eq_ring;
  hw::CqDbrec* dbrec = nullptr;
  std::vector<uint32_t> irqs;

  void SetUp() override {
    run_until_idle();  // nothing left over from another test
    // EQ: 8 entries in one scattered page.
    eq_ring = rig.build(1, 1);
    std::memset(eq_ring.pages[0], 0xff, kPage);
    hw::Eqc e{};
    e.eqn = kEqn;
    e.irq_vector = kVector;
    e.log_size = 3;
    e.buf = eq_ring.desc;
    ASSERT_TRUE(eq.create(e));
    eq.set_irq_handler([this](uint32_t v) { irqs.push_back(v); });
    // CQ: 4 entries, doorbell record in another page.
    cq_ring = rig.build(1, 1);
    std::memset(cq_ring.pages[0], 0xaa, kPage);
    for (uint32_t i = 0; i < 4; ++i) cqe(i).op_own = kRingInit;
    uint64_t dbrec_iova = 0;
    dbrec = reinterpret_cast<hw::CqDbrec*>(rig.mapped_page(dbrec_iova));
    hw::Cqc c{};
    c.cqn = kCqn;
    c.eqn = kEqn;
    c.log_size = 2;
    c.buf = cq_ring.desc;
    c.dbrec_addr = dbrec_iova;
    ASSERT_TRUE(cq.create(c));
  }
  void TearDown() override { run_until_idle(); }

  hw::Cqe& cqe(uint32_t slot) { return reinterpret_cast<hw::Cqe*>(cq_ring.pages[0])[slot]; }
  hw::Eqe& eqe(uint32_t slot) { return reinterpret_cast<hw::Eqe*>(eq_ring.pages[0])[slot]; }
  uint16_t wqe_in(uint32_t slot) { return hw::from_be16(cqe(slot).wqe_counter); }
  void consume(uint32_t ci) { dbrec->set_ci = hw::to_be32(ci & 0xffffff); }
  void post_and_land(const CqeInfo& info) {
    cq.post(kCqn, info);
    run_until_idle();
  }
  /** (type, resource) of the EQEs written so far. */
  std::vector<std::pair<hw::EqeType, uint32_t>> events() {
    std::vector<std::pair<hw::EqeType, uint32_t>> v;
    for (uint32_t i = 0; i < eq.eqes(); ++i)
      v.emplace_back(hw::EqeType(eqe(i % 8).type), hw::from_be32(eqe(i % 8).resource));
    return v;
  }
  using Events = std::vector<std::pair<hw::EqeType, uint32_t>>;
  static Events completions(size_t n) { return Events(n, {hw::EqeType::Completion, kCqn}); }
};

// ------------------------------------------------------------------ CQE bytes

TEST_F(CqEqTest, CqeLandsAfterThePcieWriteLatencyWithEveryField) {
  CqeInfo in;
  in.opcode = hw::CqeOpcode::RespSendImm;
  in.syndrome = hw::CqeSyndrome::Ok;
  in.qpn = 0xff123456;  // upper bits are not part of the QPN
  in.src_qp = 0x654321;
  in.wqe_counter = 0xbeef;
  in.byte_cnt = 0x1000;
  in.imm = hw::to_be32(0xcafef00d);
  in.flags = hw::kCqeWithImm | hw::kCqeSolicited;
  in.req_opcode = hw::WqeOpcode::SendImm;

  const uint64_t t0 = sim_now_ps();
  const uint64_t lat = rig.dma.write_latency_ps(hw::kCqeSize);
  cq.post(kCqn, in);
  run_for_ps(lat - 1);
  EXPECT_EQ(cqe(0).op_own, kRingInit) << "landed before the PCIe write latency";
  EXPECT_EQ(cq.cqes(), 0u);
  run_for_ps(1);
  ASSERT_EQ(cq.cqes(), 1u);

  const uint64_t ts = (t0 + lat) / 1000;
  std::vector<uint8_t> expect(64, 0);
  for (int i = 0; i < 8; ++i) expect[i] = uint8_t(ts >> (56 - 8 * i));
  const uint8_t rest[] = {0x00, 0x00, 0x10, 0x00,  // byte_cnt
                          0xca, 0xfe, 0xf0, 0x0d,  // imm, as given (network order)
                          0x00, 0x12, 0x34, 0x56,  // qpn, 24 bits
                          0x00, 0x65, 0x43, 0x21,  // src_qp
                          0xbe, 0xef,              // wqe_counter
                          0x00, 0x00,              // syndrome, vendor syndrome
                          0x03, 0x0b};             // flags, req_opcode
  std::memcpy(expect.data() + 8, rest, sizeof rest);
  expect[63] = 0x30;  // RESP_SEND_IMM, owner 0 on the first pass
  std::vector<uint8_t> got(cq_ring.pages[0], cq_ring.pages[0] + 64);
  EXPECT_EQ(got, expect);
  // The next slot is untouched.
  EXPECT_EQ(cqe(1).op_own, kRingInit);
  EXPECT_EQ(cq_ring.pages[0][64], 0xaa);
}

TEST_F(CqEqTest, ErrorCqeCarriesSyndrome) {
  CqeInfo in = send_cqe(5);
  in.opcode = hw::CqeOpcode::ReqErr;
  in.syndrome = hw::CqeSyndrome::RemoteAccessErr;
  in.req_opcode = hw::WqeOpcode::RdmaWrite;
  post_and_land(in);
  EXPECT_EQ(cqe(0).op_own, 0xd0);
  EXPECT_EQ(cqe(0).syndrome, 0x13);
  EXPECT_EQ(cqe(0).req_opcode, 0x08);
  EXPECT_EQ(wqe_in(0), 5);
}

/** Wants only failed CQEs, as the error explainer always attached to a run does. */
class FailuresOnlySink : public TraceSink {
 public:
  void record(const TraceEvent& ev) override { statuses.push_back(ev.f.status); }
  bool wants(TraceUnit, TraceKind k) const override { return k == TraceKind::CqeWrite; }
  bool wants_success(TraceUnit, TraceKind) const override { return false; }
  std::vector<uint16_t> statuses;
};

TEST_F(CqEqTest, ASinkForFailuresGetsNoSuccessfulCqe) {
  // Tracing "off" still has the explainer attached: a successful CQE must not be formatted
  // for it (once per CQE of every run), a failed one must still reach it.
  FailuresOnlySink sink;
  rig.tracer.attach(&sink, 0);
  post_and_land(send_cqe(1));
  CqeInfo bad = send_cqe(2);
  bad.opcode = hw::CqeOpcode::ReqErr;
  bad.syndrome = hw::CqeSyndrome::RemoteAccessErr;
  post_and_land(bad);
  rig.tracer.attach(nullptr, 0);
  EXPECT_EQ(sink.statuses, std::vector<uint16_t>{uint16_t(hw::CqeSyndrome::RemoteAccessErr)});
}

TEST_F(CqEqTest, OwnerBitFlipsOnEachWrap) {
  // Ring of 4, 9 CQEs, the consumer keeping up through the doorbell record.
  for (uint32_t i = 0; i < 9; ++i) {
    post_and_land(send_cqe(uint16_t(100 + i)));
    const uint32_t slot = i % 4;
    ASSERT_EQ(wqe_in(slot), 100 + i) << "CQE " << i;
    ASSERT_EQ(cqe(slot).op_own, uint8_t(i / 4 % 2)) << "CQE " << i;  // REQ opcode 0, owner bit
    ASSERT_EQ(cqe(slot).op_own, hw::cqe_owner_for(i, 2)) << "CQE " << i;
    // The next slot still holds the previous pass (or the initial contents).
    const uint32_t next = (i + 1) % 4;
    if (i >= 3)
      ASSERT_EQ(wqe_in(next), 100 + i - 3) << "CQE " << i;
    else
      ASSERT_EQ(cqe(next).op_own, kRingInit) << "CQE " << i;
    consume(i + 1);
  }
  EXPECT_EQ(cq.cqes(), 9u);
  EXPECT_EQ(cq.overflows(), 0u);
  EXPECT_EQ(eq.eqes(), 0u);
}

TEST_F(CqEqTest, BurstLandsInOrder) {
  for (uint16_t i = 0; i < 3; ++i) cq.post(kCqn, send_cqe(uint16_t(10 + i)));
  run_until_idle();
  EXPECT_EQ(wqe_in(0), 10);
  EXPECT_EQ(wqe_in(1), 11);
  EXPECT_EQ(wqe_in(2), 12);
  EXPECT_EQ(cqe(3).op_own, kRingInit);
}

TEST_F(CqEqTest, OverflowWhenTheConsumerIndexDoesNotAdvance) {
  for (uint16_t i = 0; i < 4; ++i) post_and_land(send_cqe(i));
  EXPECT_EQ(cq.overflows(), 0u);
  post_and_land(send_cqe(4));  // the ring is full: dropped
  EXPECT_EQ(cq.overflows(), 1u);
  EXPECT_EQ(cq.cqes(), 4u);
  EXPECT_EQ(wqe_in(0), 0) << "the oldest unconsumed CQE was overwritten";
  EXPECT_EQ(cqe(0).op_own, 0x00);
  EXPECT_EQ(events(), (Events{{hw::EqeType::CqError, kCqn}}));
  EXPECT_EQ(cq.events(), 0u);

  // ibv_poll_cq(3): after an overrun the CQ cannot be used. Consuming makes no room: every
  // later CQE is dropped too, and the error is reported once.
  consume(1);
  post_and_land(send_cqe(5));
  EXPECT_EQ(cq.overflows(), 2u);
  EXPECT_EQ(cq.cqes(), 4u);
  EXPECT_EQ(wqe_in(0), 0) << "slot 0 still holds the first CQE";
  EXPECT_EQ(events(), (Events{{hw::EqeType::CqError, kCqn}}));
}

// ------------------------------------------------------------------ CQ arming

TEST_F(CqEqTest, NotArmedNoEvent) {
  post_and_land(send_cqe(0));
  post_and_land(recv_cqe(0, true));
  EXPECT_EQ(cq.cqes(), 2u);
  EXPECT_EQ(cq.events(), 0u);
  EXPECT_EQ(eq.eqes(), 0u);
  EXPECT_TRUE(irqs.empty());
}

TEST_F(CqEqTest, ArmNextFiresOnceForTheNextCqeOnly) {
  cq.arm(kCqn, 0, 0, false, cq.produced(kCqn));
  run_until_idle();
  EXPECT_EQ(eq.eqes(), 0u) << "arming alone is not an event";
  post_and_land(send_cqe(0));
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
  EXPECT_EQ(eqe(0).owner, 0);
  EXPECT_EQ(irqs, std::vector<uint32_t>{kVector});
  post_and_land(send_cqe(1));  // one-shot: disarmed by the first
  post_and_land(recv_cqe(0, true));
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(eq.eqes(), 1u);
  // Re-arming fires again for the next one.
  cq.arm(kCqn, 3, 1, false, cq.produced(kCqn));
  consume(3);
  post_and_land(send_cqe(2));
  EXPECT_EQ(cq.events(), 2u);
  EXPECT_EQ(events(), completions(2));
}

TEST_F(CqEqTest, ArmedNextFiresForTheFirstOfABurst) {
  cq.arm(kCqn, 0, 0, false, cq.produced(kCqn));
  for (uint16_t i = 0; i < 3; ++i) cq.post(kCqn, send_cqe(i));
  run_until_idle();
  EXPECT_EQ(cq.cqes(), 3u);
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(eq.eqes(), 1u);
}

TEST_F(CqEqTest, SolicitedOnlyIgnoresSendAndUnsolicitedReceive) {
  cq.arm(kCqn, 0, 0, true, cq.produced(kCqn));
  CqeInfo send = send_cqe(0);
  send.flags = hw::kCqeSolicited;  // a requester CQE is never "solicited", whatever its flags
  post_and_land(send);
  EXPECT_EQ(cq.events(), 0u);
  post_and_land(recv_cqe(0, false));
  EXPECT_EQ(cq.events(), 0u);
  CqeInfo wimm = recv_cqe(1, false);
  wimm.opcode = hw::CqeOpcode::RespWriteImm;
  post_and_land(wimm);
  EXPECT_EQ(cq.events(), 0u);
  EXPECT_EQ(eq.eqes(), 0u);
  consume(3);
  post_and_land(recv_cqe(2, true));  // solicited receive: event
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
  post_and_land(recv_cqe(3, true));  // one-shot
  EXPECT_EQ(cq.events(), 1u);
}

TEST_F(CqEqTest, SolicitedOnlyFiresForErrorCqes) {
  cq.arm(kCqn, 0, 0, true, cq.produced(kCqn));
  CqeInfo err = send_cqe(0);
  err.opcode = hw::CqeOpcode::ReqErr;
  err.syndrome = hw::CqeSyndrome::RemoteAccessErr;
  post_and_land(err);
  EXPECT_EQ(cq.events(), 1u);
  cq.arm(kCqn, 1, 1, true, cq.produced(kCqn));
  CqeInfo rerr = recv_cqe(0, false);
  rerr.opcode = hw::CqeOpcode::RespErr;
  rerr.syndrome = hw::CqeSyndrome::WrFlushErr;
  post_and_land(rerr);
  EXPECT_EQ(cq.events(), 2u);
  EXPECT_EQ(events(), completions(2));
}

TEST_F(CqEqTest, NextArmUpgradesPendingSolicitedOnly) {
  cq.arm(kCqn, 0, 0, true, cq.produced(kCqn));
  cq.arm(kCqn, 0, 1, false, cq.produced(kCqn));
  post_and_land(send_cqe(0));
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
}

TEST_F(CqEqTest, SolicitedOnlyArmDoesNotDowngradePendingNext) {
  cq.arm(kCqn, 0, 0, false, cq.produced(kCqn));
  cq.arm(kCqn, 0, 1, true, cq.produced(kCqn));
  post_and_land(send_cqe(0));
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
}

TEST_F(CqEqTest, CqesAlreadyInTheRingDoNotFireOnArm) {
  post_and_land(send_cqe(0));
  post_and_land(send_cqe(1));
  cq.arm(kCqn, 0, 0, false, cq.produced(kCqn));  // consumer has not polled them yet
  run_until_idle();
  EXPECT_EQ(cq.events(), 0u);
  EXPECT_EQ(eq.eqes(), 0u);
  EXPECT_TRUE(irqs.empty());
  post_and_land(send_cqe(2));
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
}

// The arm doorbell asks for completions after the moment it was issued. A CQE that lands while
// the store is still on its way to the device (after the program's last poll) must fire, or a
// program that arms, polls empty and sleeps would never wake.
TEST_F(CqEqTest, CqeLandingWhileTheArmIsInFlightFires) {
  const uint32_t at_issue = cq.produced(kCqn);
  post_and_land(send_cqe(0));  // lands between the arm's issue and its arrival
  cq.arm(kCqn, 0, 0, false, at_issue);
  run_until_idle();
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
  post_and_land(send_cqe(1));  // still one-shot
  EXPECT_EQ(cq.events(), 1u);
}

TEST_F(CqEqTest, SolicitedOnlyArmInFlightFiresOnlyForASolicitedCqe) {
  uint32_t at_issue = cq.produced(kCqn);
  post_and_land(recv_cqe(0, false));  // unsolicited: no reason to wake
  cq.arm(kCqn, 0, 0, true, at_issue);
  run_until_idle();
  EXPECT_EQ(cq.events(), 0u);
  consume(1);
  // Re-issued; a solicited receive lands before this arm arrives: it fires.
  at_issue = cq.produced(kCqn);
  post_and_land(recv_cqe(1, true));
  cq.arm(kCqn, 1, 1, true, at_issue);
  run_until_idle();
  EXPECT_EQ(cq.events(), 1u);
  EXPECT_EQ(events(), completions(1));
}

TEST_F(CqEqTest, UnknownCqIsIgnored) {
  cq.arm(kCqn + 1, 0, 0, false, 0);
  cq.post(kCqn + 1, send_cqe(0));
  run_until_idle();
  EXPECT_EQ(cq.cqes(), 0u);
  EXPECT_EQ(cqe(0).op_own, kRingInit);
  EXPECT_TRUE(cq.exists(kCqn));
  EXPECT_FALSE(cq.exists(kCqn + 1));
  EXPECT_TRUE(cq.destroy(kCqn));
  EXPECT_FALSE(cq.destroy(kCqn));
  cq.post(kCqn, send_cqe(0));  // destroyed while the CQE is in flight
  run_until_idle();
  EXPECT_EQ(cq.cqes(), 0u);
}

// ------------------------------------------------------------------ EQ

TEST_F(CqEqTest, EqeBytes) {
  const uint64_t t0 = sim_now_ps();
  eq.post(kEqn, hw::EqeType::WqCatastrophic, 0xabcdef);
  EXPECT_EQ(eq.eqes(), 1u);  // written at once
  std::vector<uint8_t> expect(64, 0);
  expect[0] = 0x05;
  expect[5] = 0xab;
  expect[6] = 0xcd;
  expect[7] = 0xef;
  for (int i = 0; i < 8; ++i) expect[8 + i] = uint8_t((t0 / 1000) >> (56 - 8 * i));
  expect[63] = 0;  // owner 0 on the first pass
  std::vector<uint8_t> got(eq_ring.pages[0], eq_ring.pages[0] + 64);
  EXPECT_EQ(got, expect);
  EXPECT_EQ(eq_ring.pages[0][64], 0xff);
}

TEST_F(CqEqTest, PortChangeEqeBytes) {
  // mlx5 layout: type 0x09, sub-type DOWN (1) or ACTIVE (4), the port number as resource.
  eq.post_port_change(kEqn, hw::PortChangeSubtype::Down, 1);
  eq.post_port_change(kEqn, hw::PortChangeSubtype::Active, 1);
  EXPECT_EQ(eq.eqes(), 2u);
  for (int i = 0; i < 2; ++i) {
    const uint8_t* e = eq_ring.pages[0] + 64 * i;
    EXPECT_EQ(e[0], 0x09);
    EXPECT_EQ(e[1], i == 0 ? 0x01 : 0x04);
    EXPECT_EQ(e[4] | e[5] | e[6], 0);
    EXPECT_EQ(e[7], 1);
    hw::Eqe d;
    std::memcpy(&d, e, sizeof d);
    EXPECT_EQ(hw::eqe_type(d), hw::EqeType::PortChange);
    EXPECT_EQ(hw::eqe_resource(d), 1u);
    EXPECT_EQ(hw::eqe_port_change(d), i == 0 ? hw::PortChangeSubtype::Down : hw::PortChangeSubtype::Active);
  }
}

TEST_F(CqEqTest, EqeOwnerFlipsOnEachWrap) {
  for (uint32_t i = 0; i < 20; ++i) {
    eq.post(kEqn, hw::EqeType::Completion, i);
    ASSERT_EQ(hw::from_be32(eqe(i % 8).resource), i);
    ASSERT_EQ(eqe(i % 8).owner, (i / 8) & 1) << i;
    eq.arm(kEqn, i + 1);
  }
  EXPECT_EQ(eq.eqes(), 20u);
}

TEST_F(CqEqTest, InterruptFiresAfterTheMsixLatency) {
  eq.post(kEqn, hw::EqeType::Completion, kCqn);
  run_for_ps(prof.irq_ps - 1);
  EXPECT_TRUE(irqs.empty());
  EXPECT_EQ(eq.interrupts(), 0u);
  run_for_ps(1);
  EXPECT_EQ(irqs, std::vector<uint32_t>{kVector});
  EXPECT_EQ(eq.interrupts(), 1u);
}

TEST_F(CqEqTest, InterruptOnceUntilArmedAgain) {
  eq.post(kEqn, hw::EqeType::Completion, kCqn);
  run_until_idle();
  EXPECT_EQ(irqs.size(), 1u);
  eq.post(kEqn, hw::EqeType::Completion, kCqn);  // EQ not re-armed: quiet
  eq.post(kEqn, hw::EqeType::PortChange, 1);
  run_until_idle();
  EXPECT_EQ(irqs.size(), 1u);
  EXPECT_EQ(eq.eqes(), 3u);

  eq.arm(kEqn, 1);  // two EQEs still pending: fires on arm
  run_until_idle();
  EXPECT_EQ(irqs.size(), 2u);
  eq.arm(kEqn, 3);  // everything consumed: armed, quiet
  run_until_idle();
  EXPECT_EQ(irqs.size(), 2u);
  eq.post(kEqn, hw::EqeType::Completion, kCqn);  // armed: fires
  run_until_idle();
  EXPECT_EQ(irqs, (std::vector<uint32_t>{kVector, kVector, kVector}));
  EXPECT_EQ(eq.interrupts(), 3u);
}

TEST_F(CqEqTest, ArmWithNothingPendingIsQuiet) {
  eq.arm(kEqn, 0);
  run_until_idle();
  EXPECT_TRUE(irqs.empty());
  eq.post(kEqn, hw::EqeType::Completion, 1);
  eq.arm(kEqn, 0);  // re-armed before the first interrupt was even delivered
  run_until_idle();
  EXPECT_EQ(irqs.size(), 2u) << "arming with an unconsumed EQE fires again";
}

TEST_F(CqEqTest, UnknownEqIsIgnored) {
  eq.post(kEqn + 1, hw::EqeType::Completion, 1);
  eq.arm(kEqn + 1, 0);
  run_until_idle();
  EXPECT_EQ(eq.eqes(), 0u);
  EXPECT_TRUE(irqs.empty());
  EXPECT_EQ(eq_ring.pages[0][63], 0xff);
  EXPECT_FALSE(eq.create(hw::Eqc{kEqn, 0, 1, {}, {}})) << "duplicate EQN";
  EXPECT_TRUE(eq.destroy(kEqn));
  EXPECT_FALSE(eq.exists(kEqn));
}

// PCIe keeps posted writes in order: a CQE posted right after a payload write of 4 KiB lands
// no sooner than that payload, though alone it would land first.
TEST_F(CqEqTest, CqeLandsNoSoonerThanThePayloadWrittenBeforeIt) {
  uint64_t iova = 0;
  uint8_t* page = rig.mapped_page(iova);
  const std::vector<uint8_t> payload(4096, 0x5a);
  const uint64_t t0 = sim_now_ps();
  ASSERT_TRUE(rig.dma.post_write(iova, payload.data(), payload.size(), 1, "payload"));
  cq.post(kCqn, send_cqe(0));
  run_for_ps(rig.dma.write_latency_ps(hw::kCqeSize));
  EXPECT_EQ(cq.cqes(), 0u) << "the CQE passed the payload written before it";
  EXPECT_EQ(page[4095], 0);
  run_for_ps(t0 + rig.dma.write_latency_ps(4096) - sim_now_ps());
  EXPECT_EQ(page[4095], 0x5a);
  EXPECT_EQ(cq.cqes(), 1u);
}

// A posted write is translated when issued (faults show then) and lands where the IOMMU maps its
// address when it lands: unmapped meanwhile, it is dropped; mapped again elsewhere, it lands there.
TEST_F(CqEqTest, APostedWriteLandsWhereItsAddressIsMappedWhenItLands) {
  uint64_t iova = 0;
  uint8_t* page = rig.mapped_page(iova);
  const std::vector<uint8_t> payload(256, 0x77);
  ASSERT_TRUE(rig.dma.post_write(iova, payload.data(), payload.size(), 1, "payload"));
  ASSERT_TRUE(rig.iommu.unmap(iova));
  uint8_t* moved = rig.mem.alloc(test::kPage);
  ASSERT_TRUE(rig.iommu.map(iova, moved, test::kPage));
  ASSERT_TRUE(rig.dma.post_write(iova + 256, payload.data(), payload.size(), 1, "payload"));
  ASSERT_TRUE(rig.iommu.unmap(iova));  // the second one finds nothing when it lands
  run_for_ps(rig.dma.write_latency_ps(256) * 4);
  EXPECT_EQ(page[0], 0) << "landed through the translation taken when it was issued";
  EXPECT_EQ(moved[0], 0) << "the first write was dropped with its mapping";
  EXPECT_EQ(moved[256], 0) << "the second write was dropped with its mapping";
  // Mapped again before it lands: it lands in the new place.
  ASSERT_TRUE(rig.iommu.map(iova, moved, test::kPage));
  ASSERT_TRUE(rig.dma.post_write(iova + 512, payload.data(), payload.size(), 1, "payload"));
  ASSERT_TRUE(rig.iommu.unmap(iova));
  ASSERT_TRUE(rig.iommu.map(iova, page, test::kPage));
  run_for_ps(rig.dma.write_latency_ps(256) * 4);
  EXPECT_EQ(page[512], 0x77);
  EXPECT_EQ(moved[512], 0);
}

TEST_F(CqEqTest, CompletionEventReachesTheInterruptHandler) {
  cq.arm(kCqn, 0, 0, false, cq.produced(kCqn));
  const uint64_t t0 = sim_now_ps();
  cq.post(kCqn, send_cqe(0));
  run_until_idle();
  ASSERT_EQ(irqs, std::vector<uint32_t>{kVector});
  EXPECT_EQ(eq.interrupts(), 1u);
  // CQE write, then EQE at the same instant, then the MSI-X latency.
  EXPECT_EQ(hw::from_be64(eqe(0).timestamp), (t0 + rig.dma.write_latency_ps(64)) / 1000);
  EXPECT_EQ(sim_now_ps(), t0 + rig.dma.write_latency_ps(64) + prof.irq_ps);
}

}  // namespace
}  // namespace hcasim::model
