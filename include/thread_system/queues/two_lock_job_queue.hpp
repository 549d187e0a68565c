// two_lock_job_queue: job_queue's segments with a lock for each end - the
// pools' mutex injector.
//
// Pushes take the tail lock, pops the head lock (the two-lock queue of
// M. Michael and M. Scott, "Simple, Fast, and Practical Non-Blocking and
// Blocking Concurrent Queue Algorithms", PODC 1996), so a producer never
// waits for a consumer's critical section nor a consumer for a producer's:
// with one lock for both ends (job_queue), a worker copying its share of
// jobs out held the lock the producer needed for its next push, and a
// producer pushing without pause kept the worker out. The price is a
// read-modify-write of a shared count per push and per pop: where both ends
// move one job at a time without other work (stand-alone producer/consumer
// loops), job_queue's one lock moves more jobs; where consumers take jobs
// in shares, as a pool's workers do, this queue does (docs/PERFORMANCE.md,
// *The pools' injector with a lock for each end*). The two ends meet in one atomic word, the number
// of queued jobs: a push adds to it after writing its entries (release), a
// pop reads it (acquire), takes at most that many and subtracts them. A job
// a pop holds counts as queued until the pop subtracts it.
//
// Storage (queues/job_segments.hpp): a FIFO list of equal segments holding
// jobs packed (a small job takes 24 bytes instead of a full 64-byte
// job_function). A push that does not fit in the last segment moves on to
// a spare segment, allocating one only when none is spare; a segment the
// pops have used up goes back to the pushers as a spare. Nothing is ever
// copied, so growth costs one allocation per segment and never a pause,
// memory follows the backlog (100 000 small jobs take 2.4 MB), and once the
// queue has grown to its working set, pushing and popping allocate nothing
// (spares are kept, never freed before the queue is). A drained queue goes
// on where its last entry ended (neither end may move the other's
// position), so a steady stream walks through at least two segments in
// turn and the same backlog may span one segment more than it did first.
// Every operation takes one lock once, including the batch operations (one
// lock per batch); a pop that finds the queue empty takes none.
//
// Contract:
//   * Any number of threads may call any member concurrently.
//   * FIFO: jobs pushed by one thread are popped in the order pushed (and
//     jobs of different pushes in the order their pushes took the tail lock).
//   * A push that returns success happens-before the pop that returns the
//     job (the count's release/acquire orders them).
//   * try_push(job, was_empty) reports exactly whether the count was 0
//     just before this push (its read-modify-write on the count decides; a
//     job a pop has taken but not yet subtracted still counts).
//   * After close(), pushes fail with `pool_stopped` and leave the caller's
//     job untouched; pops keep returning what is left until empty.
//   * size_approx() may be stale by the time it returns.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
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

/// job_queue's storage with one spin lock for pushes and one for pops (the
/// pools' mutex injector): producers and consumers never wait for each other.
class alignas(64) two_lock_job_queue : private detail::mutex_queue_hooks {
 public:
  /// `initial_capacity`: jobs of four words (32 bytes packed) a segment
  /// holds; every segment has that size (rounded up to a power of two words,
  /// at least 64 words, 512 bytes, and at most 2^21 words, 16 MiB: any
  /// larger capacity, SIZE_MAX included, means 2^19 jobs a segment). The
  /// first segment is allocated here (std::bad_alloc propagates).
  explicit two_lock_job_queue(std::size_t initial_capacity = 1024)
      : segment_words_(detail::segment_words_for(initial_capacity)), head_words_(segment_words_) {
    head_segment_ = tail_.segment = new_segment();
  }

  /// Not copyable.
  two_lock_job_queue(const two_lock_job_queue&) = delete;
  /// Not copyable.
  two_lock_job_queue& operator=(const two_lock_job_queue&) = delete;

  /// Destroys the jobs still queued (not run, not cancelled), exactly once.
  ~two_lock_job_queue() {
    job_function discarded;
    // relaxed: no other thread uses a queue being destroyed.
    for (std::size_t left = count_.load(std::memory_order_relaxed); left > 0; --left) {
      pop_one(discarded);
      discarded.reset();
    }
    detail::job_segment::free_chain(head_segment_);
    detail::job_segment::free_chain(spares_.top);
    detail::job_segment::free_chain(returned_.load(std::memory_order_relaxed));  // relaxed: as above
  }

  /// Appends `job`. On failure (`pool_stopped` after close(),
  /// `invalid_argument` for an empty job, `resource_exhausted` when a segment
  /// cannot be allocated) `job` is not moved from.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "two_lock_job_queue: empty job");
    return to_result(push_admitted(std::span<job_function>(&job, 1), nullptr));
  }

  /// try_push() that also reports whether the queue held no job just before
  /// this push (exact: see the contract; a pool wakes a worker only on that
  /// transition, see pool_core_push.cpp). Unchanged when the push fails.
  [[nodiscard]] result<void> try_push(job_function&& job, bool& was_empty) {
    if (!job) return make_error(error_code::invalid_argument, "two_lock_job_queue: empty job");
    return to_result(push_admitted(std::span<job_function>(&job, 1), &was_empty));
  }

  /// Appends every job of `jobs`, all or none, under one lock. Fails like
  /// try_push (no job is moved from on failure, including for an empty job
  /// anywhere in the batch).
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& j : jobs) {
      if (!j) return make_error(error_code::invalid_argument, "two_lock_job_queue: empty job in batch");
    }
    return to_result(push_admitted(jobs, nullptr));
  }

  /// Removes the oldest job into `out`; false when empty.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool try_pop(job_function& out) {
    return pop_up_to(std::span<job_function>(&out, 1), take_all{}) == 1;
  }

  /// Removes up to `out.size()` of the oldest jobs, in order; returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) { return pop_up_to(out, take_all{}); }

  /// Removes up to `min(out.size(), max(1, size / consumers))` jobs: a consumer
  /// that is one of `consumers` takes its fair part, so one worker does not
  /// hoard a small backlog that others could run.
  [[nodiscard]] std::size_t pop_share(std::span<job_function> out, std::size_t consumers) {
    return pop_up_to(out, fair_share{consumers});
  }

  /// Removes up to `min(out.size(), max)` of the oldest jobs, in order; returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out, std::size_t max) {
    return pop_up_to(out, at_most{max});
  }

  /// Refuses further pushes. Idempotent. Jobs already queued stay poppable.
  void close() {
    std::lock_guard lock(tail_lock_);
    tail_refusals_ |= refuse_closed;
    closed_hint_.store(true, std::memory_order_release);  // pairs with the acquire in is_closed()
  }

  /// True after close(): pushes fail with `pool_stopped` (a queue is never reopened).
  [[nodiscard]] bool is_closed() const noexcept {
    return closed_hint_.load(std::memory_order_acquire);  // pairs with close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    return count_.load(std::memory_order_relaxed);  // a snapshot, not a synchronisation point
  }
  /// True when size_approx() is 0; approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// Jobs ever accepted by try_push/push_batch. Exact once the queue is
  /// closed. Counted before the jobs become poppable, so a thread that has
  /// seen a popped job's completion (through an acquire that pairs with a
  /// release made after the pop) reads a total that includes it.
  [[nodiscard]] std::uint64_t accepted_pushes() const noexcept {
    return pushed_total_.load(std::memory_order_acquire);  // pairs with the release store in push_admitted()
  }

  /// Operations (pushes and pops, batch ones included) that found their
  /// lock held and had to wait for it: a measure of contention among
  /// producers and among consumers (a producer and a consumer never wait
  /// for each other). Statistics only.
  [[nodiscard]] std::uint64_t contended_operations() const noexcept {
    return contended_.load(std::memory_order_relaxed);  // a snapshot; nothing is read through it
  }

  /// Bytes of job storage held: every segment, in use or spare (grows with
  /// the largest backlog seen, never shrinks).
  [[nodiscard]] std::size_t capacity_bytes() const {
    std::lock_guard lock(tail_lock_);
    return segments_ * segment_words_ * sizeof(detail::job_word);
  }

 private:
  using segment = detail::job_segment;

  // What an operation that found its lock held does once it holds it
  // (out of line, see spin_lock::lock_then_if_contended): counts itself,
  // then calls the caller's hook with the new count.
  template <typename Contended>
  struct counting_contention {
    two_lock_job_queue* queue;
    Contended hook;
    THREAD_SYSTEM_ALWAYS_INLINE void operator()() const noexcept {
      // relaxed: statistics (and the adaptive queue's sampling rate) only.
      hook(queue->contended_.fetch_add(1, std::memory_order_relaxed) + 1);
    }
  };

  // basic_adaptive_job_queue<two_lock_job_queue> runs its hooks
  // (detail::mutex_queue_hooks) inside this queue's critical sections, the
  // same surface as job_queue's; see adaptive_job_queue.hpp.
  template <typename>
  friend class basic_adaptive_job_queue;
  // refusals (detail::mutex_queue_hooks' bits): tail_refusals_ holds
  // refuse_closed and refuse_pushes (read by pushes, under the tail lock),
  // head_refusals_ refuse_fast_pops (read by the adaptive queue's fast pop,
  // under the head lock).

  // Each lock has its own end's queue: a pop never blocks a push.
  static constexpr bool lock_per_end = true;

  static result<void> to_result(push_outcome outcome) noexcept {
    return mutex_queue_hooks::to_result(outcome, "two_lock_job_queue");
  }

  // Appends `jobs` (all valid) under the tail lock, unless tail_refusals_
  // refuses them. `was_empty`, when given, is set on success (see
  // try_push()). contended(n) runs only when the lock was found held, first
  // thing inside the critical section, with n the new
  // contended_operations() count.
  template <typename Contended = no_action>
  THREAD_SYSTEM_ALWAYS_INLINE push_outcome push_admitted(std::span<job_function> jobs, bool* was_empty,
                                                         Contended contended_hook = {}) {
    tail_lock_.lock_then_if_contended(counting_contention<Contended>{this, contended_hook});
    std::lock_guard lock(tail_lock_, std::adopt_lock);
    if ((tail_refusals_ & (refuse_closed | refuse_pushes)) != 0) {
      return (tail_refusals_ & refuse_closed) != 0 ? push_outcome::closed : push_outcome::not_admitted;
    }
    std::size_t needed = 0;
    for (const auto& j : jobs) needed += j.packed_words();
    // The common case: the jobs fit in the last segment whatever their sizes.
    if (!tail_.fits(needed, segment_words_)) {
      try {
        reserve(needed);
      } catch (const std::bad_alloc&) {
        return push_outcome::out_of_memory;
      }
    }
    for (auto& j : jobs) tail_.put(j, segment_words_, spares_);
    // Pushers are serialised by the tail lock, so load+store is exact.
    // release: pairs with accepted_pushes(). Written before the count's
    // release below, so a pop that acquires the count sees the total.
    pushed_total_.store(pushed_total_.load(std::memory_order_relaxed) + jobs.size(), std::memory_order_release);
    // release: the entries (and a segment link) are written before a pop's
    // acquire load of the count lets it read them. Under the tail lock, so
    // the count grows in the order the entries were written. Every write of
    // the count is a read-modify-write, so a pop's relaxed decrement keeps
    // this release in the count's release sequence. was_empty is exact by
    // the read-modify-write itself (the value it replaced), not by an order.
    const bool empty_before = count_.fetch_add(jobs.size(), std::memory_order_release) == 0;
    if (was_empty != nullptr) *was_empty = empty_before;
    return push_outcome::pushed;
  }

  // Takes up to min(out.size(), limit(queued)) jobs; returns how many.
  template <typename Limit>
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_up_to(std::span<job_function> out, Limit limit) {
    // An empty poll takes no lock and writes nothing. relaxed: a hint; the
    // acquire load under the lock decides what is read.
    if (count_.load(std::memory_order_relaxed) == 0) return 0;
    return pop_admitted(out, limit, admit_all{}, no_action{});
  }

  // Under the head lock: returns not_admitted unless admit() allows the
  // pop, else takes up to min(out.size(), limit(queued)) jobs and returns
  // how many; after(taken) runs once they are out (also for 0), still under
  // the lock; contended() as for a push.
  template <typename Limit, typename Admit, typename After, typename Contended = no_action>
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_admitted(std::span<job_function> out, Limit limit, Admit admit,
                                                       After after, Contended contended_hook = {}) {
    detail::reset_leading_jobs(out);  // outside the lock (see job_segments.hpp)
    head_lock_.lock_then_if_contended(counting_contention<Contended>{this, contended_hook});
    std::lock_guard lock(head_lock_, std::adopt_lock);
    if (!admit()) return not_admitted;
    // acquire: pairs with the release in push_admitted(); the entries
    // counted are written. Only pops decrease the count, and they hold the
    // head lock, so what is counted here stays queued until this pop takes it.
    const std::size_t queued = count_.load(std::memory_order_acquire);
    const std::size_t n = detail::fillable(out, std::min({limit(queued), out.size(), queued}));
    for (std::size_t i = 0; i < n; ++i) pop_one(out[i]);
    // relaxed: nothing the pushers read depends on it but the count itself
    // (segments go back through returned_, with their own release). It must
    // stay a read-modify-write (see push_admitted()) and stay under the head
    // lock: the next pop's count must include it. An empty poll writes nothing.
    if (n > 0) count_.fetch_sub(n, std::memory_order_relaxed);
    after(n);
    return n;
  }

  // For the adaptive queue. Each lock is taken tail first, then head, by
  // whoever takes both; a hook that holds one lock only tries the other.
  void lock_both() noexcept {
    tail_lock_.lock();
    head_lock_.lock();
  }
  void unlock_both() noexcept {
    head_lock_.unlock();
    tail_lock_.unlock();
  }
  spin_lock& pop_lock() noexcept { return head_lock_; }
  // The caller holds `held`'s lock: takes the other end's lock if it is
  // free (never waits, so no order between the two is needed here).
  [[nodiscard]] bool try_lock_other_end(queue_end held) noexcept {
    return held == queue_end::push ? head_lock_.try_lock() : tail_lock_.try_lock();
  }
  void unlock_other_end(queue_end held) noexcept {
    if (held == queue_end::push) {
      head_lock_.unlock();
    } else {
      tail_lock_.unlock();
    }
  }
  // Holding both locks: the refusals for pushes (with closed kept) and for
  // fast pops.
  void set_refusals_locked(std::uint8_t push_bits, std::uint8_t pop_bits) noexcept {
    tail_refusals_ = static_cast<std::uint8_t>((tail_refusals_ & refuse_closed) | push_bits);
    head_refusals_ = pop_bits;
  }
  // Holding the head lock: the refusals for fast pops.
  void set_pop_refusals_locked(std::uint8_t pop_bits) noexcept { head_refusals_ = pop_bits; }
  // Holding the head lock.
  [[nodiscard]] bool fast_pops_refused_locked() const noexcept { return (head_refusals_ & refuse_fast_pops) != 0; }
  // Holding the tail lock.
  [[nodiscard]] bool closed_locked() const noexcept { return (tail_refusals_ & refuse_closed) != 0; }
  // Holding the head lock while pushes are refused (refuse_pushes, set with
  // both locks held, so every push admitted before has added to the count
  // and released the tail lock before this pop took the head lock): true
  // when no job is queued, for good until pushes are admitted again.
  [[nodiscard]] bool empty_locked() const noexcept {
    return count_.load(std::memory_order_relaxed) == 0;  // relaxed: ordered by the locks, as above
  }
  // Without a lock: no job is counted. acquire: a later load the caller
  // makes (the adaptive queue's state) is not read before this one.
  [[nodiscard]] bool looks_empty() const noexcept { return count_.load(std::memory_order_acquire) == 0; }

  // Tail side (under tail_lock_).

  // Throws std::bad_alloc.
  [[nodiscard]] segment* new_segment() {
    segment* s = segment::allocate(segment_words_);
    ++segments_;
    return s;
  }

  // Makes sure `needed` words of entries fit, whatever their sizes: what
  // the last segment has left and each spare segment hold, less what each
  // may leave unused at its end. Takes back the segments the pops have used
  // up, then allocates (std::bad_alloc propagates; spares taken or
  // allocated so far are kept, no job has moved).
  void reserve(std::size_t needed) {
    const std::size_t per_segment = segment_words_ - detail::segment_waste;
    std::size_t room = tail_.room(segment_words_, spares_.count);
    while (room < needed) {
      // acquire: pairs with the release in next_head_segment(); the pop's
      // reads of those segments are done before this push writes them.
      segment* s = returned_.exchange(nullptr, std::memory_order_acquire);
      if (s == nullptr) s = new_segment();
      while (s != nullptr) {
        segment* next = s->next;
        spares_.push(s);
        room += per_segment;
        s = next;
      }
    }
  }

  // (A new segment's link, written by tail_.put(), is published with the
  // count, as the entries.)

  // Head side (under head_lock_).

  // Moves the oldest job into `out`. Preconditions: the count includes it,
  // `out` is empty.
  THREAD_SYSTEM_ALWAYS_INLINE void pop_one(job_function& out) noexcept {
    if (detail::used_up(*head_segment_, head_, head_words_)) next_head_segment();
    head_ += detail::unpack_entry(*head_segment_, head_, out);
  }

  // The head segment is used up (a later one holds the next entry, which
  // the count includes): it goes back to the pushers.
  void next_head_segment() noexcept {
    segment* done = head_segment_;
    head_segment_ = done->next;
    head_ = 0;
    // release: this pop's reads of the segment come before a push reuses
    // it (pairs with the acquire exchange in reserve()). relaxed on
    // failure: the value is only the next attempt's link.
    segment* top = returned_.load(std::memory_order_relaxed);
    do {
      done->next = top;
    } while (!returned_.compare_exchange_weak(top, done, std::memory_order_release, std::memory_order_relaxed));
  }

  // Four cache lines (the class is aligned to a line), so that pushers and
  // poppers write no line in common but the count's on every operation (the
  // fourth only at a segment change or when one waits for its lock). The
  // first: the tail end, what a push reads and writes under its lock.
  mutable spin_lock tail_lock_;
  std::uint8_t tail_refusals_ = 0;   // guarded by tail_lock_: refuse_closed, refuse_pushes
  const std::size_t segment_words_;  // a power of two, at least min_segment_words
  detail::segment_tail tail_;        // guarded by tail_lock_: the last segment, where pushes go, and its fill
  detail::spare_segments spares_;    // guarded by tail_lock_
  std::size_t segments_ = 0;         // guarded by tail_lock_ (and the constructor): allocated, in use or spare
  std::atomic<std::uint64_t> pushed_total_{0};  // written under tail_lock_: see accepted_pushes()
  // The second: the head end, what a pop reads and writes under its lock
  // (with its own copy of the segment size, so that besides the count and
  // the entries a pop reads no line a push writes).
  alignas(64) spin_lock head_lock_;
  std::uint8_t head_refusals_ = 0;   // guarded by head_lock_: refuse_fast_pops (the adaptive queue's)
  const std::size_t head_words_;     // = segment_words_
  segment* head_segment_ = nullptr;  // guarded by head_lock_: holds the oldest entry
  std::size_t head_ = 0;             // guarded by head_lock_: word index of the oldest entry (or a skip marker)
  // The third: the count, where the two ends meet, and what idle pollers
  // read with it (the closed flag, written once).
  alignas(64) std::atomic<std::size_t> count_{0};
  std::atomic<bool> closed_hint_{false};
  // The fourth: what only a segment change or contention touches.
  alignas(64) std::atomic<segment*> returned_{nullptr};  // segments the pops used up, a stack: see reserve()
  std::atomic<std::uint64_t> contended_{0};              // both ends: see contended_operations()
};

}  // namespace thread_system
