// latency_histogram: layout, percentile accuracy against exact nearest-rank
// percentiles of sorted data, merge/since, and a reader concurrent with the
// single writer.
#include "thread_system/diagnostics/latency_histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <latch>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace thread_system {
namespace {

using layout = histogram_layout;

TEST(LatencyHistogramLayout, BucketsAreContiguousAndIndexRoundTrips) {
  EXPECT_EQ(layout::lower_bound(0), 0u);
  for (std::size_t i = 0; i < layout::bucket_count; ++i) {
    ASSERT_LE(layout::lower_bound(i), layout::upper_bound(i)) << i;
    ASSERT_EQ(layout::index_of(layout::lower_bound(i)), i) << i;
    ASSERT_EQ(layout::index_of(layout::upper_bound(i)), i) << i;
    if (i + 1 < layout::bucket_count) {
      ASSERT_EQ(layout::upper_bound(i) + 1, layout::lower_bound(i + 1)) << i;
    }
    const std::uint64_t width = layout::upper_bound(i) - layout::lower_bound(i) + 1;
    if (i < 2 * layout::sub_bucket_count) {
      ASSERT_EQ(width, 1u) << "small values are exact";
    } else {
      ASSERT_LE(width * layout::sub_bucket_count, layout::lower_bound(i)) << "width <= lower / 16 at " << i;
    }
  }
  EXPECT_EQ(layout::index_of(std::numeric_limits<std::uint64_t>::max()), layout::bucket_count - 1);
  EXPECT_GE(layout::max_trackable, std::uint64_t{3600} * 1'000'000'000u) << "covers an hour";
  // The buckets (about 5 KB) are allocated by the first record: a histogram
  // never recorded into (a pool worker whose jobs were never sampled) is small.
  EXPECT_LE(sizeof(latency_histogram), 64u);
}

TEST(LatencyHistogram, ANeverRecordedHistogramReadsAsEmpty) {
  const latency_histogram h;
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.sum, 0u);
  EXPECT_EQ(h.mean_ns(), 0u);
  EXPECT_EQ(h.dropped(), 0u);
  latency_histogram r;
  r.reset();  // no buckets yet: nothing to zero, and no allocation
  r.record(100);
  EXPECT_EQ(r.snapshot().count, 1u);
}

// Exact nearest-rank percentile of sorted data: the smallest value with at
// least ceil(q * n) samples at or below it.
std::uint64_t exact_percentile(const std::vector<std::uint64_t>& sorted, double q) {
  if (q <= 0.0) return sorted.front();
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

void expect_percentiles_within_bound(std::vector<std::uint64_t> values, const char* what) {
  latency_histogram h;
  long double sum = 0;
  for (std::uint64_t v : values) {
    h.record(v);
    sum += static_cast<long double>(v);
  }
  std::sort(values.begin(), values.end());
  const histogram_snapshot s = h.snapshot();
  ASSERT_EQ(s.count, values.size()) << what;
  EXPECT_EQ(s.min, values.front()) << what;
  EXPECT_EQ(s.max, values.back()) << what;
  EXPECT_NEAR(s.mean(), static_cast<double>(sum / static_cast<long double>(values.size())),
              1e-9 * static_cast<double>(values.back()) + 1e-9)
      << what;
  for (double q : {0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0}) {
    const std::uint64_t exact = exact_percentile(values, q);
    const std::uint64_t estimate = s.percentile(q);
    const double bound =
        static_cast<double>(std::min(exact, layout::max_trackable)) * histogram_snapshot::relative_error;
    EXPECT_LE(std::fabs(static_cast<double>(estimate) - static_cast<double>(exact)), bound)
        << what << " q=" << q << " exact=" << exact << " estimate=" << estimate;
  }
}

TEST(LatencyHistogram, PercentilesOfUniformDataWithinBound) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint64_t> dist(0, 10'000'000);
  std::vector<std::uint64_t> v(test::scaled(200'000));
  for (auto& x : v) x = dist(rng);
  expect_percentiles_within_bound(std::move(v), "uniform");
}

TEST(LatencyHistogram, PercentilesOfExponentialDataWithinBound) {
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> dist(1.0 / 50'000.0);  // mean 50 us
  std::vector<std::uint64_t> v(test::scaled(200'000));
  for (auto& x : v) x = static_cast<std::uint64_t>(dist(rng));
  expect_percentiles_within_bound(std::move(v), "exponential");
}

TEST(LatencyHistogram, PercentilesOfWideLogNormalDataWithinBound) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> dist(10.0, 3.0);  // ns .. minutes
  std::vector<std::uint64_t> v(test::scaled(100'000));
  for (auto& x : v) x = std::min<std::uint64_t>(static_cast<std::uint64_t>(dist(rng)), layout::max_trackable);
  expect_percentiles_within_bound(std::move(v), "lognormal");
}

TEST(LatencyHistogram, ConstantDataIsExact) {
  latency_histogram h;
  for (int i = 0; i < 1000; ++i) h.record(12'345);
  const histogram_snapshot s = h.snapshot();
  for (double q : {0.0, 0.5, 0.99, 1.0}) EXPECT_EQ(s.percentile(q), 12'345u) << q;  // clamped to [min, max]
  EXPECT_EQ(s.sum, 12'345'000u);
  EXPECT_DOUBLE_EQ(s.mean(), 12'345.0);
}

TEST(LatencyHistogram, SmallValuesAreExact) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t x = 0; x < 32; ++x) v.insert(v.end(), x + 1, x);  // value x appears x+1 times
  latency_histogram h;
  for (auto x : v) h.record(x);
  const histogram_snapshot s = h.snapshot();
  for (double q : {0.01, 0.2, 0.5, 0.8, 0.99}) EXPECT_EQ(s.percentile(q), exact_percentile(v, q)) << q;
}

TEST(LatencyHistogram, EdgeValuesZeroAndHuge) {
  latency_histogram h;
  h.record(0);
  h.record(layout::max_trackable);
  h.record(std::numeric_limits<std::uint64_t>::max() / 4);  // beyond the top bucket: counted there
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.min, 0u);
  EXPECT_EQ(s.max, std::numeric_limits<std::uint64_t>::max() / 4) << "max stays exact";
  EXPECT_EQ(s.percentile(0.0), 0u);
  EXPECT_EQ(s.percentile(0.3), 0u);
  EXPECT_EQ(s.percentile(1.0), s.max);
  EXPECT_EQ(s.counts[layout::bucket_count - 1], 2u);
  const std::uint64_t p50 = s.percentile(0.5);
  EXPECT_GE(p50, layout::lower_bound(layout::bucket_count - 1));
  EXPECT_LE(p50, s.max);
}

// The sum is kept modulo 2^64, as the header says: samples adding up past it
// wrap the sum (and the mean); the count, min, max and percentiles stay exact.
TEST(LatencyHistogram, ASumPastTwoToTheSixtyFourWrapsAndNothingElseDoes) {
  constexpr std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
  latency_histogram h;
  h.record(huge);
  h.record(huge);
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.sum, huge - 1) << "2 * (2^64 - 1) modulo 2^64";
  EXPECT_EQ(s.min, huge);
  EXPECT_EQ(s.max, huge);
  EXPECT_EQ(s.percentile(0.5), huge);
}

// Only samples above max_trackable: min stays exact too (it was replaced by
// the top bucket's lower bound, below every sample, and so were the low
// percentiles).
TEST(LatencyHistogram, OnlySamplesAboveTheTrackableRangeKeepAnExactMin) {
  latency_histogram h;
  const std::uint64_t two_hours_ns = 2ULL * 3600 * 1'000'000'000;
  ASSERT_GT(two_hours_ns, layout::max_trackable);
  h.record(two_hours_ns);
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.min, two_hours_ns);
  EXPECT_EQ(s.max, two_hours_ns);
  EXPECT_EQ(s.percentile(0.0), two_hours_ns);
  EXPECT_EQ(s.percentile(0.5), two_hours_ns);
}

// The top bucket also holds samples above max_trackable: its upper bound is
// then the snapshot's max, for count_at_or_below() and for_each_bucket()
// alike. (Both said max_trackable: count_at_or_below(max_trackable)
// counted a sample of 2^50 ns, and the bucket reported an upper bound
// below its own sample.)
TEST(LatencyHistogram, TheTopBucketsUpperBoundCoversSamplesAboveTheTrackableRange) {
  thread_system::latency_histogram h;
  constexpr std::uint64_t huge = std::uint64_t{1} << 50;
  h.record(huge);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count_at_or_below(layout::max_trackable), 0U);
  EXPECT_EQ(s.count_at_or_below(huge - 1), 0U);
  EXPECT_EQ(s.count_at_or_below(huge), 1U);
  int buckets = 0;
  s.for_each_bucket([&](const thread_system::histogram_bucket& b) {
    ++buckets;
    EXPECT_EQ(b.upper, huge);
    EXPECT_LE(b.lower, huge);
  });
  EXPECT_EQ(buckets, 1);
  // Within the range the bounds are the layout's.
  thread_system::latency_histogram small;
  small.record(layout::max_trackable);
  EXPECT_EQ(small.snapshot().count_at_or_below(layout::max_trackable), 1U);
  EXPECT_EQ(small.snapshot().bucket_upper(layout::bucket_count - 1), layout::max_trackable);
}

TEST(LatencyHistogram, EmptySnapshot) {
  latency_histogram h;
  const histogram_snapshot s = h.snapshot();
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.percentile(0.5), 0u);
  EXPECT_EQ(s.min, 0u);
  EXPECT_EQ(s.max, 0u);
  EXPECT_EQ(s.mean(), 0.0);
  int buckets = 0;
  s.for_each_bucket([&](const histogram_bucket&) { ++buckets; });
  EXPECT_EQ(buckets, 0);
}

TEST(LatencyHistogram, BucketIterationAndCumulativeCounts) {
  latency_histogram h;
  const std::vector<std::uint64_t> values = {1, 1, 40, 41, 1000, 1'000'000, 255, 256};
  for (auto v : values) h.record(v);
  const histogram_snapshot s = h.snapshot();
  std::uint64_t total = 0;
  std::uint64_t previous_upper = 0;
  bool first = true;
  s.for_each_bucket([&](const histogram_bucket& b) {
    EXPECT_GT(b.count, 0u);
    if (!first) {
      EXPECT_GT(b.lower, previous_upper) << "ascending, disjoint";
    }
    first = false;
    previous_upper = b.upper;
    const auto inside =
        std::count_if(values.begin(), values.end(), [&](auto v) { return v >= b.lower && v <= b.upper; });
    EXPECT_EQ(static_cast<std::uint64_t>(inside), b.count) << "[" << b.lower << ", " << b.upper << "]";
    total += b.count;
  });
  EXPECT_EQ(total, values.size());
  // Exact at bucket upper bounds such as 4^k - 1.
  EXPECT_EQ(s.count_at_or_below(255), 5u);
  EXPECT_EQ(s.count_at_or_below(1023), 7u);
  EXPECT_EQ(s.count_at_or_below((std::uint64_t{1} << 20) - 1), 8u);
  EXPECT_EQ(s.count_at_or_below(999'999), 7u) << "inside 1'000'000's bucket: whole buckets only";
  EXPECT_EQ(s.count_at_or_below(std::numeric_limits<std::uint64_t>::max()), 8u);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverythingInOne) {
  latency_histogram a, b, all;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint64_t> dist(0, 1'000'000);
  for (int i = 0; i < 10'000; ++i) {
    const auto v = dist(rng);
    (i % 3 == 0 ? a : b).record(v);
    all.record(v);
  }
  histogram_snapshot merged = a.snapshot();
  merged.merge(b.snapshot());
  const histogram_snapshot expected = all.snapshot();
  EXPECT_EQ(merged.counts, expected.counts);
  EXPECT_EQ(merged.count, expected.count);
  EXPECT_EQ(merged.sum, expected.sum);
  EXPECT_EQ(merged.min, expected.min);
  EXPECT_EQ(merged.max, expected.max);

  histogram_snapshot into_empty;
  into_empty.merge(a.snapshot());
  EXPECT_EQ(into_empty.min, a.snapshot().min) << "merging into an empty snapshot keeps the other's min";
}

TEST(LatencyHistogram, SinceGivesTheSamplesInBetween) {
  latency_histogram h;
  for (int i = 0; i < 100; ++i) h.record(1'000);
  const histogram_snapshot before = h.snapshot();
  for (int i = 0; i < 50; ++i) h.record(5'000'000);
  const histogram_snapshot d = h.snapshot().since(before);
  EXPECT_EQ(d.count, 50u);
  EXPECT_EQ(d.sum, 250'000'000u);
  EXPECT_EQ(d.percentile(0.01), 5'000'000u);
  EXPECT_LE(d.min, 5'000'000u);
  EXPECT_GE(d.max, 5'000'000u);
}

TEST(LatencyHistogram, ResetEmptiesIt) {
  latency_histogram h;
  h.record(10);
  h.record(1'000'000);
  h.reset();
  EXPECT_TRUE(h.snapshot().empty());
  h.record(77);
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.min, 77u);
  EXPECT_EQ(s.max, 77u);
}

TEST(LatencyHistogram, RecordConcurrentCountsEverySampleFromManyWriters) {
  latency_histogram h;
  constexpr std::size_t per_thread = test::scaled(100'000);
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (std::size_t i = 0; i < per_thread; ++i) h.record_concurrent(t * 1000 + i % 1000);
    });
  }
  for (auto& t : threads) t.join();
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 4 * per_thread);
  EXPECT_EQ(s.min, 0u);
  EXPECT_EQ(s.max, 3999u);
}

// The first record allocates the buckets; writers that race to it install
// one array between them (the others free theirs and use it): no sample is
// lost. Many fresh histograms, each first recorded by 4 threads released
// together.
TEST(LatencyHistogram, WritersRacingToTheFirstRecordLoseNoSample) {
  constexpr int rounds = 200;
  constexpr std::uint64_t writers = 4;
  for (int r = 0; r < rounds; ++r) {
    latency_histogram h;
    std::latch go(static_cast<std::ptrdiff_t>(writers));
    std::vector<std::thread> threads;
    for (std::uint64_t t = 0; t < writers; ++t) {
      threads.emplace_back([&h, &go, t] {
        go.arrive_and_wait();
        h.record_concurrent(100 + t);
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(h.snapshot().count, writers) << "round " << r;
    ASSERT_EQ(h.dropped(), 0u);
  }
}

// One writer, one reader taking snapshots: every snapshot is internally
// consistent (count == sum of buckets, values within what was recorded) and
// counts never go backwards; the final snapshot is exact. The writer keeps
// recording until the reader has taken `min_snapshots` snapshots, so the two
// overlap however quickly the writer would otherwise finish its share.
TEST(LatencyHistogram, SnapshotsConcurrentWithTheWriterAreConsistent) {
  latency_histogram h;
  const std::size_t n = test::scaled(1'000'000);
  constexpr std::size_t min_snapshots = 64;
  std::atomic<std::size_t> snapshots_taken{0};
  std::atomic<bool> done{false};
  std::size_t recorded = 0;  // written by the writer, read after join()
  std::thread writer([&] {
    std::size_t i = 0;
    // acquire pairs with the reader's release increment; only the count is
    // shared through it, so relaxed would do, but acquire keeps it obvious.
    while (i < n || snapshots_taken.load(std::memory_order_acquire) < min_snapshots) {
      h.record(100 + i % 10'000);
      ++i;
    }
    recorded = i;
    done.store(true, std::memory_order_release);  // pairs with the reader's acquire
  });
  std::uint64_t previous = 0;
  histogram_snapshot s;
  histogram_snapshot last;
  while (!done.load(std::memory_order_acquire)) {  // pairs with the writer's release
    h.snapshot_into(s);
    snapshots_taken.fetch_add(1, std::memory_order_release);  // pairs with the writer's acquire
    std::uint64_t bucket_total = 0;
    for (std::size_t i = 0; i < s.counts.size(); ++i) {
      ASSERT_GE(s.counts[i], last.counts[i]) << "bucket " << i << " went backwards";
      bucket_total += s.counts[i];
    }
    ASSERT_EQ(bucket_total, s.count);
    ASSERT_GE(s.count, previous);
    if (s.count != 0) {
      // min/max may fall back to the bounds of the outermost buckets when
      // the copy caught a bucket before the writer's min/max store.
      ASSERT_GE(s.min, layout::lower_bound(layout::index_of(100)));
      ASSERT_LE(s.max, layout::upper_bound(layout::index_of(100 + 9'999)));
      ASSERT_LE(s.min, s.max);
      const auto p = s.percentile(0.99);
      ASSERT_GE(p, s.min);
      ASSERT_LE(p, s.max);
    }
    previous = s.count;
    last = s;
  }
  writer.join();
  ASSERT_GE(recorded, n);
  EXPECT_GE(snapshots_taken.load(std::memory_order_relaxed), min_snapshots);  // after join()
  EXPECT_LE(previous, recorded);
  const histogram_snapshot final_snapshot = h.snapshot();
  EXPECT_EQ(final_snapshot.count, recorded);
  std::uint64_t expected_sum = 0;
  for (std::size_t i = 0; i < recorded; ++i) expected_sum += 100 + i % 10'000;
  EXPECT_EQ(final_snapshot.sum, expected_sum);
  EXPECT_EQ(final_snapshot.min, 100u);
  EXPECT_EQ(final_snapshot.max, recorded >= 10'000 ? 100u + 9'999u : 100u + recorded - 1);
}

}  // namespace
}  // namespace thread_system
