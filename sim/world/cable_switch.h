// SPDX-License-Identifier: Apache-2.0
/**
 * @file cable_switch.h
 * @brief What connects the hosts' ports: a point-to-point cable (propagation delay) and a
 *        store-and-forward Ethernet switch (MAC learning-free: every host's MAC is known up
 *        front). Ports serialise at line rate themselves; these add what happens in between.
 *        (The frame format on them is model/wire's; nothing here parses frames.)
 */
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "eth_port.h"

namespace hcasim::sim {

/** @brief One direction of a cable: frames arrive at @p to after the propagation delay. */
class CableEnd : public model::WireSide {
 public:
  CableEnd(model::PacketReceiver* to, uint64_t propagation_ps, model::Tracer& tracer);
  void carry(model::PacketPtr pkt, uint64_t tx_end_ps) override;
  uint64_t frames() const { return frames_; }
  /** @brief Frames for which this returns true are lost on the wire (fault injection). */
  std::function<bool(const model::Packet&)> drop;

 private:
  model::PacketReceiver* to_;
  uint64_t prop_;
  model::Tracer& tracer_;
  model::TimedQueue<model::PacketPtr> flight_;
  uint64_t frames_ = 0;
};

/** @brief A switch port's receive side: forwards by destination MAC to an egress port. */
class Switch {
 public:
  Switch(const model::TimingProfile& prof, model::Tracer& tracer);
  ~Switch();
  /** @brief Connect host port @p host; returns the wire side the host transmits into. */
  model::WireSide* attach(model::EthPort& host);

 private:
  struct Egress;
  struct Ingress;
  const model::TimingProfile& prof_;
  model::Tracer& tracer_;
  std::vector<std::unique_ptr<Egress>> egress_;
  std::vector<std::unique_ptr<Ingress>> ingress_;
  std::unordered_map<uint64_t, Egress*> by_mac_;
  friend struct Ingress;
};

}  // namespace hcasim::sim
