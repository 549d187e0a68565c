// steady_now_ns (include/thread_system/detail/clock.hpp): the library's one
// monotonic time source, in nanoseconds, comparable across threads.
#include "thread_system/detail/clock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace thread_system::detail {
namespace {

TEST(Clock, ReadingsAreNonZeroAndNeverGoBackwards) {
  std::uint64_t last = steady_now_ns();
  EXPECT_NE(last, 0U);
  for (int i = 0; i < 100'000; ++i) {
    const std::uint64_t now = steady_now_ns();
    ASSERT_GE(now, last);
    last = now;
  }
}

TEST(Clock, IsSteadyClockInNanoseconds) {
  const auto before = std::chrono::steady_clock::now().time_since_epoch();
  const std::uint64_t ours = steady_now_ns();
  const auto after = std::chrono::steady_clock::now().time_since_epoch();
  EXPECT_GE(ours, static_cast<std::uint64_t>(std::chrono::nanoseconds(before).count()));
  EXPECT_LE(ours, static_cast<std::uint64_t>(std::chrono::nanoseconds(after).count()));
  const std::int64_t as_signed = steady_now_ns_signed();
  EXPECT_GE(as_signed, static_cast<std::int64_t>(ours));
}

// A reading published by one thread and read by another is not later than
// the reader's own reading taken after it (ordered readings compare).
TEST(Clock, OrderedReadingsOnTwoThreadsCompare) {
  std::atomic<std::uint64_t> published{0};
  std::thread writer([&] { published.store(steady_now_ns(), std::memory_order_release); });  // pairs below
  std::uint64_t seen = 0;
  while ((seen = published.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
  EXPECT_LE(seen, steady_now_ns());
  writer.join();
}

}  // namespace
}  // namespace thread_system::detail
