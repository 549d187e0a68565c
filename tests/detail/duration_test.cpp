// detail/duration.hpp: sorting user durations (classify), converting them to
// the steady clock without undefined behaviour (to_clock_duration) and adding
// them to a time point without overflow (saturating_add). The expected
// values are written out by hand, not computed with the functions under test.
#include "thread_system/detail/duration.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ratio>

namespace {

namespace d = thread_system::detail;
using clock_duration = std::chrono::steady_clock::duration;
using time_point = std::chrono::steady_clock::time_point;
using fp_seconds = std::chrono::duration<double>;
using fp_nanoseconds = std::chrono::duration<double, std::nano>;
using picoseconds = std::chrono::duration<std::int64_t, std::pico>;

TEST(Duration, ClassifySortsEveryKindOfValue) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(d::classify(fp_seconds(nan)), d::duration_kind::nan);
  EXPECT_EQ(d::classify(fp_seconds(-inf)), d::duration_kind::negative);
  EXPECT_EQ(d::classify(fp_seconds(-0.5)), d::duration_kind::negative);
  EXPECT_EQ(d::classify(std::chrono::milliseconds(-1)), d::duration_kind::negative);
  EXPECT_EQ(d::classify(std::chrono::seconds(0)), d::duration_kind::zero);
  EXPECT_EQ(d::classify(fp_seconds(0.0)), d::duration_kind::zero);
  EXPECT_EQ(d::classify(picoseconds(1)), d::duration_kind::positive);
  EXPECT_EQ(d::classify(std::chrono::hours(24 * 365)), d::duration_kind::positive);
  EXPECT_EQ(d::classify(fp_seconds(inf)), d::duration_kind::too_long);
  // hours::max() is far beyond what nanoseconds in 64 bits hold (~292 years):
  // a duration_cast of it would overflow.
  EXPECT_EQ(d::classify(std::chrono::hours::max()), d::duration_kind::too_long);
  EXPECT_EQ(d::classify(clock_duration::max()), d::duration_kind::too_long);
  EXPECT_EQ(d::classify(std::chrono::hours(24 * 365 * 300)), d::duration_kind::too_long);
}

TEST(Duration, ConversionRoundsUpSoAWaitIsNeverShort) {
  EXPECT_EQ(d::to_clock_duration(picoseconds(1)), std::chrono::nanoseconds(1));
  EXPECT_EQ(d::to_clock_duration(picoseconds(1001)), std::chrono::nanoseconds(2));
  EXPECT_EQ(d::to_clock_duration(fp_nanoseconds(1.5)), std::chrono::nanoseconds(2));
  EXPECT_EQ(d::to_clock_duration(fp_nanoseconds(1e-300)), std::chrono::nanoseconds(1));
  EXPECT_EQ(d::to_clock_duration(std::chrono::milliseconds(3)), std::chrono::nanoseconds(3'000'000));
  EXPECT_EQ(d::to_clock_duration(fp_seconds(0.25)), std::chrono::nanoseconds(250'000'000));
}

TEST(Duration, ConversionSaturatesAndMapsRefusedValuesToZero) {
  EXPECT_EQ(d::to_clock_duration(std::chrono::hours::max()), clock_duration::max());
  EXPECT_EQ(d::to_clock_duration(fp_seconds(std::numeric_limits<double>::infinity())), clock_duration::max());
  EXPECT_EQ(d::to_clock_duration(fp_seconds(std::numeric_limits<double>::quiet_NaN())), clock_duration::zero());
  EXPECT_EQ(d::to_clock_duration(std::chrono::seconds(-5)), clock_duration::zero());
  EXPECT_EQ(d::to_clock_duration(std::chrono::seconds(0)), clock_duration::zero());
}

// Every float just below and at the ~292-year limit: a float's conversion
// rounds by up to 2^-24 relative (~550 s there), and a value classified
// positive one second below the limit could convert past 2^63 ns -
// undefined (the sanitizer build traps float-cast-overflow). Each converts
// to a positive duration, never below what was asked, or saturates.
TEST(Duration, FloatDurationsNearTheLimitConvertWithoutOverflow) {
  using float_seconds = std::chrono::duration<float>;
  using float_nanoseconds = std::chrono::duration<float, std::nano>;
  const float limit_s = 9.223372e9F;  // clock_duration::max() is 9.2233720368e9 s
  int seen = 0;
  for (float x = 9.2233e9F; x <= 9.2234e9F; x = std::nextafter(x, 1e10F), ++seen) {
    const clock_duration c = d::to_clock_duration(float_seconds(x));
    EXPECT_GT(c, clock_duration::zero()) << x;
    if (x < limit_s * 0.99999F) {
      EXPECT_GE(std::chrono::duration<double>(c).count(), static_cast<double>(x)) << x;
    }
    const clock_duration n = d::to_clock_duration(float_nanoseconds(x * 1e9F));
    EXPECT_GT(n, clock_duration::zero()) << x;
  }
  EXPECT_GT(seen, 50);
}

TEST(Duration, SaturatingAddStopsAtTheLastTimePoint) {
  const time_point t{std::chrono::seconds(100)};
  EXPECT_EQ(d::saturating_add(t, std::chrono::seconds(1)), time_point{std::chrono::seconds(101)});
  EXPECT_EQ(d::saturating_add(t, clock_duration::zero()), t);
  EXPECT_EQ(d::saturating_add(t, std::chrono::seconds(-1)), t);  // never moves back
  EXPECT_EQ(d::saturating_add(t, clock_duration::max()), time_point::max());
  EXPECT_EQ(d::saturating_add(time_point::max(), std::chrono::nanoseconds(1)), time_point::max());
  // Exactly up to the last time point, and one past it.
  const clock_duration room = time_point::max() - t;
  EXPECT_EQ(d::saturating_add(t, room - std::chrono::nanoseconds(1)), time_point::max() - std::chrono::nanoseconds(1));
  EXPECT_EQ(d::saturating_add(t, room), time_point::max());
  // A time point before the epoch: no overflow (max() - from overflowed:
  // undefined behaviour, UBSan's signed-integer-overflow).
  EXPECT_EQ(d::saturating_add(time_point::min(), std::chrono::seconds(1)), time_point::min() + std::chrono::seconds(1));
  EXPECT_EQ(d::saturating_add(time_point::min(), clock_duration::max()), time_point{clock_duration(-1)});
  EXPECT_EQ(d::saturating_add(time_point{std::chrono::seconds(-5)}, std::chrono::seconds(2)),
            time_point{std::chrono::seconds(-3)});
}

}  // namespace

// Periods whose conversion factor to nanoseconds is not an integer (1/3,
// 1/7 s): converted exactly, rounded the right way, with no intmax_t
// overflow in between (duration_cast multiplied the count by 10^9 first:
// UB, and a ~211-year timeout came out as ~16 years; a system_clock time
// point since 1970 in sevenths of a second overflowed in ns_until).
TEST(Duration, OddPeriodsConvertExactlyWithoutOverflow) {
  using thirds = std::chrono::duration<long long, std::ratio<1, 3>>;
  using sevenths = std::chrono::duration<long long, std::ratio<1, 7>>;
  EXPECT_EQ(d::to_clock_duration(thirds(20'000'000'000LL)).count(), 6'666'666'666'666'666'667LL);  // ceil
  EXPECT_EQ(d::to_clock_duration(thirds(1)).count(), 333'333'334LL);
  EXPECT_EQ(d::to_clock_duration(sevenths(7)).count(), 1'000'000'000LL);
  const auto now = std::chrono::system_clock::now();
  // (Built from whole seconds: ceil<sevenths>(now) would overflow in std::chrono itself.)
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const auto ahead = sevenths((whole + 1) * 7) + sevenths(7);  // 1-2 s ahead
  const std::int64_t left = d::ns_until(std::chrono::time_point<std::chrono::system_clock, sevenths>(ahead), now);
  EXPECT_GE(left, 1'000'000'000LL);
  EXPECT_LE(left, 2'000'000'000LL);
  EXPECT_EQ(d::ns_until(std::chrono::time_point<std::chrono::system_clock, sevenths>(sevenths(1)),
                        std::chrono::system_clock::time_point{}),
            142'857'143LL);  // rounded up: never a short wait
}
