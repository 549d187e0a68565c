// The log clock's choice (log_clock.hpp), its conversion to system_clock
// time (tick_converter.hpp).
#include <chrono>
#include <cstdint>
#include <thread>

#include "thread_system/logger/detail/log_clock.hpp"
#include "tick_converter.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define THREAD_SYSTEM_HAVE_CPUID 1
#endif

namespace thread_system::detail {

namespace {

std::int64_t ns_since_epoch(auto time_point) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time_point.time_since_epoch()).count();
}

constexpr std::int64_t rebase_interval_ns = 50'000'000;  // 50 ms
constexpr std::int64_t calibration_ns = 2'000'000;       // 2 ms before the first rate

}  // namespace

bool log_clock_uses_tsc() noexcept {
#if defined(THREAD_SYSTEM_HAVE_CPUID)
  static const bool invariant = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0x80000000U, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007U) return false;
    if (__get_cpuid(0x80000007U, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (edx & (1U << 8)) != 0;  // invariant TSC
  }();
  return invariant;
#else
  return false;
#endif
}

tick_converter::tick_converter(bool tsc) noexcept : tsc_(tsc) {
  anchor_ = take();
  base_ = anchor_;
  calibrated_ = !tsc_;
}

tick_converter::sample tick_converter::take() const noexcept {
  if (!tsc_) {
    sample s;
    s.steady_ns = ns_since_epoch(std::chrono::steady_clock::now());
    s.system_ns = ns_since_epoch(std::chrono::system_clock::now());
    s.ticks = static_cast<std::uint64_t>(s.steady_ns);
    return s;
  }
  sample best;
  std::uint64_t best_gap = ~std::uint64_t{0};
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t t1 = log_clock_ticks(true);
    const std::int64_t steady = ns_since_epoch(std::chrono::steady_clock::now());
    const std::int64_t system = ns_since_epoch(std::chrono::system_clock::now());
    const std::uint64_t t2 = log_clock_ticks(true);
    if (t2 - t1 < best_gap) {
      best_gap = t2 - t1;
      best = sample{t1 + (t2 - t1) / 2, steady, system};
    }
  }
  return best;
}

void tick_converter::rebase(const sample& s) noexcept {
  base_ = s;
  if (!tsc_) return;
  const std::int64_t elapsed_ns = s.steady_ns - anchor_.steady_ns;
  if (elapsed_ns >= calibration_ns && s.ticks > anchor_.ticks) {
    ns_per_tick_ = static_cast<double>(elapsed_ns) / static_cast<double>(s.ticks - anchor_.ticks);
    calibrated_ = true;
  }
}

void tick_converter::refresh() noexcept {
  const std::int64_t now_steady = ns_since_epoch(std::chrono::steady_clock::now());
  if (!calibrated_) {
    const std::int64_t wait_ns = anchor_.steady_ns + calibration_ns - now_steady;
    if (wait_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait_ns));
    rebase(take());
  } else if (now_steady - base_.steady_ns >= rebase_interval_ns) {
    rebase(take());
  }
}

std::chrono::system_clock::time_point tick_converter::to_system(std::uint64_t ticks) const noexcept {
  // Signed: records older than the base convert backwards.
  const auto delta = static_cast<std::int64_t>(ticks - base_.ticks);
  const auto offset = static_cast<std::int64_t>(static_cast<double>(delta) * ns_per_tick_);
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::nanoseconds(base_.system_ns + offset)));
}

}  // namespace thread_system::detail
