// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/device.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "hcasim/verbs/address.h"
#include "hcasim/verbs/error.h"
#include "hcasim/verbs/pair.h"

namespace hcasim::verbs {
namespace {

const char* kNoDevices =
    "no RDMA devices found (hardware: check `ibv_devices`; rxe: `rdma link add rxe0 type rxe netdev IF`; "
    "simulator: run under `hcasim run --hosts N --`, or link hcasim::ibverbs)";

struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  DeviceList() {
    list = ibv_get_device_list(&n);
    if (!list) throwSystemError("ibv_get_device_list", errno);
  }
  ~DeviceList() { ibv_free_device_list(list); }
};

bool isIpv4Mapped(const uint8_t* g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, prefix, 12) == 0;
}

}  // namespace

std::vector<DeviceInfo> Device::list() {
  DeviceList dl;
  std::vector<DeviceInfo> out;
  for (int i = 0; i < dl.n; ++i) {
    DeviceInfo d;
    d.name = ibv_get_device_name(dl.list[i]);
    if (ibv_context* c = ibv_open_device(dl.list[i])) {
      ibv_port_attr pa{};
      if (ibv_query_port(c, 1, &pa) == 0) {
        d.portActive = pa.state == IBV_PORT_ACTIVE;
        d.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      }
      ibv_close_device(c);
    }
    out.push_back(d);
  }
  return out;
}

int Device::defaultGidIndex(ibv_context* ctx, uint8_t port, const ibv_port_attr& pa) {
  if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) return 0;
  int best = -1, bestScore = -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid gid{};
    int type = -1;
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, uint32_t(i), &e, 0) == 0) {
      gid = e.gid;
      type = int(e.gid_type);
    } else if (ibv_query_gid(ctx, port, i, &gid) != 0) {
      continue;
    }
    const uint8_t* g = gid.raw;
    bool zero = true;
    for (int k = 0; k < 16; ++k) zero = zero && g[k] == 0;
    if (zero) continue;
    const bool v4 = isIpv4Mapped(g);
    const bool v2 = type == IBV_GID_TYPE_ROCE_V2;
    const bool linkLocal = g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
    // RoCEv2 + IPv4-mapped (routable, what rdma_cm picks for IPv4), then any IPv4-mapped,
    // then a routable RoCEv2 GID, then anything non-zero.
    const int score = (v4 && v2) ? 4 : v4 ? 3 : (v2 && !linkLocal) ? 2 : 1;
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best >= 0 ? best : 0;
}

std::shared_ptr<Device> Device::open(const DeviceAttr& attr) {
  std::shared_ptr<Device> d(new Device);
  d->port_ = attr.port;
  d->mode_ = attr.mode;
  d->busyPollSpins_ = attr.busyPollSpins;
  {
    DeviceList dl;
    if (dl.n == 0) throw IoError(kNoDevices);
    std::string seen;
    for (int i = 0; i < dl.n && !d->ctx_; ++i) {
      const std::string name = ibv_get_device_name(dl.list[i]);
      seen += (seen.empty() ? "" : ", ") + name;
      if (!attr.name.empty() && name != attr.name) continue;
      ibv_context* c = ibv_open_device(dl.list[i]);
      if (!c) {
        if (!attr.name.empty()) throwSystemError("ibv_open_device(" + name + ")", errno);
        continue;
      }
      ibv_port_attr pa{};
      const int rc = ibv_query_port(c, attr.port, &pa);
      if (rc != 0) {
        ibv_close_device(c);
        if (!attr.name.empty())
          throwSystemError("ibv_query_port(" + name + ", port " + std::to_string(attr.port) + ")", rc);
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        ibv_close_device(c);
        if (!attr.name.empty())
          throw IoError("device " + name + " port " + std::to_string(attr.port) + " is " +
                        ibv_port_state_str(pa.state) + ", not ACTIVE");
        continue;
      }
      d->ctx_ = c;
      d->name_ = name;
      d->portAttr_ = pa;
    }
    if (!d->ctx_) {
      if (!attr.name.empty()) throw IoError("no RDMA device named '" + attr.name + "' (found: " + seen + ")");
      throw IoError("no RDMA device with an ACTIVE port " + std::to_string(attr.port) + " (found: " + seen +
                    ")");
    }
  }
  if (int rc = ibv_query_device(d->ctx_, &d->devAttr_))
    throwSystemError("ibv_query_device(" + d->name_ + ")", rc);
  d->gidIndex_ = attr.gidIndex >= 0 ? attr.gidIndex : defaultGidIndex(d->ctx_, d->port_, d->portAttr_);
  if (d->gidIndex_ >= d->portAttr_.gid_tbl_len)
    throw IoError(d->name_ + ": GID index " + std::to_string(d->gidIndex_) + " outside the GID table (" +
                  std::to_string(d->portAttr_.gid_tbl_len) + " entries)");
  if (int rc = ibv_query_gid(d->ctx_, d->port_, d->gidIndex_, &d->gid_))
    throwSystemError(d->name_ + ": ibv_query_gid(index " + std::to_string(d->gidIndex_) + ")",
                     errno ? errno : (rc > 0 ? rc : EINVAL));
  if (d->ethernet()) {
    bool zero = true;
    for (uint8_t b : d->gid_.raw) zero = zero && b == 0;
    if (zero)
      throw IoError(d->name_ + ": GID index " + std::to_string(d->gidIndex_) +
                    " is empty; RoCE needs a GID (is an IP address configured on the netdev?)");
  }
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (!d->pd_) throwSystemError(d->name_ + ": ibv_alloc_pd", errno);
  if (d->mode_ == PollMode::Event) {
    d->channel_ = ibv_create_comp_channel(d->ctx_);
    if (!d->channel_) throwSystemError(d->name_ + ": ibv_create_comp_channel", errno);
    // Non-blocking: the loop waits in poll(2) and drains with ibv_get_cq_event until EAGAIN.
    const int fl = fcntl(d->channel_->fd, F_GETFL);
    if (fl < 0 || fcntl(d->channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0)
      throwSystemError(d->name_ + ": fcntl(O_NONBLOCK) on the completion channel", errno);
    d->wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->wakeFd_ < 0) throwSystemError("eventfd", errno);
    Device* raw = d.get();
    d->loop_ = std::thread([raw] { raw->loop(); });
  }
  return d;
}

Device::~Device() {
  if (loop_.joinable()) {
    stop_ = true;
    uint64_t one = 1;
    if (write(wakeFd_, &one, sizeof one) < 0) { /* the loop also wakes on its poll timeout */
    }
    loop_.join();
  }
  if (wakeFd_ >= 0) close(wakeFd_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

std::string Device::describe() const {
  return name_ + " port " + std::to_string(port_) + " (" + (ethernet() ? "Ethernet/RoCE" : "InfiniBand") +
         ") gid[" + std::to_string(gidIndex_) + "] " + gidString(gid_.raw) + " lid " + std::to_string(lid()) +
         " mtu " + std::to_string(128u << unsigned(activeMtu())) + ", " +
         (mode_ == PollMode::Event ? "event mode" : "busy-poll mode");
}

void Device::attach(Pair* p) {
  std::lock_guard<std::recursive_mutex> g(pairsMu_);
  pairs_.push_back(p);
}

void Device::detach(Pair* p) {
  std::lock_guard<std::recursive_mutex> g(pairsMu_);
  pairs_.erase(std::remove(pairs_.begin(), pairs_.end(), p), pairs_.end());
}

int Device::progressAll() {
  std::lock_guard<std::recursive_mutex> g(pairsMu_);
  int n = 0;
  for (Pair* p : pairs_) n += p->progress(true);
  return n;
}

int Device::progressFor(Pair* self, bool sweep) {
  std::lock_guard<std::recursive_mutex> g(pairsMu_);
  int n = self->progress(true);
  for (Pair* p : pairs_)
    if (p != self) n += p->progress(sweep);
  return n;
}

void Device::probeAll() {
  std::lock_guard<std::recursive_mutex> g(pairsMu_);  // a pair detaches under it before it goes
  for (Pair* p : pairs_) p->probe();
}

void Device::loop() {
  pollfd pfs[2] = {{channel_->fd, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
  while (!stop_.load()) {
    pfs[0].revents = pfs[1].revents = 0;
    poll(pfs, 2, 1000);
    if (stop_.load()) break;
    ++wakeups_;
    for (;;) {
      // Held while the event is dispatched: a Pair detaches (and destroys its CQ) under the
      // same lock, so cq_context always names a live Pair here.
      std::lock_guard<std::recursive_mutex> g(pairsMu_);
      ibv_cq* cq = nullptr;
      void* cqctx = nullptr;
      {
        std::lock_guard<std::mutex> arm(armMu_);
        if (ibv_get_cq_event(channel_, &cq, &cqctx) != 0) break;  // EAGAIN: drained
      }
      ++events_;
      static_cast<Pair*>(cqctx)->onEvent(cq);
    }
  }
}

}  // namespace hcasim::verbs
