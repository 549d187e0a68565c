// job_queue: the mutex-protected, unbounded FIFO of jobs.
//
// Storage (queues/job_segments.hpp) is a FIFO list of equal segments of
// 8-byte words. A push that does not fit in the last segment moves on to a
// spare segment, allocating one only when none is spare; a segment the pops
// have emptied becomes a spare. Nothing is ever copied, so growth costs the
// queue's users one allocation per segment and never a pause, memory
// follows the backlog (no doubling: 100 000 small jobs take 2.4 MB), and
// once the queue has grown to its working set, pushing and popping allocate
// nothing (spares are kept, never freed before the queue is). Jobs are
// stored *packed* (job_function's packed form): the operations pointer, the
// metadata word and only the words of inline storage the callable uses, so
// a small job (a callable of up to 8 bytes, or one stored on the heap) takes
// 24 bytes instead of a full 64-byte job_function. An entry never spans two
// segments (a skip marker ends a segment early). Every operation takes the
// mutex once, including the batch operations (one lock per batch, not per
// job). (two_lock_job_queue stores jobs the same way with a lock for each
// end: the pools' mutex injector, `pool_queue::mutex`, whose workers take
// jobs in shares; one lock for both ends moves more jobs one at a time, see
// docs/PERFORMANCE.md.)
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
#include <cstring>
#include <mutex>
#include <new>
#include <span>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/queues/job_segments.hpp"
#include "thread_system/sync/spin_lock.hpp"

namespace thread_system {

/// The mutex-protected (spin-locked), unbounded FIFO of jobs, stored packed in a list of segments.
class alignas(64) job_queue : private detail::mutex_queue_hooks {
 public:
  /// `initial_capacity`: jobs of four words (32 bytes packed) a segment
  /// holds; every segment has that size (rounded up to a power of two words,
  /// at least 64 words, 512 bytes, and at most 2^21 words, 16 MiB: any
  /// larger capacity, SIZE_MAX included, means 2^19 jobs a segment). The
  /// first segment is allocated here (std::bad_alloc propagates).
  explicit job_queue(std::size_t initial_capacity = 1024)
      : segment_words_(detail::segment_words_for(initial_capacity)) {
    head_segment_ = tail_.segment = new_segment();
  }

  /// Not copyable.
  job_queue(const job_queue&) = delete;
  /// Not copyable.
  job_queue& operator=(const job_queue&) = delete;

  /// Destroys the jobs still queued (not run, not cancelled), exactly once.
  ~job_queue() {
    job_function discarded;
    while (count_ > 0) {
      pop_one(discarded);
      discarded.reset();
    }
    free_list(head_segment_);
    free_list(spares_.top);
  }

  /// Appends `job`. On failure (`pool_stopped` after close(),
  /// `invalid_argument` for an empty job, `resource_exhausted` when a segment
  /// cannot be allocated) `job` is not moved from.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "job_queue: empty job");
    return to_result(push_admitted(std::span<job_function>(&job, 1), nullptr));
  }

  /// try_push() that also reports whether the queue held no job just before
  /// this push; read inside the push's critical section, so it is exact (a
  /// pool wakes a worker only on that transition: see pool_core_push.cpp).
  [[nodiscard]] result<void> try_push(job_function&& job, bool& was_empty) {
    if (!job) return make_error(error_code::invalid_argument, "job_queue: empty job");
    return to_result(push_admitted(std::span<job_function>(&job, 1), &was_empty));
  }

  /// Appends every job of `jobs`, all or none, under one lock. Fails like
  /// try_push (no job is moved from on failure, including for an empty job
  /// anywhere in the batch).
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& j : jobs) {
      if (!j) return make_error(error_code::invalid_argument, "job_queue: empty job in batch");
    }
    return to_result(push_admitted(jobs, nullptr));
  }

  /// Removes the oldest job into `out`; false when empty.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool try_pop(job_function& out) {
    return pop_admitted(std::span<job_function>(&out, 1), take_all{}, admit_all{}, no_action{}) == 1;
  }

  /// Removes up to `out.size()` of the oldest jobs, in order; returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) { return pop_batch(out, out.size()); }

  /// Removes up to `min(out.size(), max(1, size / consumers))` jobs: a consumer
  /// that is one of `consumers` takes its fair part, so one worker does not
  /// hoard a small backlog that others could run.
  [[nodiscard]] std::size_t pop_share(std::span<job_function> out, std::size_t consumers) {
    return pop_admitted(out, fair_share{consumers}, admit_all{}, no_action{});
  }

  /// Removes up to `min(out.size(), max)` of the oldest jobs, in order; returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out, std::size_t max) {
    return pop_admitted(out, at_most{max}, admit_all{}, no_action{});
  }

  /// Refuses further pushes. Idempotent. Jobs already queued stay poppable.
  void close() {
    std::lock_guard lock(mutex_);
    refusals_ |= refuse_closed;
    closed_hint_.store(true, std::memory_order_release);  // pairs with the acquire in is_closed()
  }

  /// True after close(): pushes fail with `pool_stopped` (a queue is never reopened).
  [[nodiscard]] bool is_closed() const noexcept {
    return closed_hint_.load(std::memory_order_acquire);  // pairs with close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    return size_.load(std::memory_order_relaxed);  // a snapshot, not a synchronisation point
  }
  /// True when size_approx() is 0; approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// Jobs ever accepted by try_push/push_batch. Exact once the queue is
  /// closed. The count is updated inside the push's critical section, so a
  /// thread that has seen a popped job's completion (through an acquire that
  /// pairs with a release made after the pop) reads a total that includes it.
  [[nodiscard]] std::uint64_t accepted_pushes() const noexcept {
    return pushed_total_.load(std::memory_order_acquire);  // pairs with the mutex-ordered stores below
  }

  /// Operations (pushes and pops, batch ones included) that found the lock
  /// held and had to wait for it: a measure of contention. Statistics only.
  [[nodiscard]] std::uint64_t contended_operations() const noexcept {
    return contended_.load(std::memory_order_relaxed);  // a snapshot; nothing is read through it
  }

  /// Bytes of job storage held: every segment, in use or spare (grows with
  /// the largest backlog seen, never shrinks).
  [[nodiscard]] std::size_t capacity_bytes() const {
    std::lock_guard lock(mutex_);
    return segments_ * segment_words_ * sizeof(word);
  }

 private:
  // basic_adaptive_job_queue<job_queue> runs its own checks inside this
  // queue's critical section, through push_admitted() and pop_admitted()
  // below (two_lock_job_queue has the same surface).
  template <typename>
  friend class basic_adaptive_job_queue;

  // push_admitted() and pop_admitted() below are the one implementation of
  // a push and of a pop, shared with the adaptive queue, with the hooks of
  // detail::mutex_queue_hooks (a push is decided by refusals_).

  // What an operation that found the lock held does once it holds it
  // (out of line, see spin_lock::lock_then_if_contended): counts itself,
  // then calls the caller's hook with the new count.
  template <typename Contended>
  struct counting_contention {
    job_queue* queue;
    Contended hook;
    THREAD_SYSTEM_ALWAYS_INLINE void operator()() const noexcept { hook(queue->count_contended()); }
  };

  static result<void> to_result(push_outcome outcome) noexcept {
    return mutex_queue_hooks::to_result(outcome, "job_queue");
  }

  // A push is admitted unless refusals_ refuses it (closed, or pushes
  // belong elsewhere). `was_empty`, when given, is set on success (was the
  // queue empty just before this push?). contended(n) runs
  // only when the lock was found held, first thing inside the critical
  // section (before any check, so anything it changes under the lock is
  // seen by the operation),
  // with n the new contended_operations() count; an operation that had to
  // wait pays for it, the common one does not.
  template <typename Contended = no_action>
  THREAD_SYSTEM_ALWAYS_INLINE push_outcome push_admitted(std::span<job_function> jobs, bool* was_empty,
                                                         Contended contended_hook = {}) {
    mutex_.lock_then_if_contended(counting_contention<Contended>{this, contended_hook});
    std::lock_guard lock(mutex_, std::adopt_lock);
    if ((refusals_ & (refuse_closed | refuse_pushes)) != 0) {
      return (refusals_ & refuse_closed) != 0 ? push_outcome::closed : push_outcome::not_admitted;
    }
    try {
      push_locked(jobs);
    } catch (const std::bad_alloc&) {
      return push_outcome::out_of_memory;
    }
    if (was_empty != nullptr) *was_empty = count_ == jobs.size();
    return push_outcome::pushed;
  }

  // Takes up to min(out.size(), limit(queued)) jobs; returns how many, or
  // not_admitted. after(taken) runs once they are out (also for 0);
  // contended() as for a push.
  template <typename Limit, typename Admit, typename After, typename Contended = no_action>
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_admitted(std::span<job_function> out, Limit limit, Admit admit,
                                                       After after, Contended contended_hook = {}) {
    detail::reset_leading_jobs(out);  // outside the lock (see job_segments.hpp)
    mutex_.lock_then_if_contended(counting_contention<Contended>{this, contended_hook});
    std::lock_guard lock(mutex_, std::adopt_lock);
    if (!admit()) return not_admitted;
    const std::size_t taken = pop_locked(out, limit(count_));
    after(taken);
    return taken;
  }

  // For the adaptive queue (the same surface as two_lock_job_queue's,
  // where each end has its own lock; here one lock is both).
  static constexpr bool lock_per_end = false;
  void lock_both() noexcept { mutex_.lock(); }
  void unlock_both() noexcept { mutex_.unlock(); }
  spin_lock& pop_lock() noexcept { return mutex_; }
  // The caller holds the lock, which is both ends'.
  [[nodiscard]] static bool try_lock_other_end(queue_end /*held*/) noexcept { return true; }
  static void unlock_other_end(queue_end /*held*/) noexcept {}
  // Holding the lock: the refusals for pushes (with closed kept) and for fast pops.
  void set_refusals_locked(std::uint8_t push_bits, std::uint8_t pop_bits) noexcept {
    refusals_ = static_cast<std::uint8_t>((refusals_ & refuse_closed) | push_bits | pop_bits);
  }
  void set_pop_refusals_locked(std::uint8_t pop_bits) noexcept {
    refusals_ = static_cast<std::uint8_t>((refusals_ & ~refuse_fast_pops) | pop_bits);
  }
  [[nodiscard]] bool fast_pops_refused_locked() const noexcept { return (refusals_ & refuse_fast_pops) != 0; }
  [[nodiscard]] bool closed_locked() const noexcept { return (refusals_ & refuse_closed) != 0; }
  // Holding the lock: no job is queued.
  [[nodiscard]] bool empty_locked() const noexcept { return count_ == 0; }

  // Appends `jobs` (all valid); the caller holds mutex_ and checked refusals_.
  // Allocating a segment may throw std::bad_alloc before anything is moved.
  THREAD_SYSTEM_ALWAYS_INLINE void push_locked(std::span<job_function> jobs) {
    std::size_t needed = 0;
    for (const auto& j : jobs) needed += j.packed_words();
    // The common case: the jobs fit in the last segment whatever their sizes.
    if (!tail_.fits(needed, segment_words_)) reserve(needed);
    for (auto& j : jobs) tail_.put(j, segment_words_, spares_);
    count_ += jobs.size();
    size_.store(count_, std::memory_order_relaxed);  // statistics only; the mutex publishes the jobs
    count_pushed(jobs.size());
  }

  using word = detail::job_word;
  using segment = detail::job_segment;

  // Throws std::bad_alloc.
  [[nodiscard]] segment* new_segment() {
    segment* s = segment::allocate(segment_words_);
    ++segments_;
    return s;
  }
  static void free_list(segment* s) noexcept { segment::free_chain(s); }

  // Makes sure `needed` words of entries fit, whatever their sizes: what
  // the last segment has left and each spare segment hold, less what each
  // may leave unused at its end. Allocates spares as needed (std::bad_alloc
  // propagates; spares allocated so far are kept, no job has moved).
  void reserve(std::size_t needed) {
    const std::size_t per_segment = segment_words_ - detail::segment_waste;
    std::size_t room = tail_.room(segment_words_, spares_.count);
    while (room < needed) {
      spares_.push(new_segment());
      room += per_segment;
    }
  }

  // Moves the oldest job into `out`. Preconditions: count_ > 0, `out` is
  // empty. The caller updates size_.
  THREAD_SYSTEM_ALWAYS_INLINE void pop_one(job_function& out) noexcept {
    if (detail::used_up(*head_segment_, head_, segment_words_)) next_head_segment();
    head_ += detail::unpack_entry(*head_segment_, head_, out);
    // Empty: the last job was in the last segment, so head and tail share
    // it; start over at its word 0.
    if (--count_ == 0) {
      head_ = 0;
      tail_.used = 0;
    }
  }

  // The head segment is used up (count_ > 0, so a later one holds the next
  // entry): it becomes a spare.
  void next_head_segment() noexcept {
    segment* done = head_segment_;
    head_segment_ = done->next;
    head_ = 0;
    spares_.push(done);
  }

  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_locked(std::span<job_function> out, std::size_t max) {
    const std::size_t n = detail::fillable(out, std::min({max, out.size(), count_}));
    if (n == 0) return 0;  // an empty poll writes nothing
    for (std::size_t i = 0; i < n; ++i) pop_one(out[i]);
    size_.store(count_, std::memory_order_relaxed);  // statistics only
    return n;
  }

  THREAD_SYSTEM_ALWAYS_INLINE void count_pushed(std::size_t n) noexcept {
    // Writers are serialised by mutex_, so load+store is exact; the store
    // becomes visible to poppers with the mutex release.
    pushed_total_.store(pushed_total_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }

  // Returns the new count.
  THREAD_SYSTEM_ALWAYS_INLINE std::uint64_t count_contended() noexcept {
    // Writers are serialised by mutex_ (load+store is exact); readers take
    // statistics only. On the lock's line, which the operation holds
    // anyway, so counting moves no extra cache line between threads.
    const std::uint64_t count = contended_.load(std::memory_order_relaxed) + 1;
    contended_.store(count, std::memory_order_relaxed);
    return count;
  }

  // Two cache lines (the class is aligned to a line). The first holds the
  // lock and everything an operation reads or writes under it, the
  // contention count included, so an empty poll - contended or not - moves
  // only this line between threads.
  mutable spin_lock mutex_;
  // Guarded by mutex_: why a push (or an adaptive_job_queue's pop) may not
  // use this queue now. job_queue itself only ever sets refuse_closed; the
  // other bits are adaptive_job_queue's (a copy of its routing state, kept
  // here so that the check reads no line but the lock's).
  std::uint8_t refusals_ = 0;
  std::atomic<bool> closed_hint_{false};
  const std::size_t segment_words_;  // a power of two, at least min_segment_words
  // No two of head_, count_ and tail_ are neighbours, so the compiler does
  // not merge a pop's (head_, count_) or a push's (tail_, count_) updates
  // into 16-byte loads and stores that the other operation's 8-byte stores
  // would have to forward into. (With count_ next to head_ the single-thread
  // pop measured 0.79x of the ring's; the layout's effect on the contended
  // rows is within what code placement alone moves them.)
  std::size_t head_ = 0;                     // guarded by mutex_: word index of the oldest entry (or a skip marker)
  segment* head_segment_ = nullptr;          // guarded by mutex_: holds the oldest entry
  std::size_t count_ = 0;                    // guarded by mutex_: jobs queued
  detail::segment_tail tail_;                // guarded by mutex_: the last segment, where pushes go, and its fill
  std::atomic<std::uint64_t> contended_{0};  // see contended_operations()
  // The second: what readers outside the lock poll (size_approx(),
  // accepted_pushes()), written by pushes and non-empty pops; then what
  // only a segment change touches.
  alignas(64) std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> pushed_total_{0};
  detail::spare_segments spares_;  // guarded by mutex_
  std::size_t segments_ = 0;       // guarded by mutex_ (and the constructor): allocated, in use or spare
};

}  // namespace thread_system
