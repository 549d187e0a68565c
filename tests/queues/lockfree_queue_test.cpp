// lockfree_queue and hazard-pointer specifics: reclamation, node pool,
// destruction.
#include "thread_system/queues/lockfree_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/detail/hazard_pointers.hpp"

namespace ts = thread_system;

namespace {

// Reclaims `int`s allocated with new, remembering which ones.
struct reclaim_log {
  std::mutex mutex;
  std::set<const void*> reclaimed;

  static void reclaim(void* context, void* pointer) noexcept {
    auto* self = static_cast<reclaim_log*>(context);
    {
      std::lock_guard lock(self->mutex);
      self->reclaimed.insert(pointer);
    }
    delete static_cast<int*>(pointer);
  }
  bool contains(const void* pointer) {
    std::lock_guard lock(mutex);
    return reclaimed.count(pointer) != 0;
  }
};

}  // namespace

TEST(HazardPointers, ProtectedPointerIsNotReclaimed) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  std::atomic<int*> source{new int(7)};
  int* const protected_value = source.load(std::memory_order_seq_cst);  // seq_cst: setup read, no other thread yet
  {
    ts::detail::hazard_holder reader(domain);
    EXPECT_EQ(reader.protect(0, source), protected_value);
    {
      ts::detail::hazard_holder writer(domain);
      source.store(nullptr, std::memory_order_seq_cst);
      writer.retire(protected_value);
      // Retire many more so the writer's own threshold scan runs too.
      for (int i = 0; i < 200; ++i) writer.retire(new int(i));
    }
    domain.collect();
    EXPECT_FALSE(log.contains(protected_value));
    EXPECT_EQ(*protected_value, 7);  // still readable (ASan would flag a free)
    EXPECT_EQ(domain.retired_count(), 1U);
  }
  domain.collect();
  EXPECT_TRUE(log.contains(protected_value));
  EXPECT_EQ(domain.retired_count(), 0U);
}

TEST(HazardPointers, ProtectionHoldsAcrossThreads) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  std::atomic<int*> source{new int(42)};
  int* const value = source.load(std::memory_order_seq_cst);  // seq_cst: setup read, no other thread yet
  std::atomic<int> stage{0};
  std::thread reader([&] {
    ts::detail::hazard_holder holder(domain);
    int* seen = holder.protect(0, source);
    stage.store(1, std::memory_order_release);  // pairs with the main thread's acquire
    while (stage.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    EXPECT_EQ(*seen, 42);  // dereferenced after many scans
  });
  while (stage.load(std::memory_order_acquire) != 1) std::this_thread::yield();
  {
    ts::detail::hazard_holder writer(domain);
    source.store(nullptr, std::memory_order_seq_cst);
    writer.retire(value);
    for (int i = 0; i < 1000; ++i) writer.retire(new int(i));
  }
  for (int i = 0; i < 10; ++i) domain.collect();
  EXPECT_FALSE(log.contains(value));
  stage.store(2, std::memory_order_release);  // pairs with the reader's acquire
  reader.join();
  domain.collect();
  EXPECT_TRUE(log.contains(value));
}

TEST(HazardPointers, DomainDestructorReclaimsLeftovers) {
  reclaim_log log;
  {
    ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
    ts::detail::hazard_holder holder(domain);
    holder.retire(new int(1));
    holder.retire(new int(2));
  }
  EXPECT_EQ(log.reclaimed.size(), 2U);
}

TEST(LockfreeQueue, BurstReturnsEveryNodeToThePool) {
  const std::size_t burst = 100'000;
  ts::lockfree_queue queue(burst + 16);
  int ran = 0;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < burst; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ++ran; })));
    ts::job_function job;
    while (queue.try_pop(job)) job();
    queue.collect();
    EXPECT_EQ(queue.retired_count(), 0U);
    // Everything but the dummy is back in the pool.
    EXPECT_EQ(queue.pooled_count() + 1, queue.allocated_count());
    // The second round reuses the first round's nodes: no new allocation.
    EXPECT_EQ(queue.allocated_count(), burst + 1) << "round " << round;
  }
  EXPECT_EQ(ran, static_cast<int>(2 * burst));
}

TEST(LockfreeQueue, PoolLimitReturnsMemoryAfterBurst) {
  ts::lockfree_queue queue(64);
  const std::size_t burst = ts::test::scaled(100'000);
  for (std::size_t i = 0; i < burst; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
  EXPECT_GE(queue.allocated_count(), burst + 1);
  ts::job_function job;
  while (queue.try_pop(job)) job();
  queue.collect();
  EXPECT_EQ(queue.retired_count(), 0U);
  EXPECT_LE(queue.pooled_count(), 64U);
  EXPECT_EQ(queue.allocated_count(), queue.pooled_count() + 1);
}

TEST(LockfreeQueue, ConcurrentBurstIsFullyReclaimed) {
  ts::lockfree_queue queue(1 << 20);
  const std::size_t per_thread = ts::test::scaled(100'000) / 4;
  std::atomic<std::size_t> executed{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        ASSERT_TRUE(
            queue.try_push(ts::job_function([&executed] { executed.fetch_add(1, std::memory_order_relaxed); })));
      }
    });
  }
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([&] {
      ts::job_function job;
      // relaxed: progress check; the join orders the final read.
      while (executed.load(std::memory_order_relaxed) < 2 * per_thread) {
        if (queue.try_pop(job)) job();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(executed.load(std::memory_order_seq_cst), 2 * per_thread);  // seq_cst: pairs with the writers' RMW/store
  queue.collect();
  EXPECT_EQ(queue.retired_count(), 0U);
  EXPECT_EQ(queue.pooled_count() + 1, queue.allocated_count());
  EXPECT_LE(queue.hazard_record_count(), 4U);
}

TEST(LockfreeQueue, DestructionDestroysQueuedJobsOnce) {
  ts::test::lifetime_tracker tracker;
  {
    ts::lockfree_queue queue;
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(queue.try_push(ts::job_function(ts::test::counting_functor(tracker))));
    ts::job_function job;
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(queue.try_pop(job));
      job();
    }
    job.reset();
    queue.close();  // closed queues are destroyed the same way
  }
  EXPECT_EQ(tracker.alive(), 0);
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 10);
}

TEST(LockfreeQueue, RefusedPushKeepsTheJob) {
  ts::test::lifetime_tracker tracker;
  {
    ts::lockfree_queue queue;
    queue.close();
    ts::job_function job{ts::test::counting_functor(tracker)};
    EXPECT_EQ(queue.try_push(std::move(job)).error().code(), ts::error_code::pool_stopped);
    ASSERT_TRUE(job);
    job();
    EXPECT_EQ(queue.allocated_count(), queue.pooled_count() + queue.retired_count() + 1);
  }
  EXPECT_EQ(tracker.alive(), 0);
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 1);
}
