// SPDX-License-Identifier: Apache-2.0
/**
 * @file client_reads.h
 * @brief Payload reads from one client process, served from a copy read ahead: one
 *        process_vm_readv for the payloads of many posted work requests instead of one each.
 *
 * Each process_vm_readv costs a few microseconds here however few bytes it moves (it finds the
 * other process, checks ptrace rights and pins its pages), more than a whole RDMA WRITE costs
 * the model. A posted send work request's payload may not change between the post and its
 * completion (ibv_post_send(3)), and a program's buffers for a batch of posts usually sit side
 * by side. So a payload read that misses reads some bytes after it too, and later payload reads
 * inside that window are copied from here, until software may have changed the memory for a
 * work request posted since:
 * - the device server forgets the copy when the process sends it a message (a doorbell, a
 *   command: every new work request reaches the device with a message, after the program wrote
 *   its payload);
 * - the device's own writes into the process (received payloads, RDMA READ responses, CQEs) are
 *   written into the copy too, so it stays equal to memory as the device sees it.
 * How far to read ahead follows what the last copy served (twice that, at most kWindow): a
 * longer read costs more (32 KiB about twice 64 bytes), and a program that rings a doorbell per
 * work request (perftest) gets its copy dropped after every payload.
 * Reads whose bytes software may change at any moment (RDMA READ and atomic targets) never come
 * here (model::ReadFor in dma_engine.h).
 */
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace hcasim::fabric {

class ClientReads {
 public:
  /** @brief The farthest one read reaches ahead of the payload that missed. */
  static constexpr uint64_t kWindow = 32 * 1024;
  /** @brief How far the first read reaches ahead. */
  static constexpr uint64_t kFirstAhead = 4096;

  /** @brief Copy [@p hva, +@p len) into @p dst if the copy holds all of it; false otherwise. */
  bool find(uint64_t hva, void* dst, uint64_t len);
  /**
   * @brief Read [@p hva, +@p len) from process @p pid into @p dst, and keep it with what follows
   * it, up to kWindow bytes and as far as the process maps them. False (errno set, nothing kept)
   * if the payload itself cannot be read.
   */
  bool fill(pid_t pid, uint64_t hva, void* dst, uint64_t len);
  /** @brief The device wrote @p len bytes at @p hva into the process: the copy follows. */
  void update(uint64_t hva, const void* src, uint64_t len);
  /** @brief Software may have changed the process's memory: drop the copy. */
  void forget() { len_ = 0; }
  /** @brief How many bytes the next fill() of @p len bytes may read (gathered writes go out first). */
  uint64_t reach(uint64_t len) const { return len + ahead_; }

  uint64_t hits() const { return hits_; }    ///< payload reads served from the copy, all time
  uint64_t fills() const { return fills_; }  ///< process_vm_readv calls made, all time

 private:
  std::vector<uint8_t> bytes_;
  uint64_t base_ = 0, len_ = 0;   ///< the copy holds [base_, base_ + len_)
  uint64_t used_ = 0;             ///< how much of it, from base_, reads have asked for
  uint64_t ahead_ = kFirstAhead;  ///< bytes the next fill reads after its payload
  uint64_t hits_ = 0, fills_ = 0;
};

}  // namespace hcasim::fabric
