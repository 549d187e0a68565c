#include "thread_system/detail/sample_clock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "../support/test_support.hpp"

namespace ts = thread_system;
using ts::detail::sample_clock;

namespace {

bool steady_requested() {
  const char* env = std::getenv("THREAD_SYSTEM_SAMPLE_CLOCK");
  return env != nullptr && std::strcmp(env, "steady") == 0;
}

// Reads the clock until its calibration has ended (bounded).
sample_clock::source settled_source() {
  (void)ts::test::eventually([] {
    (void)sample_clock::now_ns();
    return sample_clock::current_source() != sample_clock::source::calibrating;
  });
  return sample_clock::current_source();
}

}  // namespace

// Every test runs in a process of its own (ctest), so the calibration
// starts inside the test: readings span the switch from steady_clock to the
// counter where there is one.
TEST(SampleClock, MonotonicOnOneThreadAcrossTheCalibration) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(2 * sample_clock::calibration_ns);
  std::uint64_t previous = sample_clock::now_ns();
  std::uint64_t reads = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 1000; ++i, ++reads) {
      const std::uint64_t now = sample_clock::now_ns();
      ASSERT_GE(now, previous) << "after " << reads << " readings";
      previous = now;
    }
  }
  EXPECT_NE(settled_source(), sample_clock::source::calibrating);
}

TEST(SampleClock, SourceIsTheCounterOnlyWhereTrusted) {
  const sample_clock::source s = settled_source();
  std::printf("sample clock source here: %s\n", s == sample_clock::source::tsc ? "tsc" : "steady_clock");
  if (steady_requested()) {
    EXPECT_EQ(s, sample_clock::source::steady) << "THREAD_SYSTEM_SAMPLE_CLOCK=steady is honoured";
  }
#if !THREAD_SYSTEM_SAMPLE_CLOCK_TSC
  EXPECT_EQ(s, sample_clock::source::steady);
#endif
  EXPECT_NE(s, sample_clock::source::calibrating);
}

// Differences on the sampling timeline match steady_clock's. Each attempt
// brackets one clock's interval with the other's readings; preemption can
// loosen a bracket, so one attempt within 0.5% + 1 ms of the other passes
// (a wrong rate fails every attempt).
TEST(SampleClock, DifferencesMatchSteadyClock) {
  (void)settled_source();
  bool matched = false;
  double worst = 0;
  for (int attempt = 0; attempt < 5 && !matched; ++attempt) {
    const std::uint64_t f1 = sample_clock::now_ns();
    const std::uint64_t s1 = sample_clock::steady_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::uint64_t s2 = sample_clock::steady_ns();
    const std::uint64_t f2 = sample_clock::now_ns();
    ASSERT_GT(f2, f1);
    const double fast = static_cast<double>(f2 - f1);
    const double steady = static_cast<double>(s2 - s1);
    const double off = fast > steady ? fast - steady : steady - fast;
    worst = off;
    matched = off <= 0.005 * steady + 1e6;
  }
  EXPECT_TRUE(matched) << "last difference " << worst << " ns over 50 ms";
}

// A reading made after another thread's reading (ordered by release/acquire)
// is not smaller: the timeline is shared by all threads (a stamp taken by a
// producer and a start read by a worker are compared).
TEST(SampleClock, OrderedReadingsOnTwoThreadsDoNotGoBack) {
  (void)settled_source();
  const std::size_t rounds = ts::test::scaled(20'000);
  std::atomic<std::uint64_t> handed{0};  // the last reading, 0 = taken
  std::atomic<bool> done{false};
  std::atomic<std::size_t> backwards{0};
  std::thread reader([&] {
    for (;;) {
      const std::uint64_t seen = handed.exchange(0, std::memory_order_acquire);  // pairs with the writer's release
      if (seen != 0) {
        if (sample_clock::now_ns() < seen) backwards.fetch_add(1, std::memory_order_relaxed);  // read after join
        continue;
      }
      if (done.load(std::memory_order_acquire)) return;  // pairs with the release store after the loop
      std::this_thread::yield();
    }
  });
  for (std::size_t i = 0; i < rounds; ++i) {
    handed.store(sample_clock::now_ns(), std::memory_order_release);  // pairs with the reader's acquire
    if (i % 64 == 0) std::this_thread::yield();
  }
  done.store(true, std::memory_order_release);  // pairs with the reader's acquire
  reader.join();
  EXPECT_EQ(backwards.load(std::memory_order_relaxed), 0U);
}
