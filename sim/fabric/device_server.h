// SPDX-License-Identifier: Apache-2.0
/**
 * @file device_server.h
 * @brief The device process of the cross-process fabric: one SystemC kernel and every HCA,
 *        serving client processes (hosts) over a Unix socket (protocol.h).
 *
 * Each client process is a host that owns `hcas_per_host` HCAs of the world (host i: HCAs
 * i*k … i*k+k-1, named hcasim<n>, with that HCA's MAC, IPv4 address and GIDs). The device
 * reaches the host's memory by address with process_vm_readv/writev and raises its
 * interrupts on eventfds the host passed. When a host's process ends, however it ends, its
 * HCAs get a function-level reset and the slot is free for the next process.
 *
 * Time: one clock for all hosts. Simulated time advances while programs wait in verbs calls:
 * when at least one connection waits and every other one is waiting too or has been quiet
 * (no message) for `quiet_us` of wall time (so a host about to ring a doorbell gets it
 * stamped before time moves on), or, with no waiter, after everyone has been quiet that long
 * (programs sleeping in poll(2) on a channel fd). A quiet thread the kernel shows ready to run
 * is not quiet until it has also used `quiet_us` of CPU time (computing): one the host's
 * scheduler has not run is about to post, not waiting (thread_watch.h). A wait returns once its host saw
 * something (a DMA write into its memory, an interrupt), after one wait quantum of simulated time, or at once
 * when nothing is pending anywhere. That is the lockstep clock (clock.h).
 *
 * In the realtime clock the device runs on the wall clock instead: this server's loop delivers
 * what is due (Engine::run_due), doorbells and commands land at the wall-clock instant, and a
 * wait returns as soon as its host sees something or after kRealtimeWaitNs. The auto clock is
 * lockstep until a second connection (another thread or process) attaches.
 */
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dma_engine.h"
#include "protocol.h"
#include "request.h"
#include "world.h"

namespace hcasim::fabric {

struct RingDoorbell;

struct DeviceOptions {
  std::string socket;          ///< Unix socket path to listen on
  uint32_t hosts = 8;          ///< host slots
  uint32_t hcas_per_host = 1;  ///< HCAs each host owns
  uint32_t quiet_us = 200;     ///< wall-time quiet period (see the file comment)
  int ready_fd = -1;           ///< written ("ready\n") and closed once the socket listens
  bool read_ahead = true;      ///< payloads read ahead (client_reads.h); HCASIM_READ_AHEAD=0 turns it off
  bool gather_asleep = true;   ///< run_step(); HCASIM_GATHER_ASLEEP=0 turns it off
};

class DeviceServer {
 public:
  DeviceServer(sim::World& world, const DeviceOptions& opt);
  ~DeviceServer();
  DeviceServer(const DeviceServer&) = delete;
  DeviceServer& operator=(const DeviceServer&) = delete;

  /** @brief Listen; false (with @p err) if the socket cannot be set up. */
  bool listen(std::string& err);
  /** @brief Serve until Stop or SIGTERM/SIGINT. Returns the exit status. */
  int run();

 private:
  struct Host;
  struct Conn;
  class RemoteMemory;
  struct Slot;

  void accept_conn();
  /** @brief Handle every queued message of @p c; false if the connection ended. */
  bool drain(Conn& c);
  struct Msg;
  /** @brief Check one message (request.h), then hand it to its handler; false if the connection ends. */
  bool handle(Conn& c, const MsgHeader& h, const uint8_t* p, int* fds, uint32_t nfds);
  /** @brief Hand an accepted message to its handler (one per type below); false if the connection ends. */
  bool dispatch(Conn& c, const Msg& m);
  bool on_hello(Conn& c, const Msg& m);
  bool on_attach(Conn& c, const Msg& m);
  /**
   * @brief Watch the program thread @p tid that @p c serves (thread_watch.h); false if it is not
   * a thread of @p c's process. Where /proc cannot show it, says so once and watches nothing.
   */
  bool watch_thread(Conn& c, int32_t tid);
  /**
   * @brief Lockstep: 0 if @p c counts as quiet (no message for @p quiet ns of wall time and its
   * thread asleep or computing: @p quiet ns of CPU time since), else when to look again.
   */
  uint64_t held_until(Conn& c, uint64_t now, uint64_t quiet);
  /** @brief Whether @p c's thread, silent for the quiet period, is asleep or computing (/proc). */
  static bool thread_quiet(Conn& c, uint64_t quiet);
  /**
   * @brief Lockstep: whether @p c's program thread may look at its memory during the next step:
   * it waits in the device, or it was not found asleep (held_until() has just judged it).
   */
  static bool may_look(const Conn& c);
  /**
   * @brief Set each host's Host::watched: with @p all, every host; else the hosts with a thread
   * that may_look() (or none the device knows). Returns when the first verdict of a host left
   * unwatched runs out (the thread may have woken since).
   */
  uint64_t mark_watched(bool all);
  /**
   * @brief Lockstep: run one step (Engine::run_until_visible). A write into the memory of a host
   * whose threads are all asleep does not end it, so a sleeping receiver's payloads are
   * gathered into one process_vm_writev instead of a step and a call each.
   */
  void run_step(uint64_t* pace);
  bool on_status(Conn& c);
  bool on_stop(Conn& c);
  /** @brief LEAVING: the host's process is ending; report what it leaves while its memory is there. */
  bool on_leaving(Conn& c);
  /** @brief Hazard reports for the work @p h leaves behind (Hca::owner_gone_hazards). */
  void report_left_behind(Host& h);
  bool on_control(Conn& c, const Msg& m);
  bool on_command(Conn& c, const Msg& m);
  bool on_doorbell(Conn& c, const Msg& m);
  /** @brief UAR stores @p dms[0..@p n) of host @p host's HCAs (checked), at one instant: the wall
   * clock's in realtime, then what they start runs ahead. */
  void ring_doorbells(int host, const DoorbellMsg* dms, int n);
  /**
   * @brief Handle every doorbell @p h left in its arena's ring (doorbell_ring.h), each checked as a
   * message; returns how many were taken.
   */
  int take_doorbells(Host& h);
  /** @brief take_doorbells() for every host; how many in all. */
  int take_all_doorbells();
  /** @brief The threads that rang @p e[0..n) count as heard from, as if each had sent a message. */
  void heard_from(const Host& h, const RingDoorbell* e, int n);
  /**
   * @brief Mark every ring asleep before poll(2); true if doorbells already wait (do not sleep).
   * @p looks_again: the sleep is finite and ends in a look at the rings before time moves.
   */
  bool doorbells_before_sleep(bool looks_again);
  /** @brief Back from poll(2): clients need not send WAKE. */
  void awake();
  /** @brief What request.h checks a message of host @p host against (-1: no host yet). */
  ConnState host_state(int host, bool life) const;
  bool on_map(Conn& c, const Msg& m);
  bool on_wait(Conn& c, const Msg& m);
  bool on_trace(Conn& c, const Msg& m);
  /** @brief Log why @p c is disconnected (one line naming its host and pid); returns false. */
  static bool bad(const Conn& c, const std::string& why);
  /**
   * @brief Send a reply to @p c without ever blocking: a client that leaves its replies unread
   * until they fill the connection's send buffer is marked to be disconnected (Conn::failed).
   */
  void reply(Conn& c, MsgType type, const void* a, size_t alen, const void* b = nullptr, size_t blen = 0);
  /** @brief Write every host's gathered payloads into its process (client_writes.h). */
  void write_out_all();
  /** @brief Close the connections marked failed (logged) or orphaned (their host is gone). */
  void sweep();
  /** @brief HCA @p i of host @p host (request.h has checked that the host owns it). */
  model::Hca& hca_of(int host, uint32_t i);
  /** @brief A HELLO: check it, give the process a host slot and its HCAs, answer. */
  void hello(Conn& c, const HelloMsg& m, int* fds, uint32_t nfds);
  /** @brief Why HELLO's descriptors are not one interrupt eventfd; empty if they are. */
  static std::string check_irq_fd(int fd);
  /** @brief The host slot a HELLO asks for (or the first free one); nullptr with @p err, @p why. */
  Host* pick_host(const HelloMsg& m, int& err, std::string& why);
  /** @brief Wire @p h's HCAs to its process (memory, interrupts, port up); fill @p r's names. */
  void bind_hcas(Host& h, HelloReply& r);
  /** Call @p f(i, slot, hca) for each of host @p h's HCAs (i: its index on the host). */
  template <typename F>
  void for_each_hca(const Host& h, F&& f);
  void close_conn(size_t i);
  void host_gone(Host& h);
  /** @brief --stats lines: in lockstep, the waits the 10 ms hold cap released; each HCA's DMA to client
   * memory. */
  std::string stats_tail_text();
  /** @brief Advance time if the rules allow; returns the poll timeout in ns (-1: none). */
  int64_t progress();
  /** @brief progress() in the realtime clock: deliver what is due, answer waits. */
  int64_t realtime_progress();
  void reply_wait(Conn& c, bool progress);
  /** @brief Answer @p type with the host's interrupt counts (a WaitReply). */
  void send_irqs(Conn& c, MsgType type, bool progress);
  std::string status_text();

  sim::World& world_;
  DeviceOptions opt_;
  int listen_fd_ = -1;
  bool stop_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;  ///< one per HCA
  std::vector<std::unique_ptr<Host>> hosts_;  ///< one per host slot
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<uint8_t> buf_;
  uint64_t next_token_;
  uint32_t attached_ = 0;           ///< connections ever attached (auto clock: the second goes realtime)
  bool said_no_watch_ = false;      ///< the device said once that it cannot watch program threads
  uint64_t forced_moves_ = 0;       ///< lockstep: waits that moved time on past a held thread (kMaxHoldNs)
  uint64_t waits_news_ = 0;         ///< WAITs answered because the host saw something new
  uint64_t waits_none_ = 0;         ///< WAITs answered without (time limit, nothing pending)
  uint64_t message_doorbells_ = 0;  ///< doorbells that came as messages
  uint64_t ring_doorbells_ = 0;     ///< doorbells taken from the arenas' rings
  uint64_t wakes_ = 0;              ///< WAKE messages
};

}  // namespace hcasim::fabric
