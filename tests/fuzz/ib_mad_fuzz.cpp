// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the CM MAD codec (model/wire/ib_mad.h), which reads every MAD that arrives on
// QP1 (the driver's CM) and names every MAD in a trace (the model). The input is a MAD.
// Properties: peek() accepts exactly the inputs that hold a header; each decode() reads only the
// bytes given (the sanitizers check that), accepts exactly what check_cm() accepts for its
// message, and leaves its output untouched when it refuses; what it accepts survives a round
// trip (encode, decode again: the same struct; encoding it again: the same bytes), and the
// re-encoded MAD sets no bit the input did not have (decoding invents nothing). The same bytes
// are also decoded as every message with the header made valid for it, so every field decoder
// runs on every input. describe() stays inside a buffer of any size and NUL-terminates.
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "ib_mad.h"

using namespace hcasim::wire::mad;

namespace {

template <class M>
void round_trip(const uint8_t* p, size_t len, const M& m) {
  CommonHeader h;
  FUZZ_CHECK(peek(p, len, h), "decoded a MAD whose header peek() refuses");
  uint8_t out[kMadSize];
  encode(m, h.transaction_id, out);
  M again;
  FUZZ_CHECK(decode(out, sizeof(out), again) == DecodeError::Ok, "%s: re-encoded MAD does not decode",
             attr_id_name(M::kAttrId));
  FUZZ_CHECK(again == m, "%s: round trip changed a field", attr_id_name(M::kAttrId));
  uint8_t out2[kMadSize];
  encode(again, h.transaction_id, out2);
  FUZZ_CHECK(std::memcmp(out, out2, kMadSize) == 0, "%s: encoding is not canonical",
             attr_id_name(M::kAttrId));
  FUZZ_CHECK(std::memcmp(out, p, 4) == 0 && std::memcmp(out + 8, p + 8, 10) == 0,
             "%s: header (versions, class, method, TID, attribute) not kept", attr_id_name(M::kAttrId));
  for (size_t i = kMadHeaderSize; i < kMadSize; ++i)
    FUZZ_CHECK((out[i] & ~p[i]) == 0, "%s: re-encoded byte %zu has bits the input lacks (0x%02x vs 0x%02x)",
               attr_id_name(M::kAttrId), i, out[i], p[i]);
}

template <class M>
void decode_as(const uint8_t* p, size_t len) {
  M m;
  m.private_data[1] = 0x5a;  // a sentinel: a refused MAD must leave the output as it was
  const M before = m;
  const DecodeError e = decode(p, len, m);
  FUZZ_CHECK(e == check_cm(p, len, M::kAttrId), "%s: decode() and check_cm() disagree",
             attr_id_name(M::kAttrId));
  if (e != DecodeError::Ok) {
    FUZZ_CHECK(m == before, "%s: refused (%s) but changed its output", attr_id_name(M::kAttrId),
               decode_error_name(e));
    return;
  }
  round_trip(p, len, m);
}

/// The first kMadSize bytes with a header valid for M: every field decoder sees the input.
template <class M>
void decode_forced(const uint8_t* data, size_t size) {
  if (size < kMadSize) return;
  std::vector<uint8_t> mad(data, data + kMadSize);
  mad[0] = kBaseVersion;
  mad[1] = kMgmtClassCm;
  mad[2] = kCmClassVersion;
  mad[3] = kMethodSend;
  mad[16] = static_cast<uint8_t>(static_cast<uint16_t>(M::kAttrId) >> 8);
  mad[17] = static_cast<uint8_t>(static_cast<uint16_t>(M::kAttrId));
  FUZZ_CHECK(check_cm(mad.data(), mad.size(), M::kAttrId) == DecodeError::Ok, "%s: forced header refused",
             attr_id_name(M::kAttrId));
  decode_as<M>(mad.data(), mad.size());
}

template <class... Ms>
void every_message(const uint8_t* data, size_t size, const std::vector<uint8_t>& exact) {
  (decode_as<Ms>(exact.data(), exact.size()), ...);
  (decode_forced<Ms>(data, size), ...);
}

void check_describe(const uint8_t* p, size_t len, size_t n) {
  constexpr size_t kCanary = 16;
  std::vector<char> buf(n + kCanary, '#');
  const size_t w = describe(p, len, n ? buf.data() : nullptr, n);
  for (size_t i = n; i < buf.size(); ++i) FUZZ_CHECK(buf[i] == '#', "describe() wrote past %zu bytes", n);
  if (n == 0) {
    FUZZ_CHECK(w == 0, "describe() into nothing returned %zu", w);
    return;
  }
  FUZZ_CHECK(w < n, "describe() returned %zu for a %zu-byte buffer", w, n);
  FUZZ_CHECK(std::strlen(buf.data()) == w, "describe() returned %zu but wrote %zu", w,
             std::strlen(buf.data()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly the input's size, so that any read past the MAD is out of bounds.
  const std::vector<uint8_t> exact(data, data + size);
  CommonHeader h;
  FUZZ_CHECK(peek(exact.data(), exact.size(), h) == (size >= kMadHeaderSize), "peek() on %zu bytes", size);
  every_message<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep>(data, size, exact);
  check_describe(exact.data(), exact.size(), 0);
  check_describe(exact.data(), exact.size(), 1);
  check_describe(exact.data(), exact.size(), size > 0 ? data[size - 1] % 160 : 40);
  check_describe(exact.data(), exact.size(), 256);
  return 0;
}
