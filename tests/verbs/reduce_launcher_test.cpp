// SPDX-License-Identifier: Apache-2.0
// Reduction kernels and launcher environment parsing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "hcasim/verbs/launcher.h"
#include "hcasim/verbs/reduce.h"

using namespace hcasim::verbs;

namespace {
template <class T>
std::vector<T> run(std::vector<T> a, const std::vector<T>& b, DataType t, ReduceOp op) {
  reduceInto(a.data(), b.data(), a.size(), t, op);
  return a;
}
}  // namespace

TEST(Reduce, EveryTypeAndOp) {
  const std::vector<float> fa = {1.5f, -2, 0, 8}, fb = {2, -3, -0.5f, 0.25f};
  EXPECT_EQ(run(fa, fb, DataType::Float, ReduceOp::Sum), (std::vector<float>{3.5f, -5, -0.5f, 8.25f}));
  EXPECT_EQ(run(fa, fb, DataType::Float, ReduceOp::Prod), (std::vector<float>{3, 6, -0.0f, 2}));
  EXPECT_EQ(run(fa, fb, DataType::Float, ReduceOp::Min), (std::vector<float>{1.5f, -3, -0.5f, 0.25f}));
  EXPECT_EQ(run(fa, fb, DataType::Float, ReduceOp::Max), (std::vector<float>{2, -2, 0, 8}));
  const std::vector<double> da = {1e300, -1, 3}, db = {1e300, 4, -3};
  EXPECT_EQ(run(da, db, DataType::Double, ReduceOp::Sum), (std::vector<double>{2e300, 3, 0}));
  EXPECT_EQ(run(da, db, DataType::Double, ReduceOp::Max), (std::vector<double>{1e300, 4, 3}));
  const std::vector<int32_t> ia = {std::numeric_limits<int32_t>::max(), -7, 5}, ib = {1, 3, -5};
  // Integer overflow wraps (two's complement), defined here rather than UB.
  EXPECT_EQ(run(ia, ib, DataType::Int32, ReduceOp::Sum),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -4, 0}));
  EXPECT_EQ(run(ia, ib, DataType::Int32, ReduceOp::Prod),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::max(), -21, -25}));
  EXPECT_EQ(run(ia, ib, DataType::Int32, ReduceOp::Min), (std::vector<int32_t>{1, -7, -5}));
  const std::vector<int64_t> la = {int64_t(1) << 40, -9}, lb = {int64_t(1) << 30, 10};
  EXPECT_EQ(run(la, lb, DataType::Int64, ReduceOp::Prod), (std::vector<int64_t>{0, -90}));  // 2^70 wraps to 0
  EXPECT_EQ(run(la, lb, DataType::Int64, ReduceOp::Max), (std::vector<int64_t>{int64_t(1) << 40, 10}));
  EXPECT_EQ(run(la, lb, DataType::Int64, ReduceOp::Sum),
            (std::vector<int64_t>{(int64_t(1) << 40) + (int64_t(1) << 30), 1}));
}

// reduceTo(dst, a, b) must equal a copy of a followed by reduceInto(copy, b), element for element
// and bit for bit, also when dst is a or b (the allreduce rounds write over their own input).
template <class T>
void reduceToMatchesReduceInto(DataType t) {
  std::vector<T> a(37), b(37);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = T(int64_t(i * 7 % 19) - 9) / T(2);  // halves: exact for every op, integers truncate
    b[i] = T(int64_t(i * 5 % 23) - 11);
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod}) {
    const std::vector<T> want = run(a, b, t, op);
    std::vector<T> dst(a.size(), T(99));
    reduceTo(dst.data(), a.data(), b.data(), a.size(), t, op);
    EXPECT_EQ(0, std::memcmp(dst.data(), want.data(), dst.size() * sizeof(T)))
        << dataTypeName(t) << " " << reduceOpName(op);
    std::vector<T> ina = a, inb = b;
    reduceTo(ina.data(), ina.data(), b.data(), a.size(), t, op);
    reduceTo(inb.data(), a.data(), inb.data(), a.size(), t, op);
    EXPECT_EQ(ina, want) << "dst == a, " << reduceOpName(op);
    EXPECT_EQ(inb, want) << "dst == b, " << reduceOpName(op);
  }
}

TEST(Reduce, ReduceToIsCopyThenReduceInto) {
  reduceToMatchesReduceInto<float>(DataType::Float);
  reduceToMatchesReduceInto<double>(DataType::Double);
  reduceToMatchesReduceInto<int32_t>(DataType::Int32);
  reduceToMatchesReduceInto<int64_t>(DataType::Int64);
  // Wrapping sums and products, as reduceInto's.
  const int32_t big[] = {std::numeric_limits<int32_t>::max(), 1 << 20}, one[] = {1, 1 << 12};
  int32_t out[2];
  reduceTo(out, big, one, 2, DataType::Int32, ReduceOp::Sum);
  EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min());
  reduceTo(out, big, one, 2, DataType::Int32, ReduceOp::Prod);
  EXPECT_EQ(out[1], 0);  // 2^32 wraps
}

TEST(Reduce, NamesRoundTrip) {
  for (DataType t : {DataType::Float, DataType::Double, DataType::Int32, DataType::Int64})
    EXPECT_EQ(parseDataType(dataTypeName(t)), t);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod})
    EXPECT_EQ(parseReduceOp(reduceOpName(op)), op);
  EXPECT_EQ(dataTypeSize(DataType::Double), 8u);
  EXPECT_THROW(parseDataType("half"), std::invalid_argument);
  EXPECT_THROW(parseReduceOp("avg"), std::invalid_argument);
}

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                          "PMI_RANK", "PMI_SIZE"})
      unsetenv(v);
  }
};

TEST_F(Launcher, ArgumentsWin) {
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  const RankInfo r = resolveRank(1, 2);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.size, 2);
  EXPECT_EQ(r.source, "arguments");
}

TEST_F(Launcher, OpenMpiThenSlurmThenPmi) {
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  RankInfo r = resolveRank();
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.size, 8);
  EXPECT_EQ(r.source, "SLURM_*");
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  r = resolveRank();
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.source, "OMPI_COMM_WORLD_*");
  clear();
  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "1", 1);
  EXPECT_EQ(resolveRank().source, "PMI_*");
  // A size given on the command line with the rank from the launcher.
  r = resolveRank(-1, 1);
  EXPECT_EQ(r.size, 1);
}

TEST_F(Launcher, Errors) {
  EXPECT_THROW(resolveRank(), std::invalid_argument);  // nothing set
  EXPECT_THROW(resolveRank(2, 2), std::invalid_argument);
  EXPECT_THROW(resolveRank(0, 0), std::invalid_argument);
  setenv("SLURM_PROCID", "x", 1);
  setenv("SLURM_NTASKS", "2", 1);
  EXPECT_THROW(resolveRank(), std::invalid_argument);
  setenv("SLURM_PROCID", "4", 1);
  try {
    resolveRank();
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM"), std::string::npos) << e.what();
  }
}
