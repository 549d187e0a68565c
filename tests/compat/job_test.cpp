#include "thread_system/compat/job.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/cancellation.hpp"

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

// An empty job_function is an empty callback like an empty std::function:
// the job is not runnable and a pool refuses it at enqueue. (It was
// accepted, and failed with invalid_argument when it ran.)
TEST(CallbackJob, AnEmptyJobFunctionIsAnEmptyCallbackThatPoolsRefuse) {
  ts::callback_job j{ts::job_function{}};
  EXPECT_FALSE(j.has_callback());
  EXPECT_FALSE(j.runnable());
  EXPECT_TRUE(ts::job_function{} == nullptr);
  EXPECT_FALSE(ts::job_function([] {}) == nullptr);
  ts::thread_pool pool{1};
  const auto refused = pool.enqueue(std::make_unique<ts::callback_job>(ts::job_function{}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::invalid_argument);
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().failed, 0U);
  EXPECT_FALSE(pool.schedule_after(std::chrono::milliseconds(1), ts::job_function{}))
      << "the timer's empty-function check sees it too";
  ts::cancellation_source source;
  const auto with_token = pool.enqueue(source.token(), ts::job_function{});
  ASSERT_FALSE(with_token);
  EXPECT_EQ(with_token.error().code(), ts::error_code::invalid_argument);
  try {
    (void)pool.submit(ts::job_function{});
    ADD_FAILURE() << "submit() accepted an empty job_function";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
  }
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().failed, 0U) << "nothing accepted failed when it ran";
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

namespace {
ts::result<void> failing() { return ts::make_error(ts::error_code::invalid_argument, "from a function"); }
const ts::result<void>& failing_by_reference() {
  static const ts::result<void> r = ts::make_error(ts::error_code::invalid_argument, "by reference");
  return r;
}
}  // namespace

// A callback returning a cv- or reference-qualified result<void> still has
// its error reported. (Only the exact type result<void> was recognised:
// the others went down the void path and the error was dropped.)
TEST(CallbackJob, QualifiedResultReturnsAreReported) {
  ts::callback_job by_const_value(
      []() -> const ts::result<void> { return ts::make_error(ts::error_code::invalid_argument, "const"); });
  auto r = by_const_value.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "const");
  ts::callback_job by_reference(&failing_by_reference);
  r = by_reference.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "by reference");
  ts::callback_job plain(&failing);
  EXPECT_FALSE(plain.do_work());
}

// A callback whose return type is deduced from make_error() (an
// unexpected_error) or an error, or a result<T> with a value type, fails
// do_work() with its error. (They counted as "any other value": discarded,
// and the job succeeded.)
TEST(CallbackJob, DeducedAndValueResultErrorsAreReturned) {
  ts::callback_job unexpected([] { return ts::make_error(ts::error_code::job_failed, "deduced"); });
  auto r = unexpected.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::job_failed);
  EXPECT_EQ(r.error().message(), "deduced");
  ts::callback_job plain_error([] { return ts::error{ts::error_code::timeout, "plain"}; });
  r = plain_error.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::timeout);
  ts::callback_job with_value([]() -> ts::result<int> { return ts::make_error(ts::error_code::not_found, "int"); });
  r = with_value.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "int");
  ts::callback_job value_ok([]() -> ts::result<int> { return 3; });
  EXPECT_TRUE(value_ok.do_work());
  ts::callback_job no_error([] { return ts::error{}; });
  EXPECT_TRUE(no_error.do_work());
}

// A move-only callback (a lambda owning a unique_ptr) is accepted, with or
// without a result. (It was a compile error inside std::function.)
TEST(CallbackJob, MoveOnlyCallbacksAreAccepted) {
  int ran = 0;
  auto owned = std::make_unique<int>(5);
  ts::callback_job void_job([p = std::move(owned), &ran] { ran += *p; });
  EXPECT_TRUE(void_job.do_work());
  auto owned2 = std::make_unique<int>(6);
  ts::callback_job result_job([p = std::move(owned2), &ran]() -> ts::result<void> {
    ran += *p;
    return ts::make_error(ts::error_code::job_failed, "six");
  });
  EXPECT_FALSE(result_job.do_work());
  EXPECT_EQ(ran, 11);
}
