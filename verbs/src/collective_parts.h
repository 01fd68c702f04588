// SPDX-License-Identifier: Apache-2.0
/**
 * @file collective_parts.h
 * @brief The algorithms behind the public collectives (collectives.h), internal to the
 *        library: the pipelined rings for large messages (ring.cpp) and the few-round
 *        exchanges for small and medium ones (exchange.cpp), and what they share.
 *
 * Each algorithm is built once per collective instance (registrations, slot buffers, grants)
 * and run() any number of times. Every rank builds the same algorithm for the same instance:
 * the choice depends only on the size, the rank count and the options.
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "hcasim/verbs/buffer.h"
#include "hcasim/verbs/context.h"
#include "hcasim/verbs/reduce.h"

namespace hcasim::verbs::detail {

// Slots of a collective instance: tag * 4 + role. A pair has separate slot spaces for the two
// directions, so both ends of a pair may use the same role.
constexpr uint32_t kSlotScratch = 0, kSlotData = 1, kSlotChain = 2, kSlotFold = 3;
inline uint32_t slotOf(uint32_t tag, uint32_t role) { return tag * 4 + role; }

inline int mod(int a, int p) { return ((a % p) + p) % p; }

/** @brief A range of elements. */
struct Chunk {
  size_t off = 0, cnt = 0;
};

/** @brief @p count elements split into @p p chunks whose sizes differ by at most one. */
std::vector<Chunk> evenChunks(size_t count, int p);
/** @brief @p p blocks of exactly @p count elements. */
std::vector<Chunk> equalBlocks(size_t count, int p);

/** @brief @p n rounded up to a multiple of 64 (landing regions start on cache lines). */
inline size_t roundUp64(size_t n) { return (n + 63) / 64 * 64; }

/**
 * @brief A receive buffer whose peer never waits for a grant: it is granted @p batch writes
 * twice at once and topped up by another @p batch whenever fewer than @p batch are left, so a
 * grant message goes out once per @p batch runs, never on the critical path.
 *
 * Only for exchanges where the data flow itself keeps the writer from overwriting what was not
 * consumed (the landing regions by run parity, collectives.h; a write into a rank's own buffer
 * that this rank is known to be inside the run for). Every write must be taken with take().
 */
class StandingGrant {
 public:
  StandingGrant(std::unique_ptr<RecvBuffer> b, uint32_t batch);
  /** @brief Waits for the next write (RecvBuffer::waitRecv), then tops the grant up. */
  uint32_t take();
  RecvBuffer& buffer() { return *b_; }

 private:
  std::unique_ptr<RecvBuffer> b_;
  uint32_t batch_;
  uint64_t granted_ = 0, taken_ = 0;
};

/** @brief What a small-message algorithm needs besides its buffers. */
struct ExchangeParams {
  size_t count = 0;
  DataType type = DataType::Float;
  ReduceOp op = ReduceOp::Sum;
  uint32_t grantBatch = 1u << 16;  ///< StandingGrant batch
};

/** @brief An algorithm of one collective instance, as Allreduce & co. hold it. */
class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual void run() = 0;
};

// ---- large messages (ring.cpp) ----------------------------------------------------------

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
                    DataType type, ReduceOp op, size_t segElems, uint32_t regions);
  void run();

 private:
  size_t expected() const;
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
                DataType type, size_t segElems);
  /** @pre every earlier local read of the blocks this rank receives is complete. */
  void run();

 private:
  Context& ctx_;
  std::shared_ptr<MemoryRegion> data_;
  std::vector<Chunk> blocks_;
  size_t es_, seg_;
  std::unique_ptr<RecvBuffer> recv_;
  std::unique_ptr<SendBuffer> send_;
};

// ---- small and medium messages (exchange.cpp) -------------------------------------------

/** @brief Allreduce by recursive doubling over @p data (in place). */
std::unique_ptr<Algorithm> makeRecursiveDoubling(Context& ctx, uint32_t tag, void* data,
                                                 const ExchangeParams& p);
/** @brief Allreduce by direct exchange: one round, every rank reduces all P vectors locally. */
std::unique_ptr<Algorithm> makeDirectAllreduce(Context& ctx, uint32_t tag, void* data,
                                               const ExchangeParams& p);
/** @brief Allreduce by a direct reduce-scatter, then a direct allgather: two rounds. */
std::unique_ptr<Algorithm> makeReduceScatterAllgather(Context& ctx, uint32_t tag, void* data,
                                                      const ExchangeParams& p);
/** @brief Allreduce by recursive halving (reduce-scatter) and doubling (allgather). */
std::unique_ptr<Algorithm> makeHalvingDoubling(Context& ctx, uint32_t tag, void* data,
                                               const ExchangeParams& p);
/** @brief Broadcast from @p root: one write per receiver into its landing regions. */
std::unique_ptr<Algorithm> makeOneToAll(Context& ctx, uint32_t tag, void* data, int root,
                                        const ExchangeParams& p);
/** @brief Broadcast from @p root: scatter of P blocks, then a direct allgather of them. */
std::unique_ptr<Algorithm> makeScatterAllgather(Context& ctx, uint32_t tag, void* data, int root,
                                                const ExchangeParams& p);
/** @brief Barrier: zero-byte writes to rank 0, and back once all have arrived. */
std::unique_ptr<Algorithm> makeTreeBarrier(Context& ctx, uint32_t tag, const ExchangeParams& p);
/** @brief Allgather by direct exchange: @p in (count elements) to every peer; @p out gets all. */
std::unique_ptr<Algorithm> makeDirectAllgather(Context& ctx, uint32_t tag, const void* in, void* out,
                                               const ExchangeParams& p);
/** @brief Barrier: a zero-byte write to every peer, then one from every peer. */
std::unique_ptr<Algorithm> makeAllToAllBarrier(Context& ctx, uint32_t tag, const ExchangeParams& p);

}  // namespace hcasim::verbs::detail
