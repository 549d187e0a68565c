// Costs of the control primitives and of the pool's control APIs. Workloads:
//   * is_cancelled() on a live token (one acquire load), single thread;
//   * register_callback + unregister on a live token (allocation + lock);
//   * cancellation overhead per job: empty jobs from one producer into a
//     2-worker pool, wall clock from the first enqueue until wait_idle()
//     returns: pool.enqueue(f) vs pool.enqueue(token, f) (the pool checks the
//     token) vs a job that captures a token and checks it itself (a copy
//     of a const token, `[tok]`, and a movable copy, `[t = tok]`) vs
//     enqueue(token, f) with a cancelled token (the jobs are skipped); and
//     submit(f) vs submit(token, f), a future per job;
//   * bounded vs unbounded enqueue: pool_options::backpressure unbounded /
//     block(1024) / reject(1024) (the producer yields and retries) /
//     caller_runs(1024), empty and ~1 us jobs, one producer, 2 workers;
//   * resize latency: grow 1 -> 8 until the 8 workers have each run a job
//     (against a new 8-worker pool until the same), shrink 8 -> 1 call time;
//   * timer dispatch lateness: 1000 one-shot timers with delays spread over
//     20 ms, lateness = start of the run - its due time, p50/p99/max in
//     nanoseconds (on the timer thread, and through a 2-worker pool);
//   * wait_group round trip: add(1), a pool job calls done(), the external
//     thread's wait() returns (idle pool: includes the worker's wake-up).
// Variants of one comparison are meant to be read as ratios of medians from
// the same run (scripts/report.py interleaves the repetitions).
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

// ---- cancellation overhead per job ------------------------------------------

constexpr std::uint64_t pool_jobs = 100'000;

enum class token_variant {
  plain,             // pool.enqueue(f)
  first_class,       // pool.enqueue(token, f): the pool checks the token before the job starts
  captured,          // pool.enqueue(f) where f captures a token copy and checks it itself
  captured_movable,  // the same, captured as [t = tok]: a non-const member, moved (not copied) with the job
  cancelled,         // pool.enqueue(token, f) with the token already cancelled: the job is skipped
};

// Empty jobs from one producer into a 2-worker pool, wall clock from the
// first enqueue until wait_idle() returns. items = jobs submitted.
void BM_CancelJobs(benchmark::State& state, token_variant v) {
  ts::thread_pool pool{2};
  ts::cancellation_source src;
  const ts::cancellation_token tok = src.token();
  ts::cancellation_source dead_src;
  dead_src.cancel();
  const ts::cancellation_token dead = dead_src.token();
  tb::job_counter ran_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& ran = ran_line.value;
  std::atomic<std::uint64_t> saw_cancel{0};
  const auto one_round = [&] {
    for (std::uint64_t i = 0; i < pool_jobs; ++i) {
      ts::result<void> r;
      switch (v) {
        case token_variant::plain:
          r = pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // counting only
          break;
        case token_variant::first_class:
          r = pool.enqueue(tok, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // counting only
          break;
        case token_variant::captured:
          r = pool.enqueue([&ran, &saw_cancel, tok] {
            if (tok.is_cancelled()) saw_cancel.fetch_add(1, std::memory_order_relaxed);  // never: statistics
            ran.fetch_add(1, std::memory_order_relaxed);                                 // counting only
          });
          break;
        case token_variant::captured_movable:
          r = pool.enqueue([&ran, &saw_cancel, t = tok] {
            if (t.is_cancelled()) saw_cancel.fetch_add(1, std::memory_order_relaxed);  // never: statistics
            ran.fetch_add(1, std::memory_order_relaxed);                               // counting only
          });
          break;
        case token_variant::cancelled:
          r = pool.enqueue(dead, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // must never run
          break;
      }
      if (!r) state.SkipWithError("enqueue refused");
    }
    pool.wait_idle();  // every accepted job finished or was cancelled
  };
  one_round();  // warm-up: threads started, rings grown, nodes cached
  const ts::pool_statistics before = pool.get_statistics();
  ran.store(0, std::memory_order_relaxed);  // no job runs between rounds
  for (auto _ : state) one_round();
  const ts::pool_statistics after = pool.get_statistics();
  const std::uint64_t expected = static_cast<std::uint64_t>(state.iterations()) * pool_jobs;
  // relaxed: wait_idle() above synchronised with every job
  const std::uint64_t got = ran.load(std::memory_order_relaxed);
  if (v == token_variant::cancelled) {
    if (got != 0 || after.cancelled - before.cancelled != expected)
      state.SkipWithError("cancelled jobs ran or were lost");
  } else if (got != expected) {
    state.SkipWithError("jobs lost");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(expected));
  state.counters["cancelled"] = static_cast<double>(after.cancelled - before.cancelled);
}
BENCHMARK_CAPTURE(BM_CancelJobs, plain, token_variant::plain)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CancelJobs, token, token_variant::first_class)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CancelJobs, captured_token, token_variant::captured)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CancelJobs, captured_movable_token, token_variant::captured_movable)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CancelJobs, cancelled_token, token_variant::cancelled)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// submit(f) vs submit(token, f): a future per job, waited for in order.
constexpr std::size_t submit_jobs = 20'000;

void BM_CancelSubmit(benchmark::State& state, bool with_token) {
  ts::thread_pool pool{2};
  ts::cancellation_source src;
  const ts::cancellation_token tok = src.token();
  std::vector<ts::future<int>> futures;
  futures.reserve(submit_jobs);
  const auto one_round = [&] {
    for (std::size_t i = 0; i < submit_jobs; ++i) {
      futures.push_back(with_token ? pool.submit(
                                         tok, [](std::size_t x) { return static_cast<int>(x & 1); }, i)
                                   : pool.submit([](std::size_t x) { return static_cast<int>(x & 1); }, i));
    }
    int sum = 0;
    for (auto& f : futures) sum += f.get();
    futures.clear();
    benchmark::DoNotOptimize(sum);
  };
  one_round();  // warm-up
  for (auto _ : state) one_round();
  const auto jobs = static_cast<double>(state.iterations()) * static_cast<double>(submit_jobs);
  state.SetItemsProcessed(static_cast<std::int64_t>(jobs));
}
BENCHMARK_CAPTURE(BM_CancelSubmit, plain, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CancelSubmit, token, true)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- bounded vs unbounded enqueue ---------------------------------------------

enum class bound_kind { unbounded, block, reject, caller_runs };
constexpr std::size_t bound_capacity = 1024;

// One producer, 2 workers, `jobs` jobs of ~job_ns each per iteration; wall
// clock until wait_idle() returns. reject: the producer retries a refused
// job after a yield (the retries are counted). items = jobs that ran.
void BM_Backpressure(benchmark::State& state, bound_kind kind) {
  const auto job_ns = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t jobs = job_ns == 0 ? 100'000 : 20'000;
  ts::pool_options opt;
  switch (kind) {
    case bound_kind::unbounded:
      opt.backpressure = ts::backpressure::unbounded();
      break;
    case bound_kind::block:
      opt.backpressure = ts::backpressure::block(bound_capacity);
      break;
    case bound_kind::reject:
      opt.backpressure = ts::backpressure::reject(bound_capacity);
      break;
    case bound_kind::caller_runs:
      opt.backpressure = ts::backpressure::caller_runs(bound_capacity);
      break;
  }
  ts::thread_pool pool{2, opt};
  tb::job_counter ran_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& ran = ran_line.value;
  std::uint64_t retries = 0;
  const auto one_round = [&] {
    for (std::uint64_t i = 0; i < jobs; ++i) {
      for (;;) {
        auto r = pool.enqueue([&ran, job_ns] {
          tb::spin_for_ns(job_ns);
          ran.fetch_add(1, std::memory_order_relaxed);  // counting only; wait_idle() synchronises
        });
        if (r) break;
        if (r.error().code() != ts::error_code::queue_full) {
          state.SkipWithError("enqueue refused");
          return;
        }
        ++retries;
        std::this_thread::yield();
      }
    }
    pool.wait_idle();
  };
  one_round();  // warm-up
  const ts::pool_statistics before = pool.get_statistics();
  ran.store(0, std::memory_order_relaxed);  // no job runs between rounds
  retries = 0;
  for (auto _ : state) one_round();
  const ts::pool_statistics after = pool.get_statistics();
  const std::uint64_t got = ran.load(std::memory_order_relaxed);  // relaxed: wait_idle() synchronised with the jobs
  if (got != static_cast<std::uint64_t>(state.iterations()) * jobs) state.SkipWithError("jobs lost");
  state.SetItemsProcessed(static_cast<std::int64_t>(got));
  const double n = static_cast<double>(got == 0 ? 1 : got);
  state.counters["retries_per_job"] = static_cast<double>(retries) / n;
  state.counters["caller_ran_pct"] = 100.0 * static_cast<double>(after.caller_ran - before.caller_ran) / n;
  state.counters["capacity"] = kind == bound_kind::unbounded ? 0.0 : static_cast<double>(bound_capacity);
}
BENCHMARK_CAPTURE(BM_Backpressure, unbounded, bound_kind::unbounded)
    ->ArgName("job_ns")
    ->Arg(0)
    ->Arg(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Backpressure, block_1024, bound_kind::block)
    ->ArgName("job_ns")
    ->Arg(0)
    ->Arg(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Backpressure, reject_1024, bound_kind::reject)
    ->ArgName("job_ns")
    ->Arg(0)
    ->Arg(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Backpressure, caller_runs_1024, bound_kind::caller_runs)
    ->ArgName("job_ns")
    ->Arg(0)
    ->Arg(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---- resize latency -----------------------------------------------------------

constexpr std::size_t resize_big = 8;

// `n` jobs that each wait until all n have started: when the call returns
// true, n distinct workers have each run a job. Then releases them.
class rendezvous {
 public:
  bool enqueue_and_wait(ts::thread_pool& pool, std::size_t n) {
    arrived_.store(0, std::memory_order_relaxed);      // no job of this round exists yet
    release_.store(false, std::memory_order_relaxed);  // ditto
    for (std::size_t i = 0; i < n; ++i) {
      if (!pool.enqueue([this] {
            arrived_.fetch_add(1, std::memory_order_release);  // pairs with the acquire loads below
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            // acquire: pairs with the release store in release()
            while (!release_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up) {
              std::this_thread::yield();
            }
          })) {
        return false;
      }
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    // acquire: pairs with the jobs' release increments
    while (arrived_.load(std::memory_order_acquire) < n) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::yield();
    }
    return true;
  }
  void release() { release_.store(true, std::memory_order_release); }  // pairs with the jobs' acquire loads

 private:
  std::atomic<std::size_t> arrived_{0};
  std::atomic<bool> release_{false};
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The resize benchmarks time a few microseconds of each iteration, which
// costs milliseconds (threads start and exit, a 2 ms pause): a fixed count
// keeps Google Benchmark from running tens of thousands of them to fill
// min_time with manual time.
constexpr benchmark::IterationCount resize_iterations = 100;

// Grow 1 -> 8: from the resize(8) call until 8 workers have each run a job
// (a rendezvous: 8 jobs that wait for each other). Before each iteration the
// pool is back at 1 worker and the leavers had 2 ms to exit, so the grow
// restarts threads (resize reuses the worker objects).
void BM_ResizeGrow(benchmark::State& state) {
  ts::thread_pool pool{1};
  rendezvous rv;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!pool.resize(resize_big)) state.SkipWithError("resize refused");
    const bool ok = rv.enqueue_and_wait(pool, resize_big);
    state.SetIterationTime(seconds_since(t0));
    rv.release();
    if (!ok) state.SkipWithError("the new workers did not all run a job within 5 s");
    pool.wait_idle();
    (void)pool.resize(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  state.counters["workers_to"] = static_cast<double>(resize_big);
}
BENCHMARK(BM_ResizeGrow)->UseManualTime()->Iterations(resize_iterations)->Unit(benchmark::kMicrosecond);

// Reference for the grow: a new pool of 8 workers, from the constructor
// until its 8 workers have each run a job (construction and destruction of
// the pool object outside the timing, except the thread starts).
void BM_ResizeFreshPool(benchmark::State& state) {
  rendezvous rv;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto pool = std::make_unique<ts::thread_pool>(resize_big);
    const bool ok = rv.enqueue_and_wait(*pool, resize_big);
    state.SetIterationTime(seconds_since(t0));
    rv.release();
    if (!ok) state.SkipWithError("the workers did not all run a job within 5 s");
    pool.reset();
  }
}
BENCHMARK(BM_ResizeFreshPool)->UseManualTime()->Iterations(resize_iterations)->Unit(benchmark::kMicrosecond);

// Shrink 8 -> 1: the time of the resize(1) call on an idle pool whose 8
// workers all ran a job (the leavers exit after the call returns; resize
// does not wait for them).
void BM_ResizeShrink(benchmark::State& state) {
  ts::thread_pool pool{1};
  rendezvous rv;
  for (auto _ : state) {
    if (!pool.resize(resize_big)) state.SkipWithError("resize refused");
    const bool ok = rv.enqueue_and_wait(pool, resize_big);
    rv.release();
    if (!ok) state.SkipWithError("the new workers did not all run a job within 5 s");
    pool.wait_idle();
    const auto t0 = std::chrono::steady_clock::now();
    if (!pool.resize(1)) state.SkipWithError("resize refused");
    state.SetIterationTime(seconds_since(t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  state.counters["workers_to"] = 1;
}
BENCHMARK(BM_ResizeShrink)->UseManualTime()->Iterations(resize_iterations)->Unit(benchmark::kMicrosecond);

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
    tb::job_counter ran_line;  // written by the workers for every job: a line of its own
    std::atomic<std::uint64_t>& ran = ran_line.value;
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
