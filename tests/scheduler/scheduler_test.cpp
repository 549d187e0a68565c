// The work-stealing scheduler behind thread_pool: nested spawns, helping
// waits, stealing, idle behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

// fib with one task per call: fib(n) submits fib(n-1), computes fib(n-2)
// itself, then waits (helping) for the child.
std::uint64_t fib_tasks(ts::thread_pool& pool, int n, std::atomic<std::uint64_t>& calls) {
  calls.fetch_add(1, std::memory_order_relaxed);
  if (n < 2) return static_cast<std::uint64_t>(n);
  auto child = pool.submit([&pool, n, &calls] { return fib_tasks(pool, n - 1, calls); });
  const std::uint64_t b = fib_tasks(pool, n - 2, calls);
  return child.get() + b;
}

std::uint64_t fib_calls(int n) {  // calls made by fib_tasks(n)
  return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2);
}

void spawn_tree(ts::thread_pool& pool, int depth, int fanout, std::atomic<std::uint64_t>& nodes) {
  nodes.fetch_add(1, std::memory_order_relaxed);
  if (depth == 0) return;
  for (int i = 0; i < fanout; ++i) {
    ASSERT_TRUE(pool.enqueue([&pool, depth, fanout, &nodes] { spawn_tree(pool, depth - 1, fanout, nodes); }));
  }
}

}  // namespace

TEST(Scheduler, RecursiveFibCountsAreExact) {
  for (std::size_t workers : {1U, 2U, 4U}) {
    ts::thread_pool pool{workers, ts::test::pool_opts()};
    std::atomic<std::uint64_t> calls{0};
    constexpr int n = ts::test::scale_divisor > 1 ? 14 : 20;
    auto root = pool.submit([&pool, &calls] { return fib_tasks(pool, n, calls); });
    EXPECT_EQ(root.get(), n == 20 ? 6765U : 377U) << workers << " workers";
    EXPECT_EQ(calls.load(std::memory_order_seq_cst), fib_calls(n));  // seq_cst: pairs with the writers' RMW/store
    pool.wait_idle();
    const auto s = pool.get_statistics();
    EXPECT_EQ(s.accepted, s.executed);
    EXPECT_EQ(s.executed, fib_calls(n) / 2 + 1) << "one task per internal call, plus the root";
  }
}

TEST(Scheduler, TreeSpawnCountIsExact) {
  ts::thread_pool pool{3, ts::test::pool_opts()};
  std::atomic<std::uint64_t> nodes{0};
  constexpr int depth = ts::test::scale_divisor > 1 ? 6 : 9;
  ASSERT_TRUE(pool.enqueue([&pool, &nodes] { spawn_tree(pool, depth, 3, nodes); }));
  pool.wait_idle();
  std::uint64_t expected = 0;
  for (int d = 0, level = 1; d <= depth; ++d, level *= 3) expected += static_cast<std::uint64_t>(level);
  EXPECT_EQ(nodes.load(std::memory_order_seq_cst), expected);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(pool.get_statistics().executed, expected);
}

TEST(Scheduler, SubmitAndWaitInsideASingleWorkerPool) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto outer = pool.submit([&pool] {
    auto inner = pool.submit([] { return 20; });
    return inner.get() + 1;  // must help, not block the only worker
  });
  EXPECT_EQ(outer.get(), 21);
}

TEST(Scheduler, ChainOfWaitsInsideASingleWorkerPool) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::function<int(int)> chain = [&](int depth) -> int {
    if (depth == 0) return 0;
    return pool.submit([&chain, depth] { return chain(depth - 1); }).get() + 1;
  };
  auto f = pool.submit([&chain] { return chain(50); });
  EXPECT_EQ(f.get(), 50);
}

TEST(Scheduler, IdleWorkersStealSpawnedWork) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> ran{0};
  std::atomic<int> ran_elsewhere{0};  // children run by a thread other than the spawner's
  // One job spawns many slow children onto its own deque, then holds its
  // worker until another thread has run one of them: only a steal can give
  // the other worker a child (so a slow start of that worker delays the
  // test instead of letting the spawner run all 200 itself).
  ASSERT_TRUE(pool.enqueue([&pool, &ran, &ran_elsewhere] {
    const std::thread::id spawner = std::this_thread::get_id();
    for (int i = 0; i < 200; ++i) {
      (void)pool.enqueue([&ran, &ran_elsewhere, spawner] {
        std::this_thread::sleep_for(100us);
        // seq_cst: pairs with the checking load(s)
        if (std::this_thread::get_id() != spawner) ran_elsewhere.fetch_add(1, std::memory_order_seq_cst);
        ran.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      });
    }
    // seq_cst: pairs with the children's fetch_add
    (void)ts::test::eventually([&] { return ran_elsewhere.load(std::memory_order_seq_cst) > 0; });
  }));
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 200);          // seq_cst: pairs with the writers' RMW/store
  EXPECT_GT(ran_elsewhere.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_GT(pool.get_statistics().steals, 0U);
}

TEST(Scheduler, FutureWaitForTimesOutThenSucceeds) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<bool> release{false};
  auto f = pool.submit([&release] {
    // seq_cst: pairs with the writers' RMW/store
    while (!release.load(std::memory_order_seq_cst)) std::this_thread::sleep_for(100us);
    return 7;
  });
  EXPECT_EQ(f.wait_for(5ms), std::future_status::timeout);
  EXPECT_FALSE(f.is_ready());
  release.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
  EXPECT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.valid());
  EXPECT_EQ(f.get(), 7);
  EXPECT_FALSE(f.valid());
  EXPECT_THROW(f.wait(), std::future_error);
}

TEST(Scheduler, HelpingWaitRethrowsChildException) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([&pool] {
    auto child = pool.submit([]() -> int { throw std::invalid_argument("child"); });
    try {
      return child.get();
    } catch (const std::invalid_argument&) {
      return -1;
    }
  });
  EXPECT_EQ(f.get(), -1);
}

TEST(Scheduler, ShutdownWhileJobsSpawnJobsInBothModes) {
  for (auto mode : {ts::stop_mode::drain, ts::stop_mode::cancel_pending}) {
    ts::test::lifetime_tracker tracker;
    ts::stop_report report;
    {
      ts::thread_pool pool{2, ts::test::pool_opts()};
      std::atomic<bool> go{true};
      std::function<void()> spawner = [&] {
        if (!go.load(std::memory_order_seq_cst)) return;  // seq_cst: pairs with the writers' RMW/store
        for (int i = 0; i < 2; ++i) {
          (void)pool.enqueue(ts::test::counting_functor(tracker));
          (void)pool.enqueue([&spawner] { spawner(); });
        }
      };
      ASSERT_TRUE(pool.enqueue([&spawner] { spawner(); }));
      std::this_thread::sleep_for(20ms);
      report = pool.stop(mode);
      go.store(false, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    }
    EXPECT_EQ(report.accepted, report.executed + report.cancelled);
    EXPECT_EQ(tracker.alive(), 0);
  }
}

// ---- task_group -------------------------------------------------------------

#include "thread_system/pools/parallel_for.hpp"
#include "thread_system/pools/task_group.hpp"

namespace {
std::uint64_t fib_group(ts::thread_pool& pool, int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0;
  ts::task_group g(pool);
  g.run([&pool, &a, n] { a = fib_group(pool, n - 1); });
  const std::uint64_t b = fib_group(pool, n - 2);
  g.wait();
  return a + b;
}
}  // namespace

TEST(TaskGroup, FibFromOutsideAndInside) {
  for (std::size_t workers : {1U, 2U, 3U}) {
    ts::thread_pool pool{workers, ts::test::pool_opts()};
    constexpr int n = ts::test::scale_divisor > 1 ? 15 : 22;
    const std::uint64_t expected = n == 22 ? 17711U : 610U;
    EXPECT_EQ(fib_group(pool, n), expected) << "called from outside, " << workers << " workers";
    auto f = pool.submit([&pool] { return fib_group(pool, n); });
    EXPECT_EQ(f.get(), expected) << "called from a worker";
    pool.wait_idle();
    const auto s = pool.get_statistics();
    EXPECT_EQ(s.accepted, s.executed);
  }
}

TEST(TaskGroup, WaitRethrowsFirstExceptionAfterAllJobsFinish) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> finished{0};
  ts::task_group g(pool);
  for (int i = 0; i < 100; ++i) {
    g.run([i, &finished] {
      finished.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      if (i % 10 == 3) throw std::runtime_error("job " + std::to_string(i));
    });
  }
  EXPECT_THROW(g.wait(), std::runtime_error);
  EXPECT_EQ(finished.load(std::memory_order_seq_cst), 100);  // seq_cst: pairs with the writers' RMW/store
  // seq_cst: pairs with the checking load(s)
  g.run([&finished] { finished.fetch_add(1, std::memory_order_seq_cst); });  // reusable after wait()
  EXPECT_NO_THROW(g.wait());
  EXPECT_EQ(finished.load(std::memory_order_seq_cst), 101);  // seq_cst: pairs with the writers' RMW/store
}

TEST(TaskGroup, RunOnAStoppedPoolRunsInline) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  (void)pool.stop();
  int ran = 0;
  ts::task_group g(pool);
  g.run([&ran] { ++ran; });
  g.wait();
  EXPECT_EQ(ran, 1) << "a refused job runs on the caller instead of being lost";
}

TEST(TaskGroup, BlockedExternalWaiterIsWoken) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::test::round_budget budget(ts::test::scaled(20'000));
  for (std::size_t i = 0; budget.next(i); ++i) {
    std::atomic<int> v{0};
    ts::task_group g(pool);
    g.run([&v] { v.store(1, std::memory_order_seq_cst); });  // seq_cst: pairs with the checking load(s)
    g.wait();
    ASSERT_EQ(v.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
  }
}

// ---- regressions from review --------------------------------------------------

// A job that waits on a job queued right behind it in the same injector batch
// must not deadlock: the rest of a batch goes onto the worker's deque, where
// the helping wait (and thieves) can reach it.
TEST(Scheduler, WaitOnAJobBehindItInTheSameBatch) {
  auto pool = std::make_shared<ts::thread_pool>("batch");
  ASSERT_TRUE(pool->enqueue(std::make_unique<ts::thread_worker>()));
  std::atomic<int> child_ran{0};
  ts::task_group group(*pool);
  // Before start(): both land in the injector and are popped as one batch.
  ASSERT_TRUE(pool->enqueue([&group] { group.wait(); }));
  // seq_cst: pairs with the checking load(s)
  group.run([&child_ran] { child_ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(pool->start());
  pool->wait_idle();
  EXPECT_EQ(child_ran.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
}

// The body of a task_group job (and its captures) is destroyed before the
// job counts as finished, so nothing it owns outlives wait().
TEST(TaskGroup, CapturesAreDestroyedBeforeWaitReturns) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  for (int round = 0; round < 200; ++round) {
    ts::test::lifetime_tracker tracker;
    {
      ts::task_group g(pool);
      for (int i = 0; i < 8; ++i) g.run(ts::test::counting_functor(tracker));
      g.wait();
      ASSERT_EQ(tracker.alive(), 0) << "a capture outlived wait()";
    }
    // seq_cst: relaxed tracker count, ordered by the wait/join above
    ASSERT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 8);
  }
}

TEST(Scheduler, SubmittedCallableIsDestroyedBeforeTheFutureIsReady) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  for (int round = 0; round < 200; ++round) {
    ts::test::lifetime_tracker tracker;
    auto f = pool.submit([c = ts::test::counting_functor(tracker)] {
      c();
      return 1;
    });
    ASSERT_EQ(f.get(), 1);
    ASSERT_EQ(tracker.alive(), 0) << "the bound callable outlived the result";
  }
}

TEST(Scheduler, FutureWaitsSaturateHugeDurations) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([] { return 5; });
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_for(std::chrono::hours::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_until(std::chrono::steady_clock::time_point::max()), std::future_status::ready);
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds(-1)), std::future_status::ready);
  EXPECT_EQ(f.get(), 5);
}

// A NaN, negative or zero duration on a future that is not ready reports
// timeout at once (a NaN used to mean "no deadline": a wait forever).
TEST(Scheduler, FutureWaitForNanOrNegativeOnlyReportsReadiness) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::latch gate{1};
  auto f = pool.submit([&gate] {
    gate.wait();
    return 3;
  });
  const std::chrono::duration<double> nan{std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(f.wait_for(nan), std::future_status::timeout);
  EXPECT_EQ(f.wait_for(std::chrono::duration<double>(-std::numeric_limits<double>::infinity())),
            std::future_status::timeout);
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds(0)), std::future_status::timeout);
  gate.count_down();
  EXPECT_EQ(f.wait_for(std::chrono::duration<double>(std::numeric_limits<double>::infinity())),
            std::future_status::ready);
  EXPECT_EQ(f.get(), 3);
}

// The LIFO slot: the newest spawn runs next on the same worker.
TEST(Scheduler, NewestSpawnRunsNextOnTheSameWorker) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::vector<int> order;  // written by the only worker, read after wait_idle()
  ASSERT_TRUE(pool.enqueue([&] {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.enqueue([&order, i] { order.push_back(i); }));
  }));
  pool.wait_idle();
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
}

// The LIFO slot's budget: a job that keeps spawning its successor (each one
// lands in the slot) lets the job spawned before the chain run after at
// most lifo_slot_budget links, not after the whole chain.
TEST(Scheduler, LifoSlotCannotStarveOlderSpawns) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  constexpr int links = 20;
  std::vector<int> order;  // -1 for the older job, k for link k; written by the only worker
  std::function<void(int)> link = [&](int k) {
    order.push_back(k);
    if (k < links) {
      ASSERT_TRUE(pool.enqueue([&link, k] { link(k + 1); }));
    }
  };
  ASSERT_TRUE(pool.enqueue([&] {
    ASSERT_TRUE(pool.enqueue([&order] { order.push_back(-1); }));
    ASSERT_TRUE(pool.enqueue([&link] { link(1); }));
  }));
  pool.wait_idle();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(links + 1));
  const auto older = std::find(order.begin(), order.end(), -1);
  ASSERT_NE(older, order.end());
  EXPECT_LE(older - order.begin(), static_cast<std::ptrdiff_t>(ts::thread_pool::lifo_slot_budget))
      << "the older job ran after " << (older - order.begin()) << " links of the chain";
}

// A job that spawns a child and then blocks without helping (here: waits on
// an atomic) must not hold the child back: the child is in the blocked
// worker's LIFO slot, and the idle worker takes it from there.
TEST(Scheduler, ChildInTheLifoSlotOfABlockedWorkerIsStolen) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  const std::size_t rounds = ts::test::scaled(50);
  for (std::size_t round = 0; round < rounds; ++round) {
    std::atomic<bool> child_ran{false};
    std::atomic<bool> parent_saw_child{false};
    ASSERT_TRUE(pool.enqueue([&] {
      ASSERT_TRUE(pool.enqueue([&child_ran] {
        child_ran.store(true, std::memory_order_release);  // pairs with the parent's acquire load
      }));
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (!child_ran.load(std::memory_order_acquire)) {  // pairs with the child's release store
        if (std::chrono::steady_clock::now() > deadline) return;
        std::this_thread::yield();
      }
      parent_saw_child.store(true, std::memory_order_relaxed);  // read after wait_idle()
    }));
    pool.wait_idle();
    ASSERT_TRUE(parent_saw_child.load(std::memory_order_relaxed)) << "round " << round;
  }
}

// A job of a group that the pool accepts and then discards unrun still
// counts as finished: wait() reports error_exception{cancelled} instead of
// waiting forever. Both ways a pool discards: stop(cancel_pending) and
// backpressure::drop_oldest.
namespace {
// Occupies a pool's only worker until released.
struct worker_blocker {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  void hold(ts::thread_pool& pool) {
    ASSERT_TRUE(pool.enqueue([this] {
      started.store(true, std::memory_order_release);  // pairs with the acquire in eventually()
      while (!release.load(std::memory_order_acquire)) std::this_thread::sleep_for(100us);
    }));
    ASSERT_TRUE(ts::test::eventually([this] { return started.load(std::memory_order_acquire); }));
  }
  void let_go() { release.store(true, std::memory_order_release); }  // pairs with the loop above
};

bool throws_cancelled(const std::function<void()>& f) {
  try {
    f();
  } catch (const ts::error_exception& e) {
    return e.code() == ts::error_code::cancelled;
  }
  return false;
}
}  // namespace

TEST(TaskGroup, AJobDiscardedByStopCancelPendingMakesWaitThrowCancelled) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-cancel")};
  worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<int> ran{0};
  ts::task_group g(pool);
  for (int i = 0; i < 3; ++i) g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  ts::stop_report report;
  std::thread stopper([&] { report = pool.stop(ts::stop_mode::cancel_pending); });
  EXPECT_TRUE(throws_cancelled([&] { g.wait(); }));  // before the fix: waited forever
  blocker.let_go();
  stopper.join();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);  // relaxed: stop() joined the worker
  EXPECT_EQ(report.cancelled, 3U);
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

TEST(TaskGroup, AJobDroppedByBackpressureMakesWaitThrowCancelled) {
  ts::pool_options o = ts::test::pool_opts("tg-drop");
  o.backpressure = ts::backpressure::drop_oldest(1);
  ts::thread_pool pool{1, o};
  worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<int> ran{0};
  ts::task_group g(pool);
  g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });   // queued: the room is taken
  g.run([&ran] { ran.fetch_add(10, std::memory_order_relaxed); });  // drops the first one
  blocker.let_go();
  EXPECT_TRUE(throws_cancelled([&] { g.wait(); }));
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 10);                // relaxed: wait() ordered the run
  g.run([&ran] { ran.fetch_add(100, std::memory_order_relaxed); });  // the group is reusable afterwards
  EXPECT_NO_THROW(g.wait());
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 110);  // relaxed: as above
}

TEST(ParallelFor, APieceDiscardedByStopCancelPendingMakesTheCallThrowCancelled) {
  ts::thread_pool pool{1, ts::test::pool_opts("pf-cancel")};
  worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<std::uint64_t> visited{0};
  std::atomic<bool> outcome_cancelled{false};
  // From outside the pool the whole loop is one job for the (busy) worker.
  std::thread caller([&] {
    outcome_cancelled.store(
        throws_cancelled(
            [&] { ts::parallel_for(pool, 0, 1000, [&](int) { visited.fetch_add(1, std::memory_order_relaxed); }); }),
        std::memory_order_relaxed);  // read after join()
  });
  ASSERT_TRUE(ts::test::eventually([&] { return pool.get_statistics().queued >= 1; }));
  std::thread stopper([&] { (void)pool.stop(ts::stop_mode::cancel_pending); });
  caller.join();  // before the fix: the call waited forever
  blocker.let_go();
  stopper.join();
  EXPECT_TRUE(outcome_cancelled.load(std::memory_order_relaxed));  // relaxed: joined
  EXPECT_EQ(visited.load(std::memory_order_relaxed), 0U);          // relaxed: joined
}
