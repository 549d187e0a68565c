// lockfree_queue specifics: segment pool and reclamation of segments,
// segment boundaries, destruction (hazard_domain itself:
// tests/detail/hazard_pointers_test.cpp).
#include "thread_system/queues/lockfree_queue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "../support/close_race.hpp"
#include "../support/test_support.hpp"

namespace ts = thread_system;

namespace {
constexpr std::size_t segment_jobs = ts::lockfree_queue::segment_capacity;
}  // namespace

TEST(LockfreeQueue, BurstReturnsEverySegmentToThePool) {
  const std::size_t burst = 100'000;
  const std::size_t segments = (burst + segment_jobs - 1) / segment_jobs;
  ts::lockfree_queue queue(burst + 2 * segment_jobs);
  int ran = 0;
  std::size_t after_first_round = 0;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < burst; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ++ran; })));
    EXPECT_EQ(queue.size_approx(), burst);
    ts::job_function job;
    while (queue.try_pop(job)) job();
    EXPECT_EQ(queue.size_approx(), 0U);
    queue.collect();
    EXPECT_EQ(queue.retired_count(), 0U);
    // Everything but the current segment is back in the pool.
    EXPECT_EQ(queue.pooled_count() + 1, queue.allocated_count());
    EXPECT_GE(queue.allocated_count(), segments) << "round " << round;
    EXPECT_LE(queue.allocated_count(), segments + 1) << "round " << round;
    // The second round reuses the first round's segments: no new allocation.
    if (round == 0) after_first_round = queue.allocated_count();
    EXPECT_EQ(queue.allocated_count(), after_first_round) << "round " << round;
  }
  EXPECT_EQ(ran, static_cast<int>(2 * burst));
}

// A bound near SIZE_MAX ("no limit") keeps every segment: its rounding up
// to whole segments wrapped to 0, and every segment was freed.
TEST(LockfreeQueue, AnUnlimitedPoolBoundKeepsSegments) {
  for (const std::size_t bound : {SIZE_MAX, SIZE_MAX - segment_jobs + 2}) {
    ts::lockfree_queue queue(bound);
    const std::size_t burst = 10 * segment_jobs;
    for (std::size_t i = 0; i < burst; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
    ts::job_function job;
    while (queue.try_pop(job)) job();
    queue.collect();
    EXPECT_EQ(queue.retired_count(), 0U);
    EXPECT_GE(queue.pooled_count(), 9U) << "bound " << bound;
    EXPECT_EQ(queue.allocated_count(), queue.pooled_count() + 1) << "bound " << bound;
  }
}

TEST(LockfreeQueue, PoolLimitReturnsMemoryAfterBurst) {
  ts::lockfree_queue queue(2 * segment_jobs);  // at most two segments pooled
  const std::size_t burst = ts::test::scaled(100'000);
  for (std::size_t i = 0; i < burst; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
  EXPECT_GE(queue.allocated_count(), burst / segment_jobs);
  ts::job_function job;
  while (queue.try_pop(job)) job();
  queue.collect();
  EXPECT_EQ(queue.retired_count(), 0U);
  EXPECT_LE(queue.pooled_count(), 2U);
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
  EXPECT_EQ(queue.size_approx(), 0U);
  EXPECT_EQ(queue.accepted_pushes(), 2 * per_thread);
  EXPECT_GE(queue.jobs_moved(), 4 * per_thread);  // push attempts (a retried push counts each) plus pops
  queue.collect();
  EXPECT_EQ(queue.retired_count(), 0U);
  EXPECT_EQ(queue.pooled_count() + 1, queue.allocated_count());
  EXPECT_LE(queue.hazard_record_count(), 4U);
}

// A batch longer than a segment is linked as a chain of segments: all of it,
// contiguous, in order, after what was queued before.
TEST(LockfreeQueue, BatchSpanningSegmentsStaysContiguous) {
  ts::lockfree_queue queue;
  std::vector<std::size_t> seen;
  for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([&seen, i] { seen.push_back(i); })));
  std::vector<ts::job_function> batch;
  const std::size_t batched = 3 * segment_jobs + 5;
  for (std::size_t i = 3; i < 3 + batched; ++i) batch.emplace_back([&seen, i] { seen.push_back(i); });
  ASSERT_TRUE(queue.push_batch(batch));
  ASSERT_TRUE(queue.try_push(ts::job_function([&seen, n = 3 + batched] { seen.push_back(n); })));
  EXPECT_EQ(queue.size_approx(), batched + 4);
  ts::job_function job;
  while (queue.try_pop(job)) job();
  ASSERT_EQ(seen.size(), batched + 4);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
  // The first segment's unused cells were skipped, not claimed one by one
  // (each would count as contention: a cell claimed ahead of any producer).
  EXPECT_EQ(queue.cas_retries(), 0U);
}

// Small batches between single pushes: each batch starts a segment, and the
// cells left unused before it cost consumers nothing.
TEST(LockfreeQueue, SmallBatchesLeaveNoCellsToAbandon) {
  ts::lockfree_queue queue;
  std::size_t next = 0;
  std::size_t ran = 0;
  std::size_t expected = 0;
  bool in_order = true;
  auto job_for = [&](std::size_t value) {
    return ts::job_function([&, value] {
      if (value != expected) in_order = false;
      expected = value + 1;
      ++ran;
    });
  };
  for (int round = 0; round < 200; ++round) {
    ASSERT_TRUE(queue.try_push(job_for(next++)));
    std::array<ts::job_function, 3> batch{job_for(next), job_for(next + 1), job_for(next + 2)};
    next += 3;
    ASSERT_TRUE(queue.push_batch(batch));
    if (round % 3 == 0) {
      ts::job_function job;
      while (queue.try_pop(job)) job();
    }
  }
  ts::job_function job;
  while (queue.try_pop(job)) job();
  EXPECT_TRUE(in_order);
  EXPECT_EQ(ran, next);
  EXPECT_EQ(queue.cas_retries(), 0U);
}

// Cells run out many times over: a producer links a new segment, consumers
// leave used-up ones, while producers and consumers race at the boundary.
TEST(LockfreeQueue, SegmentBoundariesUnderContentionLoseNothing) {
  ts::lockfree_queue queue(0);  // nothing pooled: every segment is fresh
  constexpr int producers = 3;
  const std::size_t per_producer = ts::test::scaled(20 * segment_jobs);
  std::atomic<std::size_t> popped{0};
  std::vector<std::thread> threads;
  std::mutex order_mutex;
  std::vector<std::size_t> next_expected(producers, 0);
  bool in_order = true;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (std::size_t i = 0; i < per_producer; ++i) {
        // Each job checks that its producer's jobs run in push order (one
        // consumer at a time checks under the mutex, so the order is the pops').
        ASSERT_TRUE(queue.try_push(ts::job_function([&, p, i] {
          std::lock_guard lock(order_mutex);
          if (next_expected[static_cast<std::size_t>(p)] != i) in_order = false;
          next_expected[static_cast<std::size_t>(p)] = i + 1;
        })));
      }
    });
  }
  threads.emplace_back([&] {
    ts::job_function job;
    // relaxed: progress only; the join orders the final read.
    while (popped.load(std::memory_order_relaxed) < producers * per_producer) {
      if (queue.try_pop(job)) {
        job();
        popped.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(in_order);
  ts::job_function job;
  EXPECT_FALSE(queue.try_pop(job));
  queue.collect();
  EXPECT_EQ(queue.allocated_count(), 1U);  // nothing pooled, only the current segment left
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
    EXPECT_EQ(queue.size_approx(), 0U);
  }
  EXPECT_EQ(tracker.alive(), 0);
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 1);
}

// wait_for_holders() returns only once the operation that held a record
// when it was called has released it.

// accepted_pushes() counts exactly the pushes that succeeded once close()
// and wait_for_pushes() have returned, with pushes racing the close.
TEST(LockfreeQueue, AcceptedPushesIsFinalAfterCloseAndWait) {
  const std::size_t rounds = ts::test::scaled(40);
  for (std::size_t round = 0; round < rounds; ++round) {
    ts::lockfree_queue queue;
    ts::test::expect_accepted_count_final_after_close(
        queue, std::chrono::microseconds(100 + 37 * (round % 11)), [] {}, round);
  }
}

namespace thread_system {
// A push stopped between taking its cell index and publishing its job, as a
// preempted producer is: the white-box half of the tests below.
struct lockfree_queue_test_access {
  static std::uint64_t take_index(lockfree_queue& queue) {
    return queue.tail_.load(std::memory_order_seq_cst)->enq.fetch_add(1, std::memory_order_seq_cst) &
           lockfree_queue::index_mask;
  }
  // Publishes `job` in the cell at `index` as place() does; false (the job
  // given back) when a pop abandoned the cell first.
  static bool publish(lockfree_queue& queue, std::uint64_t index, job_function&& job) {
    auto& target = queue.tail_.load(std::memory_order_seq_cst)->cells()[index];
    if (!lockfree_queue::slot::prepare(job)) return false;
    target.job.put(std::move(job));
    std::uint32_t expected = lockfree_queue::cell_empty;
    if (target.state.compare_exchange_strong(expected, lockfree_queue::cell_full, std::memory_order_seq_cst)) {
      return true;
    }
    target.job.take_prepared(job);
    lockfree_queue::slot::unprepare(job);
    return false;
  }
  // A consumer that overtook the producers, as pop_one() does under
  // contention: takes the head segment's next index and abandons its cell,
  // which no producer has yet.
  static void claim_ahead(lockfree_queue& queue) {
    auto* head = queue.head_.load(std::memory_order_seq_cst);
    const std::uint64_t index = head->deq.fetch_add(1, std::memory_order_seq_cst);
    head->cells()[index].state.exchange(lockfree_queue::cell_abandoned, std::memory_order_seq_cst);
  }
  // Cells of the last segment (the one pushes go to).
  static std::uint64_t tail_capacity(lockfree_queue& queue) {
    return queue.tail_.load(std::memory_order_seq_cst)->capacity;
  }
  // seal() and unseal(), as the adaptive queue calls them.
  static bool seal(lockfree_queue& queue) { return queue.seal(); }
  static bool unseal(lockfree_queue& queue) { return queue.unseal(); }
  // Runs `hook` inside resolve_pending(), between reading a successor and
  // protecting it; null removes it.
  static void set_resolve_pending_hook(void (*hook)(lockfree_queue&)) {
    lockfree_queue::resolve_pending_hook_.store(hook, std::memory_order_relaxed);  // single-threaded test
  }
  // Segments on the reuse pool whose producer word carries a flag: a pooled
  // segment is reset, so any flag was written after it was reclaimed.
  static std::size_t flagged_pooled_segments(lockfree_queue& queue) {
    std::size_t flagged = 0;
    // acquire / relaxed: the test's own thread reclaimed them; no operation runs.
    for (auto* s = queue.pool_top_.load(std::memory_order_acquire); s != nullptr;
         s = s->next.load(std::memory_order_relaxed)) {
      if ((s->enq.load(std::memory_order_relaxed) & lockfree_queue::any_flag) != 0) ++flagged;
    }
    return flagged;
  }
};
}  // namespace thread_system

namespace {

// The last job left is a push still in progress: a pop reports empty at
// once, without claiming (and abandoning) the cell its producer is about to
// publish, and empty_approx() agrees (a pool's worker may park: the push
// wakes one after publishing).
TEST(LockfreeQueue, PushInProgressReadsAsEmptyWithoutLosingItsCell) {
  ts::lockfree_queue queue;
  int ran = 0;
  ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ++ran; })));
  const std::uint64_t index = ts::lockfree_queue_test_access::take_index(queue);
  ts::job_function job;
  ASSERT_TRUE(queue.try_pop(job));  // the published one before it
  job();
  EXPECT_FALSE(queue.try_pop(job));
  EXPECT_TRUE(queue.empty_approx());
  EXPECT_EQ(queue.cas_retries(), 0U);  // no cell abandoned under its producer
  ASSERT_TRUE(ts::lockfree_queue_test_access::publish(queue, index, ts::job_function([&ran] { ran += 10; })));
  EXPECT_FALSE(queue.empty_approx());
  ASSERT_TRUE(queue.try_pop(job));
  job();
  EXPECT_EQ(ran, 11);
}

// A push in progress does not hold up the jobs published after it: the pop
// waits a bounded time, abandons the cell (its producer retries elsewhere)
// and takes the next job.
TEST(LockfreeQueue, PushInProgressDoesNotBlockLaterJobs) {
  ts::lockfree_queue queue;
  const std::uint64_t index = ts::lockfree_queue_test_access::take_index(queue);
  int ran = 0;
  ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ++ran; })));
  EXPECT_FALSE(queue.empty_approx());
  ts::job_function job;
  ASSERT_TRUE(queue.try_pop(job));
  job();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(queue.cas_retries(), 1U);  // the abandoned cell
  EXPECT_FALSE(ts::lockfree_queue_test_access::publish(queue, index, ts::job_function([] {})));
  EXPECT_FALSE(queue.try_pop(job));
}

// try_push(job, was_empty) reports whether an earlier job was still
// unclaimed: what a pool needs to skip a wake-up.
TEST(LockfreeQueue, TryPushReportsWhetherEarlierJobsWereWaiting) {
  ts::lockfree_queue queue;
  bool was_empty = false;
  ASSERT_TRUE(queue.try_push(ts::job_function([] {}), was_empty));
  EXPECT_TRUE(was_empty);
  ASSERT_TRUE(queue.try_push(ts::job_function([] {}), was_empty));
  EXPECT_FALSE(was_empty);
  ts::job_function job;
  ASSERT_TRUE(queue.try_pop(job));
  ASSERT_TRUE(queue.try_push(ts::job_function([] {}), was_empty));
  EXPECT_FALSE(was_empty);  // the second job is still queued
  ASSERT_TRUE(queue.try_pop(job));
  ASSERT_TRUE(queue.try_pop(job));
  ASSERT_TRUE(queue.try_push(ts::job_function([] {}), was_empty));
  EXPECT_TRUE(was_empty);
  // Refused: left as it was.
  queue.close();
  was_empty = false;
  EXPECT_FALSE(queue.try_push(ts::job_function([] {}), was_empty));
  EXPECT_FALSE(was_empty);
}

// A run of published jobs is claimed at once and handed out in order; the
// destructor then destroys exactly the jobs never taken (cells taken that
// way stay marked full).
TEST(LockfreeQueue, BatchClaimKeepsOrderAndDestroysOnlyUntakenJobs) {
  ts::test::lifetime_tracker tracker;
  {
    ts::lockfree_queue queue;
    std::vector<int> seen;
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([&seen, i] { seen.push_back(i); })));
    std::array<ts::job_function, 8> out;
    EXPECT_EQ(queue.pop_batch(out), out.size());
    for (auto& job : out) job();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(queue.try_push(ts::job_function(ts::test::counting_functor(tracker))));
    std::array<ts::job_function, 14> rest;
    EXPECT_EQ(queue.pop_batch(rest), rest.size());  // 12 plain jobs, then 2 tracked ones
    for (auto& job : rest) job();
    ASSERT_EQ(seen.size(), 20U);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
    EXPECT_EQ(queue.cas_retries(), 0U);
  }
  EXPECT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 2);  // seq_cst: as the checks above
  EXPECT_EQ(tracker.alive(), 0);                                  // three destroyed by the queue, once each
}

}  // namespace

namespace {

std::atomic<int> hook_pops{0};

// Inside seal()'s walk, after it read the head segment's successor N: a
// consumer takes the head's three jobs and N's five, which leaves both
// segments (the head was flagged by the walk, N by the pop that found a
// successor behind it, both with fewer than a segment's 128 cells used),
// and a scan reclaims N into the pool.
void drain_two_segments_and_reclaim(ts::lockfree_queue& queue) {
  ts::job_function job;
  for (int i = 0; i < 9; ++i) {
    if (!queue.try_pop(job)) return;
    job();
    job.reset();
    hook_pops.fetch_add(1, std::memory_order_relaxed);  // read by the same thread
  }
  queue.collect();
}

// Regression: the walk of seal() (and close()) protected the successor of a
// segment and then trusted it while the segment had used fewer than 128
// cells, but a flagged segment is left - and its successor can be left and
// reclaimed - with any number of cells used. The walk then went on in a
// reclaimed segment: here it flagged a segment on the reuse pool (with
// pooling off it wrote freed memory, and the adaptive queue, which seals on
// every switch back to the mutex queue, crashed under load).
TEST(LockfreeQueue, SealWalkNeverEntersASegmentAPopReclaimed) {
  ts::lockfree_queue queue;
  std::atomic<int> ran{0};
  auto job = [&ran] { ran.fetch_add(1, std::memory_order_relaxed); };  // read by the same thread
  // Two segments used up and pooled first, so that N and N2 are pooled
  // segments and go back to the pool (a batch's segment allocated to its
  // size is freed instead, where only a sanitizer would see the write).
  ts::job_function warm;
  for (std::size_t i = 0; i < 2 * segment_jobs + 1; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
  while (queue.try_pop(warm)) warm();
  warm.reset();
  queue.collect();
  ASSERT_EQ(queue.pooled_count(), 2U);
  const std::size_t allocated = queue.allocated_count();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(queue.try_push(ts::job_function(job)));  // the head segment
  for (int b = 0; b < 2; ++b) {                                                    // N, then N2: a segment each
    std::array<ts::job_function, 5> batch;
    for (auto& fn : batch) fn = ts::job_function(job);
    ASSERT_TRUE(queue.push_batch(batch));
  }
  ASSERT_EQ(queue.allocated_count(), allocated);  // N and N2 came from the pool
  hook_pops.store(0, std::memory_order_relaxed);
  ts::lockfree_queue_test_access::set_resolve_pending_hook(&drain_two_segments_and_reclaim);
  const bool sealed = ts::lockfree_queue_test_access::seal(queue);
  ts::lockfree_queue_test_access::set_resolve_pending_hook(nullptr);
  ASSERT_TRUE(sealed);
  ASSERT_EQ(hook_pops.load(std::memory_order_relaxed), 9);
  EXPECT_EQ(ts::lockfree_queue_test_access::flagged_pooled_segments(queue), 0U)
      << "seal() walked into a segment that had been reclaimed";
  ASSERT_TRUE(ts::lockfree_queue_test_access::unseal(queue));
  ts::job_function rest;
  while (queue.try_pop(rest)) {
    rest();
    rest.reset();
  }
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 13);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(queue.try_push(ts::job_function(job)));  // pooled segments work
  while (queue.try_pop(rest)) {
    rest();
    rest.reset();
  }
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 213);
}

}  // namespace

namespace {

// With no pooled segment to take, a small batch gets a segment of its own
// size rather than a full one: a backlog of small batches holds a few
// hundred bytes per batch, not a 5 KiB segment each. Its segment is freed,
// not pooled, once used up; order, pops that claim whole batches, and the
// destructor work across such segments as across full ones.
TEST(LockfreeQueue, SmallBatchWithNothingPooledGetsASegmentOfItsSize) {
  ts::test::lifetime_tracker tracker;
  {
    ts::lockfree_queue queue(0);  // nothing pooled: every segment is fresh
    std::vector<int> seen;
    int next = 0;
    for (int b = 0; b < 40; ++b) {
      std::array<ts::job_function, 8> batch;
      for (auto& fn : batch) fn = ts::job_function([&seen, i = next++] { seen.push_back(i); });
      ASSERT_TRUE(queue.push_batch(batch));
      EXPECT_EQ(ts::lockfree_queue_test_access::tail_capacity(queue), batch.size());
    }
    EXPECT_EQ(queue.allocated_count(), 41U);
    // A single push after a small batch's segment links a full one.
    ASSERT_TRUE(queue.try_push(ts::job_function([&seen, i = next++] { seen.push_back(i); })));
    EXPECT_EQ(ts::lockfree_queue_test_access::tail_capacity(queue), segment_jobs);
    EXPECT_EQ(queue.size_approx(), 321U);
    // Pops of 20: each claims runs across the batches' segments.
    std::array<ts::job_function, 20> out;
    std::size_t popped = 0;
    for (std::size_t n = 0; (n = queue.pop_batch(out)) != 0;) {
      for (std::size_t i = 0; i < n; ++i) out[i]();
      popped += n;
    }
    EXPECT_EQ(popped, 321U);
    ASSERT_EQ(seen.size(), 321U);
    for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i));
    EXPECT_EQ(queue.cas_retries(), 0U);
    queue.collect();
    EXPECT_EQ(queue.allocated_count(), 1U);  // the batches' segments were freed; the full one is current
    // Jobs left in such segments are destroyed with the queue, once each.
    for (int b = 0; b < 3; ++b) {
      std::array<ts::job_function, 5> batch;
      for (auto& fn : batch) fn = ts::job_function(ts::test::counting_functor(tracker));
      ASSERT_TRUE(queue.push_batch(batch));
    }
    ts::job_function job;
    ASSERT_TRUE(queue.try_pop(job));
    job();
  }
  EXPECT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 1);  // seq_cst: after the queue's destruction
  EXPECT_EQ(tracker.alive(), 0);
}

// With a pooled segment at hand, a small batch takes it (no allocation),
// and a pooled segment that held one is reset for its next use: single
// pushes then fill all of its cells.
TEST(LockfreeQueue, SmallBatchTakesAPooledSegmentWhenThereIsOne) {
  ts::lockfree_queue queue;
  ts::job_function job;
  for (std::size_t i = 0; i < 2 * segment_jobs + 1; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
  while (queue.try_pop(job)) job();
  queue.collect();
  ASSERT_EQ(queue.pooled_count(), 2U);
  const std::size_t allocated = queue.allocated_count();
  int ran = 0;
  for (int round = 0; round < 50; ++round) {
    std::array<ts::job_function, 3> batch;
    for (auto& fn : batch) fn = ts::job_function([&ran] { ++ran; });
    ASSERT_TRUE(queue.push_batch(batch));
    EXPECT_EQ(ts::lockfree_queue_test_access::tail_capacity(queue), segment_jobs);
    for (std::size_t i = 0; i < segment_jobs; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ++ran; })));
    while (queue.try_pop(job)) job();
    queue.collect();
  }
  EXPECT_EQ(ran, static_cast<int>(50 * (3 + segment_jobs)));
  EXPECT_EQ(queue.allocated_count(), allocated);  // every segment came from the pool
  EXPECT_EQ(queue.cas_retries(), 0U);
}

}  // namespace

namespace {

// A stream of small batches that consumers keep up with: while the pool can
// keep them, the batches' segments are full ones and come back to the pool,
// so the stream stops allocating.
TEST(LockfreeQueue, SmallBatchStreamStopsAllocating) {
  ts::lockfree_queue queue;
  ts::job_function job;
  int ran = 0;
  std::size_t after_warm_up = 0;
  for (int round = 0; round < 300; ++round) {
    std::array<ts::job_function, 4> batch;
    for (auto& fn : batch) fn = ts::job_function([&ran] { ++ran; });
    ASSERT_TRUE(queue.push_batch(batch));
    EXPECT_EQ(ts::lockfree_queue_test_access::tail_capacity(queue), segment_jobs);
    while (queue.try_pop(job)) job();
    queue.collect();
    if (round == 10) after_warm_up = queue.allocated_count();
  }
  EXPECT_EQ(ran, 1200);
  EXPECT_EQ(queue.allocated_count(), after_warm_up);
  EXPECT_LE(queue.allocated_count(), 3U);
}

// A segment left while a consumer had overtaken its producers (a cell
// claimed and abandoned above the last index handed out) is reset up to the
// consumers' counter when it is reused: its next producers find every cell
// empty and retry none.
TEST(LockfreeQueue, ReusedSegmentIsResetUpToTheFurthestClaim) {
  ts::lockfree_queue queue;
  ts::job_function job;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
  while (queue.try_pop(job)) job();
  ts::lockfree_queue_test_access::claim_ahead(queue);  // cell 2 abandoned, handed out to nobody
  std::array<ts::job_function, 5> batch;
  for (auto& fn : batch) fn = ts::job_function([] {});
  ASSERT_TRUE(queue.push_batch(batch));  // a segment after the head: the head is left once drained
  while (queue.try_pop(job)) job();
  queue.collect();
  ASSERT_EQ(queue.pooled_count(), 1U);  // the first segment, reclaimed
  const std::uint64_t before = queue.cas_retries();
  // These fill the rest of the batch's segment, then link the pooled one
  // and fill its first cells, the abandoned one among them.
  for (std::size_t i = 0; i < segment_jobs; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([] {})));
  EXPECT_EQ(queue.pooled_count(), 0U);
  EXPECT_EQ(queue.cas_retries(), before);
  std::size_t ran = 0;
  while (queue.try_pop(job)) {
    job();
    ++ran;
  }
  EXPECT_EQ(ran, segment_jobs);
}

}  // namespace
