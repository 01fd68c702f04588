// SPDX-License-Identifier: Apache-2.0
// The TcpStore's wire protocol: see store_tcp_protocol.h.
#include "store_tcp_protocol.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace hcasim::verbs::tcp_store {
namespace {

/** The body's arguments after its op; false if one runs past the end. */
bool split_args(const uint8_t* p, const uint8_t* end, std::vector<Bytes>& args) {
  while (p < end) {
    if (end - p < 4) return false;
    const uint32_t al = get32(p);
    p += 4;
    if (uint32_t(end - p) < al) return false;
    args.emplace_back(p, p + al);
    p += al;
  }
  return true;
}

/** A stored value as a decimal i64 (what ADD keeps); false if it is not one. */
bool stored_number(const Bytes& b, int64_t& v) {
  if (b.empty()) return v = 0, true;
  const std::string s(b.begin(), b.end());
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size() && !s.empty() && s.find('\0') == std::string::npos;
}

uint8_t add(std::map<std::string, Bytes>& map, const std::string& key, const Bytes& delta, Bytes& result) {
  int64_t v = 0;
  auto it = map.find(key);
  if (it != map.end() && !stored_number(it->second, v)) return kBad;
  v = int64_t(uint64_t(v) + uint64_t(bytesI64(delta.data())));  // wraps, never overflows
  const std::string s = std::to_string(v);
  map[key].assign(s.begin(), s.end());
  result = i64Bytes(v);
  return kOk;
}

}  // namespace

void put32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}
uint32_t get32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}
Bytes i64Bytes(int64_t v) {
  Bytes b;
  for (int s = 56; s >= 0; s -= 8) b.push_back(uint8_t(uint64_t(v) >> s));
  return b;
}
int64_t bytesI64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return int64_t(v);
}

Bytes request_frame(uint8_t op, const std::vector<Bytes>& args) {
  Bytes body;
  body.push_back(op);
  for (const auto& a : args) {
    put32(body, uint32_t(a.size()));
    body.insert(body.end(), a.begin(), a.end());
  }
  Bytes frame;
  put32(frame, uint32_t(body.size()));
  frame.insert(frame.end(), body.begin(), body.end());
  return frame;
}

uint8_t execute(const uint8_t* body, size_t len, std::map<std::string, Bytes>& map, Bytes& result) {
  result.clear();
  if (len == 0) return kBad;
  const uint8_t op = body[0];
  std::vector<Bytes> args;
  if (!split_args(body + 1, body + len, args)) return kBad;
  auto key = [&](size_t i) { return std::string(args[i].begin(), args[i].end()); };
  if (op == kSet && args.size() == 2) {
    map[key(0)] = args[1];
  } else if (op == kGet && args.size() == 1) {
    auto it = map.find(key(0));
    if (it == map.end()) return kNotFound;
    result = it->second;
  } else if (op == kCheck) {
    for (size_t k = 0; k < args.size(); ++k)
      if (!map.count(key(k))) return kNotFound;
  } else if (op == kAdd && args.size() == 2 && args[1].size() == 8) {
    return add(map, key(0), args[1], result);
  } else if (op == kDel && args.size() == 1) {
    map.erase(key(0));
  } else {
    return kBad;
  }
  return kOk;
}

bool serve_frames(Bytes& in, std::map<std::string, Bytes>& map, Bytes& out) {
  size_t at = 0;
  bool ok = true;
  while (in.size() - at >= 4) {
    const uint32_t len = get32(in.data() + at);
    if (len == 0 || len > kMaxFrame) {
      ok = false;
      break;
    }
    if (in.size() - at - 4 < size_t(len)) break;
    Bytes result;
    const uint8_t status = execute(in.data() + at + 4, len, map, result);
    put32(out, uint32_t(1 + result.size()));
    out.push_back(status);
    out.insert(out.end(), result.begin(), result.end());
    at += 4 + size_t(len);
  }
  in.erase(in.begin(), in.begin() + long(at));
  return ok;
}

}  // namespace hcasim::verbs::tcp_store
