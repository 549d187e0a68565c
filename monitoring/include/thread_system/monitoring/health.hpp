// Health of a pool: a handful of checks against warning/critical thresholds,
// folded into one status (the worst of the checks).
//
// The default thresholds are the key indicators of the original design
// notes:
//
//   | check        | measures                                   | warning   | critical  |
//   |--------------|--------------------------------------------|-----------|-----------|
//   | throughput   | jobs/s over the window, only while a        | < 50 000  | < 10 000  |
//   |              | backlog persisted through the whole window  |           |           |
//   | queue_depth  | jobs waiting now                           | > 50      | > 200     |
//   | error_rate   | failed / executed over the window          | > 1 %     | > 5 %     |
//   | utilisation  | busy share of the pool's current workers    | > 98 %    | > 99.9 %  |
//   |              | over the last sampling interval            |           |           |
//   | wait_p99     | p99 enqueue->start wait (off by default)   |           |           |
//   | stuck_workers| workers in one job longer than stuck_after | >= 1      | all       |
//
// A check whose threshold is std::nullopt is not evaluated; a check without
// enough data (one sample only, no jobs in the window, no backlog) reports
// `ok` with applicable == false. Everything here is a plain value type;
// evaluate_health() is a pure function and may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thread_system::monitoring {

/// Outcome of a check or of a whole report, best to worst.
enum class health_status : int { ok = 0, warning = 1, critical = 2 };

/// The status's name: "ok", "warning" or "critical".
[[nodiscard]] constexpr std::string_view to_string(health_status s) noexcept {
  switch (s) {
    case health_status::ok:
      return "ok";
    case health_status::warning:
      return "warning";
    case health_status::critical:
      return "critical";
  }
  return "unknown";
}

/// A warning and a critical level. For "above" checks the value is bad when
/// it exceeds the level; for "below" checks (throughput) when it falls under.
struct threshold {
  /// The level at which the check reports `warning`.
  double warning = 0.0;
  /// The level at which the check reports `critical`.
  double critical = 0.0;
};

/// Levels of each check (std::nullopt: the check is off). Defaults are in the header comment's table.
struct health_thresholds {
  std::optional<threshold> throughput_per_s = threshold{50'000.0, 10'000.0};  ///< below
  std::optional<threshold> queue_depth = threshold{50.0, 200.0};              ///< above
  std::optional<threshold> error_rate = threshold{0.01, 0.05};                ///< above (fraction)
  std::optional<threshold> utilisation = threshold{0.98, 0.999};              ///< above (fraction)
  std::optional<threshold> wait_p99_ns{};                                     ///< above; off by default
  /// A worker whose current job has not finished for this long is stuck
  /// (warning; critical when every worker is stuck). Zero disables.
  std::chrono::nanoseconds stuck_after = std::chrono::seconds{10};
};

/// What the checks look at; pool_monitor fills it from its samples.
struct health_inputs {
  bool have_window = false;        ///< at least two samples, so rates exist
  double throughput_per_s = 0.0;   ///< jobs finished per second over the window
  bool backlog_sustained = false;  ///< queue depth > 0 at every sample of the window
  /// Jobs waiting now.
  std::uint64_t queue_depth = 0;
  std::uint64_t window_executed = 0;  ///< jobs run in the window (failed included)
  /// Jobs that failed in the window.
  std::uint64_t window_failed = 0;
  double utilisation = 0.0;  ///< mean over workers, last interval
  /// True when `wait_p99_ns` comes from latency samples.
  bool have_wait_latency = false;
  /// p99 enqueue->start wait of sampled jobs, in ns.
  std::uint64_t wait_p99_ns = 0;
  /// Workers the pool lists (pool_metrics::workers).
  std::size_t workers = 0;
  /// Workers seen in one job without progress for at least health_thresholds::stuck_after.
  std::size_t stuck_workers = 0;
};

/// The outcome of one check.
struct health_check {
  std::string name;  ///< "throughput", "queue_depth", ...
  /// `warning` or `critical` when the value is beyond that level; `ok` otherwise or when not applicable.
  health_status status = health_status::ok;
  bool applicable = true;  ///< false: not enough data; status is ok
  /// The measured value (0 when not applicable).
  double value = 0.0;
  /// The warning level it was graded against (for stuck_workers: 1).
  double warning = 0.0;
  /// The critical level it was graded against (for stuck_workers: the worker count).
  double critical = 0.0;
  std::string detail;  ///< one human-readable line
};

/// The outcome of every evaluated check, folded into one status.
struct health_report {
  health_status status = health_status::ok;  ///< the worst check
  /// One entry per evaluated check, in the order of the header comment's table.
  std::vector<health_check> checks;

  /// The check called `name`, or nullptr.
  [[nodiscard]] const health_check* find(std::string_view name) const noexcept;
};

/// Runs every check whose threshold is set and folds them into a report (the worst status wins). Pure; any thread.
[[nodiscard]] health_report evaluate_health(const health_inputs& in, const health_thresholds& t);

}  // namespace thread_system::monitoring
