// Costs of the control primitives. Workloads:
//   * is_cancelled() on a live token (one acquire load), single thread;
//   * register_callback + unregister on a live token (allocation + lock);
//   * empty pool jobs, end to end (submit of the first to finish of the
//     last, wall clock), with and without a token captured by value and
//     checked at the start of the job;
//   * timer dispatch lateness: 1000 one-shot timers with delays spread over
//     20 ms, lateness = start of the run - its due time, p50/p99/max in
//     nanoseconds (on the timer thread, and through a 2-worker pool);
//   * wait_group round trip: add(1), a pool job calls done(), the external
//     thread's wait() returns (idle pool: includes the worker's wake-up).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/scheduler/timer_queue.hpp"
#include "thread_system/sync/cancellation.hpp"
#include "thread_system/sync/wait_group.hpp"
#include "workloads.hpp"

namespace ts = thread_system;
namespace tb = thread_system::bench;

namespace {

void wait_for_count(const std::atomic<std::uint64_t>& counter, std::uint64_t target) {
  while (counter.load(std::memory_order_acquire) < target) std::this_thread::yield();  // pairs with the jobs' release
}

void BM_TokenIsCancelled(benchmark::State& state) {
  ts::cancellation_source src;
  const ts::cancellation_token tok = src.token();
  for (auto _ : state) {
    benchmark::DoNotOptimize(tok.is_cancelled());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_TokenIsCancelled);

void BM_RegisterUnregister(benchmark::State& state) {
  ts::cancellation_source src;
  const ts::cancellation_token tok = src.token();
  int hits = 0;
  for (auto _ : state) {
    auto reg = tok.register_callback([&hits] { ++hits; });
    benchmark::DoNotOptimize(reg.unregister());
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_RegisterUnregister);

constexpr std::uint64_t pool_jobs = 100'000;

// Arg 0: plain job; 1: the job carries a token copy and checks it first.
void BM_PoolJobs_Token(benchmark::State& state) {
  const bool with_token = state.range(0) != 0;
  ts::thread_pool pool{2};
  ts::cancellation_source src;
  const ts::cancellation_token tok = src.token();
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> skipped{0};
  for (auto _ : state) {
    done.store(0, std::memory_order_relaxed);  // no job runs between rounds
    for (std::uint64_t i = 0; i < pool_jobs; ++i) {
      ts::result<void> r = with_token ? pool.enqueue([&done, &skipped, tok] {
        if (tok.is_cancelled()) skipped.fetch_add(1, std::memory_order_relaxed);  // never here: statistics
        done.fetch_add(1, std::memory_order_release);                             // pairs with wait_for_count()
      })
                                      : pool.enqueue([&done] {
                                          done.fetch_add(1, std::memory_order_release);  // pairs with wait_for_count()
                                        });
      if (!r) state.SkipWithError("enqueue refused");
    }
    wait_for_count(done, pool_jobs);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * pool_jobs));
  state.counters["token"] = with_token ? 1 : 0;
  state.counters["skipped"] = static_cast<double>(skipped.load(std::memory_order_relaxed));  // statistics
}
BENCHMARK(BM_PoolJobs_Token)
    ->ArgName("token")
    ->Arg(0)
    ->Arg(1)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Arg 0: jobs run on the timer thread; 1: dispatched to a 2-worker pool.
void BM_TimerLateness1K(benchmark::State& state) {
  const bool via_pool = state.range(0) != 0;
  constexpr int timers = 1000;
  ts::thread_pool pool{2};
  ts::timer_dispatch target =
      via_pool ? ts::timer_dispatch{[&pool](ts::job_function&& f) { return pool.enqueue(std::move(f)); }}
               : ts::timer_dispatch{[](ts::job_function&& f) -> ts::result<void> {
                   f();
                   return {};
                 }};
  ts::timer_queue queue{target};
  std::vector<double> all;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> delay_us(0, 20'000);
  for (auto _ : state) {
    std::vector<double> lateness(timers, 0.0);
    std::atomic<std::uint64_t> ran{0};
    for (int i = 0; i < timers; ++i) {
      auto h = queue.schedule_after(std::chrono::microseconds(delay_us(rng)), [&lateness, &ran,
                                                                               i](const ts::timer_tick& t) {
        lateness[static_cast<std::size_t>(i)] = static_cast<double>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t.scheduled_time)
                .count());
        ran.fetch_add(1, std::memory_order_release);  // pairs with wait_for_count(): publishes the sample
      });
      if (!h) state.SkipWithError("schedule refused");
    }
    wait_for_count(ran, timers);
    all.insert(all.end(), lateness.begin(), lateness.end());
  }
  state.counters["p50_ns"] = tb::percentile(all, 50);
  state.counters["p99_ns"] = tb::percentile(all, 99);
  state.counters["max_ns"] = all.empty() ? 0.0 : all.back();  // sorted by percentile()
  state.counters["via_pool"] = via_pool ? 1 : 0;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * timers);
}
BENCHMARK(BM_TimerLateness1K)
    ->ArgName("via_pool")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

void BM_WaitGroupRoundTrip(benchmark::State& state) {
  ts::thread_pool pool{1};
  ts::wait_group wg;
  for (auto _ : state) {
    (void)wg.add(1);
    if (!pool.enqueue([&wg] { (void)wg.done(); })) state.SkipWithError("enqueue refused");
    wg.wait();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_WaitGroupRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same round trip with a future, for scale.
void BM_FutureRoundTrip(benchmark::State& state) {
  ts::thread_pool pool{1};
  for (auto _ : state) {
    auto f = pool.submit([] { return 1; });
    benchmark::DoNotOptimize(f.get());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_FutureRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
