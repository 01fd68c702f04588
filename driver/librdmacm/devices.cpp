// SPDX-License-Identifier: Apache-2.0
// Library initialisation and the CM's view of the RDMA devices: the drop-in libibverbs's
// devices, matched to the node GUID the kernel reports, opened on first use with one PD each.
#include <fcntl.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "cma_private.h"

namespace hcasim::rdmacm {
namespace {

std::recursive_mutex g_mut;  // device list, device state
// In libibverbs's order. Never destroyed (threads may still use it while the process exits), so
// what it points to stays reachable for LeakSanitizer too.
std::vector<CmaDevice*>& g_devices = *new std::vector<CmaDevice*>;
ibv_device** g_list = nullptr;  ///< ibv_get_device_list's array: its devices outlive every id
std::atomic<bool> g_ready{false};
bool g_af_ib = false;
thread_local bool t_probing = false;

/// Fills g_devices from ibv_get_device_list (once: the simulated devices are fixed at start).
int sync_devices() {
  if (!g_devices.empty()) return 0;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return err(ENODEV);
  if (n == 0) {
    ibv_free_device_list(list);
    return err(ENODEV);
  }
  for (int i = 0; i < n; ++i) {
    auto* d = new CmaDevice;
    d->dev = list[i];
    d->guid = ibv_get_device_guid(list[i]);
    g_devices.push_back(d);
  }
  g_list = list;  // kept: the ibv_device pointers must outlive every id
  return 0;
}

/// Opens @p d and caches its limits; 0 or -1/errno.
int init_device(CmaDevice* d) {
  if (d->verbs) return 0;
  d->verbs = ibv_open_device(d->dev);
  if (!d->verbs) return err(ENODEV);
  ibv_device_attr attr{};
  int ret = ibv_query_device(d->verbs, &attr);
  if (ret) {
    ibv_close_device(d->verbs);
    d->verbs = nullptr;
    return err(ret);
  }
  d->link_layer = static_cast<uint8_t*>(std::calloc(attr.phys_port_cnt ? attr.phys_port_cnt : 1, 1));
  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    d->link_layer[p - 1] =
        ibv_query_port(d->verbs, p, &pa) ? uint8_t{IBV_LINK_LAYER_UNSPECIFIED} : pa.link_layer;
  }
  d->port_cnt = attr.phys_port_cnt;
  d->max_qpsize = attr.max_qp_wr;
  d->max_initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom);
  d->max_responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom);
  return 0;
}

/// Does the kernel take AF_IB addresses? Bind an id of the IB port space to an AF_IB wildcard.
void probe_af_ib() {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_IB)) return;
  sockaddr_ib sib{};
  sib.sib_family = AF_IB;
  sib.sib_sid = htobe64(RDMA_IB_IP_PS_TCP);
  sib.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
  const int saved = errno;
  g_af_ib = bind_addr2(id, reinterpret_cast<sockaddr*>(&sib), sizeof sib) == 0;
  rdma_destroy_id(id);
  errno = saved;
}

}  // namespace

int ucma_init() {
  if (g_ready.load(std::memory_order_acquire) || t_probing) return 0;
  std::lock_guard<std::recursive_mutex> lock(g_mut);
  if (g_ready.load(std::memory_order_relaxed)) return 0;
  if (sync_devices()) return -1;
  t_probing = true;  // the probe creates an id, which calls back in here
  probe_af_ib();
  t_probing = false;
  g_ready.store(true, std::memory_order_release);
  return 0;
}

bool af_ib_supported() { return g_af_ib; }

int get_device(CmaId* id_priv, __be64 guid) {
  std::lock_guard<std::recursive_mutex> lock(g_mut);
  for (CmaDevice* d : g_devices) {
    if (d->dead || d->guid != guid) continue;
    if (init_device(d)) return -1;
    if (!d->pd) d->pd = ibv_alloc_pd(d->verbs);
    if (!d->pd) return -1;
    ++d->refcnt;
    id_priv->cma_dev = d;
    id_priv->id.verbs = d->verbs;
    id_priv->id.pd = d->pd;
    return 0;
  }
  return err(ENODEV);
}

void put_device(CmaDevice* d) {
  std::lock_guard<std::recursive_mutex> lock(g_mut);
  if (--d->refcnt) return;
  if (d->xrcd) ibv_close_xrcd(d->xrcd);
  if (d->pd) ibv_dealloc_pd(d->pd);
  d->xrcd = nullptr;
  d->pd = nullptr;
}

ibv_xrcd* get_xrcd(CmaDevice* d) {
  std::lock_guard<std::recursive_mutex> lock(g_mut);
  if (!d->xrcd) {
    ibv_xrcd_init_attr attr{};
    attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    attr.fd = -1;
    attr.oflags = O_CREAT;
    d->xrcd = ibv_open_xrcd(d->verbs, &attr);
  }
  return d->xrcd;
}

}  // namespace hcasim::rdmacm

using namespace hcasim::rdmacm;

HCASIM_RDMACM_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  ibv_context** devs = nullptr;
  int count = 0;
  if (ucma_init() == 0) {
    std::lock_guard<std::recursive_mutex> lock(g_mut);
    for (CmaDevice* d : g_devices)
      if (!d->dead && init_device(d)) d->dead = true;  // could not open: leave it out
    for (CmaDevice* d : g_devices) count += d->dead ? 0 : 1;
    devs = static_cast<ibv_context**>(std::malloc(sizeof(*devs) * (count + 1)));
    if (devs) {
      int i = 0;
      for (CmaDevice* d : g_devices) {
        if (d->dead) continue;
        devs[i++] = d->verbs;
        ++d->refcnt;
      }
      devs[i] = nullptr;
    }
  }
  if (num_devices) *num_devices = devs ? count : 0;
  return devs;
}

HCASIM_RDMACM_EXPORT void rdma_free_devices(ibv_context** list) {
  if (!list) return;
  {
    std::lock_guard<std::recursive_mutex> lock(g_mut);
    for (int i = 0; list[i]; ++i)
      for (CmaDevice* d : g_devices)
        if (d->verbs == list[i]) --d->refcnt;
  }
  std::free(list);
}
