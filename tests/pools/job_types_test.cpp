// job_types (include/thread_system/pools/job_types.hpp): the default job
// types, highest priority first by underlying value, each named by
// to_string() (usable at compile time).
#include "thread_system/pools/job_types.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace ts = thread_system;
using ts::job_types;

namespace {

static_assert(ts::to_string(job_types::RealTime) == "RealTime", "to_string is constexpr");
static_assert(std::is_same_v<std::underlying_type_t<job_types>, std::uint8_t>);

TEST(JobTypes, DeclarationOrderIsPriorityOrder) {
  EXPECT_EQ(static_cast<int>(job_types::RealTime), 0);
  EXPECT_EQ(static_cast<int>(job_types::Batch), 1);
  EXPECT_EQ(static_cast<int>(job_types::Background), 2);
}

TEST(JobTypes, EachHasItsName) {
  EXPECT_EQ(ts::to_string(job_types::RealTime), std::string_view("RealTime"));
  EXPECT_EQ(ts::to_string(job_types::Batch), std::string_view("Batch"));
  EXPECT_EQ(ts::to_string(job_types::Background), std::string_view("Background"));
  EXPECT_EQ(ts::to_string(static_cast<job_types>(7)), std::string_view("unknown"));
}

}  // namespace
