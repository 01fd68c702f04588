// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/launcher.h"

#include <cstdlib>
#include <stdexcept>

namespace hcasim::verbs {
namespace {

bool envInt(const char* name, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 24)
    throw std::invalid_argument(std::string(name) + "=" + v + ": not a rank/size number");
  out = int(x);
  return true;
}

}  // namespace

RankInfo resolveRank(int rank, int size) {
  RankInfo r;
  if (rank >= 0 && size >= 0) {
    r = {rank, size, "arguments"};
  } else {
    struct Pair {
      const char* rank;
      const char* size;
      const char* name;
    };
    static const Pair kLaunchers[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_*"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_*"},
        {"PMI_RANK", "PMI_SIZE", "PMI_*"},
    };
    bool found = false;
    for (const Pair& l : kLaunchers) {
      int er = -1, es = -1;
      const bool hr = envInt(l.rank, er), hs = envInt(l.size, es);
      if (hr && hs) {
        r = {rank >= 0 ? rank : er, size >= 0 ? size : es, l.name};
        found = true;
        break;
      }
    }
    if (!found)
      throw std::invalid_argument(
          "rank and size unknown: pass --rank and --size, or run under a launcher that sets "
          "OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/SLURM_NTASKS or PMI_RANK/PMI_SIZE");
  }
  if (r.size < 1)
    throw std::invalid_argument("size " + std::to_string(r.size) + " (from " + r.source + ") < 1");
  if (r.rank < 0 || r.rank >= r.size)
    throw std::invalid_argument("rank " + std::to_string(r.rank) + " (from " + r.source + ") outside 0.." +
                                std::to_string(r.size - 1));
  return r;
}

}  // namespace hcasim::verbs
