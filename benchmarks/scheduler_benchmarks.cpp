// The scheduler against its peers, side by side in one binary: nested
// fork-join (fib), external submission of empty jobs, parallel_for,
// parallel_reduce, and submit->start latency on an idle pool. Every
// library gets the same number of threads doing the work (THREADS below,
// hardware_concurrency, at least 2): oneTBB is capped with global_control
// and an arena of that size (its external thread counts as one of them
// where it participates: parallel_for, parallel_reduce; there a Thread
// System pool has THREADS - 1 workers besides its calling thread),
// Boost.Asio's thread_pool gets that many threads. A task_group from
// outside: THREADS workers and the waiting thread for both libraries.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "thread_system/pools/parallel_for.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "workloads.hpp"

#if defined(THREAD_SYSTEM_HAVE_TBB)
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#endif
#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#endif

namespace ts = thread_system;
namespace tb = thread_system::bench;

namespace {

std::size_t bench_threads() {
  static const std::size_t n = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  return n;
}

// The workers of a pool whose calling thread takes part in the work
// (parallel_for, parallel_reduce from outside the pool): THREADS in all, as
// oneTBB's arena of THREADS counts its external thread. (Until 2026-12-06
// these rows gave the pool THREADS workers besides the caller: one thread
// more than oneTBB, three on two cores.)
std::size_t workers_beside_caller() { return bench_threads() - 1; }

std::uint64_t fib_calls(int n) { return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2); }

// Waits until `counter` reaches `target` (yielding), the same way for every library.
void wait_for_count(const std::atomic<std::uint64_t>& counter, std::uint64_t target) {
  while (counter.load(std::memory_order_acquire) < target) std::this_thread::yield();
}

constexpr int fib_n = 27;

// ---- nested fork-join: fib with a task per call -----------------------------

std::uint64_t fib_ts(ts::thread_pool& pool, int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0;
  ts::task_group g(pool);
  g.run([&pool, &a, n] { a = fib_ts(pool, n - 1); });
  const std::uint64_t b = fib_ts(pool, n - 2);
  g.wait();
  return a + b;
}

void report_fib(benchmark::State& state, std::size_t threads) {
  const auto tasks = static_cast<double>(fib_calls(fib_n) / 2);  // one spawned task per internal call
  state.SetItemsProcessed(static_cast<std::int64_t>(tasks) * state.iterations());
  // Inverted rate of tasks/(threads * 1e9) per second = threads * wall ns / tasks.
  state.counters["thread_ns_per_task"] =
      benchmark::Counter(tasks / (static_cast<double>(threads) * 1e9),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["threads"] = static_cast<double>(threads);
}

// The fork-join rows run at 1 worker (spawn and join alone: nothing is
// stolen), 2, and every core when there are more.
void fib_workers(benchmark::internal::Benchmark* b) {
  b->ArgName("workers")->Arg(1)->Arg(2);
  if (bench_threads() > 2) b->Arg(static_cast<std::int64_t>(bench_threads()));
}

void BM_NestedFib_ThreadSystem(benchmark::State& state) {
  const auto workers = static_cast<std::size_t>(state.range(0));
  ts::thread_pool pool{workers};
  for (auto _ : state) {
    auto root = pool.submit([&pool] { return fib_ts(pool, fib_n); });
    benchmark::DoNotOptimize(root.get());
  }
  report_fib(state, workers);
}
BENCHMARK(BM_NestedFib_ThreadSystem)->Apply(fib_workers)->UseRealTime()->Unit(benchmark::kMillisecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
std::uint64_t fib_tbb(int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0;
  tbb::task_group g;
  g.run([&a, n] { a = fib_tbb(n - 1); });
  const std::uint64_t b = fib_tbb(n - 2);
  g.wait();
  return a + b;
}

// The arena's slots include the external thread, which runs the root and
// takes part: `workers` threads in all, as for the pool above.
void BM_NestedFib_oneTBB(benchmark::State& state) {
  const auto workers = static_cast<std::size_t>(state.range(0));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, workers);
  tbb::task_arena arena(static_cast<int>(workers));
  for (auto _ : state) {
    std::uint64_t r = 0;
    arena.execute([&r] { r = fib_tbb(fib_n); });
    benchmark::DoNotOptimize(r);
  }
  report_fib(state, workers);
}
BENCHMARK(BM_NestedFib_oneTBB)->Apply(fib_workers)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

// ---- a group from outside the pool: run 8 jobs, wait ------------------------
//
// A thread that is not one of the pool's workers (a server's request
// thread, main) runs a task_group of 8 short jobs and waits for them: the
// hand-off, the jobs the waiter takes back and runs itself (those no worker
// has started), and its wake-up, per group. oneTBB: the same
// thread in an arena of as many slots as the pool has workers, with one
// slot kept for it, as an external thread joins an arena.
constexpr int group_jobs = 8;

void BM_GroupFromOutside_ThreadSystem(benchmark::State& state) {
  ts::thread_pool pool{bench_threads()};
  tb::job_counter done_line;
  std::atomic<std::uint64_t>& done = done_line.value;
  for (auto _ : state) {
    ts::task_group g(pool);
    for (int k = 0; k < group_jobs; ++k) g.run([&done] { done.fetch_add(1, std::memory_order_relaxed); });
    g.wait();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * group_jobs);
}
BENCHMARK(BM_GroupFromOutside_ThreadSystem)->UseRealTime()->Unit(benchmark::kMicrosecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
void BM_GroupFromOutside_oneTBB(benchmark::State& state) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, bench_threads() + 1);
  tbb::task_arena arena(static_cast<int>(bench_threads()) + 1, /*reserved_for_masters=*/1);
  tb::job_counter done_line;
  std::atomic<std::uint64_t>& done = done_line.value;
  for (auto _ : state) {
    arena.execute([&done] {
      tbb::task_group g;
      for (int k = 0; k < group_jobs; ++k) g.run([&done] { done.fetch_add(1, std::memory_order_relaxed); });
      g.wait();
    });
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * group_jobs);
}
BENCHMARK(BM_GroupFromOutside_oneTBB)->UseRealTime()->Unit(benchmark::kMicrosecond);
#endif

// The same with jobs that work (a busy spin of job_ns each): whether the
// jobs run in parallel while the waiter takes back the ones no worker has
// started (8 jobs of job_ns on one thread take 8 * job_ns).
void BM_GroupOfWorkFromOutside_ThreadSystem(benchmark::State& state) {
  const auto job_ns = static_cast<std::uint64_t>(state.range(0));
  ts::thread_pool pool{bench_threads()};
  for (auto _ : state) {
    ts::task_group g(pool);
    for (int k = 0; k < group_jobs; ++k) g.run([job_ns] { tb::spin_for_ns(job_ns); });
    g.wait();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * group_jobs);
}
BENCHMARK(BM_GroupOfWorkFromOutside_ThreadSystem)
    ->ArgName("job_ns")
    ->Arg(1'000)
    ->Arg(10'000)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
void BM_GroupOfWorkFromOutside_oneTBB(benchmark::State& state) {
  const auto job_ns = static_cast<std::uint64_t>(state.range(0));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, bench_threads() + 1);
  tbb::task_arena arena(static_cast<int>(bench_threads()) + 1, /*reserved_for_masters=*/1);
  for (auto _ : state) {
    arena.execute([job_ns] {
      tbb::task_group g;
      for (int k = 0; k < group_jobs; ++k) g.run([job_ns] { tb::spin_for_ns(job_ns); });
      g.wait();
    });
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * group_jobs);
}
BENCHMARK(BM_GroupOfWorkFromOutside_oneTBB)
    ->ArgName("job_ns")
    ->Arg(1'000)
    ->Arg(10'000)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
#endif

// ---- external submission of empty jobs ---------------------------------------

constexpr std::uint64_t external_jobs = 1'000'000;

template <typename Submit>
void external_submit(benchmark::State& state, Submit submit) {
  const auto producers = static_cast<std::uint64_t>(state.range(0));
  tb::job_counter done_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& done = done_line.value;
  std::uint64_t target = 0;
  for (auto _ : state) {
    target += external_jobs;
    std::vector<std::thread> threads;
    for (std::uint64_t p = 0; p < producers; ++p) {
      threads.emplace_back([&] {
        for (std::uint64_t i = 0; i < external_jobs / producers; ++i) submit(done);
      });
    }
    for (auto& t : threads) t.join();
    wait_for_count(done, target);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(target));
  // Inverted rate of jobs/1e9 per second = wall ns per job.
  state.counters["ns_per_job"] =
      benchmark::Counter(static_cast<double>(external_jobs) / 1e9,
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ExternalSubmit_ThreadSystem(benchmark::State& state) {
  ts::thread_pool pool{bench_threads()};
  external_submit(state, [&pool](std::atomic<std::uint64_t>& done) {
    (void)pool.enqueue([&done] { done.fetch_add(1, std::memory_order_release); });
  });
}
BENCHMARK(BM_ExternalSubmit_ThreadSystem)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
void BM_ExternalSubmit_oneTBB(benchmark::State& state) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, bench_threads() + 1);
  tbb::task_arena arena(static_cast<int>(bench_threads()), /*reserved_for_masters=*/0);
  external_submit(state, [&arena](std::atomic<std::uint64_t>& done) {
    arena.enqueue([&done] { done.fetch_add(1, std::memory_order_release); });
  });
}
BENCHMARK(BM_ExternalSubmit_oneTBB)->ArgName("producers")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
void BM_ExternalSubmit_BoostAsio(benchmark::State& state) {
  boost::asio::thread_pool pool(bench_threads());
  external_submit(state, [&pool](std::atomic<std::uint64_t>& done) {
    boost::asio::post(pool, [&done] { done.fetch_add(1, std::memory_order_release); });
  });
  pool.join();
}
BENCHMARK(BM_ExternalSubmit_BoostAsio)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
#endif

// ---- parallel_for over 1e7 cheap elements ----------------------------------------

constexpr std::size_t pf_elements = 10'000'000;
// A short loop (100 000 floats, tens of microseconds): the per-call costs -
// handing pieces out, waking workers, waiting for the last piece - weigh.
constexpr std::size_t pf_short_elements = 100'000;

// The loop body of every parallel_for row (each library's and the one-thread
// reference): one multiply-add per float.
auto pf_body(std::vector<float>& v) {
  return [&v](std::size_t i) { v[i] = v[i] * 0.5F + 1.0F; };
}

void parallel_for_thread_system(benchmark::State& state, std::size_t elements) {
  ts::thread_pool pool{workers_beside_caller()};
  std::vector<float> v(elements, 1.0F);
  for (auto _ : state) {
    // From outside the pool this thread takes part, as oneTBB's caller does.
    ts::parallel_for(pool, std::size_t{0}, elements, pf_body(v));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(elements) * state.iterations());
}
// The same loop on the calling thread alone: the reference for the
// parallel rows (the report shows each library's speed-up over it). With W
// threads sharing one cache, about W times this rate is the machine's limit;
// where each thread's part of the array stays in a cache of its own between
// calls, more.
void parallel_for_serial(benchmark::State& state, std::size_t elements) {
  std::vector<float> v(elements, 1.0F);
  auto body = pf_body(v);
  for (auto _ : state) {
    for (std::size_t i = 0; i < elements; ++i) body(i);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(elements) * state.iterations());
}
void BM_ParallelFor_Serial(benchmark::State& state) { parallel_for_serial(state, pf_elements); }
BENCHMARK(BM_ParallelFor_Serial)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_ParallelForShort_Serial(benchmark::State& state) { parallel_for_serial(state, pf_short_elements); }
BENCHMARK(BM_ParallelForShort_Serial)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ParallelFor_ThreadSystem(benchmark::State& state) { parallel_for_thread_system(state, pf_elements); }
BENCHMARK(BM_ParallelFor_ThreadSystem)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_ParallelForShort_ThreadSystem(benchmark::State& state) { parallel_for_thread_system(state, pf_short_elements); }
BENCHMARK(BM_ParallelForShort_ThreadSystem)->UseRealTime()->Unit(benchmark::kMicrosecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
void parallel_for_onetbb(benchmark::State& state, std::size_t elements) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, bench_threads());
  tbb::task_arena arena(static_cast<int>(bench_threads()));
  std::vector<float> v(elements, 1.0F);
  for (auto _ : state) {
    arena.execute([&] { tbb::parallel_for(std::size_t{0}, elements, pf_body(v)); });
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(elements) * state.iterations());
}
void BM_ParallelFor_oneTBB(benchmark::State& state) { parallel_for_onetbb(state, pf_elements); }
BENCHMARK(BM_ParallelFor_oneTBB)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_ParallelForShort_oneTBB(benchmark::State& state) { parallel_for_onetbb(state, pf_short_elements); }
BENCHMARK(BM_ParallelForShort_oneTBB)->UseRealTime()->Unit(benchmark::kMicrosecond);
#endif

// ---- parallel_reduce: the sum of 10^6 floats, called from outside the pool ----

constexpr std::size_t pr_elements = 1'000'000;

void BM_ParallelReduce_ThreadSystem(benchmark::State& state) {
  ts::thread_pool pool{workers_beside_caller()};
  const std::vector<float> v(pr_elements, 1.0F);
  for (auto _ : state) {
    const float sum = ts::parallel_reduce(
        pool, std::size_t{0}, pr_elements, 0.0F,
        [&v](std::size_t lo, std::size_t hi, float acc) {
          for (; lo < hi; ++lo) acc += v[lo];
          return acc;
        },
        std::plus<>{});
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(pr_elements) * state.iterations());
}
BENCHMARK(BM_ParallelReduce_ThreadSystem)->UseRealTime()->Unit(benchmark::kMicrosecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
void BM_ParallelReduce_oneTBB(benchmark::State& state) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, bench_threads());
  tbb::task_arena arena(static_cast<int>(bench_threads()));
  const std::vector<float> v(pr_elements, 1.0F);
  for (auto _ : state) {
    const float sum = arena.execute([&] {
      return tbb::parallel_reduce(
          tbb::blocked_range<std::size_t>(0, pr_elements), 0.0F,
          [&v](const tbb::blocked_range<std::size_t>& r, float acc) {
            for (std::size_t i = r.begin(); i < r.end(); ++i) acc += v[i];
            return acc;
          },
          std::plus<>{});
    });
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(pr_elements) * state.iterations());
}
BENCHMARK(BM_ParallelReduce_oneTBB)->UseRealTime()->Unit(benchmark::kMicrosecond);
#endif

// ---- submit->start latency on an idle pool ------------------------------------------

template <typename Submit>
void idle_latency(benchmark::State& state, Submit submit) {
  std::vector<double> samples;
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // workers go to sleep
    state.ResumeTiming();
    std::atomic<std::uint64_t> started_at{0};
    const std::uint64_t submitted_at = tb::now_ns();
    submit(started_at);
    while (started_at.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    samples.push_back(static_cast<double>(started_at.load(std::memory_order_relaxed) - submitted_at));
  }
  state.counters["p50_ns"] = tb::percentile(samples, 50);
  state.counters["p99_ns"] = tb::percentile(samples, 99);
}

void BM_IdleLatency_ThreadSystem(benchmark::State& state) {
  ts::thread_pool pool{bench_threads()};
  idle_latency(state, [&pool](std::atomic<std::uint64_t>& started) {
    (void)pool.enqueue([&started] { started.store(tb::now_ns(), std::memory_order_release); });
  });
}
BENCHMARK(BM_IdleLatency_ThreadSystem)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);

#if defined(THREAD_SYSTEM_HAVE_TBB)
void BM_IdleLatency_oneTBB(benchmark::State& state) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, bench_threads() + 1);
  tbb::task_arena arena(static_cast<int>(bench_threads()), 0);
  idle_latency(state, [&arena](std::atomic<std::uint64_t>& started) {
    arena.enqueue([&started] { started.store(tb::now_ns(), std::memory_order_release); });
  });
}
BENCHMARK(BM_IdleLatency_oneTBB)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
