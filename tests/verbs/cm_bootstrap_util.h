// SPDX-License-Identifier: Apache-2.0
/**
 * @file cm_bootstrap_util.h
 * @brief What the rdma_cm bootstrap tests share: the simulated hosts' addresses, a Context
 *        connected through the CM, and collectives whose every element is checked.
 */
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hcasim/verbs/cm_bootstrap.h"
#include "hcasim/verbs/collectives.h"
#include "hcasim/verbs/context.h"
#include "hcasim/verbs/device.h"

namespace verbs_cm_test {

using namespace hcasim::verbs;

/** Host i of the simulator (hcasim<i>, command i of `hcasim run`) is 192.0.2.(i+1). */
inline std::string hostAddress(int i) { return "192.0.2." + std::to_string(i + 1); }

/** The first @p n hosts' addresses, base port @p port. */
inline CmBootstrap simHosts(int n, uint16_t port) {
  CmBootstrap b;
  for (int i = 0; i < n; ++i) b.addresses.push_back(hostAddress(i));
  b.basePort = port;
  return b;
}

/** Rank @p rank's context on @p device, connected through @p cm. */
inline std::unique_ptr<Context> connectCm(
    int rank, int size, const std::string& device, const CmBootstrap& cm,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(30000),
    PollMode mode = PollMode::BusyPoll) {
  DeviceAttr da;
  da.name = device;
  da.mode = mode;
  ContextOptions co;
  co.pair.timeout = timeout;
  auto ctx = std::make_unique<Context>(rank, size, Device::open(da), co);
  ctx->connectFullMesh(cm);
  return ctx;
}

/**
 * Allreduce (int64 sum, then float max) and broadcast (double, from the last rank) of @p count
 * elements, each element of each result checked against what it must be. Returns the number
 * of wrong elements (also reported through gtest).
 */
inline size_t checkCollectives(Context& ctx, size_t count) {
  const int r = ctx.rank(), n = ctx.size();
  size_t wrong = 0;
  std::vector<int64_t> sum(count);
  for (size_t i = 0; i < count; ++i) sum[i] = int64_t(r + 1) * 1000003 + int64_t(i);
  allreduce(ctx, sum.data(), count, DataType::Int64, ReduceOp::Sum);
  for (size_t i = 0; i < count; ++i) {
    const int64_t want = int64_t(n) * (n + 1) / 2 * 1000003 + int64_t(n) * int64_t(i);
    if (sum[i] != want && wrong++ < 5)
      ADD_FAILURE() << "rank " << r << " allreduce sum[" << i << "] = " << sum[i] << ", want " << want;
  }
  std::vector<float> mx(count);
  for (size_t i = 0; i < count; ++i) mx[i] = float((size_t(r) * 7 + i) % 101);
  allreduce(ctx, mx.data(), count, DataType::Float, ReduceOp::Max);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < n; ++q) want = std::max(want, float((size_t(q) * 7 + i) % 101));
    if (mx[i] != want && wrong++ < 5)
      ADD_FAILURE() << "rank " << r << " allreduce max[" << i << "] = " << mx[i] << ", want " << want;
  }
  const int root = n - 1;
  std::vector<double> b(count, -1.0);
  if (r == root)
    for (size_t i = 0; i < count; ++i) b[i] = double(i) * 0.5 + 3.25;
  broadcast(ctx, b.data(), count, DataType::Double, root);
  for (size_t i = 0; i < count; ++i)
    if (b[i] != double(i) * 0.5 + 3.25 && wrong++ < 5)
      ADD_FAILURE() << "rank " << r << " broadcast[" << i << "] = " << b[i];
  return wrong;
}

}  // namespace verbs_cm_test
