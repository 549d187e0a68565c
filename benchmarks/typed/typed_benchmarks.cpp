// The typed pool against the standard pool, mirroring the seed guide's
// tables "Type Thread Pool Performance" (throughput by number of job types),
// "Priority Scheduling Performance" (jobs per type; processing time,
// accuracy, RealTime-first share) and "Job Type Routing" (cost per job by
// share of high-priority jobs).
//
// Side by side in one binary: compare the typed rows with BM_StandardPool
// from the same run, as ratios of medians (--benchmark_repetitions=5).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "../workloads.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
namespace tb = thread_system::bench;

namespace {

constexpr std::size_t jobs_per_run = 100'000;
constexpr std::uint64_t job_ns = 1'000;  // the seed's "simple job", ~1 us of work

std::size_t workers() { return std::max<std::size_t>(2, std::thread::hardware_concurrency()); }

void spin_job(std::atomic<std::uint64_t>* ran, std::uint64_t ns) {
  tb::spin_for_ns(ns);
  ran->fetch_add(1, std::memory_order_relaxed);  // counting only; wait_idle() synchronises with the reader
}

}  // namespace

// Baseline: the standard pool, same workers, same jobs, one producer.
// Argument: job_ns, the busy time of one job (1000: the seed's simple job;
// 0: an empty job, which shows the per-job overhead undiluted).
static void BM_StandardPool(benchmark::State& state) {
  const auto ns = static_cast<std::uint64_t>(state.range(0));
  ts::thread_pool pool{workers()};
  tb::job_counter ran_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& ran = ran_line.value;
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs_per_run; ++i) {
      if (!pool.enqueue([&ran, ns] { spin_job(&ran, ns); })) state.SkipWithError("refused");
    }
    pool.wait_idle();
  }
  // relaxed: wait_idle() synchronised with every job
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.load(std::memory_order_relaxed)));
  state.counters["workers"] = static_cast<double>(workers());
}
BENCHMARK(BM_StandardPool)->ArgName("job_ns")->Arg(job_ns)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

// Seed "Type Thread Pool Performance": the typed pool with universal workers
// and jobs spread round-robin over `types` job types (1, 2, 3, 5, 10).
// Arguments: types, the per-type queue (pool_queue: 0 mutex, 2 adaptive -
// the default), job_ns as for BM_StandardPool.
static void BM_TypedPoolTypeMix(benchmark::State& state) {
  const auto types = static_cast<int>(state.range(0));
  const auto ns = static_cast<std::uint64_t>(state.range(2));
  ts::typed_pool_options<int> options;
  options.queue = static_cast<ts::pool_queue>(state.range(1));
  ts::typed_thread_pool_t<int> pool{workers(), options};
  state.SetLabel(ts::to_string(options.queue));
  tb::job_counter ran_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& ran = ran_line.value;
  for (auto _ : state) {
    // Round-robin without a division per job (the standard pool's loop has
    // none either): the producer shares the machine's cores with the workers.
    int type = 0;
    for (std::size_t i = 0; i < jobs_per_run; ++i) {
      if (!pool.enqueue(type, [&ran, ns] { spin_job(&ran, ns); })) state.SkipWithError("refused");
      type = type + 1 == types ? 0 : type + 1;
    }
    pool.wait_idle();
  }
  // relaxed: wait_idle() synchronised with every job
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.load(std::memory_order_relaxed)));
  state.counters["types"] = types;
  state.counters["workers"] = static_cast<double>(workers());
}
constexpr int adaptive_queue = static_cast<int>(ts::pool_queue::adaptive);
constexpr int mutex_queue = static_cast<int>(ts::pool_queue::mutex);
BENCHMARK(BM_TypedPoolTypeMix)
    ->ArgNames({"types", "queue", "job_ns"})
    ->ArgsProduct({{1, 2, 3, 5, 10}, {adaptive_queue}, {static_cast<int>(job_ns)}})
    ->Args({1, mutex_queue, static_cast<int>(job_ns)})
    ->Args({3, mutex_queue, static_cast<int>(job_ns)})
    ->Args({1, adaptive_queue, 0})
    ->Args({3, adaptive_queue, 0})
    ->Args({1, mutex_queue, 0})
    ->Args({3, mutex_queue, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The cost of one enqueue on its own: the pool is paused, so no worker
// takes a job while the producer pushes (no lock or cache line is shared
// with a worker), and only the pushes are timed (manual time; the jobs run
// after resume(), untimed). What the typed pool adds per job (the type's
// rank, the served check, the kind's queue) shows here without the
// producer/worker interplay that dominates the empty-job rows above.
// Argument: 0 the standard pool, 1 the typed pool with one type (both on
// the mutex injector).
static void BM_EnqueueWhilePaused(benchmark::State& state) {
  constexpr std::size_t jobs = 10'000;
  const bool typed = state.range(0) != 0;
  ts::thread_pool standard{workers()};
  ts::typed_pool_options<int> options;
  options.queue = ts::pool_queue::mutex;
  ts::typed_thread_pool_t<int> typed_pool{workers(), options};
  tb::job_counter ran_line;
  std::atomic<std::uint64_t>& ran = ran_line.value;
  auto job = [&ran] { ran.fetch_add(1, std::memory_order_relaxed); };  // counting only
  for (auto _ : state) {
    if (typed) {
      typed_pool.pause();
    } else {
      standard.pause();
    }
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < jobs; ++i) {
      const bool ok = typed ? typed_pool.enqueue(0, job).has_value() : standard.enqueue(job).has_value();
      if (!ok) state.SkipWithError("refused");
    }
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (typed) {
      typed_pool.resume();
      typed_pool.wait_idle();
    } else {
      standard.resume();
      standard.wait_idle();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * jobs));
  state.SetLabel(typed ? "typed, 1 type" : "standard");
}
BENCHMARK(BM_EnqueueWhilePaused)->ArgName("typed")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Seed "Priority Scheduling Performance": `per_type` jobs of each of the
// three types queued (lowest priority first) while the one worker is held,
// then released. accuracy = share of jobs that started in priority order
// (no job started while a higher-priority job was queued);
// realtime_first = share of RealTime jobs among the first `per_type` started.
static void BM_PriorityScheduling(benchmark::State& state) {
  const auto per_type = static_cast<std::size_t>(state.range(0));
  double in_order = 0;
  double realtime_first = 0;
  double total = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ts::typed_thread_pool_t<ts::job_types> pool{1};
    std::latch hold{1};
    std::latch held{1};
    if (!pool.enqueue(ts::job_types::Background, [&] {
          held.count_down();
          hold.wait();
        })) {
      state.SkipWithError("refused");
    }
    held.wait();
    std::vector<ts::job_types> order;  // written by the only worker
    order.reserve(3 * per_type);
    for (std::size_t i = 0; i < per_type; ++i) {
      for (auto t : {ts::job_types::Background, ts::job_types::Batch, ts::job_types::RealTime}) {
        if (!pool.enqueue(t, [&order, t] {
              tb::spin_for_ns(job_ns);
              order.push_back(t);
            })) {
          state.SkipWithError("refused");
        }
      }
    }
    state.ResumeTiming();
    hold.count_down();
    pool.wait_idle();
    state.PauseTiming();
    // In order: each job's type is not higher than the previous one's.
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || order[i] >= order[i - 1]) in_order += 1;
    }
    realtime_first += static_cast<double>(
        std::count(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(per_type), ts::job_types::RealTime));
    total += static_cast<double>(order.size());
    state.ResumeTiming();
  }
  state.counters["accuracy_pct"] = total == 0 ? 0 : 100.0 * in_order / total;
  state.counters["realtime_first_pct"] = total == 0 ? 0 : 100.0 * realtime_first / (total / 3.0);
  state.counters["jobs_per_type"] = static_cast<double>(per_type);
  state.SetItemsProcessed(static_cast<std::int64_t>(total));
}
BENCHMARK(BM_PriorityScheduling)->Arg(100)->Arg(500)->Arg(1000)->UseRealTime()->Unit(benchmark::kMillisecond);

// The routing workload: `high_pct` percent RealTime, the rest alternating
// Batch and Background, empty jobs, one producer.
static void run_routing_mix(benchmark::State& state, ts::typed_thread_pool_t<ts::job_types>& pool,
                            std::size_t high_pct) {
  tb::job_counter ran_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& ran = ran_line.value;
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs_per_run; ++i) {
      const std::size_t slot = i % 100;
      const auto t = slot < high_pct ? ts::job_types::RealTime
                                     : (slot % 2 == 0 ? ts::job_types::Batch : ts::job_types::Background);
      // relaxed: counting only; wait_idle() synchronises with the reader
      if (!pool.enqueue(t, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); })) state.SkipWithError("refused");
    }
    pool.wait_idle();
  }
  // relaxed: wait_idle() synchronised with every job
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.load(std::memory_order_relaxed)));
  state.counters["high_pct"] = static_cast<double>(high_pct);
}

// Seed "Job Type Routing": empty jobs, `high_pct` percent RealTime and the
// rest split between Batch and Background, into a pool with one specialist
// per type and one universal worker (the seed's configuration). Time per job
// is the routing and scheduling cost; compare with BM_RoutingStandardPool.
static void BM_TypedRouting(benchmark::State& state) {
  const auto high_pct = static_cast<std::size_t>(state.range(0));
  ts::typed_thread_pool_t<ts::job_types> pool{"routing"};
  for (auto t : {ts::job_types::RealTime, ts::job_types::Batch, ts::job_types::Background}) {
    (void)pool.add_worker(std::make_unique<ts::typed_thread_worker_t<ts::job_types>>(std::vector<ts::job_types>{t}));
  }
  (void)pool.add_worker(std::make_unique<ts::typed_thread_worker_t<ts::job_types>>());
  if (!pool.start()) state.SkipWithError("start failed");
  run_routing_mix(state, pool, high_pct);
}
BENCHMARK(BM_TypedRouting)->Arg(33)->Arg(50)->Arg(80)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same mixes into a typed pool of 4 universal workers (no specialists):
// separates the cost of the job types from that of the specialist workers.
static void BM_TypedRoutingUniversal(benchmark::State& state) {
  const auto high_pct = static_cast<std::size_t>(state.range(0));
  ts::typed_thread_pool_t<ts::job_types> pool{4};
  run_routing_mix(state, pool, high_pct);
}
BENCHMARK(BM_TypedRoutingUniversal)->Arg(33)->Arg(50)->Arg(80)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same empty jobs through the standard pool with as many workers (4).
static void BM_RoutingStandardPool(benchmark::State& state) {
  ts::thread_pool pool{4};
  tb::job_counter ran_line;  // written by the workers for every job: a line of its own
  std::atomic<std::uint64_t>& ran = ran_line.value;
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs_per_run; ++i) {
      // relaxed: counting only; wait_idle() synchronises with the reader
      if (!pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })) state.SkipWithError("refused");
    }
    pool.wait_idle();
  }
  // relaxed: wait_idle() synchronised with every job
  state.SetItemsProcessed(static_cast<std::int64_t>(ran.load(std::memory_order_relaxed)));
}
BENCHMARK(BM_RoutingStandardPool)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
