// Cost of the monitoring pieces on the paths that matter:
//   * latency_histogram::record (the worker's per-sample cost), snapshot,
//     percentile;
//   * the overhead of latency sampling in the core on empty jobs: one pool
//     per setting (latency_sample_every = 0 / default / 1), the three
//     registered interleaved over several rounds in one process, and a
//     summary at the end (median, min, max, ratio to "off").
//
// Workload "empty job": a lambda with an empty body. One external producer
// enqueues a batch and waits with wait_idle(); the time is wall-clock from
// the first enqueue to wait_idle() returning (UseRealTime), items = jobs run.
// `--rounds=N` sets the number of interleaved rounds (default 5).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "thread_system/diagnostics/latency_histogram.hpp"
#include "thread_system/monitoring/monitoring.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace {

using thread_system::histogram_snapshot;
using thread_system::latency_histogram;

std::vector<std::uint64_t> sample_values() {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> dist(9.0, 2.0);  // ~100 ns .. ~10 ms
  std::vector<std::uint64_t> v(4096);
  for (auto& x : v) x = static_cast<std::uint64_t>(dist(rng));
  return v;
}

void BM_histogram_record(benchmark::State& state) {
  const auto values = sample_values();
  latency_histogram h;
  std::size_t i = 0;
  for (auto _ : state) {
    h.record(values[i++ & 4095]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_histogram_record);

void BM_histogram_record_concurrent_api(benchmark::State& state) {
  const auto values = sample_values();
  latency_histogram h;
  std::size_t i = 0;
  for (auto _ : state) {
    h.record_concurrent(values[i++ & 4095]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_histogram_record_concurrent_api);

void BM_histogram_snapshot(benchmark::State& state) {
  latency_histogram h;
  for (auto v : sample_values()) h.record(v);
  histogram_snapshot s;
  for (auto _ : state) {
    h.snapshot_into(s);
    benchmark::DoNotOptimize(s.count);
  }
}
BENCHMARK(BM_histogram_snapshot);

void BM_histogram_percentiles(benchmark::State& state) {
  latency_histogram h;
  for (auto v : sample_values()) h.record(v);
  const histogram_snapshot s = h.snapshot();
  for (auto _ : state) benchmark::DoNotOptimize(thread_system::monitoring::summarise(s));
}
BENCHMARK(BM_histogram_percentiles);

// ---- sampling overhead on empty jobs ------------------------------------------------

template <typename O>
constexpr bool has_sampling_option = requires(O o) { o.latency_sample_every = 1u; };

enum class sampling { off, default_setting, every_job };

const char* name_of(sampling s) {
  switch (s) {
    case sampling::off:
      return "off";
    case sampling::default_setting:
      return "default";
    case sampling::every_job:
      return "every_job";
  }
  return "?";
}

template <typename O>
void apply(O& o, sampling s) {
  if constexpr (has_sampling_option<O>) {
    if (s == sampling::off) o.latency_sample_every = 0;
    if (s == sampling::every_job) o.latency_sample_every = 1;
  } else {
    (void)o;
    (void)s;
  }
}

constexpr std::size_t batch = 100'000;
constexpr std::size_t workers = 2;  // the machine's cores

void empty_jobs(benchmark::State& state, sampling s) {
  thread_system::pool_options o;
  o.name = "bench";
  apply(o, s);
  thread_system::thread_pool pool{workers, o};
  const auto run_batch = [&pool] {
    for (std::size_t i = 0; i < batch; ++i) {
      if (!pool.enqueue([] {})) std::abort();
    }
    pool.wait_idle();
  };
  run_batch();  // warm-up: threads started, rings grown, nodes cached
  for (auto _ : state) run_batch();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
  state.counters["workers"] = workers;
  if constexpr (has_sampling_option<thread_system::pool_options>) {
    state.counters["sample_every"] = static_cast<double>(o.latency_sample_every);  // the setting's N (0 = off)
  }
}

// Collects items_per_second per variant for the summary.
class summary_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      const std::string name = r.benchmark_name();
      const auto slash = name.find("/round:");
      if (name.rfind("empty_jobs/", 0) != 0 || slash == std::string::npos) continue;
      rates_[name.substr(0, slash)].push_back(it->second.value);
    }
  }

  void print_summary() const {
    if (rates_.empty()) return;
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    const auto off = rates_.find("empty_jobs/sampling:off");
    const double base = off == rates_.end() ? 0.0 : median(off->second);
    std::printf("\nLatency sampling overhead, empty jobs, %zu workers, 1 producer, wall clock (%zu rounds)\n", workers,
                rates_.begin()->second.size());
    std::printf("%-34s %14s %14s %14s %10s\n", "variant", "median jobs/s", "min", "max", "vs off");
    for (const auto& [name, v] : rates_) {
      const double m = median(v);
      std::printf("%-34s %14.0f %14.0f %14.0f %9.3fx\n", name.c_str(), m, *std::min_element(v.begin(), v.end()),
                  *std::max_element(v.begin(), v.end()), base > 0 ? m / base : 0.0);
    }
  }

 private:
  std::map<std::string, std::vector<double>> rates_;
};

}  // namespace

int main(int argc, char** argv) {
  // --rounds=N (default 5): interleaved rounds of the sampling comparison.
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::max(1, std::atoi(argv[i] + 9));
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  if constexpr (has_sampling_option<thread_system::pool_options>) {
    // Interleaved A B C A B C ...: drift affects every variant alike.
    for (int round = 0; round < rounds; ++round) {
      for (sampling s : {sampling::off, sampling::default_setting, sampling::every_job}) {
        const std::string name = std::string("empty_jobs/sampling:") + name_of(s) + "/round:" + std::to_string(round);
        benchmark::RegisterBenchmark(name.c_str(), empty_jobs, s)->UseRealTime()->Unit(benchmark::kMillisecond);
      }
    }
  } else {
    std::printf("pool_options::latency_sample_every is not in this core: sampling variants skipped\n");
    for (int round = 0; round < rounds; ++round) {
      const std::string name = "empty_jobs/sampling:none/round:" + std::to_string(round);
      benchmark::RegisterBenchmark(name.c_str(), empty_jobs, sampling::off)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
