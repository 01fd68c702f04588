// SPDX-License-Identifier: Apache-2.0
// Rendezvous stores: the same behaviour checks for every store (hash, file, TCP, Redis),
// plus what is specific to each. Redis runs against a real redis-server started on a free
// port of 127.0.0.1 (skipped, saying why, if redis-server is not installed).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "hcasim/verbs/error.h"
#include "hcasim/verbs/store.h"

using namespace hcasim::verbs;
using namespace std::chrono_literals;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/hcasim-store-XXXXXX";
  const char* d = mkdtemp(tmpl);
  if (!d) throw std::runtime_error("mkdtemp failed");
  return d;
}

uint16_t freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

Bytes B(const std::string& s) { return Bytes(s.begin(), s.end()); }

// The behaviour every store shares. @p other is a second client of the same store.
void commonChecks(Store& s, Store& other) {
  Bytes v;
  EXPECT_FALSE(s.tryGet("missing", v));
  EXPECT_FALSE(s.check({"missing"}));

  s.set("k1", B("hello"));
  EXPECT_TRUE(other.tryGet("k1", v));
  EXPECT_EQ(v, B("hello"));
  EXPECT_EQ(other.get("k1", 1s), B("hello"));
  s.set("k1", B("again"));  // overwrite
  EXPECT_EQ(other.get("k1", 1s), B("again"));

  // Binary values with zeros, and keys with '/', ':' and spaces.
  Bytes bin = {0, 1, 2, 0, 255, 0};
  s.set("rank/3:addr key", bin);
  EXPECT_EQ(other.get("rank/3:addr key", 1s), bin);
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7);
  s.set("big", big);
  EXPECT_EQ(other.get("big", 2s), big);
  s.set("empty", Bytes{});
  EXPECT_TRUE(other.tryGet("empty", v));
  EXPECT_TRUE(v.empty());

  EXPECT_TRUE(other.check({"k1", "big", "empty"}));
  EXPECT_FALSE(other.check({"k1", "nope"}));

  // get() waits for a key set later by another client.
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    s.set("late", B("x"));
  });
  EXPECT_EQ(other.get("late", 5s), B("x"));
  late.join();
  std::thread late2([&] {
    std::this_thread::sleep_for(30ms);
    s.set("w1", B("1"));
    s.set("w2", B("2"));
  });
  other.wait({"w1", "w2"}, 5s);
  late2.join();

  // Timeouts name the missing keys.
  try {
    other.get("never", 100ms);
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
  try {
    other.wait({"k1", "never2"}, 100ms);
    ADD_FAILURE() << "wait for a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never2"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("k1,"), std::string::npos) << "k1 exists: " << e.what();
  }

  // add() is atomic across clients.
  EXPECT_EQ(s.add("ctr", 5), 5);
  EXPECT_EQ(other.add("ctr", -2), 3);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      Store& c = t % 2 ? s : other;
      for (int i = 0; i < 50; ++i) c.add("ctr2", 1);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(s.add("ctr2", 0), 200);

  s.erase("k1");
  EXPECT_FALSE(other.tryGet("k1", v));
  s.erase("k1");  // erasing a missing key is fine

  // PrefixStore keeps namespaces apart.
  auto sp = std::shared_ptr<Store>(&s, [](Store*) {});
  PrefixStore p1("job1", sp), p2("job2", sp);
  p1.set("addr", B("one"));
  p2.set("addr", B("two"));
  EXPECT_EQ(p1.get("addr", 1s), B("one"));
  EXPECT_EQ(p2.get("addr", 1s), B("two"));
  EXPECT_EQ(s.get("job1/addr", 1s), B("one"));
  p1.wait({"addr"}, 1s);
}

}  // namespace

TEST(HashStore, Common) {
  HashStore s;
  commonChecks(s, s);
}

TEST(FileStore, Common) {
  const std::string dir = tempDir();
  FileStore a(dir), b(dir);
  commonChecks(a, b);
  std::system(("rm -rf " + dir).c_str());
}

TEST(FileStore, KeysAreEscapedIntoOneDirectory) {
  const std::string dir = tempDir();
  FileStore s(dir + "/nested/dirs");  // created on demand
  EXPECT_EQ(s.path("a/b"), dir + "/nested/dirs/a%2Fb");
  EXPECT_EQ(s.path(".."), dir + "/nested/dirs/%2E.");
  EXPECT_EQ(s.path(""), dir + "/nested/dirs/%");
  s.set("../escape", B("x"));
  struct stat st;
  EXPECT_NE(stat((dir + "/nested/escape").c_str(), &st), 0) << "a key escaped the store directory";
  std::system(("rm -rf " + dir).c_str());
}

TEST(FileStore, UnwritableDirectoryIsAClearError) {
  if (geteuid() == 0) {
    // root writes anywhere; use a path below a regular file instead.
    const std::string dir = tempDir();
    std::system(("touch " + dir + "/file").c_str());
    EXPECT_THROW(FileStore(dir + "/file/sub"), StoreError);
    std::system(("rm -rf " + dir).c_str());
  } else {
    EXPECT_THROW(FileStore("/proc/hcasim-no"), StoreError);
  }
}

TEST(TcpStore, Common) {
  TcpStore server("127.0.0.1", 0, true, 5s);  // rank 0 serves on a free port
  ASSERT_NE(server.port(), 0);
  TcpStore client("127.0.0.1", server.port(), false, 5s);
  commonChecks(server, client);
}

TEST(TcpStore, ClientsWaitForALateServer) {
  const uint16_t port = freePort();
  std::atomic<bool> ok{false};
  std::thread client([&] {
    TcpStore c("127.0.0.1", port, false, 5s);  // retries until the server is up
    ok = c.get("hello", 5s) == B("world");
  });
  std::this_thread::sleep_for(150ms);
  TcpStore server("127.0.0.1", port, true, 5s);
  server.set("hello", B("world"));
  client.join();
  EXPECT_TRUE(ok);
}

TEST(TcpStore, ManyRanks) {
  TcpStore server("127.0.0.1", 0, true, 5s);
  const int n = 8;
  std::vector<std::thread> ts;
  std::atomic<int> good{0};
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      TcpStore c("127.0.0.1", server.port(), false, 5s);
      c.set("rank/" + std::to_string(r), B(std::to_string(r * r)));
      std::vector<std::string> keys;
      for (int i = 0; i < n; ++i) keys.push_back("rank/" + std::to_string(i));
      c.wait(keys, 5s);
      int sum = 0;
      for (int i = 0; i < n; ++i) {
        Bytes v = c.get("rank/" + std::to_string(i), 1s);
        sum += std::stoi(std::string(v.begin(), v.end()));
      }
      if (sum == 140) ++good;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(good, n);
}

TEST(TcpStore, NoServerIsATimeout) {
  const uint16_t port = freePort();
  EXPECT_THROW(TcpStore("127.0.0.1", port, false, 200ms), TimeoutError);
}

TEST(TcpStore, PortInUseIsAClearError) {
  TcpStore server("127.0.0.1", 0, true, 5s);
  EXPECT_THROW(TcpStoreServer("127.0.0.1", server.port()), StoreError);
}

TEST(MakeStore, Specs) {
  EXPECT_NE(std::dynamic_pointer_cast<HashStore>(makeStore("hash", 0)), nullptr);
  const std::string dir = tempDir();
  EXPECT_NE(std::dynamic_pointer_cast<FileStore>(makeStore("file:" + dir, 1)), nullptr);
  std::system(("rm -rf " + dir).c_str());
  const uint16_t port = freePort();
  auto s0 = makeStore("tcp:127.0.0.1:" + std::to_string(port), 0, 2s);
  auto s1 = makeStore("tcp:127.0.0.1:" + std::to_string(port), 1, 2s);
  s0->set("a", B("b"));
  EXPECT_EQ(s1->get("a", 1s), B("b"));
  for (const char* bad : {"", "nfs:/x", "file:", "tcp:host", "tcp:host:", "tcp::5", "tcp:h:99999", "tcp:h:0",
                          "redis:h:x", "hash:extra"})
    EXPECT_THROW(makeStore(bad, 0, 100ms), std::invalid_argument) << bad;
}

// ---- Redis -------------------------------------------------------------------------------

namespace {

class RedisServer {
 public:
  RedisServer() {
    const char* candidates[] = {"/usr/bin/redis-server", "/usr/local/bin/redis-server",
                                "/usr/sbin/redis-server"};
    for (const char* c : candidates)
      if (access(c, X_OK) == 0) binary_ = c;
    if (binary_.empty()) return;
    port_ = freePort();
    dir_ = tempDir();
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      execl(binary_.c_str(), binary_.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", dir_.c_str(), "--daemonize", "no", "--loglevel", "warning",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~RedisServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st;
      waitpid(pid_, &st, 0);
    }
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  bool present() const { return !binary_.empty(); }
  uint16_t port() const { return port_; }
  /** @brief Connects until the server answers (it starts asynchronously). */
  std::unique_ptr<RedisStore> connect() {
    for (int i = 0; i < 200; ++i) {
      try {
        auto s = std::make_unique<RedisStore>("127.0.0.1", port_, 2s);
        Bytes v;
        s->tryGet("ping", v);
        return s;
      } catch (const StoreError&) {
        std::this_thread::sleep_for(20ms);
      }
    }
    return nullptr;
  }

 private:
  std::string binary_, dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace

TEST(RedisStore, CommonAgainstRealServer) {
  if (!RedisStore::available()) GTEST_SKIP() << "built without hiredis (apt-get install libhiredis-dev)";
  RedisServer server;
  if (!server.present()) GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)";
  auto a = server.connect();
  ASSERT_NE(a, nullptr) << "redis-server on port " << server.port() << " did not answer";
  auto b = server.connect();
  ASSERT_NE(b, nullptr);
  commonChecks(*a, *b);
  auto spec = makeStore("redis:127.0.0.1:" + std::to_string(server.port()), 3, 2s);
  EXPECT_EQ(spec->get("big", 1s).size(), size_t(1) << 20);
}

TEST(RedisStore, NoServerIsAClearError) {
  if (!RedisStore::available()) GTEST_SKIP() << "built without hiredis";
  try {
    RedisStore s("127.0.0.1", freePort(), 500ms);
    ADD_FAILURE() << "connected to nothing";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("redis store 127.0.0.1"), std::string::npos) << e.what();
  }
}
