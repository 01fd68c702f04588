// SPDX-License-Identifier: Apache-2.0
/**
 * @file gloo_quiesce.h
 * @brief A workaround for Debian's Gloo (0.5.0), shared by coll-bench --compare-gloo and
 *        tests/gloo: flush an algorithm's last sends before it is destroyed.
 *
 * Gloo's ibverbs Buffer destructor insists that every send has completed ("Destructing buffer
 * expecting completions", an EnforceNotMet thrown from a destructor: std::terminate), but its
 * algorithms do not wait for their last sends (AllreduceRing's notification to the left
 * neighbour, BarrierAllToAll's notifications). A send on every pair, waited for, flushes them:
 * a QP's sends complete in order, and Gloo handles a pair's completions in CQ order (the device
 * loop thread, or in sync mode the waiting thread polling that pair), so when this send's
 * completion is seen the earlier ones have been handled.
 */
#pragma once

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <memory>
#include <vector>

namespace hcasim::gloo_compat {

/** @brief Built once per context (takes a slot); run() before destroying an algorithm. */
class Quiesce {
 public:
  explicit Quiesce(const std::shared_ptr<gloo::Context>& ctx) : in_(size_t(ctx->size)) {
    const int slot = ctx->nextSlot();
    for (int i = 0; i < ctx->size; ++i) {
      if (i == ctx->rank) continue;
      auto& pair = ctx->getPair(i);
      sends_.push_back(pair->createSendBuffer(slot, &out_, sizeof out_));
      recvs_.push_back(pair->createRecvBuffer(slot, &in_[size_t(i)], sizeof out_));
    }
  }
  /** @brief One message to and from every peer, each waited for. */
  void run() {
    for (auto& b : sends_) b->send();
    for (auto& b : sends_) b->waitSend();
    for (auto& b : recvs_) b->waitRecv();
  }

 private:
  int out_ = 0;
  std::vector<int> in_;
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_, recvs_;
};

}  // namespace hcasim::gloo_compat
