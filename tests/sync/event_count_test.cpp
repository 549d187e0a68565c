#include "thread_system/sync/event_count.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../support/test_support.hpp"

namespace ts = thread_system;

// Ping-pong through two flags guarded only by event counts: a lost wake-up
// would leave one side asleep forever (the watchdog would abort the test).
TEST(EventCount, PingPongNeverLosesAWakeUp) {
  ts::test::round_budget budget(ts::test::scaled(100'000), 10'000);
  ts::event_count ec;
  std::atomic<std::uint64_t> turn{0};  // even: ping's turn, odd: pong's turn
  // Set by ping before it hands over its last turn; the turn's release/acquire
  // orders it for pong, so relaxed is enough.
  std::atomic<bool> stop{false};

  auto wait_for_turn = [&](std::uint64_t want) {
    while (turn.load(std::memory_order_acquire) != want) {  // pairs with the other side's release store
      const auto key = ec.prepare_wait();
      if (turn.load(std::memory_order_acquire) == want) {  // pairs with the other side's release store
        ec.cancel_wait();
        break;
      }
      ec.commit_wait(key);
    }
  };

  std::thread pong([&] {
    for (std::uint64_t i = 0;; ++i) {
      wait_for_turn(2 * i + 1);
      if (stop.load(std::memory_order_relaxed)) return;  // ordered by the turn's acquire
      turn.store(2 * i + 2, std::memory_order_release);  // pairs with ping's acquire in wait_for_turn
      ec.notify_all();
    }
  });
  std::uint64_t i = 0;
  for (;; ++i) {
    wait_for_turn(2 * i);
    const bool last = !budget.next(i);
    if (last) stop.store(true, std::memory_order_relaxed);  // published by the release store below
    turn.store(2 * i + 1, std::memory_order_release);       // pairs with pong's acquire in wait_for_turn
    ec.notify_all();
    if (last) break;
  }
  pong.join();
  EXPECT_EQ(i, budget.ran());
  EXPECT_EQ(turn.load(std::memory_order_seq_cst), 2 * budget.ran() + 1);  // after join()
  EXPECT_EQ(ec.waiters(), 0U);
}

TEST(EventCount, NotifyWithoutWaitersIsHarmless) {
  ts::event_count ec;
  ec.notify_one();
  ec.notify_all();
  const auto key = ec.prepare_wait();
  ec.notify_one();  // after prepare: commit must return at once
  ec.commit_wait(key);
  EXPECT_EQ(ec.waiters(), 0U);
}

// A deadline long past returns false at once, time_point::min() included
// (the time left was computed by subtracting now from it, which overflowed
// into a wait of ~292 years; the per-test watchdog fails that).
TEST(EventCount, ADeadlineLongPastReturnsAtOnce) {
  ts::event_count ec;
  for (const auto deadline : {std::chrono::steady_clock::time_point::min(), std::chrono::steady_clock::time_point{},
                              std::chrono::steady_clock::now() - std::chrono::hours(1)}) {
    const auto key = ec.prepare_wait();
    EXPECT_FALSE(ec.commit_wait_until(key, deadline));
  }
}
