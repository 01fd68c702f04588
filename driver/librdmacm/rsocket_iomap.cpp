// SPDX-License-Identifier: Apache-2.0
// Direct data placement (rsocket(7) riomap/riounmap/riowrite). riomap registers a buffer; one
// mapped for PROT_WRITE takes an entry of the peer's target iomap, which the next send fills
// (an RDMA WRITE WITH IMM of a struct rs_iomap, the immediate naming the entry). riowrite then
// writes into the peer's mapped buffer with plain RDMA WRITEs: no immediate, no receive used;
// the data is part of the stream only in that later messages follow it.
#include <byteswap.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

/// A free entry of the peer's target iomap, or -1.
int free_index(const RSocket& rs) {
  for (uint32_t i = 0; i < rs.remote_iomap.length; ++i)
    if (std::none_of(rs.iomaps.begin(), rs.iomaps.end(), [i](const IomapMr& m) { return m.index == int(i); }))
      return static_cast<int>(i);
  return -1;
}

/// The peer's mapping that holds @p offset, or false.
bool find_iomap(const RSocket& rs, uint64_t offset, RsIomap& out) {
  for (const RsIomap& m : rs.tiomap) {
    if (m.sge.length && offset >= m.offset && offset - m.offset < m.sge.length) {
      out = m;
      return true;
    }
  }
  return false;
}

}  // namespace

int send_iomaps(RSocket& rs, Lock& l, int flags) {
  int ret = 0;
  for (IomapMr& m : rs.iomaps) {
    if (m.index < 0 || m.sent) continue;
    if ((ret = wait_send(rs, l, nonblocking(rs, flags)))) break;
    RsIomap iom{m.offset, RsSge{reinterpret_cast<uintptr_t>(m.mr->addr), m.mr->rkey, uint32_t(m.mr->length)}};
    if (rs.swap_sgl)
      iom = RsIomap{bswap_64(iom.offset),
                    RsSge{bswap_64(iom.sge.addr), bswap_32(iom.sge.key), bswap_32(iom.sge.length)}};
    const iovec v{&iom, sizeof iom};
    IovCursor src{&v, 1};
    rs.sseq_no++;  // it takes a receive, so a credit
    ret = write_iov(rs, src, sizeof iom, msg_set(MsgOp::IomapSgl, uint32_t(m.index)), false,
                    rs.remote_iomap.addr + sizeof(RsIomap) * uint32_t(m.index), rs.remote_iomap.key);
    m.sent = true;
    if (ret) break;
  }
  rs.iomap_pending = std::any_of(rs.iomaps.begin(), rs.iomaps.end(),
                                 [](const IomapMr& m) { return m.index >= 0 && !m.sent; });
  return ret;
}

void iomap_updated(RSocket& rs, uint32_t index) {
  if (index >= rs.tiomap.size()) return;
  RsIomap m;
  std::memcpy(&m, rs.target_buf + sizeof(RsSge) * kSglSize + sizeof(RsIomap) * index, sizeof m);
  if (rs.swap_sgl)
    m = RsIomap{bswap_64(m.offset), RsSge{bswap_64(m.sge.addr), bswap_32(m.sge.key), bswap_32(m.sge.length)}};
  rs.tiomap[index] = m;
}

void free_iomaps(RSocket& rs) {
  for (IomapMr& m : rs.iomaps) ibv_dereg_mr(m.mr);
  rs.iomaps.clear();
}

}  // namespace hcasim::rdmacm::rs

using namespace hcasim::rdmacm;
using namespace hcasim::rdmacm::rs;

HCASIM_RDMACM_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  if (!buf || !len || (prot & ~PROT_WRITE) || offset < -1) return err(EINVAL);
  Lock l(rs->mu);
  if (!rs->cm_id->pd) return err(EINVAL);  // no device yet: bind or connect first
  const bool remote = prot & PROT_WRITE;
  const int index = remote ? free_index(*rs) : -1;
  if (remote && index < 0) return err(ENOMEM);  // the peer offers no (more) entries
  int access = IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE : 0);
  ibv_mr* mr = ibv_reg_mr(rs->cm_id->pd, buf, len, access);
  if (!mr) return -1;
  if (offset == -1) offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(buf));
  rs->iomaps.push_back(IomapMr{uint64_t(offset), mr, index, false});
  if (remote) rs->iomap_pending = true;
  return offset;
}

HCASIM_RDMACM_EXPORT int riounmap(int socket, void* buf, size_t len) {
  RSocket* rs = lookup(socket);
  if (!rs) return -1;
  Lock l(rs->mu);
  auto it = std::find_if(rs->iomaps.begin(), rs->iomaps.end(),
                         [&](const IomapMr& m) { return m.mr->addr == buf && m.mr->length == len; });
  if (it == rs->iomaps.end()) return err(EINVAL);
  ibv_dereg_mr(it->mr);
  rs->iomaps.erase(it);  // the peer is not told (rdma-core): its entry stays until reused
  return 0;
}

HCASIM_RDMACM_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  RSocket* rs = lookup(socket);
  if (!rs) return size_t(-1);
  if (!count) return 0;
  std::lock_guard<std::mutex> serial(rs->send_mu);
  Lock l(rs->mu);
  if ((rs->state & kOpening) && wait_connected(*rs, l, nonblocking(*rs, flags))) return size_t(-1);
  if (!(rs->state & kConnected)) return size_t(err(EPIPE));
  if (!(rs->state & kWritable)) return size_t(err(rs->shut_wr ? EPIPE : ECONNRESET));
  if (rs->iomap_pending && send_iomaps(*rs, l, flags)) return size_t(-1);
  const iovec v{const_cast<void*>(buf), count};
  IovCursor src{&v, 1};
  size_t left = count;
  uint64_t pos = uint64_t(offset);
  uint32_t olen = kOlapStart;
  int ret = 0;
  RsIomap iom;
  while (left) {
    if ((ret = wait_send(*rs, l, nonblocking(*rs, flags)))) break;
    if (!find_iomap(*rs, pos, iom)) break;  // the peer has not mapped these bytes
    const uint32_t xfer = static_cast<uint32_t>(
        std::min<uint64_t>({next_xfer(olen, left), rs->sbuf_bytes_avail, iom.offset + iom.sge.length - pos}));
    if ((ret = write_iov(*rs, src, xfer, msg_set(MsgOp::Write, xfer), true, iom.sge.addr + (pos - iom.offset),
                         iom.sge.key)))
      break;
    left -= xfer;
    pos += xfer;
  }
  if (left == count) return size_t(ret ? ret : err(EINVAL));
  return count - left;
}
