// SPDX-License-Identifier: Apache-2.0
/**
 * @file device.h
 * @brief One opened RDMA device: context, port, GID, one protection domain, one completion
 *        channel and the loop thread that serves it (or busy polling).
 *
 * Event mode (default): every Pair's CQ is attached to the device's one completion channel.
 * The loop thread poll(2)s the channel's fd (non-blocking), takes events with
 * ibv_get_cq_event, re-arms the CQ (solicited-only when nothing local is waiting, see
 * Pair), drains it, and acknowledges events in batches with ibv_ack_cq_events.
 *
 * Busy-poll mode: no channel and no thread; a thread that waits polls every pair of the
 * device itself (so acks and grants keep flowing while it waits on one pair).
 */
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hcasim::verbs {

class Pair;

enum class PollMode { Event, BusyPoll };

struct DeviceAttr {
  std::string name;   ///< device name; empty: the first device whose port is active
  uint8_t port = 1;   ///< physical port, 1-based
  int gidIndex = -1;  ///< -1: the IPv4-mapped RoCEv2 GID on Ethernet, 0 on InfiniBand
  PollMode mode = PollMode::Event;
  /**
   * @brief Busy-poll mode: rounds of polling (with sched_yield) a wait makes without finding
   * anything before it starts napping (20..200 us). -1: never nap (dedicated cores).
   * A waiting thread polls its own pair each round, the others when they have work held up,
   * and every pair every 10 ms (Device::progressFor).
   */
  int busyPollSpins = 200;
};

/** @brief A device as the verbs library found it. */
struct DeviceInfo {
  std::string name;
  bool portActive = false;
  bool ethernet = false;
};

class Device : public std::enable_shared_from_this<Device> {
 public:
  /** @brief Opens a device; throws IoError naming what failed. */
  static std::shared_ptr<Device> open(const DeviceAttr& attr = DeviceAttr());
  /** @brief Every device ibv_get_device_list() returns, with its first port's state. */
  static std::vector<DeviceInfo> list();
  /**
   * @brief The GID index to use on this port when none is given: on Ethernet the first
   * RoCEv2 GID holding an IPv4-mapped address (then any IPv4-mapped, then any RoCEv2
   * non-link-local, then 0); on InfiniBand 0.
   */
  static int defaultGidIndex(ibv_context* ctx, uint8_t port, const ibv_port_attr& pa);

  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  int gidIndex() const { return gidIndex_; }
  const ibv_gid& gid() const { return gid_; }
  uint16_t lid() const { return portAttr_.lid; }
  bool ethernet() const { return portAttr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  ibv_mtu activeMtu() const { return portAttr_.active_mtu; }
  const ibv_device_attr& attr() const { return devAttr_; }
  PollMode mode() const { return mode_; }
  int busyPollSpins() const { return busyPollSpins_; }
  /** @brief "hcasim0 port 1 (Ethernet) gid[1] ::ffff:192.0.2.1 mtu 4096, event mode". */
  std::string describe() const;

  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  ibv_comp_channel* channel() const { return channel_; }

  /** @brief Busy-poll mode: polls every pair once. Returns completions handled. */
  int progressAll();
  /**
   * @brief Busy-poll mode, for a thread waiting on @p self: polls @p self, then the other pairs
   * that have local work held up (items waiting for credits or a grant, an ack due), or every
   * pair if @p sweep. Returns completions handled.
   *
   * Why not every pair every round: an empty ibv_poll_cq costs ~100 ns on an HCA, but on the
   * simulator's fabric it is a wait that returns when something new reaches the host or after
   * 100 us of wall time, so polling k idle CQs in turn could add k * 100 us after the awaited
   * data had landed. What other pairs need for the group's progress is covered by the pairs
   * with held-up work and the sweep.
   */
  int progressFor(Pair* self, bool sweep);
  /** @brief A liveness probe on every pair (Pair::probe, PairOptions::probeInterval). */
  void probeAll();

  /** @brief Loop-thread statistics. */
  uint64_t eventsHandled() const { return events_.load(); }
  uint64_t loopWakeups() const { return wakeups_.load(); }

 private:
  friend class Pair;
  Device() = default;
  void attach(Pair* p);
  void detach(Pair* p);  // also serialises with the loop thread
  void loop();

  std::string name_;
  uint8_t port_ = 1;
  int gidIndex_ = 0;
  ibv_gid gid_{};
  ibv_port_attr portAttr_{};
  ibv_device_attr devAttr_{};
  PollMode mode_ = PollMode::Event;
  int busyPollSpins_ = 200;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;

  std::recursive_mutex pairsMu_;  ///< guards pairs_; held while an event is dispatched
  /// Serialises ibv_get_cq_event with ibv_req_notify_cq: providers keep the CQ's arm sequence
  /// number in plain memory that both touch (mlx5: cq->arm_sn). Always the innermost lock.
  std::mutex armMu_;
  std::vector<Pair*> pairs_;
  std::thread loop_;
  int wakeFd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> events_{0}, wakeups_{0};
};

}  // namespace hcasim::verbs
