// SPDX-License-Identifier: Apache-2.0
/**
 * @file pcap_writer.h
 * @brief Classic libpcap file writer with nanosecond timestamps.
 *
 * The simulator's traces are meant to be opened in Wireshark/tshark, so they
 * use the oldest, most widely read capture format: the classic pcap file with
 * the nanosecond magic (0xa1b23c4d), version 2.4, LINKTYPE_ETHERNET, snaplen
 * 65535. Simulated time is in nanoseconds, hence the nanosecond variant.
 * All header fields are written little-endian, whatever the host.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hcasim::wire {

/**
 * @brief Appends Ethernet frames to a pcap file.
 *
 * Buffered through stdio with a 1 MiB buffer: two fwrites (record header,
 * frame) per packet and no flush per packet, so tracing costs little at simulation packet rates.
 * Not thread-safe; one writer per file. Movable, not copyable.
 */
class PcapWriter {
 public:
  static constexpr uint32_t kMagicNanosecond = 0xa1b23c4d;  ///< pcap magic announcing ns timestamps
  static constexpr uint16_t kVersionMajor = 2;      ///< pcap format version 2.4, what every reader accepts
  static constexpr uint16_t kVersionMinor = 4;      ///< see kVersionMajor
  static constexpr uint32_t kSnapLen = 65535;       ///< larger frames are truncated to this
  static constexpr uint32_t kLinkTypeEthernet = 1;  ///< LINKTYPE_ETHERNET
  static constexpr size_t kFileHeaderLen = 24;      ///< bytes before the first record
  static constexpr size_t kRecordHeaderLen = 16;    ///< ts_sec, ts_nsec, incl_len, orig_len

  PcapWriter() = default;
  /** @brief Opens @p path at once; check is_open(). */
  explicit PcapWriter(const std::string& path) { open(path); }
  ~PcapWriter() { close(); }
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  /** @brief Takes over another writer's open file. */
  PcapWriter(PcapWriter&& other) noexcept;
  /** @brief Closes this writer's file, then takes over the other's. */
  PcapWriter& operator=(PcapWriter&& other) noexcept;

  /**
   * @brief Creates (truncates) @p path and writes the file header.
   * Closes a previously open file first. @return false if the file cannot be created or written.
   */
  bool open(const std::string& path);

  /**
   * @brief Appends one frame captured at @p time_ns (simulated time since the epoch of the trace).
   * Frames longer than the snaplen are truncated, keeping their original length in the record.
   * Does nothing if no file is open; a write error marks the writer failed (see ok()).
   */
  void write(uint64_t time_ns, const uint8_t* frame, size_t len);

  /** @brief Flushes buffered records to the OS (e.g. before another process reads the file). */
  void flush();

  /** @brief Flushes and closes; @return false if any write since open() failed. Safe to call twice. */
  bool close();

  /** @brief A file is open. */
  bool is_open() const { return file_ != nullptr; }
  /** @brief No write error since open(). */
  bool ok() const { return ok_; }
  /** @brief Records written since open(). */
  uint64_t packets_written() const { return packets_; }

 private:
  std::FILE* file_ = nullptr;
  char* buffer_ = nullptr;  ///< stdio buffer, owned; allocated in open(), never on the write path
  bool ok_ = true;
  uint64_t packets_ = 0;
};

}  // namespace hcasim::wire
