#include "thread_system/core/job.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace ts = thread_system;

TEST(CallbackJob, ResultReturningCallback) {
  int hits = 0;
  ts::callback_job j([&hits]() -> ts::result_void {
    ++hits;
    return {};
  });
  EXPECT_TRUE(j.has_callback());
  EXPECT_TRUE(j.do_work().has_value());
  EXPECT_EQ(hits, 1);
}

TEST(CallbackJob, ErrorIsReturned) {
  ts::callback_job j([]() -> ts::result_void { return ts::make_error(ts::error_code::job_failed, "disk full"); },
                     "writer");
  auto r = j.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "disk full");
  EXPECT_EQ(j.get_name(), "writer");
}

TEST(CallbackJob, VoidCallback) {
  int hits = 0;
  ts::callback_job j([&hits] { ++hits; });
  EXPECT_TRUE(j.do_work());
  EXPECT_EQ(hits, 1);
}

TEST(CallbackJob, EmptyCallbackIsAnError) {
  std::function<ts::result_void()> empty;
  ts::callback_job j(empty);
  EXPECT_FALSE(j.has_callback());
  auto r = j.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
}
