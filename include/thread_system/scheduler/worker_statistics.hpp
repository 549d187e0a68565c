// Statistics of one worker thread and of a whole pool.
//
// Snapshots are read without stopping the pool; each counter is exact at some
// moment during the read, but different counters may be read at slightly
// different moments. One ordering is promised: a pool's snapshot
// (pool_statistics, job_type_statistics) reads its completion counters
// before its accepted counts, so even a snapshot taken while jobs run has
// accepted >= executed + cancelled.
#pragma once

#include <cstdint>

#include "thread_system/detail/chrono.hpp"
#include "thread_system/diagnostics/latency_histogram.hpp"

namespace thread_system {

/// Counters of one worker thread (thread_worker::get_statistics()).
struct worker_statistics {
  std::uint64_t jobs_processed = 0;  ///< Jobs this worker ran (including failed ones).
  std::uint64_t jobs_failed = 0;     ///< Jobs that threw or reported an error.
  std::uint64_t jobs_cancelled = 0;  ///< Jobs this worker ended unrun: at stop(cancel_pending), or by their token.
  /// Time from finding work until a look finds none: running jobs and the
  /// looks between them. The spin and pool_options::idle_wait's polling
  /// after the last job count in neither busy_time nor idle_time.
  std::chrono::nanoseconds busy_time{0};
  std::chrono::nanoseconds idle_time{0};  ///< Time spent parked waiting for work.
  /// Mean run time of the jobs this worker ran that were sampled
  /// (pool_options::latency_sample_every); time spent looking for work is
  /// not in it (busy_time has that). 0 when sampling is off or nothing was
  /// sampled yet.
  std::uint64_t avg_processing_time_ns = 0;
  std::uint64_t parks = 0;                ///< Times the worker went to sleep.
  std::uint64_t wakeups = 0;              ///< Times it woke from sleep (parks minus a sleep in progress).
  std::uint64_t steals = 0;               ///< Jobs taken from other workers' deques.
  std::uint64_t local_spawns = 0;         ///< Jobs its jobs submitted onto its own deque.
  std::uint64_t allocation_failures = 0;  ///< Allocations that failed on its thread (it carried on without).
  /// steady_clock time (ns since its epoch) at which the current busy
  /// stretch began; 0 while the worker is parked, spinning idle or stopped.
  /// A stretch that stays open while jobs_processed does not move means the
  /// worker is inside one long job.
  std::uint64_t busy_since_ns = 0;
};

/// Latency of sampled jobs (pool_options::latency_sample_every).
struct worker_latency {
  histogram_snapshot wait;  ///< enqueue -> start, nanoseconds
  histogram_snapshot run;   ///< start -> finish, nanoseconds
};

/// Counters of a whole pool (thread_pool::get_statistics()).
struct pool_statistics {
  std::uint64_t accepted = 0;    ///< Jobs accepted by enqueue/submit.
  std::uint64_t executed = 0;    ///< Jobs that ran to completion (including failed ones).
  std::uint64_t failed = 0;      ///< Jobs that threw or reported an error.
  std::uint64_t cancelled = 0;   ///< Jobs ended unrun: by stop(cancel_pending), drop_oldest, or their token.
  std::uint64_t queued = 0;      ///< Jobs waiting now (approximate).
  std::uint64_t workers = 0;     ///< Workers in the pool (worker_count(); after stop() too, their threads ended).
  std::uint64_t steals = 0;      ///< Jobs moved between workers by stealing.
  std::uint64_t parks = 0;       ///< Times a worker went to sleep for lack of work.
  std::uint64_t wakeups = 0;     ///< Times a worker woke from sleep.
  std::uint64_t dropped = 0;     ///< Jobs cancelled by backpressure::drop_oldest (also in `cancelled`).
  std::uint64_t caller_ran = 0;  ///< Jobs backpressure::caller_runs ran on the submitting thread (also in `executed`).
  std::uint64_t allocation_failures = 0;  ///< Allocations that failed on worker threads (each worker carried on).
  std::uint64_t queue_switches = 0;       ///< Times the adaptive injector moved to its other queue (0 for other kinds).
  bool paused = false;                    ///< pause() is in effect.
};

}  // namespace thread_system
