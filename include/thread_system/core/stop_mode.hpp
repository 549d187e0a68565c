// How a pool (and the timer queue) stops, and what stopping reports: the
// vocabulary of stop(), below every layer that has a stop().
#pragma once

#include <cstdint>

namespace thread_system {

/// What `stop()` does with jobs that were accepted but have not started.
enum class stop_mode {
  /// Run every accepted job, then stop. New submissions are refused with
  /// `pool_stopped` from the moment stop() is called, including submissions
  /// made by running jobs, so a pool whose jobs keep spawning jobs still stops.
  drain,
  /// Let running jobs finish; discard the rest. Each discarded job is
  /// cancelled: a `submit()` future gets an `error_exception` with code
  /// `cancelled`, and the pool's `cancelled` counter grows by one.
  cancel_pending,
};

/// Counts returned by `stop()`. After stop(): accepted == executed + cancelled.
struct stop_report {
  std::uint64_t accepted = 0;   ///< Jobs the pool accepted over its lifetime.
  std::uint64_t executed = 0;   ///< Jobs that ran (successfully or not).
  std::uint64_t failed = 0;     ///< Of those, jobs that threw or reported an error.
  std::uint64_t cancelled = 0;  ///< Jobs discarded without running.
};

}  // namespace thread_system
