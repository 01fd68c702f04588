// SPDX-License-Identifier: Apache-2.0
// What the fabric's lockstep clock reads about a client thread (sim/fabric/thread_watch.h):
// asleep, runnable, CPU time used; and a thread of another process refused.
#include "thread_watch.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace hcasim::fabric {
namespace {

TEST(ThreadWatch, ParsesStateAfterTheLastParenthesis) {
  // A thread name may hold spaces and parentheses.
  auto runnable = ThreadWatch::parse_state("42 (a) S (b) R 1 2 3\n");
  ASSERT_TRUE(runnable);
  EXPECT_TRUE(*runnable);
  EXPECT_EQ(ThreadWatch::parse_cpu("123456 789 10\n"), 123456u);
  runnable = ThreadWatch::parse_state("42 (x) S 1 2\n");
  ASSERT_TRUE(runnable);
  EXPECT_FALSE(*runnable);
  EXPECT_EQ(ThreadWatch::parse_cpu("7 0 1\n"), 7u);
}

TEST(ThreadWatch, RefusesWhatIsNotAStatLine) {
  EXPECT_FALSE(ThreadWatch::parse_state("no parenthesis"));
  EXPECT_FALSE(ThreadWatch::parse_state("42 (x)"));
  EXPECT_FALSE(ThreadWatch::parse_cpu("not a number"));
  EXPECT_FALSE(ThreadWatch::parse_cpu("12x 3"));
}

/** A thread that sleeps on a pipe until told to spin, then spins until told to stop. */
struct Subject {
  int fds[2] = {-1, -1};
  std::atomic<bool> stop{false};
  std::atomic<pid_t> tid{0};
  std::thread t;
  Subject() {
    EXPECT_EQ(pipe(fds), 0);
    t = std::thread([this] {
      tid = gettid();
      char c;
      if (read(fds[0], &c, 1) != 1) return;
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
    while (!tid) std::this_thread::yield();
  }
  ~Subject() {
    stop = true;
    if (write(fds[1], "x", 1) != 1) { /* already spinning */
    }
    t.join();
    close(fds[0]);
    close(fds[1]);
  }
};

/** The thread's state once it has settled, or after a second. */
ThreadWatch::Sample settled(const ThreadWatch& w, bool runnable) {
  ThreadWatch::Sample s{};
  for (int i = 0; i < 1000; ++i) {
    auto got = w.sample();
    if (got) s = *got;
    if (got && got->runnable == runnable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

TEST(ThreadWatch, SeesAThreadAsleepThenRunningAndItsCpuTime) {
  Subject subject;
  ThreadWatch w;
  bool foreign = true;
  ASSERT_EQ(w.open(getpid(), subject.tid, foreign), "");
  EXPECT_FALSE(foreign);
  const ThreadWatch::Sample asleep = settled(w, false);
  EXPECT_FALSE(asleep.runnable);  // blocked in read(2)
  EXPECT_EQ(asleep.cpu_ns, 0u) << "an asleep thread's CPU time is not read (one system call fewer)";
  ASSERT_EQ(write(subject.fds[1], "x", 1), 1);
  const ThreadWatch::Sample spinning = settled(w, true);
  EXPECT_TRUE(spinning.runnable);
  // It keeps using CPU time while it spins.
  uint64_t later = spinning.cpu_ns;
  for (int i = 0; i < 2000 && later < spinning.cpu_ns + 1'000'000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (auto s = w.sample()) later = s->cpu_ns;
  }
  EXPECT_GE(later, spinning.cpu_ns + 1'000'000);
}

TEST(ThreadWatch, RefusesAThreadOfAnotherProcess) {
  ThreadWatch w;
  bool foreign = false;
  // The parent is not a thread of this process.
  EXPECT_NE(w.open(getpid(), getppid(), foreign), "");
  EXPECT_TRUE(foreign);
  EXPECT_FALSE(w.watching());
  EXPECT_FALSE(w.sample());
}

TEST(ThreadWatch, AThreadThatEndedReadsAsGone) {
  ThreadWatch w;
  bool foreign = false;
  pid_t tid = 0;
  std::thread t([&] { tid = gettid(); });
  t.join();
  // Gone before it is opened: the kernel has no such task (once it has finished exiting).
  std::string why;
  for (int i = 0; i < 1000 && (why = w.open(getpid(), tid, foreign)).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_NE(why, "");
  EXPECT_TRUE(foreign);
  {
    Subject s;
    ASSERT_EQ(w.open(getpid(), s.tid, foreign), "");
  }
  // Opened while it lived, ended since.
  bool gone = false;
  for (int i = 0; i < 1000 && !(gone = !w.sample()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace hcasim::fabric
