// this_job::token() / this_job::is_cancelled() (include/thread_system/sync/this_job.hpp):
// inside a job enqueued with a token, that token; anywhere else (another
// job, a plain thread, after the job) the token that can never be cancelled.
#include "thread_system/sync/this_job.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

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

}  // namespace
