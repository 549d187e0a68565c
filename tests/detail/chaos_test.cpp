// detail/chaos.hpp: THREAD_SYSTEM_CHAOS_POINT() is nothing in a normal build
// (usable even in a constant expression, so it costs nothing on hot paths)
// and, in the chaos build (THREAD_SYSTEM_CHAOS), a point any thread may
// reach at any time under one seed fixed for the process.
#include "thread_system/detail/chaos.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

#if !defined(THREAD_SYSTEM_CHAOS)
constexpr int points_passed(int n) {
  int passed = 0;
  for (int i = 0; i < n; ++i) {
    THREAD_SYSTEM_CHAOS_POINT();
    ++passed;
  }
  return passed;
}
static_assert(points_passed(3) == 3, "in a normal build a chaos point is nothing, even at compile time");
#endif

TEST(Chaos, PointsAreSafeFromManyThreadsAtOnce) {
  constexpr int threads = 4;
  constexpr int points = 20000;
  std::atomic<int> passed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&passed] {
      for (int i = 0; i < points; ++i) THREAD_SYSTEM_CHAOS_POINT();
      passed.fetch_add(1, std::memory_order_relaxed);  // read after join()
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(passed.load(std::memory_order_relaxed), threads);
#if defined(THREAD_SYSTEM_CHAOS)
  // One seed for the whole process, so the printed seed replays every thread.
  const auto seed = thread_system::detail::chaos_seed();
  EXPECT_EQ(thread_system::detail::chaos_seed(), seed);
#endif
}

}  // namespace
