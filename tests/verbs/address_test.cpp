// SPDX-License-Identifier: Apache-2.0
// Address encoding: round trips and every rejection, each naming its field.
#include <gtest/gtest.h>

#include <functional>

#include "hcasim/verbs/address.h"
#include "hcasim/verbs/error.h"

using hcasim::verbs::Address;
using hcasim::verbs::AddressError;

namespace {

Address roce() {
  Address a;
  a.lid = 0;
  a.qpn = 0x000123;
  a.psn = 0xabcdef;
  a.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  a.mtu = 5;
  a.global = true;
  return a;
}

Address ib() {
  Address a;
  a.lid = 0x0042;
  a.qpn = 0xfffffe;
  a.psn = 0;
  a.mtu = 3;
  a.global = false;
  return a;
}

// Re-seals the checksum after a test edits a field, so the field rule itself is what fails.
void reseal(std::vector<uint8_t>& b) {
  const uint16_t c = Address::checksum(b.data(), Address::kSize - 2);
  b[34] = uint8_t(c >> 8);
  b[35] = uint8_t(c);
}

// fromBytes(b) must throw an AddressError for @p field whose message names it.
::testing::AssertionResult rejects(const std::vector<uint8_t>& b, const std::string& field) {
  try {
    Address::fromBytes(b);
  } catch (const AddressError& e) {
    if (e.field() != field)
      return ::testing::AssertionFailure()
             << "rejected for field '" << e.field() << "', want '" << field << "': " << e.what();
    if (std::string(e.what()).find("'" + field + "'") == std::string::npos)
      return ::testing::AssertionFailure() << "message does not name the field: " << e.what();
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "accepted";
}

std::vector<uint8_t> edited(const Address& a, const std::function<void(std::vector<uint8_t>&)>& f,
                            bool seal = true) {
  auto b = a.bytes();
  f(b);
  if (seal) reseal(b);
  return b;
}

}  // namespace

TEST(AddressEncoding, RoundTripRoce) {
  const Address a = roce();
  const auto b = a.bytes();
  ASSERT_EQ(b.size(), Address::kSize);
  EXPECT_EQ(b[0], 'H');
  EXPECT_EQ(b[1], 'V');
  EXPECT_EQ(b[2], 1);
  EXPECT_EQ(b[3], 36);
  EXPECT_EQ(Address::fromBytes(b), a);
}

TEST(AddressEncoding, RoundTripInfiniBand) {
  const Address a = ib();
  EXPECT_EQ(Address::fromBytes(a.bytes()), a);
}

TEST(AddressEncoding, RoundTripEdgeValues) {
  for (uint32_t qpn : {2u, 0x10u, 0xffffffu})
    for (uint32_t psn : {0u, 1u, 0x800000u, 0xffffffu})
      for (uint8_t mtu = 1; mtu <= 5; ++mtu) {
        Address a = roce();
        a.qpn = qpn;
        a.psn = psn;
        a.mtu = mtu;
        a.lid = uint16_t(qpn);  // any LID is fine with a GRH
        EXPECT_EQ(Address::fromBytes(a.bytes()), a) << a.str();
      }
  for (uint16_t lid : {uint16_t(1), uint16_t(0xbfff)}) {
    Address a = ib();
    a.lid = lid;
    EXPECT_EQ(Address::fromBytes(a.bytes()), a);
  }
}

TEST(AddressEncoding, BigEndianLayout) {
  Address a = roce();
  a.lid = 0x1234;
  a.qpn = 0x00abcdef & 0xffffff;
  a.psn = 0x00102030;
  const auto b = a.bytes();
  EXPECT_EQ(b[4], 1);  // global
  EXPECT_EQ(b[5], 5);
  EXPECT_EQ(b[6], 0x12);
  EXPECT_EQ(b[7], 0x34);
  EXPECT_EQ((std::vector<uint8_t>(b.begin() + 8, b.begin() + 12)),
            (std::vector<uint8_t>{0, 0xab, 0xcd, 0xef}));
  EXPECT_EQ((std::vector<uint8_t>(b.begin() + 12, b.begin() + 16)),
            (std::vector<uint8_t>{0, 0x10, 0x20, 0x30}));
  EXPECT_EQ(b[31], 1);  // last GID byte
}

TEST(AddressEncoding, StrIsReadable) {
  const std::string s = roce().str();
  EXPECT_NE(s.find("qpn 0x000123"), std::string::npos) << s;
  EXPECT_NE(s.find("::ffff:192.0.2.1"), std::string::npos) << s;
  EXPECT_NE(s.find("mtu 4096"), std::string::npos) << s;
}

TEST(AddressRejects, Length) {
  const auto b = roce().bytes();
  EXPECT_TRUE(rejects({}, "length"));
  EXPECT_TRUE(rejects(std::vector<uint8_t>(b.begin(), b.begin() + 3), "length"));
  EXPECT_TRUE(rejects(std::vector<uint8_t>(b.begin(), b.end() - 1), "length"));
  auto longer = b;
  longer.push_back(0);
  EXPECT_TRUE(rejects(longer, "length"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[3] = 35; }), "length"));
}

TEST(AddressRejects, Magic) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[0] = 'G'; }), "magic"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[1] = 0; }), "magic"));
  EXPECT_TRUE(rejects(std::vector<uint8_t>(36, 0), "magic"));  // zeros: e.g. a rank's own slot
}

TEST(AddressRejects, Version) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[2] = 0; }), "version"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[2] = 2; }), "version"));
}

TEST(AddressRejects, Checksum) {
  // Any single flipped bit is caught by the checksum (nothing re-seals it).
  for (size_t byte = 4; byte < Address::kSize; ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      auto b = roce().bytes();
      b[byte] ^= uint8_t(1 << bit);
      EXPECT_TRUE(rejects(b, "checksum")) << "byte " << byte << " bit " << bit;
    }
}

TEST(AddressRejects, Flags) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[4] = 0x03; }), "flags"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[4] = 0x80; }), "flags"));
}

TEST(AddressRejects, Reserved) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[32] = 1; }), "reserved"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[33] = 0x80; }), "reserved"));
}

TEST(AddressRejects, Mtu) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[5] = 0; }), "mtu"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[5] = 6; }), "mtu"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[5] = 255; }), "mtu"));
}

TEST(AddressRejects, Qpn) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[8] = 1; }), "qpn"));                  // > 24 bits
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[9] = v[10] = v[11] = 0; }), "qpn"));  // QP0
  EXPECT_TRUE(rejects(edited(roce(),
                             [](auto& v) {
                               v[9] = v[10] = 0;
                               v[11] = 1;
                             }),
                      "qpn"));  // QP1
}

TEST(AddressRejects, Psn) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[12] = 0x01; }), "psn"));
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { v[12] = 0xff; }), "psn"));
}

TEST(AddressRejects, Lid) {
  // Without a GRH the LID is the route: it must be a unicast LID.
  EXPECT_TRUE(rejects(edited(ib(), [](auto& v) { v[6] = v[7] = 0; }), "lid"));
  EXPECT_TRUE(rejects(edited(ib(),
                             [](auto& v) {
                               v[6] = 0xc0;
                               v[7] = 0;
                             }),
                      "lid"));  // multicast
  EXPECT_TRUE(rejects(edited(ib(),
                             [](auto& v) {
                               v[6] = 0xff;
                               v[7] = 0xff;
                             }),
                      "lid"));  // permissive
}

TEST(AddressRejects, Gid) {
  EXPECT_TRUE(rejects(edited(roce(), [](auto& v) { std::fill(v.begin() + 16, v.begin() + 32, 0); }), "gid"));
}

TEST(AddressRejects, EncodingAnInvalidAddressThrows) {
  Address a = roce();
  a.qpn = 1u << 24;
  EXPECT_THROW(a.bytes(), AddressError);
  a = roce();
  a.mtu = 0;
  EXPECT_THROW(a.bytes(), AddressError);
  a = ib();
  a.lid = 0;
  EXPECT_THROW(a.bytes(), AddressError);
}
