// SPDX-License-Identifier: Apache-2.0
/**
 * @file request.h
 * @brief What the device accepts from a client (protocol.h): one received message checked
 *        and decoded before any handler sees it, without a socket or an HCA.
 *
 * A client process is not trusted: a bug, a stray write or a program speaking the protocol by
 * hand can send anything. Every message is checked here for what the protocol allows at that
 * point of the connection: a known type, exactly its payload's size, the right moment (HELLO
 * or ATTACH first, once; host requests after), an HCA index the host owns, a UAR offset inside
 * the HCA's UAR page, an SQ doorbell naming one of that HCA's QPs (QPNs carry their HCA's
 * index, CommandUnit::qpn_base), an IOMMU range that does not wrap around. A message that
 * fails gets a reason in plain words; the device logs it and disconnects the connection. The
 * fuzz harness tests/fuzz/fabric_protocol_fuzz.cpp feeds arbitrary bytes through this check.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol.h"

namespace hcasim::fabric {

/** @brief What a connection may do: what it has become so far. */
struct ConnState {
  int host = -1;           ///< the host it belongs to after HELLO/ATTACH; -1 before
  bool life = false;       ///< the host's HELLO connection (LEAVING comes on it)
  uint32_t n_hcas = 1;     ///< HCAs per host
  uint32_t first_hca = 0;  ///< world index of the host's first HCA (its HCA i is first_hca + i)
};

/** @brief Most bytes of text a TRACE message may carry after its fixed part. */
constexpr size_t kMaxTraceText = 64 * 1024;

/** @brief One accepted message: its type and its payload's fixed part, decoded. */
struct Request {
  MsgType type{};              ///< the message's type; which one field below holds its payload
  HelloMsg hello{};            ///< HELLO
  AttachMsg attach{};          ///< ATTACH
  CommandMsg command{};        ///< COMMAND
  DoorbellMsg doorbell{};      ///< DOORBELL, DOORBELL_SYNC, DOORBELL_IRQS
  MapMsg map{};                ///< MAP, UNMAP
  TraceMsg trace{};            ///< TRACE: the fixed part
  ControlMsg control{};        ///< CONTROL
  WaitMsg wait{};              ///< WAIT
  const char* text = nullptr;  ///< TRACE: the line's text (not NUL-terminated)
  size_t text_len = 0;         ///< TRACE: its length
  /** @brief The HCA index (on the host) the request names; 0 for types that name none. */
  uint32_t hca() const;
};

/** @brief The protocol's name of @p type ("DOORBELL"), or "unknown type N" for others. */
std::string type_name(MsgType type);

/**
 * @brief Check one message (header @p h, payload @p p of h.len bytes, @p nfds descriptors
 * passed with it) from a connection in state @p c, and decode it into @p out.
 * @return an empty string if the device accepts it; otherwise the reason, in plain words
 *         naming the message and the field (the device logs it and disconnects).
 */
std::string check_request(const MsgHeader& h, const uint8_t* p, uint32_t nfds, const ConnState& c,
                          Request& out);

}  // namespace hcasim::fabric
