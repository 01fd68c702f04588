// SPDX-License-Identifier: Apache-2.0
/**
 * @file launcher.h
 * @brief Rank and size from explicit values or a launcher's environment.
 */
#pragma once

#include <string>

namespace hcasim::verbs {

struct RankInfo {
  int rank = -1;
  int size = -1;
  std::string source;  ///< "arguments", "OMPI_COMM_WORLD_*", "SLURM_*", "PMI_*"
};

/**
 * @brief @p rank / @p size if both are >= 0; otherwise from OMPI_COMM_WORLD_RANK/SIZE,
 * then SLURM_PROCID/SLURM_NTASKS, then PMI_RANK/PMI_SIZE. Throws std::invalid_argument if
 * nothing gives both, or if the values are inconsistent (size < 1, rank outside 0..size-1).
 */
RankInfo resolveRank(int rank = -1, int size = -1);

}  // namespace hcasim::verbs
