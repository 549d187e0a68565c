// detail/chrono.hpp: the std::chrono clocks, durations, time points,
// duration_cast and literals, from this header alone - and, with libstdc++,
// without <sstream> (the part of <chrono> that costs a third of a second per
// translation unit). The header is included first, before anything that
// could bring <sstream> in, and the check is taken right after it.
#include "thread_system/detail/chrono.hpp"

#if defined(__GLIBCXX__) && __has_include(<bits/chrono.h>)
#define CHRONO_TEST_EXPECT_LIGHT 1
#if defined(_GLIBCXX_SSTREAM)
#define CHRONO_TEST_SSTREAM_INCLUDED 1
#else
#define CHRONO_TEST_SSTREAM_INCLUDED 0
#endif
#else
#define CHRONO_TEST_EXPECT_LIGHT 0
#define CHRONO_TEST_SSTREAM_INCLUDED 0
#endif

// What the header promises, used here before any other include.
namespace chrono_test {
using namespace std::chrono_literals;
constexpr auto half = std::chrono::duration_cast<std::chrono::milliseconds>(1500us);
static_assert(half == 1ms);
static_assert(std::chrono::steady_clock::is_steady);
static_assert(std::chrono::seconds(1) + 500ms == std::chrono::milliseconds(1500));
inline std::chrono::steady_clock::time_point later(std::chrono::steady_clock::time_point t) { return t + 1ns; }
}  // namespace chrono_test

#include <gtest/gtest.h>

namespace {

TEST(Chrono, LibstdcxxGetsTheClocksWithoutSstream) {
  if (!CHRONO_TEST_EXPECT_LIGHT) GTEST_SKIP() << "another standard library: the header includes <chrono>";
  EXPECT_EQ(CHRONO_TEST_SSTREAM_INCLUDED, 0) << "detail/chrono.hpp pulled in <sstream>";
}

TEST(Chrono, ClocksAndTimePointsWork) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_GT(chrono_test::later(t0), t0);
  const auto wall = std::chrono::system_clock::now();
  EXPECT_GT(wall.time_since_epoch().count(), 0);
}

}  // namespace
