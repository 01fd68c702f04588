// SPDX-License-Identifier: Apache-2.0
/**
 * @file context.h
 * @brief A rank's view of a group: its device and one Pair per peer (full mesh).
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hcasim/verbs/device.h"
#include "hcasim/verbs/pair.h"
#include "hcasim/verbs/store.h"

namespace hcasim::verbs {

struct ContextOptions {
  PairOptions pair;                     ///< for every pair (pair.timeout bounds every wait)
  std::string prefix = "hcasim-verbs";  ///< store keys are "<prefix>/addr/<rank>", ...
  bool readyBarrier = true;             ///< after connecting, wait until every rank has
};

class Context {
 public:
  Context(int rank, int size, std::shared_ptr<Device> dev, ContextOptions opts = ContextOptions());
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /**
   * @brief Creates a Pair per peer, publishes "<prefix>/addr/<rank>" (the addresses of all
   * its pairs, Address::kSize bytes each, zeros at its own index), reads every peer's entry,
   * connects, and (readyBarrier) waits for "<prefix>/ready/<r>" of every rank, so no rank
   * sends before every peer QP is in RTR. The pairs fail together (PairGroup): once one of them
   * gets an error completion (a link down past the retry budget: IBV_WC_RETRY_EXC_ERR), every
   * wait on any of them throws an IoError naming the waiting pair and the failed one.
   */
  void connectFullMesh(Store& store);

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device& device() const { return *dev_; }
  const std::shared_ptr<Device>& devicePtr() const { return dev_; }
  const ContextOptions& options() const { return opts_; }
  /**
   * @brief Orderly shutdown: tells every peer "done" (a message queued behind everything
   * sent so far) and waits for every peer's "done", serving the connections meanwhile, so
   * no rank tears its QPs down while a peer still sends to it. The destructor calls it.
   * Message tag 0xffffffff is reserved for it.
   */
  void close();

  /** @brief The pair to @p peer (throws std::out_of_range for self or a bad rank). */
  Pair& pair(int peer) const;
  /** @brief Collective instances take tags in construction order: the same on every rank. */
  uint32_t nextTag() { return ++tag_; }

 private:
  int rank_, size_;
  std::shared_ptr<Device> dev_;
  ContextOptions opts_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  uint32_t tag_ = 0;
  bool closed_ = false;
};

}  // namespace hcasim::verbs
