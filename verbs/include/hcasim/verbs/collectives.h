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
 * Data moves with RDMA writes into the peer's memory, gated by grants (see buffer.h). Which
 * algorithm runs is chosen per instance from the message size and the rank count (Auto) or
 * forced through CollectiveOptions; docs/verbs.md gives the switch points and why.
 *
 * Large messages (bandwidth):
 *  - ring reduce-scatter: at step s rank r writes chunk (r-s-1) mod P into its right
 *    neighbour's scratch regions (R regions of one segment each, used round robin; a region
 *    is granted again after it has been reduced); the receiver reduces into its own data and
 *    forwards that segment at the next step, so segments pipeline through the ring;
 *  - ring allgather: writes go straight into the neighbour's output at their final offset;
 *  - allreduce = reduce-scatter + allgather in place; broadcast = a pipelined chain from the
 *    root.
 *
 * Small messages (latency): few rounds, one RDMA WRITE WITH IMM per peer and round (inline when
 * it fits the QP's inline size), no grant or other control message per run:
 *  - allreduce by recursive doubling (log2 P rounds of the whole vector; ranks beyond the
 *    largest power of two fold into a partner first), by direct exchange (every rank writes its
 *    vector to every other, one round) or, for medium sizes, recursive halving + doubling;
 *  - broadcast one-to-all (the root writes into every rank's landing region) or, for large
 *    messages, scatter + direct allgather; allgather by direct exchange; barrier all-to-all or
 *    through rank 0 with zero-byte writes.
 * Their writes land in per-peer *landing regions*, two per peer and round, used by run parity:
 * a peer writes run n into region n mod 2 only after it has received this rank's write of run
 * n-1 for the same round, which this rank made after it had consumed run n-2 from that region.
 * The exchange itself is the permission, so the landing regions are granted once, ahead
 * (Pair grants are counts), and no data is overwritten before it was consumed.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hcasim/verbs/context.h"
#include "hcasim/verbs/reduce.h"

namespace hcasim::verbs {

/** @brief Allreduce (and, Ring/RingChunked only, reduce-scatter) algorithms. */
enum class AllreduceAlgorithm {
  Auto,                    ///< by size and rank count: autoAllreduce()
  Ring,                    ///< one write per chunk and step, two scratch regions
  RingChunked,             ///< chunks cut into segments that pipeline through the ring
  RecursiveDoubling,       ///< log2 P rounds, the whole vector each (+ fold for non-powers of two)
  HalvingDoubling,         ///< recursive-halving reduce-scatter + recursive-doubling allgather
  Direct,                  ///< every rank writes its vector to every other and reduces locally
  ReduceScatterAllgather,  ///< direct reduce-scatter (block q to rank q), then direct allgather
};
/** @brief Broadcast algorithms. */
enum class BroadcastAlgorithm {
  Auto,              ///< by size and rank count: autoBroadcast()
  Chain,             ///< pipelined chain from the root, segments forwarded as they arrive
  OneToAll,          ///< the root writes into every rank's landing region; one round
  ScatterAllgather,  ///< the root scatters P blocks, then a direct allgather; two rounds
};
/** @brief Allgather algorithms. */
enum class AllgatherAlgorithm {
  Auto,    ///< by size and rank count: autoAllgather()
  Ring,    ///< pipelined ring, straight into the neighbour's output
  Direct,  ///< every rank writes its block into every other's landing region; one round
};
/** @brief Barrier algorithms. */
enum class BarrierAlgorithm {
  Auto,           ///< autoBarrier()
  Dissemination,  ///< ceil(log2 P) rounds of one message
  AllToAll,       ///< every rank writes zero bytes to every other; one round
  Tree,           ///< zero-byte writes to rank 0 and back: two rounds, 2(P-1) writes
};

/**
 * @brief Which costs Auto's switch points are measured for (docs/verbs.md, "Choosing an
 * algorithm"). An HCA moves bytes in hardware and a round costs microseconds, so fewer bytes
 * through the busiest link wins early; a software RDMA device (rxe, siw) or an oversubscribed
 * host pays for every message in host CPU time, so fewer rounds and messages win.
 */
enum class Tuning {
  Auto,      ///< by the device: Software for the kernel's software devices (rxe, siw), else Hardware
  Hardware,  ///< measured in the simulator's lockstep clock (the modelled HCA's time)
  Software,  ///< measured in its realtime clock (host scheduling in every step), as on rxe
};

/** @brief "auto", "ring", "ring-chunked", "recursive-doubling", "halving-doubling", "direct",
 *  "reduce-scatter-allgather". */
const char* allreduceAlgorithmName(AllreduceAlgorithm a);
/// "auto", "chain", "one-to-all", "scatter-allgather"
const char* broadcastAlgorithmName(BroadcastAlgorithm a);
const char* allgatherAlgorithmName(AllgatherAlgorithm a);  ///< "auto", "ring", "direct"
const char* barrierAlgorithmName(BarrierAlgorithm a);      ///< "auto", "dissemination", "all-to-all", "tree"
const char* tuningName(Tuning t);                          ///< "auto", "hardware", "software"
/** @brief The names above back to the enum; std::invalid_argument listing the names otherwise. */
AllreduceAlgorithm parseAllreduceAlgorithm(const std::string& s);
Tuning parseTuning(const std::string& s);
BroadcastAlgorithm parseBroadcastAlgorithm(const std::string& s);
AllgatherAlgorithm parseAllgatherAlgorithm(const std::string& s);
BarrierAlgorithm parseBarrierAlgorithm(const std::string& s);

struct CollectiveOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Auto;  ///< allreduce, reduce-scatter
  BroadcastAlgorithm broadcast = BroadcastAlgorithm::Auto;
  AllgatherAlgorithm allgather = AllgatherAlgorithm::Auto;
  BarrierAlgorithm barrier = BarrierAlgorithm::Auto;
  /// Auto's switch points. Every rank must resolve the same (Auto does on one kind of device).
  Tuning tuning = Tuning::Auto;
  size_t segmentBytes = 256 * 1024;  ///< pipelining unit (RingChunked, broadcast, allgather)
  uint32_t regions = 4;              ///< scratch regions of RingChunked (>= 2)
  /**
   * Landing regions of the few-round algorithms are granted this many writes ahead, twice, and
   * topped up by as many when fewer are left: one grant message per this many runs. Tests use
   * small values to run the top-up.
   */
  uint32_t grantBatch = 1u << 16;
};

/**
 * @brief The tuning @p t stands for on a device named @p device_name with vendor ID
 * @p vendor_id: Auto is Software for rxe (vendor 0xffffff) and siw (0x626d74), else Hardware.
 */
Tuning resolveTuning(Tuning t, const std::string& device_name, uint32_t vendor_id);
/** @brief The same for @p ctx's device. */
Tuning resolveTuning(Tuning t, const Context& ctx);

/**
 * @brief What Auto runs for an allreduce of @p bytes over @p ranks (the same on every rank).
 * The switch points were measured (docs/verbs.md, "Choosing an algorithm"); @p o.tuning must
 * be resolved (not Auto: that is taken as Hardware).
 */
AllreduceAlgorithm autoAllreduce(size_t bytes, int ranks, const CollectiveOptions& o = CollectiveOptions());
/** @brief What Auto runs for a broadcast of @p bytes over @p ranks. */
BroadcastAlgorithm autoBroadcast(size_t bytes, int ranks, Tuning t = Tuning::Hardware);
/** @brief What Auto runs for an allgather whose output is @p bytes over @p ranks. */
AllgatherAlgorithm autoAllgather(size_t bytes, int ranks);
/** @brief What Auto runs for a barrier over @p ranks, its ranks waiting in @p mode. */
BarrierAlgorithm autoBarrier(int ranks, Tuning t = Tuning::Hardware, PollMode mode = PollMode::BusyPoll);

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
  /** @brief The algorithm that runs (never Auto). */
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
  /** @brief The algorithm that runs (never Auto). */
  BroadcastAlgorithm algorithm() const;

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
  /** @brief The algorithm that runs (never Auto). */
  AllgatherAlgorithm algorithm() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/**
 * @brief out[0..count) = reduction over ranks of their in[rank*count .. (rank+1)*count).
 * Runs the ring (CollectiveOptions::algorithm Auto, Ring or RingChunked; any other is a
 * std::invalid_argument).
 */
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
  explicit Barrier(Context& ctx, CollectiveOptions opts = CollectiveOptions());
  ~Barrier() override;
  void run() override;
  /** @brief The algorithm that runs (never Auto). */
  BarrierAlgorithm algorithm() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void allreduce(Context& ctx, void* data, size_t count, DataType type, ReduceOp op,
               CollectiveOptions opts = CollectiveOptions());
void broadcast(Context& ctx, void* data, size_t count, DataType type, int root,
               CollectiveOptions opts = CollectiveOptions());
void allgather(Context& ctx, const void* in, void* out, size_t count, DataType type,
               CollectiveOptions opts = CollectiveOptions());
void reduceScatter(Context& ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                   CollectiveOptions opts = CollectiveOptions());
void barrier(Context& ctx, CollectiveOptions opts = CollectiveOptions());

}  // namespace hcasim::verbs
