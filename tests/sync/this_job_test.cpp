// this_job::token() / this_job::is_cancelled() (include/thread_system/sync/this_job.hpp):
// inside a job enqueued with a token, that token; anywhere else (another
// job, a plain thread, after the job) the token that can never be cancelled.
#include "thread_system/sync/this_job.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../support/test_support.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/wait_group.hpp"

namespace ts = thread_system;

namespace {

TEST(ThisJob, OutsideAJobTheTokenIsNone) {
  EXPECT_FALSE(ts::this_job::token().can_be_cancelled());
  EXPECT_FALSE(ts::this_job::is_cancelled());
  bool on_thread = true;
  std::thread t([&] { on_thread = ts::this_job::token().can_be_cancelled(); });
  t.join();
  EXPECT_FALSE(on_thread);
}

TEST(ThisJob, AJobSeesItsOwnTokenAndItsCancellation) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::cancellation_source source;
  std::atomic<bool> started{false};
  std::atomic<int> outcome{0};
  ASSERT_TRUE(pool.enqueue(source.token(), [&] {
    const bool same = ts::this_job::token() == source.token();
    const bool early = ts::this_job::is_cancelled();
    started.store(true, std::memory_order_release);  // pairs with the wait below
    while (!ts::this_job::is_cancelled()) std::this_thread::yield();
    outcome.store(same && !early ? 1 : 2, std::memory_order_relaxed);  // read after wait_idle()
  }));
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  source.cancel();  // seen by the running job through this_job::is_cancelled()
  pool.wait_idle();
  EXPECT_EQ(outcome.load(std::memory_order_relaxed), 1);
}

TEST(ThisJob, AJobWithoutATokenAndTheNextJobSeeNone) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::cancellation_source source;
  source.cancel();
  std::atomic<int> with_token_ran{0};
  std::atomic<int> plain_saw{-1};
  ASSERT_TRUE(pool.enqueue(source.token(), [&] { with_token_ran.fetch_add(1, std::memory_order_relaxed); }));
  ASSERT_TRUE(pool.enqueue(
      [&] { plain_saw.store(ts::this_job::token().can_be_cancelled() ? 1 : 0, std::memory_order_relaxed); }));
  pool.wait_idle();  // orders the relaxed stores before these reads
  EXPECT_EQ(with_token_ran.load(std::memory_order_relaxed), 0) << "cancelled before it started: not run";
  EXPECT_EQ(plain_saw.load(std::memory_order_relaxed), 0) << "the earlier job's token did not leak";
}

// A task_group run from outside the pool keeps its first jobs in a slot of
// the pool's; a helping wait inside a job submitted with a token takes them
// from there. Such a job (no token of its own) saw the waiting job's token,
// cancelled: it ran outside the guard that clears it for queued jobs.
TEST(ThisJob, AGroupJobRunInsideATokenedJobsWaitSeesNoToken) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::cancellation_source source;
  ts::wait_group gate(1);
  std::atomic<bool> started{false};
  std::atomic<bool> waiting{false};
  ASSERT_TRUE(pool.enqueue(source.token(), [&] {
    started.store(true, std::memory_order_release);  // pairs with the acquire load below
    while (!ts::this_job::is_cancelled()) std::this_thread::yield();
    waiting.store(true, std::memory_order_relaxed);  // a flag only
    gate.wait();                                     // helps: runs the group's job (the pool's only worker)
  }));
  // Cancelled only once running (a job cancelled before it starts never runs).
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  std::atomic<int> saw_cancellable{-1};
  std::atomic<int> saw_cancelled{-1};
  std::atomic<bool> ran{false};
  ts::task_group group(pool);
  group.run([&] {
    saw_cancellable.store(ts::this_job::token().can_be_cancelled() ? 1 : 0, std::memory_order_relaxed);
    saw_cancelled.store(ts::this_job::is_cancelled() ? 1 : 0, std::memory_order_relaxed);
    ran.store(true, std::memory_order_release);  // pairs with the acquire load below
    (void)gate.done();
  });
  source.cancel();
  // Before this thread's own wait could run the job: the worker's wait runs it.
  while (!ran.load(std::memory_order_acquire)) std::this_thread::yield();
  group.wait();
  pool.wait_idle();
  EXPECT_TRUE(waiting.load(std::memory_order_relaxed));
  EXPECT_EQ(saw_cancellable.load(std::memory_order_relaxed), 0)
      << "the waiting job's token leaked into the group's job";
  EXPECT_EQ(saw_cancelled.load(std::memory_order_relaxed), 0);
}

// The same for a group's job run on the calling thread because its pool
// refused it (stopped): inside a job submitted with a cancelled token, it
// saw that token.
TEST(ThisJob, AGroupJobRunInlineByARefusingPoolSeesNoToken) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::thread_pool stopped{1, ts::test::pool_opts()};
  (void)stopped.stop();
  ts::cancellation_source running_source;  // cancelled once the job runs (a job cancelled before it starts never runs)
  std::atomic<bool> started{false};
  std::atomic<int> saw_cancellable{-1};
  auto done = pool.submit(running_source.token(), [&] {
    started.store(true, std::memory_order_release);  // pairs with the acquire load below
    while (!ts::this_job::is_cancelled()) std::this_thread::yield();
    ts::task_group group(stopped);
    group.run(
        [&] { saw_cancellable.store(ts::this_job::token().can_be_cancelled() ? 1 : 0, std::memory_order_relaxed); });
    group.wait();
  });
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  running_source.cancel();
  done.get();  // orders the relaxed store before the read below
  EXPECT_EQ(saw_cancellable.load(std::memory_order_relaxed), 0)
      << "the running job's token leaked into the group's job";
}

}  // namespace
