// backpressure (pools/backpressure.hpp) and the bounded injector
// (pool_queue::bounded): what a full pool does with the next job - refuse,
// block, block for a while, run it on the caller, drop the oldest - in both
// pools, alone and under concurrent producers.
#include "thread_system/pools/backpressure.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

ts::pool_options bounded(ts::backpressure b) {
  auto o = ts::test::pool_opts("bounded");
  o.backpressure = b;
  return o;
}

ts::typed_pool_options<ts::job_types> typed_bounded(ts::backpressure b) {
  ts::typed_pool_options<ts::job_types> o;
  o.name = "typed-bounded";
  o.backpressure = b;
  return o;
}

// Holds the only worker of a typed pool inside a Batch job until release().
struct held_typed_worker {
  std::latch started{1};
  std::latch gate{1};
  explicit held_typed_worker(ts::typed_thread_pool_t<ts::job_types>& pool) {
    EXPECT_TRUE(pool.enqueue(ts::job_types::Batch, [this] {
      started.count_down();
      gate.wait();
    }));
    started.wait();
  }
  void release() { gate.count_down(); }
};

}  // namespace

// ---- backpressure -------------------------------------------------------------

TEST(PoolBackpressure, RejectRefusesExactlyAtCapacity) {
  for (std::size_t capacity : {1U, 2U, 7U, 64U}) {
    ts::thread_pool pool{1, bounded(ts::backpressure::reject(capacity))};
    ts::test::held_worker held(pool);  // started: holds no room
    std::atomic<int> ran{0};
    for (std::size_t i = 0; i < capacity; ++i) {
      ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })) << i;  // bookkeeping
    }
    auto full = pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // bookkeeping
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
    held.release();
    pool.wait_idle();
    EXPECT_EQ(ran.load(std::memory_order_relaxed), static_cast<int>(capacity));
    // Room frees as jobs start: the pool takes `capacity` more.
    ts::test::held_worker again(pool);
    for (std::size_t i = 0; i < capacity; ++i) ASSERT_TRUE(pool.enqueue([] {}));
    EXPECT_FALSE(pool.enqueue([] {}));
    again.release();
    const auto report = pool.stop();
    EXPECT_EQ(report.executed, 2 * capacity + 2);
  }
}

TEST(PoolBackpressure, BatchThatCanNeverFitIsInvalid) {
  ts::thread_pool pool{1, bounded(ts::backpressure::block(4))};
  std::vector<std::function<void()>> five(5, [] {});
  auto r = pool.enqueue_batch(five);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  std::vector<std::function<void()>> four(4, [] {});
  EXPECT_TRUE(pool.enqueue_batch(four));
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, 4U);
}

TEST(PoolBackpressure, BlockWaitsForRoomThenProceeds) {
  ts::thread_pool pool{1, bounded(ts::backpressure::block(2))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));
  ASSERT_TRUE(pool.enqueue([] {}));
  std::atomic<bool> returned{false};
  std::optional<ts::result<void>> result;
  std::thread producer([&] {
    result = pool.enqueue([] {});
    returned.store(true, std::memory_order_release);  // pairs with the acquire loads below
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned.load(std::memory_order_acquire)) << "a full pool must block the producer";
  held.release();
  producer.join();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(*result);
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, 4U);
}

TEST(PoolBackpressure, BlockForTimesOutAndLeavesTheJobToTheCaller) {
  ts::thread_pool pool{1, bounded(ts::backpressure::block_for(1, 20ms))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));
  int ran = 0;
  ts::job_function fn([&ran] { ++ran; });
  auto r = pool.enqueue(std::move(fn));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::timeout);
  ASSERT_TRUE(fn);  // NOLINT(bugprone-use-after-move): refused jobs are left untouched
  fn();
  EXPECT_EQ(ran, 1);
  held.release();
  pool.wait_idle();
}

// block_for with the largest timeout waits for room like block (the
// deadline saturates; now + nanoseconds::max() used to overflow into the
// past and time out at once).
TEST(PoolBackpressure, BlockForWithTheLargestTimeoutWaitsForRoom) {
  ts::thread_pool pool{1, bounded(ts::backpressure::block_for(1, std::chrono::nanoseconds::max()))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));  // the one place: full from here
  std::thread releaser([&held] {
    std::this_thread::sleep_for(20ms);  // the producer below is most likely waiting by then; either way it must succeed
    held.release();
  });
  auto r = pool.enqueue([] {});
  releaser.join();
  EXPECT_TRUE(r) << r.error().to_string();
  pool.wait_idle();
}

TEST(PoolBackpressure, BlockedProducersWakeWithPoolStoppedWhenThePoolStops) {
  ts::thread_pool pool{1, bounded(ts::backpressure::block(1))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));
  constexpr int producers = 3;
  std::atomic<int> stopped_errors{0};
  std::atomic<int> waiting{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < producers; ++i) {
    threads.emplace_back([&] {
      waiting.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
      auto r = pool.enqueue([] {});
      if (!r && r.error().code() == ts::error_code::pool_stopped) {
        stopped_errors.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
      }
    });
  }
  while (waiting.load(std::memory_order_relaxed) < producers) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);  // let them reach the wait
  std::thread stopper([&pool] { (void)pool.stop(ts::stop_mode::cancel_pending); });
  for (auto& t : threads) t.join();  // they return before the held job ends
  EXPECT_EQ(stopped_errors.load(std::memory_order_relaxed), producers);
  held.release();
  stopper.join();
  const auto report = pool.stop();
  EXPECT_EQ(report.executed + report.cancelled, report.accepted);
  EXPECT_EQ(report.accepted, 2U);
}

TEST(PoolBackpressure, CallerRunsRunsOnTheSubmittingThread) {
  ts::thread_pool pool{1, bounded(ts::backpressure::caller_runs(1))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));
  std::thread::id ran_on;
  ASSERT_TRUE(pool.enqueue([&ran_on] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, std::this_thread::get_id());  // ran before enqueue returned, here
  auto f = pool.submit([] { return std::this_thread::get_id(); });
  EXPECT_EQ(f.get(), std::this_thread::get_id());
  held.release();
  pool.wait_idle();
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.caller_ran, 2U);
  EXPECT_EQ(s.executed, 4U);
  EXPECT_EQ(s.accepted, 4U);
}

// A batch with an empty job is refused whole before any policy sees it:
// caller_runs on a full pool used to run the batch here, empty job included.
TEST(PoolBackpressure, ABatchWithAnEmptyJobIsRefusedBeforeThePolicyActs) {
  // Capacity 2 with one job queued: the batch of two does not fit, so the
  // policy would act on it (a batch larger than the capacity is refused
  // before any policy anyway).
  for (auto policy :
       {ts::backpressure::caller_runs(2), ts::backpressure::reject(2), ts::backpressure::drop_oldest(2)}) {
    ts::thread_pool pool{1, bounded(policy)};
    ts::test::held_worker held(pool);
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // half the room is taken
    std::vector<std::function<void()>> batch{[&ran] { ran.fetch_add(10, std::memory_order_relaxed); }, nullptr};
    auto r = pool.enqueue_batch(batch);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);  // relaxed: nothing ran yet, anywhere
    held.release();
    pool.wait_idle();
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);  // relaxed: wait_idle() ordered the run; nothing dropped
  }
}

TEST(PoolBackpressure, DropOldestCancelsTheOldestQueuedJob) {
  ts::thread_pool pool{1, bounded(ts::backpressure::drop_oldest(2))};
  ts::test::held_worker held(pool);
  auto first = pool.submit([] { return 1; });
  auto second = pool.submit([] { return 2; });
  auto third = pool.submit([] { return 3; });   // drops `first`
  auto fourth = pool.submit([] { return 4; });  // drops `second`
  EXPECT_EQ(ts::test::error_code_of(first), ts::error_code::cancelled);
  EXPECT_EQ(ts::test::error_code_of(second), ts::error_code::cancelled);
  held.release();
  EXPECT_EQ(third.get(), 3);
  EXPECT_EQ(fourth.get(), 4);
  pool.wait_idle();
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.dropped, 2U);
  EXPECT_EQ(s.cancelled, 2U);
  EXPECT_EQ(s.executed, 3U);
  EXPECT_EQ(s.accepted, 5U);
}

TEST(PoolBackpressure, CapacityIsNeverExceededUnderConcurrentProducers) {
  constexpr std::size_t capacity = 16;
  ts::thread_pool pool{2, bounded(ts::backpressure::block(capacity))};
  // Jobs whose enqueue() has returned and whose body has not begun. The pool
  // frees a job's room just before running its body, so this count can
  // exceed the pool's own count by at most one job per worker (2 here) -
  // the exact bound itself is checked by RejectRefusesExactlyAtCapacity.
  std::atomic<std::int64_t> queued{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<int> ran{0};
  const int per_producer = static_cast<int>(ts::test::scaled(20000));
  // Both workers are held until the producers have filled the pool, so the
  // bound is reached on every run (not only when the workers fall behind).
  std::atomic<int> held{0};
  std::atomic<bool> release{false};
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(pool.enqueue([&] {
      held.fetch_add(1, std::memory_order_relaxed);                                // bookkeeping
      while (!release.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the release below
    }));
  }
  ASSERT_TRUE(ts::test::eventually([&] { return held.load(std::memory_order_relaxed) == 2; }));
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&] {
      for (int i = 0; i < per_producer; ++i) {
        ASSERT_TRUE(pool.enqueue([&] {
          queued.fetch_sub(1, std::memory_order_seq_cst);  // test bookkeeping, one total order
          ran.fetch_add(1, std::memory_order_relaxed);     // bookkeeping
        }));
        const std::int64_t now = queued.fetch_add(1, std::memory_order_seq_cst) + 1;
        std::int64_t seen = peak.load(std::memory_order_relaxed);
        while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
        }
      }
    });
  }
  EXPECT_TRUE(ts::test::eventually(
      [&] { return peak.load(std::memory_order_relaxed) >= static_cast<std::int64_t>(capacity); }));
  release.store(true, std::memory_order_release);  // pairs with the held jobs' acquire
  for (auto& t : producers) t.join();
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3 * per_producer);
  EXPECT_EQ(pool.get_statistics().executed, static_cast<std::uint64_t>(3 * per_producer) + 2);
  EXPECT_LE(peak.load(std::memory_order_relaxed), static_cast<std::int64_t>(capacity) + 2);
  EXPECT_GE(peak.load(std::memory_order_relaxed), static_cast<std::int64_t>(capacity));
}

TEST(PoolBackpressure, TypedPoolBoundCoversAllTypes) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::reject(3))};
  held_typed_worker held(pool);
  ASSERT_TRUE(pool.enqueue(ts::job_types::RealTime, [] {}));
  ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));
  ASSERT_TRUE(pool.enqueue(ts::job_types::Background, [] {}));
  auto full = pool.enqueue(ts::job_types::RealTime, [] {});
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
  held.release();
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, 4U);
  ASSERT_TRUE(pool.enqueue(ts::job_types::RealTime, [] {}));  // room again
  pool.wait_idle();
}

// ---- the bounded injector (pool_queue::bounded) --------------------------------

namespace {
ts::pool_options bounded_injector(std::size_t capacity) {
  ts::pool_options o;
  o.name = "ring";
  o.queue = ts::pool_queue::bounded;
  o.initial_queue_capacity = capacity;
  return o;
}
}  // namespace

TEST(PoolBoundedInjector, AFullQueueRefusesWithQueueFullAndLosesNothing) {
  for (std::size_t capacity : {2U, 5U, 64U}) {
    const std::size_t fits = std::bit_ceil(capacity);  // rounded up to a power of two
    ts::thread_pool pool{1, bounded_injector(capacity)};
    EXPECT_EQ(pool.queue_kind(), ts::pool_queue::bounded);
    ts::test::held_worker held(pool);  // running: the ring is empty again
    std::atomic<int> ran{0};
    for (std::size_t i = 0; i < fits; ++i) {
      ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })) << i;  // bookkeeping
    }
    bool refused_ran = false;
    auto full = pool.enqueue([&refused_ran] { refused_ran = true; });
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
    EXPECT_NE(full.error().message().find("'ring'"), std::string::npos) << full.error().message();
    EXPECT_THROW((void)pool.submit([] { return 1; }), ts::error_exception);
    // Refusals are not counted, not even for a moment that a snapshot could see.
    EXPECT_EQ(pool.get_statistics().accepted, fits + 1);
    std::vector<std::function<void()>> two(2, [] {});
    auto batch = pool.enqueue_batch(two);
    ASSERT_FALSE(batch);
    EXPECT_EQ(batch.error().code(), ts::error_code::queue_full);
    held.release();
    pool.wait_idle();
    EXPECT_EQ(ran.load(std::memory_order_relaxed), static_cast<int>(fits));
    EXPECT_FALSE(refused_ran);
    const auto report = pool.stop();
    EXPECT_EQ(report.executed, fits + 1);  // the held job and the ones that fitted; refusals are not accepted
    EXPECT_EQ(report.accepted, fits + 1);
  }
}

TEST(PoolBoundedInjector, JobsSpawnedByWorkersAreNotBoundedByTheRing) {
  ts::thread_pool pool{2, bounded_injector(2)};
  std::atomic<int> ran{0};
  auto parent = pool.submit([&pool, &ran] {
    for (int i = 0; i < 200; ++i) {
      // Each goes to this worker's own deque, not through the ring.
      if (!pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })) return false;  // bookkeeping
    }
    return true;
  });
  EXPECT_TRUE(parent.get());
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 200);
}

TEST(PoolBoundedInjector, ConcurrentProducersThatRetryOnQueueFullLoseNoJob) {
  ts::thread_pool pool{2, bounded_injector(8)};
  std::atomic<int> ran{0};
  std::atomic<std::uint64_t> refusals{0};
  const int per_producer = static_cast<int>(ts::test::scaled(20000));
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&] {
      for (int i = 0; i < per_producer; ++i) {
        for (;;) {
          auto r = pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // bookkeeping
          if (r) break;
          ASSERT_EQ(r.error().code(), ts::error_code::queue_full);
          refusals.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3 * per_producer);
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.executed, static_cast<std::uint64_t>(3 * per_producer));
  EXPECT_EQ(s.accepted, static_cast<std::uint64_t>(3 * per_producer));  // refusals are not counted
}

TEST(PoolBoundedInjector, TogetherWithBackpressureItIsInvalid) {
  auto opts = bounded_injector(8);
  opts.backpressure = ts::backpressure::block(100);
  try {
    ts::thread_pool pool{1, opts};
    ADD_FAILURE() << "a bounded injector with backpressure was accepted";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
  }
  EXPECT_THROW(ts::thread_pool("seed", opts), ts::error_exception);
}

TEST(PoolBoundedInjector, AZeroCapacityOrATypedPoolIsInvalid) {
  try {
    ts::thread_pool pool{1, bounded_injector(0)};
    ADD_FAILURE() << "a bounded injector of capacity 0 was accepted";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
  }
  ts::typed_pool_options<ts::job_types> o;
  o.queue = ts::pool_queue::bounded;
  try {
    ts::typed_thread_pool_t<ts::job_types> typed{1, o};
    ADD_FAILURE() << "a typed pool took the bounded injector";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
  }
  ts::typed_thread_pool_t<ts::job_types> seed{"seed"};
  auto r = seed.set_queue(ts::pool_queue::bounded);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(seed.queue_kind(), ts::pool_queue::adaptive);
}

TEST(PoolBackpressure, TypedDropOldestDropsTheLowestPriorityJob) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::drop_oldest(2))};
  held_typed_worker held(pool);
  auto low = pool.submit(ts::job_types::Background, [] { return 1; });
  auto high = pool.submit(ts::job_types::RealTime, [] { return 2; });
  auto another = pool.submit(ts::job_types::Batch, [] { return 3; });  // full: drops `low`
  EXPECT_EQ(ts::test::error_code_of(low), ts::error_code::cancelled);
  held.release();
  EXPECT_EQ(high.get(), 2);
  EXPECT_EQ(another.get(), 3);
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().dropped, 1U);
}

// ---- regressions ------------------------------------------------------------------

namespace {
// Polls `done` for up to 30 s (a bound for a stuck run, not a timing assumption).
bool eventually(const std::atomic<bool>& done) {
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (!done.load(std::memory_order_acquire)) {  // pairs with the release stores of the threads below
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}
}  // namespace

// A slot that frees reaches a single job's producer even when a batch's
// producer, which needs more room than one slot, waits too (the one woken
// used to be the batch's, which went back to sleep).
TEST(PoolBackpressure, AFreedSlotReachesASingleJobsProducerWhileABatchWaits) {
  ts::thread_pool pool{1, bounded(ts::backpressure::block(2))};
  pool.pause();
  std::latch gate{1};
  ASSERT_TRUE(pool.enqueue([&gate] { gate.wait(); }));
  ASSERT_TRUE(pool.enqueue([] {}));
  std::atomic<bool> batch_returned{false};
  std::atomic<bool> single_returned{false};
  std::thread batch([&] {
    EXPECT_TRUE(pool.enqueue_batch(std::vector<std::function<void()>>{[] {}, [] {}}));
    batch_returned.store(true, std::memory_order_release);
  });
  std::this_thread::sleep_for(50ms);  // the batch's producer waits first (the order the bug needs)
  std::thread single([&] {
    EXPECT_TRUE(pool.enqueue([] {}));
    single_returned.store(true, std::memory_order_release);
  });
  std::this_thread::sleep_for(50ms);
  pool.resume();  // the first job starts: one slot frees, enough for the single job only
  EXPECT_TRUE(eventually(single_returned)) << "the single job's producer was not woken for the free slot";
  EXPECT_FALSE(batch_returned.load(std::memory_order_acquire));  // the first job still runs: no room for two
  gate.count_down();
  batch.join();
  single.join();
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, 5U);
}

// A batch submitted by a running job from one of the pool's own workers is
// not bounded, like a single job from there: it goes to the worker's deque
// (it was refused with queue_full, and under drop_oldest its worker spun
// for ever when the room was held by jobs on its own deque).
TEST(PoolBackpressure, ABatchFromAWorkerIsNotBounded) {
  for (const auto policy : {ts::backpressure::reject(4), ts::backpressure::drop_oldest(4)}) {
    ts::thread_pool pool{1, bounded(policy)};
    pool.pause();
    std::atomic<int> ran{0};
    std::optional<ts::result<void>> from_worker;
    ASSERT_TRUE(pool.enqueue([&] {
      from_worker = pool.enqueue_batch(
          std::vector<std::function<void()>>{[&ran] { ran.fetch_add(1, std::memory_order_relaxed); },
                                             [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }});
    }));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
    pool.resume();  // the worker takes all four; three of them hold room on its deque
    pool.wait_idle();
    ASSERT_TRUE(from_worker.has_value());
    EXPECT_TRUE(*from_worker) << from_worker->error().message();
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 5);
  }
}

TEST(PoolBoundedInjector, ABatchFromAWorkerIsNotBoundedByTheRing) {
  ts::thread_pool pool{1, bounded_injector(2)};
  std::latch started{1};
  std::latch gate{1};
  std::atomic<int> ran{0};
  auto count = [&ran] { ran.fetch_add(1, std::memory_order_relaxed); };
  auto parent = pool.submit([&] {
    started.count_down();
    gate.wait();  // the ring is full by now
    return pool.enqueue_batch(std::vector<std::function<void()>>{count, count, count});
  });
  started.wait();
  int queued = 0;
  while (pool.enqueue(count)) ++queued;  // until the ring refuses
  ASSERT_EQ(queued, 2);
  gate.count_down();
  const ts::result<void> r = parent.get();
  EXPECT_TRUE(r) << r.error().message();
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), queued + 3);
}

// In a typed pool too, a job's submissions are not bounded.
TEST(PoolBackpressure, ATypedPoolsJobSubmitsPastAFullBound) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::reject(1))};
  std::atomic<int> ran{0};
  std::optional<ts::result<void>> single;
  std::optional<ts::result<void>> batch;
  held_typed_worker held(pool);
  ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [&] {
    single = pool.enqueue(ts::job_types::Batch, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    batch =
        pool.enqueue_batch(ts::job_types::Batch,
                           std::vector<std::function<void()>>{[&ran] { ran.fetch_add(1, std::memory_order_relaxed); }});
  }));
  ASSERT_FALSE(pool.enqueue(ts::job_types::Batch, [] {}));  // full: one job queued
  held.release();
  pool.wait_idle();
  ASSERT_TRUE(single.has_value() && batch.has_value());
  EXPECT_TRUE(*single);
  EXPECT_TRUE(*batch);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 2);
}

// The bound holds for jobs a worker holds for a paused pool: their room
// frees when they start, not when the worker takes them (a worker leaving
// after resize() runs its deque's jobs and used to free their room, then
// wait for resume(), so more than `capacity` jobs were queued). Which worker
// leaves, and whether its deque still holds jobs then, depends on the
// scheduling, so the case is set up a few times; the bound is checked every
// time.
TEST(PoolBackpressure, JobsHeldForAPausedPoolKeepTheirRoom) {
  constexpr std::size_t capacity = 8;
  for (int attempt = 0; attempt < 4; ++attempt) {
    ts::thread_pool pool{2, bounded(ts::backpressure::reject(capacity))};
    std::atomic<int> started{0};  // the queued jobs (not the two gated ones) that started
    std::latch gated_started{2};
    std::latch gate{1};
    auto gated = [&] {
      gated_started.count_down();
      gate.wait();
    };
    auto counted = [&started] { started.fetch_add(1, std::memory_order_relaxed); };
    pool.pause();
    // The first worker to look takes a fair share of four (a gated job and
    // three on its deque), the other the gated job after them and one more.
    ASSERT_TRUE(pool.enqueue(gated));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.enqueue(counted));
    ASSERT_TRUE(pool.enqueue(gated));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.enqueue(counted));
    pool.resume();
    gated_started.wait();  // both workers are inside a gated job
    pool.pause();
    ASSERT_TRUE(pool.resize(1));  // the newest worker leaves once its gated job returns
    gate.count_down();
    std::this_thread::sleep_for(20ms);  // the leaving worker gets to its deque's jobs (if it has any)
    std::size_t accepted = 2 * 4;
    while (pool.enqueue(counted)) ++accepted;  // reject: until the bound refuses
    // Started while the pool ran: jobs the other worker stole before its own
    // gated job; nothing starts while it is paused.
    const auto ran_before = static_cast<std::size_t>(started.load(std::memory_order_relaxed));
    const std::size_t not_started = accepted - 2 - ran_before;
    EXPECT_LE(not_started, capacity) << "attempt " << attempt;
    pool.resume();
    pool.wait_idle();
    EXPECT_EQ(static_cast<std::size_t>(started.load(std::memory_order_relaxed)), accepted - 2);
  }
}

// The same for a type whose first job runs on the caller: its counters are
// made for it (they were made only by a queued job, so the run was counted
// by the pool and by no type).
TEST(PoolBackpressure, TypedCallerRunsCountsATypeUsedForTheFirstTime) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::caller_runs(1))};
  std::atomic<int> ran{0};
  {
    held_typed_worker held(pool);                            // a Batch job
    ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));  // queued: full
    ASSERT_TRUE(pool.enqueue(ts::job_types::RealTime, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);  // ran here
    held.release();
    pool.wait_idle();
  }
  const auto pool_stats = pool.get_statistics();
  EXPECT_EQ(pool_stats.caller_ran, 1U);
  std::uint64_t accepted = 0;
  std::uint64_t executed = 0;
  bool real_time_listed = false;
  for (const auto& t : pool.get_type_statistics()) {
    accepted += t.accepted;
    executed += t.executed;
    if (t.type_name == pool.type_name(ts::job_types::RealTime)) {
      real_time_listed = true;
      EXPECT_EQ(t.accepted, 1U);
      EXPECT_EQ(t.executed, 1U);
    }
  }
  EXPECT_TRUE(real_time_listed);
  EXPECT_EQ(accepted, pool_stats.accepted);
  EXPECT_EQ(executed, pool_stats.executed);
}

// Jobs that caller_runs runs on the submitting thread count in their type's
// statistics too (they were accepted and ran, but never reached the typed
// injector, which counted only the queued ones).
TEST(PoolBackpressure, TypedCallerRunsJobsCountPerType) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::caller_runs(1))};
  std::atomic<int> ran{0};
  {
    held_typed_worker held(pool);
    ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // queued
    for (int i = 0; i < 2; ++i) {  // full: both run here
      ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
    }
    ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [] { throw std::runtime_error("failed on the caller"); }));
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 2);
    held.release();
    pool.wait_idle();
  }
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3);
  const auto pool_stats = pool.get_statistics();
  EXPECT_EQ(pool_stats.caller_ran, 3U);
  for (const auto& t : pool.get_type_statistics()) {
    if (t.type_name != pool.type_name(ts::job_types::Batch)) continue;
    EXPECT_EQ(t.accepted, 5U);  // the held job, the queued one, three on the caller
    EXPECT_EQ(t.executed, 5U);
    EXPECT_EQ(t.failed, 1U);
    EXPECT_EQ(t.accepted, t.executed + t.cancelled);
  }
}

// ---- a discarded job's own code on the discarding thread ----------------------

namespace {
// Its destructor submits a follow-up job to the pool when it never ran
// (dropped or cancelled); `armed` moves with the job.
struct resubmits_when_dropped {
  ts::thread_pool* pool;
  std::atomic<int>* followups_ran;
  bool armed = true;
  bool ran = false;
  resubmits_when_dropped(ts::thread_pool* p, std::atomic<int>* f) : pool(p), followups_ran(f) {}
  resubmits_when_dropped(resubmits_when_dropped&& o) noexcept
      : pool(o.pool), followups_ran(o.followups_ran), armed(std::exchange(o.armed, false)), ran(o.ran) {}
  resubmits_when_dropped& operator=(resubmits_when_dropped&&) = delete;
  resubmits_when_dropped(const resubmits_when_dropped&) = delete;
  resubmits_when_dropped& operator=(const resubmits_when_dropped&) = delete;
  void operator()() { ran = true; }
  ~resubmits_when_dropped() {
    if (armed && !ran) {
      (void)pool->enqueue(
          [f = followups_ran] { f->fetch_add(1, std::memory_order_relaxed); });  // read after wait_idle()
    }
  }
};

// Its cancel hook calls wait_idle() and stop() on its own pool and records
// what each threw (ok: returned).
struct calls_back_when_cancelled {
  ts::thread_pool* pool;
  ts::error_code* wait_idle_code;
  ts::error_code* stop_code;
  void operator()() {}
  void cancel() noexcept {
    *wait_idle_code = ts::error_code::ok;
    *stop_code = ts::error_code::ok;
    try {
      pool->wait_idle();
    } catch (const ts::error_exception& e) {
      *wait_idle_code = e.code();
    }
    try {
      (void)pool->stop();
    } catch (const ts::error_exception& e) {
      *stop_code = e.code();
    }
  }
};
}  // namespace

// A drop_oldest victim's destructor, run on the submitting thread, submits
// to the same full pool: the victim held its room until its own code had
// returned, so that submission found neither room nor a job to drop and
// the thread yielded for ever. Its room is free first now.
TEST(PoolBackpressure, ADropOldestVictimsDestructorMaySubmitToThePool) {
  ts::thread_pool pool{1, bounded(ts::backpressure::drop_oldest(1))};
  std::atomic<int> followups_ran{0};
  std::atomic<bool> new_job_ran{false};
  {
    ts::test::held_worker held(pool);
    ASSERT_TRUE(pool.enqueue(resubmits_when_dropped(&pool, &followups_ran)));
    // Full: drops the victim, whose destructor submits a follow-up (queued in
    // the victim's room); still full, so that follow-up is dropped in turn.
    ASSERT_TRUE(pool.enqueue([&new_job_ran] { new_job_ran.store(true, std::memory_order_relaxed); }));
    held.release();
    pool.wait_idle();
  }
  EXPECT_TRUE(new_job_ran.load(std::memory_order_relaxed));  // after wait_idle()
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.dropped, 2U);
  EXPECT_EQ(s.accepted, 4U);  // the holding job, the victim, its follow-up, the new job
  EXPECT_EQ(s.executed, 2U);
  EXPECT_EQ(followups_ran.load(std::memory_order_relaxed), 0);
}

// wait_idle() and stop() from a drop_oldest victim's cancel hook (on the
// submitting thread) waited for the victim itself: refused now.
TEST(PoolBackpressure, WaitIdleAndStopFromADropOldestVictimsHookAreRefused) {
  ts::thread_pool pool{1, bounded(ts::backpressure::drop_oldest(1))};
  ts::error_code wait_idle_code = ts::error_code::ok;
  ts::error_code stop_code = ts::error_code::ok;
  {
    ts::test::held_worker held(pool);
    ASSERT_TRUE(pool.enqueue(calls_back_when_cancelled{&pool, &wait_idle_code, &stop_code}));
    ASSERT_TRUE(pool.enqueue([] {}));  // full: drops the victim
    held.release();
    pool.wait_idle();
  }
  EXPECT_EQ(wait_idle_code, ts::error_code::invalid_argument);
  EXPECT_EQ(stop_code, ts::error_code::invalid_argument);
  EXPECT_TRUE(pool.is_running());
  EXPECT_EQ(pool.get_statistics().dropped, 1U);
  // The refused stop() changed nothing. It used to begin the stop before
  // the refusal: every pending timer was cancelled and new ones refused,
  // and a full pool refused submissions with pool_stopped instead of
  // dropping its oldest job.
  std::atomic<bool> timer_ran{false};
  ASSERT_TRUE(pool.schedule_after(1ms, [&timer_ran] { timer_ran.store(true, std::memory_order_release); }));
  EXPECT_TRUE(ts::test::eventually([&timer_ran] { return timer_ran.load(std::memory_order_acquire); }));
  {
    ts::test::held_worker held(pool);
    ASSERT_TRUE(pool.enqueue([] {}));
    EXPECT_TRUE(pool.enqueue([] {}));  // full: drops the one before
    held.release();
    pool.wait_idle();
  }
  EXPECT_EQ(pool.get_statistics().dropped, 2U);
}

// The same from a job that stop(cancel_pending) discards on its calling
// thread: wait_idle() waited for it, stop() locked the mutex its own stop()
// held. Refused now, and the stop completes.
TEST(PoolBackpressure, WaitIdleAndStopFromAJobStopCancelsAreRefused) {
  ts::thread_pool pool{1, ts::test::pool_opts("cancel-hook")};
  ts::error_code wait_idle_code = ts::error_code::ok;
  ts::error_code stop_code = ts::error_code::ok;
  pool.pause();  // the job stays queued until stop() discards it
  ASSERT_TRUE(pool.enqueue(calls_back_when_cancelled{&pool, &wait_idle_code, &stop_code}));
  const auto report = pool.stop(ts::stop_mode::cancel_pending);
  EXPECT_EQ(wait_idle_code, ts::error_code::invalid_argument);
  EXPECT_EQ(stop_code, ts::error_code::invalid_argument);
  EXPECT_EQ(report.cancelled, 1U);
  EXPECT_TRUE(pool.is_stopped());
}

// Jobs a typed pool's worker submits are queued with the others but hold no
// room; drop_oldest picked them as victims, each freeing nothing, and so
// dropped every one of them before the job that held room: six jobs for one
// admission. One job is dropped per job queued now: the new one takes the
// dropped one's place without room.
TEST(PoolBackpressure, TypedDropOldestDropsOneJobPerJobQueued) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::drop_oldest(1))};
  std::atomic<int> children_ran{0};
  std::atomic<bool> newest_ran{false};
  std::latch spawned{1};
  std::latch gate{1};
  ASSERT_TRUE(pool.enqueue(ts::job_types::RealTime, [&] {
    for (int i = 0; i < 5; ++i) {  // from the worker: not bounded, no room held
      (void)pool.enqueue(ts::job_types::Background,
                         [&children_ran] { children_ran.fetch_add(1, std::memory_order_relaxed); });
    }
    spawned.count_down();
    gate.wait();
  }));
  spawned.wait();
  ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));  // holds the only room
  ASSERT_TRUE(pool.enqueue(ts::job_types::Batch,
                           [&newest_ran] { newest_ran.store(true, std::memory_order_relaxed); }));  // full
  EXPECT_EQ(pool.get_statistics().dropped, 1U);
  gate.count_down();
  pool.wait_idle();
  EXPECT_EQ(children_ran.load(std::memory_order_relaxed), 4);  // the oldest Background child was dropped
  EXPECT_TRUE(newest_ran.load(std::memory_order_relaxed));
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.dropped, 1U);
  EXPECT_EQ(s.accepted, s.executed + s.cancelled);
  // The room accounting is whole: the bound still admits exactly one more.
  {
    held_typed_worker held(pool);
    ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));
    ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));  // drops the one before
    EXPECT_EQ(pool.get_statistics().dropped, 2U);
    held.release();
    pool.wait_idle();
  }
}

// Room held by jobs a worker has taken from the queue: a drop_oldest
// submission drops one of those (a job a worker took has not started) and
// does not wait. Here the worker takes one job it submitted itself (no
// room) and two external ones at once; the first pauses the pool, so the
// other two stay on the worker's deque, holding every unit of room, with
// nothing left in the queue. The submission used to yield in a loop until
// resume().
TEST(PoolBackpressure, DropOldestDropsAJobAWorkerHasTakenWhenTheQueueIsEmpty) {
  ts::typed_thread_pool_t<ts::job_types> pool{1, typed_bounded(ts::backpressure::drop_oldest(2))};
  std::atomic<int> ran{0};
  std::latch paused{1};
  std::latch submitted{1};
  std::latch gate{1};
  ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [&] {
    // From the worker: queued without room, ahead of the two below.
    (void)pool.enqueue(ts::job_types::Batch, [&] {
      pool.pause();
      paused.count_down();
    });
    submitted.count_down();
    gate.wait();
  }));
  submitted.wait();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.enqueue(ts::job_types::Batch, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  }
  gate.count_down();  // the worker takes the three queued jobs as one batch
  paused.wait();
  std::atomic<bool> returned{false};
  std::optional<ts::result<void>> newest;
  std::thread producer([&] {
    newest = pool.enqueue(ts::job_types::Batch, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    returned.store(true, std::memory_order_release);
  });
  const bool did_not_wait = eventually(returned);
  pool.resume();  // (lets a waiting producer go on, so that the test ends)
  producer.join();
  EXPECT_TRUE(did_not_wait) << "the submission waited for resume()";
  ASSERT_TRUE(newest.has_value());
  EXPECT_TRUE(*newest);
  pool.wait_idle();
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.dropped, 1U);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 2);  // one of the two taken jobs was dropped, the newest ran
  EXPECT_EQ(s.accepted, s.executed + s.cancelled);
  // The room accounting is whole: exactly two fit again.
  held_typed_worker held(pool);
  EXPECT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));
  EXPECT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));
  EXPECT_TRUE(pool.enqueue(ts::job_types::Batch, [] {}));  // drops one
  EXPECT_EQ(pool.get_statistics().dropped, 2U);
  held.release();
  pool.wait_idle();
}

// A job that caller_runs runs on the submitting thread may stop the pool
// from its own code (not a worker: nothing waits for itself). It has not
// finished then, so the report leaves it out of both counts; the pool's
// statistics count it once it returns.
TEST(PoolBackpressure, AJobCallerRunsRunsMayStopThePool) {
  ts::thread_pool pool{1, bounded(ts::backpressure::caller_runs(1))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));  // queued: the pool is full
  std::optional<ts::stop_report> from_job;
  ASSERT_TRUE(pool.enqueue([&] {  // runs here
    held.release();
    from_job = pool.stop(ts::stop_mode::drain);
  }));
  ASSERT_TRUE(from_job.has_value());
  EXPECT_EQ(from_job->accepted, 2U);  // the held job and the queued one
  EXPECT_EQ(from_job->executed, 2U);
  EXPECT_EQ(from_job->cancelled, 0U);
  const ts::stop_report again = pool.stop();
  EXPECT_EQ(again.accepted, 2U);  // the same report
  EXPECT_EQ(again.executed, 2U);
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.caller_ran, 1U);
  EXPECT_EQ(s.accepted, 3U);
  EXPECT_EQ(s.executed, 3U);
}

// A caller_runs job running on a producer thread was accepted: stop() from
// another thread waits for it, as for a running job, and counts it.
TEST(PoolBackpressure, StopFromAnotherThreadWaitsForACallerRunsJob) {
  ts::thread_pool pool{1, bounded(ts::backpressure::caller_runs(1))};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));  // queued: the pool is full
  std::latch running{1};
  std::latch finish{1};
  std::atomic<bool> done{false};
  std::thread producer([&] {
    EXPECT_TRUE(pool.enqueue([&] {  // runs on the producer
      running.count_down();
      finish.wait();
      done.store(true, std::memory_order_relaxed);
    }));
  });
  running.wait();
  held.release();
  std::optional<ts::stop_report> report;
  bool done_at_stop = false;
  std::thread stopper([&] {
    report = pool.stop(ts::stop_mode::drain);
    done_at_stop = done.load(std::memory_order_relaxed);
  });
  // stop() cannot return before the job ends; the job ends once let go.
  // (A stop() that returned early fails below whatever the timing.)
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  finish.count_down();
  stopper.join();
  producer.join();
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(done_at_stop);
  EXPECT_EQ(report->accepted, 3U);
  EXPECT_EQ(report->executed, 3U);
}

// drop_oldest takes a victim from a worker's deque only if the worker took
// it from the pool's queue: never a job a running job spawned there (a
// worker's submissions are not bounded - a parent counting on its children
// would wait for ever, and the new job, queued in a child's place without
// room, would pass the bound). Worker 0 spawns three children (its LIFO
// slot and deque) and blocks; worker 1 takes [P, D1] from the queue, and P
// pauses the pool, so D1 waits on worker 1's deque holding room.
TEST(PoolBackpressure, DropOldestNeverDropsAJobAWorkerSpawned) {
  ts::thread_pool pool{2, bounded(ts::backpressure::drop_oldest(4))};
  const auto first_worker = pool.native_handle(0);
  ASSERT_TRUE(first_worker);
  std::latch both_started{2};
  std::latch children_made{1};
  std::latch release_spawner{1};
  std::latch release_other{1};
  std::latch paused{1};
  std::atomic<int> children_ran{0};
  std::atomic<int> queued_ran{0};
  auto role = [&] {
    both_started.arrive_and_wait();
    if (::pthread_equal(::pthread_self(), *first_worker) != 0) {
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(pool.enqueue([&children_ran] { children_ran.fetch_add(1, std::memory_order_relaxed); }));
      }
      children_made.count_down();
      release_spawner.wait();
    } else {
      release_other.wait();
    }
  };
  ASSERT_TRUE(pool.enqueue(role));
  ASSERT_TRUE(pool.enqueue(role));
  children_made.wait();
  std::vector<std::function<void()>> first;
  first.emplace_back([&] {
    pool.pause();
    paused.count_down();
  });
  for (int i = 0; i < 3; ++i) first.emplace_back([&queued_ran] { queued_ran.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(pool.enqueue_batch(first));  // the bound is full
  release_other.count_down();              // worker 1 takes its share, [P, D1]
  paused.wait();
  std::vector<std::function<void()>> second;
  for (int i = 0; i < 4; ++i)
    second.emplace_back([&queued_ran] { queued_ran.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(pool.enqueue_batch(second));  // drops D1, D2, D3 - wherever they wait
  EXPECT_EQ(pool.get_statistics().dropped, 3U);
  pool.resume();
  release_spawner.count_down();
  pool.wait_idle();
  EXPECT_EQ(children_ran.load(std::memory_order_relaxed), 3);
  EXPECT_EQ(queued_ran.load(std::memory_order_relaxed), 4);
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.dropped, 3U);
  EXPECT_EQ(s.accepted, s.executed + s.cancelled);
}

// stop() counts a drop_oldest victim whose own code still runs on the
// producer's thread when the workers have finished: the report waits for
// it, as it waits for running jobs (it was missing from the report, which
// then had accepted == executed + cancelled + 1). The victim's destructor
// holds the producer until the stop has had every chance to end first.
TEST(PoolBackpressure, StopWaitsForADropUnderWayAndCountsIt) {
  ts::thread_pool pool{1, bounded(ts::backpressure::drop_oldest(1))};
  std::latch in_victim{1};
  std::latch release_victim{1};
  struct blocks_when_dropped {
    std::latch* in_victim;
    std::latch* release;
    bool armed = true;
    blocks_when_dropped(std::latch* in, std::latch* rel) : in_victim(in), release(rel) {}
    blocks_when_dropped(blocks_when_dropped&& o) noexcept : in_victim(o.in_victim), release(o.release), armed(o.armed) {
      o.armed = false;
    }
    blocks_when_dropped& operator=(blocks_when_dropped&&) = delete;
    ~blocks_when_dropped() {
      if (!armed) return;
      in_victim->count_down();
      release->wait();
    }
    void operator()() { armed = false; }  // run: nothing to wait for
  };
  {
    ts::test::held_worker held(pool);
    ASSERT_TRUE(pool.enqueue(blocks_when_dropped(&in_victim, &release_victim)));  // the pool is full
    // Drops the job above; queued if stop() has not closed the pool by the
    // time the victim's destructor returns, else refused (pool_stopped).
    std::optional<ts::result<void>> newest;
    std::thread producer([&] { newest = pool.enqueue([] {}); });
    in_victim.wait();
    held.release();
    std::optional<ts::stop_report> report;
    std::thread stopper([&] { report = pool.stop(); });
    std::this_thread::sleep_for(50ms);  // time for a stop that does not wait for the drop to end first
    release_victim.count_down();
    stopper.join();
    producer.join();
    ASSERT_TRUE(report.has_value());
    ASSERT_TRUE(newest.has_value());
    EXPECT_EQ(report->cancelled, 1U);  // the victim
    EXPECT_EQ(report->accepted, report->executed + report->cancelled);
    EXPECT_EQ(report->accepted, *newest ? 3U : 2U);  // the held job, the victim, the new job if it was queued
  }
}

// In a typed pool, a victim taken from the workers' deques (the queues being
// empty) comes from the lowest-priority kind a deque holds, as a victim in
// the queues does. Two specialists: X (RealTime, added first) and Y
// (Background). Each takes a batch of two from its kind's queue of four - a
// job its own worker submitted (no room), then a room-holding job (R1, B1)
// that stays on its deque: Y's first job blocks, X's pauses the pool. A
// batch of five then drops the four still queued and one from a deque:
// B1, not R1.
TEST(PoolBackpressure, TypedDropOldestTakesTheLowestPriorityKindFromTheDeques) {
  using ts::job_types;
  ts::typed_thread_pool_t<job_types> pool{"drop-typed", typed_bounded(ts::backpressure::drop_oldest(6))};
  for (job_types t : {job_types::RealTime, job_types::Background}) {
    ASSERT_TRUE(pool.add_worker(std::make_unique<ts::typed_thread_worker_t<job_types>>(std::vector<job_types>{t})));
  }
  ASSERT_TRUE(pool.start());
  std::latch firsts_queued{2};
  std::latch release_x{1};
  std::latch release_y{1};
  std::latch y_first_started{1};
  std::latch release_y_first{1};
  std::latch paused{1};
  std::atomic<bool> r1_ran{false};
  std::atomic<bool> b1_ran{false};
  std::atomic<int> others_ran{0};
  auto other = [&others_ran] { others_ran.fetch_add(1, std::memory_order_relaxed); };
  // On the specialist of `kind`: queues `first` from there (no room), then
  // holds the worker until `release`.
  auto queue_first = [&](job_types kind, std::function<void()> first, std::latch& release) {
    return pool.enqueue(kind, [&pool, &firsts_queued, &release, kind, first = std::move(first)] {
      EXPECT_TRUE(pool.enqueue(kind, first));
      firsts_queued.count_down();
      release.wait();
    });
  };
  ASSERT_TRUE(queue_first(
      job_types::RealTime,
      [&] {
        pool.pause();
        paused.count_down();
      },
      release_x));
  ASSERT_TRUE(queue_first(
      job_types::Background,
      [&] {
        y_first_started.count_down();
        release_y_first.wait();
      },
      release_y));
  firsts_queued.wait();
  ASSERT_TRUE(pool.enqueue(job_types::RealTime, [&r1_ran] { r1_ran.store(true, std::memory_order_relaxed); }));
  ASSERT_TRUE(pool.enqueue(job_types::Background, [&b1_ran] { b1_ran.store(true, std::memory_order_relaxed); }));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.enqueue(job_types::RealTime, other));
    ASSERT_TRUE(pool.enqueue(job_types::Background, other));
  }                        // six jobs hold room: the bound is full
  release_y.count_down();  // Y takes [its first, B1]
  y_first_started.wait();
  release_x.count_down();  // X takes [its first, R1]; the first pauses the pool
  paused.wait();
  std::vector<std::function<void()>> batch(5, other);
  ASSERT_TRUE(pool.enqueue_batch(job_types::RealTime, batch));
  EXPECT_EQ(pool.get_statistics().dropped, 5U);
  pool.resume();
  release_y_first.count_down();
  pool.wait_idle();
  EXPECT_TRUE(r1_ran.load(std::memory_order_relaxed)) << "the RealTime job on a deque was dropped";
  EXPECT_FALSE(b1_ran.load(std::memory_order_relaxed)) << "the Background job on a deque ran";
  EXPECT_EQ(others_ran.load(std::memory_order_relaxed), 5);  // the batch; the four queued were dropped
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.accepted, s.executed + s.cancelled);
}
