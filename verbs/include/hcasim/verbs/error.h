// SPDX-License-Identifier: Apache-2.0
/**
 * @file error.h
 * @brief Exceptions thrown by the verbs data path.
 *
 * Every failure says what was being done and on which object ("pair 0->2 (hcasim0 qpn 0x12):
 * ..."), so a log line is enough to find the cause.
 */
#pragma once

#include <stdexcept>
#include <string>

namespace hcasim::verbs {

/** @brief Base class of every error the library throws. */
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** @brief A verbs call failed or a work completion came back with an error status. */
class IoError : public Error {
 public:
  using Error::Error;
};

/** @brief A wait ran past its deadline. */
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/** @brief Peer address bytes are malformed; field() names the offending field. */
class AddressError : public Error {
 public:
  AddressError(std::string field, const std::string& what) : Error(what), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

/** @brief The wire protocol was violated (unknown message, credit overrun, ...). */
class ProtocolError : public Error {
 public:
  using Error::Error;
};

/** @brief A rendezvous store failed (connection, I/O, timeout is TimeoutError). */
class StoreError : public Error {
 public:
  using Error::Error;
};

/** @brief "what: strerror(err)" as an IoError. */
[[noreturn]] void throwSystemError(const std::string& what, int err);

}  // namespace hcasim::verbs
