#include "thread_system/queues/work_stealing_deque.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;

TEST(WorkStealingDeque, OwnerPopsNewestFirst) {
  ts::work_stealing_deque<int> d(4);
  for (int i = 1; i <= 10; ++i) d.push(i);  // grows from 4
  EXPECT_EQ(d.size_approx(), 10U);
  EXPECT_GE(d.capacity(), 10U);
  int v = 0;
  for (int i = 10; i >= 1; --i) {
    ASSERT_TRUE(d.pop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(d.pop(v));
}

// Many growths (2 -> 65536, fifteen rings kept alive behind the newest):
// every element survives each copy, and the rings are freed with the deque
// (ASan/LSan check that).
TEST(WorkStealingDeque, GrowsByDoublingAndKeepsEveryElement) {
  ts::work_stealing_deque<std::uint32_t> d(2);
  EXPECT_EQ(d.capacity(), 2U);
  constexpr std::uint32_t n = 1U << 16;
  for (std::uint32_t i = 0; i < n; ++i) d.push(i);
  EXPECT_EQ(d.capacity(), n);
  auto oldest = d.steal();
  ASSERT_TRUE(oldest);
  EXPECT_EQ(oldest.value, 0U);
  std::uint32_t v = 0;
  for (std::uint32_t i = n - 1; i >= 1; --i) {
    ASSERT_TRUE(d.pop(v));
    ASSERT_EQ(v, i);
  }
  EXPECT_FALSE(d.pop(v));
}

// reserve(n) makes room for n more pushes at once (growing as often as it
// must) and keeps what is there; room() says how many pushes fit.
TEST(WorkStealingDeque, ReserveMakesRoomAndKeepsTheElements) {
  ts::work_stealing_deque<int> d(4);
  for (int i = 0; i < 3; ++i) d.push(i);
  EXPECT_EQ(d.room(), 1U);
  ASSERT_TRUE(d.reserve(100));
  EXPECT_GE(d.room(), 100U);
  EXPECT_EQ(d.capacity(), 128U) << "the smallest power of two that holds 103";
  EXPECT_EQ(d.size_approx(), 3U);
  ASSERT_TRUE(d.reserve(1)) << "room already there: nothing to do";
  EXPECT_EQ(d.capacity(), 128U);
  for (int i = 0; i < 3; ++i) {
    auto r = d.steal();
    ASSERT_TRUE(r);
    EXPECT_EQ(r.value, i);
  }
}

// Sizes no ring can have are refused up front: the constructor throws
// bad_alloc (its doubling once wrapped to 0 and looped forever for a
// capacity above 2^63), reserve() answers false (the sum of the queued
// count and n once wrapped and answered true), and the deque goes on.
TEST(WorkStealingDeque, SizesNoRingCanHoldAreRefused) {
  using deque = ts::work_stealing_deque<int>;
  constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
  EXPECT_THROW(deque{size_max}, std::bad_alloc);
  EXPECT_THROW(deque{deque::max_capacity + 1}, std::bad_alloc);
  deque d(4);
  d.push(1);
  EXPECT_FALSE(d.reserve(size_max));
  EXPECT_FALSE(d.reserve(deque::max_capacity));
  EXPECT_EQ(d.capacity(), 4U) << "nothing was allocated";
  d.push(2);
  int v = 0;
  ASSERT_TRUE(d.pop(v));
  EXPECT_EQ(v, 2);
  ASSERT_TRUE(d.pop(v));
  EXPECT_EQ(v, 1);
}

TEST(WorkStealingDeque, ThiefTakesOldestFirst) {
  ts::work_stealing_deque<int> d;
  for (int i = 1; i <= 5; ++i) d.push(i);
  for (int i = 1; i <= 5; ++i) {
    auto r = d.steal();
    ASSERT_EQ(r.status, ts::steal_status::success);
    EXPECT_EQ(r.value, i);
  }
  EXPECT_EQ(d.steal().status, ts::steal_status::empty);
}

// steal_if() takes the oldest element only when the predicate accepts it,
// and leaves it (and the deque) as it was otherwise.
TEST(WorkStealingDeque, StealIfTakesTheOldestOnlyWhenAccepted) {
  ts::work_stealing_deque<int> d;
  for (int i = 1; i <= 4; ++i) d.push(i);
  auto odd = [](int v) noexcept { return v % 2 == 1; };
  auto r = d.steal_if(odd);
  ASSERT_EQ(r.status, ts::steal_status::success);
  EXPECT_EQ(r.value, 1);
  EXPECT_EQ(d.steal_if(odd).status, ts::steal_status::empty);  // 2 is the oldest now: refused, not taken
  EXPECT_EQ(d.size_approx(), 3U);
  EXPECT_EQ(d.steal().value, 2);
  EXPECT_EQ(d.steal_if(odd).value, 3);
  int last = 0;
  ASSERT_TRUE(d.pop(last));
  EXPECT_EQ(last, 4);
  EXPECT_EQ(d.steal_if(odd).status, ts::steal_status::empty);
}

// Owner pushes N items (popping some itself) while T thieves steal: every
// item is taken exactly once, by the owner or by a thief. Small initial
// capacity forces growth while thieves are active.
class DequeThieves : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(DequeThieves, EveryItemTakenExactlyOnce) {
  const auto [thieves, raw_items] = GetParam();
  const auto items = static_cast<std::int64_t>(ts::test::scaled(static_cast<std::size_t>(raw_items)) | 1U);  // odd
  ts::work_stealing_deque<std::int64_t> d(2);
  std::vector<std::atomic<int>> taken(static_cast<std::size_t>(items));
  std::atomic<bool> done_pushing{false};
  std::atomic<std::int64_t> stolen{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < thieves; ++t) {
    pool.emplace_back([&] {
      for (;;) {
        auto r = d.steal();
        if (r) {
          taken[static_cast<std::size_t>(r.value)].fetch_add(1, std::memory_order_relaxed);
          stolen.fetch_add(1, std::memory_order_relaxed);
        } else if (r.status == ts::steal_status::empty && done_pushing.load(std::memory_order_acquire) &&
                   d.empty_approx()) {
          return;
        }
      }
    });
  }
  std::int64_t popped = 0;
  std::int64_t v = 0;
  for (std::int64_t i = 0; i < items; ++i) {
    d.push(i);
    if (i % 3 == 0 && d.pop(v)) {
      taken[static_cast<std::size_t>(v)].fetch_add(1, std::memory_order_relaxed);
      ++popped;
    }
  }
  while (d.pop(v)) {
    taken[static_cast<std::size_t>(v)].fetch_add(1, std::memory_order_relaxed);
    ++popped;
  }
  done_pushing.store(true, std::memory_order_release);
  for (auto& t : pool) t.join();
  EXPECT_EQ(popped + stolen.load(std::memory_order_seq_cst), items);  // seq_cst: pairs with the writers' RMW/store
  std::int64_t wrong = 0;
  for (auto& t : taken) wrong += t.load(std::memory_order_seq_cst) != 1;  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(ThievesAndSizes, DequeThieves,
                         testing::Combine(testing::Values(1, 2, 3, 8), testing::Values(1, 7, 1001, 99'999)),
                         [](const auto& param_info) {
                           return std::to_string(std::get<0>(param_info.param)) + "thieves_" +
                                  std::to_string(std::get<1>(param_info.param)) + "items";
                         });

// The owner's pop and a thief's steal race for a single remaining item:
// exactly one of them gets it, every time; a pop that loses leaves its
// output as it was.
TEST(WorkStealingDeque, OwnerAndThiefRaceForTheLastItem) {
  const std::size_t rounds = ts::test::scaled(50'000);
  ts::work_stealing_deque<std::size_t> d;
  std::atomic<std::size_t> round{0};
  std::atomic<std::size_t> thief_wins{0};
  std::atomic<bool> quit{false};
  std::thread thief([&] {
    std::size_t seen = 0;
    while (!quit.load(std::memory_order_acquire)) {
      const std::size_t r = round.load(std::memory_order_acquire);
      if (r == seen) continue;
      seen = r;
      if (d.steal()) thief_wins.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::size_t owner_wins = 0;
  for (std::size_t i = 1; i <= rounds; ++i) {
    d.push(i);
    round.store(i, std::memory_order_release);
    std::size_t v = 0;
    if (d.pop(v)) {
      EXPECT_EQ(v, i);
      ++owner_wins;
    } else {
      ASSERT_EQ(v, 0U) << "a pop that found nothing wrote its output";
    }
    // Wait until the item is gone (taken by one side) before the next round.
    while (!d.empty_approx()) {
    }
  }
  quit.store(true, std::memory_order_release);
  thief.join();
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(owner_wins + thief_wins.load(std::memory_order_seq_cst), rounds);
}
