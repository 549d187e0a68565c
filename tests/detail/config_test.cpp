// detail/config.hpp: THREAD_SYSTEM_HAS_STOP_TOKEN says whether the standard
// library provides std::stop_token (the feature-test macro __cpp_lib_jthread),
// and where it is 1 the library's interop with it is compiled; the inlining
// hints change no behaviour.
#include "thread_system/detail/config.hpp"

#include <gtest/gtest.h>

#include <version>

#include "thread_system/sync/cancellation.hpp"

#if THREAD_SYSTEM_HAS_STOP_TOKEN
#include <stop_token>
#endif

namespace ts = thread_system;

namespace {

THREAD_SYSTEM_ALWAYS_INLINE int add_inline(int a, int b) { return a + b; }
THREAD_SYSTEM_NOINLINE int add_out_of_line(int a, int b) { return a + b; }

TEST(Config, StopTokenSupportFollowsTheStandardLibrary) {
#if defined(__cpp_lib_jthread) && __cpp_lib_jthread >= 201911L
  EXPECT_EQ(THREAD_SYSTEM_HAS_STOP_TOKEN, 1);
#else
  EXPECT_EQ(THREAD_SYSTEM_HAS_STOP_TOKEN, 0);
#endif
}

#if THREAD_SYSTEM_HAS_STOP_TOKEN
TEST(Config, WithStopTokenTheInteropIsCompiled) {
  // A std::stop_source's request reaches a token made from it.
  std::stop_source source;
  ts::cancellation_token token = ts::cancellation_token::from_stop_token(source.get_token());
  EXPECT_FALSE(token.is_cancelled());
  source.request_stop();
  EXPECT_TRUE(token.is_cancelled());
}
#endif

TEST(Config, InliningHintsChangeNoResult) {
  EXPECT_EQ(add_inline(2, 3), 5);
  EXPECT_EQ(add_out_of_line(2, 3), 5);
}

}  // namespace
