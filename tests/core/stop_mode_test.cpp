// stop_mode and stop_report (include/thread_system/core/stop_mode.hpp): what
// stop() does with accepted jobs that have not started, and the report's
// invariant accepted == executed + cancelled.
#include "thread_system/core/stop_mode.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

namespace {

// One worker held inside a job while `queued` jobs and a submit() wait
// behind it; stop(mode) is called, and the worker is let go only once the
// pool refuses submissions (stop() has begun), so the queued jobs are still
// queued when stop() decides their fate.
struct held_pool {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  std::atomic<int> ran{0};
  std::uint64_t accepted_while_stopping = 0;

  explicit held_pool(int queued) {
    EXPECT_TRUE(pool.enqueue([this] {
      holding.store(true, std::memory_order_release);                              // pairs with the wait below
      while (!release.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the releaser
    }));
    while (!holding.load(std::memory_order_acquire)) std::this_thread::yield();
    for (int i = 0; i < queued; ++i) {
      EXPECT_TRUE(pool.enqueue([this] { ran.fetch_add(1, std::memory_order_relaxed); }));  // read after stop()
    }
  }

  ts::stop_report stop(ts::stop_mode mode) {
    std::thread releaser([this] {
      for (;;) {
        auto r = pool.enqueue([this] { ran.fetch_add(1, std::memory_order_relaxed); });
        if (!r) {
          EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
          break;
        }
        ++accepted_while_stopping;  // accepted before stop() began: queued like the others
        std::this_thread::yield();
      }
      release.store(true, std::memory_order_release);
    });
    const ts::stop_report report = pool.stop(mode);
    releaser.join();
    return report;
  }
};

TEST(StopMode, DrainRunsEveryAcceptedJob) {
  held_pool h(10);
  auto f = h.pool.submit([] { return 7; });
  const ts::stop_report r = h.stop(ts::stop_mode::drain);
  const std::uint64_t queued = 10 + h.accepted_while_stopping;
  EXPECT_EQ(r.accepted, queued + 2);  // + the holding job + the submit
  EXPECT_EQ(r.executed, r.accepted);
  EXPECT_EQ(r.cancelled, 0U);
  EXPECT_EQ(r.failed, 0U);
  EXPECT_EQ(static_cast<std::uint64_t>(h.ran.load(std::memory_order_relaxed)), queued);
  EXPECT_EQ(f.get(), 7);
}

TEST(StopMode, CancelPendingLetsTheRunningJobFinishAndDiscardsTheRest) {
  held_pool h(10);
  auto f = h.pool.submit([] { return 7; });
  const ts::stop_report r = h.stop(ts::stop_mode::cancel_pending);
  const std::uint64_t queued = 10 + h.accepted_while_stopping;
  EXPECT_EQ(r.accepted, queued + 2);
  EXPECT_EQ(r.executed, 1U) << "the job that was running";
  EXPECT_EQ(r.cancelled, queued + 1);
  EXPECT_EQ(r.accepted, r.executed + r.cancelled);
  EXPECT_EQ(h.ran.load(std::memory_order_relaxed), 0);
  try {
    (void)f.get();
    ADD_FAILURE() << "a discarded submit() completed with a value";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::cancelled);
  }
}

TEST(StopMode, AReportStartsAtZero) {
  const ts::stop_report r;
  EXPECT_EQ(r.accepted, 0U);
  EXPECT_EQ(r.executed, 0U);
  EXPECT_EQ(r.failed, 0U);
  EXPECT_EQ(r.cancelled, 0U);
}

}  // namespace
