// pools/this_job.hpp: the header that forwards to sync/this_job.hpp (tested
// in tests/sync/this_job_test.cpp) gives code that includes it from here the
// same functions.
#include "thread_system/pools/this_job.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "thread_system/sync/cancellation.hpp"

namespace ts = thread_system;

namespace {

TEST(PoolsThisJob, ForwardsToTheSyncHeader) {
  static_assert(std::is_same_v<decltype(ts::this_job::token()), ts::cancellation_token>);
  static_assert(std::is_same_v<decltype(ts::this_job::is_cancelled()), bool>);
  EXPECT_FALSE(ts::this_job::is_cancelled()) << "outside a job";
  EXPECT_FALSE(ts::this_job::token().can_be_cancelled());
}

}  // namespace
