// task<T>, schedule(), sleep_for(), when_all(), sync_wait(), spawn() and
// co_await on a future (include/thread_system/coro/task.hpp).
#include "thread_system/coro/task.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/sync/wait_group.hpp"

namespace thread_system {
namespace {

using namespace std::chrono_literals;
using test::scaled;

// Counts live frames of a test's tasks through a local's lifetime.
struct frame_probe {
  std::atomic<int>* live;
  // relaxed: read after stop()/sync_wait()/a join, which order it.
  explicit frame_probe(std::atomic<int>* l) : live(l) { live->fetch_add(1, std::memory_order_relaxed); }
  frame_probe(const frame_probe&) = delete;
  frame_probe& operator=(const frame_probe&) = delete;
  ~frame_probe() { live->fetch_sub(1, std::memory_order_relaxed); }
};

// The messages of the failures a pool's error handler received.
class failure_log {
 public:
  void attach(thread_pool& pool) {
    pool.set_error_handler([this](const std::exception_ptr& e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::lock_guard lock(mutex_);
        messages_.emplace_back(ex.what());
      }
    });
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

task<int> value_of(int v) { co_return v; }

task<int> on_pool(thread_pool& pool, int v) {
  co_await pool.schedule();
  co_return v;
}

task<void> throws_after_schedule(thread_pool& pool) {
  co_await pool.schedule();
  throw std::runtime_error("boom");
}

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

TEST(Sleep, ACancelledTokenEndsTheSleepEarlyWithCancelled) {
  thread_pool pool{2};
  cancellation_source src;
  std::atomic<int> outcome{0};
  auto body = [](thread_pool& p, std::atomic<int>& out) -> task<void> {
    try {
      co_await p.sleep_for(1h);
      out.store(2);
    } catch (const error_exception& e) {
      out.store(e.code() == error_code::cancelled && p.is_worker_thread() ? 1 : 3);
    }
  };
  ASSERT_TRUE(spawn(pool, src.token(), body(pool, outcome)));
  std::this_thread::sleep_for(5ms);  // usually asleep by now; either way the outcome is the same
  src.cancel();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (outcome.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(outcome.load(), 1);
  // Already cancelled: does not sleep at all.
  std::atomic<int> again{0};
  ASSERT_TRUE(spawn(pool, src.token(), body(pool, again)));
  pool.wait_idle();
  EXPECT_EQ(again.load(), 1);  // cancelled before it could suspend: throws at once, on the worker
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
    st.store(1);
    co_await p.sleep_for(1h);
    st.store(2);
  };
  ASSERT_TRUE(spawn(pool, src.token(), sleeper(pool, live, stage)));
  while (pool.get_timer_statistics().scheduled < 1) std::this_thread::sleep_for(1ms);
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  ASSERT_TRUE(pool.enqueue([&] {
    holding.store(true);
    while (!release.load()) std::this_thread::sleep_for(1ms);
  }));
  while (!holding.load()) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(pool.enqueue([] {}));  // the queue is full now
  src.cancel();
  EXPECT_EQ(stage.load(), 1);  // never resumed
  EXPECT_EQ(live.load(), 0);   // abandoned: the frame is gone
  release.store(true);
  const auto report = pool.stop();
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

TEST(Sleep, AWakeUpTheBoundedPoolRefusesAbandonsTheSleepingTask) {
  // The documented rule: a wake-up is a job; refused at capacity it is
  // discarded, and the sleeping task is abandoned (its awaiter sees cancelled).
  pool_options opts;
  opts.backpressure = backpressure::reject(1);
  thread_pool pool{1, opts};
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  ASSERT_TRUE(pool.enqueue([&] {
    holding.store(true);
    while (!release.load()) std::this_thread::sleep_for(1ms);
  }));
  while (!holding.load()) std::this_thread::sleep_for(1ms);
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
  release.store(true);  // only now: the worker is held until the sleep was refused
  EXPECT_EQ(code, error_code::cancelled);
  (void)pool.stop();
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
