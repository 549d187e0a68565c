// pool_monitor: samples a pool, keeps a short history, and derives rates,
// peaks, stuck workers and health from it.
//
//   thread_system::thread_pool pool{4};
//   thread_system::monitoring::pool_monitor monitor{pool, {.interval = 1s}};
//   (void)monitor.start();                  // optional background sampler
//   ...
//   monitoring::monitor_report r = monitor.sample();   // or monitor.latest()
//   std::string text = monitoring::to_prometheus(r);
//
// Sampling. Each sample() reads the pool's public statistics (collect.hpp;
// the job path pays nothing for it) and pushes a small record into a ring of
// `window_samples` entries allocated once at construction. Throughput, error
// rate and "backlog sustained" are taken between the oldest and the newest
// record of the ring, so with interval I and window W they cover the last
// (W - 1) * I. Peak queue depth is the largest depth any sample saw since
// the monitor was created (a peak between two samples is not seen).
//
// Stuck workers (no cost on the job path). A worker publishes when its
// current busy stretch began (busy_since_ns, 0 while parked) and how many
// jobs it finished. A worker whose busy_since_ns is non-zero and unchanged
// and whose finished count has not moved across samples spanning at least
// `thresholds.stuck_after` is reported stuck; it clears at the first sample
// where the count moves or the worker parks. The span is measured between
// samples, so detection needs samples at least that far apart in total
// (with the background sampler: within stuck_after + interval). Requires a
// core that publishes busy_since_ns (worker_metrics::busy_since_known).
//
// Threading. All members may be called from any thread, concurrently (from
// the collector itself: see below):
// sample() calls are serialised by an internal mutex; latest() and health()
// return copies. Everything sample() recorded is visible to a later
// latest()/health() in any thread (the mutex). The monitored pool must
// outlive the monitor, or the monitor must be stopped (stop(), or
// destroyed) before the pool is destroyed. The destructor stops and joins
// the background sampler; it must not be called from the sampler itself.
// start() and stop() racing each other end in one state or the other, never
// a sampler left running unjoined.
//
// From the collector (code that sample() runs, on the sampler thread or on
// the thread that called sample() or health()): stop() only ends the
// sampling - the sampler leaves after its current sample or wait, and the
// next start() or stop() from outside a collector, or the destructor, joins
// it; start() is refused (`already_started` on the sampler thread,
// `invalid_argument` on another); latest() returns the previous sample;
// sample(), and health() before the first sample, throw
// error_exception{invalid_argument} (either would need a sample inside this
// one). The collector must not destroy the monitor. All of this holds
// however deep the collectors nest: a collector may sample another
// monitor, whose collector may use the first in the same ways. (Two
// monitors whose collectors sample each other from two threads at once
// wait for each other's mutex: do not.)
//
// Failures. A sample whose collector or derivation throws (out of memory)
// is lost and latest() keeps the previous report; the background sampler
// goes on. Any positive interval works (one that long saturates: one
// sample, then none).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/monitoring/collect.hpp"
#include "thread_system/monitoring/health.hpp"
#include "thread_system/monitoring/metrics.hpp"

namespace thread_system::monitoring {

/// Settings of a pool_monitor.
struct monitor_options {
  /// Period of the background sampler (start()); must be positive.
  std::chrono::nanoseconds interval = std::chrono::seconds{1};
  /// Ring size: rates cover the last window_samples - 1 intervals, in
  /// [2, max_window_samples].
  std::size_t window_samples = 60;
  /// The largest window_samples accepted (about 48 MiB of history).
  static constexpr std::size_t max_window_samples = std::size_t{1} << 20;
  /// Levels of the health checks evaluated at each sample.
  health_thresholds thresholds{};
  /// steady-clock nanoseconds; null means std::chrono::steady_clock. Tests
  /// inject a manual clock to make windows and stuck spans exact.
  std::function<std::uint64_t()> clock{};
  /// Replaces the pool's name in reports and labels when not empty.
  std::string pool_label{};
};

/// Per-worker figures that need more than one sample.
struct worker_report {
  double recent_utilisation = 0.0;  ///< busy time / elapsed since the previous sample
  /// True once no_progress_for has reached health_thresholds::stuck_after (never when that is zero).
  bool stuck = false;
  /// How long the current job has been observed unfinished (0 unless a
  /// busy stretch without progress is being tracked).
  std::chrono::nanoseconds no_progress_for{0};
};

/// What one sample produced: the raw metrics plus figures derived from the monitor's history.
struct monitor_report {
  pool_metrics metrics;                ///< the raw sample (steady_ns is the monitor's clock)
  std::vector<worker_report> workers;  ///< parallel to metrics.workers
  std::uint64_t sample_number = 0;     ///< 1 for the first sample

  std::chrono::nanoseconds window{0};  ///< span of the rates below (0 with one sample)
  double throughput_per_s = 0.0;       ///< jobs finished (executed + cancelled) per second
  double accept_rate_per_s = 0.0;      ///< jobs accepted per second
  /// Jobs run in the window (failed included).
  std::uint64_t window_executed = 0;
  /// Jobs that failed in the window.
  std::uint64_t window_failed = 0;
  double error_rate = 0.0;  ///< window_failed / window_executed (0 without jobs)
  /// Largest queue depth any sample saw since the monitor was created.
  std::uint64_t peak_queue_depth = 0;
  /// Smallest queue depth among the window's samples (non-zero: the backlog was sustained).
  std::uint64_t window_min_queue_depth = 0;
  /// Mean busy share of the pool's current workers: the sum of
  /// workers[i].recent_utilisation divided by metrics.worker_count when the
  /// collector sets it, else by the number of workers listed (get_workers()
  /// also lists workers a resize() removed, which are not busy).
  double recent_utilisation = 0.0;
  /// Workers whose worker_report::stuck is true.
  std::size_t stuck_workers = 0;

  latency_summary wait;  ///< pool-wide enqueue->start wait (when has_latency)
  latency_summary run;   ///< pool-wide run time
  /// The health checks of this sample, against monitor_options::thresholds.
  health_report health;
};

/// Anything collect_into() can read: a pool with statistics, workers or
/// per-type statistics.
template <typename P>
concept monitorable_pool = requires(const P& p) { p.get_statistics(); } || requires(const P& p) { p.get_workers(); } ||
                           requires(const P& p) { p.get_type_statistics(); };

/// Samples a pool, keeps a short history and derives rates, peaks, stuck workers and health (see the header
/// comment).
class pool_monitor {
 public:
  /// Fills a pool_metrics from whatever is monitored.
  using collector = std::function<void(pool_metrics&)>;

  /// Monitors `pool` through collect_into(pool, ...). The pool must outlive
  /// the monitor (see the file comment).
  template <monitorable_pool Pool>
  explicit pool_monitor(const Pool& pool, monitor_options options = {})
      : pool_monitor(collector{[&pool](pool_metrics& out) { collect_into(pool, out); }}, std::move(options)) {}

  /// Monitors whatever `source` reports. Throws
  /// error_exception{invalid_argument} for a null collector, an interval
  /// that is not positive or window_samples outside [2, max_window_samples],
  /// and error_exception{resource_exhausted} without memory for the history.
  pool_monitor(collector source, monitor_options options);

  /// Stops and joins the background sampler; must not be called from the sampler itself.
  ~pool_monitor();
  /// Not copyable.
  pool_monitor(const pool_monitor&) = delete;
  /// Not copyable.
  pool_monitor& operator=(const pool_monitor&) = delete;

  /// Starts the background sampler (one thread, one sample per interval).
  /// `already_started` when it runs (or when called on the sampler thread),
  /// `invalid_argument` from the collector on another thread;
  /// `resource_exhausted` when the OS refuses the thread or memory runs out.
  result<void> start();
  /// Stops and joins the sampler; idempotent; samples taken stay. From the
  /// collector (on any thread) it only ends the sampling (see the header).
  void stop() noexcept;
  /// True from a successful start() until stop().
  [[nodiscard]] bool is_running() const noexcept;

  /// Takes a sample now and returns the resulting report. The collector is
  /// given a default pool_metrics to fill. Throws what the collector throws,
  /// error_exception{invalid_argument} from the collector, and
  /// error_exception{resource_exhausted} out of memory; a sample that throws
  /// is lost (latest() and the history as they were).
  monitor_report sample();
  /// The report of the latest sample; std::nullopt before the first.
  /// Out of memory for the copy: error_exception{resource_exhausted}.
  [[nodiscard]] std::optional<monitor_report> latest() const;
  /// Health of the latest sample (takes one first if there is none; from the
  /// collector then error_exception{invalid_argument}). Out of memory:
  /// error_exception{resource_exhausted}.
  [[nodiscard]] health_report health();

  /// The options given at construction.
  [[nodiscard]] const monitor_options& options() const noexcept { return options_; }

 private:
  struct ring_entry {
    std::uint64_t t = 0;
    std::uint64_t accepted = 0;
    std::uint64_t executed = 0;
    std::uint64_t cancelled = 0;
    std::uint64_t failed = 0;
    std::uint64_t queue_depth = 0;
  };
  struct worker_track {
    std::uint64_t prev_busy_ns = 0;
    std::uint64_t prev_t = 0;
    bool have_prev = false;
    // stuck detection: the state first seen at first_seen
    std::uint64_t busy_since = 0;
    std::uint64_t completed = 0;
    std::uint64_t first_seen = 0;
    bool tracking = false;
  };

  [[nodiscard]] std::uint64_t now() const;
  [[nodiscard]] bool on_sampler_thread() const noexcept;
  // True on a thread inside this monitor's sample() (in its collector).
  [[nodiscard]] bool in_own_sample() const noexcept;
  // mutex_ locked, or not when this thread holds it (in_own_sample()).
  [[nodiscard]] std::unique_lock<std::mutex> lock_unless_sampling() const;
  void sampler_main();
  void derive(monitor_report& r, std::uint64_t t);
  // What derive() changes besides the report, saved before it so that a
  // sample that throws leaves the history as it was.
  struct derived_state {
    std::size_t ring_next = 0;
    std::size_t ring_size = 0;
    ring_entry overwritten;  // ring_[ring_next]
    std::uint64_t peak_queue_depth = 0;
    std::vector<worker_track> tracks;
  };
  [[nodiscard]] derived_state save_derived_state() const;  // may throw std::bad_alloc (a copy of tracks_)
  void restore_derived_state(derived_state&& saved) noexcept;

  collector source_;
  monitor_options options_;

  mutable std::mutex mutex_;  // guards everything below except the sampler's control
  std::vector<ring_entry> ring_;
  std::size_t ring_next_ = 0;
  std::size_t ring_size_ = 0;
  std::vector<worker_track> tracks_;
  std::uint64_t samples_ = 0;
  std::uint64_t peak_queue_depth_ = 0;
  monitor_report latest_;
  monitor_report scratch_;  // the next sample is built here, then swapped with latest_

  std::mutex lifecycle_mutex_;  // serialises start() and stop() (held across the join)
  std::mutex control_mutex_;    // guards stop_requested_ and the sampler thread
  std::condition_variable control_cv_;
  bool stop_requested_ = false;
  std::thread sampler_;
  // Written under control_mutex_; read by is_running() from any thread.
  std::atomic<bool> running_{false};
  std::atomic<std::thread::id> sampler_id_{};  // the sampler thread until it is joined
};

}  // namespace thread_system::monitoring
