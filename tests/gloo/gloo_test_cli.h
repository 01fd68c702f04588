// SPDX-License-Identifier: Apache-2.0
/**
 * @file gloo_test_cli.h
 * @brief What the Gloo test programs (gloo_allreduce, gloo_algorithms) share: the usage error,
 *        option values, and the ibverbs devices present. Nothing simulator-specific.
 */
#pragma once

#include <gloo/common/error.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace gloo_test {

/** @brief The programs' exit statuses: passed, a wrong result, a bad command line, a Gloo error. */
constexpr int kExitOk = 0, kExitWrong = 1, kExitUsage = 2, kExitError = 3;

/** @brief A bad command line (the programs exit with status kExitUsage). */
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/** @brief @p s as an integer in [@p lo, @p hi], or a UsageError naming the option @p what. */
inline int parseInt(const char* what, const std::string& s, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || errno || v < lo || v > hi)
    throw UsageError(std::string(what) + ": expected an integer from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", got '" + s + "'");
  return int(v);
}

/** @brief "a,b,c" as {"a", "b", "c"} (empty pieces kept, so callers can refuse them). */
inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  size_t start = 0;
  for (;;) {
    const size_t c = s.find(',', start);
    v.push_back(s.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return v;
}

/** @brief The names of the ibverbs devices present, sorted. */
inline std::vector<std::string> deviceNames() {
  std::vector<std::string> v;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return v;
  for (int i = 0; i < n; ++i) v.push_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  std::sort(v.begin(), v.end());
  return v;
}

/** @brief "a, b, c", or "(none)". */
inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

/** @brief The kind and message of the exception being handled (call inside a catch block). */
inline std::string currentError() {
  try {
    throw;
  } catch (const gloo::IoException& e) {
    return std::string("gloo::IoException: ") + e.what();
  } catch (const gloo::InvalidOperationException& e) {
    return std::string("gloo::InvalidOperationException: ") + e.what();
  } catch (const gloo::EnforceNotMet& e) {
    return std::string("gloo::EnforceNotMet: ") + e.what();
  } catch (const gloo::Exception& e) {
    return std::string("gloo::Exception: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

}  // namespace gloo_test
