// SPDX-License-Identifier: Apache-2.0
// Replays a fuzz harness's corpus without libFuzzer: what the GCC builds (default, ASan, TSan)
// run as a regression test, so every input once found by the fuzzer stays fixed.
//   fuzz_NAME_replay FILE|DIR...   runs LLVMFuzzerTestOneInput on every file given or in each DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return false;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());  // a failed property aborts
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (!std::filesystem::is_directory(p)) {
      if (!replay(p)) return 1;
      ++n;
      continue;
    }
    for (const auto& e : std::filesystem::directory_iterator(p)) {
      if (!e.is_regular_file()) continue;
      if (!replay(e.path())) return 1;
      ++n;
    }
  }
  if (n == 0) {
    std::fprintf(stderr, "replay: no input found (the corpus is missing)\n");
    return 1;
  }
  std::printf("%zu input(s) replayed, every property held\n", n);
  return 0;
}
