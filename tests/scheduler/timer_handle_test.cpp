// scheduler/timer_handle.hpp: building a timer (detail::timer_after / at /
// every) checks the caller's input as the timer contract says and records
// the due time, period and route; a default timer_handle refers to nothing.
// Queued timers are tested in timer_queue_test.cpp and through the pools.
#include "thread_system/scheduler/timer_handle.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

namespace {

namespace ts = thread_system;
namespace d = thread_system::detail;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

void no_op() {}

// The refusal's code and message; fails the test when `built` is a timer.
template <typename Built>
std::pair<ts::error_code, std::string> refusal_of(const Built& built) {
  EXPECT_FALSE(built.has_value());
  if (built.has_value()) return {ts::error_code::ok, ""};
  return {built.error().code(), built.error().message()};
}

TEST(TimerHandle, ADefaultHandleRefersToNoTimer) {
  ts::timer_handle h;
  EXPECT_FALSE(static_cast<bool>(h));
  EXPECT_FALSE(h.is_active());
  EXPECT_FALSE(h.cancel());
}

TEST(TimerHandle, AfterIsDueThatLongAfterTheCallOnce) {
  const auto before = clock_type::now();
  auto built = d::timer_after(ts::timer_route{7}, 10ms, [] {});
  const auto after = clock_type::now();
  ASSERT_TRUE(built.has_value());
  const d::timer_entry& e = **built;
  EXPECT_GE(e.due, before + 10ms);
  EXPECT_LE(e.due, after + 10ms);
  EXPECT_FALSE(e.periodic());
  EXPECT_EQ(e.route.id, 7U);
  EXPECT_EQ(e.status.load(), d::timer_entry::pending);
}

TEST(TimerHandle, EveryIsPeriodicWithItsFirstDueAfterTheInitialDelay) {
  const auto before = clock_type::now();
  auto built = d::timer_every(ts::timer_route{}, 5ms, 2ms, [](const ts::timer_tick&) {});
  const auto after = clock_type::now();
  ASSERT_TRUE(built.has_value());
  EXPECT_TRUE((*built)->periodic());
  EXPECT_EQ((*built)->period, std::chrono::nanoseconds(2'000'000));
  EXPECT_GE((*built)->due, before + 5ms);
  EXPECT_LE((*built)->due, after + 5ms);
  EXPECT_EQ((*built)->route.id, 0U);
}

TEST(TimerHandle, AtTakesTheTimePointAsItIsAndAPastOneIsDueAtOnce) {
  const clock_type::time_point when{std::chrono::seconds(12345)};
  auto built = d::timer_at(ts::timer_route{}, when, no_op);
  ASSERT_TRUE(built.has_value());
  EXPECT_EQ((*built)->due, when);
  // Before the clock's epoch: long past.
  const std::chrono::time_point<clock_type, std::chrono::duration<double>> before_epoch{
      std::chrono::duration<double>(-3.0)};
  auto past = d::timer_at(ts::timer_route{}, before_epoch, no_op);
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ((*past)->due, clock_type::time_point{});
}

TEST(TimerHandle, TooLongDelaysAndPeriodsSaturateToNever) {
  auto never = d::timer_after(ts::timer_route{}, std::chrono::hours::max(), no_op);
  ASSERT_TRUE(never.has_value());
  EXPECT_EQ((*never)->due, clock_type::time_point::max());
  auto inf =
      d::timer_after(ts::timer_route{}, std::chrono::duration<double>(std::numeric_limits<double>::infinity()), no_op);
  ASSERT_TRUE(inf.has_value());
  EXPECT_EQ((*inf)->due, clock_type::time_point::max());
  auto once = d::timer_every(ts::timer_route{}, 1ms, std::chrono::hours::max(), no_op);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ((*once)->period, clock_type::duration::max());
}

TEST(TimerHandle, BadInputIsRefusedWithItsReason) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  using fp_ms = std::chrono::duration<double, std::milli>;
  const auto invalid = ts::error_code::invalid_argument;
  EXPECT_EQ(refusal_of(d::timer_after(ts::timer_route{}, fp_ms(nan), no_op)),
            std::make_pair(invalid, std::string("timer_queue: the delay is not a number")));
  EXPECT_EQ(refusal_of(d::timer_after(ts::timer_route{}, -1ms, no_op)),
            std::make_pair(invalid, std::string("timer_queue: negative delay")));
  void (*null_fn)() = nullptr;
  EXPECT_EQ(refusal_of(d::timer_after(ts::timer_route{}, 1ms, null_fn)),
            std::make_pair(invalid, std::string("timer_queue: empty function")));
  const std::chrono::time_point<clock_type, fp_ms> nan_time{fp_ms(nan)};
  EXPECT_EQ(refusal_of(d::timer_at(ts::timer_route{}, nan_time, no_op)),
            std::make_pair(invalid, std::string("timer_queue: the time point is not a number")));
  EXPECT_EQ(refusal_of(d::timer_every(ts::timer_route{}, 0ms, 0ms, no_op)),
            std::make_pair(invalid, std::string("timer_queue: the period must be positive")));
  EXPECT_EQ(refusal_of(d::timer_every(ts::timer_route{}, 1ms, -2ms, no_op)),
            std::make_pair(invalid, std::string("timer_queue: the period must be positive")));
  EXPECT_EQ(refusal_of(d::timer_every(ts::timer_route{}, 1ms, fp_ms(nan), no_op)),
            std::make_pair(invalid, std::string("timer_queue: the period is not a number")));
  EXPECT_EQ(refusal_of(d::timer_every(ts::timer_route{}, -1ms, 1ms, no_op)),
            std::make_pair(invalid, std::string("timer_queue: negative initial delay")));
  // schedule_every(period, f) passes the period as the initial delay too:
  // a bad period is reported as the period, not as the delay.
  const fp_ms minus_infinity(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(refusal_of(d::timer_every(ts::timer_route{}, minus_infinity, minus_infinity, no_op)),
            std::make_pair(invalid, std::string("timer_queue: the period must be positive")));
  EXPECT_EQ(refusal_of(d::timer_every(ts::timer_route{}, fp_ms(nan), fp_ms(nan), no_op)),
            std::make_pair(invalid, std::string("timer_queue: the period is not a number")));
}

TEST(TimerHandle, TheEntryRunsTheFunctionWithOrWithoutItsTick) {
  int plain = 0;
  auto a = d::timer_after(ts::timer_route{}, 0ms, [&plain] { ++plain; });
  ASSERT_TRUE(a.has_value());
  (*a)->invoke(ts::timer_tick{});
  EXPECT_EQ(plain, 1);

  std::uint64_t seen_index = 0;
  auto b =
      d::timer_every(ts::timer_route{}, 1ms, 1ms, [&seen_index](const ts::timer_tick& t) { seen_index = t.index; });
  ASSERT_TRUE(b.has_value());
  (*b)->invoke(ts::timer_tick{clock_type::time_point{}, 42});
  EXPECT_EQ(seen_index, 42U);

  // Cancelling a timer no run holds destroys its function at once.
  auto owner = std::make_shared<int>(1);
  auto c = d::timer_after(ts::timer_route{}, 1h, [owner] { (void)owner; });
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(owner.use_count(), 2);
  EXPECT_TRUE((*c)->try_cancel());
  EXPECT_EQ(owner.use_count(), 1);
  EXPECT_FALSE((*c)->try_cancel());  // once
}

}  // namespace
