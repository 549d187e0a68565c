// Google Benchmark micro-benchmarks of thread_pool, mirroring the seed
// guide's tables: pool creation, throughput by job size and worker count,
// submit->start latency by queue depth, and seed note 004's injector table
// inside a pool, with the pool-level producer and latency tables per
// injector. All figures are wall-clock
// (UseRealTime) from the first submit until the last job has finished.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <future>
#include <latch>
#include <thread>
#include <vector>

#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "workloads.hpp"

namespace ts = thread_system;
namespace tb = thread_system::bench;

using tb::job_counter;

// Seed table "Thread Pool Creation Performance". Here creation means what a
// user pays: construct, start N OS threads, and stop/join them again.
static void BM_PoolCreateStartStop(benchmark::State& state) {
  const auto workers = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    ts::thread_pool pool{workers};
    benchmark::DoNotOptimize(&pool);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PoolCreateStartStop)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Each iteration: `jobs` jobs of ~job_ns from this thread, then wait_idle().
// Items processed: the jobs that ran.
static void run_spinning_jobs(benchmark::State& state, ts::thread_pool& pool, std::size_t jobs, std::uint64_t job_ns) {
  job_counter ran;
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs; ++i) {
      auto r = pool.enqueue([&ran, job_ns] {
        tb::spin_for_ns(job_ns);
        ran.value.fetch_add(1, std::memory_order_relaxed);
      });
      if (!r) state.SkipWithError(r.error().to_string().c_str());
    }
    pool.wait_idle();
  }
  // seq_cst: pairs with the writers' RMW/store
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.value.load(std::memory_order_seq_cst)));
}

// Seed table "Throughput by Job Complexity": N jobs of a given duration,
// from one producer, into W workers; timed until all have run.
static void BM_EnqueueThroughput(benchmark::State& state) {
  const auto workers = static_cast<std::size_t>(state.range(0));
  const auto job_ns = static_cast<std::uint64_t>(state.range(1));
  const std::size_t jobs = job_ns == 0 ? 200'000 : 20'000;
  ts::thread_pool pool{workers};
  pool.wait_idle();
  run_spinning_jobs(state, pool, jobs, job_ns);
  state.counters["workers"] = static_cast<double>(workers);
  state.counters["oversubscribed"] = workers > std::thread::hardware_concurrency() ? 1 : 0;
}
BENCHMARK(BM_EnqueueThroughput)
    ->ArgNames({"workers", "job_ns"})
    ->ArgsProduct({{1, 2, 4, 8}, {0, 1000}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same with enqueue_batch (one queue lock per 256 jobs).
// Each iteration: `jobs` empty jobs from this thread as enqueue_batch()
// calls of `batch_size` jobs into `pool`, then wait_idle(). Items processed:
// the jobs that ran.
static void run_batched(benchmark::State& state, ts::thread_pool& pool, std::size_t jobs, std::size_t batch_size) {
  job_counter ran;
  auto job = [&ran] { ran.value.fetch_add(1, std::memory_order_relaxed); };
  std::vector<decltype(job)> batch(batch_size, job);
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs; i += batch_size) {
      if (!pool.enqueue_batch(batch)) state.SkipWithError("refused");
    }
    pool.wait_idle();
  }
  // seq_cst: pairs with the writers' RMW (read after wait_idle())
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.value.load(std::memory_order_seq_cst)));
}

static void BM_EnqueueBatchThroughput(benchmark::State& state) {
  ts::thread_pool pool{static_cast<std::size_t>(state.range(0))};
  run_batched(state, pool, 200'000, 256);
}
BENCHMARK(BM_EnqueueBatchThroughput)
    ->ArgName("workers")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Seed guide table "Batching reduces scheduling overhead" (overhead per job
// by batch size): one producer submits 100'000 empty jobs as
// enqueue_batch() calls of `batch` jobs each into 2 workers, then waits.
// Reported as jobs/s; the report shows ns per job (wall time / jobs).
static void BM_SubmitBatchOverhead(benchmark::State& state) {
  ts::thread_pool pool{2};
  run_batched(state, pool, 100'000, static_cast<std::size_t>(state.range(0)));
}
BENCHMARK(BM_SubmitBatchOverhead)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(10)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Seed table "batching overhead by batch size": one producer, W workers,
// each worker taking up to `batch` jobs per visit to the pool's queue
// (thread_worker::set_injector_batch, the seed's set_batch_processing).
static void BM_WorkerInjectorBatch(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const auto job_ns = static_cast<std::uint64_t>(state.range(1));
  constexpr std::size_t workers = 2;
  const std::size_t jobs = job_ns == 0 ? 200'000 : 20'000;
  ts::thread_pool pool{workers};
  for (ts::thread_worker* w : pool.get_workers()) {
    if (!w->set_injector_batch(batch)) state.SkipWithError("batch size refused");
  }
  run_spinning_jobs(state, pool, jobs, job_ns);
  state.counters["steals"] = static_cast<double>(pool.get_statistics().steals);
}
BENCHMARK(BM_WorkerInjectorBatch)
    ->ArgNames({"batch", "job_ns"})
    ->ArgsProduct({{1, 4, 16, 32, 64}, {0, 1000}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Seed note 004's first table, inside a pool: one producer thread submits
// `tasks` empty jobs into a pool of `workers` workers, then waits for them;
// the pool's injector is the row's queue (pool_queue, numbered as the enum:
// 0 mutex, 1 lockfree, 2 adaptive, 3 sharded, 4 bounded). The bounded ring
// has the note's capacity, 8192: a submission it refuses with queue_full is
// retried after a yield, as the note's producer retries, and the retries
// are counted (full_retries, per iteration).
static void BM_InjectorInPool(benchmark::State& state) {
  const auto kind = static_cast<ts::pool_queue>(state.range(0));
  const auto workers = static_cast<std::size_t>(state.range(1));
  const auto tasks = static_cast<std::size_t>(state.range(2));
  ts::pool_options opt;
  opt.queue = kind;
  if (kind == ts::pool_queue::bounded) opt.initial_queue_capacity = 8192;
  ts::thread_pool pool{workers, opt};
  job_counter ran;
  std::uint64_t retries = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < tasks; ++i) {
      for (;;) {
        auto r = pool.enqueue([&ran] { ran.value.fetch_add(1, std::memory_order_relaxed); });
        if (r) break;
        if (r.error().code() != ts::error_code::queue_full) {
          state.SkipWithError(r.error().to_string().c_str());
          return;
        }
        ++retries;
        std::this_thread::yield();
      }
    }
    pool.wait_idle();
  }
  // seq_cst: pairs with the writers' RMW (read after wait_idle())
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.value.load(std::memory_order_seq_cst)));
  state.SetLabel(ts::to_string(kind));
  state.counters["full_retries"] = benchmark::Counter(static_cast<double>(retries), benchmark::Counter::kAvgIterations);
  state.counters["oversubscribed"] = workers + 1 > std::thread::hardware_concurrency() ? 1 : 0;
}
BENCHMARK(BM_InjectorInPool)
    ->ArgNames({"queue", "workers", "tasks"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {2, 4, 8}, {10'000, 50'000, 100'000}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The guides' high-contention tables at pool level, with each injector:
// P producer threads (started once, released by a barrier each iteration)
// share 100 000 empty jobs into a pool of 2 workers; wall clock from the
// release until every job ran. queue_switches: the adaptive injector's
// switches over the whole run (the pool's statistics).
static void BM_InjectorProducers(benchmark::State& state) {
  const auto kind = static_cast<ts::pool_queue>(state.range(0));
  const auto producers = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t total = 100'000;
  const std::size_t per_producer = total / producers;
  ts::pool_options opt;
  opt.queue = kind;
  if (kind == ts::pool_queue::bounded) opt.initial_queue_capacity = 8192;
  ts::thread_pool pool{2, opt};
  job_counter ran;
  std::atomic<std::uint64_t> retries{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> quit{false};
  std::barrier<> start(static_cast<std::ptrdiff_t>(producers + 1));
  std::barrier<> done(static_cast<std::ptrdiff_t>(producers + 1));
  std::vector<std::thread> threads;
  threads.reserve(producers);
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      for (;;) {
        start.arrive_and_wait();
        if (quit.load(std::memory_order_acquire)) return;  // pairs with the release store below
        for (std::size_t i = 0; i < per_producer; ++i) {
          for (;;) {
            auto r = pool.enqueue([&ran] { ran.value.fetch_add(1, std::memory_order_relaxed); });
            if (r) break;
            if (r.error().code() != ts::error_code::queue_full) {
              failed.store(true, std::memory_order_relaxed);  // read after the barrier
              break;
            }
            retries.fetch_add(1, std::memory_order_relaxed);  // statistics only
            std::this_thread::yield();
          }
        }
        done.arrive_and_wait();
      }
    });
  }
  for (auto _ : state) {
    start.arrive_and_wait();
    done.arrive_and_wait();
    pool.wait_idle();
  }
  quit.store(true, std::memory_order_release);  // pairs with the producers' acquire load
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  if (failed.load(std::memory_order_relaxed)) state.SkipWithError("an enqueue failed");
  // seq_cst: pairs with the writers' RMW (read after wait_idle())
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.value.load(std::memory_order_seq_cst)));
  state.SetLabel(ts::to_string(kind));
  state.counters["full_retries"] = benchmark::Counter(static_cast<double>(retries.load(std::memory_order_relaxed)),
                                                      benchmark::Counter::kAvgIterations);
  state.counters["queue_switches"] = static_cast<double>(pool.get_statistics().queue_switches);
  state.counters["oversubscribed"] = 2 + producers > std::thread::hardware_concurrency() ? 1 : 0;
}
BENCHMARK(BM_InjectorProducers)
    ->ArgNames({"queue", "producers"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, 2, 4, 8, 16}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The guides' I/O-bound and mixed scaling ("workers >> cores" for jobs that
// wait): each job sleeps `wait_us` (an I/O wait: no CPU), and in the mixed
// workload first spins `cpu_us`. One producer submits 16 jobs per worker and
// waits for them. Ideal jobs/s: workers / (cpu + wait) while the CPU part
// fits the cores, capped at cores / cpu (the report shows the ratio).
static void BM_WaitingJobs(benchmark::State& state) {
  const auto workers = static_cast<std::size_t>(state.range(0));
  const auto cpu_us = static_cast<std::uint64_t>(state.range(1));
  static constexpr std::uint64_t wait_us = 200;
  const std::size_t jobs = 16 * workers;
  ts::thread_pool pool{workers};
  job_counter ran;
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs; ++i) {
      auto r = pool.enqueue([&ran, cpu_us] {
        tb::spin_for_ns(cpu_us * 1000);
        std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
        ran.value.fetch_add(1, std::memory_order_relaxed);
      });
      if (!r) state.SkipWithError(r.error().to_string().c_str());
    }
    pool.wait_idle();
  }
  // seq_cst: pairs with the writers' RMW (read after wait_idle())
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.value.load(std::memory_order_seq_cst)));
  const double cores = std::max(1.0, static_cast<double>(std::thread::hardware_concurrency()));
  const double per_job_s = static_cast<double>(cpu_us + wait_us) * 1e-6;
  double ideal = static_cast<double>(workers) / per_job_s;
  if (cpu_us != 0) ideal = std::min(ideal, cores / (static_cast<double>(cpu_us) * 1e-6));
  state.counters["ideal_per_second"] = ideal;
}
BENCHMARK(BM_WaitingJobs)
    ->ArgNames({"workers", "cpu_us"})
    ->ArgsProduct({{2, 4, 8, 16, 32, 64}, {0, 100}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Seed table "Job Submission Latency": the time from submit() to the job's
// first instruction, with `depth` empty jobs already queued ahead of it.
// depth 0 measures an idle pool (parked workers must be woken).
static void submit_to_start_latency(benchmark::State& state, std::size_t depth, ts::pool_queue kind) {
  ts::pool_options opt;
  opt.queue = kind;
  if (kind == ts::pool_queue::bounded) opt.initial_queue_capacity = 8192;
  ts::thread_pool pool{2, opt};
  std::vector<double> samples;
  for (auto _ : state) {
    state.PauseTiming();
    // Fill the queue while both workers are held, so the measured job
    // really waits behind `depth` jobs.
    std::latch hold{1};
    std::latch held{2};
    for (int w = 0; w < 2; ++w) {
      (void)pool.enqueue([&] {
        held.count_down();
        hold.wait();
      });
    }
    held.wait();
    for (std::size_t i = 0; i < depth; ++i) (void)pool.enqueue([] {});
    if (depth == 0) {
      hold.count_down();
      pool.wait_idle();
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // let the workers park
    }
    state.ResumeTiming();
    std::atomic<std::uint64_t> started_at{0};
    const std::uint64_t submitted_at = tb::now_ns();
    auto f = pool.submit([&started_at] { started_at.store(tb::now_ns(), std::memory_order_relaxed); });
    if (depth > 0) hold.count_down();
    f.get();
    samples.push_back(static_cast<double>(started_at.load(std::memory_order_relaxed) - submitted_at));
    state.PauseTiming();
    pool.wait_idle();
    state.ResumeTiming();
  }
  state.counters["p50_ns"] = tb::percentile(samples, 50);
  state.counters["p95_ns"] = tb::percentile(samples, 95);
  state.counters["p99_ns"] = tb::percentile(samples, 99);
  state.counters["queued_ahead"] = static_cast<double>(depth);
  state.counters["queue_switches"] = static_cast<double>(pool.get_statistics().queue_switches);
}

static void BM_SubmitToStartLatency(benchmark::State& state) {
  submit_to_start_latency(state, static_cast<std::size_t>(state.range(0)), ts::pool_queue::mutex);
}
BENCHMARK(BM_SubmitToStartLatency)
    ->ArgName("queued")
    ->Arg(0)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Iterations(200)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The same with each injector (pool_queue numbered as in BM_InjectorInPool):
// the guides' submission-latency tables per queue mode.
static void BM_InjectorLatency(benchmark::State& state) {
  submit_to_start_latency(state, static_cast<std::size_t>(state.range(1)), static_cast<ts::pool_queue>(state.range(0)));
  state.SetLabel(ts::to_string(static_cast<ts::pool_queue>(state.range(0))));
}
BENCHMARK(BM_InjectorLatency)
    ->ArgNames({"queue", "queued"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1000}})
    ->Iterations(200)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
