// Checked conversion of user-supplied durations to the steady clock's
// duration, shared by every call that takes a timeout, a delay or a period.
//
// A std::chrono::duration may hold anything its representation can: NaN or
// infinity in a floating-point one, a count whose conversion to nanoseconds
// overflows in an integer one. Converting those with duration_cast is
// undefined behaviour. classify() sorts a duration first; to_clock_duration()
// then converts with saturation and rounds up, so a timer never fires early.
#pragma once

#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

#include "thread_system/detail/chrono.hpp"

namespace thread_system::detail {

enum class duration_kind {
  nan,       ///< not a number (floating-point representations only)
  negative,  ///< below zero, including -infinity
  zero,
  positive,  ///< finite and representable on the steady clock
  too_long,  ///< +infinity, or beyond steady_clock::duration::max()
};

template <typename Rep, typename Period>
[[nodiscard]] constexpr duration_kind classify(std::chrono::duration<Rep, Period> d) noexcept {
  using clock_duration = std::chrono::steady_clock::duration;
  if constexpr (std::is_floating_point_v<Rep>) {
    // Without <cmath> (kept out of every header that takes a duration), and
    // without comparing the value with itself, which users' -Wfloat-equal
    // would flag: GCC's and Clang's builtin, usable in constant expressions.
#if defined(__GNUC__) || defined(__clang__)
    if (__builtin_isnan(d.count())) return duration_kind::nan;
#else
    if (d.count() != d.count()) return duration_kind::nan;  // NOLINT(misc-redundant-expression): NaN only
#endif
  }
  if (d < d.zero()) return duration_kind::negative;
  if (d == d.zero()) return duration_kind::zero;
  // Compared in long double: exact for every integer count up to 2^64 and
  // free of the overflow a duration_cast would risk.
  const long double seconds = static_cast<long double>(d.count()) * static_cast<long double>(Period::num) /
                              static_cast<long double>(Period::den);
  const long double limit = static_cast<long double>(clock_duration::max().count()) *
                            static_cast<long double>(clock_duration::period::num) /
                            static_cast<long double>(clock_duration::period::den);
  // A margin of one part in a million (about 2.6 hours of the ~292 years):
  // the conversion computes in the common type of Rep and intmax_t, a float
  // for duration<float>, whose rounding (2^-24 relative) could carry a value
  // just below the limit past 2^63 nanoseconds - an undefined conversion.
  // (One second of margin, as before, covered double but not float.)
  return seconds >= limit * (1.0L - 1e-6L) ? duration_kind::too_long : duration_kind::positive;
}

#if defined(__SIZEOF_INT128__)
__extension__ using wide_int = __int128;  // exact for any integer count times any period's numerator
#else
using wide_int = long double;                               // exact to 2^64 where long double has a 64-bit mantissa
#endif

/// An integer duration `d` in units of `To`'s period, rounded up (ceil) or
/// down (floor), computed wide: duration_cast multiplies in intmax_t, which
/// overflows for periods such as 1/3 or 1/7 of a second long before the
/// result leaves int64 (a ~200-year timeout; a system_clock time point
/// since 1970 in 1/7 s ticks).
template <typename To, bool RoundUp, typename Rep, typename Period>
[[nodiscard]] constexpr wide_int count_in_wide(std::chrono::duration<Rep, Period> d) noexcept {
  static_assert(std::is_integral_v<Rep>);
  using r = std::ratio_divide<Period, typename To::period>;
  const wide_int n = static_cast<wide_int>(d.count()) * static_cast<wide_int>(r::num);
  const wide_int den = static_cast<wide_int>(r::den);
#if defined(__SIZEOF_INT128__)
  wide_int q = n / den;
#else
  wide_int q = static_cast<wide_int>(static_cast<std::intmax_t>(n / den));  // truncated toward zero
#endif
  const wide_int rem = n - q * den;
  if constexpr (RoundUp) {
    if (rem > 0) q += 1;
  } else {
    if (rem < 0) q -= 1;
  }
  return q;
}

/// `d` on the steady clock, rounded up (so a wait or a timer is never
/// short), saturating at duration::max(); zero for zero, NaN and negative
/// durations (callers that refuse those check classify() first).
template <typename Rep, typename Period>
[[nodiscard]] constexpr std::chrono::steady_clock::duration to_clock_duration(
    std::chrono::duration<Rep, Period> d) noexcept {
  using clock_duration = std::chrono::steady_clock::duration;
  switch (classify(d)) {
    case duration_kind::nan:
    case duration_kind::negative:
    case duration_kind::zero:
      return clock_duration::zero();
    case duration_kind::too_long:
      return clock_duration::max();
    case duration_kind::positive:
      break;
  }
  if constexpr (std::is_integral_v<Rep>) {
    const wide_int c = count_in_wide<clock_duration, /*RoundUp=*/true>(d);
    return c >= static_cast<wide_int>(clock_duration::max().count())
               ? clock_duration::max()
               : clock_duration(static_cast<clock_duration::rep>(c));
  } else {
    const clock_duration c = std::chrono::ceil<clock_duration>(d);
    return c < clock_duration::zero() ? clock_duration::max() : c;  // rounding at the very top
  }
}

/// The deadline of a wait for `d` that begins at `now_ns` (steady-clock
/// nanoseconds), for the waits that take a timeout: 0 for none (a duration
/// too long to represent, or a sum past the clock's range), `now_ns` when
/// already expired (zero, negative and NaN durations: only a check).
template <typename Rep, typename Period>
[[nodiscard]] std::int64_t deadline_ns_after(std::chrono::duration<Rep, Period> d, std::int64_t now_ns) noexcept {
  switch (classify(d)) {
    case duration_kind::positive: {
      const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(to_clock_duration(d)).count();
      return ns < std::numeric_limits<std::int64_t>::max() - now_ns ? now_ns + ns : 0;
    }
    case duration_kind::too_long:
      return 0;
    case duration_kind::nan:
    case duration_kind::negative:
    case duration_kind::zero:
      break;
  }
  return now_ns;
}

/// Nanoseconds from `now` to `t` (one clock), rounded up, without overflow
/// whatever `t`'s duration (hours::max(), a float, picoseconds): <= 0 when
/// `t` is not after `now` (a NaN `t` too), INT64_MAX when `t` is more than
/// ~100 years ahead (a wait without a deadline).
template <typename Clock, typename Duration>
[[nodiscard]] std::int64_t ns_until(std::chrono::time_point<Clock, Duration> t,
                                    typename Clock::time_point now) noexcept {
  constexpr double far_seconds = 100.0 * 365 * 24 * 3600;
  // Placed in double seconds first: on the common duration of `t` and `now`
  // a far or coarse `t` (or `now` on a finer one) overflows.
  const double ahead = std::chrono::duration<double>(t.time_since_epoch()).count() -
                       std::chrono::duration<double>(now.time_since_epoch()).count();
  if (ahead >= far_seconds) return std::numeric_limits<std::int64_t>::max();  // also +infinity
  if (!(ahead > -far_seconds)) return 0;                                      // long past, -infinity, NaN
  // Within a century of `now`: the difference fits nanoseconds. Each side
  // is converted wide (integer counts: see count_in_wide()), as the count
  // since the clock's epoch in a coarse or odd period may not fit.
  using ns = std::chrono::nanoseconds;
  if constexpr (std::is_integral_v<typename Duration::rep> && std::is_integral_v<typename Clock::duration::rep>) {
    const wide_int t_ns = count_in_wide<ns, /*RoundUp=*/true>(t.time_since_epoch());
    const wide_int now_ns = count_in_wide<ns, /*RoundUp=*/false>(now.time_since_epoch());
    return static_cast<std::int64_t>(t_ns - now_ns);
  } else {
    const auto t_ns = std::chrono::ceil<ns>(t.time_since_epoch());
    const auto now_ns = std::chrono::floor<ns>(now.time_since_epoch());
    return (t_ns - now_ns).count();
  }
}

/// `from + d` for a positive `d`, saturating at time_point::max(); `from`
/// for `d <= 0`. Any `from`: one before the epoch (negative) cannot
/// overflow with a positive `d`, and `max() - from` would.
[[nodiscard]] inline std::chrono::steady_clock::time_point saturating_add(
    std::chrono::steady_clock::time_point from, std::chrono::steady_clock::duration d) noexcept {
  using tp = std::chrono::steady_clock::time_point;
  if (d <= d.zero()) return from;
  if (from.time_since_epoch() < d.zero()) return from + d;
  return d >= tp::max() - from ? tp::max() : from + d;
}

}  // namespace thread_system::detail
