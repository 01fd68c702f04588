// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the RoCEv2 frame parser (model/wire/roce_packet.h), which takes every byte that
// arrives from the wire. Properties: parse_frame() never reads outside the frame (the sanitizers
// check that); what it accepts lies inside the frame; and a frame it accepts survives a round
// trip: build_frame() from the parsed headers gives a frame that parses, ICRC included, to the
// same headers and payload.
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "roce_packet.h"

using namespace hcasim::wire;

namespace {

#define SAME(field) FUZZ_CHECK(a.field == b.field, "round trip changed " #field)
#define SAME_BYTES(field) \
  FUZZ_CHECK(std::memcmp(a.field, b.field, sizeof a.field) == 0, "round trip changed " #field)

void same_l2_l3(const Headers& a, const Headers& b) {
  SAME_BYTES(dst_mac);
  SAME_BYTES(src_mac);
  SAME(ipv6);
  if (a.ipv6) {
    SAME_BYTES(ipv6_src);
    SAME_BYTES(ipv6_dst);
    SAME(flow_label);
    SAME(ipv6_udp_checksum);
  } else {
    SAME(ipv4_src);
    SAME(ipv4_dst);
  }
  SAME(ttl);
  SAME(traffic_class);
  SAME(udp_sport);
}

void same_bth(const Headers& a, const Headers& b) {
  SAME(opcode);
  SAME(se);
  SAME(migreq);
  SAME(pad);
  SAME(tver);
  SAME(pkey);
  SAME(dest_qp);
  SAME(ackreq);
  SAME(psn);
}

void same_extensions(const Headers& a, const Headers& b) {
  const BthOpcode op = a.opcode;
  if (has_deth(op)) {
    SAME(deth.qkey);
    SAME(deth.src_qp);
  }
  if (has_xrceth(op)) SAME(xrc_srqn);
  if (has_reth(op)) {
    SAME(reth.va);
    SAME(reth.rkey);
    SAME(reth.dma_len);
  }
  if (has_aeth(op)) {
    SAME(aeth.syndrome);
    SAME(aeth.msn);
  }
  if (has_imm(op)) SAME(imm_data);
  if (has_ieth(op)) SAME(ieth_rkey);
  if (has_atomic_eth(op)) {
    SAME(atomic_eth.va);
    SAME(atomic_eth.rkey);
    SAME(atomic_eth.swap_add);
    SAME(atomic_eth.compare);
  }
  if (has_atomic_ack_eth(op)) SAME(atomic_ack_eth.orig_data);
}

void round_trip(const ParsedFrame& p) {
  std::vector<uint8_t> out(p.frame_len + 64);
  const size_t n = build_frame(p.h, p.payload, p.payload_len, out.data(), out.size());
  FUZZ_CHECK(n == p.frame_len, "build_frame wrote %zu bytes for a frame of %zu", n, p.frame_len);
  out.resize(n);  // exactly the frame: the sanitizers catch a read past it
  ParsedFrame q;
  const ParseError e = parse_frame(out.data(), out.size(), q, true);
  FUZZ_CHECK(e == ParseError::Ok, "the rebuilt frame does not parse: %s", parse_error_name(e));
  same_l2_l3(p.h, q.h);
  same_bth(p.h, q.h);
  same_extensions(p.h, q.h);
  FUZZ_CHECK(q.payload_len == p.payload_len, "payload %zu bytes, was %zu", q.payload_len, p.payload_len);
  FUZZ_CHECK(p.payload_len == 0 || std::memcmp(q.payload, p.payload, p.payload_len) == 0,
             "payload bytes changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly the input's size, so that any read past the frame is out of bounds.
  std::vector<uint8_t> frame(data, data + size);
  ParsedFrame p;
  (void)parse_frame(frame.data(), frame.size(), p, true);
  if (parse_frame(frame.data(), frame.size(), p, false) != ParseError::Ok) return 0;
  FUZZ_CHECK(p.frame_len <= size, "frame_len %zu beyond the %zu bytes given", p.frame_len, size);
  FUZZ_CHECK(
      p.payload_len == 0 || (p.payload >= frame.data() && p.payload + p.payload_len <= frame.data() + size),
      "payload outside the frame");
  FUZZ_CHECK(is_valid_opcode(p.h.opcode), "accepted an unknown opcode");
  round_trip(p);
  return 0;
}
