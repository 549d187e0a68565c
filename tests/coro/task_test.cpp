// task<T>, schedule(), sync_wait(), co_await on a future, a task's token,
// stop() with suspended tasks and the typed pool's schedule()/sleep_for()
// (include/thread_system/coro/task.hpp). when_all, spawn and sleep_for have
// their own files.
#include "thread_system/coro/task.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "coro_test_support.hpp"
#include "foreign_coroutines.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/sync/wait_group.hpp"

namespace thread_system {
namespace {

using namespace std::chrono_literals;
using namespace coro_test;
using test::scaled;

TEST(Task, SyncWaitReturnsTheValueAndRethrows) {
  EXPECT_EQ(sync_wait(value_of(7)), 7);
  thread_pool pool{2};
  EXPECT_EQ(sync_wait(on_pool(pool, 9)), 9);
  EXPECT_THROW(sync_wait(throws_after_schedule(pool)), std::runtime_error);
}

TEST(Task, VoidAndReferenceResults) {
  int target = 1;
  auto ref = [](int& x) -> task<int&> { co_return x; };
  int& r = sync_wait(ref(target));
  EXPECT_EQ(&r, &target);
  bool ran = false;
  auto v = [](bool& flag) -> task<void> {
    flag = true;
    co_return;
  };
  sync_wait(v(ran));
  EXPECT_TRUE(ran);
}

TEST(Task, IsLazyAndDestroyingAnUnstartedTaskFreesItsFrame) {
  auto probe = std::make_shared<int>(0);
  bool ran = false;
  {
    auto t = [](std::shared_ptr<int> p, bool& flag) -> task<void> {
      flag = true;
      (void)p;
      co_return;
    }(probe, ran);
    EXPECT_FALSE(ran);
    EXPECT_EQ(probe.use_count(), 2);  // the frame holds a copy
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(probe.use_count(), 1);
}

TEST(Task, EmptyTasksAreRefusedWithInvalidArgument) {
  task<int> empty;
  try {
    (void)sync_wait(std::move(empty));
    FAIL() << "no error";
  } catch (const error_exception& e) {
    EXPECT_EQ(e.code(), error_code::invalid_argument);
  }
  thread_pool pool{1};
  auto r = spawn(pool, task<void>{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::invalid_argument);
}

// A task is awaitable once: awaited again after it finished it is refused
// like an empty one (it used to resume the finished coroutine: a crash).
TEST(Task, AFinishedTaskIsRefusedLikeAnEmptyOne) {
  auto await_it = [](task<int>& inner) -> task<int> { co_return co_await std::move(inner); };
  auto expect_refused = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const error_exception& e) {
      EXPECT_EQ(e.code(), error_code::invalid_argument);
    }
  };
  task<int> t = value_of(7);
  EXPECT_EQ(sync_wait(await_it(t)), 7);
  ASSERT_TRUE(t.valid());
  EXPECT_TRUE(t.is_ready());
  EXPECT_FALSE(t.startable());
  expect_refused([&] { (void)sync_wait(await_it(t)); });
  expect_refused([&] { (void)when_all(std::move(t)); });
  expect_refused([&] { (void)sync_wait(std::move(t)); });

  auto await_void = [](task<void>& inner) -> task<void> { co_await std::move(inner); };
  task<void> v = []() -> task<void> { co_return; }();
  sync_wait(await_void(v));
  thread_pool pool{1};
  auto r = spawn(pool, std::move(v));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::invalid_argument);
}

// A task in flight (started, suspended, not finished) is refused as well:
// when_all's second child awaits the task the first child started, which
// waits for its hop on a paused pool. It used to be accepted: the second
// awaiter resumed the frame the pool's hop then resumed again (a crash).
TEST(Task, ATaskInFlightIsRefusedLikeAFinishedOne) {
  thread_pool pool{1};
  pool.pause();  // x's hop stays queued until resume(): x is in flight meanwhile
  task<int> x = [](thread_pool& p) -> task<int> {
    co_await p.schedule();
    co_return 5;
  }(pool);
  auto await_it = [](task<int>& inner) -> task<int> { co_return co_await std::move(inner); };
  auto both = [](task<int> a, task<int> b) -> task<int> {
    auto [u, v] = co_await when_all(std::move(a), std::move(b));
    co_return u + v;
  };
  std::thread resumer([&pool] {
    std::this_thread::sleep_for(20ms);
    pool.resume();
  });
  try {
    (void)sync_wait(both(await_it(x), await_it(x)));
    ADD_FAILURE() << "no error";
  } catch (const error_exception& e) {
    EXPECT_EQ(e.code(), error_code::invalid_argument);
  }
  resumer.join();
  EXPECT_TRUE(x.is_ready());  // run once, by the first await
  EXPECT_FALSE(x.startable());
}

// A hop that the pool's caller_runs backpressure runs on the hopping thread
// goes on there at the same depth: each such hop used to resume the
// coroutine inside the previous one's await_suspend(), one frame deeper,
// until the stack overflowed.
TEST(Task, HopsThatCallerRunsRunsInlineDoNotGrowTheStack) {
  pool_options o = test::pool_opts("caller-runs-hops");
  o.backpressure = backpressure::caller_runs(1);
  thread_pool pool{1, o};
  test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));  // the bound is full: every hop runs on the caller
  const std::size_t hops = scaled(200'000);
  auto hop_many = [](thread_pool& p, std::size_t n) -> task<std::size_t> {
    std::size_t here = 0;
    const auto caller = std::this_thread::get_id();
    for (std::size_t i = 0; i < n; ++i) {
      co_await p.schedule();
      if (std::this_thread::get_id() == caller) ++here;
    }
    co_return here;
  };
  EXPECT_EQ(sync_wait(hop_many(pool, hops)), hops);
  EXPECT_EQ(pool.get_statistics().caller_ran, hops);
  held.release();
  pool.wait_idle();
}

TEST(Task, ScheduleResumesOnAWorkerOfThePool) {
  thread_pool pool{2};
  auto where = [](thread_pool& p) -> task<bool> {
    const bool before = p.is_worker_thread();
    co_await p.schedule();
    co_return !before && p.is_worker_thread();
  };
  EXPECT_TRUE(sync_wait(where(pool)));
}

TEST(Task, ScheduleHopsBetweenPools) {
  thread_pool a{1};
  thread_pool b{1};
  auto hop = [](thread_pool& x, thread_pool& y) -> task<int> {
    co_await x.schedule();
    const bool on_x = x.is_worker_thread() && !y.is_worker_thread();
    co_await y.schedule();
    const bool on_y = y.is_worker_thread() && !x.is_worker_thread();
    co_return (on_x ? 1 : 0) + (on_y ? 2 : 0);
  };
  EXPECT_EQ(sync_wait(hop(a, b)), 3);
}

TEST(Task, ScheduleOnAStoppedPoolThrowsPoolStoppedAndNeverHangs) {
  thread_pool pool{1};
  (void)pool.stop();
  auto t = [](thread_pool& p) -> task<error_code> {
    try {
      co_await p.schedule();
    } catch (const error_exception& e) {
      co_return e.code();
    }
    co_return error_code::ok;
  };
  EXPECT_EQ(sync_wait(t(pool)), error_code::pool_stopped);
}

TEST(Task, EachResumptionIsAJobOfThePool) {
  thread_pool pool{2};
  constexpr int hops = 100;
  auto t = [](thread_pool& p) -> task<void> {
    for (int i = 0; i < hops; ++i) co_await p.schedule();
  };
  sync_wait(t(pool));
  pool.wait_idle();
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.accepted, static_cast<std::uint64_t>(hops));
  EXPECT_EQ(s.executed, static_cast<std::uint64_t>(hops));
  EXPECT_EQ(s.cancelled, 0U);
}

// A coroutine hopping onto its own pool from one of its workers is a
// continuation: it goes on on that worker. The other worker is neither woken
// for it nor kept awake polling it, so it takes none of the hops. (An idle
// worker that counted the hop in the LIFO slot as work never parked and
// stole a few percent of the hops, moving the coroutine between cores and
// making each hop several times slower.) Every 1024th hop the coroutine
// also submits an ordinary job, which wakes the other worker: it runs that
// job (a steal) and must park again rather than go after the hops.
TEST(Task, HopsOntoItsOwnPoolStayOnOneWorker) {
  thread_pool pool{2};
  constexpr std::uint64_t wake_every = 1024;
  const std::uint64_t hops = scaled(100'000);
  auto t = [](thread_pool& p, std::uint64_t n) -> task<void> {
    for (std::uint64_t i = 0; i < n; ++i) {
      if (i % wake_every == 0) {
        EXPECT_TRUE(p.enqueue([] {}));
      }
      co_await p.schedule();
    }
  };
  sync_wait(t(pool, hops));
  pool.wait_idle();
  const auto s = pool.get_statistics();
  const std::uint64_t wake_jobs = (hops + wake_every - 1) / wake_every;
  EXPECT_EQ(s.executed, hops + wake_jobs);
  // Steals: per ordinary job that job and at most the hop it displaced
  // onto the deque (an ordinary job there), and a few hops for the first
  // look of a worker that came out of the injector's first wake-up.
  EXPECT_LE(s.steals, 2 * wake_jobs + 8);
}

// A worker whose own LIFO slot holds a continuation when the job that
// pushed it returns into a paused pool must run it after resume(). The
// worker is then idle with work of its own; resume()'s wake-up can come
// while it still spins, before it parks, so the spin must count its own
// continuation as work. (It did not: the worker parked with the coroutine in
// its slot and the sync_wait never returned.) The test resumes the pool once
// the worker has gone idle, which is when the window is open.
TEST(Task, AContinuationPushedIntoAPausedPoolRunsAfterResume) {
  thread_pool pool{1};
  std::atomic<bool> hopping{false};
  std::atomic<int> result{0};
  auto t = [](thread_pool& p, std::atomic<bool>& flag) -> task<int> {
    co_await p.schedule();  // on the worker
    p.pause();
    flag.store(true, std::memory_order_release);  // pairs with the test thread's acquire load
    co_await p.schedule();                        // a continuation in the worker's slot, the pool paused
    co_return 7;
  };
  std::thread runner([&] { result.store(sync_wait(t(pool, hopping)), std::memory_order_release); });
  const auto give_up = std::chrono::steady_clock::now() + 30s;  // a watchdog only
  // acquire: pairs with the coroutine's release store.
  while (!hopping.load(std::memory_order_acquire)) std::this_thread::yield();
  // Idle: the job that pushed the continuation has returned, and the worker
  // found nothing it may run (busy_since_ns is 0 from then until it has
  // work again).
  while (pool.get_workers().front()->get_statistics().busy_since_ns != 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  pool.resume();
  // acquire: pairs with the runner's release store.
  while (result.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  const bool finished = result.load(std::memory_order_acquire) != 0;
  if (!finished) (void)pool.stop();  // closing the queue wakes the worker: the runner can be joined
  runner.join();
  EXPECT_TRUE(finished);
  EXPECT_EQ(result.load(std::memory_order_acquire), 7);
}

// Suspends, handing its handle to the test, which resumes it by hand.
struct handed_out {
  std::atomic<void*>* out;
  [[nodiscard]] static bool await_ready() noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const noexcept {
    out->store(h.address(), std::memory_order_release);  // pairs with the acquire load in the test
  }
  static void await_resume() noexcept {}
};

// A continuation is not stolen while its owner makes progress, but a job
// that resumed a coroutine by hand and then blocks must not hold the
// coroutine's hop for as long as it blocks: an awake worker (here one
// helping a wait_group wait) takes it after the grace period.
TEST(Task, AContinuationHeldByABlockedWorkerIsTakenByAnAwakeOne) {
  thread_pool pool{2};
  std::atomic<void*> handle{nullptr};
  std::atomic<std::thread::id> resumed_on{};
  std::atomic<bool> pushed{false};
  std::atomic<bool> continued{false};
  wait_group finished(1);
  auto coro = [](thread_pool& p, std::atomic<void*>& h, std::atomic<std::thread::id>& where, std::atomic<bool>& done,
                 wait_group& wg) -> task<void> {
    co_await handed_out{&h};
    co_await p.schedule();                                               // on the resuming job's worker: a continuation
    where.store(std::this_thread::get_id(), std::memory_order_relaxed);  // read after the join below
    done.store(true, std::memory_order_release);                         // pairs with the blocker's acquire load
    (void)wg.done();                                                     // cannot fail: the count is 1
  };
  std::thread root([&] { sync_wait(coro(pool, handle, resumed_on, continued, finished)); });
  // acquire: pairs with handed_out's release store.
  while (handle.load(std::memory_order_acquire) == nullptr) std::this_thread::yield();
  std::thread::id blocker_id{};
  bool blocker_timed_out = false;
  ASSERT_TRUE(pool.enqueue([&] {
    blocker_id = std::this_thread::get_id();
    std::coroutine_handle<>::from_address(handle.load(std::memory_order_relaxed)).resume();
    pushed.store(true, std::memory_order_release);  // pairs with the test thread's acquire load
    // Blocks until another worker has run the hop (a watchdog, not a timing
    // assumption: it only ends a test that already failed).
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!continued.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() > give_up) {
        blocker_timed_out = true;
        return;
      }
      std::this_thread::yield();
    }
  }));
  while (!pushed.load(std::memory_order_acquire)) std::this_thread::yield();
  // The other worker, awake in a helping wait for the coroutine's end.
  ASSERT_TRUE(pool.enqueue([&] { finished.wait(); }));
  root.join();
  pool.wait_idle();
  EXPECT_FALSE(blocker_timed_out);
  EXPECT_NE(resumed_on.load(std::memory_order_relaxed), blocker_id);
}

task<std::uint64_t> chain(std::uint64_t depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await chain(depth - 1);
}

TEST(Task, AMillionNestedAwaitsUseConstantStack) {
  // Symmetric transfer: each level starts the next and the completions
  // return up the chain without nesting calls. Run on a worker whose stack
  // is small, so a chain that recursed would overflow it.
  pool_options opts;
  opts.worker_stack_size = 256 * 1024;
  thread_pool pool{1, opts};
  const std::uint64_t depth = 1'000'000;
  auto run = [](thread_pool& p, std::uint64_t d) -> task<std::uint64_t> {
    co_await p.schedule();
    co_return co_await chain(d);
  };
  EXPECT_EQ(sync_wait(run(pool, depth)), depth);
}

rethrowing_coroutine await_marks(std::size_t n, depth_span& depths) {
  for (std::size_t i = 0; i < n; ++i) depths.note(co_await marked());
}

// A coroutine of another type awaiting, in a loop, tasks that finish without
// suspending: each task ran inside the co_await and the loop goes on at the
// depth it had. With symmetric transfer back into the awaiter, every
// iteration nested one resume() deeper wherever the compiler did not make it
// a tail call (GCC below -O2, or under a sanitizer) until the stack
// overflowed.
TEST(Task, AForeignCoroutineAwaitingTasksThatFinishAtOnceKeepsItsDepth) {
  depth_span depths;
  const rethrowing_coroutine c = await_marks(200'000, depths);
  ASSERT_TRUE(c.done());
  EXPECT_LT(depths.width(), 64U * 1024U) << "each await went deeper";
}

TEST(Task, AwaitingAFutureResumesWithItsValueOrException) {
  thread_pool pool{2};
  auto t = [](thread_pool& p) -> task<int> {
    int a = co_await p.submit([] {
      std::this_thread::sleep_for(5ms);
      return 20;
    });
    int b = co_await p.submit([] { return 22; });
    try {
      co_await p.submit([]() -> int { throw std::runtime_error("x"); });
    } catch (const std::runtime_error&) {
      co_return a + b;
    }
    co_return -1;
  };
  EXPECT_EQ(sync_wait(t(pool)), 42);
}

// co_await of a future<T&> gives the reference the job returned.
TEST(Task, AwaitingAFutureOfAReferenceGivesThatReference) {
  thread_pool pool{1};
  int target = 1;
  auto t = [](thread_pool& p, int& x) -> task<int*> {
    int& r = co_await p.submit([&x]() -> int& { return x; });
    co_return &r;
  };
  EXPECT_EQ(sync_wait(t(pool, target)), &target);
}

TEST(Cancellation, ATaskSeesItsTokenThroughThisJobAndCancellationPoint) {
  thread_pool pool{1};
  cancellation_source src;
  std::atomic<int> outcome{0};
  auto body = [](thread_pool& p, cancellation_source& s, std::atomic<int>& out) -> task<void> {
    co_await p.schedule();
    const bool before = this_job::is_cancelled();
    co_await cancellation_point();  // not cancelled: continues
    s.cancel();
    const bool after = this_job::is_cancelled();
    try {
      co_await cancellation_point();
    } catch (const error_exception& e) {
      if (!before && after && e.code() == error_code::cancelled) out.store(1);
      co_return;
    }
    out.store(2);
  };
  ASSERT_TRUE(spawn(pool, src.token(), body(pool, src, outcome)));
  pool.wait_idle();
  EXPECT_EQ(outcome.load(), 1);
}

TEST(Stop, CancelPendingAbandonsSuspendedTasksAndTheirAwaitersSeeCancelled) {
  std::atomic<int> live{0};
  std::atomic<int> resumed{0};
  std::atomic<bool> gate{true};  // the nested chain below waits here before its last hop
  auto inner = [](thread_pool& p, std::atomic<int>& l, std::atomic<int>& r, std::atomic<bool>& g) -> task<int> {
    frame_probe probe(&l);
    while (!g.load()) std::this_thread::sleep_for(1ms);
    co_await p.schedule();  // discarded: never returns
    r.fetch_add(1);
    co_return 1;
  };
  auto outer = [&](thread_pool& p) -> task<int> {
    frame_probe probe(&live);
    const int v = co_await inner(p, live, resumed, gate);
    resumed.fetch_add(1);
    co_return v;
  };
  auto root = [&](thread_pool& p) -> task<void> {
    frame_probe probe(&live);
    co_await p.schedule();
    (void)co_await outer(p);
  };
  thread_pool pool{1};
  // One spawned chain three tasks deep, suspended in its last hop: the
  // worker runs it up to the gate, the pool is paused, then the hop is
  // pushed and held.
  gate.store(false);
  ASSERT_TRUE(spawn(pool, root(pool)));
  while (live.load() < 3) std::this_thread::sleep_for(1ms);
  pool.pause();
  gate.store(true);
  // Accepted: the first resumption, root's hop, and now inner's (held).
  while (pool.get_statistics().accepted < 3) std::this_thread::sleep_for(1ms);
  // More spawned chains whose first resumption never starts.
  constexpr int spawned = 7;
  for (int i = 0; i < spawned; ++i) ASSERT_TRUE(spawn(pool, root(pool)));
  // sync_wait from another thread: its chain suspends in the paused pool.
  std::atomic<int> sync_outcome{0};
  std::thread waiter([&] {
    try {
      (void)sync_wait(outer(pool));
      sync_outcome.store(2);
    } catch (const error_exception& e) {
      sync_outcome.store(e.code() == error_code::cancelled ? 1 : 3);
    }
  });
  while (pool.get_statistics().accepted < 3 + spawned + 1) std::this_thread::sleep_for(1ms);
  const auto report = pool.stop(stop_mode::cancel_pending);
  waiter.join();
  EXPECT_EQ(sync_outcome.load(), 1);
  EXPECT_EQ(resumed.load(), 0);
  EXPECT_EQ(live.load(), 0);  // every frame destroyed
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
  EXPECT_EQ(report.cancelled, static_cast<std::uint64_t>(1 + spawned + 1));
}

// A task awaited by a coroutine of another type, abandoned (its resumption
// discarded by stop(cancel_pending)): the co_await throws cancelled, and the
// task is empty afterwards - awaiting it again is refused, never a
// resumption of the abandoned frame.
task<int> hop_then_count(thread_pool& pool, std::atomic<int>& after) {
  co_await pool.schedule();
  after.fetch_add(1, std::memory_order_relaxed);
  co_return 1;
}
task<int> await_child(thread_pool& pool, std::atomic<int>& after) {
  const int v = co_await hop_then_count(pool, after);
  after.fetch_add(1, std::memory_order_relaxed);
  co_return v + 1;
}
rethrowing_coroutine await_twice(task<int>& t, std::vector<int>& codes) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      (void)co_await std::move(t);
      codes.push_back(-1);  // accepted
    } catch (const error_exception& e) {
      codes.push_back(static_cast<int>(e.code()));
    }
  }
}

TEST(Task, AnAbandonedTaskAwaitedByAForeignCoroutineIsEmptyAfterwards) {
  for (const bool nested : {false, true}) {
    SCOPED_TRACE(nested ? "nested" : "single");
    thread_pool pool{1};
    pool.pause();  // the resumption waits in the queue
    std::atomic<int> after{0};
    task<int> t = nested ? await_child(pool, after) : hop_then_count(pool, after);
    std::vector<int> codes;
    const rethrowing_coroutine c = await_twice(t, codes);
    EXPECT_FALSE(c.done());
    (void)pool.stop(stop_mode::cancel_pending);  // abandons t; the coroutine goes on here
    ASSERT_TRUE(c.done());
    ASSERT_EQ(codes.size(), 2U);
    EXPECT_EQ(codes[0], static_cast<int>(error_code::cancelled));
    EXPECT_EQ(codes[1], static_cast<int>(error_code::invalid_argument));
    EXPECT_FALSE(t.valid());
    EXPECT_EQ(after.load(std::memory_order_relaxed), 0);  // no code after an abandoned co_await ran
    try {
      (void)sync_wait(std::move(t));
      ADD_FAILURE() << "sync_wait of the abandoned task accepted";
    } catch (const error_exception& e) {
      EXPECT_EQ(e.code(), error_code::invalid_argument);
    }
  }
}

// A schedule() awaitable awaited again after a refusal reports that
// co_await's own outcome: the accepted retry does not throw the old refusal.
TEST(Task, AScheduleAwaitableRetriedAfterARefusalSucceeds) {
  pool_options o;
  o.backpressure = backpressure::reject(1);
  thread_pool pool{1, o};
  test::held_worker held(pool);
  ASSERT_TRUE(pool.enqueue([] {}));  // full
  auto body = [](thread_pool& p, test::held_worker& h) -> task<int> {
    auto hop = p.schedule();
    for (int attempt = 1; attempt <= 3; ++attempt) {
      try {
        co_await hop;
        co_return p.is_worker_thread() ? attempt : -attempt;
      } catch (const error_exception& e) {
        EXPECT_EQ(e.code(), error_code::queue_full);
        if (attempt == 1) {
          h.release();
          p.wait_idle();  // room again
        }
      }
    }
    co_return 0;
  };
  EXPECT_EQ(sync_wait(body(pool, held)), 2);
}

rethrowing_coroutine hop_uncaught(thread_pool& pool, std::atomic<int>& after) {
  co_await pool.schedule();  // discarded: throws `cancelled`, uncaught
  after.fetch_add(1);
}

// stop(cancel_pending) discards the held resumption on a path that cannot
// throw; the coroutine's `cancelled` escaped there and terminated the
// process. It reaches the pool's error handler.
TEST(Stop, CancelPendingReportsWhatAForeignCoroutineLetsOut) {
  failure_log failures;
  thread_pool pool{1};
  failures.attach(pool);
  pool.pause();
  std::atomic<int> after{0};
  const rethrowing_coroutine c = hop_uncaught(pool, after);
  const auto report = pool.stop(stop_mode::cancel_pending);
  EXPECT_EQ(report.cancelled, 1U);
  EXPECT_EQ(after.load(), 0);
  ASSERT_EQ(failures.messages().size(), 1U);
  EXPECT_NE(failures.messages()[0].find("discarded"), std::string::npos) << failures.messages()[0];
}

rethrowing_coroutine await_submitted(thread_pool& pool, std::atomic<int>& resumed, std::latch& gate) {
  // The job waits for `gate`, which opens once this coroutine has suspended:
  // a job finished before the co_await would resume nothing (the coroutine
  // would go on, and throw, on the test's thread).
  const int v = co_await pool.submit([&gate] {
    gate.wait();
    return 1;
  });
  resumed.fetch_add(v);
  throw std::runtime_error("failed after its future");
}

// A future completed by a plain job resumes the foreign coroutine inside
// that job's completion, a path that cannot throw: what the coroutine lets
// out reached std::terminate(). It goes to the pool whose worker ran the
// job; completed by stop(cancel_pending)'s discard, to the discarding pool.
TEST(Stop, AForeignCoroutineFailingAfterAFutureIsReportedToThePool) {
  for (const bool discarded : {false, true}) {
    failure_log failures;
    thread_pool pool{1};
    failures.attach(pool);
    if (discarded) pool.pause();
    std::atomic<int> resumed{0};
    std::latch gate{1};
    const rethrowing_coroutine c = await_submitted(pool, resumed, gate);
    gate.count_down();  // the coroutine is suspended in its co_await
    if (discarded) {
      EXPECT_EQ(pool.stop(stop_mode::cancel_pending).cancelled, 1U);
    } else {
      pool.wait_idle();
    }
    EXPECT_EQ(resumed.load(), discarded ? 0 : 1);
    ASSERT_EQ(failures.messages().size(), 1U) << "discarded: " << discarded;
    EXPECT_NE(failures.messages()[0].find(discarded ? "cancel" : "failed after its future"), std::string::npos)
        << failures.messages()[0];
  }
}

// A user event that resumes its waiter inline when set.
struct inline_event {
  std::coroutine_handle<> waiter;
  std::atomic<bool> waiting{false};
  [[nodiscard]] static bool await_ready() noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    waiter = h;
    waiting.store(true);
  }
  static void await_resume() noexcept {}
  void set() const { waiter.resume(); }
};

task<void> fails_when_set(inline_event& ev) {
  co_await ev;
  throw std::runtime_error("spawned task failed");
}

struct swallowing_coroutine {
  struct promise_type {
    swallowing_coroutine get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept {}
  };
};

swallowing_coroutine set_when_discarded(thread_pool& pool, inline_event& ev) {
  try {
    co_await pool.schedule();
  } catch (const error_exception&) {
    ev.set();  // on the discarding thread: the spawned task fails right here
  }
}

// A spawned task that fails inside its pool's discard of another
// resumption: the discard is not a resumption, so nothing would rethrow a
// failure parked for one (it was lost, and left parked on the thread).
TEST(Stop, ASpawnedTaskFailingInsideADiscardIsReported) {
  failure_log failures;
  thread_pool pool{1};
  failures.attach(pool);
  inline_event ev;
  ASSERT_TRUE(spawn(pool, fails_when_set(ev)));
  while (!ev.waiting.load()) std::this_thread::sleep_for(1ms);
  pool.pause();
  set_when_discarded(pool, ev);
  (void)pool.stop(stop_mode::cancel_pending);
  EXPECT_EQ(failures.messages(), std::vector<std::string>{"spawned task failed"});
  EXPECT_FALSE(detail::t_pending_failure) << "a failure stayed parked on the thread";
}

TEST(Stop, DrainAbandonsSleepingTasksAndRunsQueuedOnes) {
  std::atomic<int> live{0};
  std::atomic<int> finished{0};
  thread_pool pool{1};
  auto sleeper = [](thread_pool& p, std::atomic<int>& l, std::atomic<int>& f) -> task<void> {
    frame_probe probe(&l);
    co_await p.sleep_for(1h);
    f.fetch_add(1);
  };
  // Runs in its first resumption (the one spawn() queues), which drain runs.
  auto quick = [](std::atomic<int>& l, std::atomic<int>& f) -> task<void> {
    frame_probe probe(&l);
    f.fetch_add(1);
    co_return;
  };
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(spawn(pool, sleeper(pool, live, finished)));
  while (pool.get_timer_statistics().scheduled < 4) std::this_thread::sleep_for(1ms);
  pool.pause();  // the quick ones are queued, not yet run, when stop() begins
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(spawn(pool, quick(live, finished)));
  (void)pool.stop(stop_mode::drain);
  EXPECT_EQ(finished.load(), 4);  // the quick ones ran, the sleepers were abandoned
  EXPECT_EQ(live.load(), 0);
}

TEST(TypedPool, ScheduleWithATypeResumesWithThatTypesPriority) {
  typed_thread_pool_t<job_types> pool{"coro"};
  ASSERT_TRUE(pool.add_worker(std::make_unique<typed_thread_worker_t<job_types>>(
      std::vector<job_types>{job_types::RealTime, job_types::Batch, job_types::Background})));
  ASSERT_TRUE(pool.start());
  pool.pause();
  std::mutex m;
  std::vector<job_types> order;
  auto body = [](typed_thread_pool_t<job_types>& p, job_types t, std::mutex& mu,
                 std::vector<job_types>& out) -> task<void> {
    co_await p.schedule(t);
    std::lock_guard lock(mu);
    out.push_back(t);
  };
  // Started on this thread (sync_wait would block): each suspends into the paused pool.
  std::vector<std::thread> starters;
  for (job_types t : {job_types::Background, job_types::Batch, job_types::RealTime}) {
    starters.emplace_back([&, t] { sync_wait(body(pool, t, m, order)); });
    while (pool.get_statistics().accepted < starters.size()) std::this_thread::sleep_for(1ms);
  }
  pool.resume();
  for (auto& s : starters) s.join();
  ASSERT_EQ(order.size(), 3U);
  EXPECT_EQ(order[0], job_types::RealTime);
  EXPECT_EQ(order[1], job_types::Batch);
  EXPECT_EQ(order[2], job_types::Background);
}

TEST(TypedPool, SleepForWakesUpInAJobOfItsType) {
  typed_thread_pool_t<job_types> pool{"coro_sleep"};
  ASSERT_TRUE(
      pool.add_worker(std::make_unique<typed_thread_worker_t<job_types>>(std::vector<job_types>{job_types::Batch})));
  ASSERT_TRUE(pool.start());
  auto body = [](typed_thread_pool_t<job_types>& p) -> task<std::chrono::nanoseconds> {
    co_await p.schedule(job_types::Batch);
    const auto start = std::chrono::steady_clock::now();
    co_await p.sleep_for(job_types::Batch, 5ms);
    co_await p.sleep_until(job_types::Batch, std::chrono::steady_clock::now() + 1ms);
    co_return std::chrono::steady_clock::now() - start;
  };
  EXPECT_GE(sync_wait(body(pool)), 6ms);
  pool.wait_idle();
  std::uint64_t batch_jobs = 0;
  for (const auto& s : pool.get_type_statistics()) {
    if (s.type_name == "Batch") batch_jobs = s.executed;
  }
  EXPECT_EQ(batch_jobs, 3U);  // the schedule() and the two wake-ups
  // A type no worker serves: the timer is refused at once, nothing sleeps.
  auto refused = [](typed_thread_pool_t<job_types>& p) -> task<error_code> {
    try {
      co_await p.sleep_for(job_types::RealTime, 1ms);
    } catch (const error_exception& e) {
      co_return e.code();
    }
    co_return error_code::ok;
  };
  EXPECT_EQ(sync_wait(refused(pool)), error_code::no_worker);
}

}  // namespace
}  // namespace thread_system
