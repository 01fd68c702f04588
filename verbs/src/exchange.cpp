// SPDX-License-Identifier: Apache-2.0
// The few-round collectives for small and medium messages (collective_parts.h): recursive
// doubling, direct exchange and recursive halving+doubling allreduce, one-to-all broadcast,
// direct allgather, all-to-all barrier.
//
// What they have in common, and why it is safe:
//
//  * Writes land in *landing regions* of the receiver's scratch memory, two per peer (and
//    round), chosen by the parity of the run: run n into region n mod 2. A peer writes run n
//    into it only after it has received this rank's own write of run n-1 for the same round
//    (the exchange is symmetric), and this rank made that write only after it had finished run
//    n-2, i.e. consumed what region n mod 2 held. So the data flow is the permission: the
//    regions are granted ahead (StandingGrant) and no run waits for a grant message.
//  * A write straight into a peer's own buffer (the fold's result, halving-doubling's
//    allgather) is made only after receiving that peer's write of the same run: the peer is
//    inside this run and waits for it, so the buffer is not the caller's at that moment.
//  * What this rank sends is staged in its scratch (a copy of the caller's data) unless the
//    run waits for its sends before returning: run() returns while the last writes may be in
//    flight, and the caller may then change its buffer. A staged source is overwritten only
//    after the send that read it has completed (SendBuffer::waitOutstanding), which by then
//    it almost always has: the check is a poll, not a wait.
//  * Writes up to the QP's inline size go inline (Pair), so a small write is one WQE.
//
// Reductions are commutative (sum, prod, min, max), so both ends of an exchange compute the
// same value and every rank ends with the same bits.
#include <cstring>
#include <stdexcept>

#include "collective_parts.h"

namespace hcasim::verbs::detail {

StandingGrant::StandingGrant(std::unique_ptr<RecvBuffer> b, uint32_t batch)
    : b_(std::move(b)), batch_(std::max<uint32_t>(1, batch)) {
  b_->grant(2 * batch_);
  granted_ = 2 * uint64_t(batch_);
}

uint32_t StandingGrant::take() {
  const uint32_t n = b_->waitRecv();
  if (++taken_ + batch_ > granted_) {
    b_->grant(batch_);
    granted_ += batch_;
  }
  return n;
}

namespace {

/** @brief Largest power of two <= p. */
int floorPow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

int log2Exact(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

/**
 * The fold of a rank count that is not a power of two: ranks p2 .. P-1 (the extras) give their
 * vector to rank r - p2 (their base) before the power-of-two algorithm and get the result
 * back after it. Returns the partner in the fold, or -1.
 */
struct Fold {
  int p2 = 1;          ///< largest power of two <= P
  bool extra = false;  ///< this rank is beyond p2
  int partner = -1;    ///< extra: its base; base: its extra (-1: none)
  Fold(int p, int r) : p2(floorPow2(p)), extra(r >= p2) {
    if (extra)
      partner = r - p2;
    else if (r + p2 < p)
      partner = r + p2;
  }
};

// ---- recursive doubling ------------------------------------------------------------------

/**
 * log2 p2 rounds; in round k rank r and r ^ 2^k exchange their whole current vector and both
 * reduce. Scratch: work areas [0..L] (work[0] the staged input, work[k+1] the result of round
 * k), two sets by run parity, so a run reuses the set whose sends were two runs ago (done long
 * since; checked, not waited for); the landing regions of each round, two by parity; a base's
 * fold landing region (one: its extra writes run n+1 only after receiving run n's result,
 * which the base sent after consuming run n's vector). The last round writes into the caller's buffer, unless
 * the result still goes to an extra: then into work[L], from where it is sent.
 */
class RecursiveDoubling : public Algorithm {
 public:
  RecursiveDoubling(Context& ctx, uint32_t tag, void* data, const ExchangeParams& p)
      : user_(static_cast<uint8_t*>(data)),
        count_(p.count),
        type_(p.type),
        op_(p.op),
        bytes_(p.count * dataTypeSize(p.type)),
        stride_(roundUp64(bytes_)),
        fold_(ctx.size(), ctx.rank()) {
    const int r = ctx.rank();
    rounds_ = log2Exact(fold_.p2);
    const size_t work = 2 * size_t(rounds_ + 1), landing = fold_.extra ? 0 : size_t(2 * rounds_);
    scratch_.assign(stride_ * (work + landing + 1), 0);
    mr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), scratch_.data(), scratch_.size());
    if (fold_.extra) {
      // The result arrives in the caller's buffer (this rank is inside the run by then).
      auto userMr = std::make_shared<MemoryRegion>(ctx.devicePtr(), data, bytes_);
      Pair& base = ctx.pair(fold_.partner);
      foldSend_ = base.createSendBuffer(slotOf(tag, kSlotFold), mr_, 0, scratch_.size());
      foldRecv_ = std::make_unique<StandingGrant>(
          base.createRecvBuffer(slotOf(tag, kSlotFold), userMr, 0, bytes_, 0), p.grantBatch);
      return;
    }
    for (int k = 0; k < rounds_; ++k) {
      Pair& q = ctx.pair(r ^ (1 << k));
      Round rd;
      rd.send = q.createSendBuffer(slotOf(tag, kSlotScratch), mr_, 0, scratch_.size());
      rd.recv = std::make_unique<StandingGrant>(
          q.createRecvBuffer(slotOf(tag, kSlotScratch), mr_, landingOff(k, 0), 2 * stride_, 0), p.grantBatch);
      steps_.push_back(std::move(rd));
    }
    if (fold_.partner >= 0) {
      Pair& e = ctx.pair(fold_.partner);
      foldSend_ = e.createSendBuffer(slotOf(tag, kSlotFold), mr_, 0, scratch_.size());
      foldRecv_ = std::make_unique<StandingGrant>(
          e.createRecvBuffer(slotOf(tag, kSlotFold), mr_, foldOff(), stride_, 0), p.grantBatch);
    }
  }

  void run() override {
    par_ = int(runs_++ % 2);
    // Before a work area is written, the send that read it two runs ago must be done: one send
    // per buffer and run, completed in order, so at most the last run's may still be out.
    if (fold_.extra) {
      foldSend_->waitOutstanding(1);
      std::memcpy(work(0), user_, bytes_);
      foldSend_->send(workOff(0), bytes_, 0);
      foldRecv_->take();  // the base wrote the result into the caller's buffer
      return;
    }
    if (!steps_.empty()) steps_[0].send->waitOutstanding(1);
    if (fold_.partner >= 0) {
      foldRecv_->take();
      reduceTo(work(0), user_, at(foldOff()), count_, type_, op_);  // base op extra: rank order
    } else {
      std::memcpy(work(0), user_, bytes_);
    }
    for (int k = 0; k < rounds_; ++k) {
      steps_[size_t(k)].send->send(workOff(k), bytes_, size_t(par_) * stride_);
      steps_[size_t(k)].recv->take();
      uint8_t* dst = user_;
      if (k + 1 < rounds_ || fold_.partner >= 0) {
        // work[k+1] is the source of round k+1 (or of the fold's result).
        (k + 1 < rounds_ ? steps_[size_t(k + 1)].send : foldSend_)->waitOutstanding(1);
        dst = work(k + 1);
      }
      reduceTo(dst, work(k), at(landingOff(k, par_)), count_, type_, op_);
    }
    if (fold_.partner >= 0) {
      foldSend_->send(workOff(rounds_), bytes_, 0);  // into the extra's own buffer
      std::memcpy(user_, work(rounds_), bytes_);
    }
  }

 private:
  struct Round {
    std::unique_ptr<SendBuffer> send;
    std::unique_ptr<StandingGrant> recv;
  };
  /** @brief Work area k of this run's parity. */
  size_t workOff(int k) const { return stride_ * (size_t(par_) * size_t(rounds_ + 1) + size_t(k)); }
  size_t landingOff(int k, int par) const {
    return stride_ * (2 * size_t(rounds_ + 1) + 2 * size_t(k) + size_t(par));
  }
  size_t foldOff() const { return stride_ * (2 * size_t(rounds_ + 1) + 2 * size_t(rounds_)); }
  uint8_t* at(size_t off) { return scratch_.data() + off; }
  uint8_t* work(int k) { return at(workOff(k)); }

  uint8_t* user_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  size_t bytes_, stride_;
  Fold fold_;
  int rounds_ = 0;
  std::vector<uint8_t> scratch_;
  std::shared_ptr<MemoryRegion> mr_;
  std::vector<Round> steps_;
  std::unique_ptr<SendBuffer> foldSend_;
  std::unique_ptr<StandingGrant> foldRecv_;
  uint64_t runs_ = 0;
  int par_ = 0;  ///< this run's parity
};

// ---- direct exchange ---------------------------------------------------------------------

/**
 * Shared by the direct allreduce and allgather and the reduce-scatter + allgather allreduce:
 * every rank writes a staged block to every peer's landing region for it, by parity, then
 * waits for every peer's. Peer q of rank r is written in the order r+1, r+2, ... so that not
 * every rank starts with rank 0. The staging area holds @p stageBytes per run, each landing
 * region @p landBytes (the same block for every peer, or a different slice of the staging
 * area for each: postTo()).
 */
class DirectExchange {
 public:
  DirectExchange(Context& ctx, uint32_t tag, size_t bytes, uint32_t grantBatch)
      : DirectExchange(ctx, tag, bytes, bytes, grantBatch, kSlotScratch) {}
  DirectExchange(Context& ctx, uint32_t tag, size_t stageBytes, size_t landBytes, uint32_t grantBatch,
                 uint32_t slot)
      : p_(ctx.size()),
        r_(ctx.rank()),
        bytes_(landBytes),
        stageStride_(roundUp64(stageBytes)),
        stride_(roundUp64(landBytes)) {
    scratch_.assign(2 * stageStride_ + 2 * stride_ * size_t(p_),
                    0);  // staging by parity, two regions per rank
    mr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), scratch_.data(), scratch_.size());
    peers_.resize(size_t(p_));
    for (int q = 0; q < p_; ++q) {
      if (q == r_) continue;
      Pair& pq = ctx.pair(q);
      peers_[size_t(q)].send = pq.createSendBuffer(slotOf(tag, slot), mr_, 0, 2 * stageStride_);
      peers_[size_t(q)].recv = std::make_unique<StandingGrant>(
          pq.createRecvBuffer(slotOf(tag, slot), mr_, landingOff(q, 0), 2 * stride_, 0), grantBatch);
    }
  }

  /**
   * @brief Starts a run: where its block goes (staging by parity), once the sends that read it
   * two runs ago are done (one per peer and run, in order: at most the last run's is out).
   */
  uint8_t* stage() {
    par_ = int(runs_++ % 2);
    for (Peer& pe : peers_)
      if (pe.send) pe.send->waitOutstanding(1);
    return scratch_.data() + size_t(par_) * stageStride_;
  }
  /** @brief Sends the staged block (@p bytes of it, at most the block size) to every peer. */
  void post(size_t bytes) {
    for (int i = 1; i < p_; ++i) postTo((r_ + i) % p_, 0, bytes);
  }
  void post() { post(bytes_); }
  /** @brief Sends @p bytes (at most the landing size) at @p off in the staged block to peer @p q. */
  void postTo(int q, size_t off, size_t bytes) {
    peers_[size_t(q)].send->send(size_t(par_) * stageStride_ + off, bytes, size_t(par_) * stride_);
  }
  /** @brief Waits for peer @p q's block of this run and returns it. */
  const uint8_t* take(int q) {
    peers_[size_t(q)].recv->take();
    return scratch_.data() + landingOff(q, par_);
  }
  const uint8_t* staged() const { return scratch_.data() + size_t(par_) * stageStride_; }

 private:
  struct Peer {
    std::unique_ptr<SendBuffer> send;
    std::unique_ptr<StandingGrant> recv;
  };
  size_t landingOff(int q, int par) const {
    return 2 * stageStride_ + stride_ * (2 * size_t(q) + size_t(par));
  }
  int p_, r_;
  size_t bytes_, stageStride_, stride_;
  std::vector<uint8_t> scratch_;
  std::shared_ptr<MemoryRegion> mr_;
  std::vector<Peer> peers_;
  uint64_t runs_ = 0;
  int par_ = 0;
};

/** Allreduce: one round; every rank reduces the P vectors in rank order (the same bits everywhere). */
class DirectAllreduce : public Algorithm {
 public:
  DirectAllreduce(Context& ctx, uint32_t tag, void* data, const ExchangeParams& p)
      : x_(ctx, tag, p.count * dataTypeSize(p.type), p.grantBatch),
        p_(ctx.size()),
        r_(ctx.rank()),
        user_(static_cast<uint8_t*>(data)),
        count_(p.count),
        type_(p.type),
        op_(p.op),
        bytes_(p.count * dataTypeSize(p.type)) {}

  void run() override {
    std::memcpy(x_.stage(), user_, bytes_);
    x_.post();
    auto vec = [&](int q) { return q == r_ ? x_.staged() : x_.take(q); };
    const uint8_t* v0 = vec(0);
    reduceTo(user_, v0, vec(1), count_, type_, op_);
    for (int q = 2; q < p_; ++q) reduceInto(user_, vec(q), count_, type_, op_);
  }

 private:
  DirectExchange x_;
  int p_, r_;
  uint8_t* user_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  size_t bytes_;
};

/**
 * Allreduce in two rounds that move the least a rank must send, 2·(P-1)/P·N (as the rings and
 * halving-doubling): a direct reduce-scatter (rank r writes block q of its vector to rank q,
 * which reduces the P copies of its block in rank order) and a direct allgather of the reduced
 * blocks. Every block is reduced by one rank only, so every rank ends with the same bits.
 */
class ReduceScatterAllgather : public Algorithm {
 public:
  ReduceScatterAllgather(Context& ctx, uint32_t tag, void* data, const ExchangeParams& p)
      : p_(ctx.size()),
        r_(ctx.rank()),
        user_(static_cast<uint8_t*>(data)),
        type_(p.type),
        op_(p.op),
        es_(dataTypeSize(p.type)),
        blocks_(evenChunks(p.count, ctx.size())),
        scatter_(ctx, tag, p.count * es_, blocks_[0].cnt * es_, p.grantBatch, kSlotScratch),
        gather_(ctx, tag, blocks_[0].cnt * es_, blocks_[0].cnt * es_, p.grantBatch, kSlotFold) {}

  void run() override {
    uint8_t* all = scatter_.stage();
    std::memcpy(all, user_, blocks_.back().off * es_ + blocks_.back().cnt * es_);
    for (int i = 1; i < p_; ++i) {
      const int q = (r_ + i) % p_;
      scatter_.postTo(q, blocks_[size_t(q)].off * es_, blocks_[size_t(q)].cnt * es_);
    }
    const Chunk mine = blocks_[size_t(r_)];
    uint8_t* out = user_ + mine.off * es_;
    auto copy = [&](int q) { return q == r_ ? all + mine.off * es_ : scatter_.take(q); };
    reduceTo(out, copy(0), copy(1), mine.cnt, type_, op_);
    for (int q = 2; q < p_; ++q) reduceInto(out, copy(q), mine.cnt, type_, op_);
    std::memcpy(gather_.stage(), out, mine.cnt * es_);
    gather_.post(mine.cnt * es_);
    for (int i = 1; i < p_; ++i) {
      const int q = (r_ + p_ - i) % p_;  // in the order they were sent to us
      const Chunk& b = blocks_[size_t(q)];
      std::memcpy(user_ + b.off * es_, gather_.take(q), b.cnt * es_);
    }
  }

 private:
  int p_, r_;
  uint8_t* user_;
  DataType type_;
  ReduceOp op_;
  size_t es_;
  std::vector<Chunk> blocks_;
  DirectExchange scatter_, gather_;
};

/** Allgather: one round; the blocks are copied from the landing regions into the output. */
class DirectAllgather : public Algorithm {
 public:
  DirectAllgather(Context& ctx, uint32_t tag, const void* in, void* out, const ExchangeParams& p)
      : x_(ctx, tag, p.count * dataTypeSize(p.type), p.grantBatch),
        p_(ctx.size()),
        r_(ctx.rank()),
        in_(static_cast<const uint8_t*>(in)),
        out_(static_cast<uint8_t*>(out)),
        bytes_(p.count * dataTypeSize(p.type)) {}

  void run() override {
    std::memcpy(x_.stage(), in_, bytes_);
    x_.post();
    for (int i = 1; i < p_; ++i) {
      const int q = (r_ + p_ - i) % p_;  // in the order they were sent to us
      std::memcpy(out_ + size_t(q) * bytes_, x_.take(q), bytes_);
    }
  }

 private:
  DirectExchange x_;
  int p_, r_;
  const uint8_t* in_;
  uint8_t* out_;
  size_t bytes_;
};

// ---- scatter + allgather broadcast -------------------------------------------------------

/**
 * Broadcast for large messages (Van de Geijn): the root writes block q of its data (P blocks
 * whose sizes differ by at most one element) into rank q's scatter landing region, then every
 * rank writes its block to every other (DirectExchange) and copies the blocks it gets into the
 * caller's buffer. The root's link carries about 2·N instead of one-to-all's (P-1)·N, in two
 * rounds instead of the chain's P-1 and its segments.
 *
 * The scatter is not symmetric, so its landing regions (kRegions per receiver, by run) are
 * granted again by the receiver, two at a time every second run, as one-to-all's. The root
 * writes from the caller's buffer and takes the other ranks' blocks (which it does not need) to
 * keep the exchange symmetric; when its run() returns, every rank has written its block to it,
 * after it had the root's: the root's scatter writes are done (checked before returning).
 */
class ScatterAllgather : public Algorithm {
 public:
  static constexpr uint32_t kRegions = 4;

  ScatterAllgather(Context& ctx, uint32_t tag, void* data, int root, const ExchangeParams& p)
      : p_(ctx.size()),
        r_(ctx.rank()),
        root_(root),
        es_(dataTypeSize(p.type)),
        user_(static_cast<uint8_t*>(data)),
        blocks_(evenChunks(p.count, ctx.size())),
        stride_(roundUp64(blocks_[0].cnt * es_)),
        x_(ctx, tag, blocks_[0].cnt * es_, p.grantBatch) {
    if (r_ == root_) {
      userMr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), data, p.count * es_);
      sends_.resize(size_t(p_));
      for (int q = 0; q < p_; ++q)
        if (q != r_)
          sends_[size_t(q)] =
              ctx.pair(q).createSendBuffer(slotOf(tag, kSlotChain), userMr_, 0, userMr_->size());
    } else {
      scatter_.assign(stride_ * kRegions, 0);
      scatterMr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), scatter_.data(), scatter_.size());
      recv_ =
          ctx.pair(root_).createRecvBuffer(slotOf(tag, kSlotChain), scatterMr_, 0, scatter_.size(), kRegions);
    }
  }

  ~ScatterAllgather() override {
    for (auto& s : sends_)  // as one-to-all's root: a write still waiting for its grant
      if (s) try {
          s->waitSend();
        } catch (...) {
          // A failed pair or a rank that never ran: nothing more to deliver to it.
        }
  }

  void run() override {
    const size_t region = size_t(runs_++ % kRegions) * stride_;
    const Chunk mine = blocks_[size_t(r_)];
    const uint8_t* block = nullptr;
    if (r_ == root_) {
      for (int i = 1; i < p_; ++i) {
        const int q = (r_ + i) % p_;
        const Chunk& b = blocks_[size_t(q)];
        sends_[size_t(q)]->send(b.off * es_, b.cnt * es_, region);
      }
      block = user_ + mine.off * es_;
    } else {
      recv_->waitRecv();
      block = scatter_.data() + region;
    }
    std::memcpy(x_.stage(), block, mine.cnt * es_);
    x_.post(mine.cnt * es_);
    if (r_ != root_) std::memcpy(user_ + mine.off * es_, block, mine.cnt * es_);
    for (int i = 1; i < p_; ++i) {
      const int q = (r_ + p_ - i) % p_;
      const uint8_t* got = x_.take(q);
      const Chunk& b = blocks_[size_t(q)];
      if (r_ != root_) std::memcpy(user_ + b.off * es_, got, b.cnt * es_);
    }
    if (r_ == root_) {
      for (auto& s : sends_)
        if (s) s->waitSend();  // read the caller's buffer; done by now (see above)
    } else if (runs_ % (kRegions / 2) == 0) {
      recv_->grant(kRegions / 2);
    }
  }

 private:
  int p_, r_, root_;
  size_t es_;
  uint8_t* user_;
  std::vector<Chunk> blocks_;
  size_t stride_;
  DirectExchange x_;
  std::shared_ptr<MemoryRegion> userMr_, scatterMr_;
  std::vector<uint8_t> scatter_;
  std::vector<std::unique_ptr<SendBuffer>> sends_;
  std::unique_ptr<RecvBuffer> recv_;
  uint64_t runs_ = 0;
};

// ---- recursive halving + doubling --------------------------------------------------------

/**
 * Reduce-scatter by recursive halving, then allgather by recursive doubling (Rabenseifner), over
 * the p2 = largest power of two ranks, with the fold for the others. The vector is cut into p2
 * chunks; in reduce-scatter round k (mask = p2 / 2^(k+1)) rank r and r ^ mask split their
 * current range of chunks in half, each sends the half the other keeps into the other's
 * landing region for round k and reduces what it gets into its own half, in the caller's
 * buffer. After log2 p2 rounds rank r holds chunk r reduced. The allgather runs the rounds
 * backwards and writes the owned range straight into the partner's buffer: the partner is
 * inside this run (it wrote to us in the same round of the reduce-scatter), and that range of
 * its buffer was last read by the write it made to us then, which we have received.
 *
 * One landing region per round is enough here, not two by parity: the partner of round k
 * writes round k of run n+1 only after it has received our allgather write of round k of run
 * n, which we make after we have consumed round k of run n.
 *
 * Its sends read the caller's buffer, so run() waits for them before it returns.
 */
class HalvingDoubling : public Algorithm {
 public:
  HalvingDoubling(Context& ctx, uint32_t tag, void* data, const ExchangeParams& p)
      : user_(static_cast<uint8_t*>(data)),
        type_(p.type),
        op_(p.op),
        es_(dataTypeSize(p.type)),
        bytes_(p.count * es_),
        fold_(ctx.size(), ctx.rank()),
        chunks_(evenChunks(p.count, fold_.p2)),
        rank_(ctx.rank()) {
    const int r = ctx.rank();
    rounds_ = log2Exact(fold_.p2);
    userMr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), data, bytes_);
    if (fold_.extra) {
      Pair& base = ctx.pair(fold_.partner);
      foldSend_ = base.createSendBuffer(slotOf(tag, kSlotFold), userMr_, 0, bytes_);
      foldRecv_ = std::make_unique<StandingGrant>(
          base.createRecvBuffer(slotOf(tag, kSlotFold), userMr_, 0, bytes_, 0), p.grantBatch);
      return;
    }
    // Landing regions: round k brings the half this rank keeps; then the fold's.
    size_t off = 0;
    for (int k = 0; k < rounds_; ++k) {
      landing_.push_back(off);
      off += roundUp64(rangeBytes(kept(r, k)));
    }
    const size_t foldOff = off;
    if (fold_.partner >= 0) off += roundUp64(bytes_);
    scratch_.assign(std::max<size_t>(1, off), 0);
    scratchMr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), scratch_.data(), scratch_.size());
    for (int k = 0; k < rounds_; ++k) {
      Pair& q = ctx.pair(partner(r, k));
      const size_t region = roundUp64(rangeBytes(kept(r, k)));
      Round rd;
      rd.rsSend = q.createSendBuffer(slotOf(tag, kSlotScratch), userMr_, 0, bytes_);
      rd.rsRecv = std::make_unique<StandingGrant>(
          q.createRecvBuffer(slotOf(tag, kSlotScratch), scratchMr_, landing_[size_t(k)], region, 0),
          p.grantBatch);
      rd.agSend = q.createSendBuffer(slotOf(tag, kSlotData), userMr_, 0, bytes_);
      rd.agRecv = std::make_unique<StandingGrant>(
          q.createRecvBuffer(slotOf(tag, kSlotData), userMr_, 0, bytes_, 0), p.grantBatch);
      steps_.push_back(std::move(rd));
    }
    if (fold_.partner >= 0) {
      Pair& e = ctx.pair(fold_.partner);
      foldSend_ = e.createSendBuffer(slotOf(tag, kSlotFold), userMr_, 0, bytes_);
      foldRecv_ = std::make_unique<StandingGrant>(
          e.createRecvBuffer(slotOf(tag, kSlotFold), scratchMr_, foldOff, roundUp64(bytes_), 0),
          p.grantBatch);
      foldOff_ = foldOff;
    }
  }

  void run() override {
    const int r = rank_;  // a base: its rank is its place among the p2
    if (fold_.extra) {
      foldSend_->send(0, bytes_, 0);
      foldRecv_->take();      // the result, in the caller's buffer
      foldSend_->waitSend();  // read the caller's buffer: done before returning it
      return;
    }
    if (fold_.partner >= 0) {
      foldRecv_->take();
      reduceInto(user_, scratch_.data() + foldOff_, bytes_ / es_, type_, op_);
    }
    for (int k = 0; k < rounds_; ++k) {  // reduce-scatter
      const Chunk give = range(sent(r, k)), keep = range(kept(r, k));
      Round& rd = steps_[size_t(k)];
      rd.rsSend->send(give.off * es_, give.cnt * es_, 0);
      rd.rsRecv->take();
      reduceInto(user_ + keep.off * es_, scratch_.data() + landing_[size_t(k)], keep.cnt, type_, op_);
    }
    for (int k = rounds_ - 1; k >= 0; --k) {  // allgather, the same pairs backwards
      const Chunk own = range(kept(r, k));
      Round& rd = steps_[size_t(k)];
      rd.agSend->send(own.off * es_, own.cnt * es_, own.off * es_);
      rd.agRecv->take();
    }
    if (fold_.partner >= 0) foldSend_->send(0, bytes_, 0);
    for (Round& rd : steps_) {
      rd.rsSend->waitSend();
      rd.agSend->waitSend();
    }
    if (foldSend_) foldSend_->waitSend();
  }

 private:
  struct Round {
    std::unique_ptr<SendBuffer> rsSend, agSend;
    std::unique_ptr<StandingGrant> rsRecv, agRecv;
  };
  /** @brief Chunk indices [first, last). */
  struct Range {
    int first = 0, last = 0;
  };
  int partner(int r, int k) const { return r ^ (fold_.p2 >> (k + 1)); }
  /** @brief The chunks rank r holds at the start of reduce-scatter round k. */
  Range current(int r, int k) const {
    Range c{0, fold_.p2};
    for (int j = 0; j < k; ++j) c = kept(r, j);
    return c;
  }
  Range kept(int r, int k) const {
    const Range c = current(r, k);
    const int half = (c.last - c.first) / 2;
    return (r & (fold_.p2 >> (k + 1))) ? Range{c.first + half, c.last} : Range{c.first, c.first + half};
  }
  Range sent(int r, int k) const {
    const Range c = current(r, k), keep = kept(r, k);
    return keep.first == c.first ? Range{keep.last, c.last} : Range{c.first, keep.first};
  }
  Chunk range(Range g) const {
    const size_t off = chunks_[size_t(g.first)].off;
    size_t cnt = 0;
    for (int i = g.first; i < g.last; ++i) cnt += chunks_[size_t(i)].cnt;
    return {off, cnt};
  }
  size_t rangeBytes(Range g) const { return range(g).cnt * es_; }

  uint8_t* user_;
  DataType type_;
  ReduceOp op_;
  size_t es_, bytes_;
  Fold fold_;
  std::vector<Chunk> chunks_;
  int rank_ = 0;
  int rounds_ = 0;
  std::vector<size_t> landing_;
  size_t foldOff_ = 0;
  std::vector<uint8_t> scratch_;
  std::shared_ptr<MemoryRegion> userMr_, scratchMr_;
  std::vector<Round> steps_;
  std::unique_ptr<SendBuffer> foldSend_;
  std::unique_ptr<StandingGrant> foldRecv_;
};

// ---- one-to-all broadcast ----------------------------------------------------------------

/**
 * The root stages its data (kRegions copies, by run) and writes it into every receiver's
 * landing region n mod kRegions; a receiver copies it into the caller's buffer and, every
 * kRegions/2 runs, grants the regions it has consumed again. A broadcast is not symmetric (the
 * root hears nothing back), so these are real grants, but they return while the root is still
 * kRegions/2 runs ahead of what they allow: off the critical path unless the root runs ahead
 * of a slow receiver, which is what they are for.
 */
class OneToAll : public Algorithm {
 public:
  static constexpr uint32_t kRegions = 4;

  OneToAll(Context& ctx, uint32_t tag, void* data, int root, const ExchangeParams& p)
      : p_(ctx.size()),
        r_(ctx.rank()),
        root_(root),
        user_(static_cast<uint8_t*>(data)),
        bytes_(p.count * dataTypeSize(p.type)),
        stride_(roundUp64(bytes_)) {
    scratch_.assign(stride_ * kRegions, 0);
    mr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), scratch_.data(), scratch_.size());
    if (r_ == root_) {
      sends_.resize(size_t(p_));
      for (int q = 0; q < p_; ++q)
        if (q != r_)
          sends_[size_t(q)] = ctx.pair(q).createSendBuffer(slotOf(tag, kSlotChain), mr_, 0, scratch_.size());
    } else {
      recv_ = ctx.pair(root_).createRecvBuffer(slotOf(tag, kSlotChain), mr_, 0, scratch_.size(), kRegions);
    }
  }

  /**
   * The root's run() returns once its writes are queued, and a write still waiting for its
   * grant would be dropped with its SendBuffer: wait for them (bounded by the pair timeout; every
   * receiver granted its regions when it was built). The receivers of the symmetric exchanges
   * need no such wait: a peer's grant travels ahead of its data on the same QP, so by the time a
   * rank has the data it waited for, its own writes to that peer have their grants.
   */
  ~OneToAll() override {
    for (auto& s : sends_)
      if (s) try {
          s->waitSend();
        } catch (...) {
          // A failed pair or a receiver that never ran: nothing more to deliver to it.
        }
  }

  void run() override {
    const size_t region = size_t(runs_++ % kRegions) * stride_;
    if (r_ == root_) {
      // Region n mod R was last read by the writes of run n - R: at most R - 1 runs may still be out.
      for (auto& s : sends_)
        if (s) s->waitOutstanding(kRegions - 1);
      std::memcpy(scratch_.data() + region, user_, bytes_);
      for (int i = 1; i < p_; ++i) sends_[size_t((r_ + i) % p_)]->send(region, bytes_, region);
      return;
    }
    recv_->waitRecv();
    std::memcpy(user_, scratch_.data() + region, bytes_);
    if (runs_ % (kRegions / 2) == 0) recv_->grant(kRegions / 2);
  }

 private:
  int p_, r_, root_;
  uint8_t* user_;
  size_t bytes_, stride_;
  std::vector<uint8_t> scratch_;
  std::shared_ptr<MemoryRegion> mr_;
  std::vector<std::unique_ptr<SendBuffer>> sends_;
  std::unique_ptr<RecvBuffer> recv_;
  uint64_t runs_ = 0;
};

// ---- all-to-all barrier ------------------------------------------------------------------

/**
 * Every rank writes zero bytes (with an immediate) to every peer, then takes one write from
 * every peer. A peer's next run's write can only follow this run's (it needs ours first), and
 * writes of a pair are taken in order, so a run never counts a later run's write. Nothing is
 * written, so nothing needs a landing region or a wait for send completions.
 */
class AllToAllBarrier : public Algorithm {
 public:
  AllToAllBarrier(Context& ctx, uint32_t tag, const ExchangeParams& p) : p_(ctx.size()), r_(ctx.rank()) {
    mr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), &byte_, 1);
    peers_.resize(size_t(p_));
    for (int q = 0; q < p_; ++q) {
      if (q == r_) continue;
      Pair& pq = ctx.pair(q);
      peers_[size_t(q)].send = pq.createSendBuffer(slotOf(tag, kSlotScratch), mr_, 0, 0);
      peers_[size_t(q)].recv = std::make_unique<StandingGrant>(
          pq.createRecvBuffer(slotOf(tag, kSlotScratch), mr_, 0, 0, 0), p.grantBatch);
    }
  }

  void run() override {
    for (int i = 1; i < p_; ++i) peers_[size_t((r_ + i) % p_)].send->send(0, 0, 0);
    for (int i = 1; i < p_; ++i) peers_[size_t((r_ + p_ - i) % p_)].recv->take();
  }

 private:
  struct Peer {
    std::unique_ptr<SendBuffer> send;
    std::unique_ptr<StandingGrant> recv;
  };
  int p_, r_;
  uint8_t byte_ = 0;
  std::shared_ptr<MemoryRegion> mr_;
  std::vector<Peer> peers_;
};

/**
 * Barrier through rank 0: every other rank writes zero bytes to rank 0, which, once it has all
 * of them, writes zero bytes back to each. Two rounds but 2(P-1) writes, where all-to-all makes
 * P(P-1) in one: where each message costs more than a round (a loaded host, a software RDMA
 * device), fewer messages win. Counting is safe as in all-to-all: a rank's next arrival follows
 * this run's release, and a release follows the arrival of the same run.
 */
class TreeBarrier : public Algorithm {
 public:
  TreeBarrier(Context& ctx, uint32_t tag, const ExchangeParams& p) : p_(ctx.size()), r_(ctx.rank()) {
    mr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), &byte_, 1);
    for (int q = 0; q < p_; ++q) {
      if (q == r_ || (r_ != 0 && q != 0)) continue;
      Pair& pq = ctx.pair(q);
      Peer pe;
      pe.send = pq.createSendBuffer(slotOf(tag, kSlotScratch), mr_, 0, 0);
      pe.recv = std::make_unique<StandingGrant>(pq.createRecvBuffer(slotOf(tag, kSlotScratch), mr_, 0, 0, 0),
                                                p.grantBatch);
      peers_.push_back(std::move(pe));
    }
  }

  void run() override {
    if (r_ != 0) {
      peers_[0].send->send(0, 0, 0);
      peers_[0].recv->take();
      return;
    }
    for (Peer& pe : peers_) pe.recv->take();
    for (Peer& pe : peers_) pe.send->send(0, 0, 0);
  }

 private:
  struct Peer {
    std::unique_ptr<SendBuffer> send;
    std::unique_ptr<StandingGrant> recv;
  };
  int p_, r_;
  uint8_t byte_ = 0;
  std::shared_ptr<MemoryRegion> mr_;
  std::vector<Peer> peers_;
};

}  // namespace

std::unique_ptr<Algorithm> makeScatterAllgather(Context& ctx, uint32_t tag, void* data, int root,
                                                const ExchangeParams& p) {
  return std::make_unique<ScatterAllgather>(ctx, tag, data, root, p);
}
std::unique_ptr<Algorithm> makeTreeBarrier(Context& ctx, uint32_t tag, const ExchangeParams& p) {
  return std::make_unique<TreeBarrier>(ctx, tag, p);
}
std::unique_ptr<Algorithm> makeRecursiveDoubling(Context& ctx, uint32_t tag, void* data,
                                                 const ExchangeParams& p) {
  return std::make_unique<RecursiveDoubling>(ctx, tag, data, p);
}
std::unique_ptr<Algorithm> makeDirectAllreduce(Context& ctx, uint32_t tag, void* data,
                                               const ExchangeParams& p) {
  return std::make_unique<DirectAllreduce>(ctx, tag, data, p);
}
std::unique_ptr<Algorithm> makeHalvingDoubling(Context& ctx, uint32_t tag, void* data,
                                               const ExchangeParams& p) {
  return std::make_unique<HalvingDoubling>(ctx, tag, data, p);
}
std::unique_ptr<Algorithm> makeOneToAll(Context& ctx, uint32_t tag, void* data, int root,
                                        const ExchangeParams& p) {
  return std::make_unique<OneToAll>(ctx, tag, data, root, p);
}
std::unique_ptr<Algorithm> makeReduceScatterAllgather(Context& ctx, uint32_t tag, void* data,
                                                      const ExchangeParams& p) {
  return std::make_unique<ReduceScatterAllgather>(ctx, tag, data, p);
}

std::unique_ptr<Algorithm> makeDirectAllgather(Context& ctx, uint32_t tag, const void* in, void* out,
                                               const ExchangeParams& p) {
  return std::make_unique<DirectAllgather>(ctx, tag, in, out, p);
}
std::unique_ptr<Algorithm> makeAllToAllBarrier(Context& ctx, uint32_t tag, const ExchangeParams& p) {
  return std::make_unique<AllToAllBarrier>(ctx, tag, p);
}

}  // namespace hcasim::verbs::detail
