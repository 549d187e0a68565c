#include "thread_system/sync/wait_group.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <ratio>
#include <thread>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

TEST(WaitGroup, WaitReturnsAfterEveryDoneAndSeesTheirWrites) {
  ts::wait_group wg;
  std::vector<int> slots(4, 0);
  ASSERT_TRUE(wg.add(4).has_value());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      slots[static_cast<std::size_t>(i)] = i + 1;  // plain write, published by done()
      ASSERT_TRUE(wg.done().has_value());
    });
  }
  wg.wait();
  EXPECT_EQ(wg.count(), 0U);
  EXPECT_EQ(slots, (std::vector<int>{1, 2, 3, 4}));
  for (auto& t : threads) t.join();
}

TEST(WaitGroup, DoneBelowZeroIsRefused) {
  ts::wait_group wg;
  auto r = wg.done();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(wg.count(), 0U);
  ASSERT_TRUE(wg.add().has_value());
  ASSERT_TRUE(wg.done().has_value());
  EXPECT_FALSE(wg.done().has_value());
  EXPECT_EQ(wg.count(), 0U);
  wg.wait();  // zero: returns at once
}

TEST(WaitGroup, AddBeyondTheMaximumIsRefused) {
  ts::wait_group wg;
  ASSERT_TRUE(wg.add(ts::wait_group::max_count).has_value());
  auto r = wg.add(1);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(wg.count(), ts::wait_group::max_count);
}

// An initial count beyond max_count (a negative int converted, say) is a
// mistake the constructor reports; it was clamped, so wait() hung.
TEST(WaitGroup, AnInitialCountBeyondTheMaximumIsRefused) {
  EXPECT_EQ(ts::wait_group{ts::wait_group::max_count}.count(), ts::wait_group::max_count);
  for (std::uint32_t initial : {ts::wait_group::max_count + 1, static_cast<std::uint32_t>(-1)}) {
    try {
      ts::wait_group wg{initial};
      ADD_FAILURE() << initial << " accepted, count " << wg.count();
    } catch (const ts::error_exception& e) {
      EXPECT_EQ(e.code(), ts::error_code::invalid_argument) << initial;
    }
  }
}

// The header's advice for jobs a pool may discard: a guard among a job's
// captures calls done() when the job is destroyed, which a discard does too.
TEST(WaitGroup, AGuardAmongAJobsCapturesCountsAJobThePoolDiscards) {
  struct done_guard {
    ts::wait_group* wg;
    explicit done_guard(ts::wait_group& g) : wg(&g) {}
    done_guard(done_guard&& other) noexcept : wg(std::exchange(other.wg, nullptr)) {}
    done_guard(const done_guard&) = delete;
    done_guard& operator=(const done_guard&) = delete;
    done_guard& operator=(done_guard&&) = delete;
    ~done_guard() {
      if (wg != nullptr) (void)wg->done();
    }
  };
  ts::thread_pool pool{"never-started"};  // no workers yet: the jobs wait in its queue
  ts::wait_group wg;
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(wg.add());
    ASSERT_TRUE(pool.enqueue([guard = done_guard{wg}, &ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  }
  EXPECT_EQ(wg.count(), 3U);
  const ts::stop_report r = pool.stop(ts::stop_mode::cancel_pending);
  EXPECT_EQ(r.cancelled, 3U);
  EXPECT_EQ(wg.count(), 0U);  // every discarded job said done()
  EXPECT_TRUE(wg.wait_for(std::chrono::milliseconds(0)));
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);  // relaxed: nothing ran; stop() returned
}

TEST(WaitGroup, WaitForTimesOutWhilePendingAndSucceedsAfter) {
  ts::wait_group wg{1};
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(wg.wait_for(std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20));
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (void)wg.done();
  });
  EXPECT_TRUE(wg.wait_for(std::chrono::seconds(30)));
  t.join();
  EXPECT_TRUE(wg.wait_for(std::chrono::milliseconds(0)));
}

// Far deadlines and huge timeouts on any duration type wait without a
// deadline. Converting them to nanoseconds overflowed: hours::max() as a
// time point (and +infinity, 1e300 s) made the waits return false at once.
TEST(WaitGroup, HugeTimeoutsAndFarDeadlinesWaitForTheCount) {
  using hours_point = std::chrono::time_point<std::chrono::steady_clock, std::chrono::hours>;
  using fp_seconds = std::chrono::duration<double>;
  using thirds = std::chrono::duration<long long, std::ratio<1, 3>>;
  using sevenths = std::chrono::duration<long long, std::ratio<1, 7>>;
  const std::vector<std::function<bool(ts::wait_group&)>> waits = {
      [](ts::wait_group& wg) { return wg.wait_until(hours_point::max()); },
      [](ts::wait_group& wg) { return wg.wait_until(std::chrono::system_clock::time_point::max()); },
      [](ts::wait_group& wg) { return wg.wait_for(std::chrono::nanoseconds::max()); },
      [](ts::wait_group& wg) { return wg.wait_for(std::chrono::hours::max()); },
      [](ts::wait_group& wg) { return wg.wait_for(fp_seconds(std::numeric_limits<double>::infinity())); },
      [](ts::wait_group& wg) { return wg.wait_for(fp_seconds(1e300)); },
      // Periods whose conversion to nanoseconds overflowed in intmax_t long
      // before the value did (a ~211-year timeout in thirds of a second
      // timed out after ~0.1 s; an hour ahead on system_clock in sevenths
      // of a second returned at once).
      [](ts::wait_group& wg) { return wg.wait_for(thirds(20'000'000'000LL)); },
      [](ts::wait_group& wg) {
        const auto now = std::chrono::system_clock::now();
        // (From whole seconds: ceil<sevenths>(now) would overflow in std::chrono itself.)
        const auto whole = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
        const auto in_an_hour = sevenths((whole + 3600) * 7);
        return wg.wait_until(std::chrono::time_point<std::chrono::system_clock, sevenths>(in_an_hour));
      },
  };
  for (std::size_t i = 0; i < waits.size(); ++i) {
    ts::wait_group wg{1};
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      (void)wg.done();
    });
    EXPECT_TRUE(waits[i](wg)) << "wait #" << i << " returned before the count reached zero";
    EXPECT_EQ(wg.count(), 0U) << "wait #" << i;
    t.join();
  }
  // Past, NaN and minus infinity only check the count.
  ts::wait_group pending{1};
  EXPECT_FALSE(pending.wait_until(hours_point::min()));
  EXPECT_FALSE(pending.wait_for(fp_seconds(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_FALSE(pending.wait_for(fp_seconds(-std::numeric_limits<double>::infinity())));
  (void)pending.done();
}

TEST(WaitGroup, ReusableAndManyWaiters) {
  const std::size_t rounds = ts::test::scaled(500);
  ts::wait_group wg;
  for (std::size_t r = 0; r < rounds; ++r) {
    ASSERT_TRUE(wg.add(3).has_value());
    std::atomic<int> woke{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 2; ++i) {
      waiters.emplace_back([&] {
        wg.wait();
        woke.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      });
    }
    std::vector<std::thread> workers;
    for (int i = 0; i < 3; ++i) workers.emplace_back([&] { (void)wg.done(); });
    for (auto& t : workers) t.join();
    for (auto& t : waiters) t.join();
    ASSERT_EQ(woke.load(std::memory_order_seq_cst), 2);  // seq_cst: pairs with the writers' RMW/store
    ASSERT_EQ(wg.count(), 0U);
  }
}

// A job on a one-worker pool enqueues children and waits for them: without
// helping, the only worker would block and the children could never run.
TEST(WaitGroup, WaitOnTheOnlyWorkerHelpsInsteadOfDeadlocking) {
  ts::thread_pool pool{1};
  std::atomic<int> children_ran{0};
  ts::wait_group outer{1};
  bool inner_done_before_return = false;
  ASSERT_TRUE(pool.enqueue([&] {
                    ts::wait_group inner;
                    for (int i = 0; i < 100; ++i) {
                      ASSERT_TRUE(inner.add().has_value());
                      ASSERT_TRUE(pool.enqueue([&] {
                                        children_ran.fetch_add(1, std::memory_order_relaxed);
                                        (void)inner.done();
                                      })
                                      .has_value());
                    }
                    inner.wait();
                    // seq_cst: pairs with the writers' RMW/store
                    inner_done_before_return = children_ran.load(std::memory_order_seq_cst) == 100;
                    (void)outer.done();
                  })
                  .has_value());
  outer.wait();
  EXPECT_TRUE(inner_done_before_return);
  EXPECT_EQ(children_ran.load(std::memory_order_seq_cst), 100);  // seq_cst: pairs with the writers' RMW/store
}

TEST(WaitGroup, ExternalWaitWithPoolWorkers) {
  const std::size_t jobs = ts::test::scaled(100'000);
  ts::thread_pool pool{2};
  ts::wait_group wg;
  std::atomic<std::size_t> ran{0};
  for (std::size_t i = 0; i < jobs; ++i) {
    ASSERT_TRUE(wg.add().has_value());
    ASSERT_TRUE(pool.enqueue([&] {
                      ran.fetch_add(1, std::memory_order_relaxed);
                      (void)wg.done();
                    })
                    .has_value());
  }
  wg.wait();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), jobs);  // seq_cst: pairs with the writers' RMW/store
}

TEST(WaitGroup, StandardPrimitivesAreReExported) {
  ts::latch l{2};
  l.count_down(2);
  EXPECT_TRUE(l.try_wait());
  ts::counting_semaphore<4> sem{1};
  EXPECT_TRUE(sem.try_acquire());
  EXPECT_FALSE(sem.try_acquire());
  sem.release();
  ts::binary_semaphore bin{0};
  bin.release();
  bin.acquire();
  ts::barrier<> bar{1};
  bar.arrive_and_wait();
}
