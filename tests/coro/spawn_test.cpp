// spawn(): a detached task on a pool, its failures and refusals
// (include/thread_system/coro/spawn.hpp).
#include "thread_system/coro/spawn.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "../support/test_support.hpp"
#include "coro_test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system {
namespace {

using namespace std::chrono_literals;
using namespace coro_test;
using test::scaled;

TEST(Spawn, EverySpawnedTaskRunsExactlyOnce) {
  thread_pool pool{2};
  const std::size_t n = scaled(1'000'000);
  std::vector<std::atomic<std::uint8_t>> runs(n);
  auto body = [](std::atomic<std::uint8_t>& slot) -> task<void> {
    slot.fetch_add(1, std::memory_order_relaxed);
    co_return;
  };
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(spawn(pool, body(runs[i])));
  pool.wait_idle();
  std::size_t wrong = 0;
  for (auto& r : runs) wrong += r.load(std::memory_order_relaxed) == 1 ? 0 : 1;  // wait_idle() ordered the runs
  EXPECT_EQ(wrong, 0U);
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.accepted, n);
  EXPECT_EQ(s.executed, n);
}

TEST(Spawn, AFailureGoesToTheErrorHandlerAndTheFailedCounter) {
  thread_pool pool{2};
  failure_log failures;
  failures.attach(pool);
  auto body = [](thread_pool& p) -> task<void> {
    co_await p.schedule();
    throw std::runtime_error("spawned failure");
  };
  ASSERT_TRUE(spawn(pool, body(pool)));
  pool.wait_idle();
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.failed, 1U);
  EXPECT_EQ(s.accepted, s.executed);
  EXPECT_EQ(failures.messages(), std::vector<std::string>{"spawned failure"});
}

TEST(Spawn, OnAStoppedPoolIsRefusedAndTheTaskDestroyed) {
  thread_pool pool{1};
  (void)pool.stop();
  auto probe = std::make_shared<int>(0);
  auto body = [](std::shared_ptr<int> p) -> task<void> {
    (void)p;
    co_return;
  };
  auto r = spawn(pool, body(probe));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::pool_stopped);
  EXPECT_EQ(probe.use_count(), 1);
}

TEST(Spawn, AFailureWhoseReportJobIsDiscardedStillReachesTheErrorHandler) {
  // The task fails on another pool, so its failure is pushed to its own pool
  // as a job; that job, discarded by stop(cancel_pending), reports it.
  thread_pool a{1};
  thread_pool b{1};
  failure_log failures;
  failures.attach(a);
  std::atomic<bool> go{false};
  auto body = [](thread_pool& other, std::atomic<bool>& g) -> task<void> {
    co_await other.schedule();
    while (!g.load()) std::this_thread::sleep_for(1ms);
    throw std::runtime_error("late failure");
  };
  ASSERT_TRUE(spawn(a, body(b, go)));
  while (b.get_statistics().accepted < 1) std::this_thread::sleep_for(1ms);
  a.pause();
  go.store(true);
  while (a.get_statistics().accepted < 2) std::this_thread::sleep_for(1ms);  // the failure's job is queued
  const auto report = a.stop(stop_mode::cancel_pending);
  EXPECT_EQ(report.cancelled, 1U);
  EXPECT_EQ(failures.messages(), std::vector<std::string>{"late failure"});
}

}  // namespace
}  // namespace thread_system
