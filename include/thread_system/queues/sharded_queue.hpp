// sharded_queue: a multi-producer multi-consumer queue of jobs split into
// several independent shards, so that producers on different threads do not
// fight over one lock.
//
// Layout: `shard_count()` shards (a power of two), each a job_queue (a
// spin-locked ring that grows when full, see job_queue.hpp). A thread gets a
// slot number the first time it touches any sharded_queue (handed out
// round-robin by a process-wide counter) and always pushes into shard
// `slot % shard_count()`, so producers on different threads spread over the
// shards and each producer stays in one shard. A consumer starts at its home
// shard (the `consumer_index` hint of the pop overloads, or its own slot for
// the plain pops) and scans the others in order when the home shard is
// empty.
//
// Why growable shards: the seed note on a sharded injector (seeds/004) found
// that fixed-capacity shards fragment the capacity - one shard is full while
// the others have room, and the producer bound to it is refused or retries.
// Here a shard never refuses for lack of room. The optional total bound is
// enforced by one counter shared by all shards, so the whole capacity is
// usable from any shard.
//
// Modes (chosen at construction, see sharded_queue_options):
//   * unbounded (capacity == 0, the default): a push fails only for an empty
//     job (`invalid_argument`) or a closed queue (`pool_stopped`); it never
//     reports `queue_full` and never drops a job.
//   * bounded (capacity == C > 0): `reserved_` counts jobs accepted and not
//     yet fully popped. A push reserves its jobs with a CAS that succeeds
//     only if `reserved_ + n <= C`, else fails with `queue_full` (a batch
//     of more than C jobs, which could never fit, fails with
//     `invalid_argument`, as in bounded_queue; so refused
//     pushes never inflate the count and never cause another push to be
//     refused). A pop releases the reservations of the jobs it took after
//     taking them; a push whose shard refused it (closed) releases its own.
//     Hence: exactly C jobs can be queued at once; single-threaded, the
//     (C+1)-th push fails and succeeds again after one pop. Under
//     concurrency a push may see `queue_full` while a pop that already took
//     a job has not yet released its reservation.
//
// Contract:
//   * Any number of threads may call any member concurrently.
//   * FIFO per producer: a thread always pushes into the same shard and a
//     shard is a FIFO, so jobs pushed by one thread are popped in the order
//     pushed. Jobs of different producers have no mutual order.
//   * A successful push happens-before the pop that returns its job (the
//     shard's lock orders them).
//   * push_batch puts the whole batch into the producer's shard under one
//     lock: all or none.
//   * close(): closes every shard, then sets the closed flag. Once close()
//     has returned, every push fails with `pool_stopped` (the job untouched).
//     Pops keep draining every shard; once is_closed() has returned true, a
//     pop that returns false proves the queue is empty for good (every
//     shard was closed before the flag was set, so no push can land in a
//     shard after the pop has scanned it).
//   * size_approx() sums the shards' relaxed sizes: approximate.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"

namespace thread_system {

/// Construction parameters of a sharded_queue.
struct sharded_queue_options {
  /// Number of shards; 0 means std::thread::hardware_concurrency() (at least
  /// 1). Rounded up to a power of two.
  std::size_t shards = 0;
  /// Total capacity across all shards; 0 means unbounded.
  std::size_t capacity = 0;
  /// Jobs each of a shard's segments holds (job_queue's initial_capacity; shards grow as needed).
  std::size_t initial_shard_capacity = 256;
};

namespace detail {

inline std::atomic<std::size_t> next_thread_slot{0};

/// This thread's slot number: assigned round-robin on first use, then fixed
/// for the thread's lifetime.
inline std::size_t this_thread_slot() noexcept {
  // relaxed: a unique-number allocator; nothing is published through it.
  thread_local const std::size_t slot = next_thread_slot.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

}  // namespace detail

/// A multi-producer multi-consumer job queue split into growable shards, one per producer thread slot; FIFO per
/// producer, optionally bounded in total (see the header comment).
class sharded_queue {
 public:
  /// An unbounded queue with default options.
  sharded_queue() : sharded_queue(sharded_queue_options{}) {}

  /// A queue shaped by `options`. Throws error_exception{invalid_argument} for more than 65536 shards, std::bad_alloc
  /// when the shards' first segments cannot be allocated (shards * initial_shard_capacity jobs).
  explicit sharded_queue(sharded_queue_options options) : capacity_(options.capacity) {
    std::size_t count = options.shards;
    if (count == 0) count = std::max<std::size_t>(1, std::thread::hardware_concurrency());
    if (count > max_shards) {
      throw error_exception(error{error_code::invalid_argument, "sharded_queue: too many shards"});
    }
    shard_count_ = std::bit_ceil(count);
    mask_ = shard_count_ - 1;
    shards_ = std::make_unique<shard[]>(shard_count_);
    for (std::size_t i = 0; i < shard_count_; ++i) {
      shards_[i].queue = std::make_unique<job_queue>(options.initial_shard_capacity);
    }
  }

  /// Not copyable.
  sharded_queue(const sharded_queue&) = delete;
  /// Not copyable.
  sharded_queue& operator=(const sharded_queue&) = delete;

  /// Appends `job` to this thread's shard. Fails with `invalid_argument`
  /// (empty job), `pool_stopped` (closed) or, in bounded mode only,
  /// `queue_full`; on failure `job` is not moved from.
  [[nodiscard]] result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "sharded_queue: empty job");
    if (is_closed()) return make_error(error_code::pool_stopped, "sharded_queue: queue is closed");
    if (!reserve(1)) return make_error(error_code::queue_full, "sharded_queue: queue is full");
    auto pushed = home_shard(detail::this_thread_slot()).try_push(std::move(job));
    if (!pushed) release(1);  // closed meanwhile: the job was not accepted
    return pushed;
  }

  /// Appends every job of `jobs` to this thread's shard, in order, all or
  /// none (see the header comment); fails like try_push, also with
  /// `queue_full` in bounded mode when the batch does not fit in the room
  /// left, and `invalid_argument` for a batch above the capacity, which could
  /// never fit (as bounded_queue).
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& job : jobs) {
      if (!job) return make_error(error_code::invalid_argument, "sharded_queue: empty job in batch");
    }
    if (is_closed()) return make_error(error_code::pool_stopped, "sharded_queue: queue is closed");
    if (jobs.empty()) return {};
    // Never room for it: a mistake, not a moment's fullness.
    if (capacity_ != 0 && jobs.size() > capacity_) return above_capacity(jobs.size());
    if (!reserve(jobs.size())) return make_error(error_code::queue_full, "sharded_queue: queue is full");
    auto pushed = home_shard(detail::this_thread_slot()).push_batch(jobs);
    if (!pushed) release(jobs.size());
    return pushed;
  }

  /// Moves a job into `out`, trying this thread's home shard first; false
  /// when every shard was empty when scanned.
  [[nodiscard]] bool try_pop(job_function& out) { return try_pop(out, detail::this_thread_slot()); }

  /// Moves a job into `out`, trying shard `consumer_index % shard_count()`
  /// first, then the others in order; false when every shard was empty.
  [[nodiscard]] bool try_pop(job_function& out, std::size_t consumer_index) {
    for (std::size_t i = 0; i < shard_count_; ++i) {
      if (shards_[(consumer_index + i) & mask_].queue->try_pop(out)) {
        release(1);
        return true;
      }
    }
    return false;
  }

  /// Moves up to `out.size()` jobs into `out`, home shard first, then the
  /// others (each shard's jobs in their order); returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) {
    return pop_batch(out, detail::this_thread_slot());
  }

  /// Like pop_batch(out), starting at shard `consumer_index % shard_count()`.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out, std::size_t consumer_index) {
    std::size_t taken = 0;
    for (std::size_t i = 0; i < shard_count_ && taken < out.size(); ++i) {
      taken += shards_[(consumer_index + i) & mask_].queue->pop_batch(out.subspan(taken));
    }
    release(taken);
    return taken;
  }

  /// Refuses further pushes. Idempotent; jobs already queued stay poppable.
  void close() {
    for (std::size_t i = 0; i < shard_count_; ++i) shards_[i].queue->close();
    // release: a thread that sees the flag (acquire in is_closed()) also sees
    // every shard closed, hence every accepted push.
    closed_.store(true, std::memory_order_release);
  }

  /// True once close() has closed every shard: every push fails with `pool_stopped`, and a pop that returns false
  /// proves the queue empty for good.
  [[nodiscard]] bool is_closed() const noexcept {
    return closed_.load(std::memory_order_acquire);  // pairs with the release in close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) total += shards_[i].queue->size_approx();
    return total;
  }
  /// True when size_approx() is 0; approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// Number of shards (a power of two).
  [[nodiscard]] std::size_t shard_count() const noexcept { return shard_count_; }
  /// Total capacity in bounded mode; 0 when unbounded.
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// True when constructed with a total capacity (bounded mode).
  [[nodiscard]] bool is_bounded() const noexcept { return capacity_ != 0; }
  /// The shard this thread pushes into.
  [[nodiscard]] std::size_t this_thread_shard() const noexcept { return detail::this_thread_slot() & mask_; }

 private:
  static constexpr std::size_t max_shards = std::size_t{1} << 16;

  // Each shard on its own cache lines, so that producers of different shards
  // do not invalidate each other's lock word (false sharing).
  struct alignas(64) shard {
    std::unique_ptr<job_queue> queue;
  };

  job_queue& home_shard(std::size_t slot) noexcept { return *shards_[slot & mask_].queue; }

  // Out of line: the message's code stays out of push_batch().
  THREAD_SYSTEM_NOINLINE result<void> above_capacity(std::size_t batch) const noexcept {
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return "sharded_queue: a batch of " + std::to_string(batch) + " jobs is above the capacity of " +
             std::to_string(capacity_);
    });
  }

  // Reserves room for `count` jobs in bounded mode; always true when unbounded.
  bool reserve(std::size_t count) noexcept {
    if (capacity_ == 0) return true;
    // relaxed: only the count matters (its modification order makes the
    // bound exact); the jobs are published by the shards' locks.
    std::size_t current = reserved_.load(std::memory_order_relaxed);
    do {
      if (count > capacity_ || current > capacity_ - count) return false;
      // relaxed on success and failure: same reasoning; `current` is reloaded on failure.
    } while (!reserved_.compare_exchange_weak(current, current + count, std::memory_order_relaxed,
                                              std::memory_order_relaxed));
    return true;
  }

  void release(std::size_t count) noexcept {
    if (capacity_ == 0 || count == 0) return;
    reserved_.fetch_sub(count, std::memory_order_relaxed);  // a count only, see reserve()
  }

  std::unique_ptr<shard[]> shards_;
  std::size_t shard_count_ = 1;
  std::size_t mask_ = 0;
  std::size_t capacity_ = 0;
  alignas(64) std::atomic<std::size_t> reserved_{0};
  alignas(64) std::atomic<bool> closed_{false};
};

static_assert(job_queue_model<sharded_queue>);

}  // namespace thread_system
