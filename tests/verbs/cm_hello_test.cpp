// SPDX-License-Identifier: Apache-2.0
// The rdma_cm bootstrap's pure part: the address list, and the private data of connection
// requests, accepts and rejects (cm_bootstrap.h). Every rejection names its field.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "hcasim/verbs/cm_bootstrap.h"
#include "hcasim/verbs/error.h"

namespace {

using namespace hcasim::verbs;

std::string fieldOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const AddressError& e) {
    return e.field();
  }
  return "(no error)";
}

CmHello request(uint32_t size, uint32_t rank, uint32_t peer) {
  CmHello h;
  h.kind = CmHello::kRequest;
  h.size = size;
  h.rank = rank;
  h.peer = peer;
  h.group = CmHello::groupTag("g");
  return h;
}

TEST(CmBootstrapSpec, ParsesOneAddressPerRank) {
  const CmBootstrap b = CmBootstrap::parse("192.0.2.1,192.0.2.2,192.0.2.2", 5000);
  ASSERT_EQ(b.addresses.size(), 3u);
  EXPECT_EQ(b.addresses[2], "192.0.2.2");  // ranks may share an address: their ports differ
  EXPECT_EQ(b.port(2), 5002);
  EXPECT_EQ(b.endpoint(1), "192.0.2.2:5001");
  EXPECT_NO_THROW(b.validate(3));
}

TEST(CmBootstrapSpec, RejectsMalformedLists) {
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse(""); }), "addresses");
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse("192.0.2.1,"); }), "addresses");
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse("192.0.2.1,host1"); }), "addresses");
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse("192.0.2.300"); }), "addresses");
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse("192.0.2.1,192.0.2.2").validate(3); }), "addresses");
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse("192.0.2.1,192.0.2.2", 65535).validate(2); }), "basePort");
  EXPECT_EQ(fieldOf([] { CmBootstrap::parse("192.0.2.1", 0).validate(1); }), "basePort");
  EXPECT_NO_THROW(CmBootstrap::parse("192.0.2.1,192.0.2.2", 65534).validate(2));
}

TEST(CmHelloEncoding, RoundTripsAndFitsAConnectionRequest) {
  const CmHello h = request(4, 3, 1);
  auto b = h.bytes();
  EXPECT_EQ(b.size(), CmHello::kSize);
  EXPECT_LE(b.size(), 56u);  // rdma_connect's private data on IB/RoCE
  b.resize(56, 0);           // as the CM delivers it: padded with zeros
  const CmHello d = CmHello::fromBytes(b.data(), b.size());
  EXPECT_EQ(d.kind, CmHello::kRequest);
  EXPECT_EQ(d.size, 4u);
  EXPECT_EQ(d.rank, 3u);
  EXPECT_EQ(d.peer, 1u);
  EXPECT_EQ(d.group, CmHello::groupTag("g"));
  EXPECT_NE(CmHello::groupTag("g"), CmHello::groupTag("h"));
}

TEST(CmHelloEncoding, EveryDecodingRejectionNamesItsField) {
  const auto good = request(4, 3, 1).bytes();
  auto with = [&](size_t at, uint8_t v) {
    auto b = good;
    b[at] = v;
    return fieldOf([b] { CmHello::fromBytes(b.data(), b.size()); });
  };
  EXPECT_EQ(fieldOf([&] { CmHello::fromBytes(good.data(), 10); }), "length");
  EXPECT_EQ(fieldOf([] { CmHello::fromBytes(nullptr, 0); }), "length");
  EXPECT_EQ(with(0, 'X'), "magic");
  EXPECT_EQ(with(2, 9), "version");
  EXPECT_EQ(with(3, 7), "kind");
  EXPECT_EQ(with(20, 1), "reserved");
  EXPECT_EQ(with(9, 0x55), "checksum");
}

TEST(CmHelloCheck, EnforcesTheConnectionRule) {
  const uint32_t g = CmHello::groupTag("g");
  auto check = [&](CmHello h, CmHello::Kind want, int self, int size) {
    return fieldOf([=] { h.check(want, self, size, g, "192.0.2.9:1"); });
  };
  EXPECT_EQ(check(request(4, 3, 1), CmHello::kRequest, 1, 4), "(no error)");
  EXPECT_EQ(check(request(3, 3, 1), CmHello::kRequest, 1, 4), "size");
  EXPECT_EQ(check(request(4, 3, 2), CmHello::kRequest, 1, 4), "peer");
  EXPECT_EQ(check(request(4, 9, 1), CmHello::kRequest, 1, 4), "rank");
  EXPECT_EQ(check(request(4, 0, 1), CmHello::kRequest, 1, 4), "rank");  // lower ranks accept
  EXPECT_EQ(check(request(4, 1, 1), CmHello::kRequest, 1, 4), "rank");
  EXPECT_EQ(check(request(4, 3, 1), CmHello::kAccept, 1, 4), "kind");
  CmHello acc = request(4, 0, 2);
  acc.kind = CmHello::kAccept;
  EXPECT_EQ(check(acc, CmHello::kAccept, 2, 4), "(no error)");
  acc.rank = 3;
  EXPECT_EQ(check(acc, CmHello::kAccept, 2, 4), "rank");  // higher ranks connect
  CmHello other = request(4, 3, 1);
  other.group = CmHello::groupTag("h");
  EXPECT_EQ(check(other, CmHello::kRequest, 1, 4), "group");
}

TEST(CmHelloReject, CarriesFieldAndReasonWithinTheRejectLimit) {
  const auto b = CmHello::rejectBytes("size", std::string(400, 'x'));
  EXPECT_EQ(b.size(), 148u);
  std::string field, reason;
  ASSERT_TRUE(CmHello::parseReject(b.data(), b.size(), field, reason));
  EXPECT_EQ(field, "size");
  EXPECT_EQ(reason, std::string(148 - 4 - 5, 'x'));
  const std::vector<uint8_t> cms(148, 0);  // the CM's own REJ (nobody listens): not ours
  EXPECT_FALSE(CmHello::parseReject(cms.data(), cms.size(), field, reason));
  const auto hello = request(2, 1, 0).bytes();
  EXPECT_FALSE(CmHello::parseReject(hello.data(), hello.size(), field, reason));
}

}  // namespace
