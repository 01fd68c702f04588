// SPDX-License-Identifier: Apache-2.0
// RedisStore over hiredis: SET / GET / EXISTS / INCRBY / DEL; waiting is polling (Store::get).
#include <cstring>

#include "hcasim/verbs/error.h"
#include "hcasim/verbs/store.h"

#ifdef HCASIM_VERBS_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace hcasim::verbs {

#ifdef HCASIM_VERBS_HAVE_HIREDIS
namespace {

redisContext* rc(void* p) { return static_cast<redisContext*>(p); }

struct Reply {
  redisReply* r;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

}  // namespace

bool RedisStore::available() { return true; }

RedisStore::RedisStore(const std::string& host, uint16_t port, std::chrono::milliseconds timeout)
    : host_(host), port_(port) {
  timeval tv{long(timeout.count() / 1000), long((timeout.count() % 1000) * 1000)};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  if (!c)
    throw StoreError("redis store " + host + ":" + std::to_string(port) + ": cannot allocate a context");
  if (c->err) {
    const std::string e = c->errstr;
    redisFree(c);
    throw StoreError("redis store " + host + ":" + std::to_string(port) + ": " + e);
  }
  redisSetTimeout(c, tv);
  ctx_ = c;
}

RedisStore::~RedisStore() {
  if (ctx_) redisFree(rc(ctx_));
}

std::string RedisStore::describe() const { return "redis store " + host_ + ":" + std::to_string(port_); }

namespace {
// Turns a redisCommand() result into a reply or a StoreError.
redisReply* checked(void* r, void* ctx, const std::string& who) {
  redisContext* c = static_cast<redisContext*>(ctx);
  if (!r) throw StoreError(who + ": " + (c->err ? c->errstr : "no reply"));
  auto* rep = static_cast<redisReply*>(r);
  if (rep->type == REDIS_REPLY_ERROR) {
    const std::string e(rep->str, rep->len);
    freeReplyObject(rep);
    throw StoreError(who + ": " + e);
  }
  return rep;
}
}  // namespace

void RedisStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> g(mu_);
  Reply r{checked(redisCommand(rc(ctx_), "SET %b %b", key.data(), key.size(), value.data(), value.size()),
                  ctx_, describe())};
}

bool RedisStore::tryGet(const std::string& key, Bytes& value) {
  std::lock_guard<std::mutex> g(mu_);
  Reply r{checked(redisCommand(rc(ctx_), "GET %b", key.data(), key.size()), ctx_, describe())};
  if (r.r->type == REDIS_REPLY_NIL) return false;
  if (r.r->type != REDIS_REPLY_STRING) throw StoreError(describe() + ": GET " + key + ": not a string");
  value.assign(reinterpret_cast<const uint8_t*>(r.r->str),
               reinterpret_cast<const uint8_t*>(r.r->str) + r.r->len);
  return true;
}

bool RedisStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& k : keys) {
    Reply r{checked(redisCommand(rc(ctx_), "EXISTS %b", k.data(), k.size()), ctx_, describe())};
    if (r.r->type != REDIS_REPLY_INTEGER || r.r->integer == 0) return false;
  }
  return true;
}

int64_t RedisStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> g(mu_);
  Reply r{checked(redisCommand(rc(ctx_), "INCRBY %b %lld", key.data(), key.size(), (long long)delta), ctx_,
                  describe())};
  if (r.r->type != REDIS_REPLY_INTEGER) throw StoreError(describe() + ": INCRBY " + key + ": not an integer");
  return r.r->integer;
}

void RedisStore::erase(const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  Reply r{checked(redisCommand(rc(ctx_), "DEL %b", key.data(), key.size()), ctx_, describe())};
}

#else  // built without hiredis

bool RedisStore::available() { return false; }
RedisStore::RedisStore(const std::string& host, uint16_t port, std::chrono::milliseconds)
    : host_(host), port_(port) {
  throw StoreError("redis store: this build has no hiredis (apt-get install libhiredis-dev and reconfigure)");
}
RedisStore::~RedisStore() = default;
std::string RedisStore::describe() const { return "redis store (unavailable)"; }
void RedisStore::set(const std::string&, const Bytes&) {}
bool RedisStore::tryGet(const std::string&, Bytes&) { return false; }
bool RedisStore::check(const std::vector<std::string>&) { return false; }
int64_t RedisStore::add(const std::string&, int64_t) { return 0; }
void RedisStore::erase(const std::string&) {}

#endif

}  // namespace hcasim::verbs
