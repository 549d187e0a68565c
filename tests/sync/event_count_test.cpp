#include "thread_system/sync/event_count.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../support/test_support.hpp"

namespace ts = thread_system;

// Ping-pong through two flags guarded only by event counts: a lost wake-up
// would leave one side asleep forever (the watchdog would abort the test).
TEST(EventCount, PingPongNeverLosesAWakeUp) {
  const std::uint64_t rounds = ts::test::scaled(100'000);
  ts::event_count ec;
  std::atomic<std::uint64_t> turn{0};  // even: ping's turn, odd: pong's turn

  auto wait_for_turn = [&](std::uint64_t want) {
    while (turn.load(std::memory_order_acquire) != want) {
      const auto key = ec.prepare_wait();
      if (turn.load(std::memory_order_acquire) == want) {
        ec.cancel_wait();
        break;
      }
      ec.commit_wait(key);
    }
  };

  std::thread pong([&] {
    for (std::uint64_t i = 0; i < rounds; ++i) {
      wait_for_turn(2 * i + 1);
      turn.store(2 * i + 2, std::memory_order_release);
      ec.notify_all();
    }
  });
  for (std::uint64_t i = 0; i < rounds; ++i) {
    wait_for_turn(2 * i);
    turn.store(2 * i + 1, std::memory_order_release);
    ec.notify_all();
  }
  pong.join();
  EXPECT_EQ(turn.load(std::memory_order_seq_cst), 2 * rounds);  // seq_cst: pairs with the writers' RMW/store
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
