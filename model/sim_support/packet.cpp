// SPDX-License-Identifier: Apache-2.0
#include "packet.h"

namespace hcasim::model {
namespace {
std::vector<Packet*>& pool() {
  // Never destroyed: frames may still be in flight when the process exits.
  static auto* free_list = new std::vector<Packet*>;
  return *free_list;
}
uint64_t next_id = 1;
}  // namespace

void PacketRecycler::operator()(Packet* p) const { release_packet_hold(p); }

void hold_packet(Packet* p) { ++p->users; }

void release_packet_hold(Packet* p) {
  if (--p->users) return;  // its owner, or a posted write landing from it, still needs it
  if (pool().size() < 4096)
    pool().push_back(p);
  else
    delete p;
}

PacketPtr make_packet() {
  Packet* p;
  if (pool().empty()) {
    p = new Packet;
  } else {
    p = pool().back();
    pool().pop_back();
  }
  p->users = 1;  // the PacketPtr returned
  p->len = 0;
  p->pristine = true;
  p->report_sent = false;
  p->id = next_id++;
  return PacketPtr(p);
}

}  // namespace hcasim::model
