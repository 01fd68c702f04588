// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/collectives.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "hcasim/verbs/error.h"

namespace hcasim::verbs {
namespace {

// Slots of a collective instance: tag * 4 + role.
constexpr uint32_t kSlotScratch = 0, kSlotData = 1, kSlotChain = 2;
uint32_t slotOf(uint32_t tag, uint32_t role) { return tag * 4 + role; }

int mod(int a, int p) { return ((a % p) + p) % p; }

/** @brief A range of elements. */
struct Chunk {
  size_t off = 0, cnt = 0;
};

/** @brief @p count elements split into @p p chunks whose sizes differ by at most one. */
std::vector<Chunk> evenChunks(size_t count, int p) {
  std::vector<Chunk> v(static_cast<size_t>(p));
  const size_t base = count / size_t(p), rem = count % size_t(p);
  size_t off = 0;
  for (size_t i = 0; i < size_t(p); ++i) {
    v[i] = {off, base + (i < rem ? 1 : 0)};
    off += v[i].cnt;
  }
  return v;
}

/** @brief @p p blocks of exactly @p count elements. */
std::vector<Chunk> equalBlocks(size_t count, int p) {
  std::vector<Chunk> v(static_cast<size_t>(p));
  for (size_t i = 0; i < size_t(p); ++i) v[i] = {i * count, count};
  return v;
}

size_t segments(const Chunk& c, size_t s) { return c.cnt == 0 ? 0 : (c.cnt + s - 1) / s; }
Chunk segment(const Chunk& c, size_t j, size_t s) { return {c.off + j * s, std::min(s, c.cnt - j * s)}; }

/**
 * Ring reduce-scatter over chunks of a registered region. At step s rank r writes chunk
 * (r-s-1) mod P, one segment at a time, into its right neighbour's scratch regions (region =
 * transfer index mod R). The receiver reduces each segment into its own copy of that chunk,
 * grants the region again, and forwards the segment at step s+1. After P-1 steps chunk r of
 * rank r holds the full reduction.
 */
class RingReduceScatter {
 public:
  RingReduceScatter(Context& ctx, uint32_t tag, std::shared_ptr<MemoryRegion> data, std::vector<Chunk> chunks,
                    DataType type, ReduceOp op, size_t segElems, uint32_t regions)
      : ctx_(ctx),
        data_(std::move(data)),
        chunks_(std::move(chunks)),
        type_(type),
        op_(op),
        es_(dataTypeSize(type)),
        seg_(std::max<size_t>(1, segElems)),
        regions_(std::max<uint32_t>(2, regions)) {
    const int p = ctx.size(), r = ctx.rank();
    scratch_.assign(std::max<size_t>(1, regions_ * seg_ * es_), 0);
    scratchMr_ = std::make_shared<MemoryRegion>(ctx.devicePtr(), scratch_.data(), scratch_.size());
    recv_ = ctx.pair(mod(r - 1, p))
                .createRecvBuffer(slotOf(tag, kSlotScratch), scratchMr_, 0, scratch_.size(), 0);
    send_ = ctx.pair(mod(r + 1, p)).createSendBuffer(slotOf(tag, kSlotScratch), data_, 0, data_->size());
  }

  void run() {
    const int p = ctx_.size(), r = ctx_.rank();
    auto* base = static_cast<uint8_t*>(data_->ptr());
    size_t expected = 0;  // transfers the left neighbour makes into our scratch
    for (int s = 0; s + 1 < p; ++s) expected += segments(chunks_[size_t(mod(r - s - 2, p))], seg_);
    size_t granted = std::min<size_t>(regions_, expected);
    if (granted) recv_->grant(uint32_t(granted));
    size_t sent = 0, received = 0;
    auto forward = [&](const Chunk& sg) {
      send_->send(sg.off * es_, sg.cnt * es_, (sent++ % regions_) * seg_ * es_);
    };
    const Chunk& first = chunks_[size_t(mod(r - 1, p))];
    for (size_t j = 0; j < segments(first, seg_); ++j) forward(segment(first, j, seg_));
    for (int s = 0; s + 1 < p; ++s) {
      const Chunk& rc = chunks_[size_t(mod(r - s - 2, p))];
      for (size_t j = 0; j < segments(rc, seg_); ++j) {
        const Chunk sg = segment(rc, j, seg_);
        recv_->waitRecv();
        const size_t region = received++ % regions_;
        reduceInto(base + sg.off * es_, scratch_.data() + region * seg_ * es_, sg.cnt, type_, op_);
        if (granted < expected) {
          recv_->grant(1);
          ++granted;
        }
        if (s + 2 < p) forward(sg);
      }
    }
    send_->waitSend();
  }

 private:
  Context& ctx_;
  std::shared_ptr<MemoryRegion> data_;
  std::vector<Chunk> chunks_;
  DataType type_;
  ReduceOp op_;
  size_t es_, seg_;
  uint32_t regions_;
  std::vector<uint8_t> scratch_;
  std::shared_ptr<MemoryRegion> scratchMr_;
  std::unique_ptr<RecvBuffer> recv_;
  std::unique_ptr<SendBuffer> send_;
};

/**
 * Ring allgather: at step t rank r writes block (own-t) mod P, segment by segment, straight
 * into its right neighbour's region at the same offset, and forwards what it receives. The
 * receiver grants every write of a run at its start (each lands in a distinct place).
 */
class RingAllgather {
 public:
  RingAllgather(Context& ctx, uint32_t tag, std::shared_ptr<MemoryRegion> data, std::vector<Chunk> blocks,
                DataType type, size_t segElems)
      : ctx_(ctx),
        data_(std::move(data)),
        blocks_(std::move(blocks)),
        es_(dataTypeSize(type)),
        seg_(std::max<size_t>(1, segElems)) {
    const int p = ctx.size(), r = ctx.rank();
    recv_ = ctx.pair(mod(r - 1, p)).createRecvBuffer(slotOf(tag, kSlotData), data_, 0, data_->size(), 0);
    send_ = ctx.pair(mod(r + 1, p)).createSendBuffer(slotOf(tag, kSlotData), data_, 0, data_->size());
  }

  /** @pre every earlier local read of the blocks this rank receives is complete. */
  void run() {
    const int p = ctx_.size(), r = ctx_.rank();
    size_t expected = 0;
    for (int t = 0; t + 1 < p; ++t) expected += segments(blocks_[size_t(mod(r - t - 1, p))], seg_);
    if (expected) recv_->grant(uint32_t(expected));
    auto forward = [&](const Chunk& sg) { send_->send(sg.off * es_, sg.cnt * es_, sg.off * es_); };
    const Chunk& own = blocks_[size_t(r)];
    for (size_t j = 0; j < segments(own, seg_); ++j) forward(segment(own, j, seg_));
    for (int t = 0; t + 1 < p; ++t) {
      const Chunk& rc = blocks_[size_t(mod(r - t - 1, p))];
      for (size_t j = 0; j < segments(rc, seg_); ++j) {
        recv_->waitRecv();
        if (t + 2 < p) forward(segment(rc, j, seg_));
      }
    }
    send_->waitSend();
  }

 private:
  Context& ctx_;
  std::shared_ptr<MemoryRegion> data_;
  std::vector<Chunk> blocks_;
  size_t es_, seg_;
  std::unique_ptr<RecvBuffer> recv_;
  std::unique_ptr<SendBuffer> send_;
};

size_t segElems(const CollectiveOptions& o, size_t es) { return std::max<size_t>(1, o.segmentBytes / es); }

}  // namespace

const char* allreduceAlgorithmName(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::Auto: return "auto";
    case AllreduceAlgorithm::Ring: return "ring";
    case AllreduceAlgorithm::RingChunked: return "ring-chunked";
  }
  return "?";
}

// ---- allreduce ---------------------------------------------------------------------------

struct Allreduce::Impl {
  AllreduceAlgorithm algo = AllreduceAlgorithm::Ring;
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RingReduceScatter> rs;
  std::unique_ptr<RingAllgather> ag;
};

Allreduce::Allreduce(Context& ctx, void* data, size_t count, DataType type, ReduceOp op, CollectiveOptions o)
    : impl_(std::make_unique<Impl>()) {
  const uint32_t tag = ctx.nextTag();  // taken even when there is nothing to do: ranks stay in step
  const int p = ctx.size();
  const size_t es = dataTypeSize(type);
  const auto chunks = evenChunks(count, p);
  const size_t maxChunk = chunks.empty() ? 0 : chunks[0].cnt;
  impl_->algo = o.algorithm;
  if (impl_->algo == AllreduceAlgorithm::Auto)
    impl_->algo =
        maxChunk * es <= o.segmentBytes ? AllreduceAlgorithm::Ring : AllreduceAlgorithm::RingChunked;
  if (p == 1 || count == 0) return;
  size_t seg;
  uint32_t regions;
  if (impl_->algo == AllreduceAlgorithm::Ring) {
    seg = maxChunk;
    regions = 2;
  } else {
    seg = std::min(segElems(o, es), maxChunk);
    regions = std::max<uint32_t>(2, o.regions);
  }
  impl_->mr = std::make_shared<MemoryRegion>(ctx.devicePtr(), data, count * es);
  impl_->rs = std::make_unique<RingReduceScatter>(ctx, tag, impl_->mr, chunks, type, op, seg, regions);
  impl_->ag = std::make_unique<RingAllgather>(ctx, tag, impl_->mr, chunks, type, seg);
}

Allreduce::~Allreduce() = default;

void Allreduce::run() {
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
  const void* in;
  uint8_t* out;
  size_t bytes = 0;
  int rank = 0;
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RingAllgather> ag;
};

Allgather::Allgather(Context& ctx, const void* in, void* out, size_t count, DataType type,
                     CollectiveOptions o)
    : impl_(std::make_unique<Impl>()) {
  const uint32_t tag = ctx.nextTag();
  const int p = ctx.size();
  const size_t es = dataTypeSize(type);
  impl_->in = in;
  impl_->out = static_cast<uint8_t*>(out);
  impl_->bytes = count * es;
  impl_->rank = ctx.rank();
  if (count == 0 || p == 1) return;
  impl_->mr = std::make_shared<MemoryRegion>(ctx.devicePtr(), out, size_t(p) * count * es);
  impl_->ag =
      std::make_unique<RingAllgather>(ctx, tag, impl_->mr, equalBlocks(count, p), type, segElems(o, es));
}

Allgather::~Allgather() = default;

void Allgather::run() {
  Impl& m = *impl_;
  if (m.bytes == 0) return;
  uint8_t* mine = m.out + size_t(m.rank) * m.bytes;
  if (mine != m.in) std::memmove(mine, m.in, m.bytes);
  if (m.ag) m.ag->run();
}

// ---- broadcast ---------------------------------------------------------------------------

struct Broadcast::Impl {
  size_t bytes = 0, seg = 1;
  int pos = 0, size = 1;  // position in the chain, 0 = root
  std::shared_ptr<MemoryRegion> mr;
  std::unique_ptr<RecvBuffer> recv;
  std::unique_ptr<SendBuffer> send;
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
  if (count == 0 || p == 1) return;
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
  const size_t n = (m.bytes + m.seg - 1) / m.seg;
  auto piece = [&](size_t j) { return std::min(m.seg, m.bytes - j * m.seg); };
  if (m.recv) m.recv->grant(uint32_t(n));
  for (size_t j = 0; j < n; ++j) {
    if (m.recv) m.recv->waitRecv();
    if (m.send) m.send->send(j * m.seg, piece(j), j * m.seg);
  }
  if (m.send) m.send->waitSend();
}

// ---- barrier -----------------------------------------------------------------------------

Barrier::Barrier(Context& ctx) : ctx_(ctx), tag_(ctx.nextTag()) {}
Barrier::~Barrier() = default;

void Barrier::run() {
  // Dissemination: in round k every rank tells rank+2^k and hears from rank-2^k; after
  // ceil(log2 P) rounds everyone has heard, transitively, from everyone.
  const int p = ctx_.size(), r = ctx_.rank();
  uint32_t k = 0;
  for (int d = 1; d < p; d <<= 1, ++k) {
    const uint32_t t = (tag_ << 6) | k;
    const uint8_t b = uint8_t(k);
    ctx_.pair((r + d) % p).send(t, &b, 1);
    ctx_.pair(mod(r - d, p)).recv(t);
  }
}

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
void barrier(Context& ctx) { Barrier(ctx).run(); }

}  // namespace hcasim::verbs
