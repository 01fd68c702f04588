// SPDX-License-Identifier: Apache-2.0
/**
 * @file collectives.h
 * @brief Collectives over a Context's pairs: allreduce, broadcast, allgather, reduce-scatter,
 *        barrier.
 *
 * Each collective is an object: the constructor registers memory and creates the slot
 * buffers once (every rank must construct collectives in the same order: they take tags from
 * the Context), run() executes it and may be called any number of times. The free functions
 * construct, run once and destroy.
 *
 * Data moves with RDMA writes into the peer's memory, gated by grants (see buffer.h):
 *  - ring reduce-scatter: at step s rank r writes chunk (r-s-1) mod P into its right
 *    neighbour's scratch regions (R regions of one segment each, used round robin; a region
 *    is granted again after it has been reduced); the receiver reduces into its own data and
 *    forwards that segment at the next step, so segments pipeline through the ring;
 *  - ring allgather: writes go straight into the neighbour's output at their final offset;
 *  - allreduce = reduce-scatter + allgather in place; broadcast = a pipelined chain from the
 *    root; barrier = dissemination with small messages.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hcasim/verbs/context.h"
#include "hcasim/verbs/reduce.h"

namespace hcasim::verbs {

enum class AllreduceAlgorithm {
  Auto,         ///< Ring if a rank's chunk fits one segment, else RingChunked
  Ring,         ///< one write per chunk and step, two scratch regions
  RingChunked,  ///< chunks cut into segments that pipeline through the ring
};
const char* allreduceAlgorithmName(AllreduceAlgorithm a);

struct CollectiveOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Auto;
  size_t segmentBytes = 256 * 1024;  ///< pipelining unit (RingChunked, broadcast, allgather)
  uint32_t regions = 4;              ///< scratch regions of RingChunked (>= 2)
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual void run() = 0;
};

/** @brief In place: data[0..count) becomes the reduction over all ranks. */
class Allreduce : public Collective {
 public:
  Allreduce(Context& ctx, void* data, size_t count, DataType type, ReduceOp op,
            CollectiveOptions opts = CollectiveOptions());
  ~Allreduce() override;
  void run() override;
  AllreduceAlgorithm algorithm() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/** @brief In place: every rank's data[0..count) becomes the root's. */
class Broadcast : public Collective {
 public:
  Broadcast(Context& ctx, void* data, size_t count, DataType type, int root,
            CollectiveOptions opts = CollectiveOptions());
  ~Broadcast() override;
  void run() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/** @brief out[r*count .. (r+1)*count) = rank r's in[0..count). @p in may be out + rank*count. */
class Allgather : public Collective {
 public:
  Allgather(Context& ctx, const void* in, void* out, size_t count, DataType type,
            CollectiveOptions opts = CollectiveOptions());
  ~Allgather() override;
  void run() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/** @brief out[0..count) = reduction over ranks of their in[rank*count .. (rank+1)*count). */
class ReduceScatter : public Collective {
 public:
  ReduceScatter(Context& ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                CollectiveOptions opts = CollectiveOptions());
  ~ReduceScatter() override;
  void run() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/** @brief Returns on a rank only after every rank has entered. */
class Barrier : public Collective {
 public:
  explicit Barrier(Context& ctx);
  ~Barrier() override;
  void run() override;

 private:
  Context& ctx_;
  uint32_t tag_;
};

void allreduce(Context& ctx, void* data, size_t count, DataType type, ReduceOp op,
               CollectiveOptions opts = CollectiveOptions());
void broadcast(Context& ctx, void* data, size_t count, DataType type, int root,
               CollectiveOptions opts = CollectiveOptions());
void allgather(Context& ctx, const void* in, void* out, size_t count, DataType type,
               CollectiveOptions opts = CollectiveOptions());
void reduceScatter(Context& ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                   CollectiveOptions opts = CollectiveOptions());
void barrier(Context& ctx);

}  // namespace hcasim::verbs
