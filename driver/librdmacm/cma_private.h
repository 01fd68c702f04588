// SPDX-License-Identifier: Apache-2.0
/**
 * @file cma_private.h
 * @brief Library-private state of the drop-in librdmacm.so.1: devices, ids, events, multicast
 *        groups, and the kernel command interface (hcasim_ucma_write) they go through.
 *
 * The public structures (struct rdma_cm_id, struct rdma_cm_event) are embedded first in the
 * private ones, so a public pointer converts back with from_id() / from_event(). The kernel's
 * command structures (<rdma/rdma_user_cm.h>) live in namespace kabi because their enum
 * constants clash with <rdma/rdma_cma.h>'s.
 */
#ifndef HCASIM_RDMACM_CMA_PRIVATE_H
#define HCASIM_RDMACM_CMA_PRIVATE_H

#include <infiniband/ib.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <linux/in6.h>
#include <linux/socket.h>
#include <linux/types.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

// The kernel's ucma ABI, kept apart from librdmacm's own enum constants of the same names
// (its own includes are already in above, so only its declarations land in the namespace).
/// @cond HCASIM_KERNEL_ABI
namespace kabi {
#include <rdma/rdma_user_cm.h>
}
/// @endcond

extern "C" {
/// @brief libibverbs's kernel-ABI converters (rdma-core's infiniband/marshall.h, not installed).
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src);
/// @brief Kernel AH attributes to struct ibv_ah_attr.
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src);
/// @brief Kernel path record to struct ibv_sa_path_rec.
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src);
}

/// Marks a function as part of librdmacm.so.1's exported ABI (version script: librdmacm.map).
#define HCASIM_RDMACM_EXPORT extern "C" __attribute__((visibility("default")))

namespace hcasim::rdmacm {

/// @brief One RDMA device as the CM sees it: opened lazily, with a shared PD and XRC domain.
struct CmaDevice {
  ibv_device* dev = nullptr;            ///< the libibverbs device
  ibv_context* verbs = nullptr;         ///< opened context (nullptr until first use)
  ibv_pd* pd = nullptr;                 ///< PD shared by ids on this device (while refcnt > 0)
  ibv_xrcd* xrcd = nullptr;             ///< XRC domain for XRC ids, opened on demand
  uint8_t* link_layer = nullptr;        ///< per-port link layer, index port_num - 1
  __be64 guid = 0;                      ///< node GUID (network order), as the kernel reports it
  int port_cnt = 0;                     ///< physical ports
  int refcnt = 0;                       ///< ids and device lists holding it
  int max_qpsize = 0;                   ///< max_qp_wr
  uint8_t max_initiator_depth = 0;      ///< max_qp_init_rd_atom
  uint8_t max_responder_resources = 0;  ///< max_qp_rd_atom
  bool dead = false;                    ///< could not be opened
};

struct CmaMulticast;

/// @brief A CM id: the public struct rdma_cm_id first, then the library's bookkeeping.
struct CmaId {
  rdma_cm_id id;                   ///< what the program sees (must stay first)
  CmaDevice* cma_dev;              ///< device once the kernel bound the id to one
  void* connect;                   ///< private data queued by rdma_create_ep
  size_t connect_len;              ///< its length
  int events_completed;            ///< events acknowledged (rdma_ack_cm_event)
  bool connect_error;              ///< the connect response failed locally
  bool sync;                       ///< owns a private channel; calls block
  pthread_cond_t cond;             ///< signalled on every acknowledgement
  pthread_mutex_t mut;             ///< protects events_completed and mc_list
  uint32_t handle;                 ///< the kernel's id
  CmaMulticast* mc_list;           ///< joined groups
  ibv_qp_init_attr* qp_init_attr;  ///< rdma_create_ep's QP template for passive ids
  uint8_t initiator_depth;         ///< negotiated initiator depth
  uint8_t responder_resources;     ///< negotiated responder resources
  ibv_ece local_ece;               ///< our ECE options
  ibv_ece remote_ece;              ///< the peer's ECE options
};

/// @brief A multicast group joined on an id (the kernel's multicast handle and the group).
struct CmaMulticast {
  CmaMulticast* next;     ///< next group of the same id
  CmaId* id_priv;         ///< owning id
  void* context;          ///< the program's context (reported in the event)
  int events_completed;   ///< events acknowledged for this group
  pthread_cond_t cond;    ///< signalled on acknowledgement
  uint32_t handle;        ///< the kernel's multicast id
  ibv_gid mgid;           ///< group GID (from the join event)
  uint16_t mlid;          ///< group LID (from the join event)
  uint16_t join_flags;    ///< RDMA_MC_JOIN_FLAG_*
  sockaddr_storage addr;  ///< the address joined
};

/// @brief An event handed to the program: the public event plus its private-data storage.
struct CmaEvent {
  rdma_cm_event event;                          ///< what the program sees (first)
  uint8_t private_data[RDMA_MAX_PRIVATE_DATA];  ///< private data the event points to
  CmaId* id_priv;                               ///< id whose event count it adds to
  CmaMulticast* mc;                             ///< group, for multicast events
};

/// @brief The private id of a public one.
inline CmaId* from_id(rdma_cm_id* id) { return reinterpret_cast<CmaId*>(id); }
/// @brief The private event of a public one.
inline CmaEvent* from_event(rdma_cm_event* ev) { return reinterpret_cast<CmaEvent*>(ev); }

/// @brief Sets errno to @p e and returns -1 (librdmacm's error convention).
inline int err(int e) {
  errno = e;
  return -1;
}
/// @brief 0 for @p ret == 0, else errno = @p ret and -1 (for verbs calls returning an errno).
inline int seterrno(int ret) { return ret ? err(ret) : 0; }

// ---- kernel commands (kern_cmd.cpp) ----------------------------------------------------------

/**
 * @brief Writes command @p op with its @p len byte structure @p cmd to channel @p fd, announcing
 *        @p out_len response bytes. 0, or -1 with errno (ENODATA for a short write).
 */
int kern_write(int fd, uint32_t op, const void* cmd, size_t len, size_t out_len);

/// @brief kern_write() for a command structure of the kernel's ABI.
template <class Cmd>
int kern_cmd(int fd, uint32_t op, const Cmd& cmd, size_t out_len = 0) {
  return kern_write(fd, op, &cmd, sizeof cmd, out_len);
}

// ---- library state and devices (devices.cpp) -------------------------------------------------

/// @brief One-time initialisation: device list and AF_IB probe. 0, or -1 with errno (ENODEV).
int ucma_init();
/// @brief Whether the kernel takes AF_IB addresses (BIND / RESOLVE_ADDR / QUERY commands).
bool af_ib_supported();
/// @brief Attaches @p id_priv to the device with node GUID @p guid (verbs, pd). 0 or -1/errno.
int get_device(CmaId* id_priv, __be64 guid);
/// @brief Drops a device reference taken by get_device().
void put_device(CmaDevice* dev);
/// @brief The device's XRC domain, opened on first use; nullptr and errno on failure.
ibv_xrcd* get_xrcd(CmaDevice* dev);

// ---- ids (id.cpp) ----------------------------------------------------------------------------

/// @brief Allocates an id on @p channel (a private sync channel when nullptr); nullptr on error.
CmaId* alloc_id(rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type);
/// @brief Frees an id's user-space state (device reference, private channel, buffers).
void free_id(CmaId* id_priv);
/// @brief Makes a kernel id for @p ps / @p qp_type: rdma_create_id with an explicit QP type.
int create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps,
              ibv_qp_type qp_type);
/// @brief DESTROY_ID on @p fd: the number of events the kernel reported, or -1 with errno.
int destroy_kern_id(int fd, uint32_t handle);
/// @brief Records @p id_priv under its kernel handle (for events that carry no uid).
void insert_id(CmaId* id_priv);
/// @brief The id with kernel handle @p handle, or nullptr.
CmaId* lookup_id(uint32_t handle);
/// @brief Counts one acknowledged event on @p id_priv and wakes a waiting destroy.
void complete_event(CmaId* id_priv);

// ---- channels (channel.cpp) ------------------------------------------------------------------

/// @brief For a sync id: waits for its next event and turns a failure into -1/errno; else 0.
int ucma_complete(rdma_cm_id* id);

// ---- addresses and routes (address.cpp) -------------------------------------------------------

/// @brief Length of @p addr by family (0 for an unsupported family or nullptr).
socklen_t addrlen_of(const sockaddr* addr);
/// @brief The port of @p addr in network order (AF_INET, AF_INET6, AF_IB service id).
__be16 port_of(const sockaddr* addr);
/// @brief QUERY_ROUTE: addresses, GIDs, paths, device and port of @p id.
int query_route(rdma_cm_id* id);
/// @brief QUERY (ADDR): addresses, device, port and P_Key of @p id.
int query_addr(rdma_cm_id* id);
/// @brief QUERY (GID): source and destination GIDs of @p id.
int query_gid(rdma_cm_id* id);
/// @brief QUERY (PATH): the path records of @p id.
int query_path(rdma_cm_id* id);
/// @brief BIND with an explicit address length (AF_IB capable kernels).
int bind_addr2(rdma_cm_id* id, const sockaddr* addr, socklen_t len);
/// @brief RESOLVE_ADDR with explicit lengths (AF_IB capable kernels).
int resolve_addr2(rdma_cm_id* id, const sockaddr* src, socklen_t src_len, const sockaddr* dst,
                  socklen_t dst_len, int timeout_ms);

// ---- QPs (qp.cpp) ----------------------------------------------------------------------------

/// @brief Moves @p id's QP (if any) to INIT then RTR with the kernel's attributes.
int modify_qp_rtr(rdma_cm_id* id, uint8_t resp_res);
/// @brief Moves @p id's QP (if any) to RTS with the kernel's attributes.
int modify_qp_rts(rdma_cm_id* id, uint8_t init_depth);
/// @brief Moves @p id's QP (if any) to ERR.
int modify_qp_err(rdma_cm_id* id);
/// @brief Moves @p id's QP (if any) to SQD.
int modify_qp_sqd(rdma_cm_id* id);

// ---- connections (connection.cpp) ------------------------------------------------------------

/// @brief Active side, CONNECT_RESPONSE received: QP to RTR/RTS, then ACCEPT (kernel sends RTU).
int process_conn_resp(CmaId* id_priv);
/// @brief process_conn_resp() with the ECE exchange of the response (@p ece from the event).
int process_conn_resp_ece(CmaId* id_priv, const kabi::rdma_ucm_ece& ece);

}  // namespace hcasim::rdmacm

#endif  // HCASIM_RDMACM_CMA_PRIVATE_H
