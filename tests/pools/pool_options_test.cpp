// pool_options (include/thread_system/pools/pool_options.hpp): every default
// gives a working pool, each field does what its comment says, and the
// constructor refuses the combinations README's refusal table lists.
#include "thread_system/pools/pool_options.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

namespace {

TEST(PoolOptions, TheDefaultsAreTheDocumentedOnes) {
  const ts::pool_options o;
  EXPECT_EQ(o.name, "thread_pool");
  EXPECT_FALSE(o.on_error) << "null: failures are printed to stderr";
  EXPECT_EQ(o.queue, ts::pool_queue::mutex);
  EXPECT_EQ(o.initial_queue_capacity, 1024U);
  EXPECT_EQ(o.latency_sample_every, 32U);
  EXPECT_EQ(o.backpressure.capacity, 0U) << "unbounded";
  EXPECT_EQ(o.worker_stack_size, 0U) << "the platform default";
  EXPECT_EQ(o.idle_wait, std::chrono::microseconds(100));
}

TEST(PoolOptions, APoolWithTheDefaultsRunsJobs) {
  ts::thread_pool pool{2, ts::pool_options{}};
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // read after wait_idle()
  }
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 100);
  EXPECT_EQ(pool.get_name(), "thread_pool");
  EXPECT_EQ(pool.queue_kind(), ts::pool_queue::mutex);
}

// latency_sample_every: every Nth job a thread submits is timed; 0 none.
// Any 40 consecutive submissions from one thread hold exactly 40/N sampled
// jobs, whatever the thread's countdown was.
TEST(PoolOptions, LatencySamplingTimesEveryNthJob) {
  for (const std::uint32_t every : {0U, 1U, 4U}) {
    ts::pool_options o;
    o.latency_sample_every = every;
    ts::thread_pool pool{2, o};
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(pool.enqueue([] {}));
    pool.wait_idle();
    const std::uint64_t expected = every == 0 ? 0 : 40 / every;
    EXPECT_EQ(pool.latency().run.count, expected) << "every " << every;
    EXPECT_EQ(pool.latency().wait.count, expected) << "every " << every;
  }
}

TEST(PoolOptions, TheErrorHandlerReceivesAFireAndForgetJobsException) {
  ts::pool_options o;
  std::atomic<int> handled{0};
  o.on_error = [&handled](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error&) {
      handled.fetch_add(1, std::memory_order_relaxed);  // read after wait_idle()
    }
  };
  ts::thread_pool pool{1, o};
  ASSERT_TRUE(pool.enqueue([] { throw std::runtime_error("to the handler"); }));
  pool.wait_idle();
  EXPECT_EQ(handled.load(std::memory_order_relaxed), 1);
  EXPECT_EQ(pool.get_statistics().failed, 1U);
}

ts::error_code construction_error(const ts::pool_options& o) {
  try {
    ts::thread_pool pool{1, o};
  } catch (const ts::error_exception& e) {
    return e.code();
  }
  return ts::error_code::ok;
}

TEST(PoolOptions, TheConstructorRefusesInvalidCombinations) {
  ts::pool_options zero_bounded;
  zero_bounded.queue = ts::pool_queue::bounded;
  zero_bounded.initial_queue_capacity = 0;
  EXPECT_EQ(construction_error(zero_bounded), ts::error_code::invalid_argument) << "a bounded queue of 0 jobs";

  ts::pool_options bounded_twice;
  bounded_twice.queue = ts::pool_queue::bounded;
  bounded_twice.backpressure = ts::backpressure::block(8);
  EXPECT_EQ(construction_error(bounded_twice), ts::error_code::invalid_argument)
      << "a bounded queue and a backpressure bound together";

  ts::pool_options negative_wait;
  negative_wait.backpressure = ts::backpressure::block_for(4, std::chrono::nanoseconds(-1));
  EXPECT_EQ(construction_error(negative_wait), ts::error_code::invalid_argument);

  ts::pool_options negative_idle_wait;
  negative_idle_wait.idle_wait = std::chrono::nanoseconds(-1);
  EXPECT_EQ(construction_error(negative_idle_wait), ts::error_code::invalid_argument);

  ts::pool_options fine;
  fine.queue = ts::pool_queue::bounded;
  fine.initial_queue_capacity = 3;  // rounded up to 4
  EXPECT_EQ(construction_error(fine), ts::error_code::ok);
}

// Values no enumerator has (cast from another number) and a stack size no
// mapping can have are refused by the constructor. (An unknown policy was
// accepted, and a full pool then spun in the admission's switch for ever;
// an unknown queue kind silently became the mutex queue; a stack above
// PTRDIFF_MAX was a resource_exhausted "refused thread" at start.)
TEST(PoolOptions, TheConstructorRefusesUnknownEnumeratorsAndImpossibleStacks) {
  ts::pool_options unknown_policy;
  unknown_policy.backpressure = ts::backpressure::reject(1);
  unknown_policy.backpressure.on_full = static_cast<ts::backpressure::policy>(42);
  EXPECT_EQ(construction_error(unknown_policy), ts::error_code::invalid_argument);

  ts::pool_options unknown_queue;
  unknown_queue.queue = static_cast<ts::pool_queue>(42);
  EXPECT_EQ(construction_error(unknown_queue), ts::error_code::invalid_argument);

  for (const std::size_t size : {static_cast<std::size_t>(PTRDIFF_MAX), static_cast<std::size_t>(PTRDIFF_MAX) + 1,
                                 std::numeric_limits<std::size_t>::max()}) {
    ts::pool_options huge_stack;
    huge_stack.worker_stack_size = size;
    EXPECT_EQ(construction_error(huge_stack), ts::error_code::invalid_argument) << size;
    try {
      ts::thread_pool named("named", huge_stack);  // the seed-style constructor starts nothing
      ADD_FAILURE() << "the named constructor accepted a stack of " << size << " bytes";
    } catch (const ts::error_exception& e) {
      EXPECT_EQ(e.code(), ts::error_code::invalid_argument) << e.what();
    }
  }
}

// A stack below the library's floor is raised to it: a failing job's
// default report (to stderr, formatted on the worker's stack) fits. With
// the platform minimum of 16 KiB that report overflowed the stack
// (SIGSEGV).
TEST(PoolOptions, ATinyStackIsRaisedSoTheDefaultFailureReportFits) {
  for (const std::size_t size : {std::size_t{1}, std::size_t{16} * 1024}) {
    ts::pool_options o;
    o.worker_stack_size = size;  // no on_error: the default report to stderr
    ts::thread_pool pool{1, o};
    ASSERT_TRUE(pool.enqueue([] { throw std::runtime_error("reported on a small stack"); }));
    pool.wait_idle();
    EXPECT_EQ(pool.get_statistics().failed, 1U) << size;
  }
}

// Any initial_queue_capacity gives a working pool or a clear error, never
// undefined behaviour: the segmented mutex queue clamps its segment size
// (job_segments.hpp; SIZE_MAX once gave one-word segments that no job fits
// in), the bounded queue refuses a capacity above 2^62 and reports a ring
// that cannot be allocated as resource_exhausted; the other kinds ignore it.
TEST(PoolOptions, AnyInitialQueueCapacityGivesAWorkingPoolOrAClearError) {
  constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
  constexpr std::array<std::size_t, 5> capacities{size_max, (std::size_t{1} << 62) + 1, std::size_t{1} << 62,
                                                  (std::size_t{1} << 62) - 1, std::size_t{1} << 61};
  for (const auto kind : {ts::pool_queue::mutex, ts::pool_queue::lockfree, ts::pool_queue::adaptive,
                          ts::pool_queue::sharded, ts::pool_queue::bounded}) {
    for (const std::size_t capacity : capacities) {
      SCOPED_TRACE(std::string(ts::to_string(kind)) + " " + std::to_string(capacity));
      ts::pool_options o;
      o.queue = kind;
      o.initial_queue_capacity = capacity;
      try {
        ts::thread_pool pool{2, o};
        std::atomic<int> ran{0};
        std::array<std::uint64_t, 4> payload{1, 1, 1, 1};  // a job of several words
        for (int i = 0; i < 500; ++i) {
          // relaxed: read after wait_idle().
          ASSERT_TRUE(i % 2 == 0 ? pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })
                                 : pool.enqueue([&ran, payload] {
                                     ran.fetch_add(static_cast<int>(payload[3]), std::memory_order_relaxed);
                                   }));
        }
        pool.wait_idle();
        EXPECT_EQ(ran.load(std::memory_order_relaxed), 500);
        EXPECT_NE(kind, ts::pool_queue::bounded) << "a bounded ring of 2^61 jobs or more cannot be allocated";
      } catch (const ts::error_exception& e) {
        EXPECT_EQ(kind, ts::pool_queue::bounded) << e.what();
        EXPECT_TRUE(e.code() == ts::error_code::invalid_argument || e.code() == ts::error_code::resource_exhausted)
            << e.what();
        EXPECT_NE(std::string(e.what()), "");
      }
    }
  }
}

// idle_wait: a worker out of work polls that long before it parks. Longer
// than the test lasts, no worker ever parks - not at start, not after jobs
// - and stop() still reaches them. (With the default of 100 us, every
// worker has parked long before the 20 ms below.)
TEST(PoolOptions, AnIdleWaitLongerThanThePoolsLifeKeepsEveryWorkerAwake) {
  ts::pool_options o;
  o.idle_wait = std::chrono::hours(1);
  ts::thread_pool pool{2, o};
  std::atomic<int> ran{0};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // read after wait_idle()
    }
    pool.wait_idle();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 30);
  EXPECT_EQ(pool.get_statistics().parks, 0U);
  pool.pause();  // paused, the workers keep polling too; resume() and stop() reach them
  pool.resume();
  (void)pool.stop();  // returns: stop() reached the polling workers
  EXPECT_FALSE(pool.enqueue([] {}));
}

// An idle_wait that does not fit the clock's count saturates: still no park.
TEST(PoolOptions, TheLongestIdleWaitIsAccepted) {
  ts::pool_options o;
  o.idle_wait = std::chrono::nanoseconds::max();
  ts::thread_pool pool{1, o};
  ASSERT_TRUE(pool.enqueue([] {}));
  pool.wait_idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.get_statistics().parks, 0U);
}

// idle_wait 0: workers park right after their spin, and a parked worker is
// woken for every later job.
TEST(PoolOptions, AZeroIdleWaitParksAfterTheSpinAndStillWakes) {
  ts::pool_options o;
  o.idle_wait = std::chrono::nanoseconds(0);
  ts::thread_pool pool{2, o};
  for (int round = 0; round < 20; ++round) {
    // Both workers asleep (a park not yet followed by its wake-up), so the
    // job below has to wake one.
    ASSERT_TRUE(ts::test::eventually([&pool] {
      const ts::pool_statistics st = pool.get_statistics();
      return st.parks - st.wakeups == 2;
    }));
    std::atomic<bool> ran{false};
    ASSERT_TRUE(pool.enqueue([&ran] { ran.store(true, std::memory_order_release); }));  // pairs with the acquire below
    ASSERT_TRUE(ts::test::eventually([&ran] { return ran.load(std::memory_order_acquire); }));
  }
}

}  // namespace
