// The behaviour every job_queue_model must show (queues/queue_concept.hpp),
// as a type-parameterised suite: queue_concept_test.cpp and its siblings
// (queue_concept_<family>_test.cpp) each instantiate it for a family of
// queues, so no one translation unit compiles it for all of them. Included
// by those files only; everything here has internal linkage.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/queues/adaptive_job_queue.hpp"
#include "thread_system/queues/bounded_queue.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"
#include "thread_system/queues/sharded_queue.hpp"
#include "thread_system/queues/two_lock_job_queue.hpp"

namespace ts = thread_system;

namespace {

// sharded_queue in bounded mode (a total capacity large enough for the tests).
class bounded_sharded_queue : public ts::sharded_queue {
 public:
  bounded_sharded_queue() : ts::sharded_queue(ts::sharded_queue_options{4, std::size_t{1} << 16, 256}) {}
};

// adaptive_job_queue whose policy switches at every window of 32 operations
// (whenever the switch protocol allows), so that every behaviour below is
// also checked across many switches.
class switching_adaptive_queue : public ts::adaptive_job_queue {
 public:
  switching_adaptive_queue()
      : ts::adaptive_job_queue(ts::queue_strategy::ADAPTIVE, ts::adaptive_policy{32, 0.0, 1.0}) {}
};
// The same over the two-lock mutex side (the pools' adaptive injector).
class switching_two_lock_adaptive_queue : public ts::two_lock_adaptive_job_queue {
 public:
  switching_two_lock_adaptive_queue()
      : ts::two_lock_adaptive_job_queue(ts::queue_strategy::ADAPTIVE, ts::adaptive_policy{32, 0.0, 1.0}) {}
};

// The queue each suite runs over, with the sizes the tests expect.
template <typename Q>
std::unique_ptr<Q> make_queue() {
  if constexpr (std::is_same_v<Q, ts::two_lock_job_queue>) {
    return std::make_unique<Q>(16);
  } else if constexpr (std::is_same_v<Q, ts::bounded_queue>) {
    return std::make_unique<Q>(std::size_t{1} << 16);
  } else if constexpr (std::is_same_v<Q, ts::sharded_queue>) {
    return std::make_unique<Q>(ts::sharded_queue_options{4, 0, 256});
  } else {
    return std::make_unique<Q>();
  }
}

ts::job_function recorder(std::vector<int>& out, int value) {
  return ts::job_function([&out, value] { out.push_back(value); });
}

// Pushes, retrying while a bounded queue is momentarily full.
template <typename Q>
void push_retrying(Q& queue, ts::job_function&& job) {
  for (;;) {
    auto pushed = queue.try_push(std::move(job));
    if (pushed) return;
    ASSERT_EQ(pushed.error().code(), ts::error_code::queue_full) << pushed.error().to_string();
    ASSERT_TRUE(job);  // not moved from on failure
    std::this_thread::yield();
  }
}

template <typename Q>
class QueueModel : public ::testing::Test {};

class queue_names {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, ts::job_queue>) return "job_queue";
    if constexpr (std::is_same_v<T, ts::two_lock_job_queue>) return "two_lock_job_queue";
    if constexpr (std::is_same_v<T, ts::bounded_queue>) return "bounded_queue";
    if constexpr (std::is_same_v<T, ts::lockfree_queue>) return "lockfree_queue";
    if constexpr (std::is_same_v<T, ts::sharded_queue>) return "sharded_queue";
    if constexpr (std::is_same_v<T, bounded_sharded_queue>) return "bounded_sharded_queue";
    if constexpr (std::is_same_v<T, ts::adaptive_job_queue>) return "adaptive_job_queue";
    if constexpr (std::is_same_v<T, switching_adaptive_queue>) return "switching_adaptive_queue";
    if constexpr (std::is_same_v<T, ts::two_lock_adaptive_job_queue>) return "two_lock_adaptive_job_queue";
    if constexpr (std::is_same_v<T, switching_two_lock_adaptive_queue>) return "switching_two_lock_adaptive_queue";
    return "unknown";
  }
};

TYPED_TEST_SUITE_P(QueueModel);

TYPED_TEST_P(QueueModel, FifoSingleThread) {
  auto queue = make_queue<TypeParam>();
  std::vector<int> seen;
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(queue->try_push(recorder(seen, i)));
  EXPECT_EQ(queue->size_approx(), 500U);
  ts::job_function job;
  while (queue->try_pop(job)) job();
  ASSERT_EQ(seen.size(), 500U);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(queue->size_approx(), 0U);
}

TYPED_TEST_P(QueueModel, FifoPerProducer) {
  auto queue = make_queue<TypeParam>();
  constexpr int producers = 4;
  const int per_producer = static_cast<int>(ts::test::scaled(20000));
  std::vector<std::pair<int, int>> seen;  // written only by the single consumer, which runs the jobs
  seen.reserve(static_cast<std::size_t>(producers * per_producer));
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        push_retrying(*queue, ts::job_function([&seen, p, i] { seen.emplace_back(p, i); }));
      }
    });
  }
  std::array<ts::job_function, 7> batch;
  while (seen.size() < static_cast<std::size_t>(producers * per_producer)) {
    const std::size_t n = queue->pop_batch(batch);
    for (std::size_t i = 0; i < n; ++i) batch[i]();
    if (n == 0) std::this_thread::yield();
  }
  for (auto& t : threads) t.join();
  std::array<int, producers> next{};
  for (const auto& [p, i] : seen) {
    ASSERT_EQ(i, next[static_cast<std::size_t>(p)]) << "producer " << p;
    ++next[static_cast<std::size_t>(p)];
  }
}

TYPED_TEST_P(QueueModel, BatchIsAllOrNone) {
  auto queue = make_queue<TypeParam>();
  std::vector<int> seen;
  std::vector<ts::job_function> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(recorder(seen, i));
  batch[5] = ts::job_function{};
  auto refused = queue->push_batch(batch);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::invalid_argument);
  for (std::size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(static_cast<bool>(batch[i]), i != 5) << i;
  ts::job_function job;
  EXPECT_FALSE(queue->try_pop(job));

  batch[5] = recorder(seen, 5);
  ASSERT_TRUE(queue->push_batch(batch));
  for (const auto& j : batch) EXPECT_FALSE(j);                    // all moved from
  ASSERT_TRUE(queue->push_batch(std::span<ts::job_function>{}));  // empty batch: trivially all

  std::array<ts::job_function, 4> out;
  std::size_t total = 0;
  for (std::size_t n = queue->pop_batch(out); n > 0; n = queue->pop_batch(out)) {
    for (std::size_t i = 0; i < n; ++i) out[i]();
    total += n;
  }
  EXPECT_EQ(total, 10U);
  ASSERT_EQ(seen.size(), 10U);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);

  queue->close();
  for (int i = 0; i < 3; ++i) batch[static_cast<std::size_t>(i)] = recorder(seen, 100 + i);
  auto closed = queue->push_batch(std::span<ts::job_function>(batch.data(), 3));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code(), ts::error_code::pool_stopped);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(batch[static_cast<std::size_t>(i)]);
}

TYPED_TEST_P(QueueModel, CloseRefusesPushesAndDrains) {
  auto queue = make_queue<TypeParam>();
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(queue->try_push(recorder(seen, i)));
  EXPECT_FALSE(queue->is_closed());
  queue->close();
  queue->close();  // idempotent
  EXPECT_TRUE(queue->is_closed());
  ts::job_function late = recorder(seen, 99);
  auto refused = queue->try_push(std::move(late));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::pool_stopped);
  ASSERT_TRUE(late);  // not consumed: still runnable
  late();
  ts::job_function job;
  while (queue->try_pop(job)) job();
  EXPECT_FALSE(queue->try_pop(job));
  EXPECT_EQ(seen, (std::vector<int>{99, 0, 1, 2}));
}

// An empty batch pushed after close() is refused like any other push.
TYPED_TEST_P(QueueModel, EmptyBatchAfterCloseIsRefused) {
  auto queue = make_queue<TypeParam>();
  ASSERT_TRUE(queue->push_batch(std::span<ts::job_function>{}));  // open: nothing to do, accepted
  queue->close();
  auto refused = queue->push_batch(std::span<ts::job_function>{});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::pool_stopped) << refused.error().to_string();
}

// A job whose destructor uses the queue: the one a pop's argument still
// holds is destroyed outside the queue's lock (inside it, the destructor's
// push or pop spun on that lock for ever; the per-test watchdog fails it).
template <typename Q>
struct uses_queue_when_destroyed {
  Q* queue;
  std::atomic<int>* destroyed;
  bool armed = true;
  uses_queue_when_destroyed(Q* q, std::atomic<int>* d) : queue(q), destroyed(d) {}
  uses_queue_when_destroyed(uses_queue_when_destroyed&& o) noexcept
      : queue(o.queue), destroyed(o.destroyed), armed(std::exchange(o.armed, false)) {}
  uses_queue_when_destroyed& operator=(uses_queue_when_destroyed&&) = delete;
  ~uses_queue_when_destroyed() {
    if (!armed) return;
    (void)queue->try_push(ts::job_function([] {}));
    ts::job_function taken;
    (void)queue->try_pop(taken);
    destroyed->fetch_add(1, std::memory_order_relaxed);  // read by this thread only
  }
  void operator()() const {}
};

TYPED_TEST_P(QueueModel, APopDestroysTheJobItsArgumentHeldOutsideTheLock) {
  auto queue = make_queue<TypeParam>();
  std::atomic<int> destroyed{0};
  ASSERT_TRUE(queue->try_push(ts::job_function([] {})));
  ts::job_function out{uses_queue_when_destroyed<TypeParam>{queue.get(), &destroyed}};
  EXPECT_TRUE(queue->try_pop(out));
  EXPECT_EQ(destroyed.load(std::memory_order_relaxed), 1);
  std::array<ts::job_function, 2> outs{ts::job_function{uses_queue_when_destroyed<TypeParam>{queue.get(), &destroyed}},
                                       ts::job_function{uses_queue_when_destroyed<TypeParam>{queue.get(), &destroyed}}};
  ASSERT_TRUE(queue->try_push(ts::job_function([] {})));
  EXPECT_GE(queue->pop_batch(std::span<ts::job_function>(outs)), 1U);
  for (auto& o : outs) o.reset();
  EXPECT_EQ(destroyed.load(std::memory_order_relaxed), 3);
  // A job after an empty element: filled or left alone, and if destroyed,
  // outside any lock.
  std::array<ts::job_function, 2> gap{ts::job_function{},
                                      ts::job_function{uses_queue_when_destroyed<TypeParam>{queue.get(), &destroyed}}};
  ASSERT_TRUE(queue->try_push(ts::job_function([] {})));
  ASSERT_TRUE(queue->try_push(ts::job_function([] {})));
  const std::size_t taken = queue->pop_batch(std::span<ts::job_function>(gap));
  EXPECT_GE(taken, 1U);
  EXPECT_TRUE(gap[0]);
  for (auto& o : gap) o.reset();
  EXPECT_EQ(destroyed.load(std::memory_order_relaxed), 4);
}

TYPED_TEST_P(QueueModel, EmptyJobRefused) {
  auto queue = make_queue<TypeParam>();
  auto refused = queue->try_push(ts::job_function{});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(queue->size_approx(), 0U);
}

// Every job runs exactly once, whatever the mix of producers and consumers.
TYPED_TEST_P(QueueModel, SumAndUniqueness) {
  const std::array<std::pair<int, int>, 6> mixes{{{1, 1}, {2, 2}, {3, 3}, {8, 8}, {1, 8}, {8, 1}}};
  for (const auto& [producers, consumers] : mixes) {
    SCOPED_TRACE(::testing::Message() << producers << " producers, " << consumers << " consumers");
    auto queue = make_queue<TypeParam>();
    const std::size_t per_producer = ts::test::scaled(80000) / static_cast<std::size_t>(producers);
    const std::size_t total = per_producer * static_cast<std::size_t>(producers);
    std::vector<std::atomic<std::uint8_t>> runs(total);
    std::atomic<std::uint64_t> sum{0};
    std::atomic<std::size_t> executed{0};
    auto job_for = [&](std::size_t value) {
      return ts::job_function([&runs, &sum, value] {
        runs[value].fetch_add(1, std::memory_order_relaxed);  // checked after join
        sum.fetch_add(value, std::memory_order_relaxed);      // checked after join
      });
    };
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        const std::size_t base = static_cast<std::size_t>(p) * per_producer;
        std::array<ts::job_function, 5> batch;
        std::size_t i = 0;
        while (i < per_producer) {
          if (i % 3 == 0 && i + batch.size() <= per_producer) {  // every third round a batch
            for (std::size_t k = 0; k < batch.size(); ++k) batch[k] = job_for(base + i + k);
            while (!queue->push_batch(batch)) std::this_thread::yield();  // full: retry
            i += batch.size();
          } else {
            push_retrying(*queue, job_for(base + i));
            ++i;
          }
        }
      });
    }
    for (int c = 0; c < consumers; ++c) {
      threads.emplace_back([&, c] {
        std::array<ts::job_function, 6> out;
        while (executed.load(std::memory_order_acquire) < total) {  // progress check only
          std::size_t n = 0;
          if (c % 2 == 0) {
            n = queue->pop_batch(out);
          } else if (queue->try_pop(out[0])) {
            n = 1;
          }
          for (std::size_t k = 0; k < n; ++k) out[k]();
          if (n == 0) {
            std::this_thread::yield();
          } else {
            executed.fetch_add(n, std::memory_order_acq_rel);  // pairs with the loop's acquire
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(executed.load(std::memory_order_seq_cst), total);  // seq_cst: pairs with the writers' RMW/store
    // seq_cst: pairs with the writers' RMW/store
    EXPECT_EQ(sum.load(std::memory_order_seq_cst), total * (total - 1) / 2);
    // seq_cst: pairs with the writers' RMW/store
    for (std::size_t v = 0; v < total; ++v) ASSERT_EQ(runs[v].load(std::memory_order_seq_cst), 1) << "value " << v;
    ts::job_function leftover;
    EXPECT_FALSE(queue->try_pop(leftover));
  }
}

// A consumer polling an empty queue while the last job is pushed gets it,
// and sees what the producer wrote before pushing.
TYPED_TEST_P(QueueModel, PopRacingLastPush) {
  auto queue = make_queue<TypeParam>();
  const std::size_t rounds = ts::test::scaled(2000);
  for (std::size_t round = 0; round < rounds; ++round) {
    int payload = 0;
    int observed = -1;
    std::thread consumer([&] {
      ts::job_function job;
      while (!queue->try_pop(job)) {
      }
      job();
    });
    payload = static_cast<int>(round);  // plain write, published by the push
    ASSERT_TRUE(queue->try_push(ts::job_function([&payload, &observed] { observed = payload; })));
    consumer.join();
    EXPECT_EQ(observed, static_cast<int>(round));
  }
}

// Pushes racing close(): every push that succeeded is popped by consumers
// that stop only when they saw the queue closed and then found it empty.
// Bounded work on a slow machine: a producer pushes at most
// `max_pushes` jobs per round (then waits for the close), since the main
// thread's short sleep can last far longer on a loaded machine and the
// consumers then drain everything pushed meanwhile; and no new round
// starts after 15 s (at least `min_rounds` run).
TYPED_TEST_P(QueueModel, CloseRacingPushesLosesNothing) {
  const std::size_t rounds = ts::test::scaled(60);
  constexpr std::size_t min_rounds = 3;
  constexpr std::size_t max_pushes = 20'000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (std::size_t round = 0; round < rounds; ++round) {
    if (round >= min_rounds && std::chrono::steady_clock::now() > deadline) break;
    auto queue = make_queue<TypeParam>();
    std::atomic<std::size_t> accepted{0};
    std::atomic<std::size_t> executed{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < 3; ++p) {
      threads.emplace_back([&] {
        for (std::size_t n = 0;; ++n) {
          if (n == max_pushes) {
            // Enough for this round: the close still comes, and a push
            // after it must be refused.
            while (!queue->is_closed()) std::this_thread::yield();
          }
          auto pushed = queue->try_push(
              ts::job_function([&executed] { executed.fetch_add(1, std::memory_order_relaxed); }));  // read after join
          if (pushed) {
            accepted.fetch_add(1, std::memory_order_relaxed);  // read after join
          } else if (pushed.error().code() == ts::error_code::pool_stopped) {
            return;
          } else {
            std::this_thread::yield();  // full
          }
        }
      });
    }
    for (int c = 0; c < 2; ++c) {
      threads.emplace_back([&] {
        ts::job_function job;
        for (;;) {
          if (!queue->try_pop(job)) {
            // Closed, then found empty: nothing can arrive any more.
            if (queue->is_closed() && !queue->try_pop(job)) return;
            if (!job) continue;
          }
          job();
          job.reset();
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200 + 50 * (round % 7)));
    queue->close();
    for (auto& t : threads) t.join();
    // seq_cst: pairs with the writers' RMW/store
    ASSERT_EQ(executed.load(std::memory_order_seq_cst), accepted.load(std::memory_order_seq_cst)) << "round " << round;
  }
}

// A callable of exactly `Words` words: the first is the address of the
// caller's live-instance counter, the second the value it reports, the rest
// padding. Copies and moves keep the count of live instances exact.
template <std::size_t Words>
struct sized_job {
  static_assert(Words >= 2);
  std::array<std::uint64_t, Words> words{};

  sized_job(int* live, std::uint64_t value) {
    words[0] = reinterpret_cast<std::uintptr_t>(live);
    words[1] = value;
    ++*live;
  }
  sized_job(sized_job&& other) noexcept : words(other.words) { ++*live(); }
  sized_job(const sized_job&) = delete;
  sized_job& operator=(const sized_job&) = delete;
  sized_job& operator=(sized_job&&) = delete;
  ~sized_job() { --*live(); }

  [[nodiscard]] int* live() const { return reinterpret_cast<int*>(static_cast<std::uintptr_t>(words[0])); }
  void operator()() const {}
};

// Pushes jobs of `Words` words one by one and as a batch, checks that each
// comes back as the same callable with its metadata, and that jobs left in a
// destroyed queue are destroyed exactly once.
template <typename Q, std::size_t Words>
void check_jobs_of_size() {
  SCOPED_TRACE(::testing::Message() << Words << "-word callable");
  using job_type = sized_job<Words>;
  int live = 0;
  {
    auto queue = make_queue<Q>();
    constexpr std::size_t singles = 5;
    constexpr std::size_t batched = 7;
    std::vector<ts::job_function> batch;
    for (std::size_t i = 0; i < singles + batched; ++i) {
      ts::job_function job{job_type(&live, i)};
      job.set_tag(static_cast<std::uint8_t>(i + 1));
      job.set_enqueue_stamp(1000 + i);
      if (i < singles) {
        ASSERT_TRUE(queue->try_push(std::move(job)));
        ASSERT_FALSE(job);
      } else {
        batch.push_back(std::move(job));
      }
    }
    ASSERT_TRUE(queue->push_batch(batch));
    ASSERT_EQ(live, static_cast<int>(singles + batched));
    for (std::size_t i = 0; i < singles + batched - 3; ++i) {
      ts::job_function out;
      ASSERT_TRUE(queue->try_pop(out));
      auto* target = out.get_if<job_type>();
      ASSERT_NE(target, nullptr) << "the job came back as a different callable";
      EXPECT_EQ(target->words[1], i);
      EXPECT_EQ(out.tag(), i + 1);
      EXPECT_EQ(out.enqueue_stamp(), 1000 + i);
    }
    EXPECT_EQ(live, 3);  // each popped job was destroyed with `out`; three are still queued
    // Refused after close: the job is handed back as it was pushed.
    queue->close();
    ts::job_function late{job_type(&live, 99)};
    ASSERT_FALSE(queue->try_push(std::move(late)));
    auto* kept = late.get_if<job_type>();
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(kept->words[1], 99U);
  }  // the three jobs still queued are destroyed with the queue
  EXPECT_EQ(live, 0);
}

// Jobs of every size, below and above what a queue stores in place (the
// lock-free and bounded queues box larger ones), come back whole.
TYPED_TEST_P(QueueModel, JobsOfEverySizeComeBackWhole) {
  check_jobs_of_size<TypeParam, 2>();
  check_jobs_of_size<TypeParam, 3>();
  check_jobs_of_size<TypeParam, 4>();
  check_jobs_of_size<TypeParam, 5>();
  check_jobs_of_size<TypeParam, 6>();
  check_jobs_of_size<TypeParam, 9>();  // above job_function's inline capacity: on the heap
}

REGISTER_TYPED_TEST_SUITE_P(QueueModel, FifoSingleThread, FifoPerProducer, BatchIsAllOrNone,
                            CloseRefusesPushesAndDrains, EmptyBatchAfterCloseIsRefused,
                            APopDestroysTheJobItsArgumentHeldOutsideTheLock, EmptyJobRefused, SumAndUniqueness,
                            PopRacingLastPush, CloseRacingPushesLosesNothing, JobsOfEverySizeComeBackWhole);

}  // namespace
