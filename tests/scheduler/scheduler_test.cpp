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
#include "thread_system/pools/task_group.hpp"
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

TEST(Scheduler, ShutdownWhileJobsSpawnJobsInBothModes) {
  for (auto mode : {ts::stop_mode::drain, ts::stop_mode::cancel_pending}) {
    ts::test::lifetime_tracker tracker;
    ts::stop_report report;
    {
      ts::thread_pool pool{2, ts::test::pool_opts()};
      std::atomic<bool> go{true};
      // Bounded work on a slow machine: spawning stops after a cap, and the
      // stop comes once a thousand spawners ran (not after a sleep that a
      // loaded machine can stretch while the backlog grows).
      const std::size_t cap = ts::test::scaled(100'000);
      std::atomic<std::size_t> runs{0};
      std::function<void()> spawner = [&] {
        if (!go.load(std::memory_order_seq_cst)) return;  // seq_cst: pairs with the writers' RMW/store
        // relaxed: a counter; the main thread only waits for it to grow.
        if (runs.fetch_add(1, std::memory_order_relaxed) >= cap) return;
        for (int i = 0; i < 2; ++i) {
          (void)pool.enqueue(ts::test::counting_functor(tracker));
          (void)pool.enqueue([&spawner] { spawner(); });
        }
      };
      ASSERT_TRUE(pool.enqueue([&spawner] { spawner(); }));
      ASSERT_TRUE(ts::test::eventually([&] { return runs.load(std::memory_order_relaxed) >= 1000; }));
      report = pool.stop(mode);
      go.store(false, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    }
    EXPECT_EQ(report.accepted, report.executed + report.cancelled);
    EXPECT_EQ(tracker.alive(), 0);
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
