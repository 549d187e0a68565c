#include "thread_system/core/thread_base.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

class recording_thread : public ts::thread_base {
 public:
  explicit recording_thread(bool fail_start = false) : thread_base("recorder"), fail_start_(fail_start) {}
  ~recording_thread() override { (void)stop(); }

  std::vector<std::string> events() {
    std::lock_guard lock(m_);
    return events_;
  }
  std::atomic<int> work{0};
  std::atomic<int> pending{0};
  std::atomic<int> errors{0};
  std::atomic<ts::result<void>*> self_stop_result{nullptr};

 protected:
  ts::result<void> before_start() override {
    record("before_start");
    if (fail_start_) return ts::make_error(ts::error_code::invalid_argument, "refusing to start");
    return {};
  }
  // seq_cst: pairs with the writers' RMW/store
  bool should_continue_work() const override { return pending.load(std::memory_order_seq_cst) > 0; }
  ts::result<void> do_work() override {
    // seq_cst: pairs with the other side's load/RMW
    if (pending.load(std::memory_order_seq_cst) > 0) pending.fetch_sub(1, std::memory_order_seq_cst);
    work.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    return ts::make_error(ts::error_code::job_failed, "each round reports an error");
  }
  ts::result<void> after_stop() override {
    record("after_stop");
    return {};
  }
  void on_error(const ts::error& e) override {
    // seq_cst: pairs with the checking load(s)
    if (e.code() == ts::error_code::job_failed) errors.fetch_add(1, std::memory_order_seq_cst);
  }

 private:
  void record(std::string e) {
    std::lock_guard lock(m_);
    events_.push_back(std::move(e));
  }
  bool fail_start_;
  std::mutex m_;
  std::vector<std::string> events_;
};

using thread_system::test::eventually;

}  // namespace

TEST(ThreadBase, HooksRunInOrder) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  EXPECT_TRUE(t.is_running());
  ASSERT_TRUE(t.stop());
  EXPECT_FALSE(t.is_running());
  EXPECT_EQ(t.events(), (std::vector<std::string>{"before_start", "after_stop"}));
}

TEST(ThreadBase, StartErrorIsReturned) {
  recording_thread t(/*fail_start=*/true);
  auto r = t.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_FALSE(t.is_running());
}

TEST(ThreadBase, DoubleStartIsRefused) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  auto r = t.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::already_started);
}

TEST(ThreadBase, WakeRunsOneRoundAndErrorsReachOnError) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  t.wake();
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 1; }));
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.errors.load(std::memory_order_seq_cst) >= 1; }));
  ASSERT_TRUE(t.stop());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(t.work.load(std::memory_order_seq_cst), t.errors.load(std::memory_order_seq_cst));
}

TEST(ThreadBase, WakeIntervalRepeatsWork) {
  recording_thread t;
  t.set_wake_interval(2ms);
  ASSERT_EQ(t.get_wake_interval(), std::optional<std::chrono::milliseconds>(2ms));
  ASSERT_TRUE(t.start());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 5; }));
  ASSERT_TRUE(t.stop());
  EXPECT_GE(t.work_rounds(), 5U);
}

TEST(ThreadBase, ShouldContinueWorkDrainsBeforeStopping) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  t.pending.store(50, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
  t.wake();
  ASSERT_TRUE(t.stop());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(t.pending.load(std::memory_order_seq_cst), 0) << "stop() must let the loop finish the work it reports";
}
