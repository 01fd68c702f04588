// SPDX-License-Identifier: Apache-2.0
/**
 * @file pcap_writer.cpp
 * @brief Classic pcap (nanosecond) writer.
 */
#include "pcap_writer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace hcasim::wire {
namespace {

constexpr size_t kStdioBuffer = 1u << 20;  // 1 MiB: hundreds of packets per write(2)

inline void le16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void le32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

}  // namespace

PcapWriter::PcapWriter(PcapWriter&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      buffer_(std::exchange(other.buffer_, nullptr)),
      ok_(std::exchange(other.ok_, true)),
      packets_(std::exchange(other.packets_, 0)) {}

PcapWriter& PcapWriter::operator=(PcapWriter&& other) noexcept {
  if (this != &other) {
    close();
    file_ = std::exchange(other.file_, nullptr);
    buffer_ = std::exchange(other.buffer_, nullptr);
    ok_ = std::exchange(other.ok_, true);
    packets_ = std::exchange(other.packets_, 0);
  }
  return *this;
}

bool PcapWriter::open(const std::string& path) {
  close();
  ok_ = true;
  packets_ = 0;
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    ok_ = false;
    return false;
  }
  buffer_ = static_cast<char*>(std::malloc(kStdioBuffer));
  if (buffer_ != nullptr) std::setvbuf(file_, buffer_, _IOFBF, kStdioBuffer);

  uint8_t hdr[kFileHeaderLen];
  le32(hdr, kMagicNanosecond);
  le16(hdr + 4, kVersionMajor);
  le16(hdr + 6, kVersionMinor);
  le32(hdr + 8, 0);   // thiszone: timestamps are UTC / simulated time
  le32(hdr + 12, 0);  // sigfigs
  le32(hdr + 16, kSnapLen);
  le32(hdr + 20, kLinkTypeEthernet);
  if (std::fwrite(hdr, 1, sizeof(hdr), file_) != sizeof(hdr)) ok_ = false;
  return ok_;
}

void PcapWriter::write(uint64_t time_ns, const uint8_t* frame, size_t len) {
  if (file_ == nullptr) return;
  const size_t incl = len < kSnapLen ? len : kSnapLen;
  uint8_t rec[kRecordHeaderLen];
  le32(rec, static_cast<uint32_t>(time_ns / 1000000000u));
  le32(rec + 4, static_cast<uint32_t>(time_ns % 1000000000u));
  le32(rec + 8, static_cast<uint32_t>(incl));
  le32(rec + 12, len > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(len));
  // Two appends to the stdio buffer: each is a memcpy, write(2) happens once per buffer.
  if (std::fwrite(rec, 1, sizeof(rec), file_) != sizeof(rec)) ok_ = false;
  if (incl && std::fwrite(frame, 1, incl, file_) != incl) ok_ = false;
  ++packets_;
}

void PcapWriter::flush() {
  if (file_ != nullptr && std::fflush(file_) != 0) ok_ = false;
}

bool PcapWriter::close() {
  const bool was_ok = ok_;
  bool result = was_ok;
  if (file_ != nullptr) {
    if (std::fclose(file_) != 0) result = false;
    file_ = nullptr;
  }
  std::free(buffer_);  // only after fclose: stdio uses it until then
  buffer_ = nullptr;
  ok_ = result;
  return result;
}

}  // namespace hcasim::wire
