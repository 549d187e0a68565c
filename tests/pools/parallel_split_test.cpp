#include "thread_system/pools/parallel_split.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "../support/test_support.hpp"

namespace ts = thread_system;

// The index arithmetic works for every range an index type can express:
// the length of [min, max) of int64_t does not fit in int64_t, and a
// signed range crossing zero is counted in the unsigned counterpart.
TEST(ParallelSplit, RangeLengthCoversTheWholeRangeOfEveryIndexType) {
  using ts::detail::range_length;
  constexpr auto lo64 = std::numeric_limits<std::int64_t>::min();
  constexpr auto hi64 = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(range_length(lo64, hi64), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(range_length(std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max()),
            std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(range_length(-1'500'000'000, 1'500'000'000), 3'000'000'000U);  // wider than int's maximum
  EXPECT_EQ(range_length(std::int8_t{-128}, std::int8_t{127}), 255U);
  EXPECT_EQ(range_length(7, 7), 0U);
}

TEST(ParallelSplit, AdvanceIndexLandsInsideTheRangeWithoutOverflow) {
  using ts::detail::advance_index;
  constexpr auto lo64 = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(advance_index(lo64, std::numeric_limits<std::uint64_t>::max()), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(advance_index(-1'500'000'000, 3'000'000'000U), 1'500'000'000);
  EXPECT_EQ(advance_index(std::int8_t{-128}, 200), std::int8_t{72});
  EXPECT_EQ(advance_index(std::uint16_t{10}, 0), std::uint16_t{10});
}

// A split point lies on a multiple of split_alignment from the range's
// start when the half is at least that long, and halves the range otherwise.
TEST(ParallelSplit, MidpointsFallOnTheSplitAlignment) {
  using ts::detail::aligned_mid;
  using ts::detail::split_alignment;
  EXPECT_EQ(aligned_mid(std::size_t{0}, std::size_t{10'000'000} / 128), 39'040U);  // 78 125 / 2 = 39 062, down to 64s
  EXPECT_EQ(aligned_mid(std::int64_t{-1'000}, std::int64_t{1'000}), std::int64_t{-1'000 + 960});
  EXPECT_EQ(aligned_mid(3, 13), 8);                                                   // 5: below the alignment, kept
  EXPECT_EQ(aligned_mid(std::size_t{5}, std::size_t{5} + 127), std::size_t{5} + 63);  // a half of 63: kept
  for (std::size_t n : {128U, 129U, 1'000U, 65'537U}) {
    const std::size_t mid = aligned_mid(std::size_t{5}, std::size_t{5} + n);
    EXPECT_EQ((mid - 5) % split_alignment, 0U) << n;
    EXPECT_LE(mid - 5, n / 2) << n;
    EXPECT_GT(mid - 5, n / 2 - split_alignment) << n;
  }
}

// parallel_reduce's automatic grain: eight leaves per worker, at least one
// index (its tree depends only on the range and the grain).
TEST(ParallelSplit, ReduceGrainIsEightLeavesPerWorker) {
  using ts::detail::default_grain;
  EXPECT_EQ(default_grain(2, std::size_t{0}, std::size_t{1'600}), 100U);
  EXPECT_EQ(default_grain(0, 0, 80), 10U);  // counted as one worker
  EXPECT_EQ(default_grain(16, 0, 5), 1U);
}

// The automatic grain (header comment): a quarter of an equal share per
// worker, run in chunks of a sixteenth of that; a grain given by the caller
// runs in chunks of an eighth of it. Chunks are multiples of the split
// alignment where the sizes allow, at least 1 and at most max_chunk indices.
TEST(ParallelSplit, AutomaticGrainMakesFourPiecesPerWorkerInChunksOfASixteenth) {
  using ts::detail::parallel_for_sizes;
  const auto a = parallel_for_sizes(2, std::size_t{0}, std::size_t{100'000}, 0);
  EXPECT_EQ(a.grain, 12'500U);  // 100 000 / 2 / 4
  EXPECT_EQ(a.chunk, 768U);     // 100 000 / 2 / 64 = 781, down to a multiple of 64
  const auto given = parallel_for_sizes(2, std::size_t{0}, std::size_t{100'000}, 10'000);
  EXPECT_EQ(given.grain, 10'000U);
  EXPECT_EQ(given.chunk, 1'216U);  // 10 000 / 8 = 1 250, down to a multiple of 64
  const auto tiny = parallel_for_sizes(4, 0, 10, 0);
  EXPECT_EQ(tiny.grain, 1U);
  EXPECT_EQ(tiny.chunk, 1U);
  const auto huge = parallel_for_sizes(1, std::int64_t{0}, std::int64_t{1} << 40, 0);
  EXPECT_EQ(huge.grain, std::uint64_t{1} << 38);
  EXPECT_EQ(huge.chunk, ts::detail::max_chunk);
  const auto no_workers = parallel_for_sizes(0, 0U, 1'024U, 0);  // counted as one worker
  EXPECT_EQ(no_workers.grain, 256U);
  EXPECT_EQ(no_workers.chunk, 16U);  // 1 024 / 64, below the alignment: kept
}

namespace {
struct counting_body {
  std::atomic<std::size_t>* visits;
  void operator()(std::size_t) const { visits->fetch_add(1, std::memory_order_relaxed); }
};
using loop_state = ts::detail::caller_loop_state<std::size_t, const counting_body>;
}  // namespace

// A ticket takes its piece once, for one thread; a stale ticket whose slot
// a later piece reuses never takes that later piece.
TEST(ParallelSplit, ATicketClaimsItsPieceOnceAndAStaleOneNever) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<std::size_t> visits{0};
  const counting_body body{&visits};
  auto st = std::make_shared<loop_state>(pool, body, ts::detail::for_sizes{16, 16});
  using ts::detail::reclaim_slot_bits;
  const std::uint64_t first = (std::uint64_t{1} << reclaim_slot_bits) | 3;
  const std::uint64_t later = (std::uint64_t{2} << reclaim_slot_bits) | 3;  // the same slot, reused
  st->claims[3].store(later, std::memory_order_relaxed);
  EXPECT_FALSE((ts::detail::claim_piece<std::size_t, const counting_body>(*st, first)));
  EXPECT_TRUE((ts::detail::claim_piece<std::size_t, const counting_body>(*st, later)));
  EXPECT_FALSE((ts::detail::claim_piece<std::size_t, const counting_body>(*st, later)));  // taken
  EXPECT_EQ(st->claims[3].load(std::memory_order_relaxed), 0U);
}

// A piece the pool refuses runs on the handing thread, and its count is
// given back once: the loop's pending count is the root's again, not one
// less (a loop that returned while pieces ran).
TEST(ParallelSplit, ARefusedPieceRunsHereAndCountsFinishedOnce) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  pool.stop();
  std::atomic<std::size_t> visits{0};
  const counting_body body{&visits};
  auto st = std::make_shared<ts::detail::parallel_for_state<std::size_t, const counting_body>>(
      pool, body, ts::detail::for_sizes{1'000, 64});
  EXPECT_FALSE((ts::detail::hand_out<std::size_t, const counting_body>(st, std::size_t{100}, std::size_t{300})));
  // relaxed below: the refused piece ran on this thread, which wrote every
  // count it reads.
  EXPECT_EQ(visits.load(std::memory_order_relaxed), 200U);
  EXPECT_EQ(st->pending.load(std::memory_order_relaxed), 1U);  // the root piece only
  EXPECT_FALSE(st->done.ready());
}

// A piece the pool discards unrun counts finished and marks the loop
// cancelled (the call then throws error_exception{cancelled}); one its
// caller took back leaves the pool's count of such entries instead.
TEST(ParallelSplit, ADiscardedPieceCountsFinishedAndMarksTheLoopCancelled) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<std::size_t> visits{0};
  const counting_body body{&visits};
  auto st = std::make_shared<loop_state>(pool, body, ts::detail::for_sizes{16, 16});
  using piece = ts::detail::for_piece<std::size_t, const counting_body>;
  st->pending.fetch_add(1, std::memory_order_relaxed);  // as hand_out() does
  piece{st, 0, 10, 0}.cancel();
  // relaxed loads here: nothing reached the pool; this thread wrote each word.
  EXPECT_TRUE(st->cancelled.load(std::memory_order_relaxed));
  EXPECT_EQ(st->pending.load(std::memory_order_relaxed), 1U);
  // Taken back by its caller: the worker that pops it does nothing but
  // leave the account.
  ts::detail::taken_back_account& account = *st->account;
  const std::int64_t queued_before = account.queued.load(std::memory_order_relaxed);
  account.took_back(1);
  const std::uint64_t ticket = (std::uint64_t{1} << ts::detail::reclaim_slot_bits) | 0;
  st->claims[0].store(ticket, std::memory_order_relaxed);
  ASSERT_TRUE((ts::detail::claim_piece<std::size_t, const counting_body>(*st, ticket)));  // the caller's take-back
  piece{st, 0, 10, ticket}();
  EXPECT_EQ(visits.load(std::memory_order_relaxed), 0U);
  EXPECT_EQ(account.queued.load(std::memory_order_relaxed), queued_before);
  EXPECT_EQ(st->pending.load(std::memory_order_relaxed),
            1U);  // its taker counts it finished, not the worker that pops it
}
