// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/flow_control.h"

#include <stdexcept>

#include "hcasim/verbs/error.h"

namespace hcasim::verbs {

FlowControl::FlowControl(Config c) : cfg_(c) {
  if (c.dataWr < 1 || c.dataWr > kMaxWr)
    throw std::invalid_argument("flow control: dataWr " + std::to_string(c.dataWr) + " outside 1.." +
                                std::to_string(kMaxWr));
  if (c.ackWr < kMinAckWr || c.ackWr > kMaxWr)
    throw std::invalid_argument("flow control: ackWr " + std::to_string(c.ackWr) + " outside " +
                                std::to_string(kMinAckWr) + ".." + std::to_string(kMaxWr) +
                                " (acks of acks need a threshold of at least 2 below the budget)");
  dataThreshold_ = (c.dataWr + 1) / 2;
  ackThreshold_ = c.ackWr / 2;
  localData_ = remoteData_ = c.dataWr;
  localAck_ = remoteAck_ = c.ackWr;
}

void FlowControl::enqueue(uint64_t cookie, uint32_t wrs) {
  if (wrs == 0) throw std::invalid_argument("flow control: an item needs at least one WR");
  queue_.push_back(Item{cookie, wrs, 0});
}

std::optional<FlowControl::Ack> FlowControl::takeAck() {
  const bool ackOfAcks = unackedAcks_ >= ackThreshold_;
  if (!ackOfAcks && unackedData_ < dataThreshold_) return std::nullopt;
  if (localAck_ == 0) return std::nullopt;
  // The last remote ack credit is kept for acks that return ack credits.
  if (remoteAck_ < (ackOfAcks ? 1u : 2u)) return std::nullopt;
  Ack a{uint16_t(unackedData_), uint16_t(unackedAcks_)};
  unackedData_ = unackedAcks_ = 0;
  --localAck_;
  --remoteAck_;
  return a;
}

void FlowControl::onDataCompletion() {
  if (localData_ >= cfg_.dataWr)
    throw ProtocolError("flow control: data completion with no data WR outstanding");
  ++localData_;
}

void FlowControl::onAckCompletion() {
  if (localAck_ >= cfg_.ackWr) throw ProtocolError("flow control: ack completion with no ack WR outstanding");
  ++localAck_;
}

void FlowControl::onDataReceived() {
  if (unackedData_ >= cfg_.dataWr)
    throw ProtocolError("flow control: peer sent more data items than it had credits for (" +
                        std::to_string(cfg_.dataWr) + ")");
  ++unackedData_;
}

void FlowControl::onAckReceived(uint32_t imm) {
  const auto [data, acks] = unpack(imm);
  if (uint32_t(remoteData_) + data > cfg_.dataWr || uint32_t(remoteAck_) + acks > cfg_.ackWr)
    throw ProtocolError("flow control: ack (data " + std::to_string(data) + ", acks " + std::to_string(acks) +
                        ") returns more credits than were used: " + str());
  if (unackedAcks_ >= cfg_.ackWr)
    throw ProtocolError("flow control: peer sent more acks than it had credits for (" +
                        std::to_string(cfg_.ackWr) + ")");
  remoteData_ += data;
  remoteAck_ += acks;
  ++unackedAcks_;
}

std::string FlowControl::str() const {
  return "credits local data " + std::to_string(localData_) + "/" + std::to_string(cfg_.dataWr) + " ack " +
         std::to_string(localAck_) + "/" + std::to_string(cfg_.ackWr) + ", remote data " +
         std::to_string(remoteData_) + " ack " + std::to_string(remoteAck_) + ", unacked data " +
         std::to_string(unackedData_) + " acks " + std::to_string(unackedAcks_) + ", queued " +
         std::to_string(queue_.size());
}

}  // namespace hcasim::verbs
