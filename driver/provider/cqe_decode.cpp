// SPDX-License-Identifier: Apache-2.0
// CQE bytes -> ibv_wc (without wr_id): see cqe_decode.h.
#include "cqe_decode.h"

#include <cstring>

namespace hcasim::drv {
namespace {

ibv_wc_opcode req_wc_opcode(hw::WqeOpcode op) {
  switch (op) {
    case hw::WqeOpcode::RdmaWrite:
    case hw::WqeOpcode::RdmaWriteImm: return IBV_WC_RDMA_WRITE;
    case hw::WqeOpcode::RdmaRead: return IBV_WC_RDMA_READ;
    case hw::WqeOpcode::AtomicCmpSwap: return IBV_WC_COMP_SWAP;
    case hw::WqeOpcode::AtomicFetchAdd: return IBV_WC_FETCH_ADD;
    case hw::WqeOpcode::BindMw: return IBV_WC_BIND_MW;
    case hw::WqeOpcode::LocalInv: return IBV_WC_LOCAL_INV;
    default: return IBV_WC_SEND;
  }
}

}  // namespace

ibv_wc_status wc_status(hw::CqeSyndrome s) {
  switch (s) {
    case hw::CqeSyndrome::Ok: return IBV_WC_SUCCESS;
    case hw::CqeSyndrome::LocalLengthErr: return IBV_WC_LOC_LEN_ERR;
    case hw::CqeSyndrome::LocalQpOpErr: return IBV_WC_LOC_QP_OP_ERR;
    case hw::CqeSyndrome::LocalProtErr: return IBV_WC_LOC_PROT_ERR;
    case hw::CqeSyndrome::WrFlushErr: return IBV_WC_WR_FLUSH_ERR;
    case hw::CqeSyndrome::MwBindErr: return IBV_WC_MW_BIND_ERR;
    case hw::CqeSyndrome::BadRespErr: return IBV_WC_BAD_RESP_ERR;
    case hw::CqeSyndrome::LocalAccessErr: return IBV_WC_LOC_ACCESS_ERR;
    case hw::CqeSyndrome::RemoteInvalReqErr: return IBV_WC_REM_INV_REQ_ERR;
    case hw::CqeSyndrome::RemoteAccessErr: return IBV_WC_REM_ACCESS_ERR;
    case hw::CqeSyndrome::RemoteOpErr: return IBV_WC_REM_OP_ERR;
    case hw::CqeSyndrome::TransportRetryExcErr: return IBV_WC_RETRY_EXC_ERR;
    case hw::CqeSyndrome::RnrRetryExcErr: return IBV_WC_RNR_RETRY_EXC_ERR;
    case hw::CqeSyndrome::RemoteAbortedErr: return IBV_WC_REM_ABORT_ERR;
  }
  return IBV_WC_GENERAL_ERR;
}

DecodedCqe decode_cqe(const uint8_t* raw) {
  hw::Cqe bytes;
  std::memcpy(&bytes, raw, sizeof bytes);
  const hw::CqeFields c = hw::get_cqe(bytes);
  DecodedCqe d;
  ibv_wc& w = d.wc;
  w.qp_num = c.qpn;
  w.status = wc_status(c.syndrome);
  w.vendor_err = uint32_t(c.syndrome);
  w.byte_len = c.byte_cnt;
  w.src_qp = c.src_qp;
  d.is_send = c.opcode == hw::CqeOpcode::Req || c.opcode == hw::CqeOpcode::ReqErr;
  d.from_srq = !d.is_send && (c.flags & hw::kCqeSrq);
  d.srqn = c.srqn;
  d.wqe_counter = c.wqe_counter;
  d.timestamp_ns = c.timestamp_ns;
  if (d.is_send)
    w.opcode = req_wc_opcode(c.req_opcode);
  else
    w.opcode = c.opcode == hw::CqeOpcode::RespWriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  if (c.flags & hw::kCqeWithImm) {
    w.wc_flags |= IBV_WC_WITH_IMM;
    w.imm_data = c.imm;
  }
  if (c.flags & hw::kCqeGrh) w.wc_flags |= IBV_WC_GRH;  // UD: the network header leads the buffer
  if (c.flags & hw::kCqeWithInv) {  // ibv_poll_cq(3): invalidated_rkey shares imm_data's place
    w.wc_flags |= IBV_WC_WITH_INV;
    w.invalidated_rkey = c.imm;
  }
  return d;
}

}  // namespace hcasim::drv
