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

#include "hcasim/verbs/cm_bootstrap.h"
#include "hcasim/verbs/device.h"
#include "hcasim/verbs/pair.h"
#include "hcasim/verbs/store.h"

namespace hcasim::verbs {

struct ContextOptions {
  PairOptions pair;                     ///< for every pair (pair.timeout bounds every wait)
  std::string prefix = "hcasim-verbs";  ///< store keys are "<prefix>/addr/<rank>", ...; with rdma_cm
                                        ///< its hash tells groups apart (CmHello::group)
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

  /**
   * @brief The same full mesh, connected through the RDMA connection manager (librdmacm)
   * instead of a Store: rank i listens on @p cm's addresses[i], port basePort + i, accepts a
   * connection from every higher rank and connects to every lower one (see cm_bootstrap.h).
   * Each Pair keeps the QP it created on this Context's Device; the CM only carries its number
   * (rdma_conn_param.qp_num) and computes the RTR/RTS attributes (rdma_init_qp_attr(3)); the
   * active side completes with rdma_establish(3). The private data names the sender's rank,
   * the rank it means, the group size and ContextOptions::prefix's hash; the receiving side
   * checks them and refuses a bad one with a REJ carrying the reason, so both ends throw an
   * AddressError naming the field ("size", "rank", "peer", "group", ...).
   *
   * Returns once every pair of this rank is connected on both ends (an accepting rank waits
   * for the RTU), so no packet reaches a QP that is not ready, without a barrier. A peer that
   * is not listening yet (the CM's REJ, "invalid service ID"), an address nobody answers for
   * yet, or a lost request is retried until options().pair.timeout has passed since the call;
   * then a TimeoutError names every rank still missing and what it was waiting for. An
   * address the CM cannot route to at all (ENETUNREACH) is an IoError at once.
   *
   * @p cm must name exactly size() IPv4 addresses (AddressError "addresses" otherwise), and
   * addresses[rank()] must belong to this Context's Device (IoError otherwise). The CM ids
   * live as long as the Context, after its pairs.
   */
  void connectFullMesh(const CmBootstrap& cm);

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
  /// rdma_cm's event channel and ids (connectFullMesh(const CmBootstrap&)), type-erased so that
  /// only cm_bootstrap.cpp sees librdmacm; destroyed after pairs_ (declared before it).
  std::shared_ptr<void> cm_;
  /** @brief One unconnected Pair per peer (null at rank()), all in one PairGroup. */
  std::vector<std::unique_ptr<Pair>> newPairs() const;
  std::vector<std::unique_ptr<Pair>> pairs_;
  uint32_t tag_ = 0;
  bool closed_ = false;
};

}  // namespace hcasim::verbs
