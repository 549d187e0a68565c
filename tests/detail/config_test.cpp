// detail/config.hpp: THREAD_SYSTEM_HAS_STOP_TOKEN says whether the standard
// library provides std::stop_token (the feature-test macro __cpp_lib_jthread)
// unless the build overrides it; the inlining hints change no behaviour. (The
// std::stop_token interop it enables is tested in sync/cancellation_test.cpp.)
#if defined(THREAD_SYSTEM_HAS_STOP_TOKEN)
#define CONFIG_TEST_OVERRIDDEN 1
#else
#define CONFIG_TEST_OVERRIDDEN 0
#endif
#include "thread_system/detail/config.hpp"

#include <gtest/gtest.h>

#include <version>

namespace {

THREAD_SYSTEM_ALWAYS_INLINE int add_inline(int a, int b) { return a + b; }
THREAD_SYSTEM_NOINLINE int add_out_of_line(int a, int b) { return a + b; }

TEST(Config, StopTokenSupportFollowsTheStandardLibrary) {
  if (CONFIG_TEST_OVERRIDDEN) GTEST_SKIP() << "THREAD_SYSTEM_HAS_STOP_TOKEN is set by the build";
#if defined(__cpp_lib_jthread) && __cpp_lib_jthread >= 201911L
  EXPECT_EQ(THREAD_SYSTEM_HAS_STOP_TOKEN, 1);
#else
  EXPECT_EQ(THREAD_SYSTEM_HAS_STOP_TOKEN, 0);
#endif
}

TEST(Config, InliningHintsChangeNoResult) {
  EXPECT_EQ(add_inline(2, 3), 5);
  EXPECT_EQ(add_out_of_line(2, 3), 5);
}

}  // namespace
