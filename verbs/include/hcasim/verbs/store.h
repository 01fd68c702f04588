// SPDX-License-Identifier: Apache-2.0
/**
 * @file store.h
 * @brief Rendezvous stores: a small key/value service ranks use to exchange addresses.
 *
 * | store        | spec              | notes                                                |
 * |--------------|-------------------|------------------------------------------------------|
 * | HashStore    | hash              | in process (ranks as threads)                        |
 * | FileStore    | file:DIR          | a shared directory; writes are tmp file + rename      |
 * | TcpStore     | tcp:HOST:PORT     | rank 0 serves on HOST:PORT, every rank is a client    |
 * | RedisStore   | redis:HOST:PORT   | hiredis; SET/GET/EXISTS/INCRBY                       |
 *
 * Values are bytes. get() and wait() block until the keys exist or the timeout passes
 * (TimeoutError naming the missing keys). add() is an atomic counter (its key must only be
 * used with add()).
 */
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hcasim::verbs {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{30000};
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /** @brief Waits for @p key, then returns its value. */
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout = kDefaultTimeout);
  /** @brief The value if @p key exists now. */
  virtual bool tryGet(const std::string& key, Bytes& value) = 0;
  /** @brief True if every key exists now. */
  virtual bool check(const std::vector<std::string>& keys);
  /** @brief Waits until every key exists. */
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout = kDefaultTimeout);
  /** @brief Atomically adds @p delta to the counter @p key (created as 0); returns the new value. */
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual void erase(const std::string& key) = 0;
  virtual std::string describe() const = 0;

  void set(const std::string& key, const std::string& value) { set(key, Bytes(value.begin(), value.end())); }
};

/** @brief Prepends "prefix/" to every key of another store. */
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  using Store::set;
  void set(const std::string& key, const Bytes& value) override { inner_->set(k(key), value); }
  Bytes get(const std::string& key, std::chrono::milliseconds t = kDefaultTimeout) override {
    return inner_->get(k(key), t);
  }
  bool tryGet(const std::string& key, Bytes& v) override { return inner_->tryGet(k(key), v); }
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds t = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t d) override { return inner_->add(k(key), d); }
  void erase(const std::string& key) override { inner_->erase(k(key)); }
  std::string describe() const override { return inner_->describe() + " prefix " + prefix_; }

 private:
  std::string k(const std::string& key) const { return prefix_ + "/" + key; }
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

/** @brief In-process store (threads of one process). */
class HashStore : public Store {
 public:
  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout = kDefaultTimeout) override;
  bool tryGet(const std::string& key, Bytes& value) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void erase(const std::string& key) override;
  std::string describe() const override { return "hash store"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> map_;
};

/** @brief A directory shared by every rank (local or a shared file system). */
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir);  ///< creates the directory if needed
  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  bool tryGet(const std::string& key, Bytes& value) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void erase(const std::string& key) override;
  std::string describe() const override { return "file store " + dir_; }
  /** @brief The file that holds @p key (keys are escaped into one file name). */
  std::string path(const std::string& key) const;

 private:
  std::string dir_;
};

/** @brief The TCP store's server: rank 0 runs one (a thread), every rank connects to it. */
class TcpStoreServer {
 public:
  /** @brief Listens on @p host:@p port (port 0: any free port). Throws StoreError. */
  TcpStoreServer(const std::string& host, uint16_t port);
  ~TcpStoreServer();
  uint16_t port() const { return port_; }

 private:
  void serve();
  int listenFd_ = -1, wakeFd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::map<std::string, Bytes> map_;
};

class TcpStore : public Store {
 public:
  /**
   * @brief Connects to host:port, retrying until @p timeout (the server may start later).
   * With @p serve (rank 0), first starts a TcpStoreServer there.
   */
  TcpStore(const std::string& host, uint16_t port, bool serve,
           std::chrono::milliseconds timeout = kDefaultTimeout);
  ~TcpStore() override;
  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  bool tryGet(const std::string& key, Bytes& value) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void erase(const std::string& key) override;
  std::string describe() const override;
  uint16_t port() const { return port_; }

 private:
  Bytes call(uint8_t op, const std::vector<Bytes>& args, uint8_t& status);
  std::string host_;
  uint16_t port_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mu_;
  int fd_ = -1;
  std::chrono::milliseconds ioTimeout_;
};

class RedisStore : public Store {
 public:
  /** @brief Connects (throws StoreError; also if built without hiredis). */
  RedisStore(const std::string& host, uint16_t port, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~RedisStore() override;
  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  bool tryGet(const std::string& key, Bytes& value) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void erase(const std::string& key) override;
  std::string describe() const override;
  static bool available();  ///< built with hiredis

 private:
  std::string host_;
  uint16_t port_;
  std::mutex mu_;
  void* ctx_ = nullptr;  // redisContext*
};

/**
 * @brief A store from a spec: "hash", "file:DIR", "tcp:HOST:PORT" (rank 0 serves),
 * "redis:HOST:PORT". Throws std::invalid_argument for a malformed spec.
 */
std::shared_ptr<Store> makeStore(const std::string& spec, int rank,
                                 std::chrono::milliseconds timeout = Store::kDefaultTimeout);

}  // namespace hcasim::verbs
