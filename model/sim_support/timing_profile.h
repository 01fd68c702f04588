// SPDX-License-Identifier: Apache-2.0
/** @file timing_profile.h @brief Named latency/bandwidth profiles for the modelled hardware. */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hcasim::model {

/** @brief Every latency and rate the model uses, in picoseconds and bits per second. */
struct TimingProfile {
  std::string name;
  double link_bps;          ///< Ethernet line rate
  uint64_t propagation_ps;  ///< port to port beyond serialisation: the cable and both PHYs (PCS, FEC)
  uint64_t mmio_write_ps;   ///< CPU store to UAR until the doorbell unit sees it
  uint64_t pcie_read_ps;    ///< DMA read round trip (request to completion)
  uint64_t pcie_write_ps;   ///< posted DMA write (payload, CQE, EQE) until software sees it
  double pcie_bps;          ///< DMA payload bandwidth
  uint64_t qpc_hit_ps;      ///< QPC cache hit
  uint64_t qpc_miss_ps;     ///< QPC fetch from ICM on a cache miss
  uint64_t wqe_decode_ps;   ///< send pipeline: decode fetched WQEs, build the first headers
  uint64_t pkt_process_ps;  ///< receive pipeline per packet, before it is acted on
  uint64_t irq_ps;          ///< MSI-X message to interrupt handler
  /**
   * @brief A firmware command (create, modify, query or destroy a context), from the mailbox
   * doorbell to its completion. Charged only in the hardware-like clock (`--clock realtime`):
   * the lockstep clock keeps commands free so that traces stay as they were.
   */
  uint64_t command_ps;
  uint32_t qpc_cache_entries;  ///< QPC cache capacity
  uint32_t default_mtu;        ///< active MTU of the port
  const char* purpose;         ///< what the profile is for, in a sentence

  /** @brief Serialisation time of @p bytes on the link (with Ethernet preamble+IFG+FCS overhead). */
  uint64_t wire_ps(uint32_t bytes) const { return uint64_t(double(bytes + 24) * 8.0 * 1e12 / link_bps); }
  /** @brief Time to move @p bytes over PCIe at the profile's bandwidth (latency not included). */
  uint64_t pcie_xfer_ps(uint64_t bytes) const { return uint64_t(double(bytes) * 8.0 * 1e12 / pcie_bps); }
};

/** @brief Look up a profile by name; nullptr if unknown. */
const TimingProfile* find_profile(const std::string& name);
/** @brief Names of all profiles (for --help and error messages). */
std::vector<std::string> profile_names();
/** @brief The default profile: a 100 Gb/s RoCE NIC on PCIe Gen3 x16, calibrated (docs/calibration.md). */
const TimingProfile& default_profile();
/** @brief A few lines describing @p p for people: its purpose and every figure, with units. */
std::string describe_profile(const TimingProfile& p);

}  // namespace hcasim::model
