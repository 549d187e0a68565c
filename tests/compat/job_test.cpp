#include "thread_system/compat/job.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

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

// job::to_job_function() is the one adapter every pool runs a seed job through.
TEST(SeedJobAdapter, RunsDoWorkOnceAndTurnsAnErrorIntoJobFailed) {
  int hits = 0;
  auto fn = ts::job::to_job_function(std::make_unique<ts::callback_job>([&hits] { ++hits; }), "caller");
  ASSERT_TRUE(fn);
  ASSERT_TRUE(static_cast<bool>(*fn));
  (*fn)();
  EXPECT_EQ(hits, 1);

  auto failing = ts::job::to_job_function(
      std::make_unique<ts::callback_job>(
          []() -> ts::result_void { return ts::make_error(ts::error_code::timeout, "disk full"); }, "writer"),
      "caller");
  ASSERT_TRUE(failing);
  try {
    (*failing)();
    FAIL() << "an error result must be thrown as error_exception";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::job_failed);
    const std::string what = e.what();
    EXPECT_NE(what.find("writer"), std::string::npos) << what;
    EXPECT_NE(what.find("disk full"), std::string::npos) << what;
  }
}

TEST(SeedJobAdapter, RefusesNullAndNotRunnableJobsNamingTheCaller) {
  auto null_job = ts::job::to_job_function(nullptr, "my_pool::enqueue");
  ASSERT_FALSE(null_job);
  EXPECT_EQ(null_job.error().code(), ts::error_code::invalid_argument);
  EXPECT_NE(null_job.error().message().find("my_pool::enqueue"), std::string::npos);

  std::function<void()> empty;
  auto empty_job = ts::job::to_job_function(std::make_unique<ts::callback_job>(empty, "idle"), "my_pool::enqueue");
  ASSERT_FALSE(empty_job);
  EXPECT_EQ(empty_job.error().code(), ts::error_code::invalid_argument);
  EXPECT_NE(empty_job.error().message().find("idle"), std::string::npos);
}
