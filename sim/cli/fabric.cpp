// SPDX-License-Identifier: Apache-2.0
// hcasim fabric start|stop|status: a long-running device process that later runs (or plain
// processes with HCASIM_FABRIC set) join (docs/fabric.md).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "protocol.h"

namespace hcasim::cli {

namespace {

/** @brief Print the status of the fabric at @p socket (its hosts and their devices). */
int fabric_status(const std::string& socket) {
  const int fd = fabric::connect_socket(socket);
  if (fd < 0) {
    std::printf("no fabric running at %s\n", socket.c_str());
    return 1;
  }
  std::vector<char> buf(fabric::kMaxMessage);
  fabric::MsgHeader h{};
  if (!fabric::send_msg(fd, fabric::MsgType::Status, nullptr, 0) ||
      fabric::recv_msg(fd, h, buf.data(), buf.size()) <= 0)
    return fail("fabric status: no answer from %s", socket.c_str());
  close(fd);
  std::fwrite(buf.data(), 1, h.len, stdout);
  return 0;
}

int fabric_stop(const std::string& socket) {
  if (!stop_device(socket)) {
    std::printf("no fabric running at %s\n", socket.c_str());
    return 1;
  }
  // It removes its socket on the way out.
  for (int t = 0; t < 500 && access(socket.c_str(), F_OK) == 0; ++t) usleep(20000);
  std::printf("fabric at %s stopped\n", socket.c_str());
  return 0;
}

/** @brief Start a detached device process (its output in SOCKET.log) for later runs to join. */
int fabric_start(const SimOptions& so, const FabricOptions& fo) {
  if (so.step) return fail("fabric start: step mode works in the in-process world only");
  const int probe = fabric::connect_socket(fo.socket);
  if (probe >= 0) {
    close(probe);
    return fail("a fabric is already running at %s (hcasim fabric stop first)", fo.socket.c_str());
  }
  for (auto& [k, v] : so.env) setenv(k.c_str(), v.c_str(), 1);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  const std::string log = fo.socket + ".log";
  const pid_t pid = start_device(fo, so.hosts ? so.hosts : 8, true, log);
  if (pid < 0) return fail("the fabric did not start; see %s", log.c_str());
  std::printf(
      "fabric running at %s (device pid %d, %u hosts, log %s)\n"
      "join it with: export HCASIM_FABRIC=%s LD_LIBRARY_PATH=%s\n",
      fo.socket.c_str(), int(pid), so.hosts ? so.hosts : 8, log.c_str(), fo.socket.c_str(),
      lib_dir_real().c_str());
  return 0;
}

}  // namespace

int cmd_fabric(int argc, char** argv) {
  if (argc < 1) return fail("fabric: expected start, stop or status");
  const std::string what = argv[0];
  SimOptions so;
  FabricOptions fo;
  for (int i = 1; i < argc; ++i) {
    const int f = parse_fabric_option(argc, argv, i, fo);
    if (f < 0) return 2;
    if (f > 0) continue;
    if (what == "start") {
      const int r = parse_sim_option(argc, argv, i, so);
      if (r < 0) return 2;
      if (r > 0) continue;
    }
    return fail("fabric %s: unknown option '%s' (see hcasim help)", what.c_str(), argv[i]);
  }
  if (fo.socket.empty()) {
    const char* env = std::getenv("HCASIM_FABRIC");
    fo.socket = env && *env ? env : fabric::default_socket_path();
  }
  if (what == "status") return fabric_status(fo.socket);
  if (what == "stop") return fabric_stop(fo.socket);
  if (what == "start") return fabric_start(so, fo);
  return fail("fabric: unknown subcommand '%s' (start, stop, status)", what.c_str());
}

}  // namespace hcasim::cli
