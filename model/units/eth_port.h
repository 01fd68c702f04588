// SPDX-License-Identifier: Apache-2.0
/**
 * @file eth_port.h
 * @brief The HCA's Ethernet port: serialises frames onto the attached wire at line rate and
 *        hands received frames to the transport (requests to the responder, responses to the
 *        requester). Frames addressed to the port's own MAC loop back inside the HCA.
 */
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <vector>

#include "packet.h"
#include "timed_queue.h"
#include "timing_profile.h"
#include "trace.h"

namespace hcasim::model {

/** @brief A wire as seen from a port: carries a frame whose last bit left at @p tx_end_ps. */
class WireSide {
 public:
  virtual ~WireSide() = default;
  virtual void carry(PacketPtr pkt, uint64_t tx_end_ps) = 0;
};

class EthPort : public PacketReceiver {
 public:
  using RxHandler = std::function<void(PacketPtr)>;
  using Tap = std::function<void(uint64_t time_ps, const Packet&)>;
  /** Called for a frame marked Packet::report_sent once its last bit has left (or it was dropped). */
  using SentHandler = std::function<void(const Packet&, uint64_t tx_end_ps)>;

  EthPort(const TimingProfile& prof, Tracer& tracer, const uint8_t mac[6]);

  void attach_wire(WireSide* wire) { wire_ = wire; }
  void set_rx_handler(RxHandler h) { rx_ = std::move(h); }
  /** @brief Called with every frame as it starts transmission (pcap capture). */
  void set_tap(Tap tap) { tap_ = std::move(tap); }
  void set_sent_handler(SentHandler h) { sent_ = std::move(h); }

  /** @brief Queue a frame that is ready to go at @p ready_ps. */
  void transmit(PacketPtr pkt, uint64_t ready_ps);
  /** @brief From the wire: a frame fully arrived now. */
  void receive(PacketPtr pkt) override;

  /**
   * @brief Link state. A down port neither sends nor delivers frames (they count as drops):
   * what peers see of a host whose owner process died mid-flight, until the function is reset.
   */
  void set_up(bool up) { up_ = up; }
  bool up() const { return up_; }

  /** @brief When the transmitter is free again (for requester back-pressure). */
  uint64_t busy_until() const { return busy_until_; }
  const uint8_t* mac() const { return mac_; }

  uint64_t tx_packets() const { return tx_pkts_; }
  uint64_t rx_packets() const { return rx_pkts_; }
  uint64_t tx_bytes() const { return tx_bytes_; }
  uint64_t rx_bytes() const { return rx_bytes_; }
  uint64_t drops() const { return drops_; }

 private:
  void run_tx();
  void arm(uint64_t at_ps);
  void send(PacketPtr pkt, uint64_t now);
  void report_sent(Packet& pkt, uint64_t tx_end_ps);
  void describe(const char* dir, const Packet& pkt);

  /** A frame waiting for its ready time or for the transmitter. */
  struct Pending {
    uint64_t ready;
    uint64_t seq;
    mutable PacketPtr pkt;
    bool operator>(const Pending& o) const { return ready != o.ready ? ready > o.ready : seq > o.seq; }
  };

  const TimingProfile& prof_;
  Tracer& tracer_;
  uint8_t mac_[6];
  WireSide* wire_ = nullptr;
  RxHandler rx_;
  Tap tap_;
  SentHandler sent_;
  /// Frames in (ready time, submission) order: the earliest-ready frame goes first, frames
  /// ready at the same time keep their order, so each QP's packets leave in PSN order.
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
  uint64_t seq_ = 0;
  sc_core::sc_event wake_;  ///< one wake-up per frame: at max(its ready time, transmitter free)
  bool armed_ = false;
  bool up_ = true;
  uint64_t armed_at_ = 0;
  TimedQueue<PacketPtr> loopback_;
  uint64_t busy_until_ = 0;
  uint64_t tx_pkts_ = 0, rx_pkts_ = 0, tx_bytes_ = 0, rx_bytes_ = 0, drops_ = 0;
};

/** @brief One-line description of a frame ("WRITE_ONLY_IMM psn=12 qp=0x11 len=64 SE"). */
void describe_frame(const Packet& pkt, char* buf, size_t cap);

}  // namespace hcasim::model
