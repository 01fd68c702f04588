// SPDX-License-Identifier: Apache-2.0
// The rsocket descriptor table (a socket is found by the descriptor the program holds: its CM
// channel's for a stream socket, as in rdma-core), the defaults from /etc/rdma/rsocket, and
// allocating and freeing sockets.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "cma_private.h"
#include "rsocket.h"

namespace hcasim::rdmacm::rs {
namespace {

std::mutex table_mu;
std::map<int, RSocket*>& table() {
  static auto* t = new std::map<int, RSocket*>;  // never destroyed: sockets may outlive main
  return *t;
}

/// One value from @p dir/@p name into @p out (unchanged when the file is absent or unreadable).
template <class T>
bool read_value(const std::string& dir, const char* name, T& out) {
  FILE* f = std::fopen((dir + "/" + name).c_str(), "r");
  if (!f) return false;
  long long v = 0;
  const bool ok = std::fscanf(f, "%lld", &v) == 1;
  std::fclose(f);
  if (ok) out = static_cast<T>(v);
  return ok;
}

Config load_config() {
  Config c;
  const char* env = std::getenv("HCASIM_RSOCKET_CONF_DIR");
  const std::string dir = env && *env ? env : "/etc/rdma/rsocket";
  read_value(dir, "polling_time", c.polling_time);
  read_value(dir, "wake_up_interval", c.wake_up_interval);
  read_value(dir, "inline_default", c.inline_size);
  read_value(dir, "sqsize_default", c.sqsize);
  read_value(dir, "rqsize_default", c.rqsize);
  if (read_value(dir, "mem_default", c.mem) && c.mem < 1) c.mem = 1;
  if (read_value(dir, "wmem_default", c.wmem) && c.wmem < kSndLowat) c.wmem = kSndLowat << 1;
  // Rounded down to a size the 8-bit scale carries, as rdma-core means to (its 44 applies the
  // two conversions the other way round, which garbles sizes above 128).
  if (read_value(dir, "iomap_size", c.iomap_size))
    c.iomap_size = static_cast<uint16_t>(value_of(static_cast<uint8_t>(scale_of(c.iomap_size))));
  return c;
}

}  // namespace

const Config& config() {
  const int e = errno;  // absent files are no error of the caller's
  static const Config c = load_config();
  errno = e;
  return c;
}

RSocket* alloc(const RSocket* parent) {
  auto* rs = new (std::nothrow) RSocket;
  if (!rs) return nullptr;
  rs->owner = getpid();
  const Config& c = config();
  rs->sbuf_size = parent ? parent->sbuf_size : c.wmem;
  rs->rbuf_size = parent ? parent->rbuf_size : c.mem;
  rs->sq_inline = parent ? parent->sq_inline : c.inline_size;
  rs->sq_size = parent ? parent->sq_size : c.sqsize;
  rs->rq_size = parent ? parent->rq_size : c.rqsize;
  rs->target_iomap_size = parent ? parent->target_iomap_size : c.iomap_size;
  rs->ctrl_max_seqno = parent ? parent->ctrl_max_seqno : kQpCtrlSize;
  return rs;
}

int insert(RSocket* rs, int index) {
  if (index < 0) return err(EBADF);
  std::lock_guard<std::mutex> g(table_mu);
  auto [it, fresh] = table().emplace(index, rs);
  if (!fresh) return err(EBADF);  // a descriptor is one socket's (a stale entry is a bug)
  rs->index = index;
  return index;
}

RSocket* lookup(int fd) {
  RSocket* rs = nullptr;
  {
    std::lock_guard<std::mutex> g(table_mu);
    auto it = table().find(fd);
    if (it != table().end()) rs = it->second;
  }
  if (!rs) {
    errno = EBADF;
    return nullptr;
  }
  if (rs->owner != getpid()) {  // a forked child: the QP and its memory are the parent's
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return rs;
}

namespace {

void remove(RSocket* rs) {
  if (rs->index < 0) return;
  std::lock_guard<std::mutex> g(table_mu);
  auto it = table().find(rs->index);
  if (it != table().end() && it->second == rs) table().erase(it);
  rs->index = -1;
}

void dereg(ibv_mr*& mr) {
  if (mr) ibv_dereg_mr(mr);
  mr = nullptr;
}

/// Polls the CQ empty: the flushed receives of a closed connection are software's to take.
void drain_cq(ibv_cq* cq) {
  ibv_wc wc[16];
  while (ibv_poll_cq(cq, 16, wc) > 0) {
  }
}

}  // namespace

void free_socket(RSocket* rs) {
  remove(rs);
  if (rs->accept_fd >= 0) close(rs->accept_fd);
  if (rs->cm_id) {
    free_iomaps(*rs);
    if (rs->cm_id->qp) {
      flush_qp(*rs);
      drain_cq(rs->cm_id->recv_cq);
      rdma_destroy_qp(rs->cm_id);  // also its CQ and completion channel
    }
  }
  dereg(rs->smr);
  dereg(rs->rmr);
  dereg(rs->target_mr);
  std::free(rs->sbuf);
  std::free(rs->rbuf);
  std::free(rs->target_buf);
  if (rs->cm_id) rdma_destroy_id(rs->cm_id);
  delete rs;
}

}  // namespace hcasim::rdmacm::rs
