// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the send WQE decoder (model/units/wqe_fetch.h), which reads what a program wrote
// into its send queue: anything at all, for a buggy or hostile program. Input: one byte of QP
// type (bit 0 UD, bit 1 XRC send), then the WQE. The WQE sits in a buffer of exactly the WQEBBs
// its control segment claims, as WqeFetchUnit::fetch_send() fetches them, so the sanitizers catch
// a segment read beyond it. Properties: the decoder reads only those bytes; what it accepts has
// at most kMaxSge gather entries or kMaxInline inline bytes, a length that is their sum, and
// segments inside the WQE.
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "wqe_fetch.h"

using namespace hcasim;
using namespace hcasim::model;

// libsystemc references sc_main; the harness never starts a simulation.
extern "C" int sc_main(int, char**) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + sizeof(hw::CtrlSeg)) return 0;
  const bool datagram = data[0] & 1, xrc = data[0] & 2;
  hw::CtrlSeg ctrl;
  std::memcpy(&ctrl, data + 1, sizeof ctrl);
  const uint32_t nbb = hw::wqe_bbs_for_segments(hw::ctrl_ds(ctrl));
  if (nbb == 0 || nbb > hw::kMaxSendWqeBbs) return 0;  // fetch_send() refuses these before decoding
  std::vector<uint8_t> wqe(nbb * hw::kWqeBasicBlock, 0);
  std::memcpy(wqe.data(), data + 1, std::min(wqe.size(), size - 1));
  SendWqe w;
  if (!decode_send_wqe(wqe.data(), nbb, 7, w, datagram, xrc)) return 0;
  FUZZ_CHECK(w.nbb == nbb && w.index == 7, "index/nbb not kept");
  if (w.is_inline) {
    FUZZ_CHECK(w.length <= kMaxInline, "inline length %u > %u", w.length, kMaxInline);
    FUZZ_CHECK(w.nsge == 0, "inline WQE with %u gather entries", w.nsge);
  } else {
    FUZZ_CHECK(w.nsge <= kMaxSge, "%u gather entries > %u", w.nsge, kMaxSge);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < w.nsge; ++i) sum += w.sge[i].len;
    FUZZ_CHECK(uint32_t(sum) == w.length, "length %u is not the sum of the gather entries", w.length);
  }
  return 0;
}
