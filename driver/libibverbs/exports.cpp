// SPDX-License-Identifier: Apache-2.0
/**
 * @file exports.cpp
 * @brief The current-ABI ibv_* entry points of our drop-in libibverbs.so.1.
 *
 * Every function here is exported under its default (@@) version node, assigned by
 * libibverbs.map. Functions with a counterpart in driver/provider/verbs_core.h are thin
 * forwards; the few helpers the provider does not cover (GID-table walks, AH-from-WC, the
 * kernel-struct marshalling used by librdmacm, sysfs readers) are built here on top of those
 * forwards. Features the simulator does not model fail with EOPNOTSUPP so callers skip them.
 *
 * Old IBVERBS_1.0 entry points and the IBVERBS_PRIVATE_34 provider interface are in compat.cpp;
 * the *_str and rate helpers are in strings.cpp.
 */
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../provider/verbs_core.h"
#include "core_extra.h"

// verbs.h turns these names into inline dispatchers; we define the real exported functions.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define HCASIM_EXPORT __attribute__((visibility("default")))

namespace drv = hcasim::drv;

/**
 * The port attribute layout of callers built before port_cap_flags2 was added. verbs.h only
 * forward-declares it: the exported ibv_query_port writes exactly this much, newer callers get
 * the full struct through verbs_context::query_port.
 */
struct _compat_ibv_port_attr {
  enum ibv_port_state state;
  enum ibv_mtu max_mtu;
  enum ibv_mtu active_mtu;
  int gid_tbl_len;
  uint32_t port_cap_flags;
  uint32_t max_msg_sz;
  uint32_t bad_pkey_cntr;
  uint32_t qkey_viol_cntr;
  uint16_t pkey_tbl_len;
  uint16_t lid;
  uint16_t sm_lid;
  uint8_t lmc;
  uint8_t max_vl_num;
  uint8_t sm_sl;
  uint8_t subnet_timeout;
  uint8_t init_type_reply;
  uint8_t active_width;
  uint8_t active_speed;
  uint8_t phys_state;
  uint8_t link_layer;
  uint8_t flags;
};
static_assert(sizeof(_compat_ibv_port_attr) == offsetof(ibv_port_attr, port_cap_flags2),
              "compat port attr must be the prefix of ibv_port_attr before port_cap_flags2");
static_assert(offsetof(_compat_ibv_port_attr, flags) == offsetof(ibv_port_attr, flags),
              "compat port attr layout drifted from ibv_port_attr");

// Entry points that exist in the ABI but are declared only in rdma-core's private headers.
extern "C" {
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src);
int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index,
                       int* type);  // enum ibv_gid_type_sysfs*, an int on this ABI
}

namespace {

/// Values of rdma-core's private enum ibv_gid_type_sysfs.
constexpr int kGidTypeSysfsIbRoceV1 = 0;
constexpr int kGidTypeSysfsRoceV2 = 1;

/// Sets errno and returns it: `return fail(EOPNOTSUPP);` for verbs that return an errno value.
int fail(int err) {
  errno = err;
  return err;
}

template <typename T>
T* fail_null(int err) {
  errno = err;
  return nullptr;
}

bool gid_is_zero(const ibv_gid& gid) {
  static const ibv_gid kZero{};
  return std::memcmp(gid.raw, kZero.raw, sizeof(gid.raw)) == 0;
}

/// IPv4 address (network order bytes) as an IPv4-mapped GID, ::ffff:a.b.c.d.
ibv_gid ipv4_mapped_gid(const uint8_t* addr) {
  ibv_gid gid{};
  gid.raw[10] = 0xff;
  gid.raw[11] = 0xff;
  std::memcpy(&gid.raw[12], addr, 4);
  return gid;
}

/**
 * Index of @p gid in the GID table of @p port. Prefers an entry of @p want_type (or, for a
 * multicast @p gid, the first valid entry of that type); falls back to any type. Returns the
 * index, or -1 with errno set.
 */
int find_sgid_index(ibv_context* ctx, uint8_t port, const ibv_gid& gid, uint32_t want_type) {
  const int len = drv::gid_table_len(ctx, port);
  if (len <= 0) {
    if (len == 0 || errno == 0) errno = ENOENT;
    return -1;
  }
  const bool multicast = gid.raw[0] == 0xff;
  int any_type_match = -1;
  for (int i = 0; i < len; ++i) {
    ibv_gid_entry entry{};
    if (drv::query_gid_entry(ctx, port, static_cast<uint32_t>(i), &entry) != 0) continue;
    if (gid_is_zero(entry.gid)) continue;
    const bool same_gid = multicast || std::memcmp(entry.gid.raw, gid.raw, sizeof(gid.raw)) == 0;
    if (!same_gid) continue;
    if (entry.gid_type == want_type) return i;
    if (any_type_match < 0 && !multicast) any_type_match = i;
  }
  if (any_type_match >= 0) return any_type_match;
  errno = ENOENT;
  return -1;
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------------------------------------
// Devices and contexts
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT struct ibv_device** ibv_get_device_list(int* num_devices) {
  return drv::get_device_list(num_devices);
}

HCASIM_EXPORT void ibv_free_device_list(struct ibv_device** list) { drv::free_device_list(list); }

HCASIM_EXPORT const char* ibv_get_device_name(struct ibv_device* device) {
  if (!device) return fail_null<const char>(EINVAL);
  return device->name;
}

HCASIM_EXPORT __be64 ibv_get_device_guid(struct ibv_device* device) { return drv::get_device_guid(device); }

HCASIM_EXPORT int ibv_get_device_index(struct ibv_device* device) {
  if (!device) {
    errno = EINVAL;
    return -1;
  }
  int num = 0;
  ibv_device** list = drv::get_device_list(&num);
  if (!list) return -1;
  int index = -1;
  for (int i = 0; i < num && list[i]; ++i) {
    if (list[i] == device || std::strcmp(list[i]->name, device->name) == 0) {
      index = i;
      break;
    }
  }
  drv::free_device_list(list);
  if (index < 0) errno = ENODEV;
  return index;
}

HCASIM_EXPORT struct ibv_context* ibv_open_device(struct ibv_device* device) {
  return drv::open_device(device);
}

HCASIM_EXPORT int ibv_close_device(struct ibv_context* context) { return drv::close_device(context); }

HCASIM_EXPORT struct ibv_context* ibv_import_device(int cmd_fd) { return fail_null<ibv_context>(EOPNOTSUPP); }

HCASIM_EXPORT int ibv_get_async_event(struct ibv_context* context, struct ibv_async_event* event) {
  return drv::get_async_event(context, event);
}

HCASIM_EXPORT void ibv_ack_async_event(struct ibv_async_event* event) { drv::ack_async_event(event); }

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT int ibv_query_device(struct ibv_context* context, struct ibv_device_attr* device_attr) {
  return drv::query_device(context, device_attr);
}

HCASIM_EXPORT int(ibv_query_port)(struct ibv_context* context, uint8_t port_num,
                                  struct _compat_ibv_port_attr* port_attr) {
  if (!port_attr) return fail(EINVAL);
  ibv_port_attr full{};
  const int rc = drv::query_port(context, port_num, &full);
  if (rc != 0) return rc;
  std::memcpy(port_attr, &full, sizeof(*port_attr));
  return 0;
}

HCASIM_EXPORT int ibv_query_gid(struct ibv_context* context, uint8_t port_num, int index,
                                union ibv_gid* gid) {
  return drv::query_gid(context, port_num, index, gid);
}

HCASIM_EXPORT int _ibv_query_gid_ex(struct ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                    struct ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (!entry || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return fail(EINVAL);
  ibv_gid_entry tmp{};
  const int rc = drv::query_gid_entry(context, port_num, gid_index, &tmp);
  if (rc != 0) return fail(rc);
  // A caller built against a newer, larger ibv_gid_entry gets its tail zeroed.
  std::memset(entry, 0, entry_size);
  std::memcpy(entry, &tmp, sizeof(tmp));
  return 0;
}

HCASIM_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context* context, struct ibv_gid_entry* entries,
                                           size_t max_entries, uint32_t flags, size_t entry_size) {
  if (!context || !entries || max_entries == 0 || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
    errno = EINVAL;
    return -EINVAL;
  }
  ibv_device_attr dev{};
  int rc = drv::query_device(context, &dev);
  if (rc != 0) {
    errno = rc;
    return -rc;
  }
  auto* out = reinterpret_cast<unsigned char*>(entries);
  size_t count = 0;
  for (unsigned port = 1; port <= dev.phys_port_cnt; ++port) {
    const int len = drv::gid_table_len(context, static_cast<uint8_t>(port));
    if (len < 0) {
      const int err = errno ? errno : EINVAL;
      errno = err;
      return -err;
    }
    for (int i = 0; i < len; ++i) {
      ibv_gid_entry entry{};
      rc = drv::query_gid_entry(context, port, static_cast<uint32_t>(i), &entry);
      if (rc == ENODATA) continue;  // hole in the table
      if (rc != 0) {
        errno = rc;
        return -rc;
      }
      if (gid_is_zero(entry.gid)) continue;  // only valid entries are reported
      if (count == max_entries) {
        errno = EINVAL;
        return -EINVAL;
      }
      unsigned char* slot = out + count * entry_size;
      std::memset(slot, 0, entry_size);
      std::memcpy(slot, &entry, sizeof(entry));
      ++count;
    }
  }
  return static_cast<ssize_t>(count);
}

/// rdma-core private (IBVERBS_PRIVATE_34), but ibv_devinfo calls it to label GIDs.
HCASIM_EXPORT int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index,
                                     int* type) {
  if (!type) {
    errno = EINVAL;
    return -1;
  }
  ibv_gid_entry entry{};
  const int rc = drv::query_gid_entry(context, port_num, index, &entry);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  *type = entry.gid_type == IBV_GID_TYPE_ROCE_V2 ? kGidTypeSysfsRoceV2 : kGidTypeSysfsIbRoceV1;
  return 0;
}

HCASIM_EXPORT int ibv_query_pkey(struct ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  return drv::query_pkey(context, port_num, index, pkey);
}

HCASIM_EXPORT int ibv_get_pkey_index(struct ibv_context* context, uint8_t port_num, __be16 pkey) {
  ibv_port_attr port{};
  const int rc = drv::query_port(context, port_num, &port);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  for (int i = 0; i < port.pkey_tbl_len; ++i) {
    __be16 entry = 0;
    if (drv::query_pkey(context, port_num, i, &entry) != 0) continue;
    if (entry == pkey) return i;
  }
  errno = ENOENT;
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Protection domains and memory regions
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT struct ibv_pd* ibv_alloc_pd(struct ibv_context* context) { return drv::alloc_pd(context); }

HCASIM_EXPORT int ibv_dealloc_pd(struct ibv_pd* pd) { return drv::dealloc_pd(pd); }

HCASIM_EXPORT struct ibv_pd* ibv_import_pd(struct ibv_context* context, uint32_t pd_handle) {
  return fail_null<ibv_pd>(EOPNOTSUPP);
}

HCASIM_EXPORT void ibv_unimport_pd(struct ibv_pd* pd) {}

HCASIM_EXPORT struct ibv_mr*(ibv_reg_mr)(struct ibv_pd* pd, void* addr, size_t length, int access) {
  return drv::reg_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

HCASIM_EXPORT struct ibv_mr*(ibv_reg_mr_iova)(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                              int access) {
  return drv::reg_mr(pd, addr, length, iova, static_cast<unsigned>(access));
}

HCASIM_EXPORT struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                              unsigned int access) {
  return drv::reg_mr(pd, addr, length, iova, access);
}

HCASIM_EXPORT struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length,
                                               uint64_t iova, int fd, int access) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}

HCASIM_EXPORT int ibv_rereg_mr(struct ibv_mr* mr, int flags, struct ibv_pd* pd, void* addr, size_t length,
                               int access) {
  // libibverbs' own input checks (rdma-core verbs.c ibv_rereg_mr): the old MR stays valid.
  constexpr int kKnown =
      IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  if (!mr || (flags & ~kKnown) || ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
      (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  // Any provider failure is a command error there too (errno says why).
  return drv::rereg_mr(mr, flags, pd, addr, length, access) ? IBV_REREG_MR_ERR_CMD : 0;
}

HCASIM_EXPORT int ibv_dereg_mr(struct ibv_mr* mr) { return drv::dereg_mr(mr); }

HCASIM_EXPORT struct ibv_mr* ibv_import_mr(struct ibv_pd* pd, uint32_t mr_handle) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}

HCASIM_EXPORT void ibv_unimport_mr(struct ibv_mr* mr) {}

HCASIM_EXPORT struct ibv_dm* ibv_import_dm(struct ibv_context* context, uint32_t dm_handle) {
  return fail_null<ibv_dm>(EOPNOTSUPP);
}

HCASIM_EXPORT void ibv_unimport_dm(struct ibv_dm* dm) {}

// ---------------------------------------------------------------------------------------------
// Completion channels and CQs
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT struct ibv_comp_channel* ibv_create_comp_channel(struct ibv_context* context) {
  return drv::create_comp_channel(context);
}

HCASIM_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel* channel) {
  return drv::destroy_comp_channel(channel);
}

HCASIM_EXPORT struct ibv_cq* ibv_create_cq(struct ibv_context* context, int cqe, void* cq_context,
                                           struct ibv_comp_channel* channel, int comp_vector) {
  return drv::create_cq(context, cqe, cq_context, channel, comp_vector);
}

HCASIM_EXPORT int ibv_resize_cq(struct ibv_cq* cq, int cqe) { return drv::resize_cq(cq, cqe); }

HCASIM_EXPORT int ibv_destroy_cq(struct ibv_cq* cq) { return drv::destroy_cq(cq); }

HCASIM_EXPORT int ibv_get_cq_event(struct ibv_comp_channel* channel, struct ibv_cq** cq, void** cq_context) {
  return drv::get_cq_event(channel, cq, cq_context);
}

HCASIM_EXPORT void ibv_ack_cq_events(struct ibv_cq* cq, unsigned int nevents) {
  drv::ack_cq_events(cq, nevents);
}

// ---------------------------------------------------------------------------------------------
// SRQs, QPs, AHs
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT struct ibv_srq* ibv_create_srq(struct ibv_pd* pd, struct ibv_srq_init_attr* attr) {
  return drv::create_srq(pd, attr);
}

HCASIM_EXPORT int ibv_modify_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr, int attr_mask) {
  return drv::modify_srq(srq, attr, attr_mask);
}

HCASIM_EXPORT int ibv_query_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr) {
  return drv::query_srq(srq, attr);
}

HCASIM_EXPORT int ibv_destroy_srq(struct ibv_srq* srq) { return drv::destroy_srq(srq); }

HCASIM_EXPORT struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  return drv::create_qp(pd, attr);
}

HCASIM_EXPORT struct ibv_qp_ex* ibv_qp_to_qp_ex(struct ibv_qp* qp) { return drv::qp_to_qp_ex(qp); }

HCASIM_EXPORT int ibv_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask) {
  return drv::modify_qp(qp, attr, attr_mask);
}

HCASIM_EXPORT int ibv_query_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask,
                               struct ibv_qp_init_attr* init_attr) {
  return drv::query_qp(qp, attr, attr_mask, init_attr);
}

HCASIM_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp* qp, enum ibv_wr_opcode op, uint32_t flags) {
  return 0;  // "not guaranteed": always a safe answer
}

HCASIM_EXPORT int ibv_destroy_qp(struct ibv_qp* qp) { return drv::destroy_qp(qp); }

HCASIM_EXPORT int ibv_set_ece(struct ibv_qp* qp, struct ibv_ece* ece) { return fail(EOPNOTSUPP); }

HCASIM_EXPORT int ibv_query_ece(struct ibv_qp* qp, struct ibv_ece* ece) { return fail(EOPNOTSUPP); }

HCASIM_EXPORT struct ibv_ah* ibv_create_ah(struct ibv_pd* pd, struct ibv_ah_attr* attr) {
  return drv::create_ah(pd, attr);
}

HCASIM_EXPORT int ibv_destroy_ah(struct ibv_ah* ah) { return drv::destroy_ah(ah); }

/**
 * Address vector answering the sender of @p wc. For IB without GRH only LIDs are used. With a
 * GRH (always, on RoCE) the 40-byte header is either a GRH/IPv6 header or, for RoCE v2 over
 * IPv4, 20 unused bytes followed by the IPv4 header; the source GID index is the local entry
 * that matches the packet's destination address and header kind.
 */
HCASIM_EXPORT int ibv_init_ah_from_wc(struct ibv_context* context, uint8_t port_num, struct ibv_wc* wc,
                                      struct ibv_grh* grh, struct ibv_ah_attr* ah_attr) {
  if (!context || !wc || !ah_attr) {
    errno = EINVAL;
    return -1;
  }
  ibv_port_attr port{};
  const int rc = drv::query_port(context, port_num, &port);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  const bool ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;

  std::memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;

  if (!(wc->wc_flags & IBV_WC_GRH)) {
    if (!ethernet) return 0;
    errno = EINVAL;  // RoCE traffic always carries a network header
    return -1;
  }
  if (!grh) {
    errno = EINVAL;
    return -1;
  }

  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  ibv_gid local{};  // the packet's destination = our source GID
  uint32_t want_type = IBV_GID_TYPE_IB;
  ah_attr->is_global = 1;
  if ((raw[0] >> 4) == 6) {  // GRH (IB, RoCE v1) or IPv6 (RoCE v2)
    const uint32_t vtf = ntohl(grh->version_tclass_flow);
    ah_attr->grh.dgid = grh->sgid;
    ah_attr->grh.hop_limit = grh->hop_limit;  // as rdma-core: answer with the hops it came with
    ah_attr->grh.flow_label = vtf & 0xfffff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((vtf >> 20) & 0xff);
    local = grh->dgid;
    if (ethernet) {
      want_type = grh->next_hdr == IPPROTO_UDP ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
    }
  } else if (ethernet && raw[20] == 0x45) {  // IPv4 header, no options, in the last 20 bytes
    const uint8_t* ip = raw + 20;
    ah_attr->grh.dgid = ipv4_mapped_gid(ip + 12);  // source address
    ah_attr->grh.traffic_class = ip[1];
    ah_attr->grh.hop_limit = ip[8];    // the TTL, as rdma-core's set_ah_attr_by_ipv4()
    local = ipv4_mapped_gid(ip + 16);  // destination address
    want_type = IBV_GID_TYPE_ROCE_V2;
  } else {
    errno = EINVAL;
    return -1;
  }
  const int index = find_sgid_index(context, port_num, local, want_type);
  if (index < 0 || index > 0xff) {
    if (index > 0xff) errno = ERANGE;
    return -1;
  }
  ah_attr->grh.sgid_index = static_cast<uint8_t>(index);
  return 0;
}

HCASIM_EXPORT struct ibv_ah* ibv_create_ah_from_wc(struct ibv_pd* pd, struct ibv_wc* wc, struct ibv_grh* grh,
                                                   uint8_t port_num) {
  if (!pd) return fail_null<ibv_ah>(EINVAL);
  ibv_ah_attr attr{};
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return drv::create_ah(pd, &attr);
}

// ---------------------------------------------------------------------------------------------
// Multicast (the LID is unused on RoCE); not modelled: L2 resolution
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT int ibv_attach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
  return drv::attach_mcast(qp, gid, true);
}

HCASIM_EXPORT int ibv_detach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
  return drv::attach_mcast(qp, gid, false);
}

HCASIM_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context* context, struct ibv_ah_attr* attr,
                                              uint8_t eth_mac[6], uint16_t* vid) {
  return fail(EOPNOTSUPP);
}

// ---------------------------------------------------------------------------------------------
// Fork support: simulated memory is ordinary process memory, nothing to protect.
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT int ibv_fork_init(void) { return 0; }

HCASIM_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

HCASIM_EXPORT int ibv_dontfork_range(void* base, size_t size) { return 0; }

HCASIM_EXPORT int ibv_dofork_range(void* base, size_t size) { return 0; }

// ---------------------------------------------------------------------------------------------
// sysfs helpers (historic exports, used by ibv_devinfo and librdmacm)
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT const char* ibv_get_sysfs_path(void) {
  static const std::string path = [] {
    std::string p = "/sys";
    if (const char* env = std::getenv("SYSFS_PATH"); env && *env) {
      p.assign(env, strnlen(env, IBV_SYSFS_PATH_MAX));
      while (p.size() > 1 && p.back() == '/') p.pop_back();
    }
    return p;
  }();
  return path.c_str();
}

/// Reads @p dir/@p file into @p buf (NUL-terminated, trailing newline dropped). Returns the
/// number of bytes kept, or -1 with errno set.
HCASIM_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (!dir || !file || !buf || size == 0) {
    errno = EINVAL;
    return -1;
  }
  std::string path = std::string(dir) + "/" + file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = ::read(fd, buf, size);
  const int saved = errno;
  ::close(fd);
  if (n < 0) {
    errno = saved;
    return -1;
  }
  size_t len = static_cast<size_t>(n);
  if (len > 0 && buf[len - 1] == '\n') --len;
  if (len >= size) len = size - 1;  // truncated: keep room for the terminator
  buf[len] = '\0';
  return static_cast<int>(len);
}

// ---------------------------------------------------------------------------------------------
// Kernel-ABI marshalling (historic exports, used by librdmacm)
// ---------------------------------------------------------------------------------------------

HCASIM_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

HCASIM_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src) {
  dst->qp_state = static_cast<ibv_qp_state>(src->qp_state);
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;

  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;

  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

HCASIM_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
  std::memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<int>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = static_cast<uint8_t>(src->mtu);
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

HCASIM_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
  std::memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic ? 1 : 0;
  dst->flow_label = src->flow_label;
  dst->reversible = static_cast<uint32_t>(src->reversible);
  dst->mtu = src->mtu;
  dst->pkey = src->pkey;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->numb_path = src->numb_path;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

}  // extern "C"
