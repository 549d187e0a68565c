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
  std::uint64_t count = 0;
  double mean_ns = 0.0;
  std::uint64_t min_ns = 0;
  std::uint64_t p50_ns = 0;
  std::uint64_t p95_ns = 0;
  std::uint64_t p99_ns = 0;
  std::uint64_t p999_ns = 0;
  std::uint64_t max_ns = 0;
};

/// p50/p95/p99/p999 (each within histogram_snapshot::relative_error).
[[nodiscard]] latency_summary summarise(const histogram_snapshot& h) noexcept;

/// One worker thread.
struct worker_metrics {
  std::size_t index = 0;        ///< position in the pool's worker list
  std::string name;             ///< the worker's name, or "<pool>-<index>" when it has none
  std::uint64_t processed = 0;  ///< jobs run (including failed ones)
  std::uint64_t failed = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t steals = 0;
  std::uint64_t parks = 0;
  std::chrono::nanoseconds busy_time{0};  ///< running or looking for jobs (not parked)
  std::chrono::nanoseconds idle_time{0};  ///< parked
  /// steady_clock ns when the current busy stretch began; 0 while parked, or
  /// when the core does not publish it (busy_since_known == false).
  std::uint64_t busy_since_ns = 0;
  bool busy_since_known = false;
  /// busy / (busy + idle) since the worker started; 0 before it ran.
  double utilisation = 0.0;
  /// Sampled enqueue->start wait and run time (present when the core
  /// records latency and sampling is on).
  bool has_latency = false;
  histogram_snapshot wait;
  histogram_snapshot run;

  /// Jobs this worker finished one way or the other (the stuck detector's
  /// progress measure).
  [[nodiscard]] std::uint64_t completed() const noexcept { return processed + cancelled; }
};

/// One job type of a typed pool.
struct job_type_metrics {
  std::string type_name;
  std::uint64_t enqueued = 0;
  std::uint64_t executed = 0;
  std::uint64_t failed = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t waiting = 0;  ///< queued now
  bool has_latency = false;
  histogram_snapshot wait;  ///< enqueue->start wait of this type's jobs
};

/// A pool at one moment.
struct pool_metrics {
  std::string pool_name;
  /// steady_clock ns when collected (for rates) and wall-clock ms since the
  /// Unix epoch (for export).
  std::uint64_t steady_ns = 0;
  std::int64_t unix_ms = 0;

  std::uint64_t submitted = 0;  ///< jobs accepted by enqueue/submit
  std::uint64_t executed = 0;   ///< ran to completion, including failed ones
  std::uint64_t failed = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t queue_depth = 0;  ///< waiting now (approximate)
  std::uint64_t worker_count = 0;
  std::uint64_t steals = 0;
  std::uint64_t parks = 0;

  std::vector<worker_metrics> workers;
  /// All workers' histograms merged (or the pool's own, when it has one).
  bool has_latency = false;
  histogram_snapshot wait;
  histogram_snapshot run;

  /// Empty unless the pool reports per-type statistics.
  std::vector<job_type_metrics> job_types;

  /// Mean utilisation of the workers (0 with no workers).
  [[nodiscard]] double utilisation() const noexcept;
};

}  // namespace thread_system::monitoring
