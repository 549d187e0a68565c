// The jobs behind submit() and a token's enqueue() (include/thread_system/pools/submission.hpp),
// run and cancelled by hand here, without a pool: what a future receives,
// when the callable is destroyed, what a token does to a job, and
// this_job::token() while it runs.
#include "thread_system/pools/submission.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace thread_system {
namespace {

using detail::make_cancellable_job;
using detail::make_cancellable_submission;
using detail::make_submission;

template <typename T>
error_exception error_of(future<T>& f) {
  try {
    (void)f.get();
  } catch (const error_exception& e) {
    return e;
  }
  ADD_FAILURE() << "get() did not throw an error_exception";
  return error_exception(error{error_code::ok, ""});
}

TEST(Submission, RunningTheJobCompletesTheFutureWithTheValue) {
  auto [f, job] = make_submission([](int a, int b) { return a * b; }, 6, 7);
  EXPECT_FALSE(f.is_ready()) << "nothing ran yet";
  EXPECT_EQ(job.run(), job_outcome::succeeded);
  EXPECT_TRUE(f.is_ready());
  EXPECT_EQ(f.get(), 42);
}

TEST(Submission, AThrowingCallableDeliversItsExceptionToTheFuture) {
  auto [f, job] = make_submission([]() -> int { throw std::runtime_error("no value"); });
  EXPECT_EQ(job.run(), job_outcome::failed_reported) << "reported through the future, not the error handler";
  EXPECT_THROW((void)f.get(), std::runtime_error);
}

TEST(Submission, BoundArgumentsAreMovedIntoTheCall) {
  auto owned = std::make_unique<int>(5);
  auto [f, job] = make_submission([](std::unique_ptr<int> p) { return *p + 1; }, std::move(owned));
  (void)job.run();
  EXPECT_EQ(f.get(), 6);
}

// The callable and its bound arguments are gone before the future is ready:
// a thread that sees the result may free what the callable referred to.
TEST(Submission, TheCallableIsDestroyedBeforeTheFutureIsCompleted) {
  struct watcher {
    const future<int>* watched;
    bool* ready_at_destruction;
    int operator()() const { return 1; }
    watcher(const future<int>* f, bool* out) : watched(f), ready_at_destruction(out) {}
    watcher(watcher&& o) noexcept : watched(o.watched), ready_at_destruction(o.ready_at_destruction) {
      o.ready_at_destruction = nullptr;
    }
    watcher(const watcher&) = delete;
    watcher& operator=(const watcher&) = delete;
    watcher& operator=(watcher&&) = delete;
    ~watcher() {
      if (ready_at_destruction != nullptr && watched->valid()) *ready_at_destruction = watched->is_ready();
    }
  };
  future<int> holder;
  bool ready_at_destruction = true;
  auto [f, job] = make_submission(watcher(&holder, &ready_at_destruction));
  holder = std::move(f);
  (void)job.run();
  EXPECT_FALSE(ready_at_destruction);
  EXPECT_EQ(holder.get(), 1);
}

TEST(Submission, ACancelledJobCompletesTheFutureWithCancelledAndTheReason) {
  auto probe = std::make_shared<int>(0);
  auto [f, job] = make_submission([probe] { return *probe; });
  EXPECT_EQ(probe.use_count(), 2);
  job.cancel("shed by the test");
  EXPECT_EQ(probe.use_count(), 1) << "the callable is destroyed by the cancellation";
  const auto e = error_of(f);
  EXPECT_EQ(e.code(), error_code::cancelled);
  EXPECT_NE(std::string(e.what()).find("shed by the test"), std::string::npos) << e.what();
}

TEST(Submission, CancelWithoutAReasonSaysTheStopDiscardedIt) {
  auto [f, job] = make_submission([] {});
  job.cancel();
  const auto e = error_of(f);
  EXPECT_EQ(e.code(), error_code::cancelled);
  EXPECT_NE(std::string(e.what()).find("stop(stop_mode::cancel_pending)"), std::string::npos) << e.what();
}

// A job destroyed neither run nor cancelled (no pool does it; a queue
// destroyed with jobs in it would) completes its future with `cancelled`,
// as a destroyed std::promise breaks its future: the future used to wait
// forever. A job that ran or was cancelled completes it once, and a
// moved-from job completes nothing.
TEST(Submission, AJobDestroyedWithoutRunningCompletesTheFutureWithCancelled) {
  {
    auto [f, job] = make_submission([] { return 1; });
    { const job_function gone = std::move(job); }
    ASSERT_TRUE(f.is_ready()) << "the future would wait forever";
    const auto e = error_of(f);
    EXPECT_EQ(e.code(), error_code::cancelled);
    EXPECT_NE(std::string(e.what()).find("destroyed without running"), std::string::npos) << e.what();
  }
  {
    auto [f, job] = make_submission([] { return 2; });
    ASSERT_EQ(job.run(), job_outcome::succeeded);
    { const job_function gone = std::move(job); }
    EXPECT_EQ(f.get(), 2) << "a job that ran is not cancelled when destroyed";
  }
  {
    auto [f, job] = make_cancellable_submission(cancellation_token{}, [] { return 3; });
    { const job_function gone = std::move(job); }
    EXPECT_EQ(error_of(f).code(), error_code::cancelled) << "through a token's wrapper too";
  }
}

TEST(Submission, ANullCallableIsRefusedWithInvalidArgument) {
  int (*none)() = nullptr;
  try {
    (void)make_submission(none);
    ADD_FAILURE() << "accepted a null callable";
  } catch (const error_exception& e) {
    EXPECT_EQ(e.code(), error_code::invalid_argument);
  }
  EXPECT_FALSE(make_cancellable_job(cancellation_token{}, none)) << "an empty job: the pool's entry point refuses it";
}

TEST(TokenJob, ATokenCancelledBeforeTheStartSkipsTheJobAndSaysSo) {
  cancellation_source source;
  int runs = 0;
  auto [f, job] = make_cancellable_submission(source.token(), [&runs] { return ++runs; });
  source.cancel();
  EXPECT_EQ(job.run(), job_outcome::cancelled);
  EXPECT_EQ(runs, 0);
  const auto e = error_of(f);
  EXPECT_EQ(e.code(), error_code::cancelled);
  EXPECT_NE(std::string(e.what()).find("by its token"), std::string::npos) << e.what();
}

TEST(TokenJob, WhileItRunsThisJobTokenIsItsTokenAndAfterwardsNone) {
  cancellation_source source;
  bool same_state = false;
  bool cancelled_inside = true;
  auto job = make_cancellable_job(source.token(), [&] {
    same_state = this_job::token() == source.token();
    cancelled_inside = this_job::is_cancelled();
  });
  EXPECT_FALSE(this_job::is_cancelled());
  EXPECT_EQ(job.run(), job_outcome::succeeded);
  EXPECT_TRUE(same_state);
  EXPECT_FALSE(cancelled_inside);
  EXPECT_FALSE(this_job::token().can_be_cancelled()) << "restored: outside a job the token is none";
}

TEST(TokenJob, ACancelledPlainJobDoesNotRun) {
  cancellation_source source;
  int runs = 0;
  auto job = make_cancellable_job(source.token(), [&runs] { ++runs; });
  source.cancel();
  EXPECT_EQ(job.run(), job_outcome::cancelled);
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace thread_system
