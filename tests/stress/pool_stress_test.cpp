// Stress tests of thread_pool: exactly-once delivery, shutdown under load,
// lost wake-ups, self-feeding jobs. Each runs for seconds, not minutes; the
// per-test watchdog (support/test_main.cpp) turns a deadlock into a failure.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

// ---- exactly once ----------------------------------------------------------

class ExactlyOnce : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ExactlyOnce, EveryIdSeenOnce) {
  const auto [producers, workers] = GetParam();
  const std::size_t total = ts::test::scaled(1'000'000);
  std::vector<std::atomic<std::uint8_t>> seen(total);
  {
    ts::thread_pool pool{static_cast<std::size_t>(workers), ts::test::pool_opts()};
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        // Ids p, p + producers, ... : disjoint across producers, 0..total-1 overall.
        for (std::size_t id = static_cast<std::size_t>(p); id < total; id += static_cast<std::size_t>(producers)) {
          auto r = pool.enqueue([&seen, id] { seen[id].fetch_add(1, std::memory_order_relaxed); });
          ASSERT_TRUE(r) << r.error().to_string();
        }
      });
    }
    for (auto& t : threads) t.join();
    pool.wait_idle();
    const auto stats = pool.get_statistics();
    EXPECT_EQ(stats.accepted, total);
    EXPECT_EQ(stats.executed, total);
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < total; ++i) wrong += seen[i].load(std::memory_order_relaxed) != 1;
  EXPECT_EQ(wrong, 0U) << "ids not seen exactly once";
}

INSTANTIATE_TEST_SUITE_P(ProducersWorkers, ExactlyOnce,
                         testing::Combine(testing::Values(1, 2, 8), testing::Values(1, 2, 8)),
                         [](const auto& param_info) {
                           return std::to_string(std::get<0>(param_info.param)) + "p_" +
                                  std::to_string(std::get<1>(param_info.param)) + "w";
                         });

// ---- shutdown under load ---------------------------------------------------

class ShutdownUnderLoad : public testing::TestWithParam<ts::stop_mode> {};

TEST_P(ShutdownUnderLoad, AccountsForEveryJob) {
  const ts::stop_mode mode = GetParam();
  ts::test::lifetime_tracker tracker;
  std::atomic<std::uint64_t> accepted_by_producers{0};
  std::atomic<std::uint64_t> refused{0};
  ts::stop_report report;
  {
    ts::thread_pool pool{3, ts::test::pool_opts()};
    std::atomic<bool> go{true};
    std::vector<std::thread> producers;
    for (int p = 0; p < 3; ++p) {
      producers.emplace_back([&] {
        while (go.load(std::memory_order_relaxed)) {
          // Bounded backlog on a slow machine: a producer far ahead of the
          // workers yields (relaxed: counters, read as estimates).
          if (accepted_by_producers.load(std::memory_order_relaxed) >
              static_cast<std::uint64_t>(tracker.invoked.load(std::memory_order_relaxed)) + 16384) {
            std::this_thread::yield();
            continue;
          }
          auto r = pool.enqueue(ts::test::counting_functor(tracker));
          if (r) {
            accepted_by_producers.fetch_add(1, std::memory_order_relaxed);
          } else {
            EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
            refused.fetch_add(1, std::memory_order_relaxed);
            return;
          }
        }
      });
    }
    // Stop once the producers have run for a while (a count, not a sleep
    // a loaded machine stretches; seq_cst: pairs with the checking load(s)).
    EXPECT_TRUE(ts::test::eventually(
        [&] { return accepted_by_producers.load(std::memory_order_seq_cst) >= ts::test::scaled(50'000); }));
    report = pool.stop(mode);                    // producers are still pushing
    go.store(false, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    for (auto& t : producers) t.join();
  }
  EXPECT_GT(report.accepted, 0U);
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(report.accepted, accepted_by_producers.load(std::memory_order_seq_cst));
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(static_cast<std::uint64_t>(tracker.invoked.load(std::memory_order_seq_cst)), report.executed);
  EXPECT_EQ(tracker.alive(), 0) << "every captured object is destroyed exactly once";
  if (mode == ts::stop_mode::drain) {
    EXPECT_EQ(report.cancelled, 0U);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ShutdownUnderLoad, testing::Values(ts::stop_mode::drain, ts::stop_mode::cancel_pending),
                         [](const auto& param_info) {
                           return param_info.param == ts::stop_mode::drain ? std::string("drain")
                                                                           : std::string("cancel_pending");
                         });

// ---- self-feeding jobs -------------------------------------------------------

namespace {
struct spawner {
  ts::thread_pool* pool;
  std::atomic<std::uint64_t>* runs;
  void operator()() const {
    runs->fetch_add(1, std::memory_order_relaxed);
    // Two children per run: without the stop-time refusal this never ends.
    for (int i = 0; i < 2; ++i) {
      if (!pool->enqueue(spawner{pool, runs})) return;
    }
  }
};
}  // namespace

TEST(PoolStress, DestroyingAPoolWhoseJobsKeepEnqueueingFinishes) {
  for (auto mode : {ts::stop_mode::drain, ts::stop_mode::cancel_pending}) {
    std::atomic<std::uint64_t> runs{0};
    ts::stop_report report;
    {
      ts::thread_pool pool{2, ts::test::pool_opts()};
      ASSERT_TRUE(pool.enqueue(spawner{&pool, &runs}));
      // Stop once the jobs are feeding themselves (seq_cst: pairs with the writers' RMW/store).
      ASSERT_TRUE(ts::test::eventually([&] { return runs.load(std::memory_order_seq_cst) >= 100; }));
      report = pool.stop(mode);
    }
    EXPECT_GE(runs.load(std::memory_order_seq_cst), 100U);  // seq_cst: pairs with the writers' RMW/store
    EXPECT_EQ(report.accepted, report.executed + report.cancelled);
    EXPECT_EQ(report.executed, runs.load(std::memory_order_seq_cst));  // seq_cst: pairs with the writers' RMW/store
  }
  // And plain destruction (drain) with no explicit stop():
  std::atomic<std::uint64_t> runs{0};
  {
    ts::thread_pool pool{2, ts::test::pool_opts()};
    ASSERT_TRUE(pool.enqueue(spawner{&pool, &runs}));
    // seq_cst: pairs with the writers' RMW/store
    ASSERT_TRUE(ts::test::eventually([&] { return runs.load(std::memory_order_seq_cst) >= 100; }));
  }
  EXPECT_GE(runs.load(std::memory_order_seq_cst), 100U);  // seq_cst: pairs with the writers' RMW/store
}

// ---- lost wake-ups -------------------------------------------------------------

namespace {
// A random pause of 0-5 us (spinning, or sleeping above 15 of 20 steps):
// lets the workers reach every point of the spin -> prepare_wait ->
// commit_wait path when the next job arrives.
void random_short_pause(std::mt19937& rng) {
  const int p = std::uniform_int_distribution<int>(0, 20)(rng);
  if (p > 15) {
    std::this_thread::sleep_for(std::chrono::microseconds(p - 15));
  } else {
    for (int k = 0; k < p * 20; ++k) std::atomic_signal_fence(std::memory_order_seq_cst);
  }
}
}  // namespace

TEST(PoolStress, NoLostWakeUpWhenIdlePoolGetsOneJob) {
  ts::test::round_budget budget(ts::test::scaled(100'000), 10'000);
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::mt19937 rng(12345);
  for (std::size_t i = 0; budget.next(i); ++i) {
    random_short_pause(rng);
    auto f = pool.submit([i] { return i; });
    ASSERT_EQ(f.get(), i);
  }
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, budget.ran());
}

// A worker's push runs only the light side of the asymmetric fence before it
// looks for a sleeping worker to wake; the worker going to sleep runs the
// heavy side (membarrier) before its last look for work. Here a job pushes a
// child onto its own worker (the LIFO slot or deque) after a random pause and
// then blocks without helping until the child ran: only the other worker can
// run it, and it is at a random point of going to sleep (no yield phase, so
// it sleeps right after spinning). A lost wake-up leaves the child queued
// while the parent blocks: the parent gives up after 20 s and the round
// fails.
TEST(PoolStress, AChildPushedByABlockedWorkerWakesTheWorkerGoingToSleep) {
  ts::test::round_budget budget(ts::test::scaled(400'000), 2'000, std::chrono::seconds(8));
  ts::pool_options o = ts::test::pool_opts();
  o.idle_wait = std::chrono::nanoseconds{0};
  ts::thread_pool pool{2, o};
  std::mt19937 rng(4242);
  for (std::size_t i = 0; budget.next(i); ++i) {
    // 0-10 us: the other worker's spin phase (256 polls) ends, and it goes
    // to sleep, somewhere in that range on the machines this runs on.
    const std::chrono::nanoseconds pause{std::uniform_int_distribution<int>(0, 10'000)(rng)};
    auto parent = pool.submit([&pool, pause] {
      const auto until = std::chrono::steady_clock::now() + pause;
      while (std::chrono::steady_clock::now() < until) {
      }
      std::atomic<bool> child_ran{false};
      if (!pool.enqueue([&child_ran] {
            child_ran.store(true, std::memory_order_release);  // pairs with the acquire load below
          })) {
        return false;
      }
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (!child_ran.load(std::memory_order_acquire)) {  // pairs with the child's release store
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
      }
      return true;
    });
    ASSERT_TRUE(parent.get()) << "round " << i << ": the child was not run while its parent blocked";
  }
}

// The typed pool's wake-up rule is per kind: a push into a kind whose queue
// already holds a job wakes nobody, and the worker woken for that job (or one
// that takes a job and leaves others behind) wakes the next. Bursts of one
// to three jobs of random kinds, after random pauses that let the workers -
// two specialists and a universal one - reach every point of spinning and
// parking; every job must run without a later push to rescue it. A lost
// wake-up leaves a future unready: the watchdog turns that into a failure.
TEST(PoolStress, TypedPoolLosesNoWakeUpWhenAKindAlreadyHasAJobWaiting) {
  ts::test::round_budget budget(ts::test::scaled(50'000), 2'000, std::chrono::seconds(5));
  ts::typed_pool_options<ts::job_types> o;
  o.queue = ts::test::pool_queue_under_test();  // each kind's queue (any but bounded)
  ts::typed_thread_pool_t<ts::job_types> pool{"typed_wake", o};
  for (auto responsibilities :
       {std::vector{ts::job_types::RealTime}, std::vector{ts::job_types::Background}, std::vector<ts::job_types>{}}) {
    ASSERT_TRUE(pool.add_worker(std::make_unique<ts::typed_thread_worker_t<ts::job_types>>(responsibilities)));
  }
  ASSERT_TRUE(pool.start());
  constexpr std::array kinds{ts::job_types::RealTime, ts::job_types::Batch, ts::job_types::Background};
  std::mt19937 rng(2026);
  std::uniform_int_distribution<std::size_t> pick(0, kinds.size() - 1);
  std::size_t submitted = 0;
  for (std::size_t i = 0; budget.next(i); ++i) {
    random_short_pause(rng);
    // Same-kind pushes back to back are the ones that skip the wake-up.
    const ts::job_types kind = kinds[pick(rng)];
    const std::size_t burst = 1 + i % 3;
    std::array<ts::future<std::size_t>, 3> results;
    for (std::size_t k = 0; k < burst; ++k) results[k] = pool.submit(kind, [i] { return i; });
    submitted += burst;
    for (std::size_t k = 0; k < burst; ++k) ASSERT_EQ(results[k].get(), i);
  }
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, submitted);
}

TEST(PoolStress, WaitIdleNeverReturnsEarly) {
  ts::test::round_budget budget(ts::test::scaled(20'000));
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<std::uint64_t> done{0};
  for (std::size_t i = 0; budget.next(i); ++i) {
    const std::size_t burst = 1 + i % 7;
    for (std::size_t k = 0; k < burst; ++k)
      ASSERT_TRUE(pool.enqueue([&done] { done.fetch_add(1, std::memory_order_relaxed); }));
    const std::uint64_t expected = done.load(std::memory_order_relaxed);  // lower bound before waiting
    pool.wait_idle();
    ASSERT_GE(done.load(std::memory_order_relaxed), expected);
    ASSERT_EQ(pool.get_statistics().executed, pool.get_statistics().accepted);
  }
}

// ---- live statistics ------------------------------------------------------------

// A snapshot taken while producers submit and workers run must never show
// more jobs finished than accepted (a scrape of the Prometheus exporter
// asserts accepted >= executed on exactly such a snapshot).
TEST(PoolStress, LiveStatisticsNeverShowMoreFinishedThanAccepted) {
  ts::pool_options o = ts::test::pool_opts();
  o.backpressure = ts::backpressure::block(4096);  // the producers never build an unbounded backlog
  ts::thread_pool pool{2, o};
  std::atomic<bool> done{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&] {
      while (!done.load(std::memory_order_relaxed)) {  // a flag only; no data rides on it
        ASSERT_TRUE(pool.enqueue([] {}));
      }
    });
  }
  std::size_t snapshots = 0;
  std::size_t bad = 0;
  ts::test::round_budget budget(ts::test::scaled(200'000), 1'000, 500ms);
  for (std::size_t i = 0; budget.next(i); ++i) {
    const auto s = pool.get_statistics();
    ++snapshots;
    if (s.accepted < s.executed + s.cancelled) {
      ++bad;
      ADD_FAILURE() << "snapshot " << i << ": accepted " << s.accepted << " < executed " << s.executed
                    << " + cancelled " << s.cancelled;
      if (bad > 5) break;
    }
  }
  done.store(true, std::memory_order_relaxed);
  for (auto& t : producers) t.join();
  EXPECT_GT(snapshots, 0U);
  const auto report = pool.stop(ts::stop_mode::drain);
  EXPECT_EQ(report.accepted, report.executed);
}

// ---- a few seconds of everything at once ---------------------------------------

TEST(PoolStress, MixedLoadForSeconds) {
  ts::test::lifetime_tracker tracker;
  std::atomic<std::uint64_t> submitted_values{0};
  std::atomic<std::uint64_t> received_values{0};
  {
    ts::thread_pool pool{4, ts::test::pool_opts()};
    const auto end = std::chrono::steady_clock::now() + 2s;
    std::vector<std::thread> producers;
    for (int p = 0; p < 3; ++p) {
      producers.emplace_back([&, p] {
        std::mt19937 rng(static_cast<unsigned>(p));
        while (std::chrono::steady_clock::now() < end) {
          switch (rng() % 4) {
            case 0:
              ASSERT_TRUE(pool.enqueue(ts::test::counting_functor(tracker)));
              break;
            case 1: {
              std::vector<ts::test::counting_functor> batch(8, ts::test::counting_functor(tracker));
              ASSERT_TRUE(pool.enqueue_batch(std::move(batch)));
              break;
            }
            case 2: {
              const std::uint64_t v = rng() % 1000;
              submitted_values.fetch_add(v, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
              // seq_cst: pairs with the checking load(s)
              received_values.fetch_add(pool.submit([v] { return v; }).get(), std::memory_order_seq_cst);
              break;
            }
            default:
              pool.wait_idle();
          }
        }
      });
    }
    for (auto& t : producers) t.join();
    const auto report = pool.stop(ts::stop_mode::drain);
    EXPECT_EQ(report.accepted, report.executed);
  }
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(submitted_values.load(std::memory_order_seq_cst), received_values.load(std::memory_order_seq_cst));
  EXPECT_EQ(tracker.alive(), 0);
}
