#include "thread_system/scheduler/timer_queue.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

// Runs each job on the timer thread itself: run order == dispatch order.
ts::timer_dispatch inline_target() {
  return [](ts::job_function&& f) -> ts::result<void> {
    f();
    return {};
  };
}

ts::timer_dispatch pool_target(ts::thread_pool& pool) {
  return [&pool](ts::job_function&& f) { return pool.enqueue(std::move(f)); };
}

using thread_system::test::eventually;

}  // namespace

TEST(TimerQueue, ThousandRandomTimersFireInDueOrderAndNeverEarly) {
  ts::timer_queue timers{inline_target()};
  constexpr int n = 1000;
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_us(0, 50'000);
  std::mutex m;
  std::vector<clock_type::time_point> fired_due;  // in run order
  std::atomic<int> early{0};
  // A gate: the first timer holds the timer thread until every timer is
  // scheduled. Otherwise a timer with a short delay could fire while the
  // loop, preempted between computing a later timer's due time and
  // inserting it, has not inserted an earlier-due one yet: a correct queue
  // would then run them out of due order through no fault of its own.
  std::atomic<bool> all_scheduled{false};
  // seq_cst: pairs with the store after the loop
  ASSERT_TRUE(timers.schedule_after(0ms, [&](const ts::timer_tick&) {
    (void)eventually([&] { return all_scheduled.load(std::memory_order_seq_cst); });
  }));
  for (int i = 0; i < n; ++i) {
    const auto before = clock_type::now();
    const auto delay = std::chrono::microseconds(delay_us(rng));
    auto h = timers.schedule_after(delay, [&, before, delay](const ts::timer_tick& t) {
      const auto now = clock_type::now();
      // seq_cst: pairs with the checking load(s)
      if (now < t.scheduled_time || t.scheduled_time < before + delay) early.fetch_add(1, std::memory_order_seq_cst);
      std::lock_guard lock(m);
      fired_due.push_back(t.scheduled_time);
    });
    ASSERT_TRUE(h.has_value());
  }
  all_scheduled.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the gate's load
  ASSERT_TRUE(eventually([&] {
    {
      std::lock_guard lock(m);
      if (fired_due.size() != n) return false;
    }
    // The timer thread counts a timer as fired after its run returns (the
    // inline target runs it inside the dispatch): wait for the count too.
    return timers.statistics().fired == static_cast<std::uint64_t>(n + 1);
  }));
  EXPECT_EQ(early.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  const auto s = timers.statistics();
  std::lock_guard lock(m);
  EXPECT_TRUE(std::is_sorted(fired_due.begin(), fired_due.end()));
  EXPECT_EQ(s.scheduled, static_cast<std::uint64_t>(n + 1));  // with the gate
  EXPECT_EQ(s.fired, static_cast<std::uint64_t>(n + 1));
  EXPECT_EQ(s.cancelled, 0U);
  EXPECT_EQ(s.pending, 0U);
}

TEST(TimerQueue, EqualDueTimesRunInSchedulingOrder) {
  ts::timer_queue timers{inline_target()};
  const auto when = clock_type::now() + 20ms;
  std::mutex m;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(timers
                    .schedule_at(when,
                                 [&, i] {
                                   std::lock_guard lock(m);
                                   order.push_back(i);
                                 })
                    .has_value());
  }
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(m);
    return order.size() == 50;
  }));
  std::lock_guard lock(m);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

namespace {
std::atomic<int> named_timer_runs{0};
void named_timer_function() { named_timer_runs.fetch_add(1, std::memory_order_relaxed); }  // relaxed: a count
}  // namespace

// A function named directly (bound by reference) is accepted; it failed to
// compile under -Werror (the null check compared the reference).
TEST(TimerQueue, AFunctionNamedDirectlyIsAccepted) {
  ts::thread_pool pool{1};
  ts::timer_queue timers{pool_target(pool)};
  ASSERT_TRUE(timers.schedule_after(std::chrono::milliseconds(0), named_timer_function).has_value());
  auto periodic = timers.schedule_every(std::chrono::milliseconds(1), named_timer_function);
  ASSERT_TRUE(periodic.has_value());
  // relaxed: a count; eventually() polls it with a deadline
  ASSERT_TRUE(eventually([] { return named_timer_runs.load(std::memory_order_relaxed) >= 3; }));
  EXPECT_TRUE(periodic->cancel());
}

TEST(TimerQueue, RunsOnAPoolAndNeverBeforeDue) {
  ts::thread_pool pool{2};
  ts::timer_queue timers{pool_target(pool)};
  constexpr int n = 200;
  std::atomic<int> ran{0};
  std::atomic<int> early{0};
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(timers
                    .schedule_after(std::chrono::microseconds(i * 50),
                                    [&](const ts::timer_tick& t) {
                                      // seq_cst: pairs with the checking load(s)
                                      if (clock_type::now() < t.scheduled_time)
                                        early.fetch_add(1, std::memory_order_seq_cst);
                                      // seq_cst: pairs with the checking load(s)
                                      ran.fetch_add(1, std::memory_order_seq_cst);
                                    })
                    .has_value());
  }
  // seq_cst: pairs with the writers' RMW/store
  ASSERT_TRUE(eventually([&] { return ran.load(std::memory_order_seq_cst) == n; }));
  EXPECT_EQ(early.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
}

TEST(TimerQueue, SchedulingAnEarlierTimerWakesTheSleepingThread) {
  ts::timer_queue timers{inline_target()};
  std::atomic<bool> late_ran{false};
  std::atomic<bool> soon_ran{false};
  // seq_cst: pairs with the checking load(s)
  auto late = timers.schedule_after(1h, [&] { late_ran.store(true, std::memory_order_seq_cst); });
  ASSERT_TRUE(late.has_value());
  std::this_thread::sleep_for(5ms);  // let the thread sleep until the hour
  // seq_cst: pairs with the checking load(s)
  ASSERT_TRUE(timers.schedule_after(1ms, [&] { soon_ran.store(true, std::memory_order_seq_cst); }).has_value());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return soon_ran.load(std::memory_order_seq_cst); }));
  EXPECT_FALSE(late_ran.load(std::memory_order_seq_cst));  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(late->is_active());
}

TEST(TimerQueue, CancelPendingOneShot) {
  ts::timer_queue timers{inline_target()};
  std::atomic<int> ran{0};
  // seq_cst: pairs with the checking load(s)
  auto h = timers.schedule_after(1h, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(h.has_value());
  EXPECT_TRUE(h->is_active());
  EXPECT_EQ(timers.statistics().pending, 1U);
  EXPECT_TRUE(h->cancel());
  EXPECT_FALSE(h->cancel());
  EXPECT_FALSE(h->is_active());
  const auto s = timers.statistics();
  EXPECT_EQ(s.cancelled, 1U);
  EXPECT_EQ(s.pending, 0U);  // removed from the heap at once

  // Cancelling one that already ran prevents nothing.
  // seq_cst: pairs with the checking load(s)
  auto done = timers.schedule_after(0ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(done.has_value());
  // seq_cst: pairs with the writers' RMW/store
  ASSERT_TRUE(eventually([&] { return ran.load(std::memory_order_seq_cst) == 1; }));
  ASSERT_TRUE(eventually([&] { return !done->is_active(); }));
  EXPECT_FALSE(done->cancel());
  EXPECT_EQ(timers.statistics().cancelled, 1U);
  EXPECT_FALSE(ts::timer_handle{}.cancel());
}

TEST(TimerQueue, CancelledOneShotDestroysItsFunction) {
  ts::timer_queue timers{inline_target()};
  auto marker = std::make_shared<int>(1);
  std::weak_ptr<int> probe = marker;
  auto h = timers.schedule_after(1h, [m = std::move(marker)] { (void)m; });
  ASSERT_TRUE(h.has_value());
  EXPECT_FALSE(probe.expired());
  EXPECT_TRUE(h->cancel());
  EXPECT_TRUE(probe.expired());  // even though the handle is still alive
}

TEST(TimerQueue, CancelPeriodicStopsFurtherRuns) {
  ts::thread_pool pool{2};
  ts::timer_queue timers{pool_target(pool)};
  std::atomic<int> starts{0};
  // seq_cst: pairs with the checking load(s)
  auto h = timers.schedule_every(1ms, [&] { starts.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(h.has_value());
  // seq_cst: pairs with the writers' RMW/store
  ASSERT_TRUE(eventually([&] { return starts.load(std::memory_order_seq_cst) >= 3; }));
  EXPECT_TRUE(h->is_active());
  EXPECT_TRUE(h->cancel());
  const int at_cancel = starts.load(std::memory_order_seq_cst);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_FALSE(h->is_active());
  std::this_thread::sleep_for(30ms);
  // A run that had begun before cancel() may still count itself; no new run starts.
  EXPECT_LE(starts.load(std::memory_order_seq_cst), at_cancel + 1);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_FALSE(h->cancel());
  EXPECT_EQ(timers.statistics().cancelled, 1U);
  pool.wait_idle();
}

TEST(TimerQueue, PeriodicCancellingItselfStopsAtOnce) {
  ts::timer_queue timers{inline_target()};
  std::atomic<int> runs{0};
  std::atomic<int> runs_at_cancel{-1};
  std::optional<ts::timer_handle> self;
  std::mutex m;
  std::unique_lock lock(m);  // keeps the first run from reading `self` before it is set
  auto h = timers.schedule_every(1ms, [&](const ts::timer_tick& t) {
    std::lock_guard inner(m);
    const int r = runs.fetch_add(1, std::memory_order_seq_cst) + 1;  // seq_cst: pairs with the checking load(s)
    // seq_cst: pairs with the writers' RMW/store
    if (t.index >= 3 && runs_at_cancel.load(std::memory_order_seq_cst) < 0) {
      EXPECT_TRUE(self->cancel());                         // from inside its own run: no deadlock
      runs_at_cancel.store(r, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    }
  });
  ASSERT_TRUE(h.has_value());
  self = *h;
  lock.unlock();
  ASSERT_TRUE(eventually([&] { return !h->is_active(); }));
  std::this_thread::sleep_for(20ms);
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(runs.load(std::memory_order_seq_cst), runs_at_cancel.load(std::memory_order_seq_cst));
  // cancel() counts right after the handle turns inactive, on the job's thread.
  ASSERT_TRUE(eventually([&] { return timers.statistics().cancelled >= 1; }));
  EXPECT_EQ(timers.statistics().cancelled, 1U);
}

// A slow periodic job on a pool with spare workers: the next run is never
// dispatched while the previous one runs; the missed due times are skipped.
TEST(TimerQueue, SlowPeriodicJobNeverOverlapsItself) {
  ts::thread_pool pool{4};
  ts::timer_queue timers{pool_target(pool)};
  std::atomic<int> concurrent{0};
  std::atomic<int> max_concurrent{0};
  std::atomic<int> runs{0};
  std::mutex m;
  std::vector<std::uint64_t> indices;
  auto h = timers.schedule_every(1ms, [&](const ts::timer_tick& t) {
    const int now = concurrent.fetch_add(1, std::memory_order_seq_cst) + 1;  // seq_cst: pairs with the checking load(s)
    int prev = max_concurrent.load(std::memory_order_seq_cst);  // seq_cst: pairs with the writers' RMW/store
    // seq_cst: pairs with the checking load(s)
    while (now > prev && !max_concurrent.compare_exchange_weak(prev, now, std::memory_order_seq_cst)) {
    }
    {
      std::lock_guard lock(m);
      indices.push_back(t.index);
    }
    std::this_thread::sleep_for(5ms);
    concurrent.fetch_sub(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    runs.fetch_add(1, std::memory_order_seq_cst);        // seq_cst: pairs with the checking load(s)
  });
  ASSERT_TRUE(h.has_value());
  // seq_cst: pairs with the writers' RMW/store
  ASSERT_TRUE(eventually([&] { return runs.load(std::memory_order_seq_cst) >= 8; }));
  EXPECT_TRUE(h->cancel());
  pool.wait_idle();
  EXPECT_EQ(max_concurrent.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_GT(timers.statistics().skipped_periods, 0U);
  std::lock_guard lock(m);
  EXPECT_TRUE(std::is_sorted(indices.begin(), indices.end()));
  EXPECT_TRUE(std::adjacent_find(indices.begin(), indices.end()) == indices.end());  // strictly increasing
}

// Run k is scheduled at first + k * period however long the runs take.
TEST(TimerQueue, PeriodicScheduleDoesNotDrift) {
  constexpr auto period = 3ms;
  std::mutex m;
  std::vector<ts::timer_tick> ticks;
  std::atomic<int> early{0};
  // Declared after what the function captures: cancel() does not wait for a
  // run in progress, so the timer thread is joined (timers destroyed) first.
  ts::timer_queue timers{inline_target()};
  const auto before = clock_type::now();
  auto h = timers.schedule_every(period, [&](const ts::timer_tick& t) {
    // seq_cst: pairs with the checking load(s)
    if (clock_type::now() < t.scheduled_time) early.fetch_add(1, std::memory_order_seq_cst);
    std::this_thread::sleep_for(std::chrono::microseconds(700 + 500 * static_cast<int>(t.index % 3)));
    std::lock_guard lock(m);
    ticks.push_back(t);
  });
  ASSERT_TRUE(h.has_value());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(m);
    return ticks.size() >= 20;
  }));
  EXPECT_TRUE(h->cancel());
  EXPECT_EQ(early.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  std::lock_guard lock(m);
  const auto first = ticks.front().scheduled_time - period * static_cast<int>(ticks.front().index);
  EXPECT_GE(first, before + period);
  for (const auto& t : ticks) {
    EXPECT_EQ(t.scheduled_time - first, period * static_cast<int>(t.index)) << "run " << t.index;
  }
  for (std::size_t i = 1; i < ticks.size(); ++i) EXPECT_GT(ticks[i].index, ticks[i - 1].index);
}

TEST(TimerQueue, InitialDelayThenPeriod) {
  std::mutex m;
  std::vector<ts::timer_tick> ticks;
  ts::timer_queue timers{inline_target()};  // after the captures: see PeriodicScheduleDoesNotDrift
  const auto before = clock_type::now();
  auto h = timers.schedule_every(10ms, 2ms, [&](const ts::timer_tick& t) {
    std::lock_guard lock(m);
    ticks.push_back(t);
  });
  ASSERT_TRUE(h.has_value());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(m);
    return ticks.size() >= 3;
  }));
  h->cancel();
  std::lock_guard lock(m);
  EXPECT_EQ(ticks[0].index, 0U);
  EXPECT_GE(ticks[0].scheduled_time, before + 10ms);
  EXPECT_EQ(ticks[1].scheduled_time - ticks[0].scheduled_time, 2ms * static_cast<int>(ticks[1].index));
}

TEST(TimerQueue, StopCancelsPendingTimersAndCountsThem) {
  ts::timer_queue timers{inline_target()};
  std::atomic<int> ran{0};
  std::vector<ts::timer_handle> handles;
  // seq_cst: pairs with the checking load(s)
  for (int i = 0; i < 10; ++i)
    handles.push_back(timers.schedule_after(1h, [&] { ran.fetch_add(1, std::memory_order_seq_cst); }).value());
  // seq_cst: pairs with the checking load(s)
  handles.push_back(timers.schedule_every(1h, [&] { ran.fetch_add(1, std::memory_order_seq_cst); }).value());
  // seq_cst: pairs with the checking load(s)
  handles.push_back(timers.schedule_every(1h, [&] { ran.fetch_add(1, std::memory_order_seq_cst); }).value());
  const auto s = timers.stop(ts::stop_mode::drain);
  EXPECT_EQ(s.scheduled, 12U);
  EXPECT_EQ(s.cancelled, 12U);
  EXPECT_EQ(s.fired, 0U);
  EXPECT_EQ(s.pending, 0U);
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  for (auto& h : handles) EXPECT_FALSE(h.is_active());
  EXPECT_FALSE(timers.is_running());
  auto late = timers.schedule_after(0ms, [] {});
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code(), ts::error_code::pool_stopped);
  EXPECT_EQ(timers.stop().cancelled, 12U);  // idempotent
}

// stop(drain) dispatches one-shot timers that were due when stop() was
// called but not yet dispatched (the timer thread is held in the target).
TEST(TimerQueue, StopDrainDispatchesDueTimersOnly) {
  for (ts::stop_mode mode : {ts::stop_mode::drain, ts::stop_mode::cancel_pending}) {
    std::mutex gate_m;
    std::condition_variable gate_cv;
    bool open = false;
    std::atomic<bool> in_target{false};
    ts::timer_queue timers{[&](ts::job_function&& f) -> ts::result<void> {
      in_target.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      {
        std::unique_lock lock(gate_m);
        gate_cv.wait(lock, [&] { return open; });
      }
      f();
      return {};
    }};
    std::atomic<int> a{0}, b{0}, c{0}, d{0};
    // seq_cst: pairs with the checking load(s)
    ASSERT_TRUE(timers.schedule_after(0ms, [&] { a.store(1, std::memory_order_seq_cst); }).has_value());
    // seq_cst: pairs with the writers' RMW/store
    ASSERT_TRUE(eventually([&] { return in_target.load(std::memory_order_seq_cst); }));
    // seq_cst: pairs with the checking load(s)
    ASSERT_TRUE(timers.schedule_after(0ms, [&] { b.store(1, std::memory_order_seq_cst); }).has_value());
    // seq_cst: pairs with the checking load(s)
    ASSERT_TRUE(timers.schedule_after(0ms, [&] { c.store(1, std::memory_order_seq_cst); }).has_value());
    // seq_cst: pairs with the checking load(s)
    ASSERT_TRUE(timers.schedule_after(1h, [&] { d.store(1, std::memory_order_seq_cst); }).has_value());
    std::thread stopper([&] { (void)timers.stop(mode); });
    ASSERT_TRUE(eventually([&] { return !timers.is_running(); }));
    {
      std::lock_guard lock(gate_m);
      open = true;
    }
    gate_cv.notify_all();
    stopper.join();
    const auto s = timers.statistics();
    EXPECT_EQ(a.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
    EXPECT_EQ(d.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
    if (mode == ts::stop_mode::drain) {
      // seq_cst: pairs with the writers' RMW/store
      EXPECT_EQ(b.load(std::memory_order_seq_cst) + c.load(std::memory_order_seq_cst), 2);
      EXPECT_EQ(s.fired, 3U);
      EXPECT_EQ(s.cancelled, 1U);
    } else {
      // seq_cst: pairs with the writers' RMW/store
      EXPECT_EQ(b.load(std::memory_order_seq_cst) + c.load(std::memory_order_seq_cst), 0);
      EXPECT_EQ(s.fired, 1U);
      EXPECT_EQ(s.cancelled, 3U);
    }
  }
}

TEST(TimerQueue, RefusalByAStoppedPoolCountsAsCancelled) {
  ts::thread_pool pool{1};
  (void)pool.stop();
  ts::timer_queue timers{pool_target(pool)};
  std::atomic<int> ran{0};
  // seq_cst: pairs with the checking load(s)
  auto once = timers.schedule_after(0ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  // seq_cst: pairs with the checking load(s)
  auto every = timers.schedule_every(1ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(once.has_value());
  ASSERT_TRUE(every.has_value());
  ASSERT_TRUE(eventually([&] { return !once->is_active() && !every->is_active(); }));
  // The counters trail the handles by a few instructions (the timer thread
  // makes a handle inactive, then counts it and takes it off the heap):
  // wait until both timers are accounted for, then check how.
  ASSERT_TRUE(eventually([&] {
    const auto t = timers.statistics();
    return t.cancelled + t.fired >= 2 && t.pending == 0;
  }));
  const auto s = timers.statistics();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(s.refused, 2U);
  EXPECT_EQ(s.cancelled, 2U);
  EXPECT_EQ(s.fired, 0U);
  EXPECT_EQ(s.pending, 0U);
}

TEST(TimerQueue, QueueFullRefusalSkipsAPeriodButKeepsTheTimer) {
  std::atomic<int> calls{0};
  std::atomic<int> ran{0};  // before the timers: a run may still be finishing when the test ends
  ts::timer_queue timers{[&](ts::job_function&& f) -> ts::result<void> {
    // seq_cst: pairs with the checking load(s)
    if (calls.fetch_add(1, std::memory_order_seq_cst) % 2 == 0)
      return ts::make_error(ts::error_code::queue_full, "test: full");
    f();
    return {};
  }};
  // seq_cst: pairs with the checking load(s)
  auto h = timers.schedule_every(1ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(h.has_value());
  // seq_cst: pairs with the writers' RMW/store
  ASSERT_TRUE(eventually([&] { return ran.load(std::memory_order_seq_cst) >= 3; }));
  EXPECT_TRUE(h->is_active());
  EXPECT_TRUE(h->cancel());
  const auto s = timers.statistics();
  EXPECT_GE(s.refused, 3U);
  EXPECT_GE(s.skipped_periods, 3U);
  EXPECT_EQ(s.cancelled, 1U);
}

namespace {
// A target that keeps the runs handed to it, for the test to run or discard
// later (a pool that has not started them yet).
class holding_target {
 public:
  ts::timer_dispatch dispatch() {
    return [this](ts::job_function&& f) -> ts::result<void> {
      std::lock_guard lock(m_);
      held_.push_back(std::move(f));
      return {};
    };
  }
  /// Waits until the queue handed `n` runs over.
  [[nodiscard]] bool wait_for(std::size_t n) {
    return eventually([&] {
      std::lock_guard lock(m_);
      return held_.size() == n;
    });
  }
  void run(std::size_t i) {
    std::lock_guard lock(m_);
    held_[i]();
  }
  /// Discards run `i` unrun, as thread_pool's stop(cancel_pending) does.
  void discard(std::size_t i) {
    std::lock_guard lock(m_);
    held_[i].cancel();
    held_[i] = ts::job_function{};
  }

 private:
  std::mutex m_;
  std::vector<ts::job_function> held_;  // guarded by m_
};
}  // namespace

TEST(TimerQueue, PoolDiscardingAnAcceptedRunCancelsTheOneShot) {
  holding_target target;
  ts::timer_queue timers{target.dispatch()};
  std::atomic<int> ran{0};
  // seq_cst: pairs with the checking load(s)
  auto h = timers.schedule_after(0ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(h.has_value());
  ASSERT_TRUE(target.wait_for(1));
  EXPECT_TRUE(h->is_active());  // accepted, not started
  target.discard(0);
  EXPECT_FALSE(h->is_active());
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(timers.statistics().cancelled, 1U);
}

TEST(TimerQueue, CancelAfterDispatchBeforeStartPreventsTheRun) {
  holding_target target;
  ts::timer_queue timers{target.dispatch()};
  std::atomic<int> ran{0};
  // seq_cst: pairs with the checking load(s)
  auto h = timers.schedule_after(0ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
  ASSERT_TRUE(target.wait_for(1));
  EXPECT_TRUE(h->cancel());
  target.run(0);                                      // the target runs it late: it must do nothing
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(timers.statistics().cancelled, 1U);
}

// A one-shot run handed to the target but not started yet: stop(cancel_pending)
// cancels it (it reports itself cancelled when the target gets to it), as
// it does a periodic timer's run in flight; stop(drain) leaves it to run (it
// was due). Before, cancel_pending did not track dispatched one-shots: the
// run started after stop() returned and the handle stayed active.
TEST(TimerQueue, StopCancelPendingCancelsAOneShotRunTheTargetHasNotStarted) {
  for (const ts::stop_mode mode : {ts::stop_mode::cancel_pending, ts::stop_mode::drain}) {
    SCOPED_TRACE(mode == ts::stop_mode::drain ? "drain" : "cancel_pending");
    holding_target target;
    ts::timer_queue timers{target.dispatch()};
    std::atomic<int> ran{0};
    // seq_cst: pairs with the checking loads
    auto h = timers.schedule_after(0ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); });
    ASSERT_TRUE(h);
    ASSERT_TRUE(target.wait_for(1));
    const ts::timer_statistics after_stop = timers.stop(mode);
    const bool cancelled = mode == ts::stop_mode::cancel_pending;
    EXPECT_EQ(h->is_active(), !cancelled);
    EXPECT_EQ(after_stop.cancelled, cancelled ? 1U : 0U);
    target.run(0);                                                      // after stop() returned
    EXPECT_EQ(ran.load(std::memory_order_seq_cst), cancelled ? 0 : 1);  // seq_cst: pairs with the RMW
    const ts::timer_statistics end = timers.statistics();
    EXPECT_EQ(end.fired + end.cancelled, 1U);
    EXPECT_FALSE(h->is_active());
  }
}

TEST(TimerQueue, BadInputIsRefused) {
  ts::timer_queue timers{inline_target()};
  auto code = [](const auto& r) { return r.error().code(); };
  EXPECT_EQ(code(timers.schedule_after(-1ms, [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(0ms, [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(-5ms, [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(-1ms, 5ms, [] {})), ts::error_code::invalid_argument);
  std::function<void()> empty;
  EXPECT_EQ(code(timers.schedule_after(1ms, empty)), ts::error_code::invalid_argument);
  void (*null_fn)() = nullptr;
  EXPECT_EQ(code(timers.schedule_at(clock_type::now(), null_fn)), ts::error_code::invalid_argument);
  EXPECT_EQ(timers.statistics().scheduled, 0U);
  EXPECT_THROW(ts::timer_queue{ts::timer_dispatch{}}, ts::error_exception);
}

TEST(TimerQueue, ARoutedTargetGetsEachRunWithItsTimersRoute) {
  std::mutex m;
  std::vector<std::uint32_t> routes;  // in run order; guarded by m
  ts::timer_queue timers{ts::timer_routed_dispatch{[&](ts::job_function&& f, ts::timer_route r) -> ts::result<void> {
    {
      std::lock_guard lock(m);
      routes.push_back(r.id);
    }
    f();
    return {};
  }}};
  std::atomic<int> ticks{0};
  ASSERT_TRUE(timers.schedule_after(ts::timer_route{7}, 1ms, [] {}));
  ASSERT_TRUE(timers.schedule_at(ts::timer_route{9}, clock_type::now() + 2ms, [] {}));
  ASSERT_TRUE(timers.schedule_after(3ms, [] {}));  // no route: 0
  auto every = timers.schedule_every(ts::timer_route{5}, 4ms, 1ms, [&ticks] {
    ticks.fetch_add(1, std::memory_order_relaxed);  // a polled count
  });
  ASSERT_TRUE(every);
  ASSERT_TRUE(eventually([&] { return ticks.load(std::memory_order_relaxed) >= 2; }));
  EXPECT_TRUE((*every).cancel());
  (void)timers.stop();
  std::lock_guard lock(m);
  ASSERT_GE(routes.size(), 5U);
  EXPECT_EQ(routes[0], 7U);
  EXPECT_EQ(routes[1], 9U);
  EXPECT_EQ(routes[2], 0U);
  for (std::size_t i = 3; i < routes.size(); ++i) EXPECT_EQ(routes[i], 5U) << "run " << i;
  EXPECT_THROW(ts::timer_queue{ts::timer_routed_dispatch{}}, ts::error_exception);
}

TEST(TimerQueue, PastDueTimeRunsAtOnce) {
  ts::timer_queue timers{inline_target()};
  std::atomic<bool> ran{false};
  // seq_cst: pairs with the checking load(s)
  ASSERT_TRUE(
      timers.schedule_at(clock_type::now() - 1h, [&] { ran.store(true, std::memory_order_seq_cst); }).has_value());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return ran.load(std::memory_order_seq_cst); }));
}

TEST(TimerQueue, StopFromTheTimerThreadIsRefused) {
  ts::timer_queue timers{inline_target()};
  std::atomic<int> code{-1};
  ASSERT_TRUE(timers
                  .schedule_after(0ms,
                                  [&] {
                                    try {
                                      (void)timers.stop();
                                      // seq_cst: pairs with the checking load(s)
                                      code.store(0, std::memory_order_seq_cst);
                                    } catch (const ts::error_exception& e) {
                                      // seq_cst: pairs with the checking load(s)
                                      code.store(static_cast<int>(e.code()), std::memory_order_seq_cst);
                                    }
                                  })
                  .has_value());
  // seq_cst: pairs with the writers' RMW/store
  ASSERT_TRUE(eventually([&] { return code.load(std::memory_order_seq_cst) != -1; }));
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(code.load(std::memory_order_seq_cst), static_cast<int>(ts::error_code::invalid_argument));
}

// A timer's function holding the queue's last owner, run inline on the
// timer thread: the queue is destroyed there. Its pending timers are
// cancelled, and the thread ends on its own (no terminate from a refused
// stop() in the destructor).
TEST(TimerQueue, QueueMayBeDestroyedOnItsOwnTimerThread) {
  std::atomic<int> ran{0};
  std::atomic<bool> later_cancelled{false};
  auto timers = std::make_shared<ts::timer_queue>(inline_target());
  // A pending timer that the destruction cancels (its function's
  // destructor reports it).
  struct on_destroy {
    std::atomic<bool>* flag;
    explicit on_destroy(std::atomic<bool>* f) noexcept : flag(f) {}
    on_destroy(on_destroy&& o) noexcept : flag(std::exchange(o.flag, nullptr)) {}
    on_destroy(const on_destroy&) = delete;
    on_destroy& operator=(const on_destroy&) = delete;
    on_destroy& operator=(on_destroy&&) = delete;
    ~on_destroy() {
      if (flag != nullptr) flag->store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load
    }
  };
  auto never = timers->schedule_after(std::chrono::hours(1), [d = on_destroy(&later_cancelled)] {});
  ASSERT_TRUE(never.has_value());
  std::weak_ptr<ts::timer_queue> watch = timers;
  ASSERT_TRUE(timers
                  ->schedule_after(0ms,
                                   [keep = timers, &ran] {
                                     ran.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the load
                                   })
                  .has_value());
  timers.reset();  // the one-shot's function holds the last owner; it is destroyed after its run
  ASSERT_TRUE(eventually([&] { return watch.expired() && later_cancelled.load(std::memory_order_seq_cst); }));
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 1);
  EXPECT_FALSE(never->is_active());
}

// Runs handed to a pool keep the timer state alive after the queue is gone.
TEST(TimerQueue, QueueMayBeDestroyedBeforeItsRunsExecute) {
  ts::thread_pool pool{1};
  std::atomic<bool> gate{false};
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.enqueue([&] {
                    // seq_cst: pairs with the writers' RMW/store
                    while (!gate.load(std::memory_order_seq_cst)) std::this_thread::yield();
                  })
                  .has_value());
  std::optional<ts::timer_handle> h;
  {
    ts::timer_queue timers{pool_target(pool)};
    // seq_cst: pairs with the checking load(s)
    h = timers.schedule_after(0ms, [&] { ran.fetch_add(1, std::memory_order_seq_cst); }).value();
    // The run has been handed to the pool (its function has not started:
    // `fired` counts starts).
    const bool handed_over = eventually([&] { return pool.get_statistics().accepted == 2; });
    if (!handed_over) gate.store(true, std::memory_order_seq_cst);  // seq_cst: as below; lets the pool stop
    ASSERT_TRUE(handed_over);
    EXPECT_EQ(timers.statistics().fired, 0U);
  }
  EXPECT_TRUE(h->is_active());
  gate.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_FALSE(h->is_active());
  EXPECT_FALSE(h->cancel());
}

TEST(TimerQueue, ManyTimersWithConcurrentCancels) {
  const std::size_t n = ts::test::scaled(20'000);
  ts::thread_pool pool{2};
  ts::timer_queue timers{pool_target(pool)};
  std::atomic<std::size_t> ran{0};
  std::vector<ts::timer_handle> handles;
  handles.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    // seq_cst: pairs with the checking load(s)
    handles.push_back(
        timers.schedule_after(std::chrono::microseconds(i % 2000), [&] { ran.fetch_add(1, std::memory_order_seq_cst); })
            .value());
  }
  std::size_t cancelled = 0;
  for (std::size_t i = 0; i < n; i += 2) cancelled += handles[i].cancel() ? 1 : 0;
  ASSERT_TRUE(eventually([&] { return timers.statistics().pending == 0; }));
  pool.wait_idle();
  const auto s = timers.statistics();
  EXPECT_EQ(s.cancelled, cancelled);
  EXPECT_EQ(ran.load(std::memory_order_seq_cst) + cancelled, n);  // seq_cst: pairs with the writers' RMW/store
}

// The idle timer thread sleeps: a queue holding only a far timer uses
// (almost) no CPU. Loose bound; the process's own CPU over 300 ms.
TEST(TimerQueue, IdleQueueUsesNoCpu) {
  ts::timer_queue timers{inline_target()};
  ASSERT_TRUE(timers.schedule_after(1h, [] {}).has_value());
  auto cpu = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const auto c0 = cpu();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(cpu() - c0, 60ms);
}

// ---- accounting, idle timer thread, bad durations -----------------------------

// One-shot timers handed to a busy pool and cancelled while their runs wait
// in its queue: each timer is counted once, as fired or as cancelled, and
// the pool counts a cancelled hand-off as cancelled, not executed.
TEST(TimerQueue, OneShotCountsFiredOrCancelledExactlyOnce) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<bool> gate{false};
  ASSERT_TRUE(pool.enqueue([&] {
    while (!gate.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the release below
  }));
  const std::size_t n = ts::test::scaled(5000);
  std::atomic<std::uint64_t> ran{0};
  std::vector<ts::timer_handle> handles;
  for (std::size_t i = 0; i < n; ++i) {
    auto h = pool.schedule_after(0ms, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // counted
    ASSERT_TRUE(h.has_value());
    handles.push_back(*h);
  }
  // Every run is handed to the pool (queued behind the gate) ...
  const bool handed = eventually([&] { return pool.get_statistics().accepted == n + 1; });
  if (!handed) gate.store(true, std::memory_order_release);  // pairs with the gate job's acquire
  ASSERT_TRUE(handed);
  // ... then every other timer is cancelled while its run waits.
  std::uint64_t cancelled_by_us = 0;
  for (std::size_t i = 0; i < n; i += 2) cancelled_by_us += handles[i].cancel() ? 1 : 0;
  gate.store(true, std::memory_order_release);  // pairs with the gate job's acquire
  pool.wait_idle();
  EXPECT_EQ(cancelled_by_us, (n + 1) / 2);
  const auto t = pool.get_timer_statistics();
  EXPECT_EQ(t.scheduled, n);
  EXPECT_EQ(t.fired + t.cancelled, t.scheduled) << "fired " << t.fired << " cancelled " << t.cancelled;
  EXPECT_EQ(t.cancelled, cancelled_by_us);
  EXPECT_EQ(t.fired, ran.load(std::memory_order_relaxed));
  const auto p = pool.get_statistics();
  EXPECT_EQ(p.executed, ran.load(std::memory_order_relaxed) + 1);  // + the gate job
  EXPECT_EQ(p.cancelled, cancelled_by_us);
  EXPECT_EQ(p.accepted, p.executed + p.cancelled);
}

namespace {
std::chrono::microseconds process_cpu_time() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
}  // namespace

// A 1 us period whose body takes far longer: while the body runs, the timer
// is not re-armed, so the timer thread sleeps (no wake-ups, no CPU), and the
// periods passed over are counted when the body ends.
TEST(TimerQueue, PeriodicLongerThanItsPeriodLeavesTheTimerThreadAsleep) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> body_state{0};  // 0 not started, 1 blocked in the first run, 2 released
  std::atomic<std::uint64_t> runs{0};
  auto h = pool.schedule_every(1us, [&] {
    runs.fetch_add(1, std::memory_order_relaxed);  // counted
    int expected = 0;
    // acq_rel: the first run announces itself; the test releases it with 2.
    if (body_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      body_state.wait(1, std::memory_order_acquire);  // sleeps until the test stores 2 (pairs with its release)
    }
  });
  ASSERT_TRUE(h.has_value());
  ASSERT_TRUE(eventually([&] { return body_state.load(std::memory_order_acquire) == 1; }));  // pairs with the CAS
  const auto wakeups_before = pool.get_timer_statistics().wakeups;
  const auto cpu_before = process_cpu_time();
  const auto wall_before = clock_type::now();
  std::this_thread::sleep_for(300ms);
  const auto cpu_used = process_cpu_time() - cpu_before;
  const auto wakeups_during = pool.get_timer_statistics().wakeups - wakeups_before;
  const auto blocked_for = clock_type::now() - wall_before;
  body_state.store(2, std::memory_order_release);  // pairs with the body's acquire wait
  body_state.notify_all();
  ASSERT_TRUE(eventually([&] { return runs.load(std::memory_order_relaxed) >= 3; }));  // counted
  EXPECT_TRUE(h->cancel());
  pool.wait_idle();
  EXPECT_LE(wakeups_during, 2U) << "the timer thread woke while the body ran";
  EXPECT_LT(cpu_used, 60ms) << "a core was burnt while the body ran";
  // Every 1 us grid point passed while the body was blocked was skipped.
  const auto skipped = pool.get_timer_statistics().skipped_periods;
  EXPECT_GE(
      skipped,
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(blocked_for).count()) - 1000)
      << "skipped " << skipped;
}

TEST(TimerQueue, NanAndNegativeDurationsAreRefused) {
  ts::timer_queue timers{inline_target()};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  using fsec = std::chrono::duration<double>;
  auto code = [](const auto& r) { return r ? ts::error_code::ok : r.error().code(); };
  EXPECT_EQ(code(timers.schedule_after(fsec(nan), [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_after(fsec(-inf), [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_after(fsec(-1e-9), [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(fsec(nan), [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(1ms, fsec(nan), [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(fsec(nan), 1ms, [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(fsec(-inf), [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(code(timers.schedule_every(fsec(0.0), [] {})), ts::error_code::invalid_argument);
  const std::chrono::time_point<clock_type, fsec> nan_time{fsec(nan)};
  EXPECT_EQ(code(timers.schedule_at(nan_time, [] {})), ts::error_code::invalid_argument);
  EXPECT_EQ(timers.statistics().scheduled, 0U);
  // A positive period shorter than the clock's tick is one tick (rounded
  // up, as every duration of the library), not refused.
  auto sub_tick = timers.schedule_every(1h, std::chrono::duration<double, std::nano>(0.1), [] {});
  ASSERT_TRUE(sub_tick) << sub_tick.error().message();
  EXPECT_TRUE(sub_tick->cancel());
}

// Delays too long for the clock saturate to "never"; a period that long
// fires once. None of them is undefined behaviour or an error.
TEST(TimerQueue, InfiniteAndHugeDurationsMeanNever) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  const double inf = std::numeric_limits<double>::infinity();
  using fsec = std::chrono::duration<double>;
  std::atomic<int> fired{0};
  auto count = [&fired] { fired.fetch_add(1, std::memory_order_relaxed); };  // counted
  auto a = pool.schedule_after(fsec(inf), count);
  auto b = pool.schedule_after(std::chrono::hours::max(), count);
  auto c = pool.schedule_after(std::chrono::duration<std::int64_t, std::ratio<86400 * 365>>::max(), count);
  auto d = pool.schedule_at(clock_type::time_point::max(), count);
  std::atomic<int> periodic{0};
  auto e = pool.schedule_every(0ms, fsec(inf), [&periodic] { periodic.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(a && b && c && d && e);
  ASSERT_TRUE(eventually([&] { return periodic.load(std::memory_order_relaxed) == 1; }));  // the first run is due now
  pool.wait_idle();
  EXPECT_EQ(fired.load(std::memory_order_relaxed), 0);
  EXPECT_EQ(periodic.load(std::memory_order_relaxed), 1);
  EXPECT_TRUE(a->is_active() && b->is_active() && c->is_active() && d->is_active() && e->is_active());
  EXPECT_TRUE(b->cancel());
  const auto report = pool.stop();
  (void)report;
  const auto t = pool.get_timer_statistics();
  EXPECT_EQ(t.scheduled, 5U);
  EXPECT_EQ(t.fired, 1U);
  EXPECT_EQ(t.cancelled, 5U);  // b by its handle, the rest by stop(); e after its one run
  EXPECT_EQ(fired.load(std::memory_order_relaxed), 0);
}

// The timer thread is created by the first schedule_*(): when the OS
// refuses it, that call returns the error (it used to throw).
TEST(TimerQueue, PoolReportsATimerThreadTheSystemRefuses) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::detail::testing::set_thread_start_budget(0);
  auto r = pool.schedule_after(1ms, [] {});
  ts::detail::testing::set_thread_start_budget(-1);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
  std::atomic<bool> ran{false};
  auto again = pool.schedule_after(0ms, [&ran] { ran.store(true, std::memory_order_release); });  // pairs below
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(eventually([&] { return ran.load(std::memory_order_acquire); }));  // pairs with the store above
}
