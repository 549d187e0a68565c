#include "thread_system/pools/thread_pool.hpp"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "../support/test_support.hpp"
#include "thread_system/compat/job.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

// ---- concise API ---------------------------------------------------------

// Functions named directly (F a function type, bound by reference): every
// entry point takes them. The library checks callables for null before
// accepting them; comparing a reference to a function with nullptr made GCC
// warn (-Wnonnull-compare), an error under the -Werror this file builds
// with, so this test also fails by not compiling.
namespace {
std::atomic<int> named_function_runs{0};
void named_function() { named_function_runs.fetch_add(1, std::memory_order_relaxed); }  // relaxed: a count
int named_answer() { return 42; }
ts::result<void> named_seed_callback() {
  named_function();
  return {};
}
}  // namespace

TEST(ThreadPool, AFunctionNamedDirectlyIsAcceptedByEveryEntryPoint) {
  named_function_runs.store(0, std::memory_order_relaxed);  // relaxed: no job runs yet
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ASSERT_TRUE(pool.enqueue(named_function));
  ASSERT_TRUE(pool.enqueue(ts::cancellation_token{}, named_function));
  std::vector<void (*)()> batch{named_function, named_function};
  ASSERT_TRUE(pool.enqueue_batch(batch));
  EXPECT_EQ(pool.submit(named_answer).get(), 42);
  EXPECT_EQ(pool.submit(ts::cancellation_token{}, named_answer).get(), 42);
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::callback_job>(named_seed_callback)));
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::callback_job>(named_function)));
  {
    ts::task_group group(pool);
    group.run(named_function);
    group.wait();
  }
  auto timer = pool.schedule_after(std::chrono::milliseconds(0), named_function);
  ASSERT_TRUE(timer);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (named_function_runs.load(std::memory_order_relaxed) < 8 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pool.wait_idle();
  EXPECT_EQ(named_function_runs.load(std::memory_order_relaxed), 8);  // relaxed: after wait_idle(), which orders it

  ts::typed_thread_pool typed{1};
  ASSERT_TRUE(typed.enqueue(ts::job_types::Batch, named_function));
  EXPECT_EQ(typed.submit(ts::job_types::Batch, named_answer).get(), 42);
  ASSERT_TRUE(typed.schedule_after(ts::job_types::Batch, std::chrono::milliseconds(0), named_function));
  while (named_function_runs.load(std::memory_order_relaxed) < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  typed.wait_idle();
  EXPECT_EQ(named_function_runs.load(std::memory_order_relaxed), 10);  // relaxed: after wait_idle()
}

TEST(ThreadPool, ConciseEnqueueAndWaitIdle) {
  ts::thread_pool pool{4, ts::test::pool_opts()};
  EXPECT_TRUE(pool.is_running());
  EXPECT_EQ(pool.worker_count(), 4U);
  EXPECT_EQ(pool.queue_kind(), ts::test::pool_queue_under_test());
  std::atomic<int> sum{0};
  // seq_cst: pairs with the checking load(s)
  for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(pool.enqueue([&sum, i] { sum.fetch_add(i, std::memory_order_seq_cst); }));
  pool.wait_idle();
  EXPECT_EQ(sum.load(std::memory_order_seq_cst), 500500);  // seq_cst: pairs with the writers' RMW/store
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.accepted, 1000U);
  EXPECT_EQ(s.executed, 1000U);
  EXPECT_EQ(s.failed, 0U);
  EXPECT_EQ(s.queued, 0U);
}

TEST(ThreadPool, DefaultWorkerCountIsHardwareConcurrency) {
  ts::thread_pool pool;
  EXPECT_EQ(pool.worker_count(), ts::thread_pool::default_worker_count());
  EXPECT_GE(pool.worker_count(), 1U);
}

#if defined(__linux__)
namespace {
// The process's read system calls so far (/proc/self/io, `syscr`), or -1.
long long read_syscalls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long long value = -1;
  while (io >> key >> value) {
    if (key == "syscr:") return value;
  }
  return -1;
}
}  // namespace

// Constructing a pool reads no file: the hardware thread count that sizes it
// (the default worker count, the spinner cap, the sharded injector's shards)
// is asked once per process. std::thread::hardware_concurrency() reads
// /sys/devices/system/cpu/online on every call with glibc, about 5 us of
// system calls per pool.
TEST(ThreadPool, ConstructingAPoolReadsNoFile) {
  { ts::thread_pool warm; }  // the one lookup of the process, if not made yet
  const long long before = read_syscalls();
  if (before < 0) GTEST_SKIP() << "/proc/self/io is not readable here";
  constexpr int pools = 20;
  for (int i = 0; i < pools; ++i) {
    ts::thread_pool defaulted;  // default_worker_count()
    ts::pool_options o = ts::test::pool_opts();
    o.queue = ts::pool_queue::sharded;
    ts::thread_pool sharded{1, o};
  }
  const long long after = read_syscalls();
  // The reads of /proc/self/io itself are a few; one lookup per pool would be 40.
  EXPECT_LT(after - before, 8) << "read() calls while constructing " << 2 * pools << " pools";
}
#endif

TEST(ThreadPool, SubmitReturnsValue) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  auto f = pool.submit([](int a, int b) { return a * b; }, 6, 7);
  EXPECT_EQ(f.get(), 42);
  auto s = pool.submit([](std::string x) { return x + "!"; }, std::string("hi"));
  EXPECT_EQ(s.get(), "hi!");
  auto v = pool.submit([] {});
  EXPECT_NO_THROW(v.get());
}

TEST(ThreadPool, SubmitMoveOnlyArgumentAndResult) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([](std::unique_ptr<int> p) { return std::make_unique<int>(*p + 1); }, std::make_unique<int>(1));
  EXPECT_EQ(*f.get(), 2);
}

TEST(ThreadPool, ExceptionReachesFutureWithItsType) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  auto f = pool.submit([]() -> int { throw std::out_of_range("index 7"); });
  try {
    (void)f.get();
    FAIL() << "expected the job's exception";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "index 7");
  }
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().failed, 1U);
}

TEST(ThreadPool, FireAndForgetExceptionGoesToHandlerAndWorkerLivesOn) {
  std::atomic<int> handled{0};
  ts::pool_options opt = ts::test::pool_opts();
  opt.name = "failing";
  opt.on_error = [&handled](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error& ex) {
      // seq_cst: pairs with the checking load(s)
      if (std::string(ex.what()) == "boom") handled.fetch_add(1, std::memory_order_seq_cst);
    }
  };
  ts::thread_pool pool{1, opt};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.enqueue([] { throw std::runtime_error("boom"); }));
  std::atomic<int> after{0};
  // seq_cst: pairs with the checking load(s)
  ASSERT_TRUE(pool.enqueue([&after] { after.fetch_add(1, std::memory_order_seq_cst); }));
  pool.wait_idle();
  EXPECT_EQ(handled.load(std::memory_order_seq_cst), 10);  // seq_cst: pairs with the writers' RMW/store
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(after.load(std::memory_order_seq_cst), 1) << "the worker must survive throwing jobs";
  const auto s = pool.get_statistics();
  EXPECT_EQ(s.failed, 10U);
  EXPECT_EQ(s.executed, 11U);
}

// A job that returns an error fails as one that throws: counted failed, its
// error passed to the handler as error_exception with its code and message
// - a result<T> holding one, an unexpected_error (what make_error()
// returns: a lambda that returns it has no other type), an error - through
// every entry point that runs a fire-and-forget callable (enqueue, with a
// token, the typed pool, task_group::run, a pool's timer). A returned
// success or other value is discarded. (Each returned error was dropped and
// the job counted executed.)
namespace {
struct error_log {
  std::mutex m;
  std::vector<std::pair<ts::error_code, std::string>> seen;
  ts::error_handler handler() {
    return [this](const std::exception_ptr& e) {
      try {
        std::rethrow_exception(e);
      } catch (const ts::error_exception& ex) {
        const std::lock_guard lock(m);
        seen.emplace_back(ex.code(), ex.get_error().message());
      } catch (...) {
        const std::lock_guard lock(m);
        seen.emplace_back(ts::error_code::ok, "not an error_exception");
      }
    };
  }
  std::vector<std::pair<ts::error_code, std::string>> sorted() {
    const std::lock_guard lock(m);
    auto v = seen;
    std::sort(v.begin(), v.end());
    return v;
  }
};
ts::result<int> returns_int_error() { return ts::make_error(ts::error_code::timeout, "int result"); }
}  // namespace

TEST(ThreadPool, AJobThatReturnsAnErrorFailsAndIsReported) {
  using ec = ts::error_code;
  error_log log;
  ts::pool_options opt = ts::test::pool_opts();
  opt.on_error = log.handler();
  ts::thread_pool pool{1, opt};
  ASSERT_TRUE(pool.enqueue([] { return ts::make_error(ec::job_failed, "unexpected_error"); }));
  ASSERT_TRUE(pool.enqueue([]() -> ts::result<void> { return ts::make_error(ec::not_found, "result<void>"); }));
  ASSERT_TRUE(pool.enqueue(&returns_int_error));
  ASSERT_TRUE(pool.enqueue([] { return ts::error{ec::invalid_argument, "error"}; }));
  ASSERT_TRUE(pool.enqueue(ts::cancellation_token{}, [] { return ts::make_error(ec::queue_full, "with a token"); }));
  // Successes and other values: not failures.
  ASSERT_TRUE(pool.enqueue([]() -> ts::result<int> { return 7; }));
  ASSERT_TRUE(pool.enqueue([]() -> ts::result<void> { return {}; }));
  ASSERT_TRUE(pool.enqueue([] { return ts::error{}; }));  // code ok: no error
  ASSERT_TRUE(pool.enqueue([] { return 42; }));
  pool.wait_idle();
  {
    const auto s = pool.get_statistics();
    EXPECT_EQ(s.failed, 5U);
    EXPECT_EQ(s.executed, 9U);
  }
  const std::vector<std::pair<ec, std::string>> expected{{ec::queue_full, "with a token"},
                                                         {ec::invalid_argument, "error"},
                                                         {ec::job_failed, "unexpected_error"},
                                                         {ec::timeout, "int result"},
                                                         {ec::not_found, "result<void>"}};
  auto want = expected;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(log.sorted(), want);

  // A pool's timer runs its function as a job.
  std::atomic<bool> timer_ran{false};
  ASSERT_TRUE(pool.schedule_after(std::chrono::milliseconds(0), [&timer_ran] {
    timer_ran.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the waiting load
    return ts::make_error(ec::cancelled, "timer");
  }));
  while (!timer_ran.load(std::memory_order_seq_cst)) std::this_thread::yield();  // seq_cst: pairs with the store
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().failed, 6U);
  want.emplace_back(ec::cancelled, "timer");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(log.sorted(), want);

  // task_group::wait() rethrows the returned error.
  ts::task_group group(pool);
  group.run([] { return ts::make_error(ec::not_supported, "in a group"); });
  try {
    group.wait();
    ADD_FAILURE() << "wait() returned normally";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ec::not_supported);
    EXPECT_EQ(e.get_error().message(), "in a group");
  }

  // The typed pool, with and without a token.
  error_log typed_log;
  ts::typed_pool_options<ts::job_types> typed_opt;
  typed_opt.on_error = typed_log.handler();
  ts::typed_thread_pool_t<ts::job_types> typed{1, std::move(typed_opt)};
  ASSERT_TRUE(typed.enqueue(ts::job_types::Batch, [] { return ts::make_error(ec::job_failed, "typed"); }));
  ASSERT_TRUE(typed.enqueue(ts::job_types::Batch, ts::cancellation_token{},
                            [] { return ts::make_error(ec::timeout, "typed, token"); }));
  typed.wait_idle();
  EXPECT_EQ(typed.get_statistics().failed, 2U);
  EXPECT_EQ(typed_log.sorted(),
            (std::vector<std::pair<ec, std::string>>{{ec::job_failed, "typed"}, {ec::timeout, "typed, token"}}));
}

TEST(ThreadPool, HandlerCanBeReplacedAtRunTime) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<int> handled{0};
  // seq_cst: pairs with the checking load(s)
  pool.set_error_handler([&handled](std::exception_ptr) { handled.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(pool.enqueue([] { throw 5; }));  // non-standard exception type
  pool.wait_idle();
  EXPECT_EQ(handled.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
}

TEST(ThreadPool, EnqueueBatchOfCallables) {
  ts::thread_pool pool{3, ts::test::pool_opts()};
  std::atomic<int> count{0};
  // seq_cst: pairs with the checking load(s)
  std::vector<std::function<void()>> jobs(500, [&count] { count.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(pool.enqueue_batch(jobs));
  ASSERT_TRUE(pool.enqueue_batch(std::move(jobs)));
  pool.wait_idle();
  EXPECT_EQ(count.load(std::memory_order_seq_cst), 1000);  // seq_cst: pairs with the writers' RMW/store
}

TEST(ThreadPool, BatchWithNullIsRefusedWhole) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<int> count{0};
  // seq_cst: pairs with the checking load(s)
  std::vector<std::function<void()>> jobs(3, [&count] { count.fetch_add(1, std::memory_order_seq_cst); });
  jobs[1] = nullptr;
  auto r = pool.enqueue_batch(jobs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  pool.wait_idle();
  EXPECT_EQ(count.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(pool.get_statistics().accepted, 0U);
}

// A batch whose size no vector can hold is refused with resource_exhausted
// by both pools (std::length_error escaped them); a view of the caller's
// callables leaves them in place.
TEST(ThreadPool, AnImpossibleBatchIsResourceExhaustedAndViewsAreNotMovedFrom) {
  auto huge = std::views::iota(std::uint64_t{0}, std::uint64_t{1} << 62) |
              std::views::transform([](std::uint64_t) { return [] {}; });
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto r = pool.enqueue_batch(huge);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
  ts::typed_thread_pool_t<ts::job_types> typed{1};
  auto t = typed.enqueue_batch(ts::job_types::Batch, huge);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code(), ts::error_code::resource_exhausted);

  std::atomic<int> count{0};
  // seq_cst: pairs with the checking load
  std::vector<std::function<void()>> jobs(3, [&count] { count.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(pool.enqueue_batch(jobs | std::views::take(2)));
  ASSERT_TRUE(pool.enqueue_batch(std::views::all(jobs)));  // the first batch left them callable
  pool.wait_idle();
  EXPECT_EQ(count.load(std::memory_order_seq_cst), 5);  // seq_cst: pairs with the writers' RMW
}

// A refused batch passed as an rvalue is left with the caller, as a refused
// job_function is: the callables moved into the batch are moved back, so a
// retry runs them. (The batch was destroyed: its jobs never ran, were never
// counted, and a retry of the emptied container was refused as "empty job
// in batch".) Every kind of element: move-only lambdas (rebuilt in place),
// std::function (assigned back), job_functions (offered in place), a
// std::list (not contiguous); refused by a stopped pool, a full bounded
// injector and an empty job; both pools.
namespace {
template <typename Pool, typename Enqueue>
void expect_refused_batches_are_given_back(Pool& running, Pool& stopped, Enqueue enqueue_batch) {
  std::atomic<int> ran{0};
  auto job = [&ran](int v) {
    return [p = std::make_unique<int>(v), &ran] { ran.fetch_add(*p, std::memory_order_relaxed); };
  };
  {
    std::vector<decltype(job(0))> lambdas;
    for (int i = 0; i < 3; ++i) lambdas.push_back(job(1));
    auto r = enqueue_batch(stopped, std::move(lambdas));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
    ASSERT_TRUE(enqueue_batch(running, std::move(lambdas))) << "the retry finds the jobs";
  }
  {
    std::vector<std::function<void()>> functions(3, [&ran] { ran.fetch_add(10, std::memory_order_relaxed); });
    ASSERT_FALSE(enqueue_batch(stopped, std::move(functions)));
    for (const auto& f : functions) EXPECT_TRUE(f);
    ASSERT_TRUE(enqueue_batch(running, std::move(functions)));
  }
  {
    std::vector<ts::job_function> fns;
    for (int i = 0; i < 3; ++i) fns.emplace_back(job(100));
    ASSERT_FALSE(enqueue_batch(stopped, std::move(fns)));
    for (const auto& f : fns) EXPECT_TRUE(f);
    ASSERT_TRUE(enqueue_batch(running, std::move(fns)));
    for (const auto& f : fns) EXPECT_FALSE(f) << "accepted: moved into the pool";
  }
  {
    std::list<decltype(job(0))> list;
    for (int i = 0; i < 3; ++i) list.push_back(job(1000));
    ASSERT_FALSE(enqueue_batch(stopped, std::move(list)));
    ASSERT_TRUE(enqueue_batch(running, std::move(list)));
  }
  {
    // An empty job refuses the batch; the others come back.
    std::vector<std::function<void()>> functions(3, [&ran] { ran.fetch_add(10000, std::memory_order_relaxed); });
    functions[1] = nullptr;
    auto r = enqueue_batch(running, std::move(functions));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
    EXPECT_NE(r.error().message().find("element 1"), std::string::npos) << r.error().message();
    EXPECT_TRUE(functions[0]);
    EXPECT_TRUE(functions[2]);
    functions[1] = [&ran] { ran.fetch_add(10000, std::memory_order_relaxed); };
    ASSERT_TRUE(enqueue_batch(running, std::move(functions)));
  }
  running.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3 + 30 + 300 + 3000 + 30000);  // read after wait_idle()
}
}  // namespace

TEST(ThreadPool, ARefusedBatchIsGivenBack) {
  ts::thread_pool running{2, ts::test::pool_opts()};
  ts::thread_pool stopped{1, ts::test::pool_opts()};
  (void)stopped.stop();
  expect_refused_batches_are_given_back(running, stopped,
                                        [](ts::thread_pool& p, auto&& b) { return p.enqueue_batch(std::move(b)); });
  ts::typed_thread_pool_t<ts::job_types> typed_running{2};
  ts::typed_thread_pool_t<ts::job_types> typed_stopped{1};
  (void)typed_stopped.stop();
  expect_refused_batches_are_given_back(typed_running, typed_stopped, [](auto& p, auto&& b) {
    return p.enqueue_batch(ts::job_types::Batch, std::move(b));
  });

  // A full bounded injector (queue_full), and a batch above its capacity
  // (invalid_argument: it could never fit; queue_full invited a retry for ever).
  ts::pool_options o = ts::test::pool_opts();
  o.queue = ts::pool_queue::bounded;
  o.initial_queue_capacity = 4;
  ts::thread_pool bounded{"bounded", o};  // not started: nothing leaves the ring
  ASSERT_TRUE(bounded.enqueue(std::make_unique<ts::thread_worker>()));
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> three(3, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(bounded.enqueue_batch(three));  // copied: `three` stays
  auto full = bounded.enqueue_batch(std::move(three));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), ts::error_code::queue_full);
  for (const auto& f : three) EXPECT_TRUE(f);
  std::vector<std::function<void()>> five(5, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  auto never = bounded.enqueue_batch(std::move(five));
  ASSERT_FALSE(never);
  EXPECT_EQ(never.error().code(), ts::error_code::invalid_argument) << never.error().message();
  for (const auto& f : five) EXPECT_TRUE(f);
  ASSERT_TRUE(bounded.start());
  bounded.wait_idle();
  ASSERT_TRUE(bounded.enqueue_batch(std::move(three)));
  bounded.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 6);  // read after wait_idle()
}

// An empty batch queues nothing, and a stopped pool refuses it as it refuses
// every submission after stop() (it was accepted).
TEST(ThreadPool, AStoppedPoolRefusesAnEmptyBatch) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::vector<std::function<void()>> none;
  ASSERT_TRUE(pool.enqueue_batch(none));
  (void)pool.stop();
  auto r = pool.enqueue_batch(none);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
  ts::typed_thread_pool_t<ts::job_types> typed{1};
  ASSERT_TRUE(typed.enqueue_batch(ts::job_types::Batch, none));
  (void)typed.stop();
  auto t = typed.enqueue_batch(ts::job_types::Batch, none);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code(), ts::error_code::pool_stopped);
}

// A job holding the last shared_ptr to its pool drops it (the seed
// guides' pattern: a callback_job capturing the pool, then pool.reset()
// outside): the pool is destroyed on its own worker. The destructor returns;
// every job accepted still runs (drain); a timer still pending is cancelled,
// not run. (The destructor's stop() threw invalid_argument out of the
// destructor: std::terminate.)
TEST(ThreadPool, TheLastOwnerMayDropThePoolInsideOneOfItsJobs) {
  for (const bool typed : {false, true}) {
    std::atomic<int> ran{0};
    std::atomic<bool> destroyed{false};
    std::atomic<bool> timer_ran{false};
    std::latch go{1};
    auto count = [&ran] { ran.fetch_add(1, std::memory_order_release); };  // pairs with the acquire below
    auto last_owner = [&go, &destroyed](auto p) {
      return [p = std::move(p), &go, &destroyed]() mutable {
        go.wait();
        p.reset();  // the last reference: the pool's destructor runs here, on its worker
        destroyed.store(true, std::memory_order_release);  // pairs with the acquire below
      };
    };
    if (typed) {
      auto pool = std::make_shared<ts::typed_thread_pool_t<ts::job_types>>(2);
      ASSERT_TRUE(pool->enqueue(ts::job_types::Batch, last_owner(pool)));
      for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool->enqueue(ts::job_types::Batch, count));
      ASSERT_TRUE(pool->schedule_after(ts::job_types::Batch, std::chrono::hours(1),
                                       [&timer_ran] { timer_ran.store(true, std::memory_order_relaxed); }));
    } else {
      auto pool = std::make_shared<ts::thread_pool>(2);
      ASSERT_TRUE(pool->enqueue(std::make_unique<ts::callback_job>(last_owner(pool))));
      for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool->enqueue(count));
      ASSERT_TRUE(pool->schedule_after(std::chrono::hours(1),
                                       [&timer_ran] { timer_ran.store(true, std::memory_order_relaxed); }));
    }
    go.count_down();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!destroyed.load(std::memory_order_acquire) || ran.load(std::memory_order_acquire) < 100) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << (typed ? "typed" : "thread_pool");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(ran.load(std::memory_order_acquire), 100);
    EXPECT_FALSE(timer_ran.load(std::memory_order_relaxed));  // cancelled and destroyed before the destructor returned
  }
}

// A job holding the last shared_ptr to its pool, run or discarded on a
// thread that is not one of its workers, inside a call into the pool: the
// destructor ran there while that call went on using the pool - dropped by
// drop_oldest (its stop() was refused there: std::terminate), run by
// caller_runs (the pool was freed under the push: use after free), or run
// by stop() on a never-started pool (a deadlock on stop()'s own mutex).
// Now the call finishes the stop (drain) and frees the pool as it returns.
// Two producers, each running (caller_runs) a job that holds an owner of the
// pool: the second drops the last one while the first is still inside its
// run. The core is freed only after the first producer's call has left it
// (under ASan a use after free otherwise).
TEST(ThreadPool, TwoProducersWhoseCallerRunsJobsDropThePoolsLastOwners) {
  auto o = ts::test::pool_opts("owned-by-two-callers");
  o.backpressure = ts::backpressure::caller_runs(1);
  auto owner = std::make_shared<ts::thread_pool>(1, o);
  ts::thread_pool& pool = *owner;  // non-owning, as in the test below
  const std::weak_ptr<ts::thread_pool> watch = owner;
  // Shared: the worker may still be leaving gate->wait() when this test
  // returns (the pool's last worker frees it after the object is gone).
  auto started = std::make_shared<std::latch>(1);
  auto gate = std::make_shared<std::latch>(1);
  ASSERT_TRUE(pool.enqueue([started, gate] {
    started->count_down();
    gate->wait();
  }));
  started->wait();
  ASSERT_TRUE(pool.enqueue([] {}));      // queued: the pool is full, later jobs run on their producers
  std::thread releaser([&watch, gate] {  // the worker finishes once the pool object is gone
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    gate->count_down();
  });
  std::latch first_dropped{1};
  std::latch pool_gone{1};
  std::atomic<int> ran{0};
  // The first job drops its owner, then stays inside its run (its
  // destructor) until the pool object is gone.
  struct drop_then_stay {
    std::shared_ptr<ts::thread_pool> p;
    std::latch* dropped;
    std::latch* gone;
    drop_then_stay(std::shared_ptr<ts::thread_pool> x, std::latch* d, std::latch* g)
        : p(std::move(x)), dropped(d), gone(g) {}
    drop_then_stay(drop_then_stay&& other) noexcept : p(std::move(other.p)), dropped(other.dropped), gone(other.gone) {}
    drop_then_stay(const drop_then_stay&) = delete;
    drop_then_stay& operator=(const drop_then_stay&) = delete;
    drop_then_stay& operator=(drop_then_stay&&) = delete;
    ~drop_then_stay() {
      if (!p) return;
      p.reset();
      dropped->count_down();
      gone->wait();
    }
  };
  auto first_owner = owner;
  auto second_owner = owner;
  owner.reset();
  std::thread first([&, r = std::move(first_owner)]() mutable {
    EXPECT_TRUE(pool.enqueue([h = drop_then_stay(std::move(r), &first_dropped, &pool_gone), &ran] {
      ran.fetch_add(1, std::memory_order_relaxed);
    }));
  });
  std::thread second([&, r = std::move(second_owner)]() mutable {
    first_dropped.wait();
    EXPECT_TRUE(pool.enqueue([r = std::move(r), &ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
    pool_gone.count_down();  // the last owner was dropped inside that call
  });
  second.join();
  first.join();
  releaser.join();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 2);
}

TEST(ThreadPool, AJobOwningItsPoolMayBeDroppedOrRunOnTheSubmittingThread) {
  for (const auto policy : {ts::backpressure::policy::drop_oldest, ts::backpressure::policy::caller_runs}) {
    SCOPED_TRACE(ts::to_string(policy));
    auto o = ts::test::pool_opts("owned-by-a-job");
    o.backpressure = ts::backpressure{1, policy, {}};
    auto owner = std::make_shared<ts::thread_pool>(1, o);
    ts::thread_pool& pool = *owner;  // a non-owning reference, as the library's own resumptions use
    const std::weak_ptr<ts::thread_pool> watch = owner;
    std::latch started{1};
    std::latch gate{1};
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.enqueue([&started, &gate] {
      started.count_down();
      gate.wait();
    }));
    started.wait();
    // The pool's stop, at the end of the submission below, joins the held
    // worker: released once the pool is destroyed.
    std::thread releaser([&watch, &gate] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      gate.count_down();
    });
    auto counted = [&ran] { ran.fetch_add(1, std::memory_order_release); };  // pairs with the acquire below
    if (policy == ts::backpressure::policy::drop_oldest) {
      ASSERT_TRUE(pool.enqueue([o = std::move(owner), counted] { counted(); }));  // queued: the pool is full
      EXPECT_TRUE(pool.enqueue(counted));  // drops the owner; its destructor runs here
    } else {
      ASSERT_TRUE(pool.enqueue(counted));                                         // queued: the pool is full
      EXPECT_TRUE(pool.enqueue([o = std::move(owner), counted] { counted(); }));  // runs here, then is destroyed
    }
    releaser.join();
    EXPECT_TRUE(watch.expired());
    // The queued job runs (drain, on the worker, which then frees the pool);
    // and under caller_runs the owner ran, which drop_oldest dropped.
    const int expected = policy == ts::backpressure::policy::caller_runs ? 2 : 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (ran.load(std::memory_order_acquire) < expected) {  // pairs with the release in `counted`
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(ran.load(std::memory_order_acquire), expected);
  }
  {
    // A never-started seed-style pool: stop() runs its job on this thread.
    auto owner = std::make_shared<ts::thread_pool>("left-behind-owner");
    ts::thread_pool& pool = *owner;
    std::vector<std::unique_ptr<ts::thread_worker>> workers;
    workers.push_back(std::make_unique<ts::thread_worker>());
    ASSERT_TRUE(pool.enqueue_batch(std::move(workers)));
    std::atomic<bool> destroyed{false};
    ASSERT_TRUE(pool.enqueue([&owner, &destroyed] {
      owner.reset();  // the last owner, inside stop()
      destroyed.store(true, std::memory_order_relaxed);
    }));
    const ts::stop_report report = pool.stop(ts::stop_mode::drain);
    EXPECT_TRUE(destroyed.load(std::memory_order_relaxed));
    EXPECT_EQ(report.accepted, 1U);
    EXPECT_EQ(report.executed, 1U);
  }
}

using ts::test::holds_the_timer_thread;

// A timer's function holding the last shared_ptr to its pool is destroyed
// on the pool's timer thread: when the full pool refuses the run (reject),
// or after caller_runs ran it there. The pool's destructor then runs on the
// timer thread, which its stop() would have to join (it threw
// invalid_argument out of the destructor: std::terminate). Now the
// destructor returns, the queued job still runs (drain), and the timer
// thread frees the pool after the run.
TEST(ThreadPool, ATimersFunctionMayHoldTheLastReferenceToItsPool) {
  for (const bool typed : {false, true}) {
    for (const auto policy : {ts::backpressure::policy::reject, ts::backpressure::policy::caller_runs}) {
      SCOPED_TRACE(std::string(typed ? "typed, " : "thread_pool, ") + ts::to_string(policy));
      const ts::backpressure bound{1, policy, {}};
      std::atomic<int> ran{0};
      std::atomic<bool> timer_ran{false};
      std::latch started{1};
      std::latch gate{1};
      std::latch timer_thread_held{1};
      std::latch timer_thread_gate{1};
      std::atomic<bool> timer_thread_released{false};
      auto hold = [&started, &gate] {
        started.count_down();
        gate.wait();
      };
      auto count = [&ran] { ran.fetch_add(1, std::memory_order_release); };  // pairs with the acquire below
      auto owner = [&timer_ran](auto p) {
        return [p = std::move(p), &timer_ran] { timer_ran.store(true, std::memory_order_relaxed); };
      };
      // Order, whatever the speed of either thread: the pool is full; a first
      // timer holds the timer thread (in its function's destruction); the
      // second timer takes a reference to the pool and the test drops its
      // own; only then does the timer thread go on to the second timer, whose
      // function is by then the pool's last owner.
      std::weak_ptr<void> watch;
      if (typed) {
        ts::typed_pool_options<ts::job_types> o;
        o.backpressure = bound;
        auto pool = std::make_shared<ts::typed_thread_pool_t<ts::job_types>>(1, o);
        ASSERT_TRUE(pool->enqueue(ts::job_types::Batch, hold));
        started.wait();
        ASSERT_TRUE(pool->enqueue(ts::job_types::Batch, count));  // the pool is full
        ASSERT_TRUE(pool->schedule_after(
            ts::job_types::Batch, std::chrono::milliseconds(1),
            holds_the_timer_thread(&timer_thread_held, &timer_thread_gate, &timer_thread_released)));
        timer_thread_held.wait();
        ASSERT_TRUE(pool->schedule_after(ts::job_types::Batch, std::chrono::milliseconds(1), owner(pool)));
        watch = pool;
      } else {
        auto o = ts::test::pool_opts("timer-owner");
        o.backpressure = bound;
        auto pool = std::make_shared<ts::thread_pool>(1, o);
        ASSERT_TRUE(pool->enqueue(hold));
        started.wait();
        ASSERT_TRUE(pool->enqueue(count));  // the pool is full
        ASSERT_TRUE(pool->schedule_after(
            std::chrono::milliseconds(1),
            holds_the_timer_thread(&timer_thread_held, &timer_thread_gate, &timer_thread_released)));
        timer_thread_held.wait();
        ASSERT_TRUE(pool->schedule_after(std::chrono::milliseconds(1), owner(pool)));
        watch = pool;
      }
      timer_thread_gate.count_down();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!timer_thread_released.load(std::memory_order_acquire)) {  // pairs with the release in the destructor
        ASSERT_LT(std::chrono::steady_clock::now(), deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      // Until the second timer's run has been refused (or run) and its
      // function destroyed, on the timer thread:
      while (!watch.expired()) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      gate.count_down();  // the worker goes on: the timer thread's stop drains the queued job
      while (ran.load(std::memory_order_acquire) < 1) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_EQ(timer_ran.load(std::memory_order_relaxed), policy == ts::backpressure::policy::caller_runs);
    }
  }
}

// timer_handle::cancel() on one thread while another destroys the pool:
// the cancel destroys the timer's function, whose destructor (a sleep's
// discard, or any user code) may push into the pool. The pool's stop found
// that timer already cancelled and went on to free the pool under it (a
// coroutine sleep's resumption pushed into a freed pool). The timers' stop
// now waits for cancels in progress. Here the function's destructor holds
// the cancelling thread until the pool's destruction has begun, waits a
// while, and then uses the pool: the pool must still be there.
namespace {
struct uses_the_pool_when_destroyed {
  ts::thread_pool* pool;
  std::atomic<bool>* in_destructor;
  std::atomic<bool>* destroying;
  std::atomic<bool>* destroyed;
  std::atomic<bool>* pool_was_there;
  bool armed = true;
  uses_the_pool_when_destroyed(ts::thread_pool* p, std::atomic<bool>* in, std::atomic<bool>* ing, std::atomic<bool>* ed,
                               std::atomic<bool>* there)
      : pool(p), in_destructor(in), destroying(ing), destroyed(ed), pool_was_there(there) {}
  uses_the_pool_when_destroyed(uses_the_pool_when_destroyed&& o) noexcept
      : pool(o.pool),
        in_destructor(o.in_destructor),
        destroying(o.destroying),
        destroyed(o.destroyed),
        pool_was_there(o.pool_was_there),
        armed(std::exchange(o.armed, false)) {}
  uses_the_pool_when_destroyed(const uses_the_pool_when_destroyed&) = delete;
  uses_the_pool_when_destroyed& operator=(const uses_the_pool_when_destroyed&) = delete;
  uses_the_pool_when_destroyed& operator=(uses_the_pool_when_destroyed&&) = delete;
  void operator()() const {}
  ~uses_the_pool_when_destroyed() {
    if (!armed) return;
    in_destructor->store(true, std::memory_order_release);
    (void)ts::test::eventually([this] { return destroying->load(std::memory_order_acquire); });
    // Long enough for a destructor that does not wait to finish on an idle
    // machine; with the fix the pool waits however long this takes.
    const auto until = std::chrono::steady_clock::now() + 100ms;
    while (!destroyed->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    pool_was_there->store(!destroyed->load(std::memory_order_acquire), std::memory_order_release);
    if (pool_was_there->load(std::memory_order_relaxed)) (void)pool->enqueue([] {});  // accepted or pool_stopped
  }
};
}  // namespace

TEST(ThreadPool, APoolDestroyedWhileAnotherThreadCancelsItsTimerOutlivesTheCancel) {
  std::atomic<bool> in_destructor{false};
  std::atomic<bool> destroying{false};
  std::atomic<bool> destroyed{false};
  std::atomic<bool> pool_was_there{false};
  std::optional<ts::thread_pool> pool;
  pool.emplace(1, ts::test::pool_opts("cancel-vs-destroy"));
  auto timer = pool->schedule_after(
      1h, uses_the_pool_when_destroyed(&*pool, &in_destructor, &destroying, &destroyed, &pool_was_there));
  ASSERT_TRUE(timer);
  std::thread canceller([&timer] { EXPECT_TRUE(timer->cancel()); });
  ASSERT_TRUE(ts::test::eventually([&in_destructor] { return in_destructor.load(std::memory_order_acquire); }));
  destroying.store(true, std::memory_order_release);
  pool.reset();
  destroyed.store(true, std::memory_order_release);
  canceller.join();
  EXPECT_TRUE(pool_was_there.load(std::memory_order_acquire)) << "the pool was destroyed during the cancel";
}

// The same wait must not stop a cancel whose timer's function holds the
// pool's last owner: destroying the function destroys the pool on the
// cancelling thread, inside the cancel its stop() would wait for.
TEST(ThreadPool, ACancelThatDestroysThePoolDoesNotWaitForItself) {
  auto pool = std::make_shared<ts::thread_pool>(1, ts::test::pool_opts("cancel-destroys"));
  const std::weak_ptr<ts::thread_pool> watch = pool;
  auto timer = pool->schedule_after(1h, [p = pool] {});
  ASSERT_TRUE(timer);
  pool.reset();  // the timer's function is the last owner
  EXPECT_TRUE(timer->cancel());
  EXPECT_TRUE(watch.expired());
}

// ---- refusals ------------------------------------------------------------

TEST(ThreadPool, ZeroWorkersIsInvalidArgument) {
  try {
    ts::thread_pool pool{0, ts::test::pool_opts()};
    FAIL() << "zero workers must be refused";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
  }
  auto seed = std::make_shared<ts::thread_pool>("empty");
  auto r = seed->start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
}

TEST(ThreadPool, NullJobsAreInvalidArgument) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::function<void()> empty;
  auto a = pool.enqueue(empty);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code(), ts::error_code::invalid_argument);
  void (*fp)() = nullptr;
  auto b = pool.enqueue(fp);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code(), ts::error_code::invalid_argument);
  auto c = pool.enqueue(std::unique_ptr<ts::job>{});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code(), ts::error_code::invalid_argument);
  EXPECT_THROW((void)pool.submit(fp), ts::error_exception);
  auto d = pool.enqueue(std::unique_ptr<ts::thread_worker>{});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code(), ts::error_code::invalid_argument);
}

TEST(ThreadPool, EnqueueAfterStopIsPoolStopped) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  (void)pool.stop();
  EXPECT_TRUE(pool.is_stopped());
  auto r = pool.enqueue([] {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
  try {
    (void)pool.submit([] { return 1; });
    FAIL() << "submit after stop must throw";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::pool_stopped);
  }
  auto w = pool.enqueue(std::make_unique<ts::thread_worker>());
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), ts::error_code::pool_stopped);
  auto s = pool.start();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ts::error_code::pool_stopped);
  EXPECT_EQ(pool.get_statistics().accepted, 0U);
}

TEST(ThreadPool, StartTwiceIsAlreadyStarted) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto r = pool.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::already_started);
}

TEST(ThreadPool, StopAndWaitFromOwnWorkerAreRefused) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([&pool] {
    int refusals = 0;
    try {
      (void)pool.stop();
    } catch (const ts::error_exception& e) {
      refusals += e.code() == ts::error_code::invalid_argument;
    }
    try {
      pool.wait_idle();
    } catch (const ts::error_exception& e) {
      refusals += e.code() == ts::error_code::invalid_argument;
    }
    return refusals;
  });
  EXPECT_EQ(f.get(), 2);
}

// ---- stop modes ------------------------------------------------------------

TEST(ThreadPool, StopDrainRunsEverythingAccepted) {
  ts::test::lifetime_tracker t;
  ts::stop_report report;
  {
    ts::thread_pool pool{2, ts::test::pool_opts()};
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(pool.enqueue(ts::test::counting_functor(t)));
    report = pool.stop(ts::stop_mode::drain);
    EXPECT_EQ(pool.stop().executed, report.executed) << "stop() is idempotent";
  }
  EXPECT_EQ(report.accepted, 2000U);
  EXPECT_EQ(report.executed, 2000U);
  EXPECT_EQ(report.cancelled, 0U);
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(t.invoked.load(std::memory_order_seq_cst), 2000);
  EXPECT_EQ(t.alive(), 0);
}

TEST(ThreadPool, StopCancelPendingCancelsQueuedJobsAndTheirFutures) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::latch started{1};
  std::atomic<bool> release{false};
  auto blocker = pool.submit([&] {
    started.count_down();
    // seq_cst: pairs with the writers' RMW/store
    while (!release.load(std::memory_order_seq_cst)) std::this_thread::sleep_for(100us);
    return 1;
  });
  started.wait();
  std::vector<ts::future<int>> queued;
  for (int i = 0; i < 100; ++i) queued.push_back(pool.submit([i] { return i; }));
  // The blocker is released once stop() has cancelled every queued job (their
  // futures are ready), so the worker cannot run one of them first however
  // the threads are scheduled. (A stop() that did not cancel them would
  // leave this waiting: the watchdog reports it.)
  std::thread releaser([&] {
    for (auto& f : queued) f.wait();
    release.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
  });
  const auto report = pool.stop(ts::stop_mode::cancel_pending);
  releaser.join();
  EXPECT_EQ(blocker.get(), 1) << "the running job finishes";
  int cancelled = 0;
  for (auto& f : queued) {
    try {
      (void)f.get();
    } catch (const ts::error_exception& e) {
      cancelled += e.code() == ts::error_code::cancelled;
    }
  }
  EXPECT_EQ(cancelled, 100);
  EXPECT_EQ(report.accepted, 101U);
  EXPECT_EQ(report.executed, 1U);
  EXPECT_EQ(report.cancelled, 100U);
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

TEST(ThreadPool, DestructorDrains) {
  std::atomic<int> ran{0};
  {
    ts::thread_pool pool{2, ts::test::pool_opts()};
    // seq_cst: pairs with the checking load(s)
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_seq_cst); }));
  }
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 500);  // seq_cst: pairs with the writers' RMW/store
}

TEST(ThreadPool, JobsEnqueuedByJobsRunBeforeStopAndAreRefusedAfter) {
  std::atomic<int> children{0};
  std::atomic<int> refused{0};
  {
    ts::thread_pool pool{2, ts::test::pool_opts()};
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(pool.enqueue([&] {
        // seq_cst: pairs with the checking load(s)
        auto r = pool.enqueue([&children] { children.fetch_add(1, std::memory_order_seq_cst); });
        // seq_cst: pairs with the checking load(s)
        if (!r) refused.fetch_add(r.error().code() == ts::error_code::pool_stopped, std::memory_order_seq_cst);
      }));
    }
    pool.wait_idle();
    EXPECT_EQ(children.load(std::memory_order_seq_cst), 100);  // seq_cst: pairs with the writers' RMW/store
  }
  EXPECT_EQ(refused.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
}

// ---- seed-style API ----------------------------------------------------------

TEST(ThreadPool, SeedStyleWorkersCallbackJobsAndStatistics) {
  auto pool = std::make_shared<ts::thread_pool>("SeedPool");
  std::vector<std::unique_ptr<ts::thread_worker>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(std::make_unique<ts::thread_worker>());
  ASSERT_TRUE(pool->enqueue_batch(std::move(workers)));
  EXPECT_FALSE(pool->is_running());

  std::atomic<int> ran{0};
  // Accepted before start; runs once started.
  ASSERT_TRUE(pool->enqueue(std::make_unique<ts::callback_job>([&ran]() -> ts::result_void {
    ran.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    return {};
  })));
  ASSERT_TRUE(pool->start());
  std::vector<std::unique_ptr<ts::job>> jobs;
  for (int i = 0; i < 99; ++i) {
    jobs.push_back(std::make_unique<ts::callback_job>([&ran]() -> ts::result_void {
      ran.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      return {};
    }));
  }
  ASSERT_TRUE(pool->enqueue_batch(std::move(jobs)));
  pool->wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 100);  // seq_cst: pairs with the writers' RMW/store

  std::uint64_t processed = 0;
  for (ts::thread_worker* w : pool->get_workers()) {
    const auto s = w->get_statistics();
    processed += s.jobs_processed;
    if (s.jobs_processed > 0) {
      EXPECT_GT(s.busy_time.count(), 0);
      const ts::histogram_snapshot run = w->latency().run;  // recorded before the job counted as processed
      EXPECT_EQ(s.avg_processing_time_ns, run.count == 0 ? 0 : run.sum / run.count);
    }
  }
  EXPECT_EQ(processed, 100U);
  EXPECT_EQ(pool->get_workers().size(), 3U);
}

TEST(ThreadPool, SeedJobErrorIsReportedAsJobFailed) {
  std::atomic<int> job_failed{0};
  ts::pool_options opt = ts::test::pool_opts();
  opt.on_error = [&job_failed](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const ts::error_exception& ex) {
      if (ex.code() == ts::error_code::job_failed && std::string(ex.what()).find("disk full") != std::string::npos) {
        job_failed.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      }
    }
  };
  ts::thread_pool pool{1, opt};
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::callback_job>(
      []() -> ts::result_void { return ts::make_error(ts::error_code::job_failed, "disk full"); }, "writer")));
  pool.wait_idle();
  EXPECT_EQ(job_failed.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(pool.get_statistics().failed, 1U);
}

// compat/job.hpp promises that a callback_job with nothing to run is refused
// when it is enqueued, not accepted and failed later as job_failed.
TEST(ThreadPool, EmptyCallbackJobIsRefusedAtEnqueue) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::function<ts::result_void()> empty;
  auto r = pool.enqueue(std::make_unique<ts::callback_job>(empty, "empty"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  void (*null_fn)() = nullptr;
  std::vector<std::unique_ptr<ts::job>> batch;
  batch.push_back(std::make_unique<ts::callback_job>([] {}));
  batch.push_back(std::make_unique<ts::callback_job>(null_fn));
  auto b = pool.enqueue_batch(std::move(batch));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code(), ts::error_code::invalid_argument);
  pool.wait_idle();
  const auto stats = pool.get_statistics();
  EXPECT_EQ(stats.accepted, 0U);  // all or none: the good job of the batch was not accepted either
  EXPECT_EQ(stats.failed, 0U);
}

TEST(ThreadPool, NeverStartedPoolDrainsOnTheCaller) {
  auto pool = std::make_shared<ts::thread_pool>("unstarted");
  int ran = 0;  // plain int: runs on this thread
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool->enqueue([&ran] { ++ran; }));
  pool->wait_idle();  // never started: returns at once
  EXPECT_EQ(ran, 0);
  const auto report = pool->stop(ts::stop_mode::drain);
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(report.executed, 10U);
}

TEST(ThreadPool, WorkerAddedWhileRunningStartsWorking) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::thread_worker>("late-worker")));
  EXPECT_EQ(pool.worker_count(), 2U);
  std::atomic<int> ran{0};
  // seq_cst: pairs with the checking load(s)
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_seq_cst); }));
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 200);  // seq_cst: pairs with the writers' RMW/store
}

namespace {
std::uint64_t total_parks(ts::thread_pool& pool) {
  std::uint64_t parks = 0;
  for (auto* w : pool.get_workers()) parks += w->get_statistics().parks;
  return parks;
}
}  // namespace

TEST(ThreadPool, IdleWorkersSleep) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  pool.wait_idle();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (total_parks(pool) < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  const std::uint64_t parks_before = total_parks(pool);
  EXPECT_GE(parks_before, 2U) << "both workers should have parked";
  // One job wakes a worker, which parks again afterwards.
  auto f = pool.submit([] { return 3; });
  EXPECT_EQ(f.get(), 3);
  pool.wait_idle();
  // The woken worker parks again once its spin and yield phases end.
  EXPECT_TRUE(ts::test::eventually([&] { return total_parks(pool) > parks_before; }));
  std::uint64_t parks_after = 0;
  std::int64_t idle_ns = 0;
  for (auto* w : pool.get_workers()) {
    parks_after += w->get_statistics().parks;
    idle_ns += w->get_statistics().idle_time.count();
  }
  EXPECT_GT(parks_after, parks_before);
  EXPECT_GT(idle_ns, 0);
  // The job above had to wake a sleeping worker.
  EXPECT_GE(pool.get_statistics().wakeups, 1U);
  EXPECT_LE(pool.get_statistics().wakeups, pool.get_statistics().parks);
}

// An idle pool burns (almost) no CPU: its workers are parked, not spinning.
TEST(ThreadPool, IdlePoolUsesNoCpu) {
  ts::thread_pool pool{4, ts::test::pool_opts()};
  pool.wait_idle();
  std::this_thread::sleep_for(20ms);
  const double before = ts::test::process_cpu_seconds();
  std::this_thread::sleep_for(500ms);
  const double used = ts::test::process_cpu_seconds() - before;
  EXPECT_LT(used, 0.05) << "an idle 4-worker pool used " << used << " s of CPU in 0.5 s";
}

// ---- worker counts, thread creation failures, stack size ----------------------

namespace {
// Threads of this process now (Linux; 0 elsewhere).
std::size_t process_threads() {
  std::size_t n = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "Threads:", 8) == 0) n = static_cast<std::size_t>(std::strtoul(line + 8, nullptr, 10));
    }
    std::fclose(f);
  }
  return n;
}

// No thread of the pool is left: the count returns to (at most) what it was.
// Eventually: Linux wakes a joiner before the exited thread leaves the
// count, and threads of earlier tests may still be leaving.
::testing::AssertionResult threads_back_to(std::size_t before) {
  if (ts::test::eventually([before] { return process_threads() <= before; })) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << process_threads() << " threads, " << before << " before";
}

// Makes every thread start fail while alive (restored on destruction), so a
// check that happens "before any thread starts" is told apart from one that
// happens after a start was tried.
struct no_thread_starts {
  no_thread_starts() { ts::detail::testing::set_thread_start_budget(0); }
  ~no_thread_starts() { ts::detail::testing::set_thread_start_budget(-1); }
  no_thread_starts(const no_thread_starts&) = delete;
  no_thread_starts& operator=(const no_thread_starts&) = delete;
};

struct thread_start_budget {
  explicit thread_start_budget(std::int64_t n) { ts::detail::testing::set_thread_start_budget(n); }
  ~thread_start_budget() { ts::detail::testing::set_thread_start_budget(-1); }
  thread_start_budget(const thread_start_budget&) = delete;
  thread_start_budget& operator=(const thread_start_budget&) = delete;
};

ts::error_code construction_error(std::size_t workers) {
  try {
    ts::thread_pool pool{workers, ts::test::pool_opts()};
  } catch (const ts::error_exception& e) {
    return e.code();
  }
  return ts::error_code::ok;
}
}  // namespace

// One documented limit, checked before any thread starts, the same error
// from every entry point.
TEST(ThreadPool, WorkerCountsBeyondTheLimitAreRefusedBeforeAnyThreadStarts) {
  const std::size_t threads_before = process_threads();
  {
    no_thread_starts guard;
    EXPECT_EQ(construction_error(100'000), ts::error_code::invalid_argument);
    EXPECT_EQ(construction_error(ts::thread_pool::max_workers + 1), ts::error_code::invalid_argument);
    EXPECT_EQ(construction_error(std::numeric_limits<std::size_t>::max()), ts::error_code::invalid_argument);
    EXPECT_EQ(construction_error(0), ts::error_code::invalid_argument);
    try {
      ts::typed_thread_pool_t<ts::job_types> typed{100'000};
      ADD_FAILURE() << "a typed pool of 100000 workers was accepted";
    } catch (const ts::error_exception& e) {
      EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
    }
  }
  EXPECT_TRUE(threads_back_to(threads_before));

  ts::thread_pool pool{1, ts::test::pool_opts()};
  {
    no_thread_starts guard;
    auto r = pool.resize(ts::thread_pool::max_workers + 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
    std::vector<std::unique_ptr<ts::thread_worker>> many;
    for (std::size_t i = 0; i < ts::thread_pool::max_workers; ++i)
      many.push_back(std::make_unique<ts::thread_worker>());
    auto b = pool.enqueue_batch(std::move(many));  // 1 + 256 > 256
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error().code(), ts::error_code::invalid_argument);
  }
  EXPECT_EQ(pool.worker_count(), 1U);
  EXPECT_EQ(pool.get_workers().size(), 1U);
  ASSERT_TRUE(pool.resize(ts::thread_pool::max_workers));  // the limit itself is fine
  EXPECT_EQ(pool.worker_count(), ts::thread_pool::max_workers);
}

// The system refuses the third thread of four: nothing stays started, and
// the error says so.
TEST(ThreadPool, ThreadCreationFailurePartWayStartsNothing) {
  const std::size_t threads_before = process_threads();
  {
    thread_start_budget budget(2);
    EXPECT_EQ(construction_error(4), ts::error_code::resource_exhausted);
  }
  EXPECT_TRUE(threads_back_to(threads_before));

  // Seed style: start() fails, the pool stays startable and keeps its jobs.
  auto pool = std::make_shared<ts::thread_pool>("retry");
  std::vector<std::unique_ptr<ts::thread_worker>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(std::make_unique<ts::thread_worker>());
  ASSERT_TRUE(pool->enqueue_batch(std::move(workers)));
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool->enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // counted
  {
    thread_start_budget budget(1);
    auto r = pool->start();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
  }
  EXPECT_FALSE(pool->is_running());
  EXPECT_TRUE(threads_back_to(threads_before));
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);
  ASSERT_TRUE(pool->start());
  pool->wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);
  EXPECT_EQ(pool->worker_count(), 3U);
}

TEST(ThreadPool, ResizeThatCannotStartThreadsKeepsThePreviousSize) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  const std::size_t threads_before = process_threads();
  {
    thread_start_budget budget(1);
    auto r = pool.resize(5);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
  }
  EXPECT_EQ(pool.worker_count(), 2U);
  EXPECT_TRUE(threads_back_to(threads_before));
  // Shrink, then a failing grow: the workers taken back are let go again.
  ASSERT_TRUE(pool.resize(1));
  {
    thread_start_budget budget(0);
    auto r = pool.resize(4);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
  }
  EXPECT_EQ(pool.worker_count(), 1U);
  // Adding workers to a running pool is all or none too.
  {
    thread_start_budget budget(1);
    std::vector<std::unique_ptr<ts::thread_worker>> two;
    two.push_back(std::make_unique<ts::thread_worker>());
    two.push_back(std::make_unique<ts::thread_worker>());
    const std::size_t listed = pool.get_workers().size();
    auto r = pool.enqueue_batch(std::move(two));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
    EXPECT_EQ(pool.get_workers().size(), listed);
  }
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 100);  // counted
  ASSERT_TRUE(pool.resize(4));
  EXPECT_EQ(pool.worker_count(), 4U);
}

namespace {
// Each level submits the next and waits for it: a chain of helping waits,
// each nested on the waiting worker's stack.
int nested_depth(ts::thread_pool& pool, int depth) {
  if (depth == 0) return 0;
  auto child = pool.submit([&pool, depth] { return nested_depth(pool, depth - 1); });
  return child.get() + 1;
}
}  // namespace

// Helping waits nest on the worker's stack; a configured stack allows a
// nesting far deeper than the default stack (8 MiB) can hold (about 20 000
// levels crash a release build with the default).
TEST(ThreadPool, DeepHelpingRecursionWithAConfiguredStack) {
  ts::pool_options o = ts::test::pool_opts();
  o.worker_stack_size = std::size_t{1} << 30;  // 1 GiB of address space; only the pages touched are used
  ts::thread_pool pool{1, o};
  // Far beyond what the default stack allows (see pools/thread_pool.hpp);
  // a tenth under the sanitizers, whose frames are larger and slower.
  constexpr int depth = ts::test::scale_divisor > 1 ? 4'000 : 40'000;
  auto f = pool.submit([&pool] { return nested_depth(pool, depth); });
  EXPECT_EQ(f.get(), depth);
}

#if defined(__GLIBC__)
namespace {
// True where a sanitizer replaces malloc (glibc's arenas are then unused).
constexpr bool malloc_replaced =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

// The malloc arenas (heaps) glibc has made in this process, from
// malloc_info()'s report: a thread's first allocation gives it an arena of
// its own (up to 8 per core), a page or more of resident memory each.
int malloc_heaps() {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == nullptr) return -1;
  (void)malloc_info(0, f);
  (void)std::fclose(f);
  int heaps = 0;
  for (const char* p = text; (p = std::strstr(p, "<heap nr=")) != nullptr; ++p) ++heaps;
  std::free(text);  // NOLINT(cppcoreguidelines-no-malloc): open_memstream's buffer
  return heaps;
}

std::atomic<void*> g_escape{nullptr};

// Four workers each run a job that allocates (or does not), stay idle long
// enough to park (past the bounded first sleep), and the pool is destroyed.
void run_four_jobs(bool allocate) {
  ts::pool_options o;
  o.queue = ts::pool_queue::mutex;  // the lock-free injector allocates a per-thread record
  o.latency_sample_every = 0;       // a sampled job allocates its worker's histograms
  ts::thread_pool pool{4, o};
  std::latch all_running{4};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pool.enqueue([&all_running, allocate] {
      if (allocate) {
        auto p = std::make_unique<int>(1);
        g_escape.store(p.get(), std::memory_order_relaxed);  // relaxed: only keeps the allocation
      }
      all_running.arrive_and_wait();  // every worker runs one
    }));
  }
  all_running.wait();
  std::this_thread::sleep_for(5ms);
}
}  // namespace

// A worker that runs jobs allocating nothing, and never waits inside one,
// allocates nothing on its own thread, so glibc gives it no malloc arena.
// (Each worker looked its stack's bounds up when it started, which glibc
// does with an allocation: 4 KiB more resident memory per worker in the
// report's memory-per-worker rows.) In a fresh process (a death test's
// child), so no arena left by another test's threads can be reused; the
// same process checks that the count sees a worker's allocation.
TEST(ThreadPoolMemory, WorkersThatAllocateNothingGetNoMallocArena) {
  if (malloc_replaced) GTEST_SKIP() << "a sanitizer replaces malloc: glibc's arenas are not used";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const int before = malloc_heaps();
        run_four_jobs(false);
        const int quiet = malloc_heaps();
        run_four_jobs(true);
        const int allocating = malloc_heaps();
        std::fprintf(stderr, "heaps: %d before, %d after a quiet pool, %d after an allocating one\n", before, quiet,
                     allocating);
        std::_Exit(before < 1 ? 3 : quiet != before ? 1 : allocating <= quiet ? 2 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}
#endif

// Every construction path takes the options: a seed-style (named, not
// started) pool chooses its injector, backpressure and error handler too.
TEST(ThreadPool, SeedStyleConstructorTakesTheOptions) {
  ts::pool_options opt;
  opt.name = "ignored";
  opt.queue = ts::pool_queue::lockfree;
  opt.backpressure = ts::backpressure::reject(2);
  std::atomic<int> handled{0};
  opt.on_error = [&handled](std::exception_ptr) { handled.fetch_add(1, std::memory_order_relaxed); };  // a count
  auto pool = std::make_shared<ts::thread_pool>("named", opt);
  EXPECT_EQ(pool->get_name(), "named");
  EXPECT_EQ(pool->queue_kind(), ts::pool_queue::lockfree);
  EXPECT_FALSE(pool->is_running());
  std::atomic<int> ran{0};
  auto job = [&ran] { ran.fetch_add(1, std::memory_order_relaxed); };  // relaxed: read after wait_idle()
  ASSERT_TRUE(pool->enqueue(job));
  ASSERT_TRUE(pool->enqueue(job));
  auto refused = pool->enqueue(job);  // the bound applies before start() too
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::queue_full);
  ASSERT_TRUE(pool->enqueue_batch([] {
    std::vector<std::unique_ptr<ts::thread_worker>> w;
    w.push_back(std::make_unique<ts::thread_worker>());
    return w;
  }()));
  ASSERT_TRUE(pool->start());
  pool->wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 2);
  ASSERT_TRUE(pool->enqueue([] { throw std::runtime_error("to the handler"); }));  // the queue is empty again
  pool->wait_idle();
  EXPECT_EQ(handled.load(std::memory_order_relaxed), 1);
  // Invalid options are refused as by the concise constructor.
  ts::pool_options bad;
  bad.backpressure = ts::backpressure::block_for(4, std::chrono::nanoseconds(-1));
  EXPECT_THROW(ts::thread_pool("bad", bad), ts::error_exception);
}

namespace {
// The names of this process's threads that end in `suffix` (Linux: each
// thread's /proc/self/task/<tid>/comm).
std::vector<std::string> thread_names_ending_in(const std::string& suffix) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    if (!std::getline(comm, name)) continue;  // the thread ended meanwhile
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      found.push_back(name);
    }
  }
  return found;
}
}  // namespace

// The timer thread is named after the pool, cut before a character: cut at 9
// bytes, a pool named with 2-byte characters gave "\xce\xb1...\xce-timer"
// (invalid UTF-8).
TEST(ThreadPool, ItsTimerThreadsNameIsCutBeforeACharacter) {
  ts::pool_options options;
  options.name = "\xce\xb1\xce\xb2\xce\xb3\xce\xb4\xce\xb5-pool";  // "αβγδε-pool": ε at bytes 8-9
  ts::thread_pool pool{1, options};
  ASSERT_TRUE(pool.schedule_after(std::chrono::hours(1), [] {}));         // creates the timer thread
  const std::string expected = "\xce\xb1\xce\xb2\xce\xb3\xce\xb4-timer";  // "αβγδ-timer"
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<std::string> names;
  // The thread names itself as it starts: wait for it.
  while ((names = thread_names_ending_in("-timer")).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(names.size(), 1U);
  EXPECT_EQ(names[0], expected);
}
