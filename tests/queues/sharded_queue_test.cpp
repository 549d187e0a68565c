// sharded_queue specifics: the seed-004 producer/consumer matrix as a
// correctness test, and the exact total capacity of bounded mode.
#include "thread_system/queues/sharded_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "capacity_check.hpp"

namespace ts = thread_system;

namespace {

ts::sharded_queue_options with_shards(std::size_t shards, std::size_t capacity = 0) {
  ts::sharded_queue_options options;
  options.shards = shards;
  options.capacity = capacity;
  return options;
}

ts::job_function counting_job(std::atomic<std::size_t>& counter) {
  return ts::job_function([&counter] { counter.fetch_add(1, std::memory_order_relaxed); });  // read after join
}

}  // namespace

TEST(ShardedQueue, ShardCountIsAPowerOfTwo) {
  ts::sharded_queue by_default;
  EXPECT_GE(by_default.shard_count(), 1U);
  EXPECT_TRUE(std::has_single_bit(by_default.shard_count()));
  EXPECT_FALSE(by_default.is_bounded());
  ts::sharded_queue three(with_shards(3));
  EXPECT_EQ(three.shard_count(), 4U);
  ts::sharded_queue one(with_shards(1));
  EXPECT_EQ(one.shard_count(), 1U);
}

// Seed 004's matrix (1/2/4/8 producers x 2/4/8 consumers), unbounded: every
// push is accepted at once and every job runs exactly once.
TEST(ShardedQueue, ProducerConsumerMatrixRunsEveryJobOnce) {
  for (const int producers : {1, 2, 4, 8}) {
    for (const int consumers : {2, 4, 8}) {
      SCOPED_TRACE(::testing::Message() << producers << " producers, " << consumers << " consumers");
      ts::sharded_queue queue(with_shards(8));
      const std::size_t per_producer = ts::test::scaled(40000) / static_cast<std::size_t>(producers);
      const std::size_t total = per_producer * static_cast<std::size_t>(producers);
      std::vector<std::atomic<std::uint8_t>> runs(total);
      std::atomic<std::size_t> executed{0};
      std::atomic<std::size_t> refused{0};
      std::vector<std::thread> threads;
      for (int p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
          const std::size_t base = static_cast<std::size_t>(p) * per_producer;
          std::array<ts::job_function, 4> batch;
          std::size_t i = 0;
          while (i < per_producer) {
            auto job_for = [&runs](std::size_t value) {
              return ts::job_function([&runs, value] {
                runs[value].fetch_add(1, std::memory_order_relaxed);  // checked after join
              });
            };
            if (i % 5 == 0 && i + batch.size() <= per_producer) {
              for (std::size_t k = 0; k < batch.size(); ++k) batch[k] = job_for(base + i + k);
              if (!queue.push_batch(batch)) refused.fetch_add(1, std::memory_order_relaxed);  // read after join
              i += batch.size();
            } else {
              if (!queue.try_push(job_for(base + i))) refused.fetch_add(1, std::memory_order_relaxed);
              ++i;
            }
          }
        });
      }
      for (int c = 0; c < consumers; ++c) {
        threads.emplace_back([&, c] {
          std::array<ts::job_function, 8> out;
          // acquire: pairs with the acq_rel increments below (progress check only).
          while (executed.load(std::memory_order_acquire) < total) {
            std::size_t n = 0;
            switch (c % 3) {
              case 0:
                n = queue.pop_batch(out, static_cast<std::size_t>(c));
                break;
              case 1:
                n = queue.try_pop(out[0], static_cast<std::size_t>(c)) ? 1 : 0;
                break;
              default:
                n = queue.try_pop(out[0]) ? 1 : 0;
                break;
            }
            for (std::size_t k = 0; k < n; ++k) out[k]();
            if (n == 0) {
              std::this_thread::yield();
            } else {
              executed.fetch_add(n, std::memory_order_acq_rel);
            }
          }
        });
      }
      for (auto& t : threads) t.join();
      EXPECT_EQ(refused.load(std::memory_order_seq_cst), 0U);      // seq_cst: pairs with the writers' RMW/store
      EXPECT_EQ(executed.load(std::memory_order_seq_cst), total);  // seq_cst: pairs with the writers' RMW/store
      // seq_cst: pairs with the writers' RMW/store
      for (std::size_t v = 0; v < total; ++v) ASSERT_EQ(runs[v].load(std::memory_order_seq_cst), 1) << "value " << v;
      ts::job_function leftover;
      EXPECT_FALSE(queue.try_pop(leftover));
      EXPECT_EQ(queue.size_approx(), 0U);
    }
  }
}

TEST(ShardedQueue, BoundedExactCapacitySingleThread) {
  constexpr std::size_t capacity = 100;  // deliberately not a power of two nor a multiple of the shards
  ts::sharded_queue queue(with_shards(4, capacity));
  ASSERT_TRUE(queue.is_bounded());
  EXPECT_EQ(queue.capacity(), capacity);
  std::atomic<std::size_t> ran{0};
  ts::test::expect_full_exactly_at(queue, capacity, [&ran] { return counting_job(ran); });
  ts::job_function job;
  ts::job_function another = counting_job(ran);
  auto full_again = queue.try_push(std::move(another));
  ASSERT_FALSE(full_again);
  EXPECT_EQ(full_again.error().code(), ts::error_code::queue_full);

  // A batch that does not fit is refused whole; after room is made it fits.
  std::array<ts::job_function, 3> batch;
  for (auto& j : batch) j = counting_job(ran);
  auto batch_full = queue.push_batch(batch);
  ASSERT_FALSE(batch_full);
  EXPECT_EQ(batch_full.error().code(), ts::error_code::queue_full);
  for (const auto& j : batch) EXPECT_TRUE(j);
  std::array<ts::job_function, 3> out;
  ASSERT_EQ(queue.pop_batch(out), 3U);
  for (auto& j : out) j();
  ASSERT_TRUE(queue.push_batch(batch));
  EXPECT_FALSE(queue.try_push(counting_job(ran)));

  // Closed wins over full, and the queue drains.
  queue.close();
  auto closed = queue.try_push(counting_job(ran));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code(), ts::error_code::pool_stopped);
  std::size_t drained = 0;
  while (queue.try_pop(job)) {
    job();
    ++drained;
  }
  EXPECT_EQ(drained, capacity);
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), capacity + 4);  // seq_cst: pairs with the writers' RMW/store
}

// A batch above the capacity could never fit: refused with invalid_argument,
// as bounded_queue refuses it, even into an empty queue (queue_full invited
// a retry that could never succeed), the jobs untouched; one that fits the
// capacity but not the room left is queue_full.
TEST(ShardedQueue, ABatchAboveTheCapacityIsInvalidNotFull) {
  ts::sharded_queue queue(with_shards(2, 8));
  std::atomic<std::size_t> ran{0};
  std::vector<ts::job_function> batch(9);
  for (auto& j : batch) j = counting_job(ran);
  auto above = queue.push_batch(batch);
  ASSERT_FALSE(above);
  EXPECT_EQ(above.error().code(), ts::error_code::invalid_argument);
  EXPECT_NE(above.error().message().find("above the capacity of 8"), std::string::npos) << above.error().message();
  for (const auto& j : batch) EXPECT_TRUE(j);
  EXPECT_EQ(queue.size_approx(), 0U);
  batch.pop_back();
  ASSERT_TRUE(queue.push_batch(batch));  // exactly the capacity fits
  std::array<ts::job_function, 1> one{counting_job(ran)};
  auto full = queue.push_batch(one);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
}

// The bound is one total shared by the shards: threads bound to different
// shards together fill exactly `capacity`, never one shard's share.
TEST(ShardedQueue, BoundedCapacityIsSharedAcrossShards) {
  constexpr std::size_t capacity = 64;
  ts::sharded_queue queue(with_shards(8, capacity));
  std::atomic<std::size_t> ran{0};
  std::thread first([&] {
    for (std::size_t i = 0; i < 50; ++i) ASSERT_TRUE(queue.try_push(counting_job(ran)));
  });
  first.join();
  std::thread second([&] {
    for (std::size_t i = 0; i < 14; ++i) ASSERT_TRUE(queue.try_push(counting_job(ran)));
    auto full = queue.try_push(counting_job(ran));
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
  });
  second.join();
  EXPECT_EQ(queue.size_approx(), capacity);
}

// Concurrent producers, no consumer: exactly `capacity` pushes succeed in
// total. Then with consumers running, the number of accepted-but-not-popped
// jobs never exceeds the capacity (plus one per consumer: a consumer's pop
// releases the room before the consumer can count the job as popped).
TEST(ShardedQueue, BoundedConcurrentProducersNeverExceedCapacity) {
  constexpr std::size_t capacity = 257;
  constexpr int producers = 4;
  constexpr int consumers = 2;
  ts::sharded_queue queue(with_shards(4, capacity));
  std::atomic<std::size_t> ran{0};

  std::atomic<std::size_t> accepted{0};
  {
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&] {
        std::size_t refusals = 0;
        while (refusals < 100) {
          auto pushed = queue.try_push(counting_job(ran));
          if (pushed) {
            accepted.fetch_add(1, std::memory_order_relaxed);  // read after join
          } else {
            ASSERT_EQ(pushed.error().code(), ts::error_code::queue_full);
            ++refusals;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_EQ(accepted.load(std::memory_order_seq_cst), capacity);  // seq_cst: pairs with the writers' RMW/store

  const std::size_t per_producer = ts::test::scaled(20000);
  std::atomic<std::int64_t> pushed_total{static_cast<std::int64_t>(capacity)};
  std::atomic<std::int64_t> popped_total{0};
  std::atomic<std::int64_t> max_outstanding{0};
  std::atomic<int> producers_done{0};
  std::atomic<std::size_t> full_seen{0};
  auto observe = [&] {
    // seq_cst: the two counters are read in one total order with their updates.
    const std::int64_t outstanding =
        pushed_total.load(std::memory_order_seq_cst) - popped_total.load(std::memory_order_seq_cst);
    std::int64_t seen = max_outstanding.load(std::memory_order_relaxed);  // a running maximum
    while (outstanding > seen && !max_outstanding.compare_exchange_weak(seen, outstanding, std::memory_order_relaxed)) {
    }
  };
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      std::size_t done = 0;
      while (done < per_producer) {
        auto pushed = queue.try_push(counting_job(ran));
        if (pushed) {
          pushed_total.fetch_add(1, std::memory_order_seq_cst);  // see observe()
          observe();
          ++done;
        } else {
          ASSERT_EQ(pushed.error().code(), ts::error_code::queue_full);
          full_seen.fetch_add(1, std::memory_order_release);  // pairs with the gate below and the read after join
          std::this_thread::yield();
        }
      }
      producers_done.fetch_add(1, std::memory_order_release);  // pairs with the consumers' acquire
    });
  }
  // The queue is full and nothing pops yet, so the producers are refused
  // until the consumers start: a refusal under concurrency happens on every
  // run, not only when the scheduler happens to delay the consumers.
  while (full_seen.load(std::memory_order_acquire) < static_cast<std::size_t>(producers)) {  // pairs with the release
    std::this_thread::yield();
  }
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      ts::job_function job;
      for (;;) {
        if (queue.try_pop(job, static_cast<std::size_t>(c))) {
          popped_total.fetch_add(1, std::memory_order_seq_cst);  // see observe()
          job();
          job.reset();
        } else if (producers_done.load(std::memory_order_acquire) == producers) {
          if (!queue.try_pop(job)) return;  // all pushed and none left
          popped_total.fetch_add(1, std::memory_order_seq_cst);
          job();
          job.reset();
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(full_seen.load(std::memory_order_seq_cst), 0U);  // seq_cst: pairs with the writers' RMW/store
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_LE(max_outstanding.load(std::memory_order_seq_cst), static_cast<std::int64_t>(capacity) + consumers);
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(popped_total.load(std::memory_order_seq_cst), pushed_total.load(std::memory_order_seq_cst));
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), capacity + per_producer * producers);
}

TEST(ShardedQueue, CloseRefusesEveryShardAndDrainsAll) {
  ts::sharded_queue queue(with_shards(4));
  std::atomic<std::size_t> ran{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 4; ++p) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) ASSERT_TRUE(queue.try_push(counting_job(ran)));
    });
  }
  for (auto& t : threads) t.join();
  queue.close();
  EXPECT_TRUE(queue.is_closed());
  threads.clear();
  for (int p = 0; p < 4; ++p) {
    threads.emplace_back([&] {
      auto refused = queue.try_push(counting_job(ran));
      ASSERT_FALSE(refused);
      EXPECT_EQ(refused.error().code(), ts::error_code::pool_stopped);
    });
  }
  for (auto& t : threads) t.join();
  ts::job_function job;
  while (queue.try_pop(job, 3)) job();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 40U);  // seq_cst: pairs with the writers' RMW/store
}
