// SPDX-License-Identifier: Apache-2.0
/**
 * @file write_pair.h
 * @brief Two RC QPs on the first two simulated devices, connected, each with one registered
 *        buffer: the workload setup the benchmarks share (public ibverbs API only; the
 *        simulator's own functions are looked up with dlsym, so a program using only this
 *        header needs nothing but <infiniband/verbs.h> and libdl).
 */
#pragma once

#include <dirent.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

/** @brief Compute for @p us microseconds of wall time (no system call, no verbs call). */
inline void spin(long us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

inline double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/** @brief Resident memory of process @p pid ("self" or a number) in KiB (VmRSS), or -1. */
inline long rss_kib(const std::string& pid = "self") {
  std::ifstream status("/proc/" + pid + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

/**
 * @brief The pid of the fabric device this process is connected to, or "" (not on a fabric):
 * the peer, named hcasim-device, of one of our Unix sockets (SO_PEERCRED). Other fabrics running
 * on the machine are not mistaken for ours.
 */
inline std::string device_pid() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    ucred peer{};
    socklen_t len = sizeof peer;
    if (e->d_name[0] == '.' || getsockopt(std::atoi(e->d_name), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
        peer.pid <= 0)
      continue;
    std::ifstream comm("/proc/" + std::to_string(peer.pid) + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "hcasim-device") found = std::to_string(peer.pid);
  }
  closedir(d);
  return found;
}

[[noreturn]] inline void die(const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

/** @brief The simulator's exported function @p name (sim_control.h), or null on other libibverbs. */
template <typename Fn>
Fn* sim_function(const char* name) {
  return reinterpret_cast<Fn*>(dlsym(RTLD_DEFAULT, name));
}

struct Side {
  ibv_context* ctx;
  ibv_pd* pd;
  ibv_cq* cq;
  ibv_comp_channel* ch;  ///< the CQ's completion channel, or null
  ibv_qp* qp;
  ibv_mr* mr;
  std::vector<uint8_t> buf;
  ibv_gid gid;
};

/**
 * @brief Open @p dev with a QP, a CQ (on a completion channel with @p channel) and a buffer
 * registered with @p access.
 */
inline void open_side(Side& s, ibv_device* dev, size_t bytes, bool channel = false,
                      unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) {
  s.ctx = ibv_open_device(dev);
  if (!s.ctx) die("ibv_open_device");
  s.pd = ibv_alloc_pd(s.ctx);
  s.ch = channel ? ibv_create_comp_channel(s.ctx) : nullptr;
  if (channel && !s.ch) die("ibv_create_comp_channel");
  s.cq = ibv_create_cq(s.ctx, 1024, nullptr, s.ch, 0);
  s.buf.assign(bytes, 0x5a);
  s.mr = ibv_reg_mr(s.pd, s.buf.data(), bytes, int(access));
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = s.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 256;
  ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  s.qp = ibv_create_qp(s.pd, &ia);
  if (!s.pd || !s.cq || !s.mr || !s.qp) die("resources");
  if (ibv_query_gid(s.ctx, 1, 1, &s.gid)) die("ibv_query_gid");
}

/**
 * @brief INIT, RTR towards QP @p peer_qpn at @p peer_gid (GID index 1), RTS: one RC QP, any host.
 * @p access is the remote access the QP allows, @p rd_atomic the RDMA READs outstanding each way.
 */
inline void connect_qp(ibv_qp* qp, const ibv_gid& peer_gid, uint32_t peer_qpn,
                       unsigned access = IBV_ACCESS_REMOTE_WRITE, uint8_t rd_atomic = 1) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = access;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer_qpn;
  a.max_dest_rd_atomic = rd_atomic;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer_gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = rd_atomic;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
}

/** @brief Connect @p s's QP to @p peer's. */
inline void connect(Side& s, const Side& peer) { connect_qp(s.qp, peer.gid, peer.qp->qp_num); }

/** @brief Destroy what open_side() made (a program that frees what it used leaks nothing). */
inline void close_side(Side& s) {
  ibv_destroy_qp(s.qp);
  ibv_dereg_mr(s.mr);
  ibv_destroy_cq(s.cq);
  if (s.ch) ibv_destroy_comp_channel(s.ch);
  ibv_dealloc_pd(s.pd);
  ibv_close_device(s.ctx);
}

/**
 * @brief Open the first two simulated devices as @p a and @p b (a 4 MiB buffer each) and connect
 * their QPs to each other; @p a_channel puts a's CQ on a completion channel. Prints why and returns
 * false when there are not two simulated HCAs.
 */
inline bool open_simulated_pair(Side& a, Side& b, const char* who, bool a_channel = false) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  auto* present = sim_function<int()>("hcasim_sim_present");
  if (!list || n < 2 || !present || !present()) {
    std::fprintf(stderr, "%s: needs two simulated devices (run it directly, not on hardware)\n", who);
    if (list) ibv_free_device_list(list);
    return false;
  }
  open_side(a, list[0], 4 << 20, a_channel);
  open_side(b, list[1], 4 << 20);
  ibv_free_device_list(list);  // the opened contexts keep their devices
  connect(a, b);
  connect(b, a);
  return true;
}

/** @brief Post one signaled 64-byte RDMA WRITE from the start of @p a's buffer to @p b's. */
inline void post_signaled_write(Side& a, const Side& b, uint64_t wr_id = 0) {
  ibv_sge sge{uint64_t(uintptr_t(a.buf.data())), 64, a.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = uint64_t(uintptr_t(b.buf.data()));
  wr.wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(a.qp, &wr, &bad)) die("ibv_post_send");
}

/** @brief Where a stream's WRITEs go: a peer's registered buffer, in this process or another. */
struct Target {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

/** @brief @p b's buffer as a target. */
inline Target target_of(const Side& b) { return {uint64_t(uintptr_t(b.buf.data())), b.mr->rkey}; }

/**
 * @brief Run @p ops RDMA WRITEs of @p size bytes from @p a to @p t (a buffer as large as @p a's),
 * keeping @p window in flight, posted in linked batches of 16, every @p signal_every-th signaled
 * (a signaled CQE retires every WR before it). Exits on any error; callers time it.
 */
inline void write_window(Side& a, const Target& t, uint32_t size, uint64_t ops, uint32_t window,
                         uint32_t signal_every) {
  uint64_t posted = 0, done = 0;
  ibv_sge sge[16];
  ibv_send_wr wr[16];
  ibv_wc wc[32];
  while (done < ops) {
    while (posted < ops && posted - done + 16 <= window) {
      const uint32_t n = uint32_t(std::min<uint64_t>(16, ops - posted));
      for (uint32_t i = 0; i < n; ++i) {
        const uint64_t k = posted + i;
        const uint64_t off = (k * size) % (a.buf.size() - size);
        sge[i] = {uint64_t(uintptr_t(a.buf.data() + off)), size, a.mr->lkey};
        wr[i] = {};
        wr[i].wr_id = k;
        wr[i].sg_list = &sge[i];
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_RDMA_WRITE;
        wr[i].send_flags = ((k + 1) % signal_every == 0 || k + 1 == ops) ? IBV_SEND_SIGNALED : 0;
        wr[i].wr.rdma.remote_addr = t.addr + off;
        wr[i].wr.rdma.rkey = t.rkey;
        wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
      }
      ibv_send_wr* bad;
      if (ibv_post_send(a.qp, wr, &bad)) die("ibv_post_send");
      posted += n;
    }
    const int got = ibv_poll_cq(a.cq, 32, wc);
    if (got < 0) die("ibv_poll_cq");
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "completion error: %s\n", ibv_wc_status_str(wc[i].status));
        std::exit(1);
      }
      done = wc[i].wr_id + 1;
    }
  }
}

/** @brief write_window() into @p b's buffer. */
inline void write_window(Side& a, Side& b, uint32_t size, uint64_t ops, uint32_t window,
                         uint32_t signal_every) {
  write_window(a, target_of(b), size, ops, window, signal_every);
}

/** @brief What one side of a two-process pair tells the other (rendezvous through files). */
struct Peer {
  uint32_t qpn = 0, rkey = 0;
  uint64_t addr = 0;
  ibv_gid gid{};
};

/** @brief Whether @p path exists. */
inline bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

/** @brief Wait up to @p seconds for @p path to exist; false if it does not. */
inline bool await_file(const std::string& path, int seconds = 30) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!file_exists(path)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

/** @brief Create @p path (empty) at once, as a whole: written aside, then renamed. */
inline void touch_file(const std::string& path) {
  std::ofstream(path + ".tmp").close();
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) die("rename");
}

/** @brief Write @p me to DIR/@p role (renamed into place, so a reader never sees half of it). */
inline void publish_peer(const std::string& dir, const std::string& role, const Peer& me) {
  const std::string path = dir + "/" + role;
  {
    std::ofstream f(path + ".tmp");
    f << me.qpn << ' ' << me.rkey << ' ' << me.addr;
    for (uint8_t b : me.gid.raw) f << ' ' << unsigned(b);
    f << '\n';
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) die("rename");
}

/** @brief Read DIR/@p role once it exists; false (said why) if it does not come or cannot be read. */
inline bool lookup_peer(const std::string& dir, const std::string& role, Peer& p) {
  const std::string path = dir + "/" + role;
  if (!await_file(path)) {
    std::fprintf(stderr, "no %s after 30 s\n", path.c_str());
    return false;
  }
  std::ifstream f(path);
  f >> p.qpn >> p.rkey >> p.addr;
  for (uint8_t& b : p.gid.raw) {
    unsigned v = 0;
    f >> v;
    b = uint8_t(v);
  }
  if (!f) std::fprintf(stderr, "cannot parse %s\n", path.c_str());
  return bool(f);
}

}  // namespace bench
