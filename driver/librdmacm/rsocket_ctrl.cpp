// SPDX-License-Identifier: Apache-2.0
// Stream rsocket control messages: credit updates (with the next receive buffer when half of
// ours is free again), keepalives, the shutdown and disconnect messages, and rshutdown/rclose.
// Control messages use the kQpCtrlSize send WRs kept aside for them (ctrl_seqno counts the
// ones posted, ctrl_max_seqno the ones allowed: each completion allows one more).
#include <byteswap.h>
#include <unistd.h>

#include <cstring>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

/// rs_give_credits: half the receive buffer is free again, or the peer has used half its
/// credits since the last update; and a control WR is free.
bool give_credits(const RSocket& rs) {
  const bool half_free = rs.rbuf_bytes_avail >= (rs.rbuf_size >> 1);
  const bool used_half = static_cast<int16_t>(uint16_t(rs.rseq_no - rs.rseq_comp)) >= 0;
  return (half_free || used_half) && ctrl_avail(rs) && (rs.state & kConnected);
}

/// rs_send_credits: the new credit limit in the immediate, and when half the buffer is free,
/// that half written into the peer's target SGL by the same RDMA WRITE.
void send_credits(RSocket& rs) {
  rs.ctrl_seqno++;
  rs.rseq_comp = static_cast<uint16_t>(rs.rseq_no + (rs.rq_size >> 1));
  const uint32_t msg = msg_set(MsgOp::Sgl, uint32_t(rs.rseq_no) + rs.rq_size);
  const uint32_t half = rs.rbuf_size >> 1;
  if (rs.rbuf_bytes_avail < half) {
    post_msg(rs, msg);
    return;
  }
  RsSge sge{reinterpret_cast<uintptr_t>(rs.rbuf + rs.rbuf_free_offset), rs.rmr->rkey, half};
  if (rs.swap_sgl) sge = RsSge{bswap_64(sge.addr), bswap_32(sge.key), bswap_32(sge.length)};
  ibv_sge s{reinterpret_cast<uintptr_t>(&sge), sizeof sge, 0};
  int flags = IBV_SEND_INLINE;
  if (rs.sq_inline < sizeof sge) {  // from one of the control slots behind the send ring
    uint8_t* slot = rs.sbuf + rs.sbuf_size + kMaxCtrlMsg * (rs.ctrl_seqno & (kQpCtrlSize - 1));
    std::memcpy(slot, &sge, sizeof sge);
    s = ibv_sge{reinterpret_cast<uintptr_t>(slot), sizeof sge, rs.smr->lkey};
    flags = 0;
  }
  post_write(rs, &s, 1, msg, true, flags, rs.remote_sgl.addr + rs.remote_sge * sizeof(RsSge),
             rs.remote_sgl.key);
  rs.rbuf_bytes_avail -= half;
  rs.rbuf_free_offset += half;
  if (rs.rbuf_free_offset >= rs.rbuf_size) rs.rbuf_free_offset = 0;
  rs.remote_sge = (rs.remote_sge + 1) % static_cast<int>(rs.remote_sgl.length);
}

bool all_sends_done(RSocket& rs) {
  return int(rs.ctrl_max_seqno) - int(rs.ctrl_seqno) + rs.sqe_avail == rs.sq_size || !(rs.state & kConnected);
}

/// Closes a listener's connections that the program never took.
void close_queued(RSocket& ls) {
  std::vector<RSocket*> children;
  {
    Lock g(ls.mu);
    ls.closing = true;
    children.assign(ls.pending.begin(), ls.pending.end());
    children.insert(children.end(), ls.accept_queue.begin(), ls.accept_queue.end());
    ls.pending.clear();
    ls.accept_queue.clear();
  }
  for (RSocket* rs : children) {
    svc_forget(rs);
    if (rs->state & kConnected) shutdown_stream(*rs, SHUT_RDWR);
    free_socket(rs);
  }
}

}  // namespace

void update_credits(RSocket& rs) {
  if (give_credits(rs)) send_credits(rs);
}

void send_keepalive(RSocket& rs) {
  Lock l(rs.mu);
  if (!ctrl_avail(rs) || !(rs.state & kConnected)) return;
  rs.ctrl_seqno++;
  // A 0-byte RDMA WRITE without an immediate: the peer's HCA acknowledges it, its software never
  // sees it; a peer that is gone makes it fail (retry exceeded), which ends the connection.
  post_write(rs, nullptr, 0, msg_set(MsgOp::Ctrl, uint32_t(CtrlMsg::Keepalive)), false, 0, 0, 0);
}

int shutdown_stream(RSocket& rs, int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return err(EINVAL);
  bool keepalive;
  {
    Lock l(rs.mu);
    keepalive = rs.keepalive;
    rs.keepalive = false;
  }
  if (keepalive) svc_keepalive(&rs, false);
  Lock l(rs.mu);
  if (!(rs.state & (kConnected | kDisconnected | kError))) return err(ENOTCONN);
  int ret = 0;
  if (rs.state & kConnected) {
    CtrlMsg ctrl = CtrlMsg::Disconnect;
    if (how != SHUT_WR) rs.state &= ~kReadable;
    if (how != SHUT_RD) {
      rs.state &= ~kWritable;
      rs.shut_wr = true;
    }
    if (how == SHUT_RD && (rs.state & kWritable)) return 0;  // nothing to tell the peer yet
    if (how == SHUT_WR && (rs.state & kReadable)) ctrl = CtrlMsg::Shutdown;
    if (!ctrl_avail(rs))
      ret = progress(rs, l, false, [](RSocket& r) { return ctrl_avail(r) || !(r.state & kConnected); });
    if (!ret && (rs.state & kConnected) && ctrl_avail(rs)) {
      rs.ctrl_seqno++;
      ret = post_msg(rs, msg_set(MsgOp::Ctrl, uint32_t(ctrl)));
    }
    if (!ret && (rs.state & kConnected)) ret = progress(rs, l, false, all_sends_done);
  }
  if (rs.state & kDisconnected) flush_qp(rs);  // rdma-core: the QP to ERR (ucma_shutdown)
  return ret;
}

}  // namespace hcasim::rdmacm::rs

using namespace hcasim::rdmacm;
using namespace hcasim::rdmacm::rs;

HCASIM_RDMACM_EXPORT int rshutdown(int socket, int how) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  return shutdown_stream(*rs, how);
}

HCASIM_RDMACM_EXPORT int rclose(int socket) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  uint32_t state;
  {
    Lock l(rs->mu);
    state = rs->state;
  }
  if (state & kConnected) shutdown_stream(*rs, SHUT_RDWR);
  svc_forget(rs);
  if (state == kListening) close_queued(*rs);
  free_socket(rs);
  return 0;
}
