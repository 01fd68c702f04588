// SPDX-License-Identifier: Apache-2.0
/**
 * @file dma_arena.h
 * @brief Memory a client process shares with the device process for what its driver gives the
 *        device (queue rings, buffer tables, doorbell records).
 *
 * On a real host the driver allocates such memory DMA-coherent and the HCA reads it without the
 * CPU's help. Across processes the device otherwise reaches client memory with one
 * process_vm_readv/writev per access (a system call that pins the pages every time): a WQE
 * fetch, a buffer-table walk, a CQE write each cost one. The client instead allocates these
 * from a memfd it passes at HELLO, which the device maps too; accesses inside it are memory
 * copies. Memory regions the program registers (ibv_reg_mr) stay the program's own memory and
 * are still reached by address.
 */
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace hcasim::fabric {

/**
 * @brief HCASIM_DMA_ARENA as set in the environment: "1" or unset shares the arena, "0" does not
 * (the device reaches everything by address, for measuring what sharing saves). Returns "" and
 * sets @p on, or a message naming the variable and its values. The CLI checks it before
 * anything runs; the client library reads it the same way.
 */
std::string dma_arena_setting(bool& on);

/**
 * @brief The first page of a client's arena: what the device tells the program without a
 * message. The client takes the page for it before anything else (it is never a ring); the
 * device writes it, with release stores, whenever it writes into the host's memory or raises
 * one of its interrupts, and the program reads it (acquire) to see that something changed.
 */
struct ArenaProgress {
  uint64_t visible;   ///< device writes into the host's memory and its interrupts, all time
  uint32_t realtime;  ///< 1 once the fabric runs the realtime clock (an empty poll may spin)
  uint32_t pad;
};

/**
 * @brief HCASIM_POLL_SPIN as set in the environment: "1" or unset lets an empty poll watch the
 * arena's progress page for a while in the realtime clock, "0" sends every empty poll to wait
 * in the device (for measuring what watching saves). Returns "" and sets @p on, or a message
 * naming the variable and its values. The CLI checks it before anything runs; the client
 * library reads it the same way.
 */
std::string poll_spin_setting(bool& on);

/**
 * @brief HCASIM_READ_AHEAD as set in the environment (read by the device process): "1" or unset
 * reads payloads ahead (client_reads.h), "0" reads each payload on its own (for measuring what
 * reading ahead gains). Returns "" and sets @p on, or why the value is not accepted.
 */
std::string read_ahead_setting(bool& on);

/**
 * @brief HCASIM_GATHER_ASLEEP as set in the environment (read by the device process): "1" or
 * unset lets a lockstep step run on past payloads into a process whose threads all sleep
 * (DeviceServer::run_step), "0" ends a step at every payload (for measuring what that saves).
 * Returns "" and sets @p on, or why the value is not accepted.
 */
std::string gather_asleep_setting(bool& on);

/**
 * @brief HCASIM_DOORBELL_RING as set in the environment (read by the client library): "1" or
 * unset writes doorbells into the arena's doorbell ring in the realtime clock
 * (doorbell_ring.h), "0" sends each as a message (for measuring what the ring saves). Returns
 * "" and sets @p on, or why the value is not accepted.
 */
std::string doorbell_ring_setting(bool& on);

/** @brief Client side: a memfd-backed pool of zeroed pages, shared with the device. */
class DmaArena {
 public:
  DmaArena() = default;
  ~DmaArena();
  DmaArena(const DmaArena&) = delete;
  DmaArena& operator=(const DmaArena&) = delete;

  /** @brief Create it with room for @p bytes (reserved, not committed); false with errno. */
  bool create(uint64_t bytes);
  int fd() const { return fd_; }
  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  /** @brief @p bytes of zeroed pages, page-aligned; nullptr when the arena has no such run left. */
  uint8_t* alloc(uint64_t bytes);
  /** @brief Give back alloc(@p bytes)'s @p p; false (and nothing done) if @p p is not from here. */
  bool free(uint8_t* p, uint64_t bytes);
  /** @brief Pages handed out and not given back. */
  uint64_t pages_in_use() const;

 private:
  static uint64_t pages_for(uint64_t bytes);
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  ///< free runs: first page -> page count (coalesced)
  uint64_t in_use_ = 0;
};

/** @brief Device side: a client's arena mapped here, and its place in the client. */
struct DmaWindow {
  uint8_t* local = nullptr;  ///< the mapping in this process (nullptr: no window)
  uint64_t hva = 0;          ///< where the client has it
  uint64_t len = 0;
  /** @brief This process's address for the client's [@p at, @p at + @p n), or nullptr if not all inside. */
  uint8_t* find(uint64_t at, uint64_t n) const {
    return local && at >= hva && n <= len && at - hva <= len - n ? local + (at - hva) : nullptr;
  }
};

/** @brief Device side: publish @p visible and the clock in @p w's progress page (no window: nothing). */
inline void publish_progress(const DmaWindow& w, uint64_t visible, bool realtime) {
  if (!w.local) return;
  auto* p = reinterpret_cast<ArenaProgress*>(w.local);
  __atomic_store_n(&p->realtime, realtime ? 1u : 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&p->visible, visible, __ATOMIC_RELEASE);
}

/**
 * @brief Device side: map the arena memfd @p fd that process @p pid says it has at @p hva,
 * @p len bytes long, and prove it: a mark written through this mapping must read back at
 * @p hva in the process. Returns "" and fills @p out, or why not (then nothing is mapped).
 * Does not take over @p fd (the caller closes it).
 */
std::string map_client_arena(int fd, pid_t pid, uint64_t hva, uint64_t len, DmaWindow& out);
/** @brief What descriptor @p fd is, as /proc/self/fd names it ("anon_inode:[eventfd]",
 * "/memfd:NAME (deleted)", "pipe:[N]"), or "unknown". */
std::string fd_target(int fd);
/** @brief Undo map_client_arena. */
void unmap_client_arena(DmaWindow& w);

}  // namespace hcasim::fabric
