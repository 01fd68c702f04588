// SPDX-License-Identifier: Apache-2.0
/**
 * @file hca_core.h
 * @brief The units of one HCA that the requester, responder, doorbell and command units work
 *        with (each in its own file, each given the units it uses explicitly), and the frame
 *        builder that addresses a QP's packets.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cq_unit.h"
#include "eth_port.h"
#include "mr_table.h"
#include "qpc_cache.h"
#include "srq_table.h"
#include "wqe_fetch.h"

namespace hcasim::model {

/** @brief Who an HCA is on the network. */
struct HcaIdentity {
  std::string name;        ///< ibverbs device name, e.g. "hcasim0"
  uint32_t index = 0;      ///< host index in the world (trace column)
  uint64_t node_guid = 0;  ///< host order
  uint8_t mac[6] = {};
  uint32_t ipv4 = 0;        ///< host order
  uint8_t gid[2][16] = {};  ///< [0] IPv6 link-local from the MAC, [1] IPv4-mapped (as rxe shows them)
};

/** @brief Fill an identity's GIDs from its MAC and IPv4 address (hw::port_gid). */
void derive_gids(HcaIdentity& id);

/** @brief Addresses a QP's packets from its QPC path and this port's identity, and sends them. */
class FrameBuilder {
 public:
  using Resolver = std::function<bool(const uint8_t gid[16], uint8_t mac[6])>;

  FrameBuilder(const HcaIdentity& id, EthPort& port, Tracer& tracer)
      : id_(id), port_(port), tracer_(tracer) {}

  /** @brief GID -> next-hop MAC (the world's neighbour table); unset or false: unreachable. */
  void set_resolver(Resolver r) { resolve_ = std::move(r); }
  /** @brief The next-hop MAC of @p gid; false if nothing on the network owns it. */
  bool resolve(const uint8_t gid[16], uint8_t mac[6]) const { return resolve_ && resolve_(gid, mac); }
  /**
   * @brief Headers of a packet on @p qp's connection (addresses from the QPC's path); @p op is
   * given as its RC opcode and goes out in the QP's transport (an ACK of an XRC QP is XRC's).
   */
  bool headers_for(const QpContext& qp, wire::BthOpcode op, uint32_t psn, wire::Headers& h) const;
  /** @brief Headers of a UD packet from @p qp to the address @p av (a send WQE's datagram segment). */
  bool datagram_headers(const QpContext& qp, const hw::DatagramAddr& av, wire::BthOpcode op, uint32_t psn,
                        wire::Headers& h) const;
  /** @brief Headers of a MAD from this port's QP1 to the QP1 at the end of @p path (a UD
   *  SEND_ONLY with the GSI Q_Key); false if nothing on the network owns its GID. */
  bool gsi_headers(const hw::PathDesc& path, wire::Headers& h) const;
  /** @brief Build a frame and queue it on the port at @p ready_ps. */
  void send_frame(const wire::Headers& h, const void* payload, uint32_t len, uint64_t ready_ps);

 private:
  /** @brief L2/L3/L4 fields and the BTH's addressing for a packet from @p src_qpn to @p dst_qpn. */
  bool address(const hw::PathDesc& path, uint32_t src_qpn, uint32_t dst_qpn, wire::Headers& h) const;

  const HcaIdentity& id_;
  EthPort& port_;
  Tracer& tracer_;
  Resolver resolve_;
};

/**
 * @brief Ready time for the next frame of one stream (a QP's requests, or its responses):
 * never earlier than the stream's previous frame. The port sends frames in ready-time order,
 * so this keeps each stream in PSN order (IBTA 9.5: requests, and responses, in PSN order)
 * even when a later frame is quicker to build (an ACK after a READ response, a short WQE
 * after a long one). The state lives in the QP context, so it dies with the QP.
 */
inline uint64_t stream_ready(QpContext& qp, bool responses, uint64_t ready_ps) {
  uint64_t& last = responses ? qp.resp_tx_last : qp.req_tx_last;
  if (ready_ps < last) ready_ps = last;
  last = ready_ps;
  return ready_ps;
}
/** @brief The BTH transport a QP's packets use. */
inline wire::Transport qp_transport(const QpContext& qp) {
  switch (hw::QpType(qp.qpc.type)) {
    case hw::QpType::Uc: return wire::Transport::UC;
    case hw::QpType::Gsi:
    case hw::QpType::Ud: return wire::Transport::UD;
    case hw::QpType::XrcSend:
    case hw::QpType::XrcRecv: return wire::Transport::XRC;
    default: return wire::Transport::RC;
  }
}
/** @brief Path MTU of a QP in bytes. */
inline uint32_t mtu_of(const QpContext& qp) { return 1u << qp.qpc.path_mtu_log; }

/** @brief What the RC transport (requester, responder) works with, wired by the Hca. */
struct TransportUnits {
  const TimingProfile& prof;
  Tracer& tracer;
  QpcCache& qpc;
  SrqTable& srqs;
  WqeFetchUnit& fetch;
  MrTable& mrs;
  CqUnit& cq;
  EqUnit& eq;
  EthPort& port;
  FrameBuilder& frames;
};

/** @brief Moves a QP to the error state and flushes its queues (the Hca's, given to the units). */
using QpErrorHandler = std::function<void(QpContext&, const char* why)>;

/** @brief The shared units of one HCA, in dependency order (each built from those above it). */
struct HcaCore {
  HcaCore(const TimingProfile& p, Tracer& t, const HcaIdentity& ident);

  const TimingProfile& prof;
  Tracer& tracer;
  HcaIdentity id;
  Iommu iommu;
  DmaEngine dma;
  BufferTableWalker bt;
  QpcCache qpc;
  SrqTable srqs;
  WqeFetchUnit fetch;
  MrTable mrs;
  EqUnit eq;
  CqUnit cq;
  EthPort port;
  FrameBuilder frames;

  /** @brief The units the requester and responder use. */
  TransportUnits transport() {
    return TransportUnits{prof, tracer, qpc, srqs, fetch, mrs, cq, eq, port, frames};
  }
};

}  // namespace hcasim::model
