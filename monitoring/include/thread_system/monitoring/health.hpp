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
//   | utilisation  | busy share of the workers over the last     | > 98 %    | > 99.9 %  |
//   |              | sampling interval                          |           |           |
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

enum class health_status : int { ok = 0, warning = 1, critical = 2 };

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
  double warning = 0.0;
  double critical = 0.0;
};

struct health_thresholds {
  std::optional<threshold> throughput_per_s = threshold{50'000.0, 10'000.0};  ///< below
  std::optional<threshold> queue_depth = threshold{50.0, 200.0};              ///< above
  std::optional<threshold> error_rate = threshold{0.01, 0.05};                ///< above (fraction)
  std::optional<threshold> utilisation = threshold{0.98, 0.999};              ///< above (fraction)
  std::optional<threshold> wait_p99_ns;                                       ///< above; off by default
  /// A worker whose current job has not finished for this long is stuck
  /// (warning; critical when every worker is stuck). Zero disables.
  std::chrono::nanoseconds stuck_after = std::chrono::seconds{10};
};

/// What the checks look at; pool_monitor fills it from its samples.
struct health_inputs {
  bool have_window = false;        ///< at least two samples, so rates exist
  double throughput_per_s = 0.0;   ///< jobs finished per second over the window
  bool backlog_sustained = false;  ///< queue depth > 0 at every sample of the window
  std::uint64_t queue_depth = 0;
  std::uint64_t window_executed = 0;  ///< jobs run in the window (failed included)
  std::uint64_t window_failed = 0;
  double utilisation = 0.0;  ///< mean over workers, last interval
  bool have_wait_latency = false;
  std::uint64_t wait_p99_ns = 0;
  std::size_t workers = 0;
  std::size_t stuck_workers = 0;
};

struct health_check {
  std::string name;  ///< "throughput", "queue_depth", ...
  health_status status = health_status::ok;
  bool applicable = true;  ///< false: not enough data; status is ok
  double value = 0.0;
  double warning = 0.0;
  double critical = 0.0;
  std::string detail;  ///< one human-readable line
};

struct health_report {
  health_status status = health_status::ok;  ///< the worst check
  std::vector<health_check> checks;

  /// The check called `name`, or nullptr.
  [[nodiscard]] const health_check* find(std::string_view name) const noexcept;
};

[[nodiscard]] health_report evaluate_health(const health_inputs& in, const health_thresholds& t);

}  // namespace thread_system::monitoring
