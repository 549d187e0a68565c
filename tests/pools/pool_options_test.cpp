// pool_options (include/thread_system/pools/pool_options.hpp): every default
// gives a working pool, each field does what its comment says, and the
// constructor refuses the combinations README's refusal table lists.
#include "thread_system/pools/pool_options.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>

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

  ts::pool_options fine;
  fine.queue = ts::pool_queue::bounded;
  fine.initial_queue_capacity = 3;  // rounded up to 4
  EXPECT_EQ(construction_error(fine), ts::error_code::ok);
}

}  // namespace
