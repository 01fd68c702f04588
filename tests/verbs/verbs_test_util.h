// SPDX-License-Identifier: Apache-2.0
/**
 * @file verbs_test_util.h
 * @brief Ranks as threads on the in-process simulator (or any devices): every rank opens its
 *        own device (hcasim<rank> when there are enough devices), builds a Context over a
 *        shared HashStore and runs the same function; failures name the rank.
 */
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hcasim/verbs/collectives.h"
#include "hcasim/verbs/context.h"
#include "hcasim/verbs/device.h"
#include "hcasim/verbs/store.h"

namespace verbs_test {

using namespace hcasim::verbs;

/** Simulator counter (dlsym: absent on hardware/rxe). */
inline bool simPresent() { return dlsym(RTLD_DEFAULT, "hcasim_sim_counter") != nullptr; }
inline uint64_t simCounter(const std::string& dev, const char* name) {
  using Fn = int (*)(const char*, const char*, uint64_t*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "hcasim_sim_counter"));
  uint64_t v = 0;
  if (!fn || fn(dev.c_str(), name, &v) != 0) ADD_FAILURE() << "no simulator counter " << dev << "/" << name;
  return v;
}

/** Aborts the process if a test runs longer than @p seconds (a hang fails instead of stalling). */
class Watchdog {
 public:
  explicit Watchdog(int seconds, std::string what = "test") {
    t_ = std::thread([this, seconds, what] {
      std::unique_lock<std::mutex> g(mu_);
      if (!cv_.wait_for(g, std::chrono::seconds(seconds), [this] { return stop_; })) {
        std::fprintf(stderr, "\nwatchdog: %s still running after %d s; aborting\n", what.c_str(), seconds);
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    t_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread t_;
};

struct RankOptions {
  PollMode mode = PollMode::BusyPoll;
  ContextOptions ctx;
};

inline std::string deviceFor(int rank) {
  static std::vector<DeviceInfo> devs = Device::list();
  if (devs.empty()) return "";
  return devs[size_t(rank) % devs.size()].name;
}

/** Runs fn(ctx) on @p size ranks, each a thread with its own device and Context. */
inline void runRanks(int size, const RankOptions& o, const std::function<void(Context&)>& fn) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> ts;
  for (int r = 0; r < size; ++r) {
    ts.emplace_back([&, r] {
      try {
        DeviceAttr da;
        da.name = deviceFor(r);
        da.mode = o.mode;
        auto dev = Device::open(da);
        Context ctx(r, size, dev, o.ctx);
        ctx.connectFullMesh(*store);
        fn(ctx);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

}  // namespace verbs_test
