// SPDX-License-Identifier: Apache-2.0
// The rdma_cm bootstrap with ranks as processes, one simulated host each, on the fabric of
// `hcasim run -- P ::: P ::: ...` (tests/verbs/CMakeLists.txt runs it). Every process runs the
// same test with its own --rank; command i of `hcasim run` is host i, 192.0.2.(i+1).
//
//   verbs_cm_fabric_test --rank R --size N --port P [gtest flags]
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cm_bootstrap_util.h"
#include "hcasim/verbs/device.h"
#include "hcasim/verbs/error.h"

namespace {

using namespace verbs_cm_test;

int gRank = -1, gSize = -1;
uint16_t gPort = CmBootstrap::kDefaultBasePort;

/** This process's host: its only device (the fabric gives each command one HCA). */
std::string ownDevice() {
  const auto devs = Device::list();
  if (devs.size() != 1) ADD_FAILURE() << "expected one device per process, got " << devs.size();
  return devs.empty() ? "" : devs[0].name;
}

TEST(CmFabric, Collectives) {
  auto ctx = connectCm(gRank, gSize, ownDevice(), simHosts(gSize, gPort));
  for (size_t count : {size_t(1), size_t(gSize) * 3 + 1, size_t(1000), size_t(65537)})
    EXPECT_EQ(checkCollectives(*ctx, count), 0u) << "rank " << gRank << ", " << count << " elements";
}

// The last rank believes the group is one larger than it is: the rank it connects to first
// refuses it, both naming field 'size'; every other rank of the real group gives up waiting
// for it (a TimeoutError) or hears of it (a DISCONNECTED or a refusal) - none hangs.
TEST(CmFabric, WrongGroupSizeIsRefused) {
  const bool liar = gRank == gSize - 1;
  const int size = liar ? gSize + 1 : gSize;
  try {
    connectCm(gRank, size, ownDevice(), simHosts(size, gPort), std::chrono::milliseconds(15000));
    FAIL() << "rank " << gRank << " connected";
  } catch (const AddressError& e) {
    EXPECT_EQ(e.field(), "size") << e.what();
    EXPECT_NE(std::string(e.what()).find("field 'size'"), std::string::npos) << e.what();
  } catch (const Error& e) {
    EXPECT_FALSE(liar) << e.what();  // the liar itself must learn why
    std::printf("rank %d: %s\n", gRank, e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rank"))
      gRank = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--size"))
      gSize = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--port"))
      gPort = uint16_t(std::atoi(argv[i + 1]));
  }
  if (gRank < 0 || gSize < 1 || gRank >= gSize) {
    std::fprintf(stderr, "usage: %s --rank R --size N [--port P] [gtest flags]\n", argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
