// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/collectives.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "collective_parts.h"
#include "hcasim/verbs/error.h"

namespace hcasim::verbs {

using namespace detail;

namespace {

size_t segElems(const CollectiveOptions& o, size_t es) { return std::max<size_t>(1, o.segmentBytes / es); }

ExchangeParams params(const CollectiveOptions& o, size_t count, DataType type, ReduceOp op = ReduceOp::Sum) {
  ExchangeParams p;
  p.grantBatch = o.grantBatch;
  p.count = count;
  p.type = type;
  p.op = op;
  return p;
}

template <class E, size_t N>
E parseName(const std::string& s, const E (&all)[N], const char* (*name)(E), const char* what) {
  std::string names;
  for (E e : all) {
    if (s == name(e)) return e;
    names += std::string(names.empty() ? "" : ", ") + name(e);
  }
  throw std::invalid_argument(std::string("unknown ") + what + " '" + s + "' (" + names + ")");
}

}  // namespace

// ---- names -------------------------------------------------------------------------------

const char* allreduceAlgorithmName(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::Auto: return "auto";
    case AllreduceAlgorithm::Ring: return "ring";
    case AllreduceAlgorithm::RingChunked: return "ring-chunked";
    case AllreduceAlgorithm::RecursiveDoubling: return "recursive-doubling";
    case AllreduceAlgorithm::HalvingDoubling: return "halving-doubling";
    case AllreduceAlgorithm::Direct: return "direct";
    case AllreduceAlgorithm::ReduceScatterAllgather: return "reduce-scatter-allgather";
  }
  return "?";
}

const char* broadcastAlgorithmName(BroadcastAlgorithm a) {
  switch (a) {
    case BroadcastAlgorithm::Auto: return "auto";
    case BroadcastAlgorithm::Chain: return "chain";
    case BroadcastAlgorithm::OneToAll: return "one-to-all";
    case BroadcastAlgorithm::ScatterAllgather: return "scatter-allgather";
  }
  return "?";
}

const char* allgatherAlgorithmName(AllgatherAlgorithm a) {
  switch (a) {
    case AllgatherAlgorithm::Auto: return "auto";
    case AllgatherAlgorithm::Ring: return "ring";
    case AllgatherAlgorithm::Direct: return "direct";
  }
  return "?";
}

const char* barrierAlgorithmName(BarrierAlgorithm a) {
  switch (a) {
    case BarrierAlgorithm::Auto: return "auto";
    case BarrierAlgorithm::Dissemination: return "dissemination";
    case BarrierAlgorithm::AllToAll: return "all-to-all";
    case BarrierAlgorithm::Tree: return "tree";
  }
  return "?";
}

const char* tuningName(Tuning t) {
  switch (t) {
    case Tuning::Auto: return "auto";
    case Tuning::Hardware: return "hardware";
    case Tuning::Software: return "software";
  }
  return "?";
}

Tuning parseTuning(const std::string& s) {
  static const Tuning all[] = {Tuning::Auto, Tuning::Hardware, Tuning::Software};
  return parseName(s, all, tuningName, "tuning");
}

AllreduceAlgorithm parseAllreduceAlgorithm(const std::string& s) {
  static const AllreduceAlgorithm all[] = {AllreduceAlgorithm::Auto,
                                           AllreduceAlgorithm::Ring,
                                           AllreduceAlgorithm::RingChunked,
                                           AllreduceAlgorithm::RecursiveDoubling,
                                           AllreduceAlgorithm::HalvingDoubling,
                                           AllreduceAlgorithm::Direct,
                                           AllreduceAlgorithm::ReduceScatterAllgather};
  return parseName(s, all, allreduceAlgorithmName, "allreduce algorithm");
}

BroadcastAlgorithm parseBroadcastAlgorithm(const std::string& s) {
  static const BroadcastAlgorithm all[] = {BroadcastAlgorithm::Auto, BroadcastAlgorithm::Chain,
                                           BroadcastAlgorithm::OneToAll,
                                           BroadcastAlgorithm::ScatterAllgather};
  return parseName(s, all, broadcastAlgorithmName, "broadcast algorithm");
}

AllgatherAlgorithm parseAllgatherAlgorithm(const std::string& s) {
  static const AllgatherAlgorithm all[] = {AllgatherAlgorithm::Auto, AllgatherAlgorithm::Ring,
                                           AllgatherAlgorithm::Direct};
  return parseName(s, all, allgatherAlgorithmName, "allgather algorithm");
}

BarrierAlgorithm parseBarrierAlgorithm(const std::string& s) {
  static const BarrierAlgorithm all[] = {BarrierAlgorithm::Auto, BarrierAlgorithm::Dissemination,
                                         BarrierAlgorithm::AllToAll, BarrierAlgorithm::Tree};
  return parseName(s, all, barrierAlgorithmName, "barrier algorithm");
}

// ---- choosing ----------------------------------------------------------------------------

// The switch points (docs/verbs.md, "Choosing an algorithm") were measured on the simulator
// with 4 and 8 ranks as processes, busy polling, in two clocks that stand for two kinds of
// transport. Hardware: the lockstep clock, the modelled HCA's time (a round costs a few us, the
// wire 12 GB/s). Software: the realtime clock, where a round costs about a millisecond of host
// scheduling and every MiB a few ms of the model's time, as on rxe.

namespace {

constexpr uint32_t kRxeVendorId = 0xffffff;  // rdma-core/kernel RXE_VENDOR_ID
constexpr uint32_t kSiwVendorId = 0x626d74;  // SIW_VENDOR_ID ("bmt")

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Tuning resolveTuning(Tuning t, const std::string& device_name, uint32_t vendor_id) {
  if (t != Tuning::Auto) return t;
  const bool software = vendor_id == kRxeVendorId || vendor_id == kSiwVendorId ||
                        startsWith(device_name, "rxe") || startsWith(device_name, "siw");
  return software ? Tuning::Software : Tuning::Hardware;
}

Tuning resolveTuning(Tuning t, const Context& ctx) {
  return resolveTuning(t, ctx.device().name(), ctx.device().attr().vendor_id);
}

// Allreduce, up to 8 ranks:
//  - direct exchange, one round but (P-1)·N bytes per rank, while it is ahead;
//  - hardware: then reduce-scatter + allgather, both direct: two rounds moving the least a rank
//    must send, 2·(P-1)/P·N. Direct costs (P-1)·(1 - 2/P)·N more bytes and one round less, so
//    it leads while (P-1)(P-2)·N <= 96 KiB (4 ranks to 16 KiB: 6.5 us against 7.1; 8 ranks to
//    2 KiB: 3.2 against 3.7). Up to 4 MiB (measured; its scratch is about 4·N): on 4 ranks 9.1
//    us at 32 KiB against recursive doubling's 10.3, 518.6 at 4 MiB against halving-doubling's
//    524.1; on 8 ranks 14.4 at 64 KiB against 23.5, 154.8 at 1 MiB against 165.2;
//  - software: direct up to 4 KiB (beyond, its bytes cost the model's time: 8 ranks at 8 KiB
//    1.7 ms against recursive doubling's 0.9), then recursive doubling: log2 P rounds;
//  - above (and beyond 8 ranks from 64 KiB), halving-doubling: bandwidth-optimal like the ring,
//    on par with it in hardware (within 3 % at 1..64 MiB) and 2..20x faster than it in software
//    (2·log2 P rounds against 2(P-1) rounds and a grant per segment);
//  - but with a rank count that is not a power of two its fold moves 2·N more through one link:
//    above 1 MiB the ring then wins.
AllreduceAlgorithm autoAllreduce(size_t bytes, int ranks, const CollectiveOptions& o) {
  if (ranks <= 1) return AllreduceAlgorithm::Ring;
  const bool software = o.tuning == Tuning::Software;
  if (ranks <= 8) {
    const size_t spread = size_t(ranks - 1) * size_t(ranks - 2);  // direct's extra bytes, per N
    const size_t measured = size_t(4) << 20;                      // and both take scratch of a few times N
    if (software ? bytes <= 4096 : spread * bytes <= (size_t(96) << 10) && bytes <= measured)
      return AllreduceAlgorithm::Direct;
    if (!software && bytes <= measured) return AllreduceAlgorithm::ReduceScatterAllgather;
  }
  if (bytes <= 65536) return AllreduceAlgorithm::RecursiveDoubling;
  const bool pow2 = (ranks & (ranks - 1)) == 0;
  if (pow2 || bytes <= (size_t(1) << 20)) return AllreduceAlgorithm::HalvingDoubling;
  const size_t chunk = (bytes + size_t(ranks) - 1) / size_t(ranks);
  return chunk <= o.segmentBytes ? AllreduceAlgorithm::Ring : AllreduceAlgorithm::RingChunked;
}

// Broadcast: one round of one-to-all while the root's (P-1)·N is small, then scatter +
// allgather, whose root sends 2·N instead. Hardware: from (P-1)·N above 96 KiB (4 ranks from
// 64 KiB: 12.9 us against 16.2, 2.1x at 4 MiB; 8 ranks from 16 KiB: 6.4 against 9.5, 3.9x at
// 1 MiB). Software: from 1 MiB only (one round against two: one-to-all 1.6..5x ahead of Gloo's
// on 8 ranks at 4 KiB..1 MiB where scatter + allgather is 0.5..1.1x; at 16 MiB all are within
// the noise). The chain is never chosen: P-1 rounds and a grant per run, fastest in hardware only
// at 4 MiB and above, and 4x slower than one-to-all in software.
BroadcastAlgorithm autoBroadcast(size_t bytes, int ranks, Tuning t) {
  if (ranks <= 2) return BroadcastAlgorithm::OneToAll;
  const bool one =
      t == Tuning::Software ? bytes <= (size_t(1) << 20) : (ranks - 1) * bytes <= (size_t(96) << 10);
  return one ? BroadcastAlgorithm::OneToAll : BroadcastAlgorithm::ScatterAllgather;
}

// Allgather: the direct exchange sends what the ring sends ((P-1)/P of the output per rank) in
// one round instead of P-1: ahead of the ring at every size measured, in both clocks. Its
// landing regions take twice the output, so above 64 MiB the ring.
AllgatherAlgorithm autoAllgather(size_t bytes, int ranks) {
  (void)ranks;
  return bytes <= (size_t(64) << 20) ? AllgatherAlgorithm::Direct : AllgatherAlgorithm::Ring;
}

// Barrier: all-to-all is one round of P(P-1) zero-byte writes, the tree two rounds of 2(P-1).
// Hardware: one round wins up to 8 ranks (8 ranks: 1.3 us against the tree's 2.4 and Gloo's
// all-to-all 1.7). Software: the tree's fewer writes win on 8 ranks (0.35..0.50 ms against
// 0.52..0.84; Gloo's all-to-all 1.1..1.4), all-to-all on 4 while the ranks busy-poll (rxe, 4
// ranks: 0.46..0.53 ms against 0.53..1.04). Waiting for completion events there, every arrival
// is a wake-up, and the tree gives a rank other than the root one instead of P-1 (rxe, 4
// ranks: 1.25..1.48 ms against 1.80..2.05; 3 ranks not timed). Beyond 8 ranks the tree
// (all-to-all's writes grow as P squared; not timed there), and beyond 32 dissemination (the
// tree's root would take too many writes per barrier).
BarrierAlgorithm autoBarrier(int ranks, Tuning t, PollMode mode) {
  const int one_round = t == Tuning::Hardware ? 8 : mode == PollMode::Event ? 2 : 4;
  if (ranks <= one_round) return BarrierAlgorithm::AllToAll;
  return ranks <= 32 ? BarrierAlgorithm::Tree : BarrierAlgorithm::Dissemination;
}

// ---- allreduce ---------------------------------------------------------------------------

struct Allreduce::Impl {
  AllreduceAlgorithm algo = AllreduceAlgorithm::Ring;
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RingReduceScatter> rs;
  std::unique_ptr<RingAllgather> ag;
  std::unique_ptr<detail::Algorithm> small;
};

Allreduce::Allreduce(Context& ctx, void* data, size_t count, DataType type, ReduceOp op, CollectiveOptions o)
    : impl_(std::make_unique<Impl>()) {
  const uint32_t tag = ctx.nextTag();  // taken even when there is nothing to do: ranks stay in step
  const int p = ctx.size();
  const size_t es = dataTypeSize(type);
  o.tuning = resolveTuning(o.tuning, ctx);
  impl_->algo = o.algorithm == AllreduceAlgorithm::Auto ? autoAllreduce(count * es, p, o) : o.algorithm;
  if (p == 1 || count == 0) return;
  ExchangeParams xp = params(o, count, type, op);
  switch (impl_->algo) {
    case AllreduceAlgorithm::RecursiveDoubling:
      impl_->small = makeRecursiveDoubling(ctx, tag, data, xp);
      return;
    case AllreduceAlgorithm::Direct: impl_->small = makeDirectAllreduce(ctx, tag, data, xp); return;
    case AllreduceAlgorithm::HalvingDoubling: impl_->small = makeHalvingDoubling(ctx, tag, data, xp); return;
    case AllreduceAlgorithm::ReduceScatterAllgather:
      impl_->small = makeReduceScatterAllgather(ctx, tag, data, xp);
      return;
    default: break;
  }
  const auto chunks = evenChunks(count, p);
  const size_t maxChunk = chunks[0].cnt;
  size_t seg = maxChunk;
  uint32_t regions = 2;
  if (impl_->algo == AllreduceAlgorithm::RingChunked) {
    seg = std::min(segElems(o, es), maxChunk);
    regions = std::max<uint32_t>(2, o.regions);
  }
  impl_->mr = std::make_shared<MemoryRegion>(ctx.devicePtr(), data, count * es);
  impl_->rs = std::make_unique<RingReduceScatter>(ctx, tag, impl_->mr, chunks, type, op, seg, regions);
  impl_->ag = std::make_unique<RingAllgather>(ctx, tag, impl_->mr, chunks, type, seg);
}

Allreduce::~Allreduce() = default;

void Allreduce::run() {
  if (impl_->small) return impl_->small->run();
  if (!impl_->rs) return;
  impl_->rs->run();  // ends with its writes complete: the allgather may overwrite every chunk
  impl_->ag->run();
}

AllreduceAlgorithm Allreduce::algorithm() const { return impl_->algo; }

// ---- reduce-scatter ----------------------------------------------------------------------

struct ReduceScatter::Impl {
  const void* in;
  void* out;
  size_t bytes = 0;
  int rank = 0, size = 1;
  std::vector<uint8_t> work;
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RingReduceScatter> rs;
};

ReduceScatter::ReduceScatter(Context& ctx, const void* in, void* out, size_t count, DataType type,
                             ReduceOp op, CollectiveOptions o)
    : impl_(std::make_unique<Impl>()) {
  const uint32_t tag = ctx.nextTag();
  if (o.algorithm != AllreduceAlgorithm::Auto && o.algorithm != AllreduceAlgorithm::Ring &&
      o.algorithm != AllreduceAlgorithm::RingChunked)
    throw std::invalid_argument(std::string("reduce-scatter: no algorithm '") +
                                allreduceAlgorithmName(o.algorithm) + "' (auto, ring, ring-chunked)");
  const int p = ctx.size();
  const size_t es = dataTypeSize(type);
  impl_->in = in;
  impl_->out = out;
  impl_->bytes = count * es;
  impl_->rank = ctx.rank();
  impl_->size = p;
  if (p == 1 || count == 0) return;
  impl_->work.assign(size_t(p) * count * es, 0);
  impl_->mr = std::make_shared<MemoryRegion>(ctx.devicePtr(), impl_->work.data(), impl_->work.size());
  size_t seg = count;
  uint32_t regions = 2;
  if (o.algorithm == AllreduceAlgorithm::RingChunked ||
      (o.algorithm == AllreduceAlgorithm::Auto && count * es > o.segmentBytes)) {
    seg = std::min(segElems(o, es), count);
    regions = std::max<uint32_t>(2, o.regions);
  }
  impl_->rs =
      std::make_unique<RingReduceScatter>(ctx, tag, impl_->mr, equalBlocks(count, p), type, op, seg, regions);
}

ReduceScatter::~ReduceScatter() = default;

void ReduceScatter::run() {
  Impl& m = *impl_;
  if (m.bytes == 0) return;
  if (!m.rs) {
    std::memmove(m.out, m.in, m.bytes);
    return;
  }
  std::memcpy(m.work.data(), m.in, m.work.size());  // the input stays untouched
  m.rs->run();
  std::memcpy(m.out, m.work.data() + size_t(m.rank) * m.bytes, m.bytes);
}

// ---- allgather ---------------------------------------------------------------------------

struct Allgather::Impl {
  AllgatherAlgorithm algo = AllgatherAlgorithm::Ring;
  const void* in;
  uint8_t* out;
  size_t bytes = 0;
  int rank = 0;
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RingAllgather> ag;
  std::unique_ptr<detail::Algorithm> direct;
};

Allgather::Allgather(Context& ctx, const void* in, void* out, size_t count, DataType type,
                     CollectiveOptions o)
    : impl_(std::make_unique<Impl>()) {
  const uint32_t tag = ctx.nextTag();
  const int p = ctx.size();
  const size_t es = dataTypeSize(type);
  Impl& m = *impl_;
  m.in = in;
  m.out = static_cast<uint8_t*>(out);
  m.bytes = count * es;
  m.rank = ctx.rank();
  m.algo = o.allgather == AllgatherAlgorithm::Auto ? autoAllgather(size_t(p) * count * es, p) : o.allgather;
  if (count == 0 || p == 1) return;
  if (m.algo == AllgatherAlgorithm::Direct) {
    m.direct = makeDirectAllgather(ctx, tag, in, out, params(o, count, type));
    return;
  }
  m.mr = std::make_shared<MemoryRegion>(ctx.devicePtr(), out, size_t(p) * count * es);
  m.ag = std::make_unique<RingAllgather>(ctx, tag, m.mr, equalBlocks(count, p), type, segElems(o, es));
}

Allgather::~Allgather() = default;

void Allgather::run() {
  Impl& m = *impl_;
  if (m.bytes == 0) return;
  uint8_t* mine = m.out + size_t(m.rank) * m.bytes;
  if (mine != m.in) std::memmove(mine, m.in, m.bytes);
  if (m.direct) m.direct->run();
  if (m.ag) m.ag->run();
}

AllgatherAlgorithm Allgather::algorithm() const { return impl_->algo; }

// ---- broadcast ---------------------------------------------------------------------------

struct Broadcast::Impl {
  BroadcastAlgorithm algo = BroadcastAlgorithm::Chain;
  size_t bytes = 0, seg = 1;
  int pos = 0, size = 1;  // position in the chain, 0 = root
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RecvBuffer> recv;
  std::unique_ptr<SendBuffer> send;
  std::unique_ptr<detail::Algorithm> oneToAll;  ///< or scatter-allgather
};

Broadcast::Broadcast(Context& ctx, void* data, size_t count, DataType type, int root, CollectiveOptions o)
    : impl_(std::make_unique<Impl>()) {
  const uint32_t tag = ctx.nextTag();
  const int p = ctx.size(), r = ctx.rank();
  if (root < 0 || root >= p)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside 0.." +
                                std::to_string(p - 1));
  const size_t es = dataTypeSize(type);
  Impl& m = *impl_;
  m.bytes = count * es;
  m.seg = segElems(o, es) * es;
  m.pos = mod(r - root, p);
  m.size = p;
  m.algo = o.broadcast == BroadcastAlgorithm::Auto ? autoBroadcast(m.bytes, p, resolveTuning(o.tuning, ctx))
                                                   : o.broadcast;
  if (count == 0 || p == 1) return;
  if (m.algo == BroadcastAlgorithm::OneToAll) {
    m.oneToAll = makeOneToAll(ctx, tag, data, root, params(o, count, type));
    return;
  }
  if (m.algo == BroadcastAlgorithm::ScatterAllgather) {
    m.oneToAll = makeScatterAllgather(ctx, tag, data, root, params(o, count, type));
    return;
  }
  m.mr = std::make_shared<MemoryRegion>(ctx.devicePtr(), data, m.bytes);
  if (m.pos > 0)
    m.recv = ctx.pair(mod(r - 1, p)).createRecvBuffer(slotOf(tag, kSlotChain), m.mr, 0, m.bytes, 0);
  if (m.pos + 1 < p)
    m.send = ctx.pair(mod(r + 1, p)).createSendBuffer(slotOf(tag, kSlotChain), m.mr, 0, m.bytes);
}

Broadcast::~Broadcast() = default;

void Broadcast::run() {
  Impl& m = *impl_;
  if (m.bytes == 0 || m.size == 1) return;
  if (m.oneToAll) return m.oneToAll->run();
  const size_t n = (m.bytes + m.seg - 1) / m.seg;
  auto piece = [&](size_t j) { return std::min(m.seg, m.bytes - j * m.seg); };
  if (m.recv) m.recv->grant(uint32_t(n));
  for (size_t j = 0; j < n; ++j) {
    if (m.recv) m.recv->waitRecv();
    if (m.send) m.send->send(j * m.seg, piece(j), j * m.seg);
  }
  if (m.send) m.send->waitSend();
}

BroadcastAlgorithm Broadcast::algorithm() const { return impl_->algo; }

// ---- barrier -----------------------------------------------------------------------------

struct Barrier::Impl {
  Context* ctx = nullptr;
  uint32_t tag = 0;
  BarrierAlgorithm algo = BarrierAlgorithm::Dissemination;
  std::unique_ptr<detail::Algorithm> allToAll;  ///< or tree
};

Barrier::Barrier(Context& ctx, CollectiveOptions o) : impl_(std::make_unique<Impl>()) {
  impl_->ctx = &ctx;
  impl_->tag = ctx.nextTag();
  impl_->algo = o.barrier == BarrierAlgorithm::Auto
                    ? autoBarrier(ctx.size(), resolveTuning(o.tuning, ctx), ctx.device().mode())
                    : o.barrier;
  if (impl_->algo == BarrierAlgorithm::AllToAll && ctx.size() > 1)
    impl_->allToAll = makeAllToAllBarrier(ctx, impl_->tag, params(o, 0, DataType::Float));
  if (impl_->algo == BarrierAlgorithm::Tree && ctx.size() > 1)
    impl_->allToAll = makeTreeBarrier(ctx, impl_->tag, params(o, 0, DataType::Float));
}

Barrier::~Barrier() = default;

void Barrier::run() {
  if (impl_->allToAll) return impl_->allToAll->run();
  // Dissemination: in round k every rank tells rank+2^k and hears from rank-2^k; after
  // ceil(log2 P) rounds everyone has heard, transitively, from everyone.
  Context& ctx = *impl_->ctx;
  const int p = ctx.size(), r = ctx.rank();
  uint32_t k = 0;
  for (int d = 1; d < p; d <<= 1, ++k) {
    const uint32_t t = (impl_->tag << 6) | k;
    const uint8_t b = uint8_t(k);
    ctx.pair((r + d) % p).send(t, &b, 1);
    ctx.pair(mod(r - d, p)).recv(t);
  }
}

BarrierAlgorithm Barrier::algorithm() const { return impl_->algo; }

// ---- one-shot helpers --------------------------------------------------------------------

void allreduce(Context& ctx, void* data, size_t count, DataType type, ReduceOp op, CollectiveOptions o) {
  Allreduce(ctx, data, count, type, op, o).run();
}
void broadcast(Context& ctx, void* data, size_t count, DataType type, int root, CollectiveOptions o) {
  Broadcast(ctx, data, count, type, root, o).run();
}
void allgather(Context& ctx, const void* in, void* out, size_t count, DataType type, CollectiveOptions o) {
  Allgather(ctx, in, out, count, type, o).run();
}
void reduceScatter(Context& ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                   CollectiveOptions o) {
  ReduceScatter(ctx, in, out, count, type, op, o).run();
}
void barrier(Context& ctx, CollectiveOptions o) { Barrier(ctx, o).run(); }

}  // namespace hcasim::verbs
