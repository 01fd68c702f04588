// SPDX-License-Identifier: Apache-2.0
// The stream data path: completions and what they mean (rs_poll_cq), waiting for them
// (rs_process_cq / rs_get_comp), posting RDMA WRITEs with and without an immediate, and the
// send and receive calls. Data goes by RDMA WRITE WITH IMMEDIATE into the buffer the peer
// published last (the target SGE), the immediate carrying its length; one credit per message.
#include <byteswap.h>
#include <endian.h>
#include <fcntl.h>
#include <limits.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {

// ---- iovecs -------------------------------------------------------------------------------------

void IovCursor::skip(size_t n) {
  while (n && cnt > 0) {
    const size_t k = std::min(n, contiguous());
    off += k;
    n -= k;
    if (off == iov->iov_len) {
      ++iov;
      --cnt;
      off = 0;
    }
  }
}

void IovCursor::take(uint8_t* dst, size_t n) {
  while (n && cnt > 0) {
    const size_t k = std::min(n, contiguous());
    std::memcpy(dst, here(), k);
    dst += k;
    n -= k;
    skip(k);
  }
}

void IovCursor::put(const uint8_t* src, size_t n) {
  while (n && cnt > 0) {
    const size_t k = std::min(n, contiguous());
    std::memcpy(here(), src, k);
    src += k;
    n -= k;
    skip(k);
  }
}

ssize_t iov_total(const iovec* iov, int iovcnt) {
  if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov)) return err(EINVAL);
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > size_t(SSIZE_MAX) - total) return err(EINVAL);
    total += iov[i].iov_len;
  }
  return static_cast<ssize_t>(total);
}

// ---- completions --------------------------------------------------------------------------------

namespace {

/// The peer wrote entry tsgl_next of our target SGL (a credit update of sizeof(RsSge) bytes; one
/// without a new buffer writes nothing). Read now: the completion orders the write before us.
void sgl_updated(RSocket& rs, const ibv_wc& wc) {
  if (wc.byte_len != sizeof(RsSge)) return;
  RsSge s;
  std::memcpy(&s, rs.target_buf + sizeof(RsSge) * rs.tsgl_next, sizeof s);
  if (rs.swap_sgl) s = RsSge{bswap_64(s.addr), bswap_32(s.key), bswap_32(s.length)};
  rs.tsgl[rs.tsgl_next] = s;
  rs.tsgl_next = (rs.tsgl_next + 1) % kSglSize;
}

/// One received message; false when the connection ended (stop polling, as rdma-core does).
bool recv_done(RSocket& rs, const ibv_wc& wc) {
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) return true;  // not an rsocket's message: ignore it
  const uint32_t msg = be32toh(wc.imm_data);
  const uint32_t data = msg_data(msg);
  switch (msg_op(msg)) {
    case MsgOp::Sgl:
      rs.sseq_comp = static_cast<uint16_t>(data);
      sgl_updated(rs, wc);
      return true;
    case MsgOp::IomapSgl: iomap_updated(rs, data); return true;
    case MsgOp::Ctrl:
      if (data == uint32_t(CtrlMsg::Disconnect)) {
        rs.state = kDisconnected;
        return false;
      }
      if (data == uint32_t(CtrlMsg::Shutdown)) {
        if (!(rs.state & kWritable)) {
          rs.state = kDisconnected;
          return false;
        }
        rs.state &= ~kReadable;
      }
      return true;
    case MsgOp::Data:
      rs.rmsg[rs.rmsg_tail] = RecvMsg{MsgOp::Data, data};
      rs.rmsg_tail = (rs.rmsg_tail + 1) % (rs.rq_size + 1);
      return true;
    default: return true;  // reserved, or a write's op that never travels
  }
}

/// One completed send: its WR and send buffer space are free again.
void send_done(RSocket& rs, const ibv_wc& wc) {
  const uint32_t msg = static_cast<uint32_t>(wc.wr_id);
  switch (msg_op(msg)) {
    case MsgOp::Sgl: rs.ctrl_max_seqno++; break;
    case MsgOp::Ctrl:
      rs.ctrl_max_seqno++;
      if (msg_data(msg) == uint32_t(CtrlMsg::Disconnect)) rs.state = kDisconnected;
      break;
    case MsgOp::IomapSgl:
      rs.sqe_avail++;
      rs.sbuf_bytes_avail += sizeof(RsIomap);
      break;
    default:
      rs.sqe_avail++;
      rs.sbuf_bytes_avail += msg_data(msg);
      break;
  }
  if (wc.status != IBV_WC_SUCCESS && (rs.state & kConnected)) {
    rs.state = kError;
    rs.err = EIO;
  }
}

/// rs_poll_cq: takes every completion, then posts as many receives as were used.
int poll_cq(RSocket& rs) {
  ibv_wc wc;
  int ret, used = 0;
  while ((ret = ibv_poll_cq(rs.cm_id->recv_cq, 1, &wc)) > 0) {
    if (!(wc.wr_id & kWrIdRecv)) {
      send_done(rs, wc);
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) continue;  // flushed
    ++used;
    if (!recv_done(rs, wc)) return 0;
  }
  if (ret < 0) ret = err(EIO);
  if (rs.state & kConnected) {
    for (; !ret && used; --used) {
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = kWrIdRecv;
      if (int e = ibv_post_recv(rs.cm_id->qp, &wr, &bad)) ret = err(e);
    }
    if (ret) {
      rs.state = kError;
      rs.err = errno;
    }
  }
  return ret;
}

/// Sleeps on the completion channel with the lock released; one thread at a time.
int wait_cq_event(RSocket& rs, Lock& l) {
  ibv_comp_channel* ch = rs.cm_id->recv_cq_channel;
  rs.cq_waiter = true;
  l.unlock();
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  const int ret = ibv_get_cq_event(ch, &cq, &ctx);
  const int e = errno;
  l.lock();
  rs.cq_waiter = false;
  rs.cv.notify_all();
  if (!ret) {
    ibv_ack_cq_events(cq, 1);
    rs.cq_armed = false;
    return 0;
  }
  if (e == EAGAIN || e == EINTR) return 0;
  rs.state = kError;
  rs.err = e;
  return err(e);
}

/// rs_process_cq: poll, grant credits, test; else arm, or sleep (or wait for the one sleeping).
int process(RSocket& rs, Lock& l, bool nonblock, const Test& test) {
  int ret;
  for (;;) {
    update_credits(rs);
    ret = poll_cq(rs);
    if (test(rs)) {
      ret = 0;
      break;
    }
    if (ret) break;
    if (nonblock) {
      ret = err(EWOULDBLOCK);
      break;
    }
    if (!rs.cq_armed) {
      ibv_req_notify_cq(rs.cm_id->recv_cq, 0);
      rs.cq_armed = true;
    } else if (rs.cq_waiter) {
      rs.cv.wait(l);
    } else {
      update_credits(rs);
      if ((ret = wait_cq_event(rs, l))) break;
    }
  }
  const int e = errno;
  update_credits(rs);
  errno = e;
  return ret;
}

}  // namespace

int progress(RSocket& rs, Lock& l, bool nonblock, const Test& test) {
  if (!rs.cm_id || !rs.cm_id->qp) return test(rs) ? 0 : err(ENOTCONN);
  if (nonblock) return process(rs, l, true, test);
  const uint64_t start = mono_us();
  do {  // a short busy poll first (rsocket(7) polling_time), then sleep
    if (!process(rs, l, true, test)) return 0;
    if (errno != EWOULDBLOCK) return -1;
  } while (mono_us() - start <= config().polling_time);
  return process(rs, l, false, test);
}

// ---- posting ------------------------------------------------------------------------------------

int post_write(RSocket& rs, ibv_sge* sgl, int nsge, uint32_t msg, bool imm, int flags, uint64_t addr,
               uint32_t rkey) {
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = msg;
  wr.sg_list = sgl;
  wr.num_sge = nsge;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = flags;
  if (imm) wr.imm_data = htobe32(msg);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  return seterrno(ibv_post_send(rs.cm_id->qp, &wr, &bad));
}

int post_msg(RSocket& rs, uint32_t msg) { return post_write(rs, nullptr, 0, msg, true, 0, 0, 0); }

int write_iov(RSocket& rs, IovCursor& src, uint32_t len, uint32_t msg, bool direct, uint64_t addr,
              uint32_t rkey) {
  rs.sqe_avail--;
  rs.sbuf_bytes_avail -= len;
  ibv_sge sge[2];
  if (len <= rs.sq_inline && src.contiguous() >= len) {  // inline from the program's buffer
    sge[0] = ibv_sge{reinterpret_cast<uintptr_t>(src.here()), len, 0};
    src.skip(len);
    return post_write(rs, sge, 1, msg, !direct, IBV_SEND_INLINE, addr, rkey);
  }
  const uint32_t first = std::min(len, rs.sbuf_size - rs.sbuf_pos);
  src.take(rs.sbuf + rs.sbuf_pos, first);
  sge[0] = ibv_sge{reinterpret_cast<uintptr_t>(rs.sbuf + rs.sbuf_pos), first, rs.smr->lkey};
  int n = 1;
  if (first < len) {  // the ring wraps: the rest from its start
    src.take(rs.sbuf, len - first);
    sge[1] = ibv_sge{reinterpret_cast<uintptr_t>(rs.sbuf), len - first, rs.smr->lkey};
    n = 2;
  }
  rs.sbuf_pos = (rs.sbuf_pos + len) % rs.sbuf_size;
  return post_write(rs, sge, n, msg, !direct, len <= rs.sq_inline ? IBV_SEND_INLINE : 0, addr, rkey);
}

uint64_t mono_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000;
}

// ---- state tests --------------------------------------------------------------------------------

bool can_send(const RSocket& rs) {
  return rs.sqe_avail > 0 && rs.sbuf_bytes_avail >= kSndLowat && rs.sseq_no != rs.sseq_comp &&
         rs.tsgl[rs.target_sge].length != 0;
}

bool have_rdata(const RSocket& rs) { return rs.rmsg_head != rs.rmsg_tail; }

bool ctrl_avail(const RSocket& rs) { return rs.ctrl_seqno != rs.ctrl_max_seqno; }

bool nonblocking(const RSocket& rs, int flags) {
  return (rs.fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

uint32_t next_xfer(uint32_t& olen, size_t left) {
  if (olen >= left) return static_cast<uint32_t>(left);
  const uint32_t n = olen;
  if (olen < kMaxTransfer) olen <<= 1;  // start small so the first bytes leave at once
  return n;
}

int wait_send(RSocket& rs, Lock& l, bool nonblock) {
  if (can_send(rs)) return 0;
  if (progress(rs, l, nonblock, [](RSocket& r) { return can_send(r) || !(r.state & kWritable); })) return -1;
  if (!(rs.state & kWritable)) return err(rs.shut_wr ? EPIPE : ECONNRESET);
  return 0;
}

}  // namespace hcasim::rdmacm::rs
