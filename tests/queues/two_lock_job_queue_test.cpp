// two_lock_job_queue: what a lock for each end changes (the behaviour every
// queue shares is in queue_concept_test.cpp).
#include "thread_system/queues/two_lock_job_queue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "was_empty_check.hpp"

namespace ts = thread_system;

// The pool wakes a worker only when a push finds the queue empty, so that
// report must be exact, including after the queue was drained and across
// segments.
TEST(TwoLockJobQueue, PushReportsWhetherTheQueueWasEmpty) {
  ts::test::expect_push_reports_whether_the_queue_was_empty<ts::two_lock_job_queue>();
}

// Storage follows the backlog: 100 000 small jobs (8 bytes of state, 3 words
// packed) take their 24 bytes each plus at most one segment and each
// segment's unused end, not the next power of two (a doubling ring holds 4
// MiB for them); draining and refilling to the same backlog reuses the
// segments the pops used up. Unlike job_queue, a drained queue goes on
// where its last entry ended, so the same backlog may span one segment more
// than the first fill did, and never more than that.
TEST(TwoLockJobQueue, MemoryFollowsTheBacklogAndSegmentsAreReused) {
  ts::two_lock_job_queue q;  // 4096-word (32 KiB) segments
  std::uint64_t sum = 0;
  const std::uint64_t jobs = 100000;
  for (std::uint64_t i = 0; i < jobs; ++i) ASSERT_TRUE(q.try_push(ts::job_function([&sum] { ++sum; })));
  const std::size_t grown = q.capacity_bytes();
  const std::size_t segment = 4096 * 8;
  const std::size_t segments = (jobs * 3 + (4096 - 8) - 1) / (4096 - 8) + 1;  // each may leave 7 words unused
  EXPECT_LE(grown, segments * segment);
  EXPECT_LT(grown, jobs * 26);  // below 26 bytes per job, all overheads included
  ts::job_function j;
  for (int round = 0; round < 8; ++round) {
    while (q.try_pop(j)) j();
    for (std::uint64_t i = 0; i < jobs; ++i) ASSERT_TRUE(q.try_push(ts::job_function([&sum] { ++sum; })));
    EXPECT_LE(q.capacity_bytes(), grown + segment) << "round " << round;
    EXPECT_LE(q.capacity_bytes(), segments * segment) << "round " << round;
  }
  while (q.try_pop(j)) j();
  EXPECT_EQ(sum, 9 * jobs);
}

// A push takes only the tail lock and a pop only the head lock: one producer
// and one consumer, running side by side, never find a lock held (job_queue,
// with one lock for both ends, counts 7 000-22 000 contended operations in
// the same test). Deterministic: each lock has a single user, however the
// threads are scheduled.
TEST(TwoLockJobQueue, OneProducerAndOneConsumerNeverWaitForEachOther) {
  ts::two_lock_job_queue q(16);
  const std::size_t jobs = ts::test::scaled(400'000);
  std::atomic<bool> producer_done{false};
  std::atomic<std::size_t> ran{0};
  std::thread consumer([&] {
    std::array<ts::job_function, 8> out;
    // acquire: pairs with the release store after the last push.
    for (;;) {
      const bool done = producer_done.load(std::memory_order_acquire);
      const std::size_t n = q.pop_share(out, 1);
      for (std::size_t i = 0; i < n; ++i) out[i]();
      if (n == 0 && done) break;
    }
  });
  std::size_t pushed = 0;
  for (; pushed < jobs; ++pushed) {
    const bool ok =
        static_cast<bool>(q.try_push(ts::job_function([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })));
    EXPECT_TRUE(ok) << "push " << pushed;
    if (!ok) break;  // the consumer still stops and is joined
  }
  producer_done.store(true, std::memory_order_release);  // pairs with the consumer's acquire
  consumer.join();
  EXPECT_EQ(pushed, jobs);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), pushed);  // relaxed: after join()
  EXPECT_EQ(q.contended_operations(), 0U);
}

// Two producers and two consumers (try_pop and pop_share) on the smallest
// segments, jobs of three sizes (3, 8 words, and stored on the heap), so that segments are used up by the pops
// and reused by the pushes all the time: every job runs once, and each
// consumer sees each producer's jobs in the order pushed.
TEST(TwoLockJobQueue, EachProducersOrderHoldsWhileSegmentsAreReused) {
  constexpr std::size_t producers = 2;
  constexpr std::size_t consumers = 2;
  ts::two_lock_job_queue q(2);  // 64-word segments
  std::vector<ts::test::round_budget> budgets;
  for (std::size_t p = 0; p < producers; ++p) budgets.emplace_back(ts::test::scaled(300'000));
  std::array<std::size_t, producers> pushed{};
  std::atomic<std::size_t> producers_done{0};
  std::atomic<std::size_t> popped{0};
  // Written by the job that runs on a consumer: (producer, sequence number).
  struct seen_by {
    std::array<std::size_t, producers> next{};  // the next sequence number expected from each producer
    std::size_t out_of_order = 0;
    std::size_t runs = 0;
  };
  std::array<seen_by, consumers> seen{};
  thread_local seen_by* current = nullptr;
  auto record = [](std::size_t p, std::size_t i) {
    if (current->next[p] > i) ++current->out_of_order;
    current->next[p] = i + 1;
    ++current->runs;
  };
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      std::size_t i = 0;
      for (; budgets[p].next(i); ++i) {
        ts::job_function job;
        if (i % 3 == 0) {
          job = ts::job_function([record, p, i] { record(p, i); });  // small
        } else if (i % 3 == 1) {
          std::array<char, 24> pad{};  // 48 bytes with p and i: the largest inline job, 8 words packed
          job = ts::job_function([record, p, i, pad] { record(p, i + static_cast<std::size_t>(pad[0])); });
        } else {
          std::array<char, 200> big{};  // stored on the heap
          job = ts::job_function([record, p, i, big] { record(p, i + static_cast<std::size_t>(big[0])); });
        }
        const bool ok = static_cast<bool>(q.try_push(std::move(job)));
        EXPECT_TRUE(ok) << "producer " << p << ", push " << i;
        if (!ok) break;  // still counted as done below, so the consumers stop
      }
      pushed[p] = i;                                           // read after join()
      producers_done.fetch_add(1, std::memory_order_release);  // pairs with the consumers' acquire
    });
  }
  for (std::size_t c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      current = &seen[c];
      std::array<ts::job_function, 4> out;
      for (;;) {
        // acquire: pairs with the producers' release; read before the pop,
        // so an empty pop after it means nothing is left.
        const bool done = producers_done.load(std::memory_order_acquire) == producers;
        const std::size_t n = c == 0 ? (q.try_pop(out[0]) ? 1 : 0) : q.pop_share(out, consumers);
        for (std::size_t k = 0; k < n; ++k) out[k]();
        popped.fetch_add(n, std::memory_order_relaxed);  // read after join()
        if (n == 0) {
          if (done) break;
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::size_t total = pushed[0] + pushed[1];
  EXPECT_EQ(popped.load(std::memory_order_relaxed), total);  // relaxed: after join()
  std::size_t runs = 0;
  for (const auto& s : seen) {
    EXPECT_EQ(s.out_of_order, 0U);
    runs += s.runs;
  }
  EXPECT_EQ(runs, total);
  for (std::size_t p = 0; p < producers; ++p) {
    // The last job of each producer ran on one of the consumers.
    EXPECT_TRUE(seen[0].next[p] == pushed[p] || seen[1].next[p] == pushed[p]) << "producer " << p;
  }
  EXPECT_TRUE(q.empty_approx());
}

// The destructor destroys every job still queued exactly once, wherever the
// segments are: in use, spare, or used up by the pops and not yet taken
// back by a push.
TEST(TwoLockJobQueue, DestructorDestroysQueuedJobsOnce) {
  auto token = std::make_shared<int>(0);
  {
    ts::two_lock_job_queue q(2);  // 64-word segments: 16 jobs of 4 words each
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(q.try_push(ts::job_function([keep = token] {})));
    ts::job_function out;
    for (int i = 0; i < 60; ++i) ASSERT_TRUE(q.try_pop(out));  // segments go back to the pushers
    out.reset();
    EXPECT_EQ(token.use_count(), 41);
  }
  EXPECT_EQ(token.use_count(), 1);
}
