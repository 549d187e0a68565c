// co_await pool.sleep_for()/sleep_until(): a timer that resumes the task on
// a worker, cancellation, refusal (include/thread_system/coro/sleep_awaiter.hpp).
#include "thread_system/coro/sleep_awaiter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <latch>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "../support/test_support.hpp"
#include "coro_test_support.hpp"
#include "foreign_coroutines.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system {
namespace {

using namespace std::chrono_literals;
using namespace coro_test;
using test::scaled;

TEST(Sleep, ResumesOnAWorkerNoEarlierThanTheDelay) {
  thread_pool pool{2};
  auto t = [](thread_pool& p) -> task<std::chrono::nanoseconds> {
    const auto start = std::chrono::steady_clock::now();
    co_await p.sleep_for(20ms);
    if (!p.is_worker_thread()) co_return std::chrono::nanoseconds(-1);
    co_return std::chrono::steady_clock::now() - start;
  };
  EXPECT_GE(sync_wait(t(pool)), 20ms);
  auto until = [](thread_pool& p) -> task<bool> {
    const auto due = std::chrono::steady_clock::now() + 10ms;
    co_await p.sleep_until(due);
    co_return std::chrono::steady_clock::now() >= due;
  };
  EXPECT_TRUE(sync_wait(until(pool)));
}

// A zero, negative or NaN duration, or a time already past, is due at once:
// the co_await does not throw and still resumes on a worker (the contract in
// coro/sleep_awaiter.hpp; schedule_after refuses such delays instead).
TEST(Sleep, ADurationThatIsNotPositiveIsDueAtOnceAndResumesOnAWorker) {
  thread_pool pool{1};
  auto t = [](thread_pool& p) -> task<int> {
    int on_worker = 0;
    co_await p.sleep_for(0ms);
    on_worker += p.is_worker_thread() ? 1 : 0;
    co_await p.sleep_for(-5s);
    on_worker += p.is_worker_thread() ? 1 : 0;
    co_await p.sleep_for(std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN()));
    on_worker += p.is_worker_thread() ? 1 : 0;
    co_await p.sleep_until(std::chrono::steady_clock::time_point::min());
    on_worker += p.is_worker_thread() ? 1 : 0;
    co_return on_worker;
  };
  // A due time in the past arms nothing for later: the whole chain resumes
  // at once (a failure here would hang until the test's timeout, or throw).
  EXPECT_EQ(sync_wait(t(pool)), 4);
  EXPECT_FALSE(pool.schedule_after(-5s, [] {}).has_value()) << "the timer's rule, for contrast";
}

// A sleep awaitable is awaited once: the second co_await is refused at once
// and arms no timer (one armed then would outlive the awaitable).
TEST(Sleep, ASecondAwaitOfTheSameAwaitableIsRefused) {
  thread_pool pool{2};
  auto body = [](thread_pool& p) -> task<int> {
    int refused = 0;
    {
      auto nap = p.sleep_for(1ms);
      co_await nap;
      try {
        co_await nap;
      } catch (const error_exception& e) {
        if (e.code() == error_code::invalid_argument) ++refused;
      }
    }
    co_return refused;
  };
  EXPECT_EQ(sync_wait(body(pool)), 1);
  EXPECT_EQ(pool.get_timer_statistics().scheduled, 1U);
}

// Not a library task: starts at once, runs to its end on whichever thread resumes it.
eager_coroutine foreign_sleep(thread_pool& p, std::string& out) {
  const std::string local = "kept";
  try {
    co_await p.sleep_for(1ms);
    out = "slept";
  } catch (const error_exception& e) {
    out = std::string(to_string(e.code())) + "|" + e.what() + "|" + local;
  }
}

// A sleep refused before it starts (the pool stopped) throws the refusal's
// own code and message from the co_await, at once and on the awaiting
// thread, in a task and in a foreign coroutine alike; the coroutine goes on
// with its locals intact. (The awaiter, part of every sleeping task's
// frame, keeps no error: the refusal leaves await_suspend() as an
// exception, which the co_await rethrows.)
TEST(Sleep, ARefusalBeforeTheSleepThrowsTheRefusalItself) {
  thread_pool pool{1};
  (void)pool.stop();
  auto body = [](thread_pool& p) -> task<std::string> {
    const std::string local = "kept";
    try {
      co_await p.sleep_for(1ms);
    } catch (const error_exception& e) {
      co_return std::string(to_string(e.code())) + "|" + e.what() + "|" + local;
    }
    co_return "slept";
  };
  const std::string in_task = sync_wait(body(pool));
  EXPECT_EQ(in_task.rfind("pool_stopped|", 0), 0U) << in_task;
  EXPECT_NE(in_task.find("stopped"), std::string::npos) << in_task;
  EXPECT_EQ(in_task.substr(in_task.size() - 5), "|kept") << in_task;
  std::string in_foreign;
  foreign_sleep(pool, in_foreign);  // runs to its end here: nothing suspends
  EXPECT_EQ(in_foreign, in_task);
  EXPECT_EQ(pool.get_timer_statistics().scheduled, 0U);
}

// The memory a sleeping task costs (docs/PERFORMANCE.md, coro_sleep: at most
// 256 B beyond a task suspended in schedule()): the awaiter in its frame,
// and the handle it keeps of its timer (one pointer to the timer, which
// knows its queue).
static_assert(sizeof(timer_handle) == sizeof(std::shared_ptr<int>));
static_assert(sizeof(detail::sleep_awaiter<detail::pool_timer_arm<thread_pool>>) <= 15 * sizeof(void*));

TEST(Sleep, ACancelledTokenEndsTheSleepEarlyWithCancelled) {
  thread_pool pool{2};
  cancellation_source src;
  std::atomic<int> outcome{0};
  auto body = [](thread_pool& p, std::atomic<int>& out) -> task<void> {
    try {
      co_await p.sleep_for(1h);
      out.store(2, std::memory_order_seq_cst);  // seq_cst, as before: the test reads it after polling
    } catch (const error_exception& e) {
      out.store(e.code() == error_code::cancelled && p.is_worker_thread() ? 1 : 3, std::memory_order_seq_cst);
    }
  };
  ASSERT_TRUE(spawn(pool, src.token(), body(pool, outcome)));
  std::this_thread::sleep_for(5ms);  // usually asleep by now; either way the outcome is the same
  src.cancel();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (outcome.load(std::memory_order_seq_cst) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(outcome.load(std::memory_order_seq_cst), 1);
  // Already cancelled: does not sleep at all.
  std::atomic<int> again{0};
  ASSERT_TRUE(spawn(pool, src.token(), body(pool, again)));
  pool.wait_idle();
  EXPECT_EQ(again.load(std::memory_order_seq_cst),
            1);  // cancelled before it could suspend: throws at once, on the worker
}

TEST(Sleep, AWhenAllRightAfterASleepInTheSameResumption) {
  // The sleep's awaiter is gone once the child returns, while the timer's
  // run (the resumption) goes on: what when_all reads of the running
  // resumption must not live in that awaiter.
  thread_pool pool{2};
  auto child = [](thread_pool& p) -> task<int> {
    co_await p.sleep_for(1ms);
    co_return 1;
  };
  auto leaf = []() -> task<int> { co_return 1; };
  auto parent = [&](thread_pool& p) -> task<int> {
    co_await p.schedule();
    const int a = co_await child(p);
    auto [b, c] = co_await when_all(leaf(), leaf());
    co_return a + b + c;
  };
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sync_wait(parent(pool)), 3);
}

TEST(Sleep, ATokenCancelWhoseResumptionIsRefusedAbandonsTheTaskSafely) {
  // The token's callback cancels the timer; the timer's discard pushes the
  // resumption, the full pool refuses it, and the task is abandoned on this
  // thread inside that cancel(): nothing may touch the freed frame after.
  pool_options opts;
  opts.backpressure = backpressure::reject(1);
  thread_pool pool{1, opts};
  cancellation_source src;
  std::atomic<int> live{0};
  std::atomic<int> stage{0};
  auto sleeper = [](thread_pool& p, std::atomic<int>& l, std::atomic<int>& st) -> task<void> {
    frame_probe alive(&l);
    st.store(1, std::memory_order_seq_cst);  // seq_cst: read by the test thread after cancel()
    co_await p.sleep_for(1h);
    st.store(2, std::memory_order_seq_cst);
  };
  ASSERT_TRUE(spawn(pool, src.token(), sleeper(pool, live, stage)));
  while (pool.get_timer_statistics().scheduled < 1) std::this_thread::sleep_for(1ms);
  test::held_worker held(pool);      // the only worker, inside a job until released
  ASSERT_TRUE(pool.enqueue([] {}));  // the queue is full now
  src.cancel();
  EXPECT_EQ(stage.load(std::memory_order_seq_cst), 1);  // never resumed
  EXPECT_EQ(live.load(std::memory_order_seq_cst), 0);   // abandoned: the frame is gone
  held.release();
  const auto report = pool.stop();
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

// A foreign coroutine that sleeps and lets the sleep's error out (its
// promise rethrows: the exception goes to the pool's error handler). Its
// frame is never destroyed, only kept reachable (kept_frame): Clang 16
// destroys the frame's live awaiter a second time when destroy() follows
// an unhandled_exception() that rethrew (GCC does not), and this awaiter,
// the library's sleep, owns a shared_ptr. One frame per run of the test.
struct kept_rethrowing {
  struct promise_type {
    kept_rethrowing get_return_object() noexcept {
      return kept_rethrowing{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    static std::suspend_never initial_suspend() noexcept { return {}; }
    static std::suspend_always final_suspend() noexcept { return {}; }
    static void return_void() noexcept {}
    [[noreturn]] static void unhandled_exception() { throw; }
  };
  std::coroutine_handle<promise_type> frame;
};
// Reachable to the end of the process (never destroyed): not a leak.
auto* const kept_frames = new std::vector<std::coroutine_handle<>>();
kept_rethrowing sleep_uncaught(thread_pool& p) { co_await p.sleep_for(1h); }

// A pool destroyed on its own timer thread (a timer's function, refused by
// the full pool, held its last owner) discards the sleeps still pending
// there: a foreign coroutine's sleep resumes it with `cancelled`, and what
// it lets out goes to the pool's error handler. That report went through
// the pool's core after the destructor had let go of it (a null pointer).
TEST(Sleep, APoolDestroyedOnItsTimerThreadReportsWhatADiscardedSleepLetsOut) {
  // What the pool's jobs and handler touch lives on the heap: the pool,
  // orphaned, ends on its own threads after the test has returned.
  const auto reported = std::make_shared<std::atomic<int>>(0);
  const auto started = std::make_shared<std::latch>(1);
  const auto gate = std::make_shared<std::latch>(1);
  const auto last_ran = std::make_shared<std::atomic<bool>>(false);
  std::latch timer_thread_held{1};
  std::latch timer_thread_gate{1};
  std::atomic<bool> timer_thread_released{false};
  pool_options o;
  o.backpressure = backpressure::reject(1);
  o.on_error = [reported](const std::exception_ptr&) { reported->fetch_add(1, std::memory_order_release); };
  auto pool = std::make_shared<thread_pool>(1, o);
  ASSERT_TRUE(pool->enqueue([started, gate] {
    started->count_down();
    gate->wait();
  }));
  started->wait();
  ASSERT_TRUE(pool->enqueue([last_ran] { last_ran->store(true, std::memory_order_release); }));  // the pool is full
  const kept_rethrowing sleeper = sleep_uncaught(*pool);
  kept_frames->push_back(sleeper.frame);
  // As in ThreadPool.ATimersFunctionMayHoldTheLastReferenceToItsPool: a
  // first timer holds the timer thread; the second takes the pool's last
  // reference once the test has dropped its own; its run is refused.
  ASSERT_TRUE(pool->schedule_after(
      1ms, test::holds_the_timer_thread(&timer_thread_held, &timer_thread_gate, &timer_thread_released)));
  timer_thread_held.wait();
  ASSERT_TRUE(pool->schedule_after(1ms, [p = pool] {}));
  const std::weak_ptr<thread_pool> watch = pool;
  pool.reset();
  timer_thread_gate.count_down();
  EXPECT_TRUE(test::eventually([&] { return timer_thread_released.load(std::memory_order_acquire); }));
  EXPECT_TRUE(test::eventually([&watch] { return watch.expired(); }));
  EXPECT_TRUE(test::eventually([&reported] { return reported->load(std::memory_order_acquire) == 1; }));
  EXPECT_TRUE(sleeper.frame.done());  // failed at its final point
  gate->count_down();  // the worker goes on and drains the queued job; the last one to leave frees the core
  EXPECT_TRUE(test::eventually([&last_ran] { return last_ran->load(std::memory_order_acquire); }));
}

TEST(Sleep, AWakeUpTheBoundedPoolRefusesAbandonsTheSleepingTask) {
  // The documented rule: a wake-up is a job; refused at capacity it is
  // discarded, and the sleeping task is abandoned (its awaiter sees cancelled).
  pool_options opts;
  opts.backpressure = backpressure::reject(1);
  thread_pool pool{1, opts};
  test::held_worker held(pool);      // the only worker, inside a job until released
  ASSERT_TRUE(pool.enqueue([] {}));  // full: the wake-up will be refused
  auto body = [](thread_pool& p) -> task<int> {
    co_await p.sleep_for(5ms);
    co_return 1;
  };
  error_code code = error_code::ok;
  try {
    (void)sync_wait(body(pool));
  } catch (const error_exception& e) {
    code = e.code();
  }
  held.release();  // only now: the worker is held until the sleep was refused
  EXPECT_EQ(code, error_code::cancelled);
  (void)pool.stop();
}

}  // namespace
}  // namespace thread_system
