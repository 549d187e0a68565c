// when_all() of tasks: a fixed set (a tuple) and a range (a vector)
// (include/thread_system/coro/when_all.hpp).
#include "thread_system/coro/when_all.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "../support/test_support.hpp"
#include "coro_test_support.hpp"
#include "foreign_coroutines.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system {
namespace {

using namespace std::chrono_literals;
using namespace coro_test;
using test::scaled;

TEST(WhenAll, ResultsInOrderAndChildrenRunInParallel) {
  thread_pool pool{2};
  auto child = [](thread_pool& p, int v, std::atomic<int>& running, std::atomic<int>& peak) -> task<int> {
    co_await p.schedule();
    // relaxed throughout: counters read by this test only, no data published with them.
    const int now = running.fetch_add(1, std::memory_order_relaxed) + 1;
    int seen = peak.load(std::memory_order_relaxed);
    while (seen < now && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
    // Hold the worker until the other child has started too (or give up
    // after a while: the count below then says so).
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    while (peak.load(std::memory_order_relaxed) < 2 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(1ms);
    }
    running.fetch_sub(1, std::memory_order_relaxed);
    co_return v;
  };
  std::atomic<int> running{0};
  std::atomic<int> peak{0};
  auto parent = [&](thread_pool& p) -> task<std::tuple<int, int, std::monostate>> {
    co_await p.schedule();
    auto nothing = [](thread_pool& q) -> task<void> { co_await q.schedule(); };
    co_return co_await when_all(child(p, 1, running, peak), child(p, 2, running, peak), nothing(p));
  };
  auto [a, b, c] = sync_wait(parent(pool));
  (void)c;
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(peak.load(std::memory_order_relaxed), 2);  // sync_wait's return orders it
}

// A when_all awaitable is awaited once: the second co_await is refused,
// never a resumption of its finished children.
TEST(WhenAll, ASecondAwaitOfTheSameAwaitableIsRefused) {
  auto child = [](int v) -> task<int> { co_return v; };
  auto body = [&child]() -> task<int> {
    auto both = when_all(child(1), child(2));
    auto [a, b] = co_await both;
    auto all = when_all(std::vector<task<int>>{});
    (void)co_await all;
    int refused = 0;
    try {
      (void)co_await both;
    } catch (const error_exception& e) {
      if (e.code() == error_code::invalid_argument) ++refused;
    }
    try {
      (void)co_await all;
    } catch (const error_exception& e) {
      if (e.code() == error_code::invalid_argument) ++refused;
    }
    co_return a + b + 10 * refused;
  };
  EXPECT_EQ(sync_wait(body()), 23);
}

TEST(WhenAll, RethrowsTheFirstFailureAfterAllFinished) {
  thread_pool pool{2};
  std::atomic<int> finished{0};
  auto child = [](thread_pool& p, int i, std::atomic<int>& done) -> task<int> {
    co_await p.schedule();
    if (i == 1) {
      std::this_thread::sleep_for(20ms);
      done.fetch_add(1);
      throw std::runtime_error("first");
    }
    if (i == 3) {
      done.fetch_add(1);
      throw std::logic_error("second");
    }
    std::this_thread::sleep_for(10ms);
    done.fetch_add(1);
    co_return i;
  };
  auto parent = [&](thread_pool& p) -> task<void> {
    std::vector<task<int>> children;
    for (int i = 0; i < 5; ++i) children.push_back(child(p, i, finished));
    (void)co_await when_all(std::move(children));
  };
  EXPECT_THROW(sync_wait(parent(pool)), std::runtime_error);
  EXPECT_EQ(finished.load(std::memory_order_relaxed), 5);  // sync_wait's return orders it
}

TEST(WhenAll, RangeOfValuesAndEmptyRange) {
  thread_pool pool{2};
  auto parent = [](thread_pool& p) -> task<int> {
    std::vector<task<int>> children;
    for (int i = 0; i < 100; ++i) children.push_back(on_pool(p, i));
    std::vector<int> got = co_await when_all(std::move(children));
    int sum = 0;
    for (int i = 0; i < 100; ++i) sum += got[static_cast<std::size_t>(i)] == i ? 1 : 0;
    std::vector<int> none = co_await when_all(std::vector<task<int>>{});
    co_return sum + static_cast<int>(none.size());
  };
  EXPECT_EQ(sync_wait(parent(pool)), 100);
}

task<std::uint64_t> fib(thread_pool& pool, int n) {
  if (n < 2) co_return static_cast<std::uint64_t>(n);
  auto [a, b] = co_await when_all(fib(pool, n - 1), fib(pool, n - 2));
  co_return a + b;
}

TEST(WhenAll, ForkJoinFibonacci) {
  thread_pool pool{2};
  auto root = [](thread_pool& p) -> task<std::uint64_t> {
    co_await p.schedule();
    co_return co_await fib(p, 20);
  };
  EXPECT_EQ(sync_wait(root(pool)), 6765U);
}

// Off a pool, when_all's children other than the first start on this
// thread: here the deep one is the second, so each level's when_all starts
// the next level. They used to start inside the parent's await_suspend(),
// a few stack frames per level (40 000 levels overflowed an 8 MiB stack);
// the resume_loop running the chain now starts them one after another.
task<std::uint64_t> one() { co_return 1; }

task<std::uint64_t> nested_levels(std::uint64_t depth) {
  if (depth == 0) co_return 0;
  auto [a, b] = co_await when_all(one(), nested_levels(depth - 1));
  co_return a + b;
}

TEST(WhenAll, NestedOffAPoolUsesConstantStack) {
  const std::uint64_t depth = scaled(200'000);
  EXPECT_EQ(sync_wait(nested_levels(depth)), depth);
}

// On a pool whose stop() has begun, every push of a when_all child is
// refused and the child starts on the worker: deferred to the resume_loop
// running the chain, as off a pool, so the recursion still uses constant
// stack. (Each level started its deep child inside its parent's
// await_suspend(): a few hundred levels overflowed a 256 KiB worker stack
// once stop(drain) began, where the running pool took 100 000.)
TEST(WhenAll, NestedOnAStoppingPoolUsesConstantStack) {
  pool_options options;
  options.worker_stack_size = 256 * 1024;
  thread_pool pool{1, options};
  std::atomic<bool> running{false};
  const std::uint64_t depth = scaled(20'000);
  auto root = [&running](thread_pool& p, std::uint64_t levels) -> task<std::uint64_t> {
    co_await p.schedule();
    running.store(true, std::memory_order_release);  // pairs with the stopping thread's acquire
    // Until the pool refuses pushes: stop(drain) has begun, and it waits
    // for this job, so every push below is refused.
    while (p.enqueue([] {})) std::this_thread::sleep_for(1ms);
    co_return co_await nested_levels(levels);
  };
  std::thread stopper([&] {
    while (!running.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);  // pairs with root's release
    (void)pool.stop(stop_mode::drain);
  });
  EXPECT_EQ(sync_wait(root(pool, depth)), depth);
  stopper.join();
}

TEST(WhenAll, OffAPoolTheFirstChildStartsThenTheOthersInOrder) {
  std::vector<int> order;
  auto child = [](std::vector<int>& o, int id) -> task<void> {
    o.push_back(id);
    co_return;
  };
  auto parent = [&]() -> task<void> { co_await when_all(child(order, 0), child(order, 1), child(order, 2)); };
  sync_wait(parent());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

// A coroutine of another type, driven by hand: resume() then destroy().
struct hand_driven {
  struct promise_type {
    hand_driven get_return_object() noexcept { return {std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> h;
};

hand_driven awaits_two_ready_tasks() { (void)co_await when_all(one(), one()); }

task<bool> drive_by_hand() {
  const hand_driven d = awaits_two_ready_tasks();
  d.h.resume();
  const bool done = d.h.done();
  d.h.destroy();
  co_return done;
}

// A when_all of tasks that finish at once completes inside the resume()
// that starts it when a foreign coroutine awaits it, also inside a task
// (under a resume_loop): deferring its second child to that loop left the
// coroutine suspended, and the loop then read the child's node from the
// frame its driver had destroyed.
TEST(WhenAll, AForeignCoroutineDrivenByHandSeesItsWhenAllFinishInsideResume) {
  const hand_driven d = awaits_two_ready_tasks();
  d.h.resume();
  EXPECT_TRUE(d.h.done()) << "on a plain thread";
  d.h.destroy();
  EXPECT_TRUE(sync_wait(drive_by_hand())) << "inside a task";
}

rethrowing_coroutine await_when_all_marks(std::size_t n, depth_span& depths) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto [a, b] = co_await when_all(marked(), marked());
    std::vector<task<std::uintptr_t>> range;
    range.push_back(marked());
    const std::vector<std::uintptr_t> c = co_await when_all(std::move(range));
    for (const std::uintptr_t at : {a, b, c[0]}) depths.note(at);
  }
}

// A coroutine of another type awaiting, in a loop, when_alls whose children
// finish without suspending: the children run inside the co_await and the
// loop goes on at the depth it had. With a transfer into the first child and
// back into the awaiter from the last, every iteration nested two resume()s
// deeper wherever the compiler did not make symmetric transfer a tail call
// (GCC below -O2, or under a sanitizer): 100 000 iterations overflowed an
// 8 MiB stack.
TEST(WhenAll, AForeignCoroutineAwaitingWhenAllsThatFinishAtOnceKeepsItsDepth) {
  depth_span depths;
  const rethrowing_coroutine c = await_when_all_marks(100'000, depths);
  ASSERT_TRUE(c.done());
  EXPECT_LT(depths.width(), 64U * 1024U) << "each when_all went deeper";
}

task<int> on_pool(thread_pool& pool, int v) {
  co_await pool.schedule();
  co_return v;
}

rethrowing_coroutine await_pool_when_alls(thread_pool& pool, int n, std::atomic<int>& sum,
                                          std::atomic<bool>& finished) {
  int local = 0;
  for (int i = 0; i < n; ++i) {
    const auto [a, b] = co_await when_all(on_pool(pool, 1), on_pool(pool, 2));
    std::vector<task<int>> range;
    range.push_back(on_pool(pool, 3));
    range.push_back(on_pool(pool, 4));
    for (const int v : co_await when_all(std::move(range))) local += v;
    local += a + b;
  }
  sum.store(local, std::memory_order_relaxed);      // published by the release store below
  finished.store(true, std::memory_order_release);  // pairs with the test's acquire
}

// The same coroutine with children that suspend (they hop onto a pool): the
// last child to finish, on a worker, resumes it - or, when the children all
// finish while the co_await is still starting them, it goes on from there.
// Many rounds meet both outcomes and the race between them.
TEST(WhenAll, AForeignCoroutineAwaitingWhenAllsOfSuspendingChildrenIsResumedOnce) {
  thread_pool pool{2};
  std::atomic<int> sum{0};
  std::atomic<bool> finished{false};
  const int rounds = static_cast<int>(scaled(5'000));
  const rethrowing_coroutine c = await_pool_when_alls(pool, rounds, sum, finished);
  ASSERT_TRUE(test::eventually([&] { return finished.load(std::memory_order_acquire); }, 60s));
  EXPECT_EQ(sum.load(std::memory_order_relaxed), 10 * rounds);
  pool.wait_idle();  // the resumption that finished it has returned
  EXPECT_TRUE(c.done());
}

}  // namespace
}  // namespace thread_system
