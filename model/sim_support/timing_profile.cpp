// SPDX-License-Identifier: Apache-2.0
#include "timing_profile.h"

namespace hcasim::model {
namespace {
// Figures are round numbers typical of the class of hardware, not any vendor's datasheet.
const TimingProfile kProfiles[] = {
    {"roce-100g", 100e9, 100'000, 150'000, 700'000, 250'000, 200e9, 4'000, 600'000, 8'000, 12'000, 1'000'000,
     16, 4096},
    {"roce-25g", 25e9, 100'000, 200'000, 900'000, 300'000, 64e9, 5'000, 800'000, 12'000, 20'000, 1'500'000, 8,
     4096},
    // Slow enough that every step of one work request is microseconds apart: good for labs.
    {"teaching", 1e9, 1'000'000, 500'000, 2'000'000, 1'000'000, 8e9, 50'000, 2'000'000, 100'000, 100'000,
     2'000'000, 4, 1024},
};
}  // namespace

const TimingProfile* find_profile(const std::string& name) {
  for (const auto& p : kProfiles)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> profile_names() {
  std::vector<std::string> v;
  for (const auto& p : kProfiles) v.push_back(p.name);
  return v;
}

const TimingProfile& default_profile() { return kProfiles[0]; }

}  // namespace hcasim::model
