// futex_wait / futex_wake / futex_wait_for (include/thread_system/detail/futex.hpp):
// a wait on a word that no longer holds the expected value returns at once,
// a wake releases a blocked waiter, a timed wait returns by itself.
#include "thread_system/detail/futex.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace thread_system::detail {
namespace {

using namespace std::chrono_literals;

TEST(Futex, AWaitOnAChangedWordReturnsAtOnce) {
  std::atomic<std::uint32_t> word{1};
  futex_wait(word, 0);  // 1 != 0: the kernel refuses to sleep (a hang here fails by the watchdog)
  futex_wait_for(word, 0, 60'000'000'000);
  SUCCEED();
}

TEST(Futex, AWakeReleasesABlockedWaiter) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    // The waker's release store pairs with this acquire load; a spurious
    // return is allowed, so wait in a loop on the condition.
    while (word.load(std::memory_order_acquire) == 0) futex_wait(word, 0);
    woke.store(true, std::memory_order_release);  // pairs with the acquire below
  });
  std::this_thread::sleep_for(5ms);  // usually asleep by now; either way it must wake
  word.store(1, std::memory_order_release);
  futex_wake(word, futex_wake_all);
  waiter.join();
  EXPECT_TRUE(woke.load(std::memory_order_acquire));
}

TEST(Futex, AWakeOfOneReleasesOneOfTwoWaitersAtATime) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<int> done{0};
  auto body = [&] {
    while (word.load(std::memory_order_acquire) == 0) futex_wait(word, 0);  // pairs with the release store
    done.fetch_add(1, std::memory_order_acq_rel);
  };
  std::thread a(body);
  std::thread b(body);
  word.store(1, std::memory_order_release);
  // Each wake(1) releases at most one sleeper; a waiter that had not slept
  // yet sees the word changed. Waking until both are done must finish.
  while (done.load(std::memory_order_acquire) < 2) {
    futex_wake(word, 1);
    std::this_thread::yield();
  }
  a.join();
  b.join();
  EXPECT_EQ(done.load(std::memory_order_acquire), 2);
}

TEST(Futex, ATimedWaitReturnsWithoutAWake) {
  std::atomic<std::uint32_t> word{0};
  const auto start = std::chrono::steady_clock::now();
  futex_wait_for(word, 0, 2'000'000);  // 2 ms, nobody wakes it
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, 60s) << "returns by itself (the bound is the watchdog's, not a timing claim)";
  futex_wait_for(word, 0, 0);   // nothing to wait for
  futex_wait_for(word, 0, -5);  // a deadline already past
}

}  // namespace
}  // namespace thread_system::detail
