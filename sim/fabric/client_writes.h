// SPDX-License-Identifier: Apache-2.0
/**
 * @file client_writes.h
 * @brief The device's payload writes into one client process's memory, gathered and written
 *        out together with one process_vm_writev per batch.
 *
 * Each process_vm_writev costs about 1.6 us here however few bytes it moves (it finds the
 * other process, checks ptrace rights and pins its pages), more than a whole RDMA WRITE costs
 * the model. A program learns that a payload has landed from a CQE or an EQE (written in the
 * shared DMA arena), an interrupt or a reply, or by watching the memory itself. The device
 * server therefore keeps the payload writes of one step and writes them out, in the order they
 * were made, before any of those signals, before it reads memory they touch and before it
 * sleeps: a program watching memory sees the bytes at the end of the device's step, as it would
 * see them after a real device's posted writes crossed PCIe.
 */
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hcasim::fabric {

class ClientWrites {
 public:
  /** @brief Keep @p len bytes from @p src for address @p hva (copied: the caller reuses its buffer). */
  void add(uint64_t hva, const void* src, uint64_t len);
  bool empty() const { return items_.empty(); }
  /** @brief Whether a kept write touches [@p hva, @p hva + @p len). */
  bool overlaps(uint64_t hva, uint64_t len) const;
  /** @brief Enough kept that it should go out now (bounds the copy and one call's iovecs). */
  bool full() const { return items_.size() >= kMaxItems || bytes_.size() >= kMaxBytes; }
  /**
   * @brief Write everything kept into process @p pid, in order, and forget it. False only if the
   * process is gone (ESRCH). A range it no longer maps is skipped and the rest still written, as
   * each write on its own would have been.
   */
  bool flush(pid_t pid);
  /** @brief Forget what is kept (the process is gone). */
  void clear();
  uint64_t writes() const { return writes_; }  ///< writes kept, all time
  uint64_t calls() const { return calls_; }    ///< process_vm_writev calls made, all time

  static constexpr size_t kMaxItems = 512;
  static constexpr size_t kMaxBytes = 1 << 20;

 private:
  struct Item {
    uint64_t hva, off, len;  ///< where it goes; where its bytes are in bytes_
  };
  /** One call for items_[@p first, @p last); the index of the first not (fully) written, or -1 if the process
   * is gone. */
  std::ptrdiff_t write_run(pid_t pid, size_t first, size_t last);
  std::vector<uint8_t> bytes_;
  std::vector<Item> items_;
  uint64_t writes_ = 0, calls_ = 0;
};

}  // namespace hcasim::fabric
