// sync/helping_wait.hpp: the one helping wait under future, task_group,
// wait_group and parallel_for. A fake help_source stands in for a pool
// worker, so each phase is driven deterministically.
#include "thread_system/sync/helping_wait.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/wait_group.hpp"

namespace ts = thread_system;
namespace detail = thread_system::detail;

namespace {

// A help_source whose "job" is to finish one piece of `pending` per call,
// while it has pieces to give; it counts its calls.
class fake_source final : public detail::help_source {
 public:
  explicit fake_source(detail::pending_count& pending, std::uint32_t jobs) : pending_(pending), jobs_(jobs) {}
  bool help_once() override {
    calls.fetch_add(1, std::memory_order_relaxed);  // a count; readers poll it or read it after join
    if (jobs_ == 0) return false;
    --jobs_;
    pending_.finish();
    return true;
  }
  std::atomic<int> calls{0};

 private:
  detail::pending_count& pending_;
  std::uint32_t jobs_;
};

// Registers a source for this thread for the scope.
class as_worker {
 public:
  explicit as_worker(detail::help_source& s) : outer_(detail::set_help_source(&s)) {}
  as_worker(const as_worker&) = delete;
  as_worker& operator=(const as_worker&) = delete;
  ~as_worker() { (void)detail::set_help_source(outer_); }

 private:
  detail::help_source* outer_;
};

}  // namespace

TEST(HelpingWait, RegistrationMakesTheThreadAWorkerAndReturnsThePreviousSource) {
  detail::pending_count pending(0);
  fake_source a(pending, 0);
  fake_source b(pending, 0);
  EXPECT_EQ(detail::current_help_source(), nullptr);
  EXPECT_EQ(detail::set_help_source(&a), nullptr);
  EXPECT_EQ(detail::current_help_source(), &a);
  EXPECT_EQ(detail::set_help_source(&b), &a);
  EXPECT_FALSE(detail::current_help_source()->help_once());  // b has no job
  EXPECT_EQ(b.calls.load(std::memory_order_relaxed), 1);     // relaxed: this thread made the calls
  EXPECT_EQ(a.calls.load(std::memory_order_relaxed), 0);
  EXPECT_EQ(detail::set_help_source(nullptr), &b);
  EXPECT_EQ(detail::current_help_source(), nullptr);
}

TEST(HelpingWait, OnAWorkerItRunsJobsUntilTheConditionHolds) {
  detail::pending_count pending(5);
  fake_source source(pending, 5);
  as_worker worker(source);
  EXPECT_TRUE(pending.wait(0));
  EXPECT_EQ(pending.count(), 0U);
  EXPECT_EQ(source.calls.load(std::memory_order_relaxed), 5);  // one job per round; no look once it held
}

TEST(HelpingWait, OnAWorkerWithNothingToHelpItWaitsForTheOtherThread) {
  detail::pending_count pending(1);
  fake_source source(pending, 0);  // nothing to help with: the piece runs elsewhere
  std::thread other;
  {
    as_worker worker(source);
    other = std::thread([&pending, &source] {
      // Finish only once the waiter has looked for work at least once, so
      // the wait cannot find the count at zero on its first check.
      (void)ts::test::eventually([&source] { return source.calls.load(std::memory_order_relaxed) >= 1; });
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // into the yield or park phase
      pending.finish();
    });
    EXPECT_TRUE(pending.wait(0));
  }
  other.join();
  EXPECT_GE(source.calls.load(std::memory_order_relaxed), 1);  // it looked for work between its idle steps
}

TEST(HelpingWait, OffAWorkerItParksUntilWokenWithoutHelping) {
  detail::pending_count pending(4);
  std::vector<std::thread> finishers;
  for (int i = 0; i < 4; ++i) finishers.emplace_back([&pending] { pending.finish(); });
  EXPECT_TRUE(pending.wait(0));  // this thread registered no source: it parks
  for (auto& t : finishers) t.join();
  EXPECT_EQ(pending.count(), 0U);
}

TEST(HelpingWait, ADeadlineThatPassesReturnsFalse) {
  detail::pending_count pending(1);
  const std::int64_t start = detail::steady_now_ns_signed();
  EXPECT_FALSE(pending.wait(start + 2'000'000));  // 2 ms, off a worker
  EXPECT_GE(detail::steady_now_ns_signed() - start, 2'000'000);
  fake_source source(pending, 0);
  as_worker worker(source);
  const std::int64_t again = detail::steady_now_ns_signed();
  EXPECT_FALSE(pending.wait(again + 2'000'000));  // and on a worker, through every idle phase
  EXPECT_GE(detail::steady_now_ns_signed() - again, 2'000'000);
  EXPECT_EQ(pending.count(), 1U);
}

TEST(HelpingBackoff, SpinsThenYieldsThenParksInShortThenLongSlices) {
  detail::helping_backoff backoff;
  for (int i = 0; i < detail::helping_backoff::spin_rounds; ++i) EXPECT_EQ(backoff.next(), 0);
  // The yield phase lasts idle_yield_ns of real time: every step returns 0
  // until then (a loaded machine only makes it take more steps).
  std::int64_t slice = 0;
  while ((slice = backoff.next()) == 0) {
  }
  EXPECT_EQ(slice, detail::helping_backoff::park_slice_short_ns);
  for (unsigned i = 1; i < detail::helping_backoff::park_short_slices; ++i) {
    EXPECT_EQ(backoff.next(), detail::helping_backoff::park_slice_short_ns);
  }
  EXPECT_EQ(backoff.next(), detail::helping_backoff::park_slice_long_ns);
  EXPECT_EQ(backoff.next(), detail::helping_backoff::park_slice_long_ns);
  backoff.reset();  // a helped job starts the sequence over
  EXPECT_EQ(backoff.next(), 0);
}

TEST(PendingCount, FinishWakesTheParkedWaiterAndLeavesTheSleeperBit) {
  detail::pending_count pending(2);
  std::thread waiter([&pending] { EXPECT_TRUE(pending.wait(0)); });
  // Wait until the waiter has announced itself (the sleeper bit), then finish.
  ASSERT_TRUE(ts::test::eventually(
      [&] { return (pending.word().load(std::memory_order_acquire) & detail::pending_count::sleeper_bit) != 0; }));
  pending.finish();
  pending.finish();
  waiter.join();
  EXPECT_EQ(pending.count(), 0U);
  EXPECT_NE(pending.word().load(std::memory_order_relaxed) & detail::pending_count::sleeper_bit, 0U);
}

// The same policy through the pool: a job on the only worker waits for a
// child it enqueued, which only it can run (so the wait must help).
TEST(HelpingWait, AWaitGroupOnTheOnlyWorkerRunsTheChildItWaitsFor) {
  ts::thread_pool pool{1, ts::test::pool_opts("helping")};
  std::atomic<int> ran{0};
  auto f = pool.submit([&] {
    ts::wait_group wg;
    for (int i = 0; i < 16; ++i) {
      (void)wg.add(1);
      if (!pool.enqueue([&] {
            ran.fetch_add(1, std::memory_order_relaxed);
            (void)wg.done();
          })) {
        ran.fetch_add(1, std::memory_order_relaxed);
        (void)wg.done();
      }
    }
    wg.wait();
    return ran.load(std::memory_order_relaxed);  // relaxed: wg.wait() ordered the children's writes
  });
  EXPECT_EQ(f.get(), 16);
}

// Independent jobs that each wait: a helping wait ran the next one, which
// waited and helped in turn, one level deeper per queued job, until the
// worker's stack overflowed (4 000 jobs on a 256 KiB stack). Past half its
// stack a helping wait now runs only the worker's own jobs: the rest wait
// in the queue, and all run once the wait group opens.
TEST(HelpingWait, IndependentWaitingJobsDoNotNestPastHalfTheStack) {
  ts::pool_options o = ts::test::pool_opts("helping-depth");
  o.worker_stack_size = 256 * 1024;
  ts::thread_pool pool{1, o};
  ts::wait_group gate{1};
  std::atomic<int> done{0};
  const int jobs = static_cast<int>(ts::test::scaled(4'000) < 400 ? 400 : ts::test::scaled(4'000));
  for (int i = 0; i < jobs; ++i) {
    ASSERT_TRUE(pool.enqueue([&] {
      gate.wait();
      done.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after wait_idle()
    }));
  }
  // The worker nests as far as it will meanwhile (any time works: the
  // outcome does not depend on how far it got).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (void)gate.done();
  pool.wait_idle();
  EXPECT_EQ(done.load(std::memory_order_relaxed), jobs);
}
