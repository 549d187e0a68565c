// job_queue: the mutex-protected, unbounded FIFO of jobs.
//
// Storage is a power-of-two ring buffer that doubles when full and never
// shrinks, so once it has grown to the working-set size, pushing and popping
// allocate nothing. Every operation takes the mutex once, including the
// batch operations (one lock per batch, not per job).
//
// Contract:
//   * Any number of threads may call any member concurrently.
//   * FIFO: jobs pushed by one thread are popped in the order pushed.
//   * A push that returns success happens-before the pop that returns the
//     job (the mutex orders them).
//   * After close(), pushes fail with `pool_stopped` and leave the caller's
//     job untouched; pops keep returning what is left until empty.
//   * size_approx() may be stale by the time it returns.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/sync/spin_lock.hpp"

namespace thread_system {

class job_queue {
 public:
  explicit job_queue(std::size_t initial_capacity = 1024)
      : buffer_(std::bit_ceil(initial_capacity < 2 ? std::size_t{2} : initial_capacity)) {}

  job_queue(const job_queue&) = delete;
  job_queue& operator=(const job_queue&) = delete;

  /// Appends `job`. On failure (`pool_stopped` after close(), or
  /// `invalid_argument` for an empty job) `job` is not moved from.
  [[nodiscard]] result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "job_queue: empty job");
    std::lock_guard lock(mutex_);
    if (closed_) return make_error(error_code::pool_stopped, "job_queue: queue is closed");
    push_locked(std::span<job_function>(&job, 1));
    return {};
  }

  /// Appends every job of `jobs`, all or none, under one lock. Fails like
  /// try_push (no job is moved from on failure, including for an empty job
  /// anywhere in the batch).
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& j : jobs) {
      if (!j) return make_error(error_code::invalid_argument, "job_queue: empty job in batch");
    }
    std::lock_guard lock(mutex_);
    if (closed_) return make_error(error_code::pool_stopped, "job_queue: queue is closed");
    push_locked(jobs);
    return {};
  }

  /// Removes the oldest job into `out`; false when empty.
  [[nodiscard]] bool try_pop(job_function& out) {
    std::lock_guard lock(mutex_);
    if (count_ == 0) return false;
    out = std::move(buffer_[head_]);
    head_ = (head_ + 1) & (buffer_.size() - 1);
    --count_;
    size_.store(count_, std::memory_order_relaxed);  // statistics only
    return true;
  }

  /// Removes up to `out.size()` of the oldest jobs, in order; returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) { return pop_batch(out, out.size()); }

  /// Removes up to `min(out.size(), max(1, size / share))` jobs: a consumer
  /// that is one of `share` takes its fair part, so one worker does not
  /// hoard a small backlog that others could run.
  [[nodiscard]] std::size_t pop_fair_share(std::span<job_function> out, std::size_t share) {
    std::lock_guard lock(mutex_);
    const std::size_t fair = share <= 1 ? count_ : count_ / share;
    return pop_locked(out, fair == 0 ? 1 : fair);
  }

  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out, std::size_t max) {
    std::lock_guard lock(mutex_);
    return pop_locked(out, max);
  }

  /// Refuses further pushes. Idempotent. Jobs already queued stay poppable.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    closed_hint_.store(true, std::memory_order_release);  // pairs with the acquire in is_closed()
  }

  /// Reopens a closed queue (used by pools that restart).
  void reopen() {
    std::lock_guard lock(mutex_);
    closed_ = false;
    closed_hint_.store(false, std::memory_order_release);  // pairs with the acquire in is_closed()
  }

  [[nodiscard]] bool is_closed() const noexcept {
    return closed_hint_.load(std::memory_order_acquire);  // pairs with close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    return size_.load(std::memory_order_relaxed);  // a snapshot, not a synchronisation point
  }
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// Jobs ever accepted by try_push/push_batch. Exact once the queue is
  /// closed. The count is updated inside the push's critical section, so a
  /// thread that has seen a popped job's completion (through an acquire that
  /// pairs with a release made after the pop) reads a total that includes it.
  [[nodiscard]] std::uint64_t total_pushed() const noexcept {
    return pushed_total_.load(std::memory_order_acquire);  // pairs with the mutex-ordered stores below
  }

  /// Current ring capacity (grows, never shrinks).
  [[nodiscard]] std::size_t capacity() const {
    std::lock_guard lock(mutex_);
    return buffer_.size();
  }

 private:
  // adaptive_job_queue runs its own checks inside this queue's critical
  // section (lock_and_report_contention(), push_locked(), pop_locked()).
  friend class adaptive_job_queue;

  // Appends `jobs` (all valid); the caller holds mutex_ and checked closed_.
  // Growing may throw std::bad_alloc before anything is moved.
  THREAD_SYSTEM_ALWAYS_INLINE void push_locked(std::span<job_function> jobs) {
    while (buffer_.size() - count_ < jobs.size()) grow();
    const std::size_t mask = buffer_.size() - 1;
    for (auto& j : jobs) {
      buffer_[(head_ + count_) & mask] = std::move(j);
      ++count_;
    }
    size_.store(count_, std::memory_order_relaxed);  // statistics only; the mutex publishes the jobs
    count_pushed(jobs.size());
  }

  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_locked(std::span<job_function> out, std::size_t max) {
    std::size_t n = std::min({max, out.size(), count_});
    const std::size_t mask = buffer_.size() - 1;
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = std::move(buffer_[head_]);
      head_ = (head_ + 1) & mask;
    }
    count_ -= n;
    size_.store(count_, std::memory_order_relaxed);  // statistics only
    return n;
  }

  void count_pushed(std::size_t n) noexcept {
    // Writers are serialised by mutex_, so load+store is exact; the store
    // becomes visible to poppers with the mutex release.
    pushed_total_.store(pushed_total_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }

  void grow() {
    std::vector<job_function> bigger(buffer_.size() * 2);
    const std::size_t mask = buffer_.size() - 1;
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(buffer_[(head_ + i) & mask]);
    buffer_.swap(bigger);
    head_ = 0;
  }

  mutable spin_lock mutex_;
  std::vector<job_function> buffer_;  // guarded by mutex_
  std::size_t head_ = 0;              // guarded by mutex_
  std::size_t count_ = 0;             // guarded by mutex_
  bool closed_ = false;               // guarded by mutex_
  std::atomic<bool> closed_hint_{false};
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> pushed_total_{0};
};

}  // namespace thread_system
