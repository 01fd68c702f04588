// SPDX-License-Identifier: Apache-2.0
/**
 * @file ib_cm.h
 * @brief The InfiniBand Communication Manager (IBTA Vol 1 chapter 12) of this process's
 *        "kernel": one state machine per connection, REQ/REP/RTU/REJ/DREQ/DREP on the GSI QP
 *        of each device, resends after the response timeouts, and time wait. rdma_cm
 *        (rdma_cm.h) sits on top of it, as the kernel's rdma_cm sits on ib_cm.
 *
 * The CM runs on whichever thread needs it (progress(), wait()), under one recursive mutex:
 * MADs are taken and timers fired when a program waits for a CM event, as the kernel's CM
 * handles them from interrupts and timers. Handlers run with that mutex held and may call back.
 */
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "ib_mad.h"
#include "mad_agent.h"

namespace hcasim::drv::cm {

namespace mad = hcasim::wire::mad;

/** @brief Monotonic wall time in ns: the CM's timers run on it, as the kernel's do. */
inline uint64_t cm_now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}
/** @brief An IBTA timeout field (5 bits) in ns: 4.096 us * 2^t. */
constexpr uint64_t cm_timeout_ns(uint8_t t) { return 4096ull << (t > 31 ? 31 : t); }
/** @brief How long to wait, at most @p cap_ms, for the deadline @p next_ns (0: none) to come. */
inline int cm_wait_ms(uint64_t next_ns, int cap_ms) {
  if (!next_ns) return cap_ms;
  const uint64_t now = cm_now_ns();
  const uint64_t until = next_ns <= now ? 0 : (next_ns - now + 999999) / 1000000;
  return until < uint64_t(cap_ms) ? int(until) : cap_ms;
}

/** @brief Connection states (IBTA 12.9.6's, as the Linux CM names them). */
enum class CmState : uint8_t {
  Idle,
  Listen,
  ReqSent,
  ReqRcvd,
  RepSent,
  RepRcvd,
  Established,
  DreqSent,
  DreqRcvd,
  Timewait,
  SidrReqSent,  ///< a service ID resolution (UD) is asked for
  SidrReqRcvd,  ///< a service ID resolution waits for the owner's answer
};
/** @brief "IDLE", "LISTEN", "REQ_SENT", ... */
const char* cm_state_name(CmState s);

/** @brief What the CM tells the owner of a connection. */
enum class CmEventType : uint8_t {
  ReqReceived,      ///< a REQ for a listened service: CmEvent::id is a new connection
  RepReceived,      ///< the REP to our REQ (send the RTU, or a REJ)
  RtuReceived,      ///< the connection is established (passive side)
  RejReceived,      ///< the peer refused; CmEvent::reason says why
  ReqError,         ///< no answer to the REQ after every resend
  RepError,         ///< no RTU after every resend of the REP
  DreqReceived,     ///< the peer disconnects (the DREP has been sent)
  DrepReceived,     ///< the peer answered our DREQ
  DreqError,        ///< no DREP after every resend of the DREQ
  TimewaitExit,     ///< time wait is over: the QP may be used again
  SidrReqReceived,  ///< a SIDR_REQ for a listened service: CmEvent::id is a new id
  SidrRepReceived,  ///< the answer to our SIDR_REQ (its status says whether it resolved)
  SidrReqError,     ///< no SIDR_REP after every resend
};
/** @brief "REQ_RECEIVED", ... */
const char* cm_event_name(CmEventType t);

class CmId;

/** @brief One event for a connection's owner. */
struct CmEvent {
  CmEventType type;
  CmId* id;                      ///< the connection
  CmId* listener = nullptr;      ///< ReqReceived: the listening id
  const uint8_t* mad = nullptr;  ///< the MAD that caused it (decode with wire::mad), or null
  uint16_t reason = 0;           ///< RejReceived: the REJ's reason
};
/** @brief Called for each event, with the CM's mutex held. */
using CmHandler = std::function<void(const CmEvent&)>;

/** @brief One end of a connection (or a listener): the Linux kernel's struct ib_cm_id. */
class CmId {
 public:
  CmState state() const { return state_; }
  uint32_t local_comm_id() const { return local_id_; }
  uint32_t remote_comm_id() const { return remote_id_; }
  /** @brief The device the connection runs on (null before listen/send_req/ReqReceived). */
  MadAgent* agent() const { return agent_; }
  const uint8_t* remote_gid() const { return remote_gid_; }
  uint64_t service_id() const { return service_id_; }
  /** @brief The peer's QP: the REQ's or REP's local QPN (an XRC REP names its TGT QP as EECN). */
  uint32_t remote_qpn() const { return remote_qpn_; }
  void* context = nullptr;  ///< the owner's

 private:
  friend class Cm;
  CmHandler handler_;
  CmState state_ = CmState::Idle;
  uint32_t local_id_ = 0, remote_id_ = 0, remote_qpn_ = 0;
  uint64_t remote_guid_ = 0, service_id_ = 0, tid_ = 0;
  MadAgent* agent_ = nullptr;
  uint8_t remote_gid_[16] = {};
  uint8_t last_mad_[kMadBytes] = {};  ///< resent when the timer fires
  uint64_t deadline_ns_ = 0, timeout_ns_ = 0, timewait_ns_ = 0;
  uint32_t retries_left_ = 0, max_retries_ = 0;
  bool xrc_ = false;  ///< an XRC connection (the REQ said so)
};

/** @brief The process's CM. */
class Cm {
 public:
  /** @brief The one CM of this process. */
  static Cm& get();

  CmId* create_id(CmHandler handler);
  /** @brief Forget @p id; a REQ or REP in flight is answered with a REJ, a connection with a DREQ. */
  void destroy_id(CmId* id);
  /** @brief Take REQs for @p service_id arriving at @p dev; EADDRINUSE if another id does. */
  int listen(CmId* id, ibv_device* dev, uint64_t service_id);
  /**
   * @brief Send @p req to the port owning @p dgid from @p dev; the CM fills in the comm ID,
   * CA GUID and the paths' GIDs. Resent after remote_cm_response_timeout, max_cm_retries times.
   */
  int send_req(CmId* id, ibv_device* dev, mad::Req req, const uint8_t dgid[16]);
  /** @brief send_req on the device of agent @p a. */
  int send_req(CmId* id, MadAgent* a, mad::Req req, const uint8_t dgid[16]);
  /** @brief listen on the device of agent @p a. */
  int listen(CmId* id, MadAgent* a, uint64_t service_id);
  /** @brief Events of @p id go to @p handler from now on (a new connection's owner takes it). */
  void set_handler(CmId* id, CmHandler handler);
  /**
   * @brief The passive side's QP saw traffic before the RTU (ib_cm_notify: IB_EVENT_COMM_EST):
   * the connection is established as if the RTU had come (RtuReceived).
   */
  int establish(CmId* id);
  /** @brief Answer a ReqReceived with @p rep (the CM fills in the comm IDs and GUID). */
  int send_rep(CmId* id, mad::Rep rep);
  int send_rtu(CmId* id, const void* private_data, size_t len);
  /** @brief Refuse a received REQ or REP with @p reason. */
  int send_rej(CmId* id, mad::RejReason reason, const void* private_data, size_t len);
  int send_dreq(CmId* id, const void* private_data, size_t len);
  /** @brief Ask the port owning @p dgid which UD QP serves @p req's service (IBTA 12.11). */
  int send_sidr_req(CmId* id, MadAgent* a, mad::SidrReq req, const uint8_t dgid[16], uint8_t timeout,
                    uint8_t retries);
  /** @brief Answer a SidrReqReceived (the CM fills in the request ID and service ID). */
  int send_sidr_rep(CmId* id, mad::SidrRep rep);

  /** @brief Take every MAD that arrived and fire due timers; true if anything happened. */
  bool progress();
  /**
   * @brief At the process's end: let the MADs already sent leave (their send completions), for
   * at most @p max_ms of wall time. The kernel's CM sends them whatever becomes of the process;
   * here they go from its memory, and the device forgets a process's work once it has ended.
   */
  void settle_sends(int max_ms);
  /**
   * @brief Let the devices run until progress() may have work, at most @p max_ms of wall time;
   * a readable @p also_fd (an event channel another thread queues to) ends the wait too.
   */
  void wait(int max_ms, int also_fd = -1);
  std::recursive_mutex& mutex() { return mu_; }
  /** @brief The MAD agent of @p dev, opened on first use; null with errno on failure. */
  MadAgent* agent(ibv_device* dev);
  /**
   * @brief Run the CM beside the program, as the kernel's runs: a thread that takes each MAD as
   * it arrives and fires the timers, so an event channel's descriptor becomes readable by
   * itself (poll(2) on it works). In the lockstep clock (HCASIM_CLOCK) simulated time moves
   * only inside the program's own calls and a trace must repeat, so the CM runs inside
   * librdmacm's calls, and the thread acts only for a program that has left librdmacm and the
   * devices alone for kQuietPeriod (one waiting in poll(2)). None in step mode (HCASIM_STEP).
   * Once per process; stopped at exit.
   */
  void start_service();
  /** @brief A program's librdmacm command begins (@p begins) or ends (Ucma's entry points). */
  void program_call(bool begins);
  /** @brief Lockstep clock: how long the program must not call librdmacm or a device before the
   *  CM acts beside it (the in-process device's own fallback period, HCASIM_IDLE_US's default). */
  static constexpr std::chrono::milliseconds kQuietPeriod{2};

 private:
  Cm() = default;
  /** The fds to wait on for the agents (armed first) and the next timer; under mu_. */
  uint64_t collect_waits(std::vector<pollfd>& fds);
  void serve();
  void serve_when_quiet();
  /** Under mu_: a value that changes with every program call into librdmacm or a device. */
  uint64_t activity() const;
  /** Under mu_: whether a MAD or a CM timer waits for progress() (a look only). */
  bool work_waiting() const;
  /** Under mu_: the earliest CM timer, 0 when none is set. */
  uint64_t next_deadline() const;
  void stop_service();
  void on_mad(MadAgent& a, const ReceivedMad& m);
  void on_req(MadAgent& a, const ReceivedMad& m);
  void on_rep(const ReceivedMad& m);
  void on_rtu(const ReceivedMad& m);
  void on_rej(const ReceivedMad& m);
  void on_dreq(MadAgent& a, const ReceivedMad& m);
  void on_drep(const ReceivedMad& m);
  void on_sidr_req(MadAgent& a, const ReceivedMad& m);
  void on_mra(const ReceivedMad& m);
  void send_mra(CmId& id, mad::MraedMessage what);
  /// rdma_cm's MRA service timeout (CMA_CM_MRA_SETTING): 4.096 us * 2^24, about 69 s.
  static constexpr uint8_t kMraServiceTimeout = 24;
  void on_sidr_rep(const ReceivedMad& m);
  bool fire_timers();
  void timed_out(CmId& id);
  CmId* by_comm_id(uint32_t id, CmState want1, CmState want2);
  int transmit(CmId& id, bool resend_later);
  void set_state(CmId& id, CmState s);
  void emit(CmId& id, CmEventType t, const uint8_t* mad, uint16_t reason = 0, CmId* listener = nullptr);
  void answer_unknown(MadAgent& a, const ReceivedMad& m);
  void enter_timewait(CmId& id);

  std::recursive_mutex mu_;
  std::map<ibv_device*, std::unique_ptr<MadAgent>> agents_;
  std::map<uint32_t, std::unique_ptr<CmId>> ids_;  ///< by local comm ID
  std::map<std::pair<MadAgent*, uint64_t>, CmId*> listeners_;
  uint32_t next_id_ = 0x1000;
  uint64_t next_tid_ = 1;
  /// The TIDs of the DREQs left with the HCA (SetLeftDreq): apart from next_tid_'s.
  static constexpr uint64_t kLeftDreqTid = 1ull << 62;
  int wake_fd_ = -1;  ///< written to end the service thread's wait (a new agent, exit)
  std::atomic<bool> stop_{false};
  std::thread service_;
  std::atomic<int> calls_in_{0};         ///< librdmacm commands in progress (program_call)
  std::atomic<uint64_t> calls_made_{0};  ///< librdmacm commands begun so far
};

}  // namespace hcasim::drv::cm
