// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the server side of verbs/'s TcpStore (verbs/src/store_tcp_protocol.h), what
// rank 0's store server makes of the bytes a client sends. Input: the client's byte stream;
// its first byte sets how the stream arrives (in pieces of 1 to 256 bytes, as TCP may split it).
// Properties: no crash and no undefined behaviour (ADD wraps at 64 bits); only complete frames are
// served, in order, each with exactly one well-formed reply (status ok, not found or bad; an ADD
// that succeeds answers 8 bytes, a GET that succeeds the value stored); a bad frame length ends
// the stream and nothing after it is served. The harness frames the stream itself and runs each
// request it finds on a copy of the map: replies and map must come out the same (framing, order
// and one reply per request are what this checks; what each op does, TcpStore's tests).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "store_tcp_protocol.h"

using namespace hcasim::verbs;
using namespace hcasim::verbs::tcp_store;

namespace {

/** Checks one reply frame at the front of @p out (removed) against request body @p body. */
void check_reply(Bytes& out, const uint8_t* body, size_t len, std::map<std::string, Bytes>& model) {
  FUZZ_CHECK(out.size() >= 5, "a reply of %zu bytes", out.size());
  const uint32_t rl = get32(out.data());
  FUZZ_CHECK(rl >= 1 && out.size() >= 4 + size_t(rl), "reply length %u of %zu bytes", rl, out.size());
  const uint8_t status = out[4];
  const Bytes result(out.begin() + 5, out.begin() + 4 + long(rl));
  out.erase(out.begin(), out.begin() + 4 + long(rl));
  FUZZ_CHECK(status == kOk || status == kNotFound || status == kBad, "status %u", status);
  Bytes want;
  const uint8_t want_status = execute(body, len, model, want);  // the same request on the copy
  FUZZ_CHECK(status == want_status && result == want, "the reply differs from the request's effect");
  if (status == kOk && len && body[0] == kAdd)
    FUZZ_CHECK(result.size() == 8, "ADD answered %zu bytes", result.size());
  if (status != kOk) FUZZ_CHECK(result.empty(), "a failed request answered %zu bytes", result.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0];
  const Bytes stream(data + 1, data + size);
  std::map<std::string, Bytes> map, model;
  Bytes in, out;
  size_t fed = 0, served = 0;  // served: stream bytes of whole frames replied to
  bool open = true;
  while (open && fed < stream.size()) {
    const size_t n = std::min(piece, stream.size() - fed);
    in.insert(in.end(), stream.begin() + long(fed), stream.begin() + long(fed + n));
    fed += n;
    open = serve_frames(in, map, out);
    while (!out.empty()) {  // one reply per frame, in order
      FUZZ_CHECK(stream.size() - served >= 4, "a reply with no request");
      const uint32_t len = get32(stream.data() + served);
      check_reply(out, stream.data() + served + 4, len, model);
      served += 4 + size_t(len);
    }
    FUZZ_CHECK(served <= fed && in.size() == fed - served, "%zu bytes kept, %zu fed, %zu served", in.size(),
               fed, served);
  }
  FUZZ_CHECK(map == model, "the server's map differs from the requests' effect");
  return 0;
}
