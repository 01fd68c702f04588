// SPDX-License-Identifier: Apache-2.0
/**
 * @file process_vm_cost.cpp
 * @brief What one process_vm_readv / process_vm_writev costs between two processes on this
 *        machine, by size: the price the fabric's device pays for each access to a program's
 *        registered memory (docs/fabric.md, "What crossing processes costs").
 *
 * process_vm_cost [--calls N]: a child process holds a 1 MiB buffer; the parent reads (then
 * writes) N times at each size, the remote range split at page boundaries as the device's reads
 * ahead are (sim/fabric/client_reads.cpp), and prints microseconds per call.
 */
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr uint64_t kPage = 4096;
constexpr size_t kBuffer = 1 << 20;

/** One call moving @p len bytes at @p remote in process @p pid; false if it moved fewer. */
bool one_call(pid_t pid, bool write, uint8_t* local, uint64_t remote, uint64_t len) {
  iovec l{local, len}, r[kBuffer / kPage + 1];
  size_t n = 0;
  for (uint64_t at = remote; at < remote + len; ++n) {
    const uint64_t end = std::min(remote + len, (at & ~(kPage - 1)) + kPage);
    r[n] = {reinterpret_cast<void*>(uintptr_t(at)), end - at};
    at = end;
  }
  const ssize_t done = write ? process_vm_writev(pid, &l, 1, r, n, 0) : process_vm_readv(pid, &l, 1, r, n, 0);
  return done == ssize_t(len);
}

double us_per_call(pid_t pid, bool write, uint8_t* base, uint64_t len, int calls) {
  std::vector<uint8_t> local(len, 0x5a);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    const uint64_t at = uint64_t(uintptr_t(base)) + 16 + uint64_t(i % 64) * 1024;  // not page-aligned
    if (!one_call(pid, write, local.data(), at, len)) {
      std::perror(write ? "process_vm_writev" : "process_vm_readv");
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 20000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      calls = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: process_vm_cost [--calls N (> 0)]\n");
      return 2;
    }
  }
  // The child's copy of the buffer is at the same address (fork); it waits to be killed.
  std::vector<uint8_t> buf(kBuffer + 64 * 1024, 1);
  const pid_t child = fork();
  if (child < 0) return std::perror("fork"), 1;
  if (child == 0) {
    for (;;) pause();
  }
  std::printf("process_vm_cost: %d calls per size, to another process (load average %.2f)\n", calls, [] {
    double l = 0;
    FILE* f = std::fopen("/proc/loadavg", "r");
    if (f && std::fscanf(f, "%lf", &l) != 1) l = 0;
    if (f) std::fclose(f);
    return l;
  }());
  std::printf("  %8s %12s %12s\n", "bytes", "readv us", "writev us");
  for (uint64_t len : {64ull, 1024ull, 4096ull, 8192ull, 16384ull, 32768ull})
    std::printf("  %8llu %12.2f %12.2f\n", static_cast<unsigned long long>(len),
                us_per_call(child, false, buf.data(), len, calls),
                us_per_call(child, true, buf.data(), len, calls));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 0;
}
