// GoogleTest main with a per-test deadlock watchdog: a test that runs longer
// than THREAD_SYSTEM_TEST_TIMEOUT_SECONDS (set by the build; the environment
// variable THREAD_SYSTEM_TEST_TIMEOUT overrides it) prints its name and
// aborts the process, so a deadlock fails fast instead of hanging CI.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

class watchdog_listener : public testing::EmptyTestEventListener {
 public:
  explicit watchdog_listener(std::chrono::seconds limit) : limit_(limit) {
    thread_ = std::thread([this] { run(); });
  }
  ~watchdog_listener() override {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  watchdog_listener(const watchdog_listener&) = delete;
  watchdog_listener& operator=(const watchdog_listener&) = delete;

  void OnTestStart(const testing::TestInfo& info) override {
    std::lock_guard lock(mutex_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    deadline_ = std::chrono::steady_clock::now() + limit_;
    armed_ = true;
    cv_.notify_all();
  }
  void OnTestEnd(const testing::TestInfo& /*info*/) override {
    std::lock_guard lock(mutex_);
    armed_ = false;
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!quit_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr, "\n*** watchdog: test %s exceeded %lld s (deadlock?); aborting\n", name_.c_str(),
                     static_cast<long long>(limit_.count()));
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_{};
  bool armed_ = false;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
#ifndef THREAD_SYSTEM_TEST_TIMEOUT_SECONDS
#define THREAD_SYSTEM_TEST_TIMEOUT_SECONDS 120
#endif
  long seconds = THREAD_SYSTEM_TEST_TIMEOUT_SECONDS;
  if (const char* env = std::getenv("THREAD_SYSTEM_TEST_TIMEOUT")) seconds = std::strtol(env, nullptr, 10);
  if (seconds <= 0) seconds = THREAD_SYSTEM_TEST_TIMEOUT_SECONDS;
  testing::UnitTest::GetInstance()->listeners().Append(new watchdog_listener(std::chrono::seconds(seconds)));
  return RUN_ALL_TESTS();
}
