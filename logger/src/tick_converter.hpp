// tick_converter: turns the log clock's ticks (detail/log_clock.hpp) into
// system_clock time on the logger's writer thread.
//
// It keeps two samples of (ticks, steady_clock, system_clock): an anchor
// taken at construction and a base re-taken at least every 50 ms. The rate
// (ns per tick) is measured from the anchor to the newest base against
// steady_clock, so its error shrinks as the baseline grows; the offset comes
// from the base's system_clock reading, so a step of the wall clock shows in
// converted times within 50 ms. With steady_clock ticks the rate is exactly
// 1 and only the offset is tracked.
//
// Each sample brackets the clock reads between two tick reads and keeps the
// tightest of three tries (its midpoint is the sample's ticks). Before the
// first 2 ms have passed the rate is unknown; the first refresh() waits for
// them (on the writer thread, once per logger).
//
// Not thread-safe: the writer thread only.
#pragma once

#include <chrono>
#include <cstdint>

namespace thread_system::detail {

class tick_converter {
 public:
  explicit tick_converter(bool tsc) noexcept;

  /// Re-takes the base when 50 ms have passed (and, the first time, waits
  /// for the calibration); call before converting a batch.
  void refresh() noexcept;

  /// system_clock time of `ticks` (taken on this machine with the same clock)
  /// by the current base and rate.
  [[nodiscard]] std::chrono::system_clock::time_point to_system(std::uint64_t ticks) const noexcept;

  /// Ns per tick currently in use (1 for steady_clock ticks).
  [[nodiscard]] double ns_per_tick() const noexcept { return ns_per_tick_; }

 private:
  struct sample {
    std::uint64_t ticks = 0;
    std::int64_t steady_ns = 0;
    std::int64_t system_ns = 0;
  };
  [[nodiscard]] sample take() const noexcept;
  void rebase(const sample& s) noexcept;

  bool tsc_;
  sample anchor_;
  sample base_;
  double ns_per_tick_ = 1.0;
  bool calibrated_ = false;
};

}  // namespace thread_system::detail
