// SPDX-License-Identifier: Apache-2.0
/**
 * @file host_visible.h
 * @brief What software can observe of the device (host-memory writes, interrupts), counted so
 *        the simulation engine can run the kernel exactly until a waiting program has news.
 *
 * Simulation plumbing, not hardware: the DMA engine and the interrupt line report through it.
 */
#pragma once

#include <atomic>
#include <cstdint>

namespace hcasim::model {

/**
 * @brief Counter of device writes to host memory and interrupts: what software can observe.
 * The engine advances the simulation until this changes when a program waits.
 */
std::atomic<uint64_t>& host_visible_epoch();
/**
 * @brief The effects of host_visible_epoch() that software may be looking for right now: all of
 * them in one process; on a fabric, not a write into a process whose program threads are all
 * asleep (sim/fabric/device_server.h), which the device may gather with what follows.
 */
uint64_t watched_visible_epoch();
/**
 * @brief Record a software-visible effect (host-memory write, interrupt); @p watched: whether
 * software may be looking for it now (watched_visible_epoch()). While a waiter has asked for
 * it (pause_on_visible), it also pauses the kernel at the end of the current delta cycle, so
 * the wait is a single sc_start() however many timesteps it spans; the engine decides whether
 * an unwatched one ends the wait.
 */
void note_host_visible(bool watched = true);
/** @brief Make note_host_visible() call sc_pause() (set by the engine around a wait). */
void pause_on_visible(bool on);

}  // namespace hcasim::model
