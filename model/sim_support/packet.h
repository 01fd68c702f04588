// SPDX-License-Identifier: Apache-2.0
/**
 * @file packet.h
 * @brief A frame on the wire: real RoCEv2 bytes in a pooled buffer.
 *
 * Payload bytes are copied once into the frame by the sender's DMA read and once out of it
 * by the receiver's DMA write; frames are recycled, never allocated per packet in steady state.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "roce_packet.h"

namespace hcasim::model {

struct Packet {
  uint32_t len = 0;
  uint64_t id = 0;  ///< world-unique, for tracing
  /**
   * True from the moment an HCA built the frame (ICRC included) until anything alters it
   * (wire corruption clears it). A receiver re-verifies the ICRC only of frames that are not
   * pristine: recomputing a CRC over bytes nobody changed cannot fail, and it is the single
   * most expensive step of a simulated packet.
   */
  bool pristine = true;
  /**
   * Set on the last frame of an unreliable (UC/UD) message: the sending port reports it when
   * its last bit has left, which is when that message completes (nothing will acknowledge it).
   * Cleared once reported, so a switch or wire passing the frame on never reports it again.
   */
  bool report_sent = false;
  uint32_t report_qpn = 0;  ///< with report_sent: the sending QP
  uint32_t report_psn = 0;  ///< with report_sent: the message's last PSN
  /** Who still needs the bytes: the PacketPtr that owns the frame, and each posted DMA write
   *  that lands from it (hold_packet()). The last to let go returns it to the pool. */
  uint32_t users = 0;
  uint8_t data[wire::max_frame_length(4096)];
};

/** @brief The owner lets go of a frame: back to the pool unless a hold remains (the simulation
 *  runs under one lock, so no atomics). */
struct PacketRecycler {
  void operator()(Packet* p) const;
};
using PacketPtr = std::unique_ptr<Packet, PacketRecycler>;

/** @brief A fresh (or recycled) frame with a new id. */
PacketPtr make_packet();

/** @brief Keeps @p p's bytes as they are past its owner's release (a posted DMA write that lands
 *  its payload straight from the frame); each hold ends with one release_packet_hold(). */
void hold_packet(Packet* p);
/** @brief Ends one hold_packet(); the last user to let go returns the frame to the pool. */
void release_packet_hold(Packet* p);

/** @brief Anything a frame can be handed to: a port's receive side, a wire, a switch port. */
class PacketReceiver {
 public:
  virtual ~PacketReceiver() = default;
  virtual void receive(PacketPtr pkt) = 0;
};

}  // namespace hcasim::model
