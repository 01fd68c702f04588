// SPDX-License-Identifier: Apache-2.0
// FILE.faults beside a capture: see pcap_fault_notes.h.
#include "pcap_fault_notes.h"

namespace hcasim::sim {

bool PcapFaultNotes::open(const std::string& pcap_path) {
  close();
  file_ = std::fopen((pcap_path + ".faults").c_str(), "w");
  if (!file_) return false;
  order_.assign(kRemembered, kNone);
  next_ = 0;
  std::fprintf(file_, "# faults met by the frames of %s (frame numbers as tshark counts them)\n",
               pcap_path.c_str());
  std::fprintf(file_, "# frame\ttime_us\thost\tfault\tframe\n");
  return true;
}

void PcapFaultNotes::captured(uint64_t packet_id, uint64_t frame_no) {
  if (!file_) return;
  uint64_t& slot = order_[next_];
  if (slot != kNone) frame_of_.erase(slot);  // forget the oldest
  slot = packet_id;
  next_ = (next_ + 1) % kRemembered;
  frame_of_[packet_id] = frame_no;
}

void PcapFaultNotes::fault(uint64_t packet_id, uint64_t time_ps, const std::string& host,
                           const std::string& what, const char* summary) {
  if (!file_) return;
  auto it = frame_of_.find(packet_id);
  std::fprintf(file_, "%llu\t%.3f\t%s\t%s\t%s\n",
               static_cast<unsigned long long>(it == frame_of_.end() ? 0 : it->second), double(time_ps) / 1e6,
               host.c_str(), what.c_str(), summary);
}

void PcapFaultNotes::close() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  frame_of_.clear();
  order_.clear();
  order_.shrink_to_fit();
}

}  // namespace hcasim::sim
