// SPDX-License-Identifier: Apache-2.0
// The pipelined rings of the large-message collectives (collective_parts.h).
#include <algorithm>

#include "collective_parts.h"

namespace hcasim::verbs::detail {
namespace {

size_t segments(const Chunk& c, size_t s) { return c.cnt == 0 ? 0 : (c.cnt + s - 1) / s; }
Chunk segment(const Chunk& c, size_t j, size_t s) { return {c.off + j * s, std::min(s, c.cnt - j * s)}; }

}  // namespace

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

std::vector<Chunk> equalBlocks(size_t count, int p) {
  std::vector<Chunk> v(static_cast<size_t>(p));
  for (size_t i = 0; i < size_t(p); ++i) v[i] = {i * count, count};
  return v;
}

RingReduceScatter::RingReduceScatter(Context& ctx, uint32_t tag, std::shared_ptr<MemoryRegion> data,
                                     std::vector<Chunk> chunks, DataType type, ReduceOp op, size_t segElems,
                                     uint32_t regions)
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
  recv_ =
      ctx.pair(mod(r - 1, p)).createRecvBuffer(slotOf(tag, kSlotScratch), scratchMr_, 0, scratch_.size(), 0);
  send_ = ctx.pair(mod(r + 1, p)).createSendBuffer(slotOf(tag, kSlotScratch), data_, 0, data_->size());
  // The scratch regions of the first run, granted now: its first writes need not wait for a
  // grant message (each later run's are granted at the end of the one before).
  if (const size_t first = std::min<size_t>(regions_, expected())) recv_->grant(uint32_t(first));
}

size_t RingReduceScatter::expected() const {
  const int p = ctx_.size(), r = ctx_.rank();
  size_t n = 0;  // transfers the left neighbour makes into our scratch per run
  for (int s = 0; s + 1 < p; ++s) n += segments(chunks_[size_t(mod(r - s - 2, p))], seg_);
  return n;
}

void RingReduceScatter::run() {
  const int p = ctx_.size(), r = ctx_.rank();
  auto* base = static_cast<uint8_t*>(data_->ptr());
  const size_t expect = expected();
  size_t granted = std::min<size_t>(regions_, expect);  // at construction or by the run before
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
      if (granted < expect) {
        recv_->grant(1);
        ++granted;
      }
      if (s + 2 < p) forward(sg);
    }
  }
  // Every region has been reduced: the next run may write into them from its start (regions
  // are used from index 0 again; this rank's scratch is not the caller's memory).
  if (const size_t next = std::min<size_t>(regions_, expect)) recv_->grant(uint32_t(next));
  send_->waitSend();
}

RingAllgather::RingAllgather(Context& ctx, uint32_t tag, std::shared_ptr<MemoryRegion> data,
                             std::vector<Chunk> blocks, DataType type, size_t segElems)
    : ctx_(ctx),
      data_(std::move(data)),
      blocks_(std::move(blocks)),
      es_(dataTypeSize(type)),
      seg_(std::max<size_t>(1, segElems)) {
  const int p = ctx.size(), r = ctx.rank();
  recv_ = ctx.pair(mod(r - 1, p)).createRecvBuffer(slotOf(tag, kSlotData), data_, 0, data_->size(), 0);
  send_ = ctx.pair(mod(r + 1, p)).createSendBuffer(slotOf(tag, kSlotData), data_, 0, data_->size());
}

void RingAllgather::run() {
  const int p = ctx_.size(), r = ctx_.rank();
  size_t expected = 0;
  for (int t = 0; t + 1 < p; ++t) expected += segments(blocks_[size_t(mod(r - t - 1, p))], seg_);
  // Granted only now, at the start of the run: the writes land in the caller's memory, which
  // is the caller's between runs.
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

}  // namespace hcasim::verbs::detail
