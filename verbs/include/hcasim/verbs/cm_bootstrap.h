// SPDX-License-Identifier: Apache-2.0
/**
 * @file cm_bootstrap.h
 * @brief Connecting a Context through the RDMA connection manager (librdmacm) instead of a
 *        rendezvous Store: what names the group (CmBootstrap) and what its connection
 *        requests carry (CmHello), as pure logic.
 *
 * Rule: rank i listens on addresses[i], port basePort + i (rdma_cm's TCP port space), accepts
 * one connection from every higher rank and connects to every lower one. Ports differ per rank
 * so that several ranks can share one IP address (processes on one rxe device).
 *
 * Each connection is made in "QP not attached to the id" mode: the Pair creates its QP from
 * the Device as with a Store, the connection request passes its number in
 * rdma_conn_param.qp_num, and the QP is moved to RTR and RTS with rdma_init_qp_attr(3)'s
 * attributes. Nothing else crosses: a Pair needs only QPN, PSN, path and MTU from its peer,
 * and buffer keys travel later as grants on the connected QP.
 *
 * Private data of the connection request (REQ) and the accept (REP), 24 bytes, big-endian,
 * well inside the REQ's 56 bytes:
 *
 * | offset | size | field    | rule                                                   |
 * |-------:|-----:|----------|--------------------------------------------------------|
 * |  0     |  2   | magic    | 'H' 'C'                                                |
 * |  2     |  1   | version  | 1                                                      |
 * |  3     |  1   | kind     | 1 request (REQ), 2 accept (REP)                        |
 * |  4     |  4   | size     | the sender's group size                                |
 * |  8     |  4   | rank     | the sender's rank                                      |
 * | 12     |  4   | peer     | the rank the sender means to reach                     |
 * | 16     |  4   | group    | FNV-1a of ContextOptions::prefix: which group          |
 * | 20     |  2   | reserved | 0                                                      |
 * | 22     |  2   | checksum | Fletcher-16 over bytes 0..21 (Address::checksum)       |
 *
 * A side that refuses a request or an accept answers with a reject (REJ) whose private data
 * is 'H' 'C', version 1, kind 3, then "field" NUL "reason" (at most 148 bytes in all), so the
 * other side throws the same AddressError, naming the same field.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hcasim::verbs {

/**
 * @brief Every rank's IPv4 address and the base port: enough for every rank to connect the
 * full mesh with rdma_cm (Context::connectFullMesh(const CmBootstrap&)).
 */
struct CmBootstrap {
  static constexpr uint16_t kDefaultBasePort = 18600;

  std::vector<std::string> addresses;    ///< rank i's IPv4 address (dotted quad), one per rank
  uint16_t basePort = kDefaultBasePort;  ///< rank i listens on basePort + i

  /**
   * @brief "ADDR[,ADDR...]": one dotted IPv4 address per rank, in rank order. Throws
   * AddressError (field "addresses") on an empty list or a malformed address.
   */
  static CmBootstrap parse(const std::string& list, uint16_t basePort = kDefaultBasePort);
  /**
   * @brief Checks the addresses against a group of @p size and the port range: AddressError
   * naming "addresses" (wrong count, not IPv4) or "basePort" (0, or basePort + size - 1 past
   * 65535).
   */
  void validate(int size) const;
  /** @brief The port rank @p rank listens on. */
  uint16_t port(int rank) const { return uint16_t(basePort + rank); }
  /** @brief "192.0.2.1:18600", for errors. */
  std::string endpoint(int rank) const;
};

/** @brief What a connection request or accept says about its sender (see the file comment). */
struct CmHello {
  static constexpr size_t kSize = 24;
  static constexpr uint8_t kVersion = 1;
  enum Kind : uint8_t { kRequest = 1, kAccept = 2, kReject = 3 };

  Kind kind = kRequest;
  uint32_t size = 0;   ///< the sender's group size
  uint32_t rank = 0;   ///< the sender's rank
  uint32_t peer = 0;   ///< the rank it means to reach
  uint32_t group = 0;  ///< groupTag(prefix)

  /** @brief The 24-byte encoding. */
  std::vector<uint8_t> bytes() const;
  /**
   * @brief Decodes @p len bytes (a CM pads private data with zeros: trailing bytes are
   * ignored). Throws AddressError naming the first bad field: "length", "magic", "version",
   * "kind", "reserved", "checksum".
   */
  static CmHello fromBytes(const void* data, size_t len);
  /**
   * @brief Checks a decoded hello of kind @p want, received by rank @p self of a group of
   * @p size and tag @p group, against the connection rule: AddressError naming "kind",
   * "size", "group", "peer" (not addressed to @p self) or "rank" (out of range, or on the
   * wrong side of the rule: a request must come from a higher rank, an accept from a lower
   * one). @p from says where it came from, for the message.
   */
  void check(Kind want, int self, int size, uint32_t group, const std::string& from) const;

  /** @brief FNV-1a of @p prefix: tells two groups on the same addresses apart. */
  static uint32_t groupTag(const std::string& prefix);

  /** @brief A reject's private data: header, @p field, NUL, @p reason, cut to @p max bytes. */
  static std::vector<uint8_t> rejectBytes(const std::string& field, const std::string& reason,
                                          size_t max = 148);
  /**
   * @brief A reject's field and reason, if @p data is one of ours (magic, version, kind 3);
   * false for anything else (e.g. the CM's own REJ for a port nobody listens on).
   */
  static bool parseReject(const void* data, size_t len, std::string& field, std::string& reason);
};

}  // namespace hcasim::verbs
