// scheduler/future.hpp: the future submit() returns - waits with
// timeouts (huge, NaN and negative durations), a helping get() that
// rethrows the job's exception, the callable destroyed before the future is
// ready.
#include "thread_system/scheduler/future.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

TEST(Future, WaitForTimesOutThenSucceeds) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<bool> release{false};
  auto f = pool.submit([&release] {
    // seq_cst: pairs with the writers' RMW/store
    while (!release.load(std::memory_order_seq_cst)) std::this_thread::sleep_for(100us);
    return 7;
  });
  EXPECT_EQ(f.wait_for(5ms), std::future_status::timeout);
  EXPECT_FALSE(f.is_ready());
  release.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
  EXPECT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.valid());
  EXPECT_EQ(f.get(), 7);
  EXPECT_FALSE(f.valid());
  EXPECT_THROW(f.wait(), std::future_error);
}

TEST(Future, HelpingWaitRethrowsChildException) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([&pool] {
    auto child = pool.submit([]() -> int { throw std::invalid_argument("child"); });
    try {
      return child.get();
    } catch (const std::invalid_argument&) {
      return -1;
    }
  });
  EXPECT_EQ(f.get(), -1);
}

TEST(Future, SubmittedCallableIsDestroyedBeforeTheFutureIsReady) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  for (int round = 0; round < 200; ++round) {
    ts::test::lifetime_tracker tracker;
    auto f = pool.submit([c = ts::test::counting_functor(tracker)] {
      c();
      return 1;
    });
    ASSERT_EQ(f.get(), 1);
    ASSERT_EQ(tracker.alive(), 0) << "the bound callable outlived the result";
  }
}

TEST(Future, WaitsSaturateHugeDurations) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([] { return 5; });
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_for(std::chrono::hours::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_until(std::chrono::steady_clock::time_point::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds(-1)), std::future_status::ready);
  EXPECT_EQ(f.get(), 5);
}

// wait_until() on far time points of any duration type waits for the
// value: time_point<steady_clock, hours>::max() overflowed nanoseconds in
// the comparison with now and reported timeout at once.
TEST(Future, WaitUntilFarTimePointsOfCoarseDurationsWaits) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  using hours_point = std::chrono::time_point<std::chrono::steady_clock, std::chrono::hours>;
  std::latch gate{1};
  auto f = pool.submit([&gate] {
    gate.wait();
    return 7;
  });
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    gate.count_down();
  });
  EXPECT_EQ(f.wait_until(hours_point::max()), std::future_status::ready);
  opener.join();
  EXPECT_EQ(f.wait_until(std::chrono::system_clock::time_point::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_until(hours_point::min()), std::future_status::ready);
  EXPECT_EQ(f.get(), 7);
}

// A NaN, negative or zero duration on a future that is not ready reports
// timeout at once (a NaN used to mean "no deadline": a wait forever).
TEST(Future, WaitForNanOrNegativeOnlyReportsReadiness) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::latch gate{1};
  auto f = pool.submit([&gate] {
    gate.wait();
    return 3;
  });
  const std::chrono::duration<double> nan{std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(f.wait_for(nan), std::future_status::timeout);
  EXPECT_EQ(f.wait_for(std::chrono::duration<double>(-std::numeric_limits<double>::infinity())),
            std::future_status::timeout);
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds(0)), std::future_status::timeout);
  gate.count_down();
  EXPECT_EQ(f.wait_for(std::chrono::duration<double>(std::numeric_limits<double>::infinity())),
            std::future_status::ready);
  EXPECT_EQ(f.get(), 3);
}

// A job returning an lvalue reference gives a future<T&> (as std::async
// gives std::future<T&>): get() returns the very object, not a copy. The
// reference type did not compile (std::optional<T&>).
TEST(Future, AJobReturningAReferenceGivesAFutureOfThatReference) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  int target = 5;
  const std::string text = "kept";
  ts::future<int&> f = pool.submit([&target]() -> int& { return target; });
  int& r = f.get();
  EXPECT_EQ(&r, &target);
  r = 6;
  EXPECT_EQ(target, 6);
  ts::future<const std::string&> g = pool.submit([&text]() -> const std::string& { return text; });
  EXPECT_EQ(&g.get(), &text);
  // An exception still reaches get().
  ts::future<int&> h = pool.submit([]() -> int& { throw std::invalid_argument("no reference"); });
  EXPECT_THROW((void)h.get(), std::invalid_argument);
}
