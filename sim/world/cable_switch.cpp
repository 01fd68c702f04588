// SPDX-License-Identifier: Apache-2.0
#include "cable_switch.h"

#include <algorithm>
#include <cstring>

namespace hcasim::sim {

CableEnd::CableEnd(model::PacketReceiver* to, uint64_t propagation_ps, model::Tracer& tracer)
    : to_(to),
      prop_(propagation_ps),
      tracer_(tracer),
      flight_("wire", [this](model::PacketPtr& p) { to_->receive(std::move(p)); }) {}

void CableEnd::carry(model::PacketPtr pkt, uint64_t tx_end_ps) {
  ++frames_;
  if (drop && drop(*pkt)) {
    HCASIM_TRACE(tracer_, Wire, Error, model::kTraceNone, model::TraceFields().set_count(pkt->len),
                 "frame %llu lost on the wire", static_cast<unsigned long long>(pkt->id));
    return;
  }
  flight_.push(tx_end_ps + prop_, std::move(pkt));
}

namespace {
uint64_t mac_key(const uint8_t* m) {
  uint64_t k = 0;
  std::memcpy(&k, m, 6);
  return k;
}
}  // namespace

// Egress: the switch's transmitter towards one host. It sends in arrival order at line rate, so
// a frame's departure is known when it arrives: after the frames queued before it. (Keeping the
// waiting frames in a timed queue instead cost each of them a re-queue per departure ahead of it:
// quadratic in the queue's length, which many-to-one traffic over many hosts makes long.)
struct Switch::Egress {
  Egress(const model::TimingProfile& prof, model::EthPort& host)
      : prof(prof),
        host(host),
        flight("switch.link", [this](model::PacketPtr& p) { this->host.receive(std::move(p)); }) {}
  void send(model::PacketPtr& p) {
    busy = std::max(model::now_ps(), busy) + prof.wire_ps(p->len);
    flight.push(busy + prof.propagation_ps, std::move(p));
  }
  const model::TimingProfile& prof;
  model::EthPort& host;
  model::TimedQueue<model::PacketPtr> flight;
  uint64_t busy = 0;  ///< when the last frame queued so far has left
};

// Ingress: what a host transmits into; after propagation and a cut-through-free
// store-and-forward delay the frame is queued on the egress port of its destination.
struct Switch::Ingress : model::WireSide {
  Ingress(Switch& sw) : sw(sw), arrive("switch.rx", [this](model::PacketPtr& p) { forward(p); }) {}
  void carry(model::PacketPtr pkt, uint64_t tx_end_ps) override {
    arrive.push(tx_end_ps + sw.prof_.propagation_ps, std::move(pkt));
  }
  void forward(model::PacketPtr& p) {
    if (p->data[0] & 1) return flood(p);  // a group address: every other port (no IGMP snooping)
    auto it = sw.by_mac_.find(mac_key(p->data));
    if (it == sw.by_mac_.end()) {
      HCASIM_TRACE(sw.tracer_, Wire, Error, model::kTraceNone, model::TraceFields().set_count(p->len),
                   "switch: unknown destination MAC, frame dropped");
      return;
    }
    it->second->send(p);
  }
  void flood(model::PacketPtr& p) {
    for (auto& e : sw.egress_) {
      if (e.get() == own) continue;
      model::PacketPtr copy = model::make_packet();
      copy->len = p->len;
      copy->pristine = p->pristine;
      std::memcpy(copy->data, p->data, p->len);
      e->send(copy);
    }
  }
  Switch& sw;
  Egress* own = nullptr;  ///< the port's own egress: a flooded frame never goes back
  model::TimedQueue<model::PacketPtr> arrive;
};

Switch::Switch(const model::TimingProfile& prof, model::Tracer& tracer) : prof_(prof), tracer_(tracer) {}
Switch::~Switch() = default;

model::WireSide* Switch::attach(model::EthPort& host) {
  egress_.push_back(std::make_unique<Egress>(prof_, host));
  by_mac_[mac_key(host.mac())] = egress_.back().get();
  ingress_.push_back(std::make_unique<Ingress>(*this));
  ingress_.back()->own = egress_.back().get();
  return ingress_.back().get();
}

}  // namespace hcasim::sim
