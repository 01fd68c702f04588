// SPDX-License-Identifier: Apache-2.0
/**
 * @file ring.h
 * @brief A growable FIFO ring (a QP's in-flight messages, a unit's in-order input).
 *
 * std::deque keeps one element per 512-byte node when elements are large (a decoded WQE is
 * ~450 bytes), so it allocated and freed a node for every message; this ring allocates only
 * when it grows. References stay valid across pop_front and across push_back while no growth
 * happens (growth is rare: capacity doubles and is never given back).
 */
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace hcasim::model {

template <typename T>
class Ring {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }

  void push_back(const T& v) {
    if (n_ == buf_.size()) grow();
    buf_[(head_ + n_) & (buf_.size() - 1)] = v;
    ++n_;
  }
  void push_back(T&& v) {
    if (n_ == buf_.size()) grow();
    buf_[(head_ + n_) & (buf_.size() - 1)] = std::move(v);
    ++n_;
  }
  /** @brief Appends a slot and returns it, holding whatever it last held (an element popped
   *  before, or a default one): for elements too large to build aside and copy in. */
  T& push_back_slot() {
    if (n_ == buf_.size()) grow();
    ++n_;
    return back();
  }
  T& back() { return (*this)[n_ - 1]; }
  /** @brief Takes back the newest element (a slot filled in vain). */
  void pop_back() { --n_; }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --n_;
  }
  void clear() {
    head_ = 0;
    n_ = 0;
  }

  template <typename R>
  class Iter {
   public:
    Iter(R* r, size_t i) : r_(r), i_(i) {}
    auto& operator*() const { return (*r_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }

   private:
    R* r_;
    size_t i_;
  };
  Iter<Ring> begin() { return {this, 0}; }
  Iter<Ring> end() { return {this, n_}; }
  Iter<const Ring> begin() const { return {this, 0}; }
  Iter<const Ring> end() const { return {this, n_}; }

 private:
  void grow() {
    std::vector<T> next(buf_.empty() ? 16 : buf_.size() * 2);
    for (size_t i = 0; i < n_; ++i) next[i] = std::move((*this)[i]);
    buf_.swap(next);
    head_ = 0;
  }
  std::vector<T> buf_;
  size_t head_ = 0, n_ = 0;
};

}  // namespace hcasim::model
