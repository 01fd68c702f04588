// SPDX-License-Identifier: Apache-2.0
/**
 * @file objects.h
 * @brief The provider's verbs objects. Each embeds the ibverbs struct first, so the pointer a
 *        program holds converts back with a static cast.
 */
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "../kernel/kernel_device.h"

namespace hcasim::drv {

struct SimDevice {
  ibv_device dev;  // must stay first
  HcaLink* link;
  int index;
};

struct SimContext;
/** @brief Turns the device's port changes into a context's IBV_EVENT_PORT_ERR / PORT_ACTIVE. */
struct ContextPortEvents : EventTarget {
  SimContext* ctx = nullptr;
  void port_event(uint8_t port, bool active) override;
};

struct SimContext {
  verbs_context vctx;  // ibv_context is its last member; must stay first
  SimDevice* sdev;
  KernelDevice* kdev;
  std::mutex async_mu;
  std::deque<ibv_async_event> async_q;
  int async_efd;
  ContextPortEvents port_events;  ///< registered with kdev while the context is open
};

struct SimPd {
  ibv_pd pd;
  uint32_t pdn;
  std::atomic<int> users{0};  ///< MRs, QPs using it (dealloc -> EBUSY)
  /// A parent domain (ibv_alloc_parent_domain): pdn is its protection domain's, so QPs and MRs
  /// made on it use that PD; dealloc_pd hands it to dealloc_parent_domain (extended.h).
  bool parent_domain = false;
};

struct SimMr {
  ibv_mr mr;
  std::unique_ptr<PinnedRegion> region;
  unsigned access = 0;  ///< ibv_access_flags it was registered with (ibv_rereg_mr keeps them)
};

struct SimCq;

struct SimChannel {
  ibv_comp_channel ch;
  std::mutex mu;
  std::deque<SimCq*> pending;
  std::atomic<int> users{0};
  std::atomic<long> reader{0};            ///< thread id of the last ibv_get_cq_event caller (handoff.h)
  std::atomic<int> armed{0};              ///< CQs of this channel armed and not yet fired (a wait can end)
  std::atomic<bool> unarmed_told{false};  ///< the unarmed-wait explanation was given; rearmed: false
  /// Non-blocking ibv_get_cq_event calls in a row that found nothing pending and no CQ armed.
  std::atomic<int> unarmed_polls{0};
};

struct CqExState;
/** @brief Frees a CQ's extended-poll state (cq_ex.cpp), so SimCq's owner need not see its type. */
struct CqExStateDeleter {
  void operator()(CqExState* s) const;
};
struct QpExState;
/** @brief Frees a QP's ibv_wr_* batch state (qp_ex.cpp), so SimQp's owner need not see its type. */
struct QpExStateDeleter {
  void operator()(QpExState* s) const;
};

/** @brief Routes interrupt-handler events to a CQ. */
struct CqEvents : EventTarget {
  SimCq* cq = nullptr;
  void completion_event() override;
  void async_event(hw::EqeType type) override;
};

struct SimCq {
  // Must stay first. ibv_cq_ex begins with ibv_cq's fields (ibv_cq_ex_to_cq is a cast), so a CQ
  // made by ibv_create_cq_ex is the same object seen through its extended struct.
  union {
    ibv_cq_ex cqx;
    ibv_cq cq;
  };
  SimContext* ctx = nullptr;
  SimChannel* channel = nullptr;
  uint32_t cqn = 0;
  uint32_t log_size = 0;
  std::unique_ptr<QueueBuffer> ring;
  hw::CqDbrec* dbrec = nullptr;
  std::mutex mu;
  uint32_t ci = 0;
  std::condition_variable polled;  ///< ci moved (signalled only while poll_waiters > 0)
  int poll_waiters = 0;            ///< posters waiting for a reader to poll (handoff.h)
  uint32_t arm_sn = 0;
  std::atomic<bool> armed{false};  ///< armed by the program and not yet fired (SimChannel::armed)
  std::atomic<unsigned> events_delivered{0};
  std::atomic<unsigned> events_taken{0};  ///< by ibv_get_cq_event (handoff.h)
  uint32_t async_taken = 0;               ///< CQ_ERR events the program took (under cq.mutex)
  std::atomic<int> users{0};
  CqEvents events;
  uint64_t last_cqe_ts_ns = 0;  ///< timestamp of the CQE poll_cq decoded last (under mu), for cq_ex
  /// device_moves() when poll_cq last found this CQ empty (poll_cq: when an empty poll waits).
  std::atomic<uint64_t> empty_at_move{~uint64_t(0)};
  std::unique_ptr<CqExState, CqExStateDeleter> ex;  ///< set by create_cq_ex only
};

struct SimQp;
struct SimXrcd;
/** @brief Routes interrupt-handler events to a QP. */
struct QpEvents : EventTarget {
  SimQp* qp = nullptr;
  void async_event(hw::EqeType type) override;
};

struct SimQp {
  // Must stay first. ibv_qp_ex begins with an ibv_qp (qp_base), so a QP made by
  // ibv_create_qp_ex with send_ops_flags is the same object seen through its extended struct.
  union {
    ibv_qp_ex qpx;
    ibv_qp qp;
  };
  SimContext* ctx = nullptr;
  SimPd* spd = nullptr;
  uint32_t qpn = 0;
  bool sq_sig_all = false;
  ibv_qp_cap cap{};
  // send queue (counters in WQEBBs)
  std::mutex sq_mu;
  std::unique_ptr<QueueBuffer> sq;
  uint32_t sq_log = 0;
  uint16_t sq_head = 0;
  std::atomic<uint16_t> sq_tail{0};
  std::vector<uint64_t> sq_wrid;
  std::vector<uint8_t> sq_nbb;
  // The same queue counted in work requests: a WQE may take fewer WQEBBs than the ring allows
  // each, and max_send_wr is what ibv_post_send(3) must hold to (ENOMEM beyond, as mlx5).
  uint16_t sq_wrs = 0;                   ///< WRs posted
  std::atomic<uint16_t> sq_wrs_done{0};  ///< WRs retired by completions
  std::vector<uint16_t> sq_wrs_at;       ///< per slot: sq_wrs once its WQE was posted
  /** WRs posted and not yet retired. */
  uint32_t sq_outstanding() const { return uint16_t(sq_wrs - sq_wrs_done.load(std::memory_order_acquire)); }
  // receive queue (counters in WQEs)
  std::mutex rq_mu;
  std::unique_ptr<QueueBuffer> rq;
  uint32_t rq_log = 0, rq_stride_log = 0;
  uint16_t rq_head = 0;
  std::atomic<uint16_t> rq_tail{0};
  std::vector<uint64_t> rq_wrid;
  hw::QpDbrec* dbrec = nullptr;
  QpEvents events;
  std::unique_ptr<QpExState, QpExStateDeleter> ex;  ///< ibv_wr_* state; set by create_qp_ex only
  SimXrcd* xrcd = nullptr;                          ///< XRC receive QP: its domain
  bool xrc_opened = false;                          ///< a handle from ibv_open_qp (not the QP's creator)
  uint32_t async_taken = 0;  ///< affiliated async events the program took (under qp.mutex; event_acks.cpp)
};

/**
 * @brief An XRC domain. Domains opened through the same file (inode) in one process are one
 * domain; the device sees one XRC domain number.
 */
struct SimXrcd {
  ibv_xrcd xrcd;  // must stay first
  uint32_t xrcdn = 0;
  uint64_t inode_key = 0;     ///< (st_dev, st_ino) mixed; 0 for a domain without a file
  int opens = 0;              ///< ibv_open_xrcd calls not yet closed
  std::atomic<int> users{0};  ///< XRC SRQs and receive QPs in it (close -> EBUSY)
};

struct SimSrq;
/** @brief Routes the SRQ limit event to an SRQ. */
struct SrqEvents : EventTarget {
  SimSrq* srq = nullptr;
  void async_event(hw::EqeType type) override;
};

/**
 * @brief A shared receive queue. The device takes its WQEs in ring order, but they complete in
 * any order (each QP finishes its own messages), so a slot is free again only once every slot
 * before it has completed too: @ref tail trails @ref head over completed slots.
 */
struct SimSrq {
  ibv_srq srq;  // must stay first
  SimContext* ctx = nullptr;
  SimPd* spd = nullptr;
  uint32_t srqn = 0;
  std::mutex mu;
  std::unique_ptr<QueueBuffer> ring;
  uint32_t log = 0, stride_log = 0;
  uint32_t max_wr = 0, max_sge = 0;
  uint16_t head = 0;  ///< producer counter (WQEs posted)
  uint16_t tail = 0;  ///< oldest slot not yet completed
  std::vector<uint64_t> wrid;
  std::vector<uint8_t> done;     ///< per slot: completed, waiting for the tail to pass it
  hw::QpDbrec* dbrec = nullptr;  ///< rq_counter is the producer counter the device reads
  std::atomic<int> users{0};     ///< QPs attached (destroy -> EBUSY)
  SimXrcd* xrcd = nullptr;       ///< an XRC SRQ's domain
  ibv_cq* cq = nullptr;          ///< an XRC SRQ's completion queue
  SrqEvents events;
  uint32_t async_taken = 0;  ///< affiliated async events the program took (under srq.mutex)
};

/** @brief A memory window (its current rkey is ibv_mw::rkey). */
struct SimMw {
  ibv_mw mw;  // must stay first
};

/** @brief An address handle: where a UD send goes (the WR adds the remote QPN and Q_Key). */
struct SimAh {
  ibv_ah ah;  // must stay first
  hw::DatagramAddr av;
};

inline SimContext* sim(ibv_context* c) { return reinterpret_cast<SimContext*>(verbs_get_ctx(c)); }
inline SimPd* sim(ibv_pd* p) { return reinterpret_cast<SimPd*>(p); }
inline SimMr* sim(ibv_mr* m) { return reinterpret_cast<SimMr*>(m); }
inline SimCq* sim(ibv_cq* c) { return reinterpret_cast<SimCq*>(c); }
inline SimQp* sim(ibv_qp* q) { return reinterpret_cast<SimQp*>(q); }
inline SimChannel* sim(ibv_comp_channel* c) { return reinterpret_cast<SimChannel*>(c); }
inline SimSrq* sim(ibv_srq* s) { return reinterpret_cast<SimSrq*>(s); }
inline SimAh* sim(ibv_ah* a) { return reinterpret_cast<SimAh*>(a); }

/** @brief Queue an async event on a context and wake its async fd. */
void push_async_event(SimContext* ctx, const ibv_async_event& ev);

// Data-path ops installed in ibv_context::ops.
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
/** @brief post_send; with @p type1_bind, IBV_WR_BIND_MW binds a type 1 window (ibv_bind_mw). */
int post_send_wrs(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, bool type1_bind);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
/** @brief ibv_bind_mw(3) for type 1 windows: a bind WQE on @p qp's send queue. */
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
/** @brief Write one receive WR into a receive-queue slot of @p stride bytes (RQ or SRQ format). */
void write_recv_wqe(uint8_t* slot, uint32_t stride, const ibv_recv_wr& wr);
/** @brief An SRQ (XRC or not) with the given attributes; ibv_create_srq and ibv_create_srq_ex. */
ibv_srq* create_srq_on(ibv_pd* pd, void* srq_context, ibv_srq_attr& attr, SimXrcd* xrcd, ibv_cq* cq);
/** @brief The SRQs of a process by device and number, for CQEs that name one. */
void register_srq(SimSrq* srq);
void unregister_srq(SimSrq* srq);
SimSrq* find_srq(KernelDevice* k, uint32_t srqn);
/** @brief ibv_destroy_qp of an XRC receive QP handle (the creator's is EBUSY while others are open). */
int destroy_xrc_recv_qp(SimQp* q);
/** @brief A receive CQE of an SRQ completed slot @p index: its wr_id; frees the slots it can. */
uint64_t srq_complete(SimSrq& srq, uint16_t index);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
/**
 * @brief Whether @p cq holds a completion not yet polled: a look at the ring only, which, unlike
 * an empty ibv_poll_cq, never lets a simulator's time move and is not traced.
 */
bool cq_has_completion(ibv_cq* cq);
int req_notify_cq(ibv_cq* cq, int solicited_only);
/** @brief verbs_context::query_port (full struct ibv_port_attr). */
int query_port_ex(ibv_context* context, uint8_t port, ibv_port_attr* attr, size_t len);

/** @brief Wait on an eventfd while letting the device make progress; false on EAGAIN (non-blocking fd). */
/** @brief Count @p ev as taken by the program, against the object it is about (event_acks.cpp). */
void note_async_taken(const ibv_async_event& ev);
/**
 * @brief Before a destroy: wait until the events the program took about the object are all
 * acknowledged (@p taken/@p acked async, @p comp_taken/@p comp_acked completion events, or
 * null), as rdma-core does; a driver error event first says the wait will not end by itself.
 */
void wait_events_acked(HcaLink& link, const char* verb, uint32_t qpn, pthread_mutex_t* mutex,
                       pthread_cond_t* cond, const uint32_t* taken, const uint32_t* acked,
                       const uint32_t* comp_taken = nullptr, const uint32_t* comp_acked = nullptr);
bool wait_readable(HcaLink& link, int efd);
/**
 * @brief Let the device run until software can see something new (HcaLink::wait_progress), and
 * count it when it did (device_moves).
 */
bool wait_device(HcaLink& link);
/** @brief How many waits in this process have seen the device do something visible. */
uint64_t device_moves();

}  // namespace hcasim::drv
