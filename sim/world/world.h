// SPDX-License-Identifier: Apache-2.0
/**
 * @file world.h
 * @brief The in-process world: several simulated HCAs in this process, wired together, each
 *        offered to the driver as an HcaLink, under one SystemC kernel.
 *
 * Configured from the environment on first use (hcasim run sets these):
 *   HCASIM_HOSTS=N (2), HCASIM_PROFILE=name (roce-100g), HCASIM_TRACE=file|- ,
 *   HCASIM_TRACE_FILTER=spec, HCASIM_STATS=file|- (counters at exit), HCASIM_IDLE_US (2000),
 *   HCASIM_SEED=N (1).
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "hca.h"
#include "hca_link.h"
#include "text_trace.h"
#include "wire.h"

namespace hcasim::sim {

struct WorldConfig {
  uint32_t hosts = 2;
  std::string profile = "roce-100g";
  std::string trace;         ///< "" off, "-" stderr, else a file
  std::string trace_filter;
  std::string stats;         ///< "" off, "-" stderr, else a file
  uint32_t idle_us = 2000;
  uint64_t seed = 1;
  /** @brief Read HCASIM_*; on a bad value sets @p err (naming the variable) and returns false. */
  static bool from_env(WorldConfig& cfg, std::string& err);
};

class SimLink;

class World {
 public:
  /** @brief The process's world, built from the environment on first use (nullptr on bad config). */
  static World* get();
  explicit World(const WorldConfig& cfg);
  ~World();

  const WorldConfig& config() const { return cfg_; }
  size_t size() const { return hcas_.size(); }
  model::Hca& hca(size_t i) { return *hcas_[i]; }
  model::Hca* find(const std::string& name);
  std::vector<drv::HcaLink*> links();
  /** @brief Counters of every HCA, as text (one block per device) or JSON. */
  std::string stats_text();
  std::string stats_json();

 private:
  WorldConfig cfg_;
  const model::TimingProfile* prof_;
  TraceHub hub_;
  std::unique_ptr<TextTraceSink> text_;
  model::Tracer wire_tracer_;
  std::vector<std::unique_ptr<model::Hca>> hcas_;
  std::vector<std::unique_ptr<CableEnd>> cables_;
  std::unique_ptr<Switch> switch_;
  std::vector<std::unique_ptr<SimLink>> links_;
};

}  // namespace hcasim::sim
