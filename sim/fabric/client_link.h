// SPDX-License-Identifier: Apache-2.0
/**
 * @file client_link.h
 * @brief The client side of the cross-process fabric, in the drop-in libibverbs: when
 *        HCASIM_FABRIC names a fabric socket, this process becomes one host on it and its
 *        HCAs are HcaLinks that talk to the device process (protocol.h).
 *
 * HCASIM_HOST=i asks for host slot i (hcasim run sets it per command); otherwise the first
 * free slot is taken. Each thread that reaches the device gets its own connection, so a
 * thread waiting in verbs never holds up another's doorbell. An interrupt thread runs the
 * EQ handler when the device raises the host's interrupt eventfd.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hca_link.h"
#include "protocol.h"

namespace hcasim::fabric {

/** @brief True when HCASIM_FABRIC is set: this process's HCAs live in a device process. */
bool fabric_mode();
/** @brief Join the fabric (once); its HCAs as links. Empty (message on stderr) on failure. */
std::vector<drv::HcaLink*> fabric_links();
/**
 * @brief Forward a simulator control call (sim_control.h) to the device process. Returns
 * false if the fabric cannot be reached; else @p r (and @p text for StatsJson) hold the answer.
 */
bool fabric_control(const ControlMsg& m, ControlReply& r, std::string* text);

}  // namespace hcasim::fabric
