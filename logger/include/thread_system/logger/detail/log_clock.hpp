// log_clock: the timestamp a log call takes on the caller's thread. Reading
// system_clock costs ~25 ns here (a vDSO call); the time-stamp counter costs
// a few. The caller stores raw ticks; the writer thread converts them to
// system_clock time (logger.cpp's tick_converter, calibrated against
// steady_clock and system_clock on the writer thread).
//
//   * x86-64 with an invariant TSC (CPUID 0x80000007 EDX bit 8; constant rate,
//     not stopped in idle states): ticks are RDTSC.
//   * anywhere else: ticks are steady_clock nanoseconds.
// The choice is made once per logger (log_clock_uses_tsc()).
#pragma once

#include <chrono>
#include <cstdint>

namespace thread_system::detail {

/// Converts ticks to system_clock time on the writer thread (logger.cpp).
class tick_converter;

/// Whether this machine's TSC is usable as the log clock (checked once).
bool log_clock_uses_tsc() noexcept;

/// The current ticks: RDTSC when `tsc`, else steady_clock nanoseconds.
inline std::uint64_t log_clock_ticks(bool tsc) noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  if (tsc) return __builtin_ia32_rdtsc();
#else
  (void)tsc;
#endif
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Orders a log_clock_ticks() read before the loads that follow it (RDTSC is
/// not ordered with later loads; LFENCE makes it complete first).
inline void clock_read_fence() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_ia32_lfence();
#endif
}

}  // namespace thread_system::detail
