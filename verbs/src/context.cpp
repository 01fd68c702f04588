// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/context.h"

#include <stdexcept>

#include "hcasim/verbs/error.h"

namespace hcasim::verbs {

Context::Context(int rank, int size, std::shared_ptr<Device> dev, ContextOptions opts)
    : rank_(rank), size_(size), dev_(std::move(dev)), opts_(std::move(opts)) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("context: rank " + std::to_string(rank) + " of size " + std::to_string(size));
  if (!dev_) throw std::invalid_argument("context: no device");
}

Context::~Context() {
  try {
    close();
  } catch (...) {
    // Best effort: a dead peer must not turn destruction into an exception.
  }
}

void Context::close() {
  if (closed_ || pairs_.empty()) return;
  closed_ = true;
  const uint8_t done = 1;
  for (int i = 0; i < size_; ++i)
    if (i != rank_) pairs_[size_t(i)]->send(Pair::kCloseTag, &done, 1);
  for (int i = 0; i < size_; ++i)
    if (i != rank_) pairs_[size_t(i)]->recv(Pair::kCloseTag);
  for (int i = 0; i < size_; ++i)
    if (i != rank_) pairs_[size_t(i)]->drain();
}

Pair& Context::pair(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_ || !pairs_.at(size_t(peer)))
    throw std::out_of_range("context rank " + std::to_string(rank_) + ": no pair to rank " +
                            std::to_string(peer));
  return *pairs_[size_t(peer)];
}

std::vector<std::unique_ptr<Pair>> Context::newPairs() const {
  std::vector<std::unique_ptr<Pair>> pairs(static_cast<size_t>(size_));
  auto group = std::make_shared<PairGroup>();  // a collective needs every link: they fail together
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    pairs[size_t(i)] =
        std::make_unique<Pair>(dev_, opts_.pair, "pair " + std::to_string(rank_) + "->" + std::to_string(i));
    pairs[size_t(i)]->setGroup(group);
  }
  return pairs;
}

void Context::connectFullMesh(Store& store) {
  if (!pairs_.empty()) throw std::logic_error("context: already connected");
  const auto timeout = opts_.pair.timeout;
  const std::string pre = opts_.prefix + "/";
  std::vector<std::unique_ptr<Pair>> pairs = newPairs();
  std::vector<uint8_t> all(size_t(size_) * Address::kSize, 0);
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    const auto b = pairs[size_t(i)]->addressBytes();
    std::copy(b.begin(), b.end(), all.begin() + long(size_t(i) * Address::kSize));
  }
  store.set(pre + "addr/" + std::to_string(rank_), all);
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    const std::string key = pre + "addr/" + std::to_string(i);
    const Bytes peerAll = store.get(key, timeout);
    if (peerAll.size() != size_t(size_) * Address::kSize)
      throw AddressError("length", "store key '" + key + "' holds " + std::to_string(peerAll.size()) +
                                       " bytes, expected " + std::to_string(size_) + " addresses of " +
                                       std::to_string(Address::kSize) +
                                       " (a different group size, or a stale store?)");
    Address a;
    try {
      a = Address::fromBytes(peerAll.data() + size_t(rank_) * Address::kSize, Address::kSize);
    } catch (const AddressError& e) {
      throw AddressError(e.field(), "rank " + std::to_string(i) + "'s address for rank " +
                                        std::to_string(rank_) + " (store key '" + key + "'): " + e.what());
    }
    pairs[size_t(i)]->connect(a);
  }
  pairs_ = std::move(pairs);
  if (opts_.readyBarrier && size_ > 1) {
    store.set(pre + "ready/" + std::to_string(rank_), std::string("1"));
    std::vector<std::string> keys;
    for (int i = 0; i < size_; ++i)
      if (i != rank_) keys.push_back(pre + "ready/" + std::to_string(i));
    store.wait(keys, timeout);
  }
}

}  // namespace hcasim::verbs
