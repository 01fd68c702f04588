// SPDX-License-Identifier: Apache-2.0
// Devices, contexts, port/GID queries, PDs, MRs, completion channels and async events.
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "extended.h"
#include "handoff.h"
#include "objects.h"
#include "verbs_core.h"

namespace hcasim::drv {
namespace {

std::vector<SimDevice*>& devices() {
  static auto* v = new std::vector<SimDevice*>;  // lives until exit, like a driver's device list
  return *v;
}

void build_devices() {
  static std::once_flag once;
  std::call_once(once, [] {
    int i = 0;
    for (HcaLink* l : links()) {
      auto* d = new SimDevice{};
      d->link = l;
      d->index = i;
      d->dev.node_type = IBV_NODE_CA;
      d->dev.transport_type = IBV_TRANSPORT_IB;
      snprintf(d->dev.name, sizeof d->dev.name, "%s", l->name().c_str());
      snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs%d", i);
      snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "/sys/class/infiniband_verbs/uverbs%d", i);
      snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/sys/class/infiniband/%s", l->name().c_str());
      devices().push_back(d);
      ++i;
    }
  });
}

int set_errno(int e) {
  errno = e;
  return e;
}

/**
 * ibv_reg_mr's range checks, as the kernel's ib_umem_get makes them: a range of no pages or
 * whose end wraps past the top of the address space is EINVAL; one with a page not mapped
 * in this process cannot be pinned: EFAULT.
 */
int check_mr_range(const void* addr, size_t length) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr), page = uintptr_t(getpagesize());
  // Zero bytes at a page boundary span no page: ib_umem_get refuses a region of no pages. (At
  // any other address they lie in one page, which it pins.)
  if (length == 0) return (a & (page - 1)) == 0 ? EINVAL : 0;
  if (a + length < a || ((a + length + page - 1) & ~(page - 1)) < a + length) return EINVAL;
  // mincore fails with ENOMEM where a page of the range is not mapped; in chunks, so the
  // residency vector stays small however long the region.
  constexpr size_t kChunkPages = 4096;
  unsigned char resident[kChunkPages];
  const uintptr_t end = a + length;
  for (uintptr_t p = a & ~(page - 1); p < end; p += kChunkPages * page) {
    const size_t n = size_t(std::min<uintptr_t>(kChunkPages * page, end - p));
    if (mincore(reinterpret_cast<void*>(p), n, resident) != 0 && errno == ENOMEM) return EFAULT;
  }
  return 0;
}

}  // namespace

bool wait_readable(HcaLink& link, int efd) {
  pollfd p{efd, POLLIN, 0};
  if (poll(&p, 1, 0) > 0) return true;
  if (wait_device(link)) return true;  // caller re-checks its queue
  if (fcntl(efd, F_GETFL) & O_NONBLOCK) return false;
  std::vector<pollfd> ps{{efd, POLLIN, 0}};
  link.wait_activity(ps, 50);
  return true;
}

ibv_device** get_device_list(int* num) {
  build_devices();
  auto& d = devices();
  auto** list = static_cast<ibv_device**>(calloc(d.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < d.size(); ++i) list[i] = &d[i]->dev;
  if (num) *num = int(d.size());
  return list;
}

void free_device_list(ibv_device** list) { free(list); }

uint64_t get_device_guid(ibv_device* device) {
  auto* d = reinterpret_cast<SimDevice*>(device);
  KernelDevice& k = kernel_device(*d->link);
  return htobe64(k.caps().node_guid);
}

/**
 * The extended verbs (extended.h). verbs.h's dispatchers use an op only if vctx.sz reaches it
 * and it is set; advise_mr stays unset, as in rxe: ibv_advise_mr then returns EOPNOTSUPP (no ODP).
 */
static void install_extended_ops(verbs_context& v) {
  v.create_qp_ex = create_qp_ex;
  v.create_cq_ex = create_cq_ex;
  v.query_device_ex = query_device_ex;
  v.alloc_td = alloc_td;
  v.dealloc_td = dealloc_td;
  v.alloc_parent_domain = alloc_parent_domain;
  v.open_xrcd = open_xrcd;
  v.close_xrcd = close_xrcd;
  v.create_srq_ex = create_srq_ex;
  v.get_srq_num = get_srq_num;
  v.open_qp = open_qp;
}

ibv_context* open_device(ibv_device* device) {
  auto* d = reinterpret_cast<SimDevice*>(device);
  KernelDevice& k = kernel_device(*d->link);
  if (!k.ok()) {
    errno = ENODEV;
    return nullptr;
  }
  auto* c = new SimContext{};
  c->sdev = d;
  c->kdev = &k;
  c->async_efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  ctx.cmd_fd = eventfd(0, EFD_CLOEXEC);  // a real fd, so programs that fstat/close it are fine
  ctx.async_fd = c->async_efd;
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.query_port = query_port_ex;
  install_extended_ops(c->vctx);
  ctx.ops.poll_cq = poll_cq;
  ctx.ops.req_notify_cq = req_notify_cq;
  ctx.ops.post_send = post_send;
  ctx.ops.post_recv = post_recv;
  ctx.ops.post_srq_recv = post_srq_recv;
  ctx.ops.alloc_mw = alloc_mw;
  ctx.ops.dealloc_mw = dealloc_mw;
  ctx.ops.bind_mw = bind_mw;
  c->port_events.ctx = c;
  k.add_port_listener(&c->port_events);
  return &ctx;
}

int close_device(ibv_context* context) {
  SimContext* c = sim(context);
  c->kdev->remove_port_listener(&c->port_events);
  close(context->cmd_fd);
  close(c->async_efd);
  pthread_mutex_destroy(&context->mutex);
  delete c;
  return 0;
}

int query_device(ibv_context* context, ibv_device_attr* a) {
  const hw::HcaCaps& cp = sim(context)->kdev->caps();
  std::memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "0.1.0");
  a->node_guid = htobe64(cp.node_guid);
  a->sys_image_guid = htobe64(cp.sys_image_guid);
  a->max_mr_size = cp.max_mr_size;
  a->page_size_cap = 0x1000 | 0x200000;
  a->vendor_id = cp.vendor_id;
  a->vendor_part_id = cp.vendor_part_id;
  a->hw_ver = cp.hw_ver;
  a->max_qp = int(cp.max_qp);
  a->max_qp_wr = int(cp.max_qp_wr);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_MEM_WINDOW |
                        IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a->max_mw = int(cp.max_mr);
  a->max_sge = int(cp.max_sge);
  a->max_sge_rd = int(cp.max_sge);
  a->max_cq = int(cp.max_cq);
  a->max_cqe = int(cp.max_cqe);
  a->max_mr = int(cp.max_mr);
  a->max_pd = int(cp.max_pd);
  a->max_qp_rd_atom = int(cp.max_qp_rd_atom);
  a->max_qp_init_rd_atom = int(cp.max_qp_init_rd_atom);
  a->max_res_rd_atom = int(cp.max_qp_rd_atom * cp.max_qp);
  a->atomic_cap = ibv_atomic_cap(cp.atomic_cap);
  a->max_srq = int(cp.max_srq);
  a->max_srq_wr = int(cp.max_srq_wr);
  a->max_srq_sge = int(cp.max_srq_sge);
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = uint8_t(cp.phys_port_cnt);
  return 0;
}

int query_port_ex(ibv_context* context, uint8_t port, ibv_port_attr* a, size_t len) {
  ibv_port_attr full;
  int r = query_port(context, port, &full);
  if (r) return r;
  std::memcpy(a, &full, len < sizeof full ? len : sizeof full);
  return 0;
}

namespace {

/**
 * The port's width and per-lane speed codes (ibv_query_port(3)) for a line rate, as mlx5 reports
 * an Ethernet port: 100 GbE is 4X at 25 Gb/s (EDR), 25 GbE 1X at 25 Gb/s, 1 GbE 1X SDR.
 */
void width_and_speed(uint32_t gbps, ibv_port_attr* a) {
  const uint32_t lanes = gbps >= 40 ? 4 : 1;
  const double lane = double(gbps) / lanes;
  a->active_width = lanes == 4 ? 2 : 1;
  a->active_speed = lane <= 2.5  ? 1
                    : lane <= 5  ? 2
                    : lane <= 10 ? 4
                    : lane <= 14 ? 16
                    : lane <= 25 ? 32
                    : lane <= 50 ? 64
                                 : 128;
}

}  // namespace

int query_port(ibv_context* context, uint8_t port, ibv_port_attr* a) {
  KernelDevice& k = *sim(context)->kdev;
  const hw::HcaCaps& cp = k.caps();
  if (port != 1) return set_errno(EINVAL);
  hw::PortInfo info{};
  if (const int r = k.query_port(port, info)) return set_errno(r);
  std::memset(a, 0, sizeof *a);
  // The link's real state: DOWN while a link-down fault holds it (hca_port_state.cpp).
  a->state = ibv_port_state(info.state);
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = ibv_mtu(cp.active_mtu_log - 7);
  a->gid_tbl_len = hw::kGidTableLen;
  a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a->max_msg_sz = 1u << 31;
  a->pkey_tbl_len = 1;
  a->lid = 0;
  a->sm_lid = 0;
  a->lmc = 0;
  a->max_vl_num = 1;
  width_and_speed(cp.link_gbps, a);
  a->phys_state = info.phys_state;  // LINK_UP (5), POLLING (2) while down
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

int gid_table_len(ibv_context*, uint8_t port) { return port == 1 ? int(hw::kGidTableLen) : 0; }

int query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || uint32_t(index) >= hw::kGidTableLen) return set_errno(EINVAL);
  const hw::HcaCaps& cp = sim(context)->kdev->caps();
  hw::port_gid(uint32_t(index), cp.port_mac, cp.port_ipv4, gid->raw);
  return 0;
}

int query_gid_entry(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* e) {
  if (port != 1 || index >= hw::kGidTableLen) return EINVAL;
  std::memset(e, 0, sizeof *e);
  if (query_gid(context, uint8_t(port), int(index), &e->gid)) return EINVAL;
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = IBV_GID_TYPE_ROCE_V2;
  e->ndev_ifindex = 0;
  return 0;
}

int query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) return set_errno(EINVAL);
  *pkey = htobe16(0xffff);
  return 0;
}

ibv_pd* alloc_pd(ibv_context* context) {
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::AllocPd);
  if (int e = sim(context)->kdev->command(mb)) {
    errno = e;
    return nullptr;
  }
  auto* p = new SimPd{};
  p->pd.context = context;
  p->pd.handle = mb.arg0;
  p->pdn = mb.arg0;
  return &p->pd;
}

int dealloc_pd(ibv_pd* pd) {
  SimPd* p = sim(pd);
  if (p->parent_domain) return dealloc_parent_domain(pd);
  if (p->users.load()) return set_errno(EBUSY);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DeallocPd, p->pdn);
  if (int e = sim(pd->context)->kdev->command(mb)) return set_errno(e);
  delete p;
  return 0;
}

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING;
  // ibv_reg_mr(3): remote write or atomic access requires local write.
  if ((access & ~known) || ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
                            !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return nullptr;
  }
  if (int e = check_mr_range(addr, length)) {
    errno = e;
    return nullptr;
  }
  SimPd* p = sim(pd);
  KernelDevice& k = *sim(pd->context)->kdev;
  auto region = std::make_unique<PinnedRegion>(k.link(), k.iova(), addr, length);
  if (!region->ok()) {
    errno = ENOMEM;
    return nullptr;
  }
  hw::MkeyCtx m{};
  m.pdn = p->pdn;
  m.start = iova;
  m.length = length;
  m.access = access & (hw::kAccessLocalWrite | hw::kAccessRemoteWrite | hw::kAccessRemoteRead |
                       hw::kAccessRemoteAtomic | hw::kAccessMwBind);
  m.pages = region->desc();
  hw::CmdMailbox mb = hw::make_cmd_with(hw::CmdOpcode::CreateMkey, m);
  if (int e = k.command(mb)) {
    errno = e;
    return nullptr;
  }
  auto* r = new SimMr{};
  r->region = std::move(region);
  r->mr.context = pd->context;
  r->mr.pd = pd;
  r->mr.addr = addr;
  r->mr.length = length;
  r->mr.handle = mb.arg0;
  r->mr.lkey = mb.arg0;
  r->mr.rkey = mb.arg0;
  r->access = access;
  p->users++;
  return &r->mr;
}

int dereg_mr(ibv_mr* mr) {
  SimMr* r = sim(mr);
  hw::CmdMailbox mb = hw::make_cmd(hw::CmdOpcode::DestroyMkey, mr->lkey);
  if (int e = sim(mr->context)->kdev->command(mb)) return set_errno(e);
  sim(mr->pd)->users--;
  delete r;
  return 0;
}

ibv_comp_channel* create_comp_channel(ibv_context* context) {
  auto* c = new SimChannel{};
  c->ch.context = context;
  c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  c->ch.refcnt = 0;
  if (c->ch.fd < 0) {
    delete c;
    return nullptr;
  }
  return &c->ch;
}

int destroy_comp_channel(ibv_comp_channel* channel) {
  SimChannel* c = sim(channel);
  if (c->users.load()) return set_errno(EBUSY);
  close(channel->fd);
  delete c;
  return 0;
}

/**
 * A wait that nothing can end: no event pending and none of the channel's CQs armed. On hardware
 * the program just hangs; the trace (and `hcasim run`'s explanations) say why. On a non-blocking
 * channel one such call is how a drain ends (poll(2) said readable, events taken until EAGAIN,
 * the last CQ not re-armed because its owner is closing); a second in a row is a program
 * polling for an event that cannot come.
 */
void note_unarmed_wait(HcaLink& link, SimChannel& c) {
  if (c.armed.load() || !link.trace_on(trace::TraceKind::Error)) return;
  {
    std::lock_guard<std::mutex> g(c.mu);
    if (!c.pending.empty()) return;
  }
  const int fl = fcntl(c.ch.fd, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK) && c.unarmed_polls.fetch_add(1) == 0) return;
  // Once until a CQ of the channel is armed again: a program polling a non-blocking channel in
  // a loop would otherwise get the line at every turn.
  if (c.unarmed_told.exchange(true)) return;
  char buf[240];
  snprintf(buf, sizeof buf,
           "ibv_get_cq_event waits on completion channel fd %d, but none of its CQs is armed: no completion "
           "event can come (ibv_req_notify_cq arms a CQ for one event; said once until one is armed)",
           c.ch.fd);
  link.trace(trace::TraceKind::Error, trace::kTraceNone, false, 0,
             trace::TraceFields().set_flag(trace::kTfError), buf);
}

int get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  SimChannel* c = sim(channel);
  HcaLink& link = *sim(channel->context)->sdev->link;
  note_channel_reader(*c);
  note_unarmed_wait(link, *c);
  for (;;) {
    {
      std::unique_lock<std::mutex> g(c->mu);
      if (!c->pending.empty()) {
        SimCq* s = c->pending.front();
        c->pending.pop_front();
        uint64_t one;
        if (read(channel->fd, &one, sizeof one) < 0) { /* count and queue move together */
        }
        *cq = &s->cq;
        *cq_context = s->cq.cq_context;  // read now: programs set it after ibv_create_cq
        s->arm_sn++;
        g.unlock();
        c->unarmed_polls = 0;
        note_event_taken(*s);
        return 0;
      }
    }
    if (!wait_readable(link, channel->fd)) {
      errno = EAGAIN;
      return -1;
    }
  }
}

void ContextPortEvents::port_event(uint8_t port, bool active) {
  // ibv_get_async_event(3): port events carry element.port_num.
  ibv_async_event ev{};
  ev.element.port_num = port;
  ev.event_type = active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
  push_async_event(ctx, ev);
}

void push_async_event(SimContext* ctx, const ibv_async_event& ev) {
  std::lock_guard<std::mutex> g(ctx->async_mu);
  ctx->async_q.push_back(ev);
  uint64_t one = 1;
  if (write(ctx->async_efd, &one, sizeof one) < 0) { /* eventfd cannot overflow here */
  }
}

int get_async_event(ibv_context* context, ibv_async_event* event) {
  SimContext* c = sim(context);
  for (;;) {
    {
      std::lock_guard<std::mutex> g(c->async_mu);
      if (!c->async_q.empty()) {
        *event = c->async_q.front();
        c->async_q.pop_front();
        note_async_taken(*event);
        uint64_t one;
        if (read(c->async_efd, &one, sizeof one) < 0) { /* count and queue move together */
        }
        return 0;
      }
    }
    if (!wait_readable(*c->sdev->link, c->async_efd)) {
      errno = EAGAIN;
      return -1;
    }
  }
}

}  // namespace hcasim::drv
