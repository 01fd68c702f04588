// SPDX-License-Identifier: Apache-2.0
// FileStore: one file per key in a shared directory. set() writes a temporary file and
// renames it into place, so a reader sees either no file or the whole value. add() holds an
// flock(2) on "<key file>.lock" around its read-modify-write.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <thread>

#include "hcasim/verbs/error.h"
#include "hcasim/verbs/store.h"

namespace hcasim::verbs {
namespace {

void mkdirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST)
        throw StoreError("file store: mkdir " + cur + ": " + std::strerror(errno));
    }
    if (i < dir.size()) cur += dir[i];
  }
}

bool readFile(const std::string& path, Bytes& out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw StoreError("file store: open " + path + ": " + std::strerror(errno));
  }
  Bytes b;
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      throw StoreError("file store: read " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    b.insert(b.end(), buf, buf + n);
  }
  close(fd);
  out.swap(b);
  return true;
}

void writeAtomically(const std::string& path, const Bytes& value) {
  static std::atomic<uint64_t> seq{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + "." +
                          std::to_string(seq++);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw StoreError("file store: create " + tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < value.size()) {
    const ssize_t n = write(fd, value.data() + off, value.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      unlink(tmp.c_str());
      throw StoreError("file store: write " + tmp + ": " + std::strerror(e));
    }
    off += size_t(n);
  }
  if (fsync(fd) != 0 && errno != EINVAL) { /* best effort on file systems without fsync */
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    throw StoreError("file store: rename " + tmp + " -> " + path + ": " + std::strerror(e));
  }
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  mkdirs(dir_);
}

std::string FileStore::path(const std::string& key) const {
  // Keys may hold '/', so escape everything but [A-Za-z0-9._-] as %XX; "." / ".." cannot result.
  static const char* hex = "0123456789ABCDEF";
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && !name.empty())) {
      name += char(c);
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  if (name.empty()) name = "%";
  return dir_ + "/" + name;
}

void FileStore::set(const std::string& key, const Bytes& value) { writeAtomically(path(key), value); }

bool FileStore::tryGet(const std::string& key, Bytes& value) { return readFile(path(key), value); }

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (access(path(k).c_str(), F_OK) != 0) return false;
  return true;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  const std::string p = path(key);
  const std::string lock = p + ".lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw StoreError("file store: open " + lock + ": " + std::strerror(errno));
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const int e = errno;
      close(fd);
      throw StoreError("file store: flock " + lock + ": " + std::strerror(e));
    }
  }
  int64_t v = 0;
  try {
    Bytes cur;
    if (readFile(p, cur) && !cur.empty()) v = std::stoll(std::string(cur.begin(), cur.end()));
    v += delta;
    const std::string s = std::to_string(v);
    writeAtomically(p, Bytes(s.begin(), s.end()));
  } catch (...) {
    flock(fd, LOCK_UN);
    close(fd);
    throw;
  }
  flock(fd, LOCK_UN);
  close(fd);
  return v;
}

void FileStore::erase(const std::string& key) {
  if (unlink(path(key).c_str()) != 0 && errno != ENOENT)
    throw StoreError("file store: unlink " + path(key) + ": " + std::strerror(errno));
}

}  // namespace hcasim::verbs
