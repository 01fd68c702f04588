// SPDX-License-Identifier: Apache-2.0
// Does the simulator grow under long runs? Resident memory (VmRSS) and open file descriptors,
// measured at checkpoints of two workloads in one run:
//   operations: 64-byte RDMA WRITEs on one connected QP pair (1 in 16 signaled), measured after
//               10^5 and after 10^6 of them;
//   objects:    create-destroy cycles of a PD, a CQ, a 64 KiB MR and an RC QP taken to INIT,
//               measured after 100 and after 1,000 cycles.
// Each line gives this process (the in-process world, or the program's side of a fabric) and,
// when the program runs on a fabric (`hcasim run --fabric --hcas-per-host 2 -- resource_growth`),
// the fabric's device process (the peer of the program's connection to it). Growth within 5 % between
// the checkpoints counts as flat; the program exits 1 if anything grew more.
//   resource_growth [--ops N] [--cycles N]     (defaults 1000000 and 1000)
#include <dirent.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "write_pair.h"

namespace {

struct Usage {
  long rss_kib = -1;
  long fds = -1;
};

Usage usage_of(const std::string& pid) {
  Usage u;
  u.rss_kib = bench::rss_kib(pid);
  if (DIR* d = opendir(("/proc/" + pid + "/fd").c_str())) {
    u.fds = 0;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++u.fds;
    closedir(d);
    --u.fds;  // the directory stream itself, when it is our own
  }
  return u;
}

struct Checkpoint {
  Usage self, device;
};

Checkpoint measure(const std::string& dev) {
  Checkpoint c;
  c.self = usage_of("self");
  if (!dev.empty()) {
    c.device = usage_of(dev);
    ++c.device.fds;  // another process's fd directory: no stream of ours in it
  }
  return c;
}

/** @brief Prints one figure's two checkpoints and its growth; false if it grew more than 5 %. */
bool report(const char* what, const char* unit, long before, long after) {
  if (before < 0 || after < 0) return true;
  const double growth = before > 0 ? 100.0 * double(after - before) / double(before) : 0.0;
  const bool flat = growth <= 5.0;
  std::printf("  %-36s %10ld %-4s -> %10ld %-4s %+7.2f %%  %s\n", what, before, unit, after, unit, growth,
              flat ? "flat" : "GROWS");
  return flat;
}

bool compare(const char* phase, const Checkpoint& a, const Checkpoint& b, bool fabric) {
  std::printf("%s\n", phase);
  bool ok = report("this process: resident memory", "KiB", a.self.rss_kib, b.self.rss_kib);
  ok &= report("this process: open file descriptors", "", a.self.fds, b.self.fds);
  if (fabric) {
    ok &= report("fabric device: resident memory", "KiB", a.device.rss_kib, b.device.rss_kib);
    ok &= report("fabric device: open file descriptors", "", a.device.fds, b.device.fds);
  }
  return ok;
}

/** @brief One create-destroy cycle of a PD, CQ, MR and QP (to INIT) on @p ctx. */
void object_cycle(ibv_context* ctx, std::vector<uint8_t>& buf) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 64, nullptr, nullptr, 0) : nullptr;
  ibv_mr* mr = cq ? ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!mr) bench::die("create");
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!qp) bench::die("ibv_create_qp");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    bench::die("INIT");
  if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
    bench::die("destroy");
}

uint64_t arg(int argc, char** argv, const char* name, uint64_t dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return std::strtoull(argv[i + 1], nullptr, 10);
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t ops = arg(argc, argv, "--ops", 1000000), cycles = arg(argc, argv, "--cycles", 1000);
  if (ops < 10 || cycles < 10) {
    std::fprintf(stderr, "resource_growth: --ops and --cycles must be at least 10\n");
    return 2;
  }
  bench::Side a, b;
  if (!bench::open_simulated_pair(a, b, "resource_growth")) return 2;
  const std::string dev = bench::device_pid();
  const bool fabric = !dev.empty();
  std::printf("resource growth (%s)\n",
              fabric ? "on a fabric: this process and hcasim-device" : "in-process world");
  bench::write_window(a, b, 64, ops / 10, 64, 16);
  const Checkpoint w1 = measure(dev);
  bench::write_window(a, b, 64, ops - ops / 10, 64, 16);
  const Checkpoint w2 = measure(dev);
  char phase[96];
  std::snprintf(phase, sizeof phase, "64-byte RDMA WRITEs: after %llu, then after %llu",
                (unsigned long long)(ops / 10), (unsigned long long)ops);
  bool ok = compare(phase, w1, w2, fabric);
  std::vector<uint8_t> buf(64 << 10);
  for (uint64_t i = 0; i < cycles / 10; ++i) object_cycle(a.ctx, buf);
  const Checkpoint c1 = measure(dev);
  for (uint64_t i = cycles / 10; i < cycles; ++i) object_cycle(a.ctx, buf);
  const Checkpoint c2 = measure(dev);
  std::snprintf(phase, sizeof phase, "PD+CQ+MR+QP create-destroy cycles: after %llu, then after %llu",
                (unsigned long long)(cycles / 10), (unsigned long long)cycles);
  ok &= compare(phase, c1, c2, fabric);
  bench::close_side(a);
  bench::close_side(b);
  std::printf("%s\n", ok ? "flat: nothing grew more than 5 % between the checkpoints"
                         : "something GREW more than 5 %");
  return ok ? 0 : 1;
}
