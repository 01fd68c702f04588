// SPDX-License-Identifier: Apache-2.0
/**
 * payload_freshness server|client DIR: two processes, one RC QP each, connected through files
 * in DIR. What the fabric's device must never do when it reads a process's memory from a copy
 * it read ahead (sim/fabric/client_reads.h):
 *  1. send an old payload: the client posts 16 WRITEs at a time (one doorbell), each 64 bytes
 *     of the same 1 KiB that it rewrites before every batch, into slots of the server's buffer,
 *     then reads the server's buffer back and checks every slot;
 *  2. answer an RDMA READ from an old copy: the server, which makes no verbs call meanwhile,
 *     stores 1, 2, ... 40 into its buffer, one per millisecond, once the client is done writing;
 *     the client READs the word until
 *     it sees 40 (values never going back).
 * Public ibverbs only; runs on any device (rxe too). Exit status 0 and "payload_freshness:
 * ROLE passed" when everything held.
 */
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "write_pair.h"

namespace {

constexpr int kRounds = 25, kBatch = 16;  ///< WRITEs posted kBatch at a time (one doorbell)
constexpr size_t kWordAt = 60 * 1024;     ///< where the server stores the word the client READs
constexpr uint64_t kLastValue = 40;
constexpr size_t kBytes = 64 * 1024;
constexpr auto kPatience = std::chrono::seconds(30);

[[noreturn]] void fail(const char* role, const std::string& why) {
  std::fprintf(stderr, "payload_freshness: %s: FAIL: %s\n", role, why.c_str());
  std::exit(1);
}

using bench::Peer;

void await(const char* role, const std::string& path) {
  if (!bench::await_file(path)) fail(role, "no " + path + " after 30 s");
}

Peer lookup(const char* role, const std::string& dir, const char* other) {
  Peer p;
  if (!bench::lookup_peer(dir, other, p)) fail(role, std::string("no usable ") + other + " file");
  return p;
}

using Host = bench::Side;

Host open_host(const char* role, Peer& me) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) fail(role, "no RDMA device");
  Host h;
  bench::open_side(h, list[0], kBytes, false,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ibv_free_device_list(list);
  std::memset(h.buf.data(), 0, kBytes);
  me = {h.qp->qp_num, h.mr->rkey, uint64_t(uintptr_t(h.buf.data())), h.gid};
  return h;
}

void wait_one(const char* role, Host& h);

/** Post one signaled WR of @p opcode and wait for its completion. */
void run_one(const char* role, Host& h, ibv_wr_opcode opcode, uint8_t* local, uint32_t len, const Peer& peer,
             uint64_t remote) {
  ibv_sge sge{uint64_t(uintptr_t(local)), len, h.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = peer.rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(h.qp, &wr, &bad)) bench::die("ibv_post_send");
  wait_one(role, h);
}

/** Wait for one completion, which must be a success. */
void wait_one(const char* role, Host& h) {
  ibv_wc wc{};
  int got = 0;
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while ((got = ibv_poll_cq(h.cq, 1, &wc)) == 0)
    if (std::chrono::steady_clock::now() > until) fail(role, "no completion after 30 s");
  if (got < 0 || wc.status != IBV_WC_SUCCESS)
    fail(role, std::string("completion: ") + (got < 0 ? "poll failed" : ibv_wc_status_str(wc.status)));
}

/** The byte WRITE @p i of round @p r carries: never 0, never what the round before sent there. */
uint8_t pattern(int r, int i) { return uint8_t(1 + (r * kBatch + i) % 255); }

void check_writes(Host& h, const Peer& server) {
  uint8_t* src = h.buf.data();
  ibv_sge sge[kBatch];
  ibv_send_wr wr[kBatch];
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kBatch; ++i) {  // the bytes of every earlier round's posts change
      std::memset(src + i * 64, pattern(r, i), 64);
      sge[i] = {uint64_t(uintptr_t(src + i * 64)), 64, h.mr->lkey};
      wr[i] = {};
      wr[i].sg_list = &sge[i];
      wr[i].num_sge = 1;
      wr[i].opcode = IBV_WR_RDMA_WRITE;
      wr[i].send_flags = i + 1 == kBatch ? IBV_SEND_SIGNALED : 0;
      wr[i].wr.rdma.remote_addr = server.addr + uint64_t(r * kBatch + i) * 64;
      wr[i].wr.rdma.rkey = server.rkey;
      wr[i].next = i + 1 < kBatch ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(h.qp, wr, &bad)) bench::die("ibv_post_send");  // one doorbell for the batch
    wait_one("client", h);
  }
  uint8_t* back = h.buf.data() + 4096;
  run_one("client", h, IBV_WR_RDMA_READ, back, kRounds * kBatch * 64, server, server.addr);
  for (int r = 0; r < kRounds; ++r)
    for (int i = 0; i < kBatch; ++i)
      for (int b = 0; b < 64; ++b)
        if (back[(r * kBatch + i) * 64 + b] != pattern(r, i))
          fail("client", "round " + std::to_string(r) + ", WRITE " + std::to_string(i) + " delivered byte " +
                             std::to_string(back[(r * kBatch + i) * 64 + b]) + " instead of " +
                             std::to_string(pattern(r, i)) + " (an old payload)");
}

void check_reads(Host& h, const Peer& server) {
  uint64_t seen = 0, reads = 0;
  uint8_t* word = h.buf.data() + 32768;
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (seen < kLastValue) {
    if (std::chrono::steady_clock::now() > until)
      fail("client", "RDMA READ still returns " + std::to_string(seen) + " after 30 s (the server stored " +
                         std::to_string(kLastValue) + ")");
    run_one("client", h, IBV_WR_RDMA_READ, word, 8, server, server.addr + kWordAt);
    uint64_t v = 0;
    std::memcpy(&v, word, 8);
    if (v < seen)
      fail("client", "RDMA READ went back from " + std::to_string(seen) + " to " + std::to_string(v));
    seen = v;
    ++reads;
  }
  std::printf("payload_freshness: %d WRITEs checked, %" PRIu64 " READs to see %" PRIu64 "\n",
              kRounds * kBatch, reads, seen);
}

void serve(Host& h, const std::string& dir) {
  bench::touch_file(dir + "/server.ready");
  await("server", dir + "/client.wrote");
  auto* word = reinterpret_cast<std::atomic<uint64_t>*>(h.buf.data() + kWordAt);
  for (uint64_t v = 1; v <= kLastValue; ++v) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    word->store(v, std::memory_order_release);  // no verbs call: the device hears nothing
  }
  await("server", dir + "/client.done");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "server") != 0 && std::strcmp(argv[1], "client") != 0)) {
    std::fprintf(stderr, "usage: payload_freshness server|client DIR\n");
    return 2;
  }
  const char* role = argv[1];
  const bool server = role[0] == 's';
  const std::string dir = argv[2];
  Peer me;
  Host h = open_host(role, me);
  bench::publish_peer(dir, role, me);
  const Peer peer = lookup(role, dir, server ? "client" : "server");
  bench::connect_qp(h.qp, peer.gid, peer.qpn, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 1);
  if (server) {
    serve(h, dir);
  } else {
    await(role, dir + "/server.ready");
    check_writes(h, peer);
    bench::touch_file(dir + "/client.wrote");
    check_reads(h, peer);
    bench::touch_file(dir + "/client.done");
  }
  bench::close_side(h);
  std::printf("payload_freshness: %s passed\n", role);
  return 0;
}
