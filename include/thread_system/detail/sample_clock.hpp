// The clock of latency sampling (pool_options::latency_sample_every): a
// monotonic nanosecond timeline that is cheap to read.
//
// A sampled job costs three clock readings (the enqueue stamp, its start and
// its end). std::chrono::steady_clock::now() is a vDSO clock_gettime call,
// about 30 ns on the development machine; the x86 time-stamp counter (RDTSC)
// is about 12 ns there. The counter is used only where the operating system
// itself trusts it as a clock - on Linux, when the kernel's current
// clocksource is "tsc", which the kernel selects only for an invariant
// counter that is synchronised across CPUs - and elsewhere (other kernels,
// other architectures, or THREAD_SYSTEM_SAMPLE_CLOCK=steady in the
// environment) the timeline is steady_clock's.
//
// Ticks become nanoseconds with a rate measured against steady_clock: the
// first readings (calibration_ns long) come from steady_clock; then one
// thread reads both clocks together and publishes the rate, and the counter
// timeline continues from that steady_clock reading, so it never goes back
// at the switch. Only differences between two readings are meaningful
// (wait = start - stamp, run = end - start); the rate's error (a few parts
// per million) scales them, it does not accumulate into them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#define THREAD_SYSTEM_SAMPLE_CLOCK_TSC 1
#else
#define THREAD_SYSTEM_SAMPLE_CLOCK_TSC 0
#endif

namespace thread_system::detail {

/// What detail::sample_clock reads.
enum class sample_clock_source : int {
  calibrating,  ///< readings come from steady_clock until the rate is known
  tsc,          ///< the time-stamp counter, converted with the measured rate
  steady,       ///< steady_clock only (the counter is not trusted here)
};

// The clock's shared state (one per process).
struct alignas(64) sample_clock_state {
  std::atomic<sample_clock_source> mode{sample_clock_source::calibrating};
  // Written once, before `mode` becomes `tsc` (release), never after.
  std::uint64_t base_ticks = 0;
  std::uint64_t base_ns = 0;
  std::uint64_t mult = 0;  // nanoseconds per tick, 32.32 fixed point

  std::uint64_t from_ticks(std::uint64_t ticks) const noexcept {
    // Ticks before the base (another CPU's reading a few cycles earlier)
    // count as the base: the timeline stays monotonic.
    const std::uint64_t delta = ticks > base_ticks ? ticks - base_ticks : 0;
    __extension__ typedef unsigned __int128 uint128;  // (GCC and Clang on 64-bit targets)
    return base_ns + static_cast<std::uint64_t>((static_cast<uint128>(delta) * mult) >> 32);
  }
};

class sample_clock {
 public:
  using source = sample_clock_source;

  /// How long the first readings come from steady_clock while the rate is
  /// measured.
  static constexpr std::uint64_t calibration_ns = 20'000'000;

  /// Nanoseconds on the sampling timeline.
  static std::uint64_t now_ns() noexcept {
#if THREAD_SYSTEM_SAMPLE_CLOCK_TSC
    // acquire: pairs with the release store that publishes the rate in
    // slow_now_ns(); whoever sees `tsc` sees base_ticks/base_ns/mult.
    if (state_.mode.load(std::memory_order_acquire) == source::tsc) return state_.from_ticks(__rdtsc());
#endif
    return slow_now_ns();
  }

  /// The source now_ns() reads.
  static source current_source() noexcept {
    return state_.mode.load(std::memory_order_acquire);  // pairs with the publishing release store
  }

  /// steady_clock in nanoseconds (the fallback and the reference).
  static std::uint64_t steady_ns() noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }

 private:
  // Out of line: steady_clock, plus the calibration steps.
  static std::uint64_t slow_now_ns() noexcept;

  static inline sample_clock_state state_{};
};

}  // namespace thread_system::detail
