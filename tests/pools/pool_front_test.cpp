// pool_front (pools/pool_front.hpp): what both pools share - pause/resume,
// jobs that carry cancellation tokens, resize, timers, the workers' threads -
// tested through thread_pool (and the typed pool where it differs).
// Backpressure and the bounded injector are in backpressure_test.cpp.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

// ---- pause / resume -------------------------------------------------------------

TEST(PoolPause, PausedPoolAcceptsButStartsNothingUntilResumed) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  pool.pause();
  EXPECT_TRUE(pool.is_paused());
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // bookkeeping
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);
  EXPECT_TRUE(pool.get_statistics().paused);
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 100);
}

TEST(PoolPause, PausedPoolUsesAlmostNoCpu) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  pool.pause();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pool.enqueue([] {}));
  std::this_thread::sleep_for(100ms);  // workers finish spinning and park
  const double before = ts::test::process_cpu_seconds();
  std::this_thread::sleep_for(500ms);
  const double used = ts::test::process_cpu_seconds() - before;
  EXPECT_LT(used, 0.05) << "a paused pool should sleep, used " << used << " s of CPU in 0.5 s";
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().executed, 1000U);
}

TEST(PoolPause, StopDrainOnAPausedPoolRunsEverything) {
  std::atomic<int> ran{0};
  ts::thread_pool pool{2, ts::test::pool_opts()};
  pool.pause();
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // bookkeeping
  }
  const auto report = pool.stop(ts::stop_mode::drain);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 500);
  EXPECT_EQ(report.executed, 500U);
}

TEST(PoolPause, StopCancelPendingOnAPausedPoolRunsNothing) {
  // Workers may already hold jobs they took before they saw the pause; stop
  // (cancel_pending) wakes them, and they must cancel those jobs, not run
  // them (the cancellation is requested before the pause is lifted). The
  // window is small: several pools, one job per worker held.
  for (int round = 0; round < 30; ++round) {
    std::atomic<int> ran{0};
    ts::thread_pool pool{2, ts::test::pool_opts()};
    pool.pause();
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // bookkeeping
    }
    std::this_thread::sleep_for(2ms);  // let the idle workers wake, take a job each and hold it
    const auto report = pool.stop(ts::stop_mode::cancel_pending);
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);
    EXPECT_EQ(report.executed, 0U);
    EXPECT_EQ(report.cancelled, 2U);
  }
}

TEST(PoolPause, JobsSpawnedByARunningJobWaitForResume) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::latch spawned{1};
  std::atomic<bool> child_ran{false};
  ASSERT_TRUE(pool.enqueue([&] {
    pool.pause();
    EXPECT_TRUE(pool.enqueue([&] { child_ran.store(true, std::memory_order_release); }));  // pairs with acquires
    spawned.count_down();
  }));
  spawned.wait();
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(child_ran.load(std::memory_order_acquire));
  pool.resume();
  pool.wait_idle();
  EXPECT_TRUE(child_ran.load(std::memory_order_acquire));
}

// ---- cancellation tokens ---------------------------------------------------------

TEST(PoolTokens, CancelledBeforeStartNeverRuns) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::test::held_worker held(pool);
  ts::cancellation_source source;
  std::atomic<int> ran{0};
  auto f = pool.submit(source.token(), [&ran] {
    ran.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
    return 7;
  });
  ASSERT_TRUE(pool.enqueue(source.token(), [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // bookkeeping
  auto untouched = pool.submit(ts::cancellation_token::none(), [] { return 8; });
  source.cancel();
  held.release();
  EXPECT_EQ(ts::test::error_code_of(f), ts::error_code::cancelled);
  EXPECT_EQ(untouched.get(), 8);
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.cancelled, 2U);
  EXPECT_EQ(s.executed, 2U);  // the held job and `untouched`
  EXPECT_EQ(s.accepted, 4U);
}

TEST(PoolTokens, RunningJobPollsItsToken) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::cancellation_source source;
  std::latch running{1};
  auto f = pool.submit(source.token(), [&running] {
    running.count_down();
    int polls = 0;
    while (!ts::this_job::is_cancelled()) {
      ++polls;
      std::this_thread::yield();
    }
    return polls >= 0 && ts::this_job::token().is_cancelled();
  });
  running.wait();
  EXPECT_FALSE(ts::this_job::is_cancelled());  // not inside a job here
  source.cancel();
  EXPECT_TRUE(f.get());
}

TEST(PoolTokens, CancelRacingWithStartIsRunOrCancelledNeverBoth) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  const int n = static_cast<int>(ts::test::scaled(100000));
  std::atomic<int> ran{0};
  std::vector<ts::cancellation_source> sources(static_cast<std::size_t>(n));
  std::vector<ts::future<int>> futures;
  futures.reserve(static_cast<std::size_t>(n));
  std::thread canceller([&] {
    for (int i = n - 1; i >= 0; i -= 2) sources[static_cast<std::size_t>(i)].cancel();
  });
  for (int i = 0; i < n; ++i) {
    futures.push_back(pool.submit(sources[static_cast<std::size_t>(i)].token(), [&ran] {
      ran.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
      return 1;
    }));
  }
  canceller.join();
  int completed = 0;
  int cancelled = 0;
  for (auto& f : futures) {
    try {
      completed += f.get();
    } catch (const ts::error_exception& e) {
      ASSERT_EQ(e.code(), ts::error_code::cancelled);
      ++cancelled;
    }
  }
  pool.wait_idle();
  EXPECT_EQ(completed, ran.load(std::memory_order_relaxed));
  EXPECT_EQ(completed + cancelled, n);
  EXPECT_LE(cancelled, (n + 1) / 2);  // only every other source was cancelled
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.cancelled, static_cast<std::uint64_t>(cancelled));
  EXPECT_EQ(s.executed, static_cast<std::uint64_t>(completed));
}

// ---- resize ------------------------------------------------------------------------

TEST(PoolResize, GrowAndShrinkUnderLoadRunEveryJobOnce) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::test::lifetime_tracker tracker;
  const int jobs = static_cast<int>(ts::test::scaled(10000));
  pool.pause();  // 10K jobs queued before the pool changes shape
  for (int i = 0; i < jobs; ++i) {
    ASSERT_TRUE(pool.enqueue([c = ts::test::counting_functor(tracker)] {
      c();
      std::this_thread::yield();
    }));
  }
  ASSERT_TRUE(pool.resize(8));
  EXPECT_EQ(pool.worker_count(), 8U);
  pool.resume();
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(pool.resize(1));
  EXPECT_EQ(pool.worker_count(), 1U);
  ASSERT_TRUE(pool.resize(3));  // takes back leaving or left workers
  EXPECT_EQ(pool.worker_count(), 3U);
  ASSERT_TRUE(pool.resize(1));
  pool.wait_idle();
  EXPECT_EQ(tracker.invoked.load(std::memory_order_relaxed), jobs);
  const auto report = pool.stop();
  EXPECT_EQ(report.executed, static_cast<std::uint64_t>(jobs));
  EXPECT_EQ(tracker.alive(), 0);
  EXPECT_EQ(pool.get_statistics().workers, 1U);
}

TEST(PoolResize, ShrinkingNeverInterruptsARunningJob) {
  ts::thread_pool pool{4, ts::test::pool_opts()};
  std::latch all_running{4};
  std::latch gate{1};
  std::atomic<int> finished{0};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pool.enqueue([&] {
      all_running.count_down();
      gate.wait();
      finished.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
    }));
  }
  all_running.wait();
  ASSERT_TRUE(pool.resize(1));
  gate.count_down();
  pool.wait_idle();
  EXPECT_EQ(finished.load(std::memory_order_relaxed), 4);
  // The pool still works with its one worker, including jobs that spawn jobs.
  auto f = pool.submit([&pool] { return pool.submit([] { return 5; }).get() + 1; });
  EXPECT_EQ(f.get(), 6);
}

TEST(PoolResize, RepeatedResizeWhileJobsSpawnJobs) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> leaves{0};
  std::function<void(int)> tree = [&](int depth) {
    if (depth == 0) {
      leaves.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
      return;
    }
    ASSERT_TRUE(pool.enqueue([&tree, depth] { tree(depth - 1); }));
    ASSERT_TRUE(pool.enqueue([&tree, depth] { tree(depth - 1); }));
  };
  ASSERT_TRUE(pool.enqueue([&tree] { tree(12); }));
  for (int round = 0; round < 20; ++round) ASSERT_TRUE(pool.resize(static_cast<std::size_t>(1 + round % 5)));
  pool.wait_idle();
  EXPECT_EQ(leaves.load(std::memory_order_relaxed), 1 << 12);
}

TEST(PoolResize, RefusesBadCountsAndStoppedPools) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  auto zero = pool.resize(0);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code(), ts::error_code::invalid_argument);
  auto huge = pool.resize(100000);
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().code(), ts::error_code::invalid_argument);
  (void)pool.stop();
  auto stopped = pool.resize(4);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code(), ts::error_code::pool_stopped);

  ts::thread_pool seed{"seed"};
  ASSERT_TRUE(seed.resize(3));  // before start: how many start() starts
  EXPECT_EQ(seed.worker_count(), 3U);
  ASSERT_TRUE(seed.start());
  EXPECT_EQ(seed.submit([] { return 1; }).get(), 1);
}

TEST(PoolResize, BeforeStartWorkersAreSetAsideNotDestroyed) {
  ts::thread_pool pool{"aside", ts::test::pool_opts("aside")};
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(pool.enqueue(std::make_unique<ts::thread_worker>(name)));
  const std::vector<ts::thread_worker*> added = pool.get_workers();
  ASSERT_TRUE(pool.resize(1));
  EXPECT_EQ(pool.worker_count(), 1U);
  EXPECT_EQ(pool.get_workers(), added);  // every pointer stays valid
  ASSERT_TRUE(pool.start());
  EXPECT_EQ(pool.worker_count(), 1U);
  EXPECT_TRUE(pool.native_handle(0));
  EXPECT_FALSE(pool.native_handle(2));  // set aside: not running
  ASSERT_TRUE(pool.resize(3));          // the workers set aside come back
  EXPECT_EQ(pool.get_workers(), added);
  EXPECT_EQ(pool.worker_count(), 3U);
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // bookkeeping
  }
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 100);
  EXPECT_EQ(pool.stop().executed, 100U);
}

// ---- timers on the pool ----------------------------------------------------------

TEST(PoolTimers, DelayedJobsRunOnTheWorkersInDueOrder) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::mutex m;
  std::vector<int> order;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::int64_t> earliest_ns{0};
  // Due times relative to one `start`, scheduled out of order: a stall of
  // the test thread between the calls cannot reorder them.
  for (int i : {3, 1, 2}) {
    ASSERT_TRUE(pool.schedule_at(start + std::chrono::milliseconds(30 * i), [&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
      if (i == 1) {
        earliest_ns.store(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count(),
            std::memory_order_relaxed);  // read after wait below
      }
    }));
  }
  auto at = pool.schedule_at(start + 120ms, [&] {
    std::lock_guard lock(m);
    order.push_back(4);
  });
  ASSERT_TRUE(at);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    {
      std::lock_guard lock(m);
      if (order.size() == 4 || std::chrono::steady_clock::now() > deadline) break;
    }
    std::this_thread::sleep_for(1ms);
  }
  // The timer thread counts a timer as fired after handing its job to the
  // pool, so the job may finish first: wait for the count too.
  while (pool.get_timer_statistics().fired < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  std::lock_guard lock(m);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_GE(earliest_ns.load(std::memory_order_relaxed), std::chrono::nanoseconds(30ms).count());  // never early
  EXPECT_EQ(pool.get_timer_statistics().fired, 4U);
}

TEST(PoolTimers, StopCancelsPendingTimersAndCountsThem) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> ran{0};
  auto h1 = pool.schedule_after(1h, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });     // bookkeeping
  auto h2 = pool.schedule_every(1h, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });     // bookkeeping
  auto h3 = pool.schedule_after(1ms, [&ran] { ran.fetch_add(100, std::memory_order_relaxed); });  // bookkeeping
  ASSERT_TRUE(h1 && h2 && h3);
  // h3 has run (relaxed: a polled count, nothing else is read through it)
  ASSERT_TRUE(ts::test::eventually([&] { return ran.load(std::memory_order_relaxed) == 100; }));
  (void)pool.stop(ts::stop_mode::drain);
  const auto t = pool.get_timer_statistics();
  EXPECT_EQ(t.scheduled, 3U);
  EXPECT_GE(t.cancelled, 2U);  // the hour-long timer and the periodic one
  EXPECT_EQ(ran.load(std::memory_order_relaxed) % 100, 0)
      << "the periodic timer (first due in an hour) must not have run";
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 100);
  EXPECT_FALSE((*h1).is_active());
  auto late = pool.schedule_after(1ms, [] {});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code(), ts::error_code::pool_stopped);
}

TEST(PoolTimers, PeriodicJobNeverOverlapsItself) {
  ts::thread_pool pool{4, ts::test::pool_opts()};
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> runs{0};
  auto h = pool.schedule_every(1ms, [&] {
    const int now = inside.fetch_add(1, std::memory_order_acq_rel) + 1;  // pairs with the decrement below
    int seen = max_inside.load(std::memory_order_relaxed);
    while (now > seen && !max_inside.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
    std::this_thread::sleep_for(5ms);              // longer than the period
    runs.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
    inside.fetch_sub(1, std::memory_order_acq_rel);
  });
  ASSERT_TRUE(h);
  while (runs.load(std::memory_order_relaxed) < 5) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE((*h).cancel());
  pool.wait_idle();
  EXPECT_EQ(max_inside.load(std::memory_order_relaxed), 1);
  EXPECT_GT(pool.get_timer_statistics().skipped_periods, 0U);
}

// ---- worker threads ----------------------------------------------------------------

TEST(PoolThreads, NativeHandleIsTheWorkerThreadWhileItRuns) {
  // Seed style: the worker exists but does not run before start().
  ts::thread_pool pool{"handles", ts::test::pool_opts("handles")};
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::thread_worker>()));
  auto before = pool.native_handle(0);
  ASSERT_FALSE(before);
  EXPECT_EQ(before.error().code(), ts::error_code::invalid_argument);
  ASSERT_TRUE(pool.start());
  auto h = pool.native_handle(0);
  ASSERT_TRUE(h) << h.error().to_string();
  auto self = pool.submit([] { return ::pthread_self(); });
  EXPECT_NE(::pthread_equal(*h, self.get()), 0);  // the thread that runs the pool's jobs
  char name[32] = {};
  ASSERT_EQ(::pthread_getname_np(*h, name, sizeof name), 0);  // a platform call on the handle
  EXPECT_STREQ(name, "handles-0");
  auto beyond = pool.native_handle(1);
  ASSERT_FALSE(beyond);
  EXPECT_EQ(beyond.error().code(), ts::error_code::invalid_argument);
  (void)pool.stop();
  auto after = pool.native_handle(0);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code(), ts::error_code::invalid_argument);

  ts::typed_thread_pool_t<ts::job_types> typed{1};
  auto typed_handle = typed.native_handle(0);
  ASSERT_TRUE(typed_handle);
  auto typed_self = typed.submit(ts::job_types::Batch, [] { return ::pthread_self(); });
  EXPECT_NE(::pthread_equal(*typed_handle, typed_self.get()), 0);
}

TEST(PoolThreads, NativeHandleNeverRacesWithStopOrResize) {
  // A caller asking for handles while the pool shrinks and stops gets a
  // handle or invalid_argument, never a thread being joined (TSan and ASan
  // watch the thread objects).
  ts::thread_pool pool{2, ts::test::pool_opts("handles")};
  std::atomic<bool> done{false};
  std::thread asker([&] {
    while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
      for (std::size_t i = 0; i < 2; ++i) {
        auto h = pool.native_handle(i);
        if (!h) {
          EXPECT_EQ(h.error().code(), ts::error_code::invalid_argument);
        }
      }
    }
  });
  ASSERT_TRUE(pool.resize(1));
  auto removed = pool.native_handle(1);  // removed by resize(): not running, even before it exits
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code(), ts::error_code::invalid_argument);
  (void)pool.stop();
  done.store(true, std::memory_order_release);
  asker.join();
  EXPECT_FALSE(pool.native_handle(0));
}

TEST(PoolThreads, AffinityAndNiceApplyToTheWorkerThread) {
  ts::thread_pool pool{1, ts::test::pool_opts("pinned")};
  int first_cpu = 0;
#if defined(__linux__)
  first_cpu = ts::test::first_allowed_cpu();
  ASSERT_GE(first_cpu, 0);
#endif
  const int cpus[] = {first_cpu};
  auto pinned = pool.set_affinity(0, cpus);
#if defined(__linux__)
  ASSERT_TRUE(pinned) << pinned.error().to_string();
  auto where = pool.submit([first_cpu] { return ts::test::pinned_to_only(first_cpu); });
  EXPECT_TRUE(where.get());
  ASSERT_TRUE(pool.set_nice(0, 19));  // lowering priority needs no privilege
  auto nice_seen = pool.submit([] {
    errno = 0;
    return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  });
  EXPECT_EQ(nice_seen.get(), 19);
  const int no_such_cpu[] = {1 << 20};
  auto bad_cpu = pool.set_affinity(0, no_such_cpu);
  ASSERT_FALSE(bad_cpu);
  EXPECT_EQ(bad_cpu.error().code(), ts::error_code::invalid_argument);
  auto bad_nice = pool.set_nice(0, 40);
  ASSERT_FALSE(bad_nice);
  EXPECT_EQ(bad_nice.error().code(), ts::error_code::invalid_argument);
#else
  ASSERT_FALSE(pinned);
  EXPECT_EQ(pinned.error().code(), ts::error_code::not_supported);
#endif
  auto no_worker = pool.set_nice(7, 1);
  ASSERT_FALSE(no_worker);
  EXPECT_EQ(no_worker.error().code(), ts::error_code::invalid_argument);
}

// set_nice() / set_affinity() while another thread grows and shrinks the
// pool: each call acts on a worker that is running for its whole duration
// (the worker's thread id is read and used under the pool's lifecycle
// lock, so a retired worker's id - possibly another thread's by then - is
// never used), or says the worker is not running; none waits for ever for
// the id of a worker that a resize() has just started. A time budget, not
// a count.
TEST(PoolThreads, NiceAndAffinityWhileResizingActOnRunningWorkersOrRefuse) {
  ts::thread_pool pool{1, ts::test::pool_opts("resized")};
  std::atomic<bool> done{false};
  std::thread resizer([&] {
    while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
      (void)pool.resize(3);
      (void)pool.resize(1);
    }
  });
  int first_cpu = 0;
#if defined(__linux__)
  first_cpu = ts::test::first_allowed_cpu();
#endif
  const int cpus[] = {first_cpu};
  int applied = 0;
  const auto until = std::chrono::steady_clock::now() + 300ms;
  while (std::chrono::steady_clock::now() < until) {
    for (std::size_t worker = 1; worker < 3; ++worker) {
      auto n = pool.set_nice(worker, 0);
      auto a = pool.set_affinity(worker, cpus);
      for (const auto* r : {&n, &a}) {
        if (*r) {
          ++applied;
        } else {
          EXPECT_TRUE(r->error().code() == ts::error_code::invalid_argument ||
                      r->error().code() == ts::error_code::not_supported)
              << r->error().to_string();
        }
      }
    }
  }
  done.store(true, std::memory_order_release);
  resizer.join();
  // Just after a resize() started a worker, its id is waited for (under the
  // lock: the new thread needs no lock to publish it). Which slots are the
  // two active ones depends on the resizes above.
  ASSERT_TRUE(pool.resize(2));
  int running = 0;
  for (std::size_t worker = 0; worker < pool.get_workers().size(); ++worker) {
    if (pool.set_nice(worker, 0)) ++running;
  }
  EXPECT_EQ(running, 2);
  (void)applied;
}

// ---- regressions ---------------------------------------------------------------------

TEST(PoolControlRegression, PauseCalledWhileStopDrainsDoesNotLoseJobs) {
  for (int round = 0; round < static_cast<int>(ts::test::scaled(50)); ++round) {
    ts::thread_pool pool{1, ts::test::pool_opts()};
    std::atomic<int> ran{0};
    std::latch first_started{1};
    ASSERT_TRUE(pool.enqueue([&] {
      first_started.count_down();
      std::this_thread::sleep_for(1ms);
      pool.pause();                                 // while stop() below drains
      ran.fetch_add(1, std::memory_order_relaxed);  // bookkeeping
    }));
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // bookkeeping
    }
    first_started.wait();
    const auto report = pool.stop(ts::stop_mode::drain);
    EXPECT_EQ(report.executed, 101U);
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 101);
  }
}

TEST(PoolControlRegression, AJobWithoutATokenDoesNotSeeTheTokenOfTheJobItRunsInside) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::cancellation_source source;
  auto outer = pool.submit(source.token(), [&pool, &source] {
    source.cancel();  // the outer job is running: it keeps running
    // The child runs inside this job's helping wait, on this worker.
    auto child = pool.submit([] { return ts::this_job::is_cancelled(); });
    return std::pair(child.get(), ts::this_job::is_cancelled());
  });
  const auto [child_saw, outer_saw] = outer.get();
  EXPECT_FALSE(child_saw);
  EXPECT_TRUE(outer_saw);
}

TEST(PoolControlRegression, WaitIdleAfterStoppingANeverStartedPoolWithACancelledTokenJob) {
  ts::thread_pool pool{"never-started"};
  ts::cancellation_source source;
  ASSERT_TRUE(pool.enqueue(source.token(), [] {}));
  source.cancel();
  const auto report = pool.stop(ts::stop_mode::drain);
  EXPECT_EQ(report.accepted, 1U);
  EXPECT_EQ(report.cancelled, 1U);
  pool.wait_idle();  // returns: the cancelled job counts as finished
}

// A job that stop() runs on the calling thread (a never-started pool's
// drain) and calls wait_idle() or stop() is refused with invalid_argument,
// as on a worker: it used to wait for itself (wait_idle) or lock stop()'s
// mutex a second time on the same thread.
TEST(PoolControlRegression, AJobThatStopRunsOnTheCallingThreadCannotWaitForItsPool) {
  std::atomic<int> refused{0};
  {
    ts::thread_pool pool{"never-started"};
    ASSERT_TRUE(pool.enqueue([&] {
      try {
        pool.wait_idle();
      } catch (const ts::error_exception& e) {
        if (e.code() == ts::error_code::invalid_argument) refused.fetch_add(1, std::memory_order_relaxed);
      }
      try {
        (void)pool.stop();
      } catch (const ts::error_exception& e) {
        if (e.code() == ts::error_code::invalid_argument) refused.fetch_add(1, std::memory_order_relaxed);
      }
      EXPECT_FALSE(pool.enqueue([] {}));  // stopping: pool_stopped
    }));
    const auto report = pool.stop();
    EXPECT_EQ(report.executed, 1U);
  }
  EXPECT_EQ(refused.load(std::memory_order_relaxed), 2);
}

// stop() returns although a timer's run is waiting for room in a full pool
// (paused, or never started): the waiting run gives up with pool_stopped
// instead of keeping the timer thread, which stop() joins, alive for ever.
TEST(PoolControlRegression, StopEndsATimerRunWaitingForRoomInAFullPool) {
  for (const bool started : {true, false}) {
    SCOPED_TRACE(started ? "paused" : "never started");
    auto o = ts::test::pool_opts("timer-full");
    o.backpressure = ts::backpressure::block(1);
    std::optional<ts::thread_pool> pool;
    if (started) {
      pool.emplace(1, o);
      pool->pause();
    } else {
      o.name = "timer-full-never-started";
      pool.emplace(o.name, o);
    }
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool->enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // fills the bound
    auto timer = pool->schedule_after(1ms, [&ran] { ran.fetch_add(100, std::memory_order_relaxed); });
    ASSERT_TRUE(timer);
    // The timer is due: its run waits for room on the timer thread, or (if
    // that thread is slow to get there) stop(drain) dispatches it. A run
    // waiting when stop() begins gives up (refused). A paused pool resumes
    // as its stop begins (before the timer thread is joined), so a run the
    // timer thread reaches only after that may find the room the queued
    // job left and run: refused or run, never stuck.
    std::this_thread::sleep_for(20ms);
    const auto report = pool->stop(ts::stop_mode::drain);
    const auto timers = pool->get_timer_statistics();
    const int r = ran.load(std::memory_order_relaxed);
    EXPECT_EQ(r % 100, 1);  // the queued job ran
    if (started) {
      EXPECT_TRUE(r == 1 || r == 101) << r;
      EXPECT_EQ(timers.refused + timers.fired, 1U);
      EXPECT_EQ(report.executed, r == 101 ? 2U : 1U);
    } else {
      EXPECT_EQ(r, 1);  // never started: nothing resumes before the timers stop
      EXPECT_EQ(report.executed, 1U);
      EXPECT_EQ(timers.refused, 1U);
    }
  }
}

// stop() called by a timer's function that the pool's caller_runs
// backpressure ran on the timer thread is refused with invalid_argument and
// stops nothing (it used to stop the timers, then throw, leaving a running
// pool whose schedule_*() refused for ever).
TEST(PoolControlRegression, StopFromATimersFunctionOnTheTimerThreadIsRefused) {
  auto o = ts::test::pool_opts("timer-caller-runs");
  o.backpressure = ts::backpressure::caller_runs(1);
  ts::thread_pool pool{1, o};
  ts::test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));  // fills the bound: the timer's run will run on the timer thread
  std::atomic<bool> done{false};
  std::optional<ts::error_code> refusal;
  auto timer = pool.schedule_after(1ms, [&] {
    try {
      (void)pool.stop();
    } catch (const ts::error_exception& e) {
      refusal = e.code();
    }
    done.store(true, std::memory_order_release);  // pairs with the acquire load below
  });
  ASSERT_TRUE(timer);
  while (!done.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(refusal, ts::error_code::invalid_argument);
  held.release();
  EXPECT_TRUE(pool.is_running());
  std::atomic<bool> later{false};
  const auto again = pool.schedule_after(1ms, [&later] { later.store(true, std::memory_order_release); });
  ASSERT_TRUE(again) << again.error().message();
  while (!later.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
  pool.wait_idle();  // the held job has left its latch (on this frame) before `held` goes
}

// A job on pool B's worker stops pool A (never started, seed style), which
// runs A's jobs on that thread. Running them replaced the thread's context
// with A's caller runner: B no longer knew its own worker, so B.wait_idle()
// from one of A's jobs waited for itself instead of being refused (and
// B.stop() would have joined its own thread). The context now links the
// one it replaced.
TEST(PoolControlRegression, AWorkerStoppingAnotherPoolStaysItsPoolsWorker) {
  ts::thread_pool b{1, ts::test::pool_opts("outer-b")};
  bool b_knows_its_worker = false;
  std::optional<ts::error_code> wait_idle_refusal;
  bool ran = false;
  auto done = b.submit([&] {
    ts::thread_pool a{"never-started-a"};
    ASSERT_TRUE(a.enqueue([&] {
      ran = true;
      b_knows_its_worker = b.is_worker_thread();
      if (!b_knows_its_worker) return;  // b.wait_idle() would wait for this very job
      try {
        b.wait_idle();
      } catch (const ts::error_exception& e) {
        wait_idle_refusal = e.code();
      }
    }));
    (void)a.stop();  // runs A's job on this thread (B's worker)
    EXPECT_TRUE(b.is_worker_thread());
  });
  done.get();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(b_knows_its_worker);
  EXPECT_EQ(wait_idle_refusal, ts::error_code::invalid_argument);
}

// A timer's function that caller_runs ran on the timer thread waits in
// wait_idle() for a paused pool; stop() (either mode) must resume the pool
// (the contract: a paused pool's stop runs or cancels what it holds) before
// it joins the timer thread. It joined first, and waited for ever for a
// thread that waited for a resume() only stop() would make.
TEST(PoolControlRegression, StopResumesAPausedPoolBeforeJoiningATimerRunWaitingForIt) {
  for (const auto mode : {ts::stop_mode::drain, ts::stop_mode::cancel_pending}) {
    SCOPED_TRACE(mode == ts::stop_mode::drain ? "drain" : "cancel_pending");
    auto o = ts::test::pool_opts("timer-waits-paused");
    o.backpressure = ts::backpressure::caller_runs(1);
    ts::thread_pool pool{1, o};
    pool.pause();
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // fills the bound
    std::atomic<bool> in_timer{false};
    std::atomic<bool> waited{false};
    auto timer = pool.schedule_after(1ms, [&] {  // full: caller_runs runs it on the timer thread
      in_timer.store(true, std::memory_order_release);
      pool.wait_idle();  // until the pool resumes (or stop() begins)
      waited.store(true, std::memory_order_release);
    });
    ASSERT_TRUE(timer);
    ASSERT_TRUE(ts::test::eventually([&in_timer] { return in_timer.load(std::memory_order_acquire); }));
    std::atomic<bool> returned{false};
    std::atomic<bool> freed_by_watchdog{false};
    std::thread watchdog([&] {  // lets a failing build end rather than hang
      if (ts::test::eventually([&returned] { return returned.load(std::memory_order_acquire); })) return;
      freed_by_watchdog.store(true, std::memory_order_release);
      pool.resume();
    });
    const auto report = pool.stop(mode);
    returned.store(true, std::memory_order_release);
    watchdog.join();
    EXPECT_FALSE(freed_by_watchdog.load(std::memory_order_acquire)) << "stop() waited for the paused pool";
    EXPECT_TRUE(waited.load(std::memory_order_acquire));
    EXPECT_EQ(report.accepted, report.executed + report.cancelled);
    // (The timer's run counts as executed too: caller_runs ran it.)
    if (mode == ts::stop_mode::drain) {
      EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);
      EXPECT_EQ(report.cancelled, 0U);
    } else {
      EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);
      EXPECT_EQ(report.cancelled, 1U);
    }
  }
}

// ---- owner_slot (the slots task_group owners off the pool lease) ----------

// A thief can be inside a slot whose holder never published to it (it read
// a previous holder's words, then its CAS found the slot held): the holder
// gave such a slot back with a plain store (a group whose run() threw while
// copying the job, or had no memory for its node), the thief's leave() then
// marked the slot held by no one - lost to the pool for good - or, if
// another group had leased it meanwhile, let two takers in at once.
// give_back() now closes the slot first, waiting for the thief to leave.
TEST(OwnerSlot, GivingBackWaitsForAThiefInside) {
  namespace d = ts::detail;
  d::owner_slot slot;
  slot.state.store(d::owner_slot::held, std::memory_order_relaxed);  // as lease_owner_slot() leaves it
  d::owner_job job{+[](d::owner_job*) noexcept {}};
  slot.publish(&job);
  std::latch inside{1};
  std::atomic<bool> let_go{false};
  std::thread thief([&] {
    const d::owner_job* got = slot.steal([&] {
      inside.count_down();
      while (!let_go.load(std::memory_order_acquire)) std::this_thread::yield();
      return false;
    });
    EXPECT_EQ(got, &job);
  });
  inside.wait();
  std::atomic<bool> given_back{false};
  std::thread holder([&] {
    slot.give_back();
    given_back.store(true, std::memory_order_release);
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(given_back.load(std::memory_order_acquire)) << "given back while the thief was inside";
  let_go.store(true, std::memory_order_release);
  thief.join();
  holder.join();
  EXPECT_EQ(slot.state.load(std::memory_order_relaxed), d::owner_slot::free_slot);
  EXPECT_EQ(slot.published.load(std::memory_order_relaxed), 0U);
  EXPECT_EQ(slot.taken.load(std::memory_order_relaxed), 0U);
}
