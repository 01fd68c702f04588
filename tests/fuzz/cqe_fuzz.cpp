// SPDX-License-Identifier: Apache-2.0
// Fuzz harness: the provider's CQE parsing (driver/provider/cqe_decode.h), what ibv_poll_cq
// makes of the 64 bytes the HCA wrote into a CQ ring, and the EQE accessors the kernel side's
// interrupt handler reads. Input: a CQE, then optionally an EQE (shorter inputs are padded with
// zeros). Properties: whatever the bytes, the work completion is one ibv_poll_cq(3) can report
// (a known status and opcode, only the flags the provider sets, a 24-bit QP number, a receive
// opcode only for a receive, an invalidated rkey only with IBV_WC_WITH_INV); decoding is
// canonical (re-encoding the decoded fields with the contract's set_cqe and decoding again
// gives the same completion); an EQE's type and resource read back as written.
#include <cstring>
#include <set>

#include "cqe_decode.h"
#include "fuzz_check.h"

using namespace hcasim;

namespace {

bool same_wc(const ibv_wc& a, const ibv_wc& b) {
  return a.status == b.status && a.opcode == b.opcode && a.vendor_err == b.vendor_err &&
         a.byte_len == b.byte_len && a.imm_data == b.imm_data && a.qp_num == b.qp_num &&
         a.src_qp == b.src_qp && a.wc_flags == b.wc_flags && a.pkey_index == b.pkey_index &&
         a.slid == b.slid && a.sl == b.sl && a.dlid_path_bits == b.dlid_path_bits;
}

void check_cqe(const uint8_t* raw) {
  const drv::DecodedCqe d = drv::decode_cqe(raw);
  const ibv_wc& w = d.wc;
  static const std::set<int> statuses = {
      IBV_WC_SUCCESS,           IBV_WC_LOC_LEN_ERR,    IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_PROT_ERR,
      IBV_WC_WR_FLUSH_ERR,      IBV_WC_MW_BIND_ERR,    IBV_WC_BAD_RESP_ERR,  IBV_WC_LOC_ACCESS_ERR,
      IBV_WC_REM_INV_REQ_ERR,   IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR,    IBV_WC_RETRY_EXC_ERR,
      IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_REM_ABORT_ERR,  IBV_WC_GENERAL_ERR};
  FUZZ_CHECK(statuses.count(w.status), "status %d", int(w.status));
  static const std::set<int> send_ops = {IBV_WC_SEND,      IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
                                         IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD,  IBV_WC_BIND_MW,
                                         IBV_WC_LOCAL_INV};
  if (d.is_send)
    FUZZ_CHECK(send_ops.count(w.opcode), "send completion with opcode %d", int(w.opcode));
  else
    FUZZ_CHECK(w.opcode == IBV_WC_RECV || w.opcode == IBV_WC_RECV_RDMA_WITH_IMM, "receive opcode %d",
               int(w.opcode));
  FUZZ_CHECK(!(d.from_srq && d.is_send), "a send completion taken from an SRQ");
  const unsigned known = IBV_WC_WITH_IMM | IBV_WC_GRH | IBV_WC_WITH_INV;
  FUZZ_CHECK((unsigned(w.wc_flags) & ~known) == 0, "wc_flags 0x%x", unsigned(w.wc_flags));
  FUZZ_CHECK(w.qp_num <= 0xffffff, "qp_num 0x%x is not 24 bits", w.qp_num);
  FUZZ_CHECK(w.wr_id == 0, "decode_cqe made up a wr_id (it belongs to the QP)");
  // Canonical: encode what was decoded, decode again.
  hw::Cqe bytes;
  std::memcpy(&bytes, raw, sizeof bytes);
  hw::Cqe again;
  hw::set_cqe(again, hw::get_cqe(bytes), 0);
  const drv::DecodedCqe d2 = drv::decode_cqe(reinterpret_cast<const uint8_t*>(&again));
  FUZZ_CHECK(same_wc(w, d2.wc) && d.is_send == d2.is_send && d.from_srq == d2.from_srq &&
                 d.wqe_counter == d2.wqe_counter && d.timestamp_ns == d2.timestamp_ns,
             "decode(encode(decode(cqe))) differs from decode(cqe)");
}

void check_eqe(const uint8_t* raw) {
  hw::Eqe e;
  std::memcpy(&e, raw, sizeof e);
  hw::Eqe again;
  hw::set_eqe(again, hw::eqe_type(e), hw::eqe_resource(e), hw::eqe_timestamp_ns(e), e.owner);
  FUZZ_CHECK(hw::eqe_type(again) == hw::eqe_type(e) && hw::eqe_resource(again) == hw::eqe_resource(e) &&
                 hw::eqe_timestamp_ns(again) == hw::eqe_timestamp_ns(e),
             "an EQE's fields do not read back as written");
  FUZZ_CHECK(hw::eqe_ready(e.owner, 0, 4) != hw::eqe_ready(e.owner, 16, 4),
             "owner bit not flipping per pass");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t buf[hw::kCqeSize + hw::kEqeSize] = {};
  std::memcpy(buf, data, size < sizeof buf ? size : sizeof buf);
  check_cqe(buf);
  check_eqe(buf + hw::kCqeSize);
  return 0;
}
