// Coroutines on the pools (coro/task.hpp) side by side with Boost.Asio's
// awaitables on asio::thread_pool, the same number of threads:
//   * coro_schedule/*: one coroutine hopping onto its pool again and again
//     (`co_await pool.schedule()` vs `co_await asio::post(ex, use_awaitable)`):
//     ns per round trip.
//   * coro_fib/*: fib(27) with a fork per internal call - task<T> +
//     when_all, the library's task_group (blocking fork-join, helping wait),
//     Asio awaitables (co_spawn of one child, the other awaited inline, a
//     join through the executor); thread-ns per fork = threads x wall / forks.
//   * coro_sleep/*: 100 000 tasks each `co_await pool.sleep_for(1 ms)` at
//     once: lateness p50/p99 (resumed - due) and resident memory per
//     suspended task, against the same number suspended in schedule() on a
//     paused pool (the frame and its queued resumption): the difference is
//     what a sleep adds (its timer).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <thread>
#include <utility>  // before Boost.Asio's awaitable.hpp (GCC 12)
#include <vector>

#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
#include <boost/asio/detail/config.hpp>  // BOOST_ASIO_HAS_CO_AWAIT: Asio 1.74 sees Clang's coroutines only as experimental
#endif
#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO) && defined(BOOST_ASIO_HAS_CO_AWAIT)
#define THREAD_SYSTEM_HAVE_ASIO_AWAITABLE 1
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif

#include "thread_system/coro/task.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

namespace {

constexpr std::size_t threads = 2;  // both libraries, every benchmark here
constexpr int fib_n = 27;
constexpr std::uint64_t hops = 100'000;

std::uint64_t fib_forks(int n) { return n < 2 ? 0 : 1 + fib_forks(n - 1) + fib_forks(n - 2); }

void report_per_hop(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(hops) * state.iterations());
  state.counters["ns_per_hop"] = benchmark::Counter(
      static_cast<double>(hops) / 1e9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void report_fib(benchmark::State& state) {
  const auto forks = static_cast<double>(fib_forks(fib_n));
  state.SetItemsProcessed(static_cast<std::int64_t>(forks) * state.iterations());
  state.counters["thread_ns_per_fork"] =
      benchmark::Counter(forks / (static_cast<double>(threads) * 1e9),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// ---- schedule round trip ------------------------------------------------------

ts::task<void> hop_loop(ts::thread_pool& pool) {
  for (std::uint64_t i = 0; i < hops; ++i) co_await pool.schedule();
}

void coro_schedule_thread_system(benchmark::State& state) {
  ts::thread_pool pool{threads};
  for (auto _ : state) ts::sync_wait(hop_loop(pool));
  report_per_hop(state);
}
BENCHMARK(coro_schedule_thread_system)
    ->Name("coro_schedule/thread_system")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---- fib ------------------------------------------------------------------------

ts::task<std::uint64_t> fib_task(int n) {
  if (n < 2) co_return static_cast<std::uint64_t>(n);
  auto [a, b] = co_await ts::when_all(fib_task(n - 1), fib_task(n - 2));
  co_return a + b;
}

ts::task<std::uint64_t> fib_root(ts::thread_pool& pool) {
  co_await pool.schedule();
  co_return co_await fib_task(fib_n);
}

void coro_fib_task(benchmark::State& state) {
  ts::thread_pool pool{threads};
  for (auto _ : state) benchmark::DoNotOptimize(ts::sync_wait(fib_root(pool)));
  report_fib(state);
}
BENCHMARK(coro_fib_task)->Name("coro_fib/thread_system_task")->UseRealTime()->Unit(benchmark::kMillisecond);

std::uint64_t fib_group(ts::thread_pool& pool, int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0;
  ts::task_group g(pool);
  g.run([&pool, &a, n] { a = fib_group(pool, n - 1); });
  const std::uint64_t b = fib_group(pool, n - 2);
  g.wait();
  return a + b;
}

void coro_fib_task_group(benchmark::State& state) {
  ts::thread_pool pool{threads};
  for (auto _ : state) {
    auto root = pool.submit([&pool] { return fib_group(pool, fib_n); });
    benchmark::DoNotOptimize(root.get());
  }
  report_fib(state);
}
BENCHMARK(coro_fib_task_group)->Name("coro_fib/thread_system_task_group")->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- 100 000 sleeping tasks -------------------------------------------------

constexpr std::size_t sleepers = 100'000;

std::int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long size = 0;
  long long resident = 0;
  statm >> size >> resident;
  return static_cast<std::int64_t>(resident) * 4096;
}

ts::task<void> sleep_once(ts::thread_pool& pool, std::int64_t* lateness_ns, std::atomic<std::size_t>& done) {
  const auto due = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  co_await pool.sleep_until(due);
  *lateness_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - due).count();
  done.fetch_add(1, std::memory_order_release);
}

ts::task<void> park_once(ts::thread_pool& pool) { co_await pool.schedule(); }

void coro_sleep(benchmark::State& state) {
  std::vector<std::int64_t> lateness(sleepers);
  double rss_sleep = 0;
  double rss_parked = 0;
  for (auto _ : state) {
    // Baseline: the same number of tasks suspended in schedule() on a paused
    // pool. They stay suspended while the sleepers are measured, so both
    // figures are memory touched for the first time (a sleeper's frame in
    // memory a parked task had freed read as no growth at all).
    ts::thread_pool parked_pool{threads};
    parked_pool.pause();
    {
      const std::int64_t before = rss_bytes();
      for (std::size_t i = 0; i < sleepers; ++i) (void)ts::spawn(parked_pool, park_once(parked_pool));
      rss_parked += static_cast<double>(rss_bytes() - before) / sleepers;
    }
    ts::thread_pool pool{threads};
    std::atomic<std::size_t> done{0};
    const std::int64_t before = rss_bytes();
    // Spawned into a paused pool, then all started at once: every task is
    // suspended in its sleep before the first is due.
    pool.pause();
    for (std::size_t i = 0; i < sleepers; ++i) (void)ts::spawn(pool, sleep_once(pool, &lateness[i], done));
    pool.resume();
    while (pool.get_timer_statistics().scheduled < sleepers && done.load(std::memory_order_acquire) == 0) {
      std::this_thread::yield();
    }
    rss_sleep += static_cast<double>(rss_bytes() - before) / sleepers;
    while (done.load(std::memory_order_acquire) < sleepers) std::this_thread::sleep_for(std::chrono::microseconds(200));
    parked_pool.resume();
    parked_pool.wait_idle();
  }
  std::sort(lateness.begin(), lateness.end());
  const auto it = static_cast<double>(state.iterations());
  state.counters["lateness_p50_us"] = static_cast<double>(lateness[sleepers / 2]) / 1e3;
  state.counters["lateness_p99_us"] = static_cast<double>(lateness[sleepers * 99 / 100]) / 1e3;
  state.counters["rss_per_sleeping_task_B"] = rss_sleep / it;
  state.counters["rss_per_parked_task_B"] = rss_parked / it;
  state.counters["sleep_adds_B"] = (rss_sleep - rss_parked) / it;
  state.SetItemsProcessed(static_cast<std::int64_t>(sleepers) * state.iterations());
}
BENCHMARK(coro_sleep)
    ->Name("coro_sleep/thread_system/tasks:100000")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    // One iteration: a second one in the same process reused the first's
    // memory and read 0 B per task (the report runs one process per repetition).
    ->Iterations(1);

#if defined(THREAD_SYSTEM_HAVE_ASIO_AWAITABLE)
namespace asio = boost::asio;

asio::awaitable<void> asio_hop_loop() {
  auto ex = co_await asio::this_coro::executor;
  for (std::uint64_t i = 0; i < hops; ++i) co_await asio::post(ex, asio::use_awaitable);
}

void coro_schedule_asio(benchmark::State& state) {
  asio::thread_pool pool{threads};
  for (auto _ : state) {
    std::promise<void> done;
    asio::co_spawn(pool.get_executor(), asio_hop_loop(), [&done](const std::exception_ptr&) { done.set_value(); });
    done.get_future().wait();
  }
  pool.join();
  report_per_hop(state);
}
BENCHMARK(coro_schedule_asio)->Name("coro_schedule/boost_asio")->UseRealTime()->Unit(benchmark::kMillisecond);

// A join for Asio 1.74 (no parallel operators there): the first child is
// co_spawned, the second awaited inline; the parent then waits for the
// first through an async operation its completion resumes (posted to the
// executor, as an Asio user would).
struct join_waiter {
  virtual void resume(std::uint64_t v) = 0;
  virtual ~join_waiter() = default;
};
template <typename Handler>
struct join_waiter_of final : join_waiter {
  explicit join_waiter_of(Handler&& h) : handler(std::move(h)) {}
  void resume(std::uint64_t v) override { std::move(handler)(v); }
  Handler handler;
};
struct join_state {
  std::atomic<join_waiter*> waiter{nullptr};
  std::uint64_t value = 0;
  static join_waiter* done_marker() {
    static struct : join_waiter {
      void resume(std::uint64_t) override {}
    } marker;
    return &marker;
  }
};

asio::awaitable<std::uint64_t> asio_fib(int n) {
  if (n < 2) co_return static_cast<std::uint64_t>(n);
  auto ex = co_await asio::this_coro::executor;
  auto state = std::make_shared<join_state>();
  asio::co_spawn(ex, asio_fib(n - 1), [state, ex](const std::exception_ptr&, std::uint64_t v) {
    state->value = v;
    // acq_rel: publishes value to the waiter; sees a parked waiter's handler.
    join_waiter* w = state->waiter.exchange(join_state::done_marker(), std::memory_order_acq_rel);
    if (w != nullptr) asio::post(ex, [w, v] { std::unique_ptr<join_waiter>(w)->resume(v); });
  });
  const std::uint64_t b = co_await asio_fib(n - 2);
  // The initiation captures plain pointers (GCC 12 destroys non-trivial
  // temporaries of a co_await expression twice in some cases); the state
  // and the executor outlive it in this frame.
  join_state* st = state.get();
  auto* exec = &ex;
  const std::uint64_t a = co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::uint64_t)>(
      [st, exec](auto handler) {
        auto* w = new join_waiter_of<decltype(handler)>(std::move(handler));
        join_waiter* expected = nullptr;
        // acq_rel: pairs with the child's exchange.
        if (!st->waiter.compare_exchange_strong(expected, w, std::memory_order_acq_rel)) {
          // The child finished first. Resumed through the executor too: a
          // handler called inside its own initiation would resume (and
          // maybe finish and free) this coroutine before the initiation
          // returns.
          const std::uint64_t v = st->value;
          asio::post(*exec, [w, v] { std::unique_ptr<join_waiter>(w)->resume(v); });
        }
      },
      asio::use_awaitable);
  co_return a + b;
}

void coro_fib_asio(benchmark::State& state) {
  asio::thread_pool pool{threads};
  for (auto _ : state) {
    std::promise<std::uint64_t> result;
    asio::co_spawn(pool.get_executor(), asio_fib(fib_n),
                   [&result](const std::exception_ptr&, std::uint64_t v) { result.set_value(v); });
    benchmark::DoNotOptimize(result.get_future().get());
  }
  pool.join();
  report_fib(state);
}
BENCHMARK(coro_fib_asio)->Name("coro_fib/boost_asio")->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
