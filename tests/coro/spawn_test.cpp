// spawn(): a detached task on a pool, its failures and refusals
// (include/thread_system/coro/spawn.hpp).
#include "thread_system/coro/spawn.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "../support/test_support.hpp"
#include "coro_test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system {
namespace {

using namespace std::chrono_literals;
using namespace coro_test;
using test::scaled;

TEST(Spawn, EverySpawnedTaskRunsExactlyOnce) {
  thread_pool pool{2};
  const std::size_t n = scaled(1'000'000);
  std::vector<std::atomic<std::uint8_t>> runs(n);
  auto body = [](std::atomic<std::uint8_t>& slot) -> task<void> {
    slot.fetch_add(1, std::memory_order_relaxed);
    co_return;
  };
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(spawn(pool, body(runs[i])));
  pool.wait_idle();
  std::size_t wrong = 0;
  for (auto& r : runs) wrong += r.load(std::memory_order_relaxed) == 1 ? 0 : 1;  // wait_idle() ordered the runs
  EXPECT_EQ(wrong, 0U);
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.accepted, n);
  EXPECT_EQ(s.executed, n);
}

TEST(Spawn, AFailureGoesToTheErrorHandlerAndTheFailedCounter) {
  thread_pool pool{2};
  failure_log failures;
  failures.attach(pool);
  auto body = [](thread_pool& p) -> task<void> {
    co_await p.schedule();
    throw std::runtime_error("spawned failure");
  };
  ASSERT_TRUE(spawn(pool, body(pool)));
  pool.wait_idle();
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.failed, 1U);
  EXPECT_EQ(s.accepted, s.executed);
  EXPECT_EQ(failures.messages(), std::vector<std::string>{"spawned failure"});
}

TEST(Spawn, OnAStoppedPoolIsRefusedAndTheTaskDestroyed) {
  thread_pool pool{1};
  (void)pool.stop();
  auto probe = std::make_shared<int>(0);
  auto body = [](std::shared_ptr<int> p) -> task<void> {
    (void)p;
    co_return;
  };
  auto r = spawn(pool, body(probe));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::pool_stopped);
  EXPECT_EQ(probe.use_count(), 1);
}

TEST(Spawn, AFailureWhoseReportJobIsDiscardedStillReachesTheErrorHandler) {
  // The task fails on another pool, so its failure is pushed to its own pool
  // as a job; that job, discarded by stop(cancel_pending), reports it.
  thread_pool a{1};
  thread_pool b{1};
  failure_log failures;
  failures.attach(a);
  std::atomic<bool> go{false};
  auto body = [](thread_pool& other, std::atomic<bool>& g) -> task<void> {
    co_await other.schedule();
    while (!g.load()) std::this_thread::sleep_for(1ms);
    throw std::runtime_error("late failure");
  };
  ASSERT_TRUE(spawn(a, body(b, go)));
  while (b.get_statistics().accepted < 1) std::this_thread::sleep_for(1ms);
  a.pause();
  go.store(true);
  while (a.get_statistics().accepted < 2) std::this_thread::sleep_for(1ms);  // the failure's job is queued
  const auto report = a.stop(stop_mode::cancel_pending);
  EXPECT_EQ(report.cancelled, 1U);
  EXPECT_EQ(failures.messages(), std::vector<std::string>{"late failure"});
}

// A spawned task that goes on on `other`, says so in `moved`, waits for
// `go`, then fails with `what` there.
struct outliving_task {
  std::atomic<bool> moved{false};
  std::atomic<bool> go{false};

  task<void> run(thread_pool& other, const char* what) {
    co_await other.schedule();
    moved.store(true, std::memory_order_relaxed);                                  // a signal; no data rides on it
    while (!go.load(std::memory_order_relaxed)) std::this_thread::sleep_for(1ms);  // likewise
    throw std::runtime_error(what);
  }
  void wait_moved() const {
    while (!moved.load(std::memory_order_relaxed)) std::this_thread::sleep_for(1ms);  // a signal only
  }
};

TEST(Spawn, AFailureAfterItsPoolIsDestroyedGoesToThePoolItFinishedOn) {
  // Spawned on `a`, the task goes on on `b`; `a` is destroyed; the task then
  // fails on `b`: `b`'s resumption counts and reports it (pushing it into
  // the destroyed `a` was a use after free).
  failure_log on_b;
  thread_pool b{1};
  on_b.attach(b);
  outliving_task t;
  {
    failure_log on_a;
    thread_pool a{1};
    on_a.attach(a);
    ASSERT_TRUE(spawn(a, t.run(b, "failure after its pool")));
    t.wait_moved();
  }                                             // `a` is destroyed; the task is on `b`
  t.go.store(true, std::memory_order_relaxed);  // a signal only
  b.wait_idle();
  const auto s = b.get_statistics();
  EXPECT_EQ(s.failed, 1U);
  EXPECT_EQ(s.accepted, s.executed);
  EXPECT_EQ(on_b.messages(), std::vector<std::string>{"failure after its pool"});
}

// Ends the process with a message when `done` does not come true within a
// minute: a deadlock on a pool's thread would otherwise hang the test.
void expect_within_a_minute(const std::function<bool()>& done, const char* what) {
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) {
      std::fprintf(stderr, "%s: not within a minute (a deadlock)\n", what);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(1ms);
  }
}

TEST(Spawn, AFailureWhoseDeliveryDestroysItsPoolIsStillReported) {
  // The task fails on `q`; its failure is pushed into its own pool `p`,
  // which is full under drop_oldest, and the job dropped for it holds `p`'s
  // last owner: `p` is destroyed inside the delivery, on `q`'s worker. The
  // destructor waited for the delivery's own pin on `p` (a deadlock of
  // `q`'s worker); the failure, now queued in `p`'s core, still reaches
  // `p`'s error handler when `p`'s workers drain it.
  thread_pool q{1};
  failure_log on_p;
  pool_options o;
  o.backpressure = backpressure::drop_oldest(1);
  auto p = std::make_shared<thread_pool>(1, o);
  on_p.attach(*p);
  outliving_task t;
  ASSERT_TRUE(spawn(*p, t.run(q, "delivered while its pool goes")));
  t.wait_moved();
  test::held_worker held(*p);
  ASSERT_TRUE(p->enqueue([keep = p] {}));  // queued: `p` is full
  const std::weak_ptr<thread_pool> watch = p;
  p.reset();                                    // the queued job holds the last owner
  t.go.store(true, std::memory_order_relaxed);  // a signal only
  expect_within_a_minute([&] { return watch.expired(); }, "the pool destroyed by the delivery");
  expect_within_a_minute(
      [&] {
        const auto s = q.get_statistics();
        return s.executed + s.failed >= 1;
      },
      "the delivering worker goes on");
  held.release();  // `p`'s worker drains: the failure's job runs
  expect_within_a_minute([&] { return !on_p.messages().empty(); }, "the failure reported by the destroyed pool");
  EXPECT_EQ(on_p.messages(), std::vector<std::string>{"delivered while its pool goes"});
  q.wait_idle();
  EXPECT_EQ(q.get_statistics().failed, 0U);  // `p` reported it, not `q`
}

TEST(Spawn, TwoPoolsAtOneAddressAreNotConfused) {
  // A failure for a destroyed pool must not reach a new pool that happens
  // to live at its address: each registration has its own key.
  failure_log on_b;
  thread_pool b{1};
  on_b.attach(b);
  outliving_task t;
  failure_log on_again;
  std::optional<thread_pool> a;  // both pools live in its storage, one after the other
  a.emplace(1);
  const void* const first_address = &*a;
  ASSERT_TRUE(spawn(*a, t.run(b, "old pool's failure")));
  t.wait_moved();
  a.reset();
  a.emplace(1);
  ASSERT_EQ(static_cast<const void*>(&*a), first_address);
  on_again.attach(*a);
  auto ok = [](thread_pool& p) -> task<void> {
    co_await p.schedule();
    co_return;
  };
  ASSERT_TRUE(spawn(*a, ok(*a)));               // registers the new pool
  t.go.store(true, std::memory_order_relaxed);  // a signal only
  b.wait_idle();
  a->wait_idle();
  EXPECT_EQ(b.get_statistics().failed, 1U);
  EXPECT_EQ(a->get_statistics().failed, 0U);
  EXPECT_TRUE(on_again.messages().empty());
}

}  // namespace
}  // namespace thread_system
