#include "thread_system/pools/parallel_for.hpp"
#include "thread_system/pools/thread_worker.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;

namespace {
// Runs parallel_for over [0, n) on `pool` from this thread and returns, per
// index, the thread that ran it (a default id: never ran).
std::vector<std::thread::id> threads_per_index(ts::thread_pool& pool, std::size_t n, std::size_t grain) {
  std::vector<std::thread::id> ran_on(n);
  ts::parallel_for(
      pool, std::size_t{0}, n, [&](std::size_t i) { ran_on[i] = std::this_thread::get_id(); },
      grain);  // disjoint indices
  return ran_on;
}

}  // namespace

TEST(ParallelFor, VisitsEveryIndexOnce) {
  ts::thread_pool pool{3, ts::test::pool_opts()};
  const std::size_t n = ts::test::scaled(1'000'003);
  std::vector<std::uint8_t> hits(n, 0);
  ts::parallel_for(pool, std::size_t{0}, n, [&](std::size_t i) { ++hits[i]; });  // disjoint indices: no race
  std::size_t wrong = 0;
  for (auto h : hits) wrong += h != 1;
  EXPECT_EQ(wrong, 0U);
}

TEST(ParallelFor, EmptyAndTinyRanges) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  int calls = 0;
  ts::parallel_for(pool, 5, 5, [&](int) { ++calls; });
  ts::parallel_for(pool, 7, 3, [&](int) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::atomic<int> one{0};
  // seq_cst: pairs with the checking load(s)
  ts::parallel_for(pool, -1, 0, [&](int i) { one.fetch_add(i + 2, std::memory_order_seq_cst); });
  EXPECT_EQ(one.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
}

TEST(ParallelFor, NestedParallelism) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  constexpr int outer = 16;
  constexpr int inner = 1000;
  std::vector<std::atomic<int>> rows(outer);
  ts::parallel_for(
      pool, 0, outer,
      [&](int r) {
        ts::parallel_for(
            // seq_cst: pairs with the checking load(s)
            pool, 0, inner, [&](int) { rows[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_seq_cst); },
            10);
      },
      1);
  // seq_cst: pairs with the writers' RMW/store
  for (auto& r : rows) EXPECT_EQ(r.load(std::memory_order_seq_cst), inner);
}

TEST(ParallelFor, FirstExceptionReachesTheCallerAfterAllPiecesFinish) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> visited{0};
  EXPECT_THROW(ts::parallel_for(
                   pool, 0, 10'000,
                   [&](int i) {
                     visited.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
                     if (i == 5000) throw std::runtime_error("bad index");
                   },
                   100),
               std::runtime_error);
  pool.wait_idle();                                       // nothing left running that references the body
  EXPECT_GT(visited.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
}

TEST(ParallelFor, WorksFromInsideAWorker) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  auto f = pool.submit([&pool] {
    std::atomic<long> sum{0};
    ts::parallel_for(
        // seq_cst: pairs with the checking load(s)
        pool, 0L, 10'000L, [&](long i) { sum.fetch_add(i, std::memory_order_seq_cst); }, 64);
    return sum.load(std::memory_order_seq_cst);  // seq_cst: pairs with the writers' RMW/store
  });
  EXPECT_EQ(f.get(), 10'000L * 9'999L / 2);
}

// Lazy splitting: a range given as one leaf (grain = its size) is still
// shared when another worker is idle. The leaf runs in chunks of grain/8 = 2
// indices; after the first chunk the running worker has handed nothing out,
// so it hands out half of the rest. Every later index waits until a second
// thread has run an index, so the test fails (after the deadline) if the
// leaf is never split: no other worker would ever get an index.
TEST(ParallelFor, OneLeafIsSplitOnDemandForAnIdleWorker) {
  ts::thread_pool pool{2};
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<bool> second_thread_seen{false};
  std::atomic<int> visited{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto f = pool.submit([&] {
    ts::parallel_for(
        pool, 0, 16,
        [&](int i) {
          {
            std::lock_guard lock(m);
            threads.insert(std::this_thread::get_id());
            // seq_cst: pairs with the waiting loads below
            if (threads.size() >= 2) second_thread_seen.store(true, std::memory_order_seq_cst);
          }
          // seq_cst: pairs with the store above
          while (i >= 2 && !second_thread_seen.load(std::memory_order_seq_cst) &&
                 std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
          visited.fetch_add(1, std::memory_order_relaxed);  // read after f.get(), which synchronises
        },
        /*grain=*/16);
  });
  f.get();
  EXPECT_EQ(visited.load(std::memory_order_relaxed), 16);
  std::lock_guard lock(m);
  EXPECT_EQ(threads.size(), 2U) << "the single leaf was never split for the idle worker";
}

// From a thread outside the pool the caller takes part: it always runs its
// own first leaf (the root's lowest piece), and the workers run the rest or
// nothing, as it happens; every index runs once.
TEST(ParallelFor, FromOutsideThePoolTheCallerTakesPart) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  const std::vector<std::thread::id> ran_on = threads_per_index(pool, 20'011, 100);
  const auto caller = std::this_thread::get_id();
  std::size_t missed = 0;
  for (const auto& id : ran_on) missed += id == std::thread::id{};
  EXPECT_EQ(missed, 0U);
  EXPECT_EQ(ran_on.front(), caller);
  EXPECT_FALSE(pool.is_worker_thread());
}

// From outside the pool the caller takes back every piece no worker has
// started. With the pool's only worker busy (or the pool paused) it runs
// the whole loop itself and returns; the loop used to be one job for the
// workers, and the call waited for the busy worker (here: until the
// watchdog freed it). The pieces it took back stay queued until the worker
// is free, which then finds them taken and runs no index a second time.
TEST(ParallelFor, FromOutsideABusyOrPausedPoolTheCallerRunsEveryPieceItself) {
  ts::thread_pool pool{1, ts::test::pool_opts("pf-busy")};
  for (const bool paused : {false, true}) {
    SCOPED_TRACE(paused ? "paused pool" : "busy worker");
    constexpr std::size_t n = 10'007;
    std::vector<std::atomic<int>> visits(n);
    const auto caller = std::this_thread::get_id();
    std::atomic<std::size_t> elsewhere{0};
    EXPECT_FALSE(ts::test::call_needed_the_pool(pool, paused, [&] {
      ts::parallel_for(
          pool, std::size_t{0}, n,
          [&](std::size_t i) {
            visits[i].fetch_add(1, std::memory_order_relaxed);  // read after wait_idle()
            if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1, std::memory_order_relaxed);
          },
          64);
    })) << "the call waited for the pool";
    // The worker popped the pieces taken back and ran none of them.
    EXPECT_EQ(elsewhere.load(std::memory_order_relaxed), 0U);
    std::size_t not_once = 0;
    for (const auto& v : visits) not_once += v.load(std::memory_order_relaxed) != 1;
    EXPECT_EQ(not_once, 0U);
  }
}

// A bounded pool that is full (paused, its room held by queued jobs): the
// fork-join helpers called from outside the pool take room for a piece only
// if there is some. Under every policy the caller runs what the pool has no
// room for and returns; the pieces used to go through the policy like any
// submission, so the call blocked under block (until the watchdog freed the
// pool), waited out block_for's timeout at every split, and under
// drop_oldest evicted the queued jobs and its own pieces (the loop threw
// cancelled).
namespace {
struct bounded_case {
  const char* name;
  ts::backpressure bound;
};
std::vector<bounded_case> full_bounded_pools() {
  constexpr std::size_t room = 2;
  return {{"block", ts::backpressure::block(room)},
          {"block_for", ts::backpressure::block_for(room, std::chrono::hours(1))},
          {"drop_oldest", ts::backpressure::drop_oldest(room)},
          {"reject", ts::backpressure::reject(room)},
          {"caller_runs", ts::backpressure::caller_runs(room)}};
}
// Runs `loop(pool)` from this thread on a one-worker pool bounded as `c`,
// paused, its room filled with jobs; checks that those jobs ran (none was
// evicted: a cancelled future would throw). Returns whether the loop waited
// for the pool (see test::call_needed_the_pool()).
template <typename Loop>
bool loop_waited_on_a_full_bounded_pool(const bounded_case& c, Loop loop) {
  auto opt = ts::test::pool_opts("full-bounded");
  opt.backpressure = c.bound;
  ts::thread_pool pool{1, opt};
  std::vector<ts::future<int>> fillers;
  const bool waited = ts::test::call_needed_the_pool(pool, true, [&] {
    for (std::size_t k = 0; k < c.bound.capacity; ++k) fillers.push_back(pool.submit([] { return 7; }));
    loop(pool);
  });
  for (auto& f : fillers) EXPECT_EQ(f.get(), 7);
  return waited;
}
}  // namespace

TEST(ParallelFor, FromOutsideAFullBoundedPoolTheCallerRunsThePiecesUnderEveryPolicy) {
  for (const auto& c : full_bounded_pools()) {
    SCOPED_TRACE(c.name);
    constexpr std::size_t n = 10'007;
    std::vector<std::atomic<int>> visits(n);
    EXPECT_FALSE(loop_waited_on_a_full_bounded_pool(c, [&](ts::thread_pool& pool) {
      ts::parallel_for(
          pool, std::size_t{0}, n, [&](std::size_t i) { visits[i].fetch_add(1, std::memory_order_relaxed); }, 64);
    })) << "the call waited for the pool";
    std::size_t not_once = 0;
    for (const auto& v : visits) not_once += v.load(std::memory_order_relaxed) != 1;  // read after wait_idle()
    EXPECT_EQ(not_once, 0U);
  }
}

TEST(ParallelReduce, FromOutsideAFullBoundedPoolTheCallerComputesTheLeavesUnderEveryPolicy) {
  for (const auto& c : full_bounded_pools()) {
    SCOPED_TRACE(c.name);
    constexpr std::uint64_t n = 10'007;
    std::uint64_t sum = 0;
    EXPECT_FALSE(loop_waited_on_a_full_bounded_pool(c, [&](ts::thread_pool& pool) {
      sum = ts::parallel_reduce(
          pool, std::uint64_t{0}, n, std::uint64_t{0},
          [](std::uint64_t lo, std::uint64_t hi, std::uint64_t acc) {
            for (; lo < hi; ++lo) acc += lo;
            return acc;
          },
          std::plus<>{}, 64);
    })) << "the call waited for the pool";
    EXPECT_EQ(sum, n * (n - 1) / 2);
  }
}

// A stopped pool refuses the loop; the caller then runs every index itself.
TEST(ParallelFor, StoppedPoolLeavesEveryIndexToTheCaller) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  pool.stop();
  const std::vector<std::thread::id> ran_on = threads_per_index(pool, 5'003, 64);
  const auto caller = std::this_thread::get_id();
  std::size_t elsewhere = 0;
  for (const auto& id : ran_on) elsewhere += id != caller;
  EXPECT_EQ(elsewhere, 0U);
  const long sum = ts::parallel_reduce(
      pool, 0L, 1000L, 0L,
      [](long lo, long hi, long acc) {
        for (; lo < hi; ++lo) acc += lo;
        return acc;
      },
      [](long a, long b) { return a + b; }, 10);
  EXPECT_EQ(sum, 1000L * 999L / 2);
}

// Split points and chunk sizes are rounded to multiples of
// detail::split_alignment indices (relative to the start of the range), so a
// vectorised loop over an array starts every chunk aligned. A piece runs on
// one thread from start to end, so wherever consecutive indices ran on
// different threads, a piece boundary lies between them: every such switch
// must sit on a multiple of the alignment. Each index sleeps a little now and
// then so that both workers take part.
TEST(ParallelFor, PiecesStartOnAlignedIndices) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  constexpr long first = 7;
  constexpr long n = 100'003;
  std::vector<std::thread::id> ran_on(static_cast<std::size_t>(n));
  auto f = pool.submit([&] {
    ts::parallel_for(
        pool, first, first + n,
        [&](long i) {
          ran_on[static_cast<std::size_t>(i - first)] = std::this_thread::get_id();  // disjoint indices
          if (i % 4096 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        },
        /*grain=*/10'000);
  });
  f.get();
  std::set<std::thread::id> threads(ran_on.begin(), ran_on.end());
  std::size_t switches = 0;
  std::size_t misaligned = 0;
  for (std::size_t k = 1; k < ran_on.size(); ++k) {
    if (ran_on[k] == ran_on[k - 1]) continue;
    ++switches;
    if (k % ts::detail::split_alignment != 0) ++misaligned;
  }
  EXPECT_EQ(misaligned, 0U) << "of " << switches << " piece boundaries";
  // Without a switch the check above is vacuous; with two workers and 10
  // pieces one is practically certain, but a loaded machine may let one
  // worker run everything, so this is reported rather than failed.
  if (threads.size() < 2) GTEST_SKIP() << "one worker ran every piece; no boundary to check";
}

TEST(ParallelReduce, SumMatchesSerial) {
  ts::thread_pool pool{4, ts::test::pool_opts()};
  const std::size_t n = ts::test::scaled(2'000'000);
  std::vector<std::uint64_t> v(n);
  std::iota(v.begin(), v.end(), 1);
  const std::uint64_t expected = std::accumulate(v.begin(), v.end(), std::uint64_t{0});
  const std::uint64_t got = ts::parallel_reduce(
      pool, std::size_t{0}, n, std::uint64_t{0},
      [&](std::size_t lo, std::size_t hi, std::uint64_t acc) {
        for (; lo < hi; ++lo) acc += v[lo];
        return acc;
      },
      std::plus<>{});
  EXPECT_EQ(got, expected);
}

TEST(ParallelReduce, FloatingPointResultIsDeterministic) {
  ts::thread_pool pool{4, ts::test::pool_opts()};
  std::vector<double> v(100'000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0 / static_cast<double>(i + 1);
  auto run = [&] {
    return ts::parallel_reduce(
        pool, std::size_t{0}, v.size(), 0.0,
        [&](std::size_t lo, std::size_t hi, double acc) {
          for (; lo < hi; ++lo) acc += v[lo];
          return acc;
        },
        std::plus<>{}, 1000);
  };
  const double first = run();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(run(), first);  // bitwise equal: fixed combination tree
}

// From outside the pool the caller takes part, as in parallel_for: the
// leftmost leaf is its own (it used to hand the whole reduction to the
// workers and sleep).
TEST(ParallelReduce, FromOutsideThePoolTheCallerTakesPart) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> first_leaf_on_caller{false};
  const long sum = ts::parallel_reduce(
      pool, 0L, 100'000L, 0L,
      [&](long lo, long hi, long acc) {
        // relaxed: read after parallel_reduce returns, which synchronises
        if (lo == 0) first_leaf_on_caller.store(std::this_thread::get_id() == caller, std::memory_order_relaxed);
        for (; lo < hi; ++lo) acc += lo;
        return acc;
      },
      [](long a, long b) { return a + b; }, 1000);
  EXPECT_EQ(sum, 100'000L * 99'999L / 2);
  EXPECT_TRUE(first_leaf_on_caller.load(std::memory_order_relaxed));
}

// With the pool's only worker busy (or the pool paused) the caller takes
// back every half it handed out and computes the whole reduction itself;
// it used to hand the reduction to the pool as one job and wait for the
// worker (here: until the watchdog freed it). The halves taken back stay
// queued until the worker is free, which then finds them taken.
TEST(ParallelReduce, FromOutsideABusyOrPausedPoolTheCallerComputesEveryLeafItself) {
  ts::thread_pool pool{1, ts::test::pool_opts("reduce-busy")};
  for (const bool paused : {false, true}) {
    SCOPED_TRACE(paused ? "paused pool" : "busy worker");
    const auto caller = std::this_thread::get_id();
    std::atomic<std::size_t> leaves{0};
    std::atomic<std::size_t> elsewhere{0};
    long sum = 0;
    EXPECT_FALSE(ts::test::call_needed_the_pool(pool, paused, [&] {
      sum = ts::parallel_reduce(
          pool, 0L, 10'007L, 0L,
          [&](long lo, long hi, long acc) {
            leaves.fetch_add(1, std::memory_order_relaxed);  // read after wait_idle()
            if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1, std::memory_order_relaxed);
            for (; lo < hi; ++lo) acc += lo;
            return acc;
          },
          [](long a, long b) { return a + b; }, 64);
    })) << "the call waited for the pool";
    EXPECT_EQ(sum, 10'007L * 10'006L / 2);
    // The worker popped the halves taken back and ran none of them.
    EXPECT_EQ(elsewhere.load(std::memory_order_relaxed), 0U);
    EXPECT_EQ(leaves.load(std::memory_order_relaxed), 256U);  // 10 007 / 2^8 <= 64: eight levels of halving
  }
}

TEST(ParallelReduce, EmptyRangeGivesIdentity) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  EXPECT_EQ(ts::parallel_reduce(
                pool, 3, 3, 42, [](int, int, int acc) { return acc; }, std::plus<>{}),
            42);
}

// ---- ranges at the limits of the index type ----------------------------------

namespace {
// Per-thread counters, padded, so the body of a very long loop costs one
// increment of a thread-local slot.
struct alignas(64) padded_count {
  std::uint64_t n = 0;
};
constexpr std::size_t count_slots = 64;
std::array<padded_count, count_slots> g_counts;
// Slots are handed out afresh by each expect_visits_exactly() call (its
// generation), so the few threads of one call always hold distinct slots,
// however many threads earlier calls or repeated runs used.
std::atomic<std::size_t> g_next_slot{0};
std::uint64_t g_generation = 0;  // written only between calls, by the test's thread
// This thread's slot and the generation it was taken in. Constant-
// initialised, so reading them is a plain thread-local load (no
// initialisation wrapper).
thread_local padded_count* t_count = nullptr;
thread_local std::uint64_t t_generation = 0;

std::uint64_t total_count() {
  std::uint64_t sum = 0;
  for (auto& c : g_counts) sum += c.n;
  return sum;
}
// Before a call: zero counts, a new generation of slots. Returns it.
std::uint64_t reset_counts() {
  for (auto& c : g_counts) c.n = 0;
  g_next_slot.store(0, std::memory_order_relaxed);  // the pool's enqueue of the first piece orders it before any count
  return ++g_generation;
}

// The body of expect_visits_exactly(): counts a call in this thread's slot
// and the two indices at each end. Not instrumented by the sanitizers: it is
// the test's bookkeeping, called once per index (2.2 billion times by
// IntRangeWiderThanIntMaxVisitsEveryIndexOnce, which took over three minutes
// per run under TSan with it instrumented); parallel_for's own code around
// it, which is what these tests check, still is.
template <typename I>
struct visit_counter {
  I first;
  I last_index;
  std::uint64_t generation;
  std::atomic<int>* ends;
  __attribute__((no_sanitize("address", "thread", "undefined"))) void operator()(I i) const {
    if (t_generation != generation) {  // this thread's first count in this call
      const std::size_t slot = g_next_slot.fetch_add(1, std::memory_order_relaxed);
      if (slot >= count_slots) std::abort();  // a call runs on the pool's workers and the caller: a few threads
      t_count = &g_counts[slot];
      t_generation = generation;
    }
    ++t_count->n;                                                                      // this thread's slot
    if (i == first || i == last_index) ends->fetch_add(1, std::memory_order_relaxed);  // checked after the join
  }
};

// Every index of [first, last) once: counts the calls and checks the two
// indices at each end (the ones an overflowing length would get wrong).
template <typename I>
void expect_visits_exactly(ts::thread_pool& pool, I first, I last) {
  const std::uint64_t generation = reset_counts();
  std::atomic<int> ends{0};
  ts::parallel_for(pool, first, last, visit_counter<I>{first, static_cast<I>(last - 1), generation, &ends});
  EXPECT_EQ(total_count(), ts::detail::range_length(first, last));
  EXPECT_EQ(ends.load(std::memory_order_relaxed), first == static_cast<I>(last - 1) ? 1 : 2);
}
}  // namespace

// -1.5e9 .. 1.5e9: last - first does not fit an int. Before lengths were
// computed unsigned this was undefined behaviour and never returned.
TEST(ParallelFor, IntRangeWiderThanIntMaxVisitsEveryIndexOnce) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  // The whole issue needs more than INT_MAX indices, whatever the build.
  const int half = 1'100'000'000;
  expect_visits_exactly(pool, -half, half);
}

TEST(ParallelFor, RangesAtTheLimitsOfTheirTypes) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  constexpr int n = 10'000;
  expect_visits_exactly(pool, std::numeric_limits<int>::max() - n, std::numeric_limits<int>::max());
  expect_visits_exactly(pool, std::numeric_limits<int>::min(), std::numeric_limits<int>::min() + n);
  expect_visits_exactly(pool, std::numeric_limits<std::int64_t>::max() - n, std::numeric_limits<std::int64_t>::max());
  expect_visits_exactly(pool, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::min() + n);
  expect_visits_exactly(pool, std::numeric_limits<std::uint64_t>::max() - n, std::numeric_limits<std::uint64_t>::max());
  expect_visits_exactly(pool, std::int8_t{-128}, std::int8_t{127});
  expect_visits_exactly(pool, std::uint16_t{0}, std::uint16_t{65535});
}

TEST(ParallelFor, EmptyAndReversedRangesDoNothing) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> calls{0};
  auto body = [&](auto) { calls.fetch_add(1, std::memory_order_relaxed); };  // counted, checked below
  ts::parallel_for(pool, 5, 5, body);
  ts::parallel_for(pool, 5, -5, body);
  ts::parallel_for(pool, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(), body);
  ts::parallel_for(pool, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{0}, body);
  EXPECT_EQ(calls.load(std::memory_order_relaxed), 0);
  EXPECT_EQ(ts::parallel_reduce(
                pool, 7, 7, 11, [](int, int, int acc) { return acc + 1; }, std::plus<>{}),
            11);
  EXPECT_EQ(ts::parallel_reduce(
                pool, 7, -7, 11, [](int, int, int acc) { return acc + 1; }, std::plus<>{}),
            11);
}

// The full range of int64_t and of uint64_t: 2^64 - 1 indices. Leaves of a
// reduction see ranges, so the count is exact without visiting each index.
TEST(ParallelReduce, WholeRangeOfSixtyFourBitTypes) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  auto count = [](auto lo, auto hi, std::uint64_t acc) { return acc + ts::detail::range_length(lo, hi); };
  const std::uint64_t all = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(ts::parallel_reduce(pool, std::numeric_limits<std::int64_t>::min(),
                                std::numeric_limits<std::int64_t>::max(), std::uint64_t{0}, count, std::plus<>{}),
            all);
  EXPECT_EQ(ts::parallel_reduce(pool, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{0},
                                count, std::plus<>{}),
            all);
  EXPECT_EQ(ts::parallel_reduce(pool, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                                std::uint64_t{0}, count, std::plus<>{}),
            std::uint64_t{std::numeric_limits<std::uint32_t>::max()});
}

// A body that throws at once over a range of 2^64 - 1 indices: the call
// returns promptly with the exception (the rest is skipped), even with the
// smallest grain, from outside and from inside the pool.
TEST(ParallelFor, ExceptionOverAHugeRangeReturnsPromptly) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<std::uint64_t> calls{0};
  auto throwing = [&](std::int64_t) {
    calls.fetch_add(1, std::memory_order_relaxed);  // counted, checked below
    throw std::runtime_error("first call fails");
  };
  for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{1} << 40}) {
    calls.store(0, std::memory_order_relaxed);
    EXPECT_THROW(ts::parallel_for(pool, std::numeric_limits<std::int64_t>::min(),
                                  std::numeric_limits<std::int64_t>::max(), throwing, grain),
                 std::runtime_error);
    // Every body call that ran threw; pieces already started ran one chunk
    // call at most each: a handful, not billions.
    EXPECT_LT(calls.load(std::memory_order_relaxed), 10'000U);
  }
  auto inner = pool.submit([&] {
    ts::parallel_for(pool, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                     [](int) { throw std::runtime_error("inner"); });
  });
  EXPECT_THROW(inner.get(), std::runtime_error);
}

// A body that throws only after a while, over 2^40 indices with the
// automatic grain: a chunk was an eighth of the grain (2^33 indices here),
// and a chunk already running on the other worker ran to its end after the
// throw - seconds to minutes. A chunk is at most 65 536 indices now.
TEST(ParallelFor, AChunkRunningWhenABodyThrowsIsBoundedWhateverTheRange) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<std::uint64_t> calls{0};
  auto late_throw = [&](std::int64_t) {
    if (calls.fetch_add(1, std::memory_order_relaxed) == 100'000) throw std::runtime_error("late failure");
  };
  EXPECT_THROW(ts::parallel_for(pool, std::int64_t{0}, std::int64_t{1} << 40, late_throw), std::runtime_error);
  // The throwing chunk's calls, the other worker's chunk in progress, and a
  // chunk's worth more for each piece or chunk that started before the
  // failure was seen (11 extra chunks seen on a loaded machine): far below
  // the 8.6e9 calls of an uncapped chunk.
  EXPECT_LT(calls.load(std::memory_order_relaxed), 100'000U + 64U * 65'536U);
}

TEST(ParallelReduce, ExceptionOverAHugeRangeReturnsPromptly) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<std::uint64_t> leaves{0};
  auto throwing = [&](std::int64_t, std::int64_t, int) -> int {
    leaves.fetch_add(1, std::memory_order_relaxed);  // counted, checked below
    throw std::runtime_error("leaf fails");
  };
  EXPECT_THROW((void)ts::parallel_reduce(pool, std::numeric_limits<std::int64_t>::min(),
                                         std::numeric_limits<std::int64_t>::max(), 0, throwing, std::plus<>{},
                                         std::size_t{1} << 20),
               std::runtime_error);
  EXPECT_LT(leaves.load(std::memory_order_relaxed), 10'000U);
}

// A piece of a parallel_for that the pool accepts and then discards unrun
// still counts as finished: the call throws error_exception{cancelled}.
// From outside the pool: the only worker is busy; the caller's first index
// waits until stop(cancel_pending) has discarded the pieces it handed out,
// so it cannot take them back.
TEST(ParallelFor, APieceDiscardedByStopCancelPendingMakesTheCallThrowCancelled) {
  ts::thread_pool pool{1, ts::test::pool_opts("pf-cancel")};
  ts::test::worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<std::uint64_t> visited{0};
  std::atomic<bool> outcome_cancelled{false};
  std::atomic<bool> discarded_in_time{false};
  std::atomic<bool> at_first_leaf{false};
  std::thread caller([&] {
    outcome_cancelled.store(ts::test::throws_cancelled([&] {
                              ts::parallel_for(
                                  pool, 0, 1000,
                                  [&](int i) {
                                    if (i == 0) {
                                      at_first_leaf.store(true, std::memory_order_release);  // pairs below
                                      // relaxed: read after join()
                                      discarded_in_time.store(
                                          ts::test::eventually([&] { return pool.get_statistics().cancelled >= 1; }),
                                          std::memory_order_relaxed);
                                    }
                                    visited.fetch_add(1, std::memory_order_relaxed);
                                  },
                                  100);
                            }),
                            std::memory_order_relaxed);  // read after join()
  });
  // The caller's hand-outs before its first leaf have returned: the pieces
  // they pushed are queued. (Seeing only `queued` was not enough: a
  // lock-free queue counts a push still in progress, which the stop's
  // close() may then refuse - the piece runs on the caller, none is
  // discarded, and the leaf waited its whole 30 s.)
  ASSERT_TRUE(ts::test::eventually(
      [&] { return at_first_leaf.load(std::memory_order_acquire) && pool.get_statistics().queued >= 1; }));
  std::thread stopper([&] { (void)pool.stop(ts::stop_mode::cancel_pending); });
  caller.join();  // before the fix: the call waited forever
  blocker.let_go();
  stopper.join();
  EXPECT_TRUE(discarded_in_time.load(std::memory_order_relaxed));  // relaxed: joined
  EXPECT_TRUE(outcome_cancelled.load(std::memory_order_relaxed));  // relaxed: joined
  // The caller ran its own leaf and no discarded piece.
  EXPECT_GT(visited.load(std::memory_order_relaxed), 0U);
  EXPECT_LT(visited.load(std::memory_order_relaxed), 1000U);
}

// A half of a parallel_reduce that the pool accepts and then discards unrun
// makes the call throw error_exception{cancelled}. From outside the pool:
// the only worker is busy; the caller's first leaf waits until
// stop(cancel_pending) has discarded the four halves it handed out, so it
// cannot take them back, and computes no other leaf.
TEST(ParallelReduce, AHalfDiscardedByStopCancelPendingMakesTheCallThrowCancelled) {
  ts::thread_pool pool{1, ts::test::pool_opts("reduce-cancel")};
  ts::test::worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<bool> outcome_cancelled{false};
  std::atomic<bool> discarded_in_time{false};
  std::atomic<bool> at_first_leaf{false};
  std::atomic<int> leaves{0};
  std::thread caller([&] {
    outcome_cancelled.store(ts::test::throws_cancelled([&] {
                              (void)ts::parallel_reduce(
                                  pool, 0, 1000, 0,
                                  [&](int lo, int hi, int acc) {
                                    if (lo == 0) {
                                      at_first_leaf.store(true, std::memory_order_release);  // pairs below
                                      // relaxed: read after join()
                                      discarded_in_time.store(
                                          // the four halves handed out before this leaf:
                                          // [500, 1000), [250, 500), [125, 250), [62, 125)
                                          ts::test::eventually([&] { return pool.get_statistics().cancelled >= 4; }),
                                          std::memory_order_relaxed);
                                    }
                                    leaves.fetch_add(1, std::memory_order_relaxed);
                                    return acc + (hi - lo);
                                  },
                                  std::plus<>{}, 100);
                            }),
                            std::memory_order_relaxed);  // read after join()
  });
  // The four halves are queued once the caller is in its first leaf (see
  // the parallel_for test above: `queued` alone may count a push in
  // progress that the stop then refuses).
  ASSERT_TRUE(ts::test::eventually(
      [&] { return at_first_leaf.load(std::memory_order_acquire) && pool.get_statistics().queued >= 4; }));
  std::thread stopper([&] { (void)pool.stop(ts::stop_mode::cancel_pending); });
  caller.join();
  blocker.let_go();
  stopper.join();
  EXPECT_TRUE(discarded_in_time.load(std::memory_order_relaxed));  // relaxed: joined
  EXPECT_TRUE(outcome_cancelled.load(std::memory_order_relaxed));  // relaxed: joined
  // The caller computed its own leaf and no discarded half.
  EXPECT_EQ(leaves.load(std::memory_order_relaxed), 1);
}

// A leaf that throws while another piece is discarded by
// stop(cancel_pending): the leaf's exception reaches the caller, not
// `cancelled` (the header: a body's exception takes precedence). From
// outside the pool, over [0, 4) with grain 1: one worker is held, the other
// takes one job per visit to the queue, so it takes [2, 4) (handed out
// first; the queue is the FIFO mutex queue whatever the suite's kind),
// keeps [3, 4) on its deque and runs leaf 2, while [1, 2) stays queued and
// the caller runs leaf 0. Both leaves wait until the stop has discarded
// [1, 2); then leaf 2 throws. The left half [0, 2) sees only `cancelled`;
// the root used to report that.
TEST(ParallelReduce, ALeafsExceptionTakesPrecedenceOverADiscardedPiece) {
  ts::pool_options o = ts::test::pool_opts("reduce-precedence");
  o.queue = ts::pool_queue::mutex;
  ts::thread_pool pool{2, o};
  for (ts::thread_worker* w : pool.get_workers()) ASSERT_TRUE(w->set_injector_batch(1));
  ts::test::worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<int> entered{0};
  std::atomic<bool> discarded_in_time{true};
  auto leaf = [&](int lo, int, int acc) -> int {
    if (lo == 0 || lo == 2) {
      entered.fetch_add(1, std::memory_order_acq_rel);
      if (!ts::test::eventually([&] { return pool.get_statistics().cancelled >= 1; })) {
        discarded_in_time.store(false, std::memory_order_relaxed);  // read after join()
      }
      if (lo == 2) throw std::runtime_error("leaf 2 failed");
    }
    return acc + 1;
  };
  std::string outcome;
  std::thread caller([&] {
    try {
      (void)ts::parallel_reduce(pool, 0, 4, 0, leaf, std::plus<>{}, 1);
      outcome = "no exception";
    } catch (const std::runtime_error& e) {
      outcome = e.what();
    } catch (const ts::error_exception& e) {
      outcome = std::string(ts::to_string(e.code()));
    }
  });
  ASSERT_TRUE(ts::test::eventually([&] { return entered.load(std::memory_order_acquire) == 2; }));
  std::thread stopper([&] { (void)pool.stop(ts::stop_mode::cancel_pending); });
  caller.join();
  blocker.let_go();
  stopper.join();
  EXPECT_TRUE(discarded_in_time.load(std::memory_order_relaxed));  // relaxed: joined
  EXPECT_EQ(outcome, "leaf 2 failed");
}

// A pool that refuses some pieces (backpressure::reject(1): queue_full while
// its one room is taken) and accepts others. A refused piece runs on the
// splitting thread and was counted finished twice, so parallel_for could
// return while accepted pieces still ran - on a body that was gone.
TEST(ParallelFor, SomePiecesRefusedSomeAcceptedReturnsOnlyWhenAllHaveRun) {
  ts::pool_options o = ts::test::pool_opts("pf-partly-refused");
  o.backpressure = ts::backpressure::reject(1);
  ts::thread_pool pool{1, o};
  constexpr int n = 1 << 12;
  for (int round = 0; round < 10; ++round) {
    std::atomic<bool> gate{false};
    std::atomic<bool> started{false};
    // The worker is held, and one more job takes the one room: the loop's
    // first hand-outs are refused; once the gate opens the worker drains and
    // later hand-outs are accepted.
    ASSERT_TRUE(pool.enqueue([&] {
      started.store(true);
      while (!gate.load()) std::this_thread::yield();
    }));
    while (!started.load()) std::this_thread::yield();
    ASSERT_TRUE(pool.enqueue([] {}));
    std::atomic<int> visited{0};
    std::atomic<int> running{0};
    const auto caller = std::this_thread::get_id();
    ts::parallel_for(
        pool, 0, n,
        [&](int) {
          running.fetch_add(1);
          if (!gate.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          if (std::this_thread::get_id() != caller) std::this_thread::sleep_for(std::chrono::microseconds(20));
          visited.fetch_add(1);
          running.fetch_sub(1);
        },
        256);
    EXPECT_EQ(visited.load(), n) << "returned before every index ran";
    EXPECT_EQ(running.load(), 0) << "returned while a piece still ran";
    pool.wait_idle();
    if (::testing::Test::HasFailure()) break;
  }
}

// Null function pointers crashed a worker; they are refused before anything
// runs, whatever the range.
TEST(ParallelFor, EmptyCallablesAreRefusedWithInvalidArgument) {
  ts::thread_pool pool{2, ts::test::pool_opts("pf-empty")};
  void (*null_body)(int) = nullptr;
  auto code_of = [](auto&& call) -> std::optional<ts::error_code> {
    try {
      call();
    } catch (const ts::error_exception& e) {
      return e.code();
    }
    return std::nullopt;
  };
  EXPECT_EQ(code_of([&] { ts::parallel_for(pool, 0, 1000, null_body); }), ts::error_code::invalid_argument);
  EXPECT_EQ(code_of([&] { ts::parallel_for(pool, 0, 0, null_body); }), ts::error_code::invalid_argument);
  int (*null_reduce)(int, int, int) = nullptr;
  int (*null_combine)(int, int) = nullptr;
  auto sum = [](int lo, int hi, int acc) { return acc + (hi - lo); };
  auto plus = [](int a, int b) { return a + b; };
  EXPECT_EQ(code_of([&] { (void)ts::parallel_reduce(pool, 0, 1000, 0, null_reduce, plus); }),
            ts::error_code::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)ts::parallel_reduce(pool, 0, 1000, 0, sum, null_combine); }),
            ts::error_code::invalid_argument);
  EXPECT_EQ(ts::parallel_reduce(pool, 0, 1000, 0, sum, plus), 1000);
}

// Pieces a caller from outside took back stay in the pool's queue until a
// worker pops them. On a paused (or busy) pool every call left its pieces
// there, without bound. The pool now bounds them (1024 without
// backpressure, with task_group's: pool_front.hpp); at the bound a call runs
// the loop on the caller alone, handing nothing out, until the workers have
// popped the entries.
TEST(ParallelFor, PiecesTakenBackFromAPausedPoolAreBounded) {
  ts::thread_pool pool{1, ts::test::pool_opts("pf-bound")};
  pool.pause();
  std::vector<int> v(4096, 0);
  for (int call = 0; call < 1200; ++call) {
    ts::parallel_for(pool, std::size_t{0}, v.size(), [&v](std::size_t i) { ++v[i]; });
  }
  for (const int x : v) ASSERT_EQ(x, 1200);
  // A call starts below the bound and leaves at most a stack of pieces (64).
  EXPECT_LE(pool.get_statistics().queued, 1024U + 64U);
  EXPECT_GE(pool.get_statistics().queued, 1024U);
  pool.resume();
  pool.wait_idle();
  // The entries popped, calls hand out again.
  const std::uint64_t accepted = pool.get_statistics().accepted;
  pool.pause();
  ts::parallel_for(pool, std::size_t{0}, v.size(), [&v](std::size_t i) { ++v[i]; });
  EXPECT_GT(pool.get_statistics().accepted, accepted);
  pool.resume();
}

TEST(ParallelReduce, HalvesTakenBackFromAPausedPoolAreBounded) {
  ts::thread_pool pool{1, ts::test::pool_opts("pr-bound")};
  pool.pause();
  for (int call = 0; call < 400; ++call) {
    const std::uint64_t sum = ts::parallel_reduce(
        pool, std::uint64_t{0}, std::uint64_t{4096}, std::uint64_t{0},
        [](std::uint64_t lo, std::uint64_t hi, std::uint64_t acc) {
          for (; lo < hi; ++lo) acc += lo;
          return acc;
        },
        std::plus<>{});
    ASSERT_EQ(sum, std::uint64_t{4096} * 4095 / 2);
  }
  // A call starts below the bound and leaves at most its right halves (7 at
  // the automatic grain with one worker: 8 leaves).
  EXPECT_LE(pool.get_statistics().queued, 1024U + 64U);
  EXPECT_GE(pool.get_statistics().queued, 1024U);
  pool.resume();
}

// The bound held between calls only: a call checked it when it began and
// counted its pieces when it ended, and in between took back and split
// again every piece it had handed out - with a fine grain, about one entry
// per grain left in a paused pool's queue (8191 here). Now a piece counts
// from its hand-out, and each split looks at the bound.
TEST(ParallelFor, OneCallWithAFineGrainLeavesNoMoreThanTheBoundQueued) {
  ts::thread_pool pool{1, ts::test::pool_opts("pf-fine-bound")};
  pool.pause();
  std::vector<int> v(8192, 0);
  ts::parallel_for(
      pool, std::size_t{0}, v.size(), [&v](std::size_t i) { ++v[i]; }, 1);
  for (const int x : v) ASSERT_EQ(x, 1);
  EXPECT_LE(pool.get_statistics().queued, 1024U);
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().queued, 0U);
}

// In a bounded pool the entries a caller leaves behind hold room: at most
// a quarter of it. One call with a fine grain used to fill the whole room
// of a paused pool, and an unrelated submission then got queue_full; the
// fixed ring of pool_queue::bounded was bounded at 1024 entries whatever
// its size.
TEST(ParallelFor, AFineGrainCallLeavesRoomInABoundedPausedPool) {
  auto with_backpressure = ts::test::pool_opts("pf-room-bp");
  with_backpressure.backpressure = ts::backpressure::reject(64);
  auto ring = ts::test::pool_opts("pf-room-ring");
  ring.queue = ts::pool_queue::bounded;
  ring.initial_queue_capacity = 64;
  for (const auto& opt : {with_backpressure, ring}) {
    SCOPED_TRACE(opt.name);
    ts::thread_pool pool{1, opt};
    pool.pause();
    std::vector<int> v(4096, 0);
    ts::parallel_for(
        pool, std::size_t{0}, v.size(), [&v](std::size_t i) { ++v[i]; }, 1);
    for (const int x : v) ASSERT_EQ(x, 1);
    EXPECT_LE(pool.get_statistics().queued, 16U);  // a quarter of 64
    std::atomic<bool> ran{false};
    const auto r = pool.enqueue([&ran] { ran.store(true, std::memory_order_relaxed); });
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    pool.resume();
    pool.wait_idle();
    EXPECT_EQ(ran.load(std::memory_order_relaxed), r.has_value());  // relaxed: wait_idle() ordered it
  }
}

// A piece the pool refused runs on the caller, and it split with the
// workers' split: its pieces had no ticket, so the caller could not take
// them back. Once the pool had room again one of them went into the queue
// behind jobs a busy worker had not started, and the call waited for them
// (here: until the watchdog released them). Now the caller runs a refused
// piece with its own split, and takes back whatever it hands out.
TEST(ParallelFor, ARefusedPieceSplitsIntoPiecesTheCallerCanTakeBack) {
  auto opt = ts::test::pool_opts("pf-refused");
  opt.backpressure = ts::backpressure::reject(4);  // the bound on pieces left behind: 1
  ts::thread_pool pool{1, opt};
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  pool.pause();
  for (int k = 0; k < 4; ++k) {  // the pool's room, full
    ASSERT_TRUE(pool.enqueue([&] {
      started.fetch_add(1, std::memory_order_release);  // pairs with the acquire in the body below
      while (!release.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }));
  }
  std::atomic<bool> returned{false};
  std::atomic<bool> freed_by_watchdog{false};
  std::thread watchdog([&] {
    if (ts::test::eventually([&] { return returned.load(std::memory_order_acquire); })) return;
    freed_by_watchdog.store(true, std::memory_order_release);
    release.store(true, std::memory_order_release);  // pairs with the jobs' loads
  });
  constexpr std::size_t n = std::size_t{1} << 16;
  std::vector<std::atomic<int>> visits(n);
  bool first = true;  // the caller's own first index (the body below runs on no other thread first)
  const auto caller = std::this_thread::get_id();
  ts::parallel_for(
      pool, std::size_t{0}, n,
      [&](std::size_t i) {
        if (std::this_thread::get_id() == caller && first) {
          // Every split so far was refused. The worker starts the first
          // queued job and stays in it: the pool has room for one piece.
          first = false;
          pool.resume();
          ASSERT_TRUE(ts::test::eventually([&] { return started.load(std::memory_order_acquire) >= 1; }));
        }
        visits[i].fetch_add(1, std::memory_order_relaxed);
      },
      64);
  returned.store(true, std::memory_order_release);  // pairs with the watchdog's load
  watchdog.join();
  EXPECT_FALSE(freed_by_watchdog.load(std::memory_order_acquire)) << "the call waited behind the queued jobs";
  release.store(true, std::memory_order_release);
  pool.wait_idle();
  std::size_t not_once = 0;
  for (const auto& v : visits) not_once += v.load(std::memory_order_relaxed) != 1;  // read after wait_idle()
  EXPECT_EQ(not_once, 0U);
}
