// SPDX-License-Identifier: Apache-2.0
// Random faults on the wire (hcasim run --faults; here HCASIM_FAULTS, set by CMakeLists.txt):
// RC recovers from every lost, duplicated, reordered and corrupted frame with every byte right,
// every completion exactly once and in order, and every atomic executed exactly once; UC loses
// whole messages and never delivers part of one. The simulator's counters show the faults
// happened and the transport worked to hide them.
#include "verbs_fixture.h"

#include <map>

namespace e2e {
namespace {

constexpr unsigned kAtomicAccess = kAllAccess | IBV_ACCESS_REMOTE_ATOMIC;

class Faults : public VerbsFixture {
 protected:
  void TearDown() override {
    for (ibv_qp* q : extra_) {
      if (q) {
        EXPECT_EQ(ibv_destroy_qp(q), 0);
      }
    }
    extra_.clear();
    VerbsFixture::TearDown();
  }

  /** A copy of @p h with a new QP of its own (on h's CQs), connected later by Link(). */
  Host AddQp(const Host& h) {
    Host x = h;
    ibv_qp_init_attr ia{};
    ia.send_cq = h.scq;
    ia.recv_cq = h.rcq;
    ia.qp_type = opts_.qp_type;
    ia.cap.max_send_wr = opts_.max_send_wr;
    ia.cap.max_recv_wr = opts_.max_recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    x.qp = ibv_create_qp(h.pd, &ia);
    EXPECT_NE(x.qp, nullptr) << "ibv_create_qp: " << strerror(errno);
    extra_.push_back(x.qp);
    return x;
  }
  /** Total of counter @p name over both hosts. */
  uint64_t Both(const char* name) { return sim_counter(Dev(a_), name) + sim_counter(Dev(b_), name); }

  std::vector<ibv_qp*> extra_;
};

// The RC workload: kQps QP pairs, kRounds rounds; each round every QP posts a SEND, a WRITE,
// a READ, a FETCH_ADD and a CMP_SWP (sizes 0..3000 B over a 1 KiB MTU: one to three packets),
// each into a buffer slot of its own, then waits for them all.
constexpr int kQps = 4;
constexpr int kRounds = 400;
constexpr int kOps = 5;  // per QP per round
constexpr size_t kSlot = 3072;
constexpr size_t kSlotsPerQp = size_t(kRounds) * 3;  // SEND, WRITE, READ data
constexpr size_t kAtomicArea = 64 * kQps;            // the counters, then the fetched values
constexpr size_t kBuf = kAtomicArea + size_t(kQps) * kSlotsPerQp * kSlot + size_t(kQps) * kRounds * 16;

uint32_t size_of(int q, int r, int op) { return uint32_t((q * 977 + r * 131 + op * 613) % 3001); }
size_t slot(int q, int r, int op) { return kAtomicArea + ((size_t(q) * kRounds + r) * 3 + op) * kSlot; }
uint32_t seed_of(int q, int r, int op) { return uint32_t((q << 20) | (r << 4) | op) + 1; }
uint64_t wr_id(int q, int r, int op) { return (uint64_t(q) << 32) | (uint64_t(r) * kOps + op); }

TEST_F(Faults, RcDeliversEverythingExactlyOnceInOrder) {
  ASSERT_TRUE(sim_present()) << "this test needs the simulator's fault injection";
  Options o;
  o.buf_size = kBuf;
  o.mr_access = kAtomicAccess;
  o.qp_access = kAtomicAccess;
  o.max_send_wr = 16;
  o.max_recv_wr = 4;
  o.cqe = 1024;
  o.separate_cqs = true;
  o.timeout = 8;  // 1 ms: a lost last packet costs one local ACK timeout
  o.connect = false;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  std::vector<Host> as, bs;
  for (int q = 0; q < kQps; ++q) {
    as.push_back(q ? AddQp(a_) : a_);
    bs.push_back(q ? AddQp(b_) : b_);
    ASSERT_NO_FATAL_FAILURE(Link(as[q], bs[q]));
  }
  // Requester data: the SEND and WRITE sources in a's slots; READ sources in b's slots.
  for (int q = 0; q < kQps; ++q)
    for (int r = 0; r < kRounds; ++r) {
      fill_pattern(a_.buf + slot(q, r, 0), size_of(q, r, 0), seed_of(q, r, 0));
      fill_pattern(a_.buf + slot(q, r, 1), size_of(q, r, 1), seed_of(q, r, 1));
      fill_pattern(b_.buf + slot(q, r, 2), size_of(q, r, 2), seed_of(q, r, 2));
    }
  const size_t fetched = kBuf - size_t(kQps) * kRounds * 16;
  std::vector<int> next_send(kQps, 0), next_recv(kQps, 0);
  std::map<uint32_t, int> qp_index;
  for (int q = 0; q < kQps; ++q) qp_index[as[q].qp->qp_num] = q, qp_index[bs[q].qp->qp_num] = q;
  for (int r = 0; r < kRounds; ++r) {
    for (int q = 0; q < kQps; ++q) {
      Host& x = as[q];
      Host& y = bs[q];
      ASSERT_EQ(PostRecv(y, wr_id(q, r, 0), {y.sge(slot(q, r, 0), kSlot)}), 0);
      ASSERT_EQ(PostSend(x, wr_id(q, r, 0), IBV_WR_SEND, {x.sge(slot(q, r, 0), size_of(q, r, 0))}), 0);
      ASSERT_EQ(PostSend(x, wr_id(q, r, 1), IBV_WR_RDMA_WRITE, {x.sge(slot(q, r, 1), size_of(q, r, 1))},
                         IBV_SEND_SIGNALED, 0, y.addr(slot(q, r, 1)), y.mr->rkey),
                0);
      ASSERT_EQ(PostSend(x, wr_id(q, r, 2), IBV_WR_RDMA_READ, {x.sge(slot(q, r, 2), size_of(q, r, 2))},
                         IBV_SEND_SIGNALED, 0, y.addr(slot(q, r, 2)), y.mr->rkey),
                0);
      const size_t f = fetched + (size_t(q) * kRounds + r) * 16;
      ASSERT_EQ(
          PostAtomic(x, wr_id(q, r, 3), IBV_WR_ATOMIC_FETCH_AND_ADD, f, y.addr(64 * q), y.mr->rkey, 1, 0), 0);
      ASSERT_EQ(PostAtomic(x, wr_id(q, r, 4), IBV_WR_ATOMIC_CMP_AND_SWP, f + 8, y.addr(64 * q + 8),
                           y.mr->rkey, uint64_t(r), uint64_t(r + 1)),
                0);
    }
    std::vector<ibv_wc> sent, got;
    ASSERT_TRUE(PollCq(a_.scq, size_t(kQps) * kOps, sent, 30)) << "round " << r;
    ASSERT_TRUE(PollCq(b_.rcq, kQps, got, 30)) << "round " << r;
    for (const ibv_wc& wc : sent) {  // in order per QP, each WR once, every one a success
      const int q = qp_index.at(wc.qp_num);
      const int want = next_send[q]++;
      const ibv_wc_opcode ops[kOps] = {IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD,
                                       IBV_WC_COMP_SWAP};
      ASSERT_TRUE(wc_is(wc, WcExpect{wr_id(q, want / kOps, want % kOps), ops[want % kOps], wc.qp_num}))
          << "QP " << q << " completion " << want;
    }
    for (const ibv_wc& wc : got) {
      const int q = qp_index.at(wc.qp_num);
      const int want = next_recv[q]++;
      ASSERT_TRUE(wc_is(wc, WcExpect{wr_id(q, want, 0), IBV_WC_RECV, wc.qp_num, size_of(q, want, 0)}));
    }
  }
  EXPECT_TRUE(NoCompletion(a_.scq, 200)) << "a completion more than the WRs posted";
  EXPECT_TRUE(NoCompletion(b_.rcq, 200)) << "a receive completion more than the SENDs";
  for (int q = 0; q < kQps; ++q) {
    for (int r = 0; r < kRounds; ++r) {
      const auto s0 = make_pattern(size_of(q, r, 0), seed_of(q, r, 0));
      const auto s1 = make_pattern(size_of(q, r, 1), seed_of(q, r, 1));
      const auto s2 = make_pattern(size_of(q, r, 2), seed_of(q, r, 2));
      ASSERT_TRUE(same_bytes(b_.buf + slot(q, r, 0), s0.data(), s0.size(), "SEND payload")) << q << "/" << r;
      ASSERT_TRUE(same_bytes(b_.buf + slot(q, r, 1), s1.data(), s1.size(), "WRITE data")) << q << "/" << r;
      ASSERT_TRUE(same_bytes(a_.buf + slot(q, r, 2), s2.data(), s2.size(), "READ data")) << q << "/" << r;
      uint64_t fa, cs;
      memcpy(&fa, a_.buf + fetched + (size_t(q) * kRounds + r) * 16, 8);
      memcpy(&cs, a_.buf + fetched + (size_t(q) * kRounds + r) * 16 + 8, 8);
      ASSERT_EQ(fa, uint64_t(r)) << "FETCH_ADD " << r << " of QP " << q << " fetched the wrong value";
      ASSERT_EQ(cs, uint64_t(r)) << "CMP_SWP " << r << " of QP " << q << " fetched the wrong value";
    }
    uint64_t counter, swapped;
    memcpy(&counter, b_.buf + 64 * q, 8);
    memcpy(&swapped, b_.buf + 64 * q + 8, 8);
    EXPECT_EQ(counter, uint64_t(kRounds)) << "FETCH_ADDs on QP " << q << " not executed exactly once each";
    EXPECT_EQ(swapped, uint64_t(kRounds)) << "CMP_SWPs on QP " << q << " not executed exactly once each";
  }
  // The faults happened, and the transport worked to hide them.
  for (const char* c : {"injected_losses", "injected_duplicates", "injected_reorders", "injected_corruptions",
                        "icrc_errors", "retransmits", "duplicates"})
    EXPECT_GT(Both(c), 0u) << c;
  std::printf(
      "%d messages; lost %llu, duplicated %llu, reordered %llu, corrupted %llu frames; "
      "%llu retransmits, %llu duplicate requests, %llu NAKs\n",
      kQps * kRounds * kOps, (unsigned long long)Both("injected_losses"),
      (unsigned long long)Both("injected_duplicates"), (unsigned long long)Both("injected_reorders"),
      (unsigned long long)Both("injected_corruptions"), (unsigned long long)Both("retransmits"),
      (unsigned long long)Both("duplicates"), (unsigned long long)Both("naks"));
}

// UC under the same faults: a message with a lost, corrupted or out-of-order packet is dropped
// whole (IBTA 9.8.3: the responder discards until the next first or only packet). Every
// receive completion carries one complete, correct message; some messages never arrive.
TEST_F(Faults, UcLosesWholeMessagesNeverPartOfOne) {
  ASSERT_TRUE(sim_present()) << "this test needs the simulator's fault injection";
  constexpr int kMsgs = 400;
  constexpr uint32_t kLen = 2500;  // three packets at a 1 KiB MTU
  Options o;
  o.qp_type = IBV_QPT_UC;
  o.buf_size = size_t(kMsgs) * kSlot * 2;
  o.max_send_wr = 64;
  o.max_recv_wr = kMsgs;
  o.cqe = 2 * kMsgs;
  o.separate_cqs = true;
  ASSERT_NO_FATAL_FAILURE(Build(o));
  for (int m = 0; m < kMsgs; ++m) {
    fill_pattern(a_.buf + size_t(m) * kSlot, kLen, uint32_t(m) + 7);
    ASSERT_EQ(PostRecv(b_, uint64_t(m), {b_.sge(size_t(m) * kSlot, kSlot)}), 0);
  }
  std::vector<ibv_wc> sent;
  for (int m = 0; m < kMsgs; ++m) {
    ASSERT_EQ(PostSend(a_, uint64_t(m), IBV_WR_SEND_WITH_IMM, {a_.sge(size_t(m) * kSlot, kLen)},
                       IBV_SEND_SIGNALED, uint32_t(m)),
              0);
    if (m % 32 == 31) {
      ASSERT_TRUE(PollCq(a_.scq, 32, sent));
    }
  }
  ASSERT_TRUE(PollCq(a_.scq, kMsgs % 32, sent));
  for (const ibv_wc& wc : sent) ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << describe(wc);
  // Drain what arrived: the device runs while the program polls.
  std::vector<ibv_wc> got;
  for (int idle = 0; idle < 2000;) {
    ibv_wc wc;
    if (ibv_poll_cq(b_.rcq, 1, &wc) == 1) {
      got.push_back(wc);
      idle = 0;
    } else {
      ++idle;
    }
  }
  int64_t last = -1;
  for (const ibv_wc& wc : got) {
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << describe(wc);
    ASSERT_EQ(wc.byte_len, kLen) << "a partial message: " << describe(wc);
    ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM) << describe(wc);
    const uint32_t m = ntohl(wc.imm_data);
    ASSERT_GT(int64_t(m), last) << "messages out of order or twice: " << describe(wc);
    last = m;
    const auto want = make_pattern(kLen, m + 7);
    ASSERT_TRUE(same_bytes(b_.buf + wc.wr_id * kSlot, want.data(), kLen, "UC message")) << "message " << m;
  }
  EXPECT_LT(got.size(), size_t(kMsgs)) << "no message lost: the faults did not reach UC";
  EXPECT_GT(got.size(), size_t(kMsgs) / 2);
  EXPECT_GT(sim_counter(Dev(a_), "injected_losses"), 0u);
  std::printf("UC: %zu of %d messages delivered whole, the rest dropped whole\n", got.size(), kMsgs);
}

}  // namespace
}  // namespace e2e
