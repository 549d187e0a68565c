// Metrics of a pool and of each of its workers, as plain values.
//
// A `pool_metrics` is a copy taken at one moment (see collect.hpp for how it
// is read from a live pool); it has no links back to the pool and may be
// kept, copied and passed between threads like any value. None of these
// types is internally synchronised.
//
// Counters are cumulative since the pool was created. Rates and "recent"
// figures (throughput, utilisation over the last interval, peak queue depth)
// need two or more observations and live in pool_monitor's report.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "thread_system/diagnostics/latency_histogram.hpp"

namespace thread_system::monitoring {

/// The usual percentiles of a histogram, in nanoseconds.
struct latency_summary {
  /// Samples in the histogram; every other field is 0 when this is.
  std::uint64_t count = 0;
  /// Arithmetic mean.
  double mean_ns = 0.0;
  /// Smallest sample.
  std::uint64_t min_ns = 0;
  /// Median (50th percentile).
  std::uint64_t p50_ns = 0;
  /// 95th percentile.
  std::uint64_t p95_ns = 0;
  /// 99th percentile.
  std::uint64_t p99_ns = 0;
  /// 99.9th percentile.
  std::uint64_t p999_ns = 0;
  /// Largest sample.
  std::uint64_t max_ns = 0;
};

/// p50/p95/p99/p999 (each within histogram_snapshot::relative_error).
[[nodiscard]] latency_summary summarise(const histogram_snapshot& h) noexcept;

/// One worker thread.
struct worker_metrics {
  std::size_t index = 0;        ///< position in the pool's worker list
  std::string name;             ///< the worker's name, or "<pool>-<index>" when it has none
  std::uint64_t processed = 0;  ///< jobs run (including failed ones)
  /// Jobs that threw or reported an error.
  std::uint64_t failed = 0;
  /// Jobs this worker discarded instead of running (worker_statistics::jobs_cancelled).
  std::uint64_t cancelled = 0;
  /// Jobs this worker took from other workers' deques.
  std::uint64_t steals = 0;
  /// Times this worker went to sleep for lack of work.
  std::uint64_t parks = 0;
  std::chrono::nanoseconds busy_time{0};  ///< running or looking for jobs (not parked)
  std::chrono::nanoseconds idle_time{0};  ///< parked
  /// steady_clock ns when the current busy stretch began; 0 while parked, or
  /// when the core does not publish it (busy_since_known == false).
  std::uint64_t busy_since_ns = 0;
  /// True when the pool publishes busy_since_ns (worker_statistics has it).
  bool busy_since_known = false;
  /// busy / (busy + idle) since the worker started; 0 before it ran.
  double utilisation = 0.0;
  /// True when `wait` and `run` hold sampled latencies (the core records
  /// latency and sampling is on).
  bool has_latency = false;
  /// Sampled enqueue->start waits of the jobs this worker ran (ns).
  histogram_snapshot wait;
  /// Sampled run times of the jobs this worker ran (ns).
  histogram_snapshot run;

  /// Jobs this worker finished one way or the other (the stuck detector's
  /// progress measure).
  [[nodiscard]] std::uint64_t completed() const noexcept { return processed + cancelled; }
};

/// One job type of a typed pool.
struct job_type_metrics {
  /// The type's name (job_type_statistics::type_name).
  std::string type_name;
  /// Jobs of this type accepted.
  std::uint64_t accepted = 0;
  /// Jobs of this type run (including failed ones).
  std::uint64_t executed = 0;
  /// Jobs of this type that threw or reported an error.
  std::uint64_t failed = 0;
  /// Jobs of this type cancelled instead of run (job_type_statistics::cancelled).
  std::uint64_t cancelled = 0;
  std::uint64_t waiting = 0;  ///< queued now
  /// True when `wait` holds this type's sampled waits.
  bool has_latency = false;
  histogram_snapshot wait;  ///< enqueue->start wait of this type's jobs
};

/// A pool at one moment.
struct pool_metrics {
  /// The pool's get_name(); empty when the pool has none.
  std::string pool_name;
  /// steady_clock ns when collected (for rates).
  std::uint64_t steady_ns = 0;
  /// Wall-clock ms since the Unix epoch when collected (for export).
  std::int64_t unix_ms = 0;

  std::uint64_t accepted = 0;  ///< jobs accepted by enqueue/submit
  std::uint64_t executed = 0;  ///< ran to completion, including failed ones
  /// Jobs that threw or reported an error.
  std::uint64_t failed = 0;
  /// Jobs cancelled instead of run (pool_statistics::cancelled).
  std::uint64_t cancelled = 0;
  std::uint64_t queue_depth = 0;  ///< waiting now (approximate)
  /// Worker threads (pool_statistics::workers, else the number of workers listed).
  std::uint64_t worker_count = 0;
  /// Jobs moved between workers by stealing.
  std::uint64_t steals = 0;
  /// Times a worker went to sleep for lack of work.
  std::uint64_t parks = 0;

  /// One entry per worker, in the pool's order; empty when the pool does not list its workers.
  std::vector<worker_metrics> workers;
  /// True when `wait` and `run` hold sampled latencies.
  bool has_latency = false;
  /// Sampled enqueue->start waits: the pool's own merged histogram, or all workers' merged (ns).
  histogram_snapshot wait;
  /// Sampled run times, merged like `wait` (ns).
  histogram_snapshot run;

  /// Empty unless the pool reports per-type statistics.
  std::vector<job_type_metrics> job_types;

  /// Mean utilisation of the workers (0 with no workers).
  [[nodiscard]] double utilisation() const noexcept;
};

}  // namespace thread_system::monitoring
