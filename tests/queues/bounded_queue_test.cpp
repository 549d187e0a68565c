// bounded_queue specifics: capacity rounding, full, wrap-around.
#include "thread_system/queues/bounded_queue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstddef>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "capacity_check.hpp"

namespace ts = thread_system;

TEST(BoundedQueue, ExactCapacityThenFull) {
  for (std::size_t requested = 1; requested <= 130; ++requested) {
    SCOPED_TRACE(::testing::Message() << "requested " << requested);
    ts::bounded_queue queue(requested);
    const std::size_t expected = std::bit_ceil(requested < 2 ? std::size_t{2} : requested);
    ASSERT_EQ(queue.capacity(), expected);
    int ran = 0;
    ts::test::expect_full_exactly_at(queue, expected, [&ran] { return ts::job_function([&ran] { ++ran; }); });
    ts::job_function job;
    while (queue.try_pop(job)) job();
    EXPECT_EQ(ran, static_cast<int>(expected) + 1);
  }
}

TEST(BoundedQueue, CertainlyFullForSaysFullExactlyWhenTheJobsDoNotFit) {
  ts::bounded_queue q(4);
  EXPECT_FALSE(q.certainly_full_for(4));
  EXPECT_TRUE(q.certainly_full_for(5));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.try_push(ts::job_function([] {})));
  EXPECT_FALSE(q.certainly_full_for(1));
  EXPECT_TRUE(q.certainly_full_for(2));
  ts::job_function out;
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_FALSE(q.certainly_full_for(2));
  EXPECT_TRUE(q.certainly_full_for(3));
  q.close();  // the closed bit in the tail is not counted as jobs
  EXPECT_FALSE(q.certainly_full_for(2));
}

TEST(BoundedQueue, InvalidCapacityThrows) {
  EXPECT_THROW(ts::bounded_queue(0), ts::error_exception);
  EXPECT_THROW(ts::bounded_queue(ts::bounded_queue::max_capacity + 1), ts::error_exception);
}

TEST(BoundedQueue, BatchNeedsRoomForAll) {
  ts::bounded_queue queue(8);
  int ran = 0;
  std::vector<ts::job_function> batch;
  for (int i = 0; i < 5; ++i) batch.emplace_back([&ran] { ++ran; });
  ASSERT_TRUE(queue.push_batch(batch));
  for (auto& j : batch) j = ts::job_function([&ran] { ++ran; });
  auto full = queue.push_batch(batch);  // 5 + 5 > 8
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
  for (const auto& j : batch) EXPECT_TRUE(j);
  EXPECT_EQ(queue.size_approx(), 5U);
  std::vector<ts::job_function> huge(9);
  for (auto& j : huge) j = ts::job_function([&ran] { ++ran; });
  // Above capacity: it could never fit (queue_full invited a retry for ever).
  EXPECT_EQ(queue.push_batch(huge).error().code(), ts::error_code::invalid_argument);
  for (const auto& j : huge) EXPECT_TRUE(j);
  std::array<ts::job_function, 3> out;
  ASSERT_EQ(queue.pop_batch(out), 3U);
  ASSERT_TRUE(queue.push_batch(std::span<ts::job_function>(batch.data(), 5)));  // 2 + 5 <= 8, wraps the ring
  std::array<ts::job_function, 16> rest;
  EXPECT_EQ(queue.pop_batch(rest), 7U);
}

// Capacity 2: the positions lap the ring half a million times.
TEST(BoundedQueue, WrapAroundSingleThread) {
  ts::bounded_queue queue(2);
  const std::size_t pairs = ts::test::scaled(1'000'000);
  std::size_t next_expected = 0;
  ts::job_function job;
  for (std::size_t i = 0; i < pairs; ++i) {
    ASSERT_TRUE(queue.try_push(ts::job_function([&next_expected, i] {
      ASSERT_EQ(i, next_expected);
      ++next_expected;
    })));
    if (i % 2 == 1) {  // alternate between one and two queued jobs
      ASSERT_TRUE(queue.try_pop(job));
      job();
      ASSERT_TRUE(queue.try_pop(job));
      job();
      ASSERT_FALSE(queue.try_pop(job));
    }
  }
  while (queue.try_pop(job)) job();
  EXPECT_EQ(next_expected, pairs);
}

TEST(BoundedQueue, WrapAroundProducerConsumer) {
  ts::bounded_queue queue(2);
  const std::size_t count = ts::test::scaled(20'000);  // 10 000 trips round the ring
  std::size_t next_expected = 0;                       // touched only by the consumer (which runs the jobs)
  std::thread producer([&] {
    for (std::size_t i = 0; i < count; ++i) {
      ts::job_function job([&next_expected, i] {
        EXPECT_EQ(i, next_expected);
        next_expected = i + 1;
      });
      while (!queue.try_push(std::move(job))) std::this_thread::yield();  // full: retry (job intact)
    }
  });
  ts::job_function job;
  for (std::size_t popped = 0; popped < count;) {
    if (queue.try_pop(job)) {
      job();
      ++popped;
    } else {
      std::this_thread::yield();  // empty: let a producer sharing this core run
    }
  }
  producer.join();
  EXPECT_EQ(next_expected, count);
}

TEST(BoundedQueue, DestructionDestroysQueuedJobsOnce) {
  ts::test::lifetime_tracker tracker;
  {
    ts::bounded_queue queue(64);
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(queue.try_push(ts::job_function(ts::test::counting_functor(tracker))));
    ts::job_function job;
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(queue.try_pop(job));
      job();
    }
  }
  EXPECT_EQ(tracker.alive(), 0);
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 5);
}
