// SPDX-License-Identifier: Apache-2.0
/**
 * @file fault_spec.h
 * @brief Random faults on the wire, `hcasim run --faults SPEC` (HCASIM_FAULTS): frames lost,
 *        duplicated, reordered, corrupted or delayed with a given probability, from a PRNG
 *        seeded by `--seed`, so the same program and seed see the same faults.
 *
 * SPEC is a comma-separated list of clauses; each clause is one fault, optionally scoped:
 *
 *     SPEC   := CLAUSE { ',' CLAUSE }
 *     CLAUSE := FAULT { '@' SCOPE } | LINK | DROP
 *     FAULT  := loss=P | duplicate=P | reorder=P | corrupt=P | delay=T[..T]
 *     SCOPE  := host=H | dir=tx|rx | qpn=Q | op=send|write|read|atomic|ack
 *     LINK   := link-down=H@T1[..T2]
 *     DROP   := drop=psn:P '@' host=H [ '@' qpn=Q ] [ '@' count=N ]
 *
 * P is a probability from 0 to 1 (`0.01`, `1e-3`); T a time with its unit (`500ns`, `2us`,
 * `1.5ms`; at most 100 ms). A scope right after a scoped clause may also follow a comma
 * (`loss=0.05@qpn=0x11,dir=tx` is `loss=0.05@qpn=0x11@dir=tx`). Every frame a host transmits is
 * judged once by every clause whose scope matches it: `host=H` alone matches the frames H sends
 * or receives, with `dir=tx` only those it sends, with `dir=rx` only those it receives.
 *
 * `link-down=H@T1..T2` is scripted, not random: host H's link goes down at simulated time T1
 * (from the start of the simulation) and comes back at T2 (`@T1` alone: down for good). T1 and
 * T2 take ns, us, ms or s, up to an hour; several link-down clauses may name the same host if
 * their windows do not overlap.
 *
 * `drop=psn:P@host=H` is scripted too: host H loses the next frame it receives with PSN P
 * (`@qpn=Q`: only to that QP; `@count=N`: the next N such frames), exactly as `--drop
 * 'host=H;psn=P'` does.
 *
 * No SystemC: the hcasim command links it to check SPEC before it starts anything.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "drop_rule.h"

namespace hcasim::sim {

/** @brief What a clause does to a frame. */
enum class FaultKind : uint8_t {
  Loss,       ///< the frame is lost
  Duplicate,  ///< the frame arrives twice
  Reorder,    ///< the frame is held back until the next one has gone ahead of it
  Corrupt,    ///< one byte of the frame is flipped: the receiver's ICRC check fails
  Delay,      ///< the frame arrives later by a random time in [delay_min_ps, delay_max_ps]
};

/** @brief The clause's keyword ("loss", "duplicate", ...). */
const char* fault_kind_name(FaultKind k);

/** @brief The opcode families a scope can name (`op=`). */
enum class FaultOp : uint8_t {
  Any,
  Send,    ///< SEND requests (with or without immediate / invalidate)
  Write,   ///< RDMA WRITE requests
  Read,    ///< RDMA READ requests and READ responses
  Atomic,  ///< atomic requests and ATOMIC ACKNOWLEDGE
  Ack,     ///< ACKNOWLEDGE (ACKs, NAKs, RNR NAKs)
};

/** @brief Which frames of the scope's host a clause judges (`dir=`). */
enum class FaultDir : uint8_t { Both, Tx, Rx };

/** @brief One clause: a fault, its probability (or delay range) and its scope. */
struct FaultClause {
  static constexpr uint32_t kAny = 0xffffffffu;
  FaultKind kind = FaultKind::Loss;
  double probability = 0;     ///< of the fault, per matching frame (delay: 1)
  uint64_t delay_min_ps = 0;  ///< delay only
  uint64_t delay_max_ps = 0;  ///< delay only
  uint32_t host = kAny;       ///< host index, or any
  FaultDir dir = FaultDir::Both;
  uint32_t qpn = kAny;  ///< BTH destination QP, or any
  FaultOp op = FaultOp::Any;
};

/** @brief One `link-down=H@T1..T2` clause: when host H's link is down. */
struct LinkDownClause {
  static constexpr uint64_t kForever = ~0ull;  ///< up_ps of a link that never comes back
  uint32_t host = 0;                           ///< host index
  uint64_t down_ps = 0;                        ///< T1: the link goes down (simulated time)
  uint64_t up_ps = kForever;                   ///< T2: it comes back (> down_ps)
};

/** @brief A parsed SPEC: its clauses in the order written. */
struct FaultSpec {
  std::vector<FaultClause> clauses;
  std::vector<LinkDownClause> link_downs;  ///< the scripted link faults, in the order written
  std::vector<DropRule> drops;             ///< the scripted drops (drop=psn:P\@host=H), in order

  /**
   * @brief Parse SPEC (grammar above; host: a name from @p host_names or an index; numbers
   * decimal or 0x hex). The empty string is an empty spec (no faults). False with @p err
   * naming the bad clause and what is valid there.
   */
  bool parse(const std::string& spec, std::string& err, const std::vector<std::string>& host_names = {});
  /** @brief No clause: the wire is perfect. */
  bool empty() const { return clauses.empty() && link_downs.empty() && drops.empty(); }

 private:
  /** @brief One clause's @p text (of @p spec) into clauses or link_downs; false with @p err. */
  bool parse_text(const std::string& text, const std::string& spec, std::string& err,
                  const std::vector<std::string>& host_names);
};

}  // namespace hcasim::sim
