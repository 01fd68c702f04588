// SPDX-License-Identifier: Apache-2.0
// Store defaults (polling with back-off), PrefixStore, HashStore and makeStore().
#include <algorithm>
#include <stdexcept>
#include <thread>

#include "hcasim/verbs/error.h"
#include "hcasim/verbs/store.h"

namespace hcasim::verbs {
namespace {

using Clock = std::chrono::steady_clock;

std::string joinKeys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
  return s;
}

// Polls @p ready with a back-off from 100 us to 20 ms until it holds or the deadline passes.
template <class F>
bool pollUntil(F ready, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto nap = std::chrono::microseconds(100);
  for (;;) {
    if (ready()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::microseconds>(
        nap, std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()) +
                 std::chrono::microseconds(1)));
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(20));
  }
}

uint16_t parsePort(const std::string& s, const std::string& spec) {
  char* end = nullptr;
  long p = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || p < 0 || p > 65535)
    throw std::invalid_argument("store spec '" + spec + "': port '" + s + "' is not 0..65535");
  return uint16_t(p);
}

}  // namespace

Bytes Store::get(const std::string& key, std::chrono::milliseconds timeout) {
  Bytes v;
  if (!pollUntil([&] { return tryGet(key, v); }, timeout))
    throw TimeoutError(describe() + ": key '" + key + "' did not appear within " +
                       std::to_string(timeout.count()) + " ms");
  return v;
}

bool Store::check(const std::vector<std::string>& keys) {
  Bytes v;
  for (const auto& k : keys)
    if (!tryGet(k, v)) return false;
  return true;
}

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> missing = keys;
  const bool ok = pollUntil(
      [&] {
        std::vector<std::string> still;
        for (const auto& k : missing)
          if (!check({k})) still.push_back(k);
        missing.swap(still);
        return missing.empty();
      },
      timeout);
  if (!ok)
    throw TimeoutError(describe() + ": keys did not appear within " + std::to_string(timeout.count()) +
                       " ms: " + joinKeys(missing));
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  for (const auto& key : keys) full.push_back(k(key));
  return inner_->check(full);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) {
  std::vector<std::string> full;
  for (const auto& key : keys) full.push_back(k(key));
  inner_->wait(full, t);
}

// ---- HashStore ---------------------------------------------------------------------------

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> g(mu_);
    map_[key] = value;
  }
  cv_.notify_all();
}

bool HashStore::tryGet(const std::string& key, Bytes& value) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  value = it->second;
  return true;
}

Bytes HashStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> g(mu_);
  if (!cv_.wait_for(g, timeout, [&] { return map_.count(key) != 0; }))
    throw TimeoutError(describe() + ": key '" + key + "' did not appear within " +
                       std::to_string(timeout.count()) + " ms");
  return map_[key];
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> g(mu_);
  auto all = [&] {
    for (const auto& k : keys)
      if (!map_.count(k)) return false;
    return true;
  };
  if (!cv_.wait_for(g, timeout, all)) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!map_.count(k)) missing.push_back(k);
    throw TimeoutError(describe() + ": keys did not appear within " + std::to_string(timeout.count()) +
                       " ms: " + joinKeys(missing));
  }
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard<std::mutex> g(mu_);
    Bytes& b = map_[key];
    int64_t cur = 0;
    if (!b.empty()) cur = std::stoll(std::string(b.begin(), b.end()));
    v = cur + delta;
    const std::string s = std::to_string(v);
    b.assign(s.begin(), s.end());
  }
  cv_.notify_all();
  return v;
}

void HashStore::erase(const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  map_.erase(key);
}

// ---- makeStore ---------------------------------------------------------------------------

std::shared_ptr<Store> makeStore(const std::string& spec, int rank, std::chrono::milliseconds timeout) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "hash" && rest.empty()) return std::make_shared<HashStore>();
  if (kind == "file") {
    if (rest.empty()) throw std::invalid_argument("store spec '" + spec + "': file:DIR needs a directory");
    return std::make_shared<FileStore>(rest);
  }
  if (kind == "tcp" || kind == "redis") {
    const auto c = rest.rfind(':');
    if (c == std::string::npos || c == 0)
      throw std::invalid_argument("store spec '" + spec + "': expected " + kind + ":HOST:PORT");
    const std::string host = rest.substr(0, c);
    const uint16_t port = parsePort(rest.substr(c + 1), spec);
    if (kind == "tcp") {
      if (port == 0)
        throw std::invalid_argument("store spec '" + spec + "': tcp needs a fixed port every rank knows");
      return std::make_shared<TcpStore>(host, port, rank == 0, timeout);
    }
    return std::make_shared<RedisStore>(host, port, timeout);
  }
  throw std::invalid_argument("store spec '" + spec +
                              "': expected hash, file:DIR, tcp:HOST:PORT or redis:HOST:PORT");
}

}  // namespace hcasim::verbs
