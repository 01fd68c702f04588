// SPDX-License-Identifier: Apache-2.0
/**
 * @file fault_injector.h
 * @brief Random faults on the wire (`--faults`, fault_spec.h): one FaultyWire sits between each
 *        host's port and the wire (cable or switch port) it transmits into, and judges every
 *        frame the host sends against the spec's clauses. A lost frame goes nowhere; a duplicated
 *        one goes twice; a reordered one waits until the next frame has gone ahead of it (at most
 *        kReorderHoldPs); a corrupted one has one byte flipped after its sender computed the ICRC
 *        (the receiver's check fails and drops it, counted in icrc_errors); a delayed one arrives later.
 *
 * Each port draws from its own PRNG, seeded from `--seed` and the host index, so the same
 * program and seed meet the same faults (in lockstep, a byte-identical trace). Every fault is
 * traced (unit wire, kind fault, on the sending host) and counted in the sender's
 * InjectedFaults (hca.h: `injected_*` in --stats). Frames looped back inside an HCA never
 * reach a wire and meet no faults. While the sender's or the receiver's link is down
 * (link_schedule.h) a frame is lost before any clause judges it, counted in link_down_losses.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "eth_port.h"
#include "fault_spec.h"
#include "hca.h"
#include "link_schedule.h"

namespace hcasim::sim {

/** @brief A small, fast, seedable PRNG (SplitMix64): the faults' dice. */
class FaultDice {
 public:
  explicit FaultDice(uint64_t seed) : s_(seed) {}
  /** @brief The next 64 random bits. */
  uint64_t next();
  /** @brief Uniform in [0, 1). */
  double unit() { return double(next() >> 11) * 0x1.0p-53; }
  /** @brief Uniform in [@p lo, @p hi]. */
  uint64_t between(uint64_t lo, uint64_t hi) { return hi <= lo ? lo : lo + next() % (hi - lo + 1); }

 private:
  uint64_t s_;
};

/** @brief Host @p host's frames on the wire, judged against a fault spec. */
class FaultyWire : public model::WireSide {
 public:
  /** @brief How long a reordered frame waits for a later one to overtake it (then it goes anyway). */
  static constexpr uint64_t kReorderHoldPs = 5'000'000;  // 5 us
  /** @brief Which host a frame goes to, by destination MAC (FaultClause::kAny if none). */
  using HostOfMac = std::function<uint32_t(const uint8_t* mac)>;

  /**
   * @param spec the clauses (kept by reference: it outlives the wire)
   * @param host the index of the transmitting host
   * @param hca that host's HCA: its tracer and InjectedFaults counters
   * @param next the wire the frames go on to
   * @param host_of the receiving host of a frame
   * @param seed the run's --seed
   * @param links whose links are down now (nullptr: no link-down clause); it outlives the wire
   */
  FaultyWire(const FaultSpec& spec, uint32_t host, model::Hca& hca, model::WireSide* next, HostOfMac host_of,
             uint64_t seed, const LinkSchedule* links = nullptr);
  void carry(model::PacketPtr pkt, uint64_t tx_end_ps) override;
  /** @brief What is told of each fault: the frame as sent and the fault in words ("lost", ...). */
  using Observer = std::function<void(const model::Packet& p, const std::string& what)>;
  /** @brief Tell @p o of every fault from now on (the capture's side file: pcap_fault_notes.h). */
  void set_observer(Observer o) { observer_ = std::move(o); }

 private:
  /** @brief What the clauses decided for one frame. */
  struct Verdict {
    bool lose = false, corrupt = false, duplicate = false, reorder = false;
    uint64_t delay_ps = 0;
  };
  Verdict judge(const model::Packet& p, uint32_t to);
  /** @brief Lose @p p if its sender's link or the link of @p to, its receiver, is down (traced, counted). */
  bool lost_to_link_down(const model::Packet& p, uint32_t to);
  bool in_scope(const FaultClause& c, uint32_t to, const wire::ParsedFrame* f) const;
  /** @brief Flip one byte of @p p the ICRC covers (and trace it, naming the byte). */
  void corrupt(model::Packet& p);
  /** @brief Trace one fault (unit wire, kind fault) on the sending host. */
  void note(const model::Packet& p, const char* what, uint64_t extra_ps = 0);
  /** @brief Send the held-back frame on, now (its hold ran out) or behind a later one. */
  void release_held(uint64_t tx_end_ps);

  const FaultSpec& spec_;
  uint32_t host_;
  model::Hca& hca_;
  model::WireSide* next_;
  HostOfMac host_of_;
  const LinkSchedule* links_;
  FaultDice dice_;
  bool needs_headers_ = false;  ///< some clause is scoped by QPN or opcode
  model::PacketPtr held_;       ///< a reordered frame waiting for the next one
  uint64_t held_at_ = 0;        ///< when it would have left the port had it not been held
  uint64_t held_gen_ = 0;       ///< which hold the timer's entries are for
  model::TimedQueue<uint64_t> hold_timer_;
  Observer observer_;
};

}  // namespace hcasim::sim
