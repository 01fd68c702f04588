// SPDX-License-Identifier: Apache-2.0
/**
 * @file pcap_fault_notes.h
 * @brief The faults a capture's frames met (`--pcap FILE` with `--faults`): FILE.faults, a text
 *        file beside the capture with one line per fault naming the frame by its number in the
 *        capture (as Wireshark and tshark count, from 1). The classic pcap format has no
 *        per-frame comments, and the capture is written as each frame starts on the wire,
 *        before the wire's faults: a lost frame is in the capture, and this file says it was lost.
 *
 * Line format (tab-separated, after a header line starting with '#'):
 *     frame  time_us  host  fault  frame-summary
 * e.g. `812	2990.000	hcasim0	lost	SEND_MIDDLE psn=1001 ...`; `tshark -r FILE -Y
 * frame.number==812` shows the frame itself.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

namespace hcasim::sim {

/** @brief Writes FILE.faults for a capture FILE. */
class PcapFaultNotes {
 public:
  ~PcapFaultNotes() { close(); }
  /** @brief Creates @p pcap_path + ".faults"; false (with errno) if it cannot. */
  bool open(const std::string& pcap_path);
  /** @brief Frame @p packet_id was written to the capture as frame @p frame_no. */
  void captured(uint64_t packet_id, uint64_t frame_no);
  /**
   * @brief A fault @p what (e.g. "lost", "delayed by 3.000 us") happened to frame @p packet_id,
   * sent by @p host at @p time_ps; @p summary describes the frame. A frame the capture no
   * longer remembers (beyond the last kRemembered) is written with frame number 0.
   */
  void fault(uint64_t packet_id, uint64_t time_ps, const std::string& host, const std::string& what,
             const char* summary);
  /** @brief Flushes and closes the file. */
  void close();
  /** @brief A file is open. */
  bool is_open() const { return file_ != nullptr; }

  /** @brief How many of the latest captured frames are remembered for their numbers. */
  static constexpr size_t kRemembered = 1 << 16;
  /** @brief An empty slot of the ring (packet ids start at 1). */
  static constexpr uint64_t kNone = 0;

 private:
  std::FILE* file_ = nullptr;
  std::unordered_map<uint64_t, uint64_t> frame_of_;  ///< packet id -> frame number
  /** Ids in capture order, a ring of kRemembered (allocated by open(): a world without a
   *  capture allocates nothing, so programs' heap layouts, and the golden traces' addresses,
   *  do not change with it). */
  std::vector<uint64_t> order_;
  size_t next_ = 0;  ///< where the next id goes in order_
};

}  // namespace hcasim::sim
