// SPDX-License-Identifier: Apache-2.0
// channel_reader: how soon the thread that waits on a completion channel handles a completion,
// seen from the thread that posted it. This is the shape of Gloo's ibverbs transport (a loop
// thread in poll(2) on the channel; the application thread posts, then tears down) and the
// window its teardown race depends on (docs/verbs.md, "Gloo at teardown").
//
// Two RC QPs on two simulated HCAs; the sender's CQ is on a completion channel. Per round the
// main thread posts one signaled 64-byte RDMA WRITE and, as soon as ibv_post_send returns, notes
// whether the completion was already handled (polled) by the channel's reader; then it waits
// for it, and lets GAP microseconds pass (so the reader is back asleep in poll(2), its CQ
// armed, when the next post comes). The reader is
//   thread  (default) a thread of its own: poll(2) on the channel fd, ibv_get_cq_event,
//           ibv_ack_cq_events, ibv_req_notify_cq, ibv_poll_cq, as Gloo's loop thread does;
//   same    the main thread itself, after the post (as `ib_write_lat -e` does).
// Printed: "handled before ibv_post_send returned: K of N", and how long ibv_post_send took. In
// the realtime clock, a reader of its own is given the CPU by the poster
// (driver/provider/handoff.h), so K is most of N.
//
//   channel_reader [--reader thread|same] [--rounds N] [--gap-us GAP (default 300)]
// Exit 0 = ran, 1 = error, 2 = usage.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "write_pair.h"

namespace {

std::atomic<long> g_handled{0};
std::atomic<bool> g_stop{false};

/** @brief One event from @p s's channel: take it, re-arm, poll every CQE. False on timeout. */
bool handle_event(bench::Side& s, int timeout_ms) {
  pollfd p{s.ch->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  if (ibv_get_cq_event(s.ch, &cq, &ctx)) bench::die("ibv_get_cq_event");
  ibv_ack_cq_events(cq, 1);
  if (ibv_req_notify_cq(cq, 0)) bench::die("ibv_req_notify_cq");
  ibv_wc wc[16];
  for (int n; (n = ibv_poll_cq(cq, 16, wc)) > 0;) {
    for (int i = 0; i < n; ++i)
      if (wc[i].status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "channel_reader: completion with status %s\n", ibv_wc_status_str(wc[i].status));
        std::exit(1);
      }
    g_handled += n;
  }
  return true;
}

void reader_loop(bench::Side& s) {
  while (!g_stop.load()) handle_event(s, 10);
}

/** @brief Wait (10 s at most) until @p n completions were handled. */
void wait_handled(long n) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (g_handled.load() < n) {
    if (std::chrono::steady_clock::now() > end) {
      std::fprintf(stderr, "channel_reader: completion %ld not handled within 10 s\n", n);
      std::exit(1);
    }
    std::this_thread::yield();
  }
}

int usage() {
  std::fprintf(
      stderr, "usage: channel_reader [--reader thread|same] [--rounds N (1..100000)] [--gap-us 0..100000]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string reader = "thread";
  long rounds = 200, gap_us = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reader" && i + 1 < argc)
      reader = argv[++i];
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--gap-us" && i + 1 < argc)
      gap_us = std::strtol(argv[++i], nullptr, 10);
    else
      return usage();
  }
  if ((reader != "thread" && reader != "same") || rounds < 1 || rounds > 100000 || gap_us < 0 ||
      gap_us > 100000)
    return usage();

  bench::Side a{}, b{};
  if (!bench::open_simulated_pair(a, b, "channel_reader", true)) return 2;
  if (ibv_req_notify_cq(a.cq, 0)) bench::die("ibv_req_notify_cq");
  std::thread t;
  if (reader == "thread") t = std::thread(reader_loop, std::ref(a));

  long early = 0;
  std::vector<double> post_us;
  for (long i = 1; i <= rounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    bench::post_signaled_write(a, b);
    post_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (g_handled.load() >= i) ++early;
    if (reader == "same")
      while (g_handled.load() < i)
        if (!handle_event(a, 10000)) bench::die("no completion event within 10 s");
    wait_handled(i);
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
  }
  g_stop = true;
  if (t.joinable()) t.join();
  std::sort(post_us.begin(), post_us.end());
  std::printf(
      "channel_reader: reader %s, %ld rounds: handled before ibv_post_send returned: %ld of %ld "
      "(ibv_post_send took %.1f us median, %.1f us p90)\n",
      reader.c_str(), rounds, early, rounds, post_us[post_us.size() / 2], post_us[post_us.size() * 9 / 10]);
  bench::close_side(a);
  bench::close_side(b);
  return 0;
}
