/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file sim_control.h
 * @brief The simulator's own interface, exported by the drop-in libibverbs.so.1 under the
 *        HCASIM_SIM_0.1 version node.
 *
 * Conformance tests look these up with dlsym(RTLD_DEFAULT, ...): on real hardware or rxe they
 * are absent and simulator-only checks (fault hooks, counters) are skipped.
 */
#ifndef HCASIM_SIM_CONTROL_H
#define HCASIM_SIM_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief 1: the ibverbs devices are simulated. */
int hcasim_sim_present(void);
/** @brief Current simulated time in nanoseconds. */
uint64_t hcasim_sim_now_ns(void);
/**
 * @brief Drop the next @p count frames that device @p device_name receives for destination
 * QP @p qpn (0xffffffff: any) with PSN @p psn (0xffffffff: any). Returns 0, or -1 if no such device.
 */
int hcasim_sim_drop_rx(const char* device_name, uint32_t qpn, uint32_t psn, uint32_t count);
/**
 * @brief Counter @p name ("tx_packets", "rnr_naks", ...; see docs/) of device @p device_name.
 * Returns 0 and sets @p value, or -1 for an unknown device or counter.
 */
int hcasim_sim_counter(const char* device_name, const char* name, uint64_t* value);
/** @brief Write every device's counters as JSON into @p buf; returns the length needed. */
size_t hcasim_sim_stats_json(char* buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
