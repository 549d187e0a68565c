// worker_statistics / pool_statistics (include/thread_system/scheduler/worker_statistics.hpp):
// the one ordering a snapshot promises (accepted >= executed + cancelled even
// while jobs run) and how the per-worker counters add up to the pool's.
#include "thread_system/scheduler/worker_statistics.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <thread>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"

namespace ts = thread_system;

namespace {

TEST(WorkerStatistics, FreshSnapshotsAreZero) {
  const ts::worker_statistics w;
  EXPECT_EQ(w.jobs_processed, 0U);
  EXPECT_EQ(w.busy_time.count(), 0);
  EXPECT_EQ(w.busy_since_ns, 0U);
  const ts::pool_statistics p;
  EXPECT_EQ(p.accepted, 0U);
  EXPECT_FALSE(p.paused);
}

// Snapshots taken while two producers keep the pool busy: in every one,
// the completion counters were read before the accepted count, so they
// never add up to more than it. A time budget, not a count, ends the run;
// backpressure keeps the backlog bounded however long the budget lasts.
TEST(WorkerStatistics, ASnapshotWhileJobsRunNeverShowsMoreDoneThanAccepted) {
  ts::pool_options o = ts::test::pool_opts();
  o.backpressure = ts::backpressure::block(4096);
  ts::thread_pool pool{2, o};
  std::atomic<bool> stop{false};
  auto produce = [&] {
    while (!stop.load(std::memory_order_relaxed)) {  // a flag polled, no data published with it
      (void)pool.enqueue([] {});
    }
  };
  std::thread a(produce);
  std::thread b(produce);
  std::uint64_t snapshots = 0;
  std::uint64_t bad = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until || snapshots < 100) {
    const ts::pool_statistics s = pool.get_statistics();
    if (s.executed + s.cancelled > s.accepted) ++bad;
    ++snapshots;
  }
  stop.store(true, std::memory_order_relaxed);
  a.join();
  b.join();
  EXPECT_EQ(bad, 0U) << "of " << snapshots << " snapshots";
}

// Once the pool is idle, the workers' own counts add up to the pool's.
TEST(WorkerStatistics, TheWorkersCountsAddUpToThePoolsOnceIdle) {
  ts::pool_options o = ts::test::pool_opts();
  o.on_error = [](std::exception_ptr) {};  // the failure is expected: counted, not printed
  ts::thread_pool pool{3, o};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pool.enqueue([] {}));
  ASSERT_TRUE(pool.enqueue([] { throw std::runtime_error("counted as failed"); }));
  pool.wait_idle();
  std::uint64_t processed = 0;
  std::uint64_t failed = 0;
  std::uint64_t steals = 0;
  for (const auto& w : pool.get_workers()) {
    const ts::worker_statistics s = w->get_statistics();
    processed += s.jobs_processed;
    failed += s.jobs_failed;
    steals += s.steals;
  }
  const ts::pool_statistics p = pool.get_statistics();
  EXPECT_EQ(p.accepted, 1001U);
  EXPECT_EQ(processed, p.executed);
  EXPECT_EQ(failed, p.failed);
  EXPECT_EQ(p.failed, 1U);
  EXPECT_EQ(steals, p.steals);
  EXPECT_EQ(p.workers, 3U);
}

}  // namespace
