// coro_base (include/thread_system/coro/coro_base.hpp): the coroutine
// plumbing under task<T> and the pools' awaitables, tested on its own with
// hand-made coroutines and a resume target that stores its jobs - what the
// pool tests cannot isolate: constant-stack transfers, the order in which an
// abandoned chain is destroyed, the scope a resumption runs in, refusals and
// discards seen by a coroutine that is not a task<T>, and the deadline
// arithmetic of sleep_for()/sleep_until().
#include "thread_system/coro/coro_base.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "foreign_coroutines.hpp"
#include "thread_system/sync/cancellation.hpp"
#include "thread_system/sync/this_job.hpp"

namespace ts = thread_system;
namespace td = thread_system::detail;

namespace {

// A resume target that keeps what is pushed, or refuses with `refuse`.
struct manual_target {
  std::vector<ts::job_function> jobs;
  std::optional<ts::error_code> refuse;
  bool last_was_continuation = false;

  static ts::result<void> push(void* self, std::uintptr_t /*type*/, ts::job_function&& job, bool continuation) {
    auto* t = static_cast<manual_target*>(self);
    if (t->refuse) return ts::make_error(*t->refuse, "manual_target refuses");
    t->last_was_continuation = continuation;
    t->jobs.push_back(std::move(job));
    return {};
  }
  static void report(void* self, const std::exception_ptr& e) noexcept {
    static_cast<manual_target*>(self)->reported.push_back(e);
  }
  static constexpr td::resume_ops ops{&push, &report};
  td::resume_target target() noexcept { return td::resume_target{this, &ops, 0}; }
  std::vector<std::exception_ptr> reported;
};

ts::coro_test::rethrowing_coroutine await_schedule_uncaught(td::resume_target target, int& stage) {
  stage = 1;
  co_await td::schedule_awaiter(target);  // throws `cancelled` when discarded
  stage = 2;
}

// A coroutine that is not a task<T>: starts at once, frees its frame at the end.
using eager = ts::coro_test::eager_coroutine;

struct observed {
  int stage = 0;
  std::optional<ts::error_code> error;
  const ts::cancellation_token* token_inside = nullptr;
  const td::resume_target* target_inside = nullptr;
};

eager await_schedule(td::resume_target target, observed& o) {
  o.stage = 1;
  try {
    co_await td::schedule_awaiter(target);
    o.token_inside = ts::this_job::detail::current_token;
    o.target_inside = td::t_current_target;
    o.stage = 2;
  } catch (const ts::error_exception& e) {
    o.error = e.code();
    o.stage = 3;
  }
}

TEST(CoroBase, ScheduleSuspendsAndTheResumptionContinuesTheCoroutine) {
  manual_target pool;
  observed o;
  await_schedule(pool.target(), o);
  EXPECT_EQ(o.stage, 1) << "suspended after the push";
  ASSERT_EQ(pool.jobs.size(), 1U);
  EXPECT_TRUE(pool.last_was_continuation) << "schedule() suspends right after its push";
  pool.jobs[0]();
  EXPECT_EQ(o.stage, 2);
  EXPECT_EQ(o.token_inside, nullptr) << "a foreign coroutine has no chain token";
  EXPECT_NE(o.target_inside, nullptr) << "the resumption's target is current while it runs";
  EXPECT_EQ(td::t_current_target, nullptr) << "and restored afterwards";
}

TEST(CoroBase, ARefusedPushDoesNotSuspendAndTheAwaitThrowsTheRefusal) {
  manual_target pool;
  pool.refuse = ts::error_code::queue_full;
  observed o;
  await_schedule(pool.target(), o);
  EXPECT_EQ(o.stage, 3) << "continued on the awaiting thread at once";
  ASSERT_TRUE(o.error.has_value());
  EXPECT_EQ(*o.error, ts::error_code::queue_full);
  EXPECT_TRUE(pool.jobs.empty());
}

TEST(CoroBase, ADiscardedResumptionResumesAForeignCoroutineWithCancelled) {
  manual_target pool;
  observed o;
  await_schedule(pool.target(), o);
  ASSERT_EQ(pool.jobs.size(), 1U);
  pool.jobs[0].cancel();  // what stop(cancel_pending) does with it
  EXPECT_EQ(o.stage, 3);
  ASSERT_TRUE(o.error.has_value());
  EXPECT_EQ(*o.error, ts::error_code::cancelled);
}

// The discard path is noexcept: an exception a foreign coroutine lets out
// of resume() there terminated the process. It goes to the discarding
// pool's error handler.
TEST(CoroBase, AForeignCoroutineFailingOnADiscardIsReportedToThePool) {
  manual_target pool;
  int stage = 0;
  const ts::coro_test::rethrowing_coroutine c = await_schedule_uncaught(pool.target(), stage);
  ASSERT_EQ(pool.jobs.size(), 1U);
  pool.jobs[0].cancel();
  EXPECT_EQ(stage, 1) << "the co_await threw";
  EXPECT_TRUE(c.done());
  ASSERT_EQ(pool.reported.size(), 1U);
  try {
    std::rethrow_exception(pool.reported[0]);
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::cancelled);
  }
  EXPECT_EQ(td::t_current_target, nullptr) << "the discard's scope is gone";
  EXPECT_EQ(td::t_resume_loop, nullptr) << "the loop's state is restored when resume() throws";
}

TEST(CoroBase, AResumeScopeSetsTheTokenAndTargetAndRestoresThemNested) {
  ts::cancellation_source outer_source;
  ts::cancellation_source inner_source;
  const ts::cancellation_token outer = outer_source.token();
  const ts::cancellation_token inner = inner_source.token();
  manual_target a;
  manual_target b;
  const td::resume_target ta = a.target();
  const td::resume_target tb = b.target();
  ASSERT_EQ(ts::this_job::detail::current_token, nullptr);
  {
    td::resume_scope s1(&outer, &ta);
    EXPECT_EQ(ts::this_job::detail::current_token, &outer);
    EXPECT_EQ(td::t_current_target, &ta);
    {
      td::resume_scope s2(&inner, &tb);
      EXPECT_EQ(ts::this_job::detail::current_token, &inner);
      EXPECT_EQ(td::t_current_target, &tb);
      inner_source.cancel();
      EXPECT_TRUE(ts::this_job::is_cancelled());
    }
    EXPECT_EQ(ts::this_job::detail::current_token, &outer);
    EXPECT_EQ(td::t_current_target, &ta);
    EXPECT_FALSE(ts::this_job::is_cancelled());
  }
  EXPECT_EQ(ts::this_job::detail::current_token, nullptr);
  EXPECT_EQ(td::t_current_target, nullptr);
}

// A frame parameter that records its destruction (moved-from copies do not).
struct destruction_probe {
  std::string* log;
  char name;
  destruction_probe(std::string* l, char n) noexcept : log(l), name(n) {}
  destruction_probe(destruction_probe&& o) noexcept : log(std::exchange(o.log, nullptr)), name(o.name) {}
  destruction_probe(const destruction_probe&) = delete;
  destruction_probe& operator=(const destruction_probe&) = delete;
  destruction_probe& operator=(destruction_probe&&) = delete;
  ~destruction_probe() {
    if (log != nullptr) log->push_back(name);
  }
};

// A coroutine whose promise is a promise_base, created suspended and never
// run: its frame holds only its parameter.
struct linked {
  struct promise_type : td::promise_base {
    linked get_return_object() noexcept { return linked{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

linked frame_with(destruction_probe probe) {
  (void)probe;
  co_return;
}

struct recording_waiter final : td::coro_waiter {
  int completions = 0;
  int abandons = 0;
  std::coroutine_handle<> on_complete() noexcept override {
    ++completions;
    return std::noop_coroutine();
  }
  void on_abandon() noexcept override { ++abandons; }
};

// abandon(): the frames from the innermost up to, not including, the
// outermost task are destroyed innermost first, each owner's handle is
// cleared, and the outermost task's waiter hears of it once.
TEST(CoroBase, AbandonDestroysTheChainInnermostFirstAndTellsTheWaiterOnce) {
  std::string log;
  linked a = frame_with(destruction_probe{&log, 'a'});  // outermost: awaited by `waiter`
  linked b = frame_with(destruction_probe{&log, 'b'});
  linked c = frame_with(destruction_probe{&log, 'c'});  // innermost, suspended in a resumption
  ASSERT_TRUE(log.empty());
  std::coroutine_handle<> a_owns_b = b.handle;  // the task<T> objects' handles
  std::coroutine_handle<> b_owns_c = c.handle;
  recording_waiter waiter;
  a.handle.promise().waiter = &waiter;
  b.handle.promise().parent = &a.handle.promise();
  b.handle.promise().owner = &a_owns_b;
  c.handle.promise().parent = &b.handle.promise();
  c.handle.promise().owner = &b_owns_c;

  td::abandon(&c.handle.promise());
  EXPECT_EQ(log, "cb");
  EXPECT_FALSE(b_owns_c);
  EXPECT_FALSE(a_owns_b);
  EXPECT_EQ(waiter.abandons, 1);
  EXPECT_EQ(waiter.completions, 0);
  a.handle.destroy();  // the outermost frame belongs to the waiter
  EXPECT_EQ(log, "cba");
}

// A deep chain of final-suspend transfers runs in constant stack through
// transfer()/resume_loop() (a trampoline with GCC, symmetric transfer with
// Clang); with one stack frame per link, 200 000 links would overflow an
// 8 MiB stack.
struct chain_link {
  struct promise_type {
    std::coroutine_handle<> next;
    int* ran = nullptr;
    chain_link get_return_object() noexcept {
      return chain_link{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct to_next {
      static bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        const std::coroutine_handle<> following = h.promise().next;
        return td::transfer(h, following ? following : std::noop_coroutine());
      }
      static void await_resume() noexcept {}
    };
    to_next final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

chain_link counted(int* ran) {
  ++*ran;
  co_return;
}

TEST(CoroBase, AChainOfTransfersRunsInConstantStack) {
  constexpr int links = 200000;
  int ran = 0;
  std::vector<std::coroutine_handle<chain_link::promise_type>> chain;
  chain.reserve(links);
  for (int i = 0; i < links; ++i) chain.push_back(counted(&ran).handle);
  for (int i = 0; i + 1 < links; ++i)
    chain[static_cast<std::size_t>(i)].promise().next = chain[static_cast<std::size_t>(i) + 1];
  td::resume_loop(chain.front());
  EXPECT_EQ(ran, links);
  for (auto h : chain) {
    EXPECT_TRUE(h.done());
    h.destroy();
  }
}

// sleep_for()/sleep_until() deadlines: never early (rounded up), a negative
// or NaN duration is now, a duration beyond ~100 years saturates.
TEST(CoroBase, DeadlinesRoundUpAndSaturate) {
  using clock = std::chrono::steady_clock;
  const auto before = clock::now();
  const auto half_ns = td::due_after(std::chrono::duration<double, std::nano>(0.5));
  EXPECT_GT(half_ns, before) << "a positive fraction of a tick is at least one tick";
  // Each deadline is computed before the clock::now() it is compared with.
  const auto negative = td::due_after(std::chrono::seconds(-5));
  EXPECT_LE(negative, clock::now());
  const auto nan = td::due_after(std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_LE(nan, clock::now());
  const auto far = td::due_after(std::chrono::duration<double>(std::numeric_limits<double>::infinity()));
  EXPECT_GT(far, clock::now() + std::chrono::hours(24 * 365 * 99));
  EXPECT_GT(td::due_after(std::chrono::hours::max()), clock::now() + std::chrono::hours(24 * 365 * 99));
  const auto past = td::due_at(clock::time_point::min());
  EXPECT_LE(past, clock::now()) << "a deadline in the past is now";
  const auto at = clock::now() + std::chrono::milliseconds(50);
  EXPECT_GE(td::due_at(at), at);
}

// sleep_until() with a far time point on a coarse duration saturates like
// sleep_for(): comparing it with now() in nanoseconds overflowed, and the
// task woke at once (hours::max(), or seconds 400 years ahead).
TEST(CoroBase, FarDeadlinesOnCoarseDurationsSaturate) {
  using clock = std::chrono::steady_clock;
  const auto century = clock::now() + std::chrono::hours(24 * 365 * 99);
  EXPECT_GT(td::due_at(std::chrono::time_point<clock, std::chrono::hours>::max()), century);
  const auto in_seconds = std::chrono::time_point_cast<std::chrono::seconds>(clock::now());
  EXPECT_GT(td::due_at(in_seconds + std::chrono::hours(24 * 365 * 400)), century);
  // Each deadline is computed before the clock::now() it is compared with.
  const auto long_past = td::due_at(std::chrono::time_point<clock, std::chrono::hours>::min());
  EXPECT_LE(long_past, clock::now());
  const auto nan = td::due_at(std::chrono::time_point<clock, std::chrono::duration<double>>(
      std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_LE(nan, clock::now());
  // Finer than the clock: rounded up, never early.
  const auto fine = std::chrono::time_point<clock, std::chrono::duration<std::int64_t, std::pico>>(clock::now()) +
                    std::chrono::duration<std::int64_t, std::pico>(1500);
  EXPECT_GE(td::due_at(fine), std::chrono::ceil<clock::duration>(fine));
}

}  // namespace
