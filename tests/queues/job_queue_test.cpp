#include "thread_system/queues/job_queue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "was_empty_check.hpp"

namespace ts = thread_system;

namespace {
ts::job_function recorder(std::vector<int>& out, int v) {
  return ts::job_function([&out, v] { out.push_back(v); });
}
}  // namespace

TEST(JobQueue, FifoOrder) {
  ts::job_queue q(2);
  std::vector<int> seen;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(q.try_push(recorder(seen, i)));  // forces growth from 2
  EXPECT_EQ(q.size_approx(), 100U);
  EXPECT_GE(q.capacity_bytes(), 100U * 3 * 8);  // every packed job takes at least 3 words
  ts::job_function j;
  while (q.try_pop(j)) j();
  ASSERT_EQ(seen.size(), 100U);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
}

TEST(JobQueue, BatchPushAndPop) {
  ts::job_queue q(4);
  std::vector<int> seen;
  std::vector<ts::job_function> batch;
  for (int i = 0; i < 37; ++i) batch.push_back(recorder(seen, i));
  ASSERT_TRUE(q.push_batch(batch));
  std::array<ts::job_function, 8> out;
  std::size_t total = 0;
  for (std::size_t n = q.pop_batch(out); n > 0; n = q.pop_batch(out)) {
    EXPECT_LE(n, out.size());
    for (std::size_t i = 0; i < n; ++i) out[i]();
    total += n;
  }
  EXPECT_EQ(total, 37U);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(seen[i], i);
}

TEST(JobQueue, BatchWithAnEmptyJobIsRefusedWhole) {
  ts::job_queue q;
  std::vector<int> seen;
  std::vector<ts::job_function> batch;
  batch.push_back(recorder(seen, 1));
  batch.emplace_back();  // empty
  auto r = q.push_batch(batch);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(q.size_approx(), 0U);
  EXPECT_TRUE(batch[0]) << "a refused batch is not moved from";
}

TEST(JobQueue, CloseRefusesPushesAndKeepsWhatIsQueued) {
  ts::job_queue q;
  std::vector<int> seen;
  ASSERT_TRUE(q.try_push(recorder(seen, 1)));
  q.close();
  EXPECT_TRUE(q.is_closed());
  ts::job_function late = recorder(seen, 2);
  auto r = q.try_push(std::move(late));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
  EXPECT_TRUE(late) << "a refused job stays with the caller";  // NOLINT(bugprone-use-after-move)
  ts::job_function j;
  ASSERT_TRUE(q.try_pop(j));
  j();
  EXPECT_FALSE(q.try_pop(j));
  EXPECT_EQ(seen, std::vector<int>{1});
}

TEST(JobQueue, FairShareSpreadsSmallBacklogs) {
  ts::job_queue q;
  std::vector<int> seen;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.try_push(recorder(seen, i)));
  std::array<ts::job_function, 16> out;
  EXPECT_EQ(q.pop_share(out, 4), 2U);   // 8 queued / 4 consumers
  EXPECT_EQ(q.pop_share(out, 16), 1U);  // always at least one
  EXPECT_EQ(q.pop_share(out, 1), 5U);   // a lone consumer takes all
}

TEST(JobQueue, EmptyJobIsRefused) {
  ts::job_queue q;
  auto r = q.try_push(ts::job_function{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
}

// Every value pushed by any producer is popped exactly once.
TEST(JobQueue, ManyProducersManyConsumersExactlyOnce) {
  constexpr int producers = 4;
  constexpr int consumers = 4;
  const int per_producer = static_cast<int>(ts::test::scaled(50'000));
  ts::job_queue q(16);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(producers * per_producer));
  std::atomic<int> done_producers{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        const int id = p * per_producer + i;
        // seq_cst: pairs with the checking load(s)
        ASSERT_TRUE(q.try_push(ts::job_function(
            [&seen, id] { seen[static_cast<std::size_t>(id)].fetch_add(1, std::memory_order_seq_cst); })));
      }
      done_producers.fetch_add(1, std::memory_order_release);
    });
  }
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&] {
      std::array<ts::job_function, 8> out;
      for (;;) {
        const std::size_t n = q.pop_batch(out);
        for (std::size_t i = 0; i < n; ++i) out[i]();
        if (n == 0 && done_producers.load(std::memory_order_acquire) == producers && q.size_approx() == 0) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  // seq_cst: pairs with the writers' RMW/store
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(std::memory_order_seq_cst), 1) << "id " << i;
}

// Packed storage: jobs of every size (1..6 words of inline storage, and
// heap-stored ones) pushed and popped in a pattern that crosses segment ends
// many times (skip markers of every length), grows while jobs are queued and
// reuses spare segments; FIFO holds, every callable is destroyed exactly once
// (shared_ptr use counts back to 1).
TEST(JobQueue, PackedJobsOfEverySizeWrapAndGrow) {
  auto token = std::make_shared<int>(0);
  std::vector<int> seen;
  int next_push = 0;
  auto make = [&](int i) -> ts::job_function {
    switch (i % 5) {
      case 0:
        return ts::job_function([&seen, i] { seen.push_back(i); });  // 16 bytes
      case 1:
        return ts::job_function([&seen, i, keep = token] { seen.push_back(i); });  // non-trivial, 32 bytes
      case 2: {
        std::array<char, 40> pad{};
        return ts::job_function([&seen, i, pad] { seen.push_back(i + pad[0]); });  // 48 bytes: full inline
      }
      case 3: {
        std::array<char, 200> big{};
        return ts::job_function([&seen, i, big, keep = token] { seen.push_back(i + big[0]); });  // heap
      }
      default:
        return ts::job_function([&seen, i, keep = token, other = token] { seen.push_back(i); });
    }
  };
  ts::job_queue q(2);  // the smallest segments (64 words): segment changes from the start
  ts::job_function j;
  for (int round = 0; round < 200; ++round) {
    const int pushes = 1 + round % 7;
    if (round % 4 == 3) {  // a batch, which may span segments
      std::vector<ts::job_function> batch;
      for (int k = 0; k < pushes; ++k) batch.push_back(make(next_push++));
      ASSERT_TRUE(q.push_batch(batch));
    } else {
      for (int k = 0; k < pushes; ++k) ASSERT_TRUE(q.try_push(make(next_push++)));
    }
    const int pops = round % 7 == 6 ? pushes + 3 : pushes - 1;  // drift up, then drain now and then
    for (int k = 0; k < pops && q.try_pop(j); ++k) j();
  }
  while (q.try_pop(j)) j();
  j.reset();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(next_push));
  for (int i = 0; i < next_push; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(token.use_count(), 1);
}

TEST(JobQueue, DestructorDestroysQueuedJobsOnce) {
  auto token = std::make_shared<int>(0);
  {
    ts::job_queue q(4);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(q.try_push(ts::job_function([keep = token] {})));
    EXPECT_EQ(token.use_count(), 101);
  }
  EXPECT_EQ(token.use_count(), 1);
}

// A small job (8 bytes of state) takes 3 words: 100 of them fit in 512 words
// (4 KiB) with room to spare, where full 64-byte slots would need 8 KiB.
TEST(JobQueue, SmallJobsArePacked) {
  ts::job_queue q(2);
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(q.try_push(ts::job_function([&sum, i] { sum += i; })));
  EXPECT_LE(q.capacity_bytes(), 4096U);
  ts::job_function j;
  while (q.try_pop(j)) j();
  EXPECT_EQ(sum, 4950U);
}

// Storage follows the backlog: 100 000 small jobs (8 bytes of state, 3 words
// packed) take their 24 bytes each
// plus at most one segment and each segment's unused end, not the next power
// of two (a doubling ring holds 4 MiB for them), and draining and refilling
// to the same backlog reuses the spare segments instead of allocating.
TEST(JobQueue, MemoryFollowsTheBacklogAndSparesAreReused) {
  ts::job_queue q;  // 4096-word (32 KiB) segments
  std::uint64_t sum = 0;
  const std::uint64_t jobs = 100000;
  for (std::uint64_t i = 0; i < jobs; ++i) ASSERT_TRUE(q.try_push(ts::job_function([&sum] { ++sum; })));
  const std::size_t grown = q.capacity_bytes();
  const std::size_t segment = 4096 * 8;
  const std::size_t segments = (jobs * 3 + (4096 - 8) - 1) / (4096 - 8) + 1;  // each may leave 7 words unused
  EXPECT_LE(grown, segments * segment);
  EXPECT_LT(grown, jobs * 26);  // below 26 bytes per job, all overheads included
  ts::job_function j;
  for (int round = 0; round < 3; ++round) {
    while (q.try_pop(j)) j();
    for (std::uint64_t i = 0; i < jobs; ++i) ASSERT_TRUE(q.try_push(ts::job_function([&sum] { ++sum; })));
    EXPECT_EQ(q.capacity_bytes(), grown) << "round " << round;
  }
  while (q.try_pop(j)) j();
  EXPECT_EQ(sum, 4 * jobs);
}

// A batch spanning many segments goes in whole, in order; when one of the
// segments it needs cannot be allocated, none of it goes in and what was
// queued is untouched (tests/core/allocation_test.cpp has the failing
// allocation; here the spans).
TEST(JobQueue, BatchesSpanSegmentsInOrder) {
  ts::job_queue q(2);  // 64-word segments: 21 small jobs each
  std::vector<int> seen;
  int next = 0;
  ASSERT_TRUE(q.try_push(recorder(seen, next++)));
  for (const std::size_t size : {1U, 20U, 21U, 22U, 100U, 333U}) {
    std::vector<ts::job_function> batch;
    for (std::size_t k = 0; k < size; ++k) batch.push_back(recorder(seen, next++));
    ASSERT_TRUE(q.push_batch(batch));
  }
  EXPECT_EQ(q.size_approx(), static_cast<std::size_t>(next));
  ts::job_function j;
  while (q.try_pop(j)) j();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(next));
  for (int i = 0; i < next; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], i);
}

// The pool wakes a worker only when a push finds the queue empty, so that
// report must be exact, including after the queue was drained.
TEST(JobQueue, PushReportsWhetherTheQueueWasEmpty) {
  ts::test::expect_push_reports_whether_the_queue_was_empty<ts::job_queue>();
}

// contended_operations(): zero while one thread works alone; under a
// many-thread load it counts operations that found the lock held - more
// than zero once threads really overlap, never more than the operations
// made.
TEST(JobQueue, CountsOperationsThatFoundTheLockHeld) {
  ts::job_queue q(16);
  ts::job_function out;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(q.try_push(ts::job_function([] {})));
    ASSERT_TRUE(q.try_pop(out));
  }
  EXPECT_EQ(q.contended_operations(), 0U);

  constexpr int threads = 4;
  std::atomic<std::uint64_t> operations{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      ts::job_function job;
      std::uint64_t local = 0;
      // relaxed: a stop flag; the join below orders the rest.
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) {
          if (!q.try_push(ts::job_function([] {}))) std::abort();
          (void)q.try_pop(job);
          local += 2;
        }
      }
      operations.fetch_add(local, std::memory_order_relaxed);  // read after the joins
    });
  }
  // Until contention shows up (normally within milliseconds), at most 10 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (q.contended_operations() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true, std::memory_order_relaxed);  // see the load above
  for (auto& t : pool) t.join();
  EXPECT_GT(q.contended_operations(), 0U);
  EXPECT_LE(q.contended_operations(), operations.load(std::memory_order_relaxed));  // threads joined
}
