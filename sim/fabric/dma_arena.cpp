// SPDX-License-Identifier: Apache-2.0
#include "dma_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

namespace hcasim::fabric {
namespace {
constexpr uint64_t kPage = 4096;
}

namespace {
/** @brief A 0/1 switch @p name in the environment, unset = on; "" or why the value is refused. */
std::string env_switch(const char* name, bool& on, const char* off_means, const char* on_means) {
  const char* v = std::getenv(name);
  on = !v || std::strcmp(v, "0") != 0;
  if (!v || !std::strcmp(v, "0") || !std::strcmp(v, "1")) return "";
  return std::string(name) + "=" + v + ": expected 0 (" + off_means + ") or 1 (" + on_means +
         ", the default)";
}
}  // namespace

std::string dma_arena_setting(bool& on) {
  return env_switch("HCASIM_DMA_ARENA", on, "the device reaches driver memory by address", "shared");
}

std::string poll_spin_setting(bool& on) {
  return env_switch("HCASIM_POLL_SPIN", on, "an empty poll always waits in the device",
                    "it first watches the device's progress");
}

std::string read_ahead_setting(bool& on) {
  return env_switch("HCASIM_READ_AHEAD", on, "each payload read on its own", "payloads read ahead");
}

std::string gather_asleep_setting(bool& on) {
  return env_switch("HCASIM_GATHER_ASLEEP", on, "in the lockstep clock every payload ends a step",
                    "payloads into a process whose threads all sleep are gathered");
}

std::string doorbell_ring_setting(bool& on) {
  return env_switch("HCASIM_DOORBELL_RING", on, "every doorbell is a message",
                    "doorbells go through the shared ring in the realtime clock");
}

DmaArena::~DmaArena() {
  if (base_) munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
}

uint64_t DmaArena::pages_for(uint64_t bytes) { return bytes ? (bytes + kPage - 1) / kPage : 1; }

bool DmaArena::create(uint64_t bytes) {
  size_ = pages_for(bytes) * kPage;
  fd_ = memfd_create("hcasim-dma", MFD_CLOEXEC);
  if (fd_ < 0) return false;
  void* p = MAP_FAILED;
  if (ftruncate(fd_, off_t(size_)) == 0) p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    errno = e;
    return false;
  }
  base_ = static_cast<uint8_t*>(p);
  // As a driver does for its queues (ibv_dontfork_range): a forked child does not inherit them.
  madvise(base_, size_, MADV_DONTFORK);
  free_[0] = size_ / kPage;
  return true;
}

uint8_t* DmaArena::alloc(uint64_t bytes) {
  const uint64_t n = pages_for(bytes);
  std::lock_guard<std::mutex> g(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < n) continue;
    const uint64_t first = it->first, left = it->second - n;
    free_.erase(it);
    if (left) free_[first + n] = left;
    in_use_ += n;
    // Never-touched pages of a memfd read as zero, and free() punches given-back pages out.
    return base_ + first * kPage;
  }
  return nullptr;
}

bool DmaArena::free(uint8_t* p, uint64_t bytes) {
  if (!base_ || p < base_ || p >= base_ + size_) return false;
  const uint64_t first = uint64_t(p - base_) / kPage, n = pages_for(bytes);
  // Give the memory back to the system; what is handed out again reads as zero.
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(first * kPage), off_t(n * kPage)) != 0)
    std::memset(p, 0, n * kPage);
  std::lock_guard<std::mutex> g(mu_);
  in_use_ -= n;
  auto next = free_.lower_bound(first);
  uint64_t start = first, count = n;
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == first) {
      start = prev->first;
      count += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && first + n == next->first) {
    count += next->second;
    free_.erase(next);
  }
  free_[start] = count;
  return true;
}

uint64_t DmaArena::pages_in_use() const {
  std::lock_guard<std::mutex> g(mu_);
  return in_use_;
}

std::string map_client_arena(int fd, pid_t pid, uint64_t hva, uint64_t len, DmaWindow& out) {
  const std::string what = fd_target(fd);
  if (what.rfind("/memfd:", 0) != 0) return "the DMA arena descriptor is not a memfd (it is " + what + ")";
  struct stat st {};
  if (len == 0 || len % kPage || hva % kPage) return "the DMA arena's address or length is not page-aligned";
  if (fstat(fd, &st) != 0 || uint64_t(st.st_size) < len)
    return "the DMA arena memfd is smaller than the length HELLO gives";
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return std::string("cannot map the DMA arena: ") + std::strerror(errno);
  auto* local = static_cast<uint8_t*>(p);
  // The client must really have this memfd at hva: otherwise the device's writes would land
  // where the program never looks. A random mark through the mapping reads back there.
  uint64_t saved, mark = std::random_device{}() | (uint64_t(std::random_device{}()) << 32), seen = 0;
  std::memcpy(&saved, local, sizeof saved);
  std::memcpy(local, &mark, sizeof mark);
  iovec l{&seen, sizeof seen}, r{reinterpret_cast<void*>(uintptr_t(hva)), sizeof seen};
  const bool same = process_vm_readv(pid, &l, 1, &r, 1, 0) == ssize_t(sizeof seen) && seen == mark;
  std::memcpy(local, &saved, sizeof saved);
  if (!same) {
    munmap(p, len);
    return "the DMA arena memfd is not mapped at the address HELLO gives";
  }
  out = DmaWindow{local, hva, len};
  return "";
}

std::string fd_target(int fd) {
  char link[128] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, size_t(n)) : "unknown";
}

void unmap_client_arena(DmaWindow& w) {
  if (w.local) munmap(w.local, w.len);
  w = DmaWindow{};
}

}  // namespace hcasim::fabric
