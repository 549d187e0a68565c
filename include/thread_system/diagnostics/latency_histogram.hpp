// latency_histogram: a fixed-size, log-bucketed histogram of durations in
// nanoseconds, recorded by one thread and read by any.
//
// Layout (the log-linear scheme of Gil Tene's HdrHistogram, specialised to
// integers): values 0..31 have a bucket each; above that, every power-of-two
// range [2^m, 2^(m+1)) is split into 16 equal sub-buckets of width 2^(m-4).
// A bucket's width is therefore at most 1/16 of its lower bound. The top
// regular bucket ends at 2^42 - 1 ns (about 73 minutes); larger values are
// counted in that top bucket (the snapshot's `max` stays exact). 624 buckets
// of 8 bytes: about 5 KB per histogram, allocated by its first record() (a
// histogram never recorded into - a pool worker whose jobs were never
// sampled - takes 40 bytes). Never allocated again, never freed before the
// histogram is destroyed.
//
// Accuracy: `histogram_snapshot::percentile(q)` returns the midpoint of the
// bucket that holds the nearest-rank q-quantile, clamped to [min, max]. Its
// distance from the exact nearest-rank value v is at most half a bucket, so
//     |percentile(q) - v| <= v * histogram_snapshot::relative_error  (1/32)
// for every v <= max_trackable, and values below 32 ns are exact.
//
// Contract
//   * record(ns) may be called by ONE thread at a time (the owner, e.g. the
//     worker whose jobs it times). It is a relaxed load and store per word,
//     no locked read-modify-write; a second concurrent writer would lose
//     updates (never memory safety). Code with many writers uses
//     record_concurrent() instead - on that histogram only, never mixed.
//   * The first record (either kind) allocates the buckets; if that fails
//     (out of memory) the sample is not recorded and counts in dropped(),
//     and the next record tries again. Nothing throws.
//   * snapshot() may be called from any thread at any time, concurrently
//     with the writer. Each bucket in the copy is a value that bucket held
//     at some moment during the copy; `count` is the sum of the copied
//     buckets (so buckets and count always agree), while `sum`, `min` and
//     `max` are read separately and may include or miss a sample recorded
//     during the copy. Nothing else is published through the histogram:
//     all operations are relaxed.
//   * reset() zeroes everything. Call it from the writer's thread, or while
//     no record() can run (happens-before through some other
//     synchronisation, e.g. before the worker starts). A reset concurrent
//     with record() is memory-safe but may leave that one sample partly
//     counted. Readers that want "since last time" should subtract
//     snapshots (histogram_snapshot::since) rather than reset.
//   * `sum` is kept modulo 2^64 (no check on the record path): samples
//     adding up past 2^64 ns (about 584 years in all) wrap it, and the mean
//     with it; counts, buckets, min, max and percentiles stay exact.
//   * Destruction is safe once no thread is in record() or snapshot().
//
// Header-only, standard library only.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>

namespace thread_system {

/// Bucket geometry shared by the histogram and its snapshots.
struct histogram_layout {
  static constexpr unsigned sub_bucket_bits = 4;  ///< 16 sub-buckets per power of two
  /// Sub-buckets per power-of-two range.
  static constexpr std::uint64_t sub_bucket_count = 1u << sub_bucket_bits;  // 16
  static constexpr unsigned highest_bit = 41;                               ///< top regular range [2^41, 2^42)
  /// Values 0..2*sub_bucket_count-1 are exact; then 16 buckets per power of two.
  static constexpr std::size_t bucket_count =
      static_cast<std::size_t>((highest_bit - sub_bucket_bits + 2) * sub_bucket_count);  // 624
  /// Largest value with a bucket of its own; larger ones go to the top bucket.
  static constexpr std::uint64_t max_trackable = (std::uint64_t{1} << (highest_bit + 1)) - 1;

  /// Bucket index of `v` (branch-light: one bit_width).
  [[nodiscard]] static constexpr std::size_t index_of(std::uint64_t v) noexcept {
    if (v > max_trackable) v = max_trackable;
    if (v < 2 * sub_bucket_count) return static_cast<std::size_t>(v);
    const unsigned msb = static_cast<unsigned>(std::bit_width(v)) - 1;  // >= sub_bucket_bits + 1
    const unsigned shift = msb - sub_bucket_bits;                       // >= 1
    // Major range `shift` starts at index (shift + 1) * 16; the 4 bits after the
    // leading one pick the sub-bucket.
    return static_cast<std::size_t>((shift + 1) * sub_bucket_count + ((v >> shift) & (sub_bucket_count - 1)));
  }

  /// Smallest value that lands in bucket `i`.
  [[nodiscard]] static constexpr std::uint64_t lower_bound(std::size_t i) noexcept {
    if (i < 2 * sub_bucket_count) return i;
    const std::uint64_t shift = i / sub_bucket_count - 1;
    const std::uint64_t sub = i % sub_bucket_count;
    return (sub_bucket_count + sub) << shift;
  }

  /// Largest value that lands in bucket `i` (inclusive). The top bucket
  /// also holds everything above max_trackable; its bound says max_trackable.
  [[nodiscard]] static constexpr std::uint64_t upper_bound(std::size_t i) noexcept {
    if (i < 2 * sub_bucket_count) return i;
    const std::uint64_t shift = i / sub_bucket_count - 1;
    return lower_bound(i) + (std::uint64_t{1} << shift) - 1;
  }
};

static_assert(histogram_layout::index_of(histogram_layout::max_trackable) == histogram_layout::bucket_count - 1);
static_assert(histogram_layout::upper_bound(histogram_layout::bucket_count - 1) == histogram_layout::max_trackable);
static_assert(histogram_layout::index_of(32) == 32 && histogram_layout::lower_bound(32) == 32);
static_assert(histogram_layout::upper_bound(31) + 1 == histogram_layout::lower_bound(32));

/// One non-empty bucket, as handed to histogram_snapshot::for_each_bucket.
struct histogram_bucket {
  std::uint64_t lower = 0;  ///< smallest value in the bucket (ns)
  std::uint64_t upper = 0;  ///< largest value in the bucket, inclusive (ns; the top bucket's: see bucket_upper())
  std::uint64_t count = 0;  ///< samples in the bucket
};

/// A plain copy of a histogram: a value type, no synchronisation.
struct histogram_snapshot {
  /// Bound on |percentile(q) - exact| / exact (see the file comment).
  static constexpr double relative_error = 1.0 / (2.0 * histogram_layout::sub_bucket_count);

  /// Samples per bucket, indexed as histogram_layout::index_of() maps values.
  std::array<std::uint64_t, histogram_layout::bucket_count> counts{};
  std::uint64_t count = 0;  ///< samples (the sum of `counts`)
  std::uint64_t sum = 0;    ///< sum of the samples (ns)
  std::uint64_t min = 0;    ///< smallest sample, 0 when empty
  std::uint64_t max = 0;    ///< largest sample, 0 when empty

  /// True when no sample was recorded.
  [[nodiscard]] bool empty() const noexcept { return count == 0; }

  /// Arithmetic mean in ns; 0 when empty.
  [[nodiscard]] double mean() const noexcept {
    return count == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(count);
  }

  /// The nearest-rank q-quantile (q in [0, 1], clamped), in ns, within
  /// `relative_error` of the exact one: the smallest recorded value v such
  /// that at least ceil(q * count) samples are <= v. q = 0 gives min, q = 1
  /// gives max. 0 when empty.
  [[nodiscard]] std::uint64_t percentile(double q) const noexcept {
    if (count == 0) return 0;
    if (!(q > 0.0)) return min;  // also catches NaN
    if (q >= 1.0) return max;
    // ceil(q * count) for 0 < q < 1 (no <cmath>: this header is in every pool's).
    const double exact = q * static_cast<double>(count);
    auto rank = static_cast<std::uint64_t>(exact);
    if (static_cast<double>(rank) < exact) ++rank;
    if (rank < 1) rank = 1;
    if (rank > count) rank = count;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      seen += counts[i];
      if (seen >= rank) {
        const std::uint64_t lo = histogram_layout::lower_bound(i);
        const std::uint64_t mid = lo + (histogram_layout::upper_bound(i) - lo) / 2;
        // Within [min, max] (max may lag min in a racy snapshot: min wins).
        return mid < min ? min : (mid > max ? (max > min ? max : min) : mid);
      }
    }
    return max;  // unreachable when count == sum of counts
  }

  /// Samples <= `value` (exact when `value` is a bucket's upper bound, e.g.
  /// 2^k - 1; otherwise counts whole buckets whose upper bound is <= value).
  /// The top bucket also holds every sample above max_trackable: its upper
  /// bound is `max` when that is larger (bucket_upper()).
  [[nodiscard]] std::uint64_t count_at_or_below(std::uint64_t value) const noexcept {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < counts.size() && bucket_upper(i) <= value; ++i) n += counts[i];
    return n;
  }

  /// Calls f(histogram_bucket) for each non-empty bucket, ascending (the
  /// top bucket's `upper` as in count_at_or_below()).
  template <typename F>
  void for_each_bucket(F&& f) const {
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] != 0) f(histogram_bucket{histogram_layout::lower_bound(i), bucket_upper(i), counts[i]});
    }
  }

  /// The largest value bucket `i` may hold: its layout bound, and for the
  /// top bucket, which also counts every sample above max_trackable, `max`
  /// when that is larger.
  [[nodiscard]] std::uint64_t bucket_upper(std::size_t i) const noexcept {
    const std::uint64_t upper = histogram_layout::upper_bound(i);
    return i == histogram_layout::bucket_count - 1 && max > upper ? max : upper;
  }

  /// Adds another snapshot's samples (e.g. all workers of a pool).
  void merge(const histogram_snapshot& other) noexcept {
    if (other.count == 0) return;
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
    min = count == 0 || other.min < min ? other.min : min;
    max = count == 0 || other.max > max ? other.max : max;
    count += other.count;
    sum += other.sum;
  }

  /// The samples recorded after `earlier` was taken from the same histogram
  /// (no reset in between). min/max of the difference are not recorded
  /// anywhere, so they become the bounds of the lowest and highest non-empty
  /// difference buckets (clamped to this snapshot's min/max).
  [[nodiscard]] histogram_snapshot since(const histogram_snapshot& earlier) const noexcept {
    histogram_snapshot d;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      d.counts[i] = counts[i] >= earlier.counts[i] ? counts[i] - earlier.counts[i] : 0;
      d.count += d.counts[i];
    }
    d.sum = sum >= earlier.sum ? sum - earlier.sum : 0;
    if (d.count != 0) {
      std::size_t lo = 0;
      while (d.counts[lo] == 0) ++lo;
      std::size_t hi = counts.size() - 1;
      while (d.counts[hi] == 0) --hi;
      const std::uint64_t lower = histogram_layout::lower_bound(lo);
      const std::uint64_t upper = histogram_layout::upper_bound(hi);
      d.min = lower > min ? lower : min;
      d.max = upper < max ? upper : max;
      if (d.max < d.min) d.max = d.min;
    }
    return d;
  }
};

/// Log-bucketed histogram of nanosecond durations: one writer (or record_concurrent() callers), any readers.
class latency_histogram {
 public:
  /// An empty histogram (no buckets allocated yet).
  latency_histogram() = default;
  /// Not copyable.
  latency_histogram(const latency_histogram&) = delete;
  /// Not copyable.
  latency_histogram& operator=(const latency_histogram&) = delete;
  ~latency_histogram() { delete counts_.load(std::memory_order_relaxed); }  // no thread is inside (contract)

  /// Single writer: adds one sample of `ns` nanoseconds.
  void record(std::uint64_t ns) noexcept {
    bucket_array* counts = buckets_for_writing();
    if (counts == nullptr) return;  // out of memory: counted in dropped()
    // All relaxed load+store pairs: only this thread writes, readers want
    // each word's latest value and nothing is published through them.
    std::atomic<std::uint64_t>& bucket = (*counts)[histogram_layout::index_of(ns)];
    bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum_.store(sum_.load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
    if (ns < min_.load(std::memory_order_relaxed)) min_.store(ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  }

  /// Any number of writers (locked read-modify-writes; slower). Do not mix
  /// with record() on the same histogram.
  void record_concurrent(std::uint64_t ns) noexcept {
    bucket_array* counts = buckets_for_writing();
    if (counts == nullptr) return;  // out of memory: counted in dropped()
    // relaxed RMWs: counts only; no ordering with other data is needed.
    (*counts)[histogram_layout::index_of(ns)].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(ns, std::memory_order_relaxed);
    std::uint64_t seen = min_.load(std::memory_order_relaxed);
    // relaxed CAS loops: a monotone min/max, no data published with it.
    while (ns < seen && !min_.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
    seen = max_.load(std::memory_order_relaxed);
    while (ns > seen && !max_.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }

  /// Any thread, any time: a copy (see the contract for its consistency).
  [[nodiscard]] histogram_snapshot snapshot() const noexcept {
    histogram_snapshot s;
    snapshot_into(s);
    return s;
  }

  /// Any thread, any time: the mean of the samples in ns (0 when empty),
  /// without copying the buckets. Relaxed reads: while samples are being
  /// recorded the sum and the count may be from slightly different moments.
  [[nodiscard]] std::uint64_t mean_ns() const noexcept {
    const bucket_array* counts = counts_.load(std::memory_order_acquire);  // pairs with the install's release
    if (counts == nullptr) return 0;
    std::uint64_t n = 0;
    for (const auto& c : *counts) n += c.load(std::memory_order_relaxed);  // relaxed: monotonic counters
    return n == 0 ? 0 : sum_.load(std::memory_order_relaxed) / n;          // relaxed: as above
  }

  /// As snapshot(), into an existing object (avoids a 5 KB temporary).
  void snapshot_into(histogram_snapshot& s) const noexcept {
    s.count = 0;
    const bucket_array* counts = counts_.load(std::memory_order_acquire);  // pairs with the install's release
    for (std::size_t i = 0; i < s.counts.size(); ++i) {
      // relaxed: pairs with nothing; each bucket is a monotonic counter.
      s.counts[i] = counts == nullptr ? 0 : (*counts)[i].load(std::memory_order_relaxed);
      s.count += s.counts[i];
    }
    // relaxed: read after the buckets, so may include a sample the copied
    // buckets missed (documented).
    s.sum = sum_.load(std::memory_order_relaxed);
    const std::uint64_t mn = min_.load(std::memory_order_relaxed);
    const std::uint64_t mx = max_.load(std::memory_order_relaxed);
    if (s.count == 0) {
      s.min = s.max = 0;
    } else {
      // The relaxed loads may pair a min/max with buckets from a slightly
      // different moment: keep min/max only when they lie in the outermost
      // non-empty buckets, else use those buckets' bounds.
      std::size_t lo = 0;
      while (s.counts[lo] == 0) ++lo;
      std::size_t hi = s.counts.size() - 1;
      while (s.counts[hi] == 0) --hi;
      // The last bucket also holds every sample above max_trackable (for
      // both ends).
      const bool min_fits = mn >= histogram_layout::lower_bound(lo) &&
                            (lo == s.counts.size() - 1 || mn <= histogram_layout::upper_bound(lo));
      const bool max_fits = mx >= histogram_layout::lower_bound(hi) &&
                            (hi == s.counts.size() - 1 || mx <= histogram_layout::upper_bound(hi));
      s.min = min_fits ? mn : histogram_layout::lower_bound(lo);
      s.max = max_fits ? mx : histogram_layout::upper_bound(hi);
    }
  }

  /// Zeroes the histogram; see the contract for who may call it.
  void reset() noexcept {
    // relaxed: ordering with record() comes from the caller's own
    // synchronisation (same thread, or a happens-before edge).
    if (bucket_array* counts = counts_.load(std::memory_order_relaxed); counts != nullptr) {
      for (auto& c : *counts) c.store(0, std::memory_order_relaxed);
    }
    sum_.store(0, std::memory_order_relaxed);
    min_.store(no_min, std::memory_order_relaxed);
    max_.store(0, std::memory_order_relaxed);
  }

  /// Samples not recorded because the buckets could not be allocated.
  [[nodiscard]] std::uint64_t dropped() const noexcept {
    return dropped_.load(std::memory_order_relaxed);  // statistics only
  }

 private:
  static constexpr std::uint64_t no_min = std::numeric_limits<std::uint64_t>::max();
  using bucket_array = std::array<std::atomic<std::uint64_t>, histogram_layout::bucket_count>;

  // The buckets, allocated (zeroed) on the first record. Writers of either
  // kind may race to install them: one CAS wins, the others free theirs.
  bucket_array* buckets_for_writing() noexcept {
    // acquire: pairs with the release CAS below (the zeroed buckets are
    // visible before the pointer).
    bucket_array* counts = counts_.load(std::memory_order_acquire);
    if (counts != nullptr) [[likely]]
      return counts;
    auto* fresh = new (std::nothrow) bucket_array{};
    if (fresh == nullptr) {
      dropped_.fetch_add(1, std::memory_order_relaxed);  // statistics only
      return nullptr;
    }
    // release on success: publishes the zeroed buckets; acquire on failure:
    // the winner's buckets, as above.
    if (counts_.compare_exchange_strong(counts, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return fresh;
    }
    delete fresh;
    return counts;
  }

  std::atomic<bucket_array*> counts_{nullptr};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> min_{no_min};
  std::atomic<std::uint64_t> max_{0};
};

}  // namespace thread_system
