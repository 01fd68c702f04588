// SPDX-License-Identifier: Apache-2.0
/**
 * @file store_tcp_protocol.h
 * @brief The TcpStore's wire protocol, both sides: framing, request decoding and the server's
 *        execution of a request on its map. Internal to verbs/ (store_tcp.cpp) and its fuzz
 *        harness (tests/fuzz/tcp_store_fuzz.cpp): a server must survive any bytes a client sends.
 *
 * Frames both ways: u32 big-endian body length (1 .. kMaxFrame), then the body.
 *   request body: u8 op, then arguments, each u32 big-endian length + bytes
 *   reply body:   u8 status (kOk, kNotFound, kBad), then the result bytes
 * ops: kSet key value | kGet key -> value | kCheck key... | kAdd key i64 -> i64 | kDel key
 */
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hcasim/verbs/store.h"

namespace hcasim::verbs::tcp_store {

constexpr uint8_t kSet = 1, kGet = 2, kCheck = 3, kAdd = 4, kDel = 5;  ///< request ops
constexpr uint8_t kOk = 0, kNotFound = 1, kBad = 2;                    ///< reply statuses
constexpr uint32_t kMaxFrame = 256u << 20;                             ///< largest body either way

/** @brief Appends @p v, big-endian. */
void put32(Bytes& b, uint32_t v);
/** @brief The big-endian u32 at @p p. */
uint32_t get32(const uint8_t* p);
/** @brief @p v as 8 big-endian bytes. */
Bytes i64Bytes(int64_t v);
/** @brief The big-endian i64 at @p p. */
int64_t bytesI64(const uint8_t* p);

/** @brief A request frame: op and arguments, length-prefixed. */
Bytes request_frame(uint8_t op, const std::vector<Bytes>& args);

/**
 * @brief Runs the request body @p body (@p len bytes) on @p map: returns the reply status and
 * sets @p result. A malformed body (an argument running past its end), an unknown op, the wrong
 * number of arguments or an ADD to a value that is not a number is kBad and changes nothing.
 * ADD wraps around at 64 bits, as two's complement does.
 */
uint8_t execute(const uint8_t* body, size_t len, std::map<std::string, Bytes>& map, Bytes& result);

/**
 * @brief Serves every complete request frame at the front of @p in (and removes it), appending
 * each reply frame to @p out; an incomplete frame stays for more bytes. False if @p in holds a
 * frame length of 0 or over kMaxFrame: the client is broken and is dropped.
 */
bool serve_frames(Bytes& in, std::map<std::string, Bytes>& map, Bytes& out);

}  // namespace hcasim::verbs::tcp_store
