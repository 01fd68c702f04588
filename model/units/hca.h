// SPDX-License-Identifier: Apache-2.0
/**
 * @file hca.h
 * @brief One simulated HCA: the units of model/units composed, with the three interfaces a
 *        PCIe function offers its driver — command mailbox, UAR doorbells, interrupts — plus
 *        the platform IOMMU in front of its DMA, and one Ethernet port.
 */
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "command_unit.h"
#include "doorbell.h"
#include "responder.h"

namespace hcasim::model {

/** @brief Counters of one HCA (printed by --stats, asserted by tests). */
struct HcaStats {
  uint64_t doorbells, qpc_hits, qpc_misses, bt_walks, bt_cache_hits, send_wqes, recv_wqes, dma_read_bytes,
      dma_write_bytes, tx_packets, rx_packets, tx_bytes, rx_bytes, acks_sent, acks_received, naks, rnr_naks,
      duplicates, retransmits, cqes, cq_events, cq_overflows, eqes, interrupts, rx_dropped, iotlb_hits,
      iotlb_misses;
  /** Objects destroyed while work touching them was in flight (hazard reports). */
  uint64_t hazards;
  /** UC/UD packets the responder dropped (unreliable: never NAKed), and UD Q_Key mismatches. */
  uint64_t unreliable_drops, qkey_violations;
  /** Received frames whose ICRC did not match their bytes (corrupted on the wire); also in rx_dropped. */
  uint64_t icrc_errors;
  /** Frames this host transmitted that fault injection (--faults) lost, sent twice, held back behind
   *  the next frame, corrupted (one byte flipped) or delayed. */
  uint64_t injected_losses, injected_duplicates, injected_reorders, injected_corruptions, injected_delays;
  /** Frames this host transmitted that were lost because its link or the receiver's was down
   *  (--faults link-down), and how often this host's own link went down or came back. */
  uint64_t link_down_losses, link_changes;
};

/** @brief What fault injection (--faults) did to the frames one host transmitted (HcaStats). */
struct InjectedFaults {
  uint64_t losses = 0, duplicates = 0, reorders = 0, corruptions = 0, delays = 0;
  uint64_t link_down_losses = 0;  ///< lost because the sender's or the receiver's link was down
};

/** @brief An RDMA WRITE in flight towards some memory key (for a deregistration hazard report). */
struct InflightWrite {
  std::string host;  ///< device the WRITE comes from (requester) or is arriving at (responder)
  uint32_t qpn = 0;  ///< its QP there
  uint32_t wqe = 0;  ///< requester: WQE index; responder side: kTraceNone
  uint32_t first_psn = 0, last_psn = 0;
  uint64_t va = 0;  ///< first byte it writes
  uint32_t len = 0;
  uint32_t dest_qpn = 0;  ///< requester side: the QP it writes through at the target
};

class Hca {
 public:
  Hca(const TimingProfile& prof, const HcaIdentity& id, TraceSink* sink = nullptr);
  Hca(const Hca&) = delete;
  Hca& operator=(const Hca&) = delete;

  // ---- the PCIe function, as the driver sees it
  /** @brief Run a command; a destroy is first checked for work still in flight (hazards). */
  void execute(hw::CmdMailbox& mb);
  /**
   * @brief How long the firmware takes for one command (the profile's command_ps). The model
   * applies a command's effects at once; in the hardware-like clock the driver sees it complete
   * this much later, as a real driver waits for the command's completion.
   */
  uint64_t command_ps() const { return core_.prof.command_ps; }
  void mmio_write(uint32_t offset, uint64_t value) { doorbell_.mmio_write(offset, value); }
  void set_irq_handler(EqUnit::IrqHandler h) { core_.eq.set_irq_handler(std::move(h)); }
  // ---- the platform IOMMU in front of it
  bool iommu_map(uint64_t iova, void* hva, uint64_t len) {
    return core_.iommu.map(iova, static_cast<uint8_t*>(hva), len);
  }
  bool iommu_unmap(uint64_t iova) { return core_.iommu.unmap(iova); }
  void set_host_memory(HostMemory* mem) { core_.dma.set_host_memory(mem); }
  /**
   * @brief Function-level reset (what the host does when the process owning the function dies):
   * every QP, CQ, EQ, MKey and PD is destroyed without completions, the IOMMU is emptied and
   * the interrupt handler detached. Frames still arriving for the old QPs are dropped (no
   * such QP), so peers see retry-exceeded errors as on real hardware. Resource numbers keep
   * counting, so a new owner never gets a number a peer may still hold.
   */
  void function_reset();
  /**
   * @brief Before a function_reset(): report, as hazards, the messages its owner left
   * unacknowledged (its process ended with them in flight). @p owner names it ("process 1234").
   */
  void owner_gone_hazards(const std::string& owner);

  // ---- the world side
  EthPort& port() { return core_.port; }
  const HcaIdentity& identity() const { return core_.id; }
  const hw::HcaCaps& caps() const { return cmd_.caps(); }
  void set_resolver(std::function<bool(const uint8_t gid[16], uint8_t mac[6])> r) {
    core_.frames.set_resolver(std::move(r));
  }
  Tracer& tracer() { return tracer_; }
  HcaStats stats() const;
  /** @brief Read-only view of the units (step-mode inspection, per-QP stats). */
  const HcaCore& core() const { return core_; }
  /**
   * @brief Requester messages of this HCA in flight (not yet acknowledged) that write into
   * [va, va+len) under @p rkey on the device @p target (the QP's destination GID is one of its
   * GIDs). Read-only; used for deregistration hazards.
   */
  void writes_in_flight_to(const HcaIdentity& target, uint32_t rkey, uint64_t va, uint64_t len,
                           std::vector<InflightWrite>& out) const;
  /** @brief Who else may be writing into this HCA's memory: asks every HCA of the world. */
  using WriteProbe = std::function<void(const Hca& target, uint32_t rkey, uint64_t va, uint64_t len,
                                        std::vector<InflightWrite>& out)>;
  /** @brief Set by the world; without one only this HCA's own requester QPs are asked. */
  void set_write_probe(WriteProbe p) { write_probe_ = std::move(p); }
  /**
   * @brief The clock the world runs (words of a hazard report): in lockstep the lost work is
   * certain, in realtime the run lost a race that hardware could lose too.
   */
  void set_realtime_clock(bool on) { realtime_clock_ = on; }
  /**
   * @brief Test hook: drop the next @p n received frames for which @p pred is true. Rules add
   * up: a frame is dropped by the first earlier rule that still has frames to drop and matches.
   */
  void drop_rx_if(std::function<bool(const wire::ParsedFrame&)> pred, uint32_t n);
  /** @brief Called with every frame a drop_rx_if() rule dropped (the capture's fault notes). */
  void set_drop_observer(std::function<void(const Packet&)> obs) { drop_observer_ = std::move(obs); }
  /** @brief The faults injected on this host's transmitted frames (the world's injector counts them). */
  InjectedFaults& injected_faults() { return injected_; }
  /**
   * @brief The port's link went down (@p up false) or came back (true), as when a cable is
   * pulled or plugged (--faults link-down). The port's state (QueryPort: DOWN/POLLING or
   * ACTIVE/LINK_UP) follows, and every EQ gets a port-change EQE for port 1, which the driver
   * turns into IBV_EVENT_PORT_ERR or IBV_EVENT_PORT_ACTIVE. QPs are not touched: as on hardware,
   * an RC requester keeps retrying and fails only when its retry budget runs out. The frames
   * themselves are lost by the world's wire (fault_injector.h), which knows the link schedule.
   */
  void set_link(bool up);
  /** @brief Whether the port's link is up (it is unless a link-down fault took it down). */
  bool link_up() const { return link_up_; }

 private:
  /** @brief A received frame waiting for its QP context (kept alive with its packet). */
  struct RxWork {
    PacketPtr pkt;
    wire::ParsedFrame f;
  };
  void on_rx(PacketPtr pkt);
  /** @brief QueryPort: the link's state in a PortInfo (BadParam for a port other than 1). */
  void query_port(hw::CmdMailbox& mb);
  /** @brief ResolveGid: the neighbour lookup the port's packets use, for the driver's CM. */
  void resolve_gid(hw::CmdMailbox& mb);
  // ---- multicast (hca_mcast.cpp)
  /** @brief AttachMcast / DetachMcast: a UD QP joins or leaves a group's deliveries. */
  void attach_mcast(hw::CmdMailbox& mb, bool attach);
  /** @brief A datagram for QP 0xFFFFFF: a copy to every QP attached to its destination GID. */
  void deliver_multicast(PacketPtr pkt, const wire::ParsedFrame& f);
  /** @brief A MAD for QP1 while no program opened it: answered as the host's kernel CM would. */
  void answer_without_cm(const wire::ParsedFrame& f);
  /** @brief SetLeftDreq: keep (arg1 1) or drop (arg1 0) an established connection's DREQ. */
  void set_left_dreq(hw::CmdMailbox& mb);
  /** @brief The owner is gone: send every DREQ left with set_left_dreq() from QP1, as the host's
   *  kernel CM ends the connections of a process that ended without ending them. */
  void send_left_dreqs();
  /** @brief A frame whose QPC lookup is done: check its transport and hand it to a unit. */
  void dispatch_rx(RxWork& w);
  /** @brief Whether packets of opcode @p op belong to @p qp's transport (RC, UC, UD). */
  static bool transport_matches(const QpContext& qp, wire::BthOpcode op);
  void to_error(QpContext& qp, const char* why);
  void on_state(QpContext& qp, hw::QpState from);
  // ---- hazard reports (hca_hazards.cpp): destroy commands only, never the data path
  void check_hazards(const hw::CmdMailbox& mb);
  void qp_hazard(uint32_t qpn);
  void cq_hazard(uint32_t cqn);
  void mkey_hazard(uint32_t key);
  /**
   * @brief The sends @p qp would lose now (unacknowledged messages, or posted WQEs not yet
   * executed): false if none, else @p what says which ("1 unacknowledged SEND (WQE 3, ...,
   * from the buffer at ...) in flight") and @p f has their facts.
   */
  bool sends_left(const QpContext& qp, TraceFields& f, std::string& what) const;
  /** @brief Count, trace (Command/Error, "hazard: ...") and print one hazard line on stderr. */
  /** @p race false: nothing was lost (CQEs a process left unpolled); the line says so instead. */
  void report_hazard(uint32_t qpn, const TraceFields& f, const std::string& what, bool race = true);
  static hw::HcaCaps default_caps(const TimingProfile& prof, const HcaIdentity& id);

  Tracer tracer_;
  HcaCore core_;
  Requester req_;
  Responder resp_;
  DoorbellUnit doorbell_;
  CommandUnit cmd_;
  /** One drop_rx_if() rule: what it matches, how many more frames it drops. */
  struct DropRx {
    std::function<bool(const wire::ParsedFrame&)> pred;
    uint32_t left;
  };
  /** A rule matches @p f: it is dropped (and the rule's count goes down). */
  bool take_drop(const wire::ParsedFrame& f);
  std::vector<DropRx> drops_;
  std::function<void(const Packet&)> drop_observer_;
  uint64_t rx_dropped_ = 0;
  uint64_t icrc_errors_ = 0;
  InjectedFaults injected_;
  bool link_up_ = true;
  uint64_t link_changes_ = 0;
  std::map<std::array<uint8_t, 16>, std::vector<uint32_t>> mcast_;  ///< group GID -> attached QPs
  std::map<uint32_t, hw::LeftDreq> left_dreqs_;  ///< local communication ID -> its DREQ (SetLeftDreq)
  // Received frames go through one in-order pipeline: each waits for its QPC lookup (a cache
  // miss is an ICM read), and none overtakes the one before it.
  TimedQueue<RxWork> rx_stage_;
  uint64_t rx_ready_ps_ = 0;  ///< when the last frame put in rx_stage_ leaves it
  uint64_t hazards_ = 0;
  bool realtime_clock_ = false;
  WriteProbe write_probe_;
};

}  // namespace hcasim::model
