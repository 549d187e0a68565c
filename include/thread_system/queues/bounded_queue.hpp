// bounded_queue: a fixed-capacity, lock-free multi-producer multi-consumer
// FIFO of jobs.
//
// Algorithm: Dmitry Vyukov's bounded MPMC queue ("Bounded MPMC queue",
// 1024cores.net, 2010); the producer side is detail/vyukov_ring.hpp, shared
// with the logger's record ring. The ring has `capacity` cells; each cell carries a
// sequence number that says whose turn it is:
//   * sequence == position          the cell is free for the producer that
//                                   claims ring position `position`;
//   * sequence == position + 1      the cell holds the job of that position,
//                                   ready for the consumer that claims it;
//   * after a pop the consumer sets sequence = position + capacity, which
//     frees the cell for the producer of the next lap.
// Producers claim positions by a CAS on `tail_`, consumers by a CAS on
// `head_`; the job itself is published by the release store of the cell's
// sequence and received by the consumer's acquire load of it.
//
// Capacity: rounded up to a power of two (so a position maps to a cell with a
// mask), and at least 2 (the sequence scheme cannot tell "full" from "free"
// with a single cell). capacity() returns the rounded value; exactly that
// many jobs fit. A capacity of 0 or above 2^62 throws
// error_exception{invalid_argument}.
//
// Contract:
//   * Any number of threads may call any member concurrently. After
//     construction only the error paths allocate (the error's message);
//     nothing blocks except as noted for close().
//   * FIFO: jobs pushed by one thread are popped in the order pushed.
//   * A successful push happens-before the pop that returns its job.
//   * Full: try_push/push_batch return `queue_full` immediately (never spin
//     waiting for room). A push can also report `queue_full` while a consumer
//     is between claiming the oldest cell and releasing it.
//   * Empty: try_pop returns false. A pop may return false while a producer
//     that already claimed the oldest position is still writing its job.
//   * close(): the closed flag lives in the top bit of `tail_`, so setting it
//     and claiming a position are ordered by the same atomic. A push whose
//     claim CAS came first completes and succeeds; after close() returns,
//     every push fails with `pool_stopped` (its job untouched). Once the queue
//     is closed, a pop that finds the oldest position claimed but not yet
//     written waits (yielding) for that producer, so a pop that returns false
//     after close() has returned proves the queue is empty for good: draining
//     a closed queue loses nothing.
//   * size_approx() is tail minus head read at slightly different moments:
//     approximate, clamped to [0, capacity()].
//
// Cell size: 48 bytes, the sequence and the job in job_function's packed
// form in 5 words (detail/packed_slot.hpp). Callables of up to
// `inline_job_bytes` (24) bytes - function pointers, lambdas capturing three
// pointers, anything job_function already keeps on the heap - live in the
// ring; a larger callable is boxed, which costs one allocation per push (a
// push that cannot allocate the box fails with `resource_exhausted`, the job
// untouched). With 48-byte cells a ring rounded up from N to the next power
// of two stays under 96 bytes per job, and at most 48 when full.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/detail/packed_slot.hpp"
#include "thread_system/detail/vyukov_ring.hpp"
#include "thread_system/queues/queue_concept.hpp"

namespace thread_system {

/// A fixed-capacity, lock-free multi-producer multi-consumer FIFO of jobs (Vyukov's bounded queue).
class bounded_queue {
 public:
  /// Largest capacity accepted: positions keep the top bit of `tail_` free
  /// for the closed flag, and signed differences of positions must not wrap.
  static constexpr std::size_t max_capacity = std::size_t{1} << 62;

  /// Callables up to this size are stored in the ring; larger ones cost one
  /// more allocation per push (see the header comment).
  static constexpr std::size_t inline_job_bytes = 24;

  /// A queue of `capacity` rounded up to a power of two (at least 2). Throws error_exception{invalid_argument} for
  /// 0 or a capacity above max_capacity, std::bad_alloc when the ring cannot be allocated.
  explicit bounded_queue(std::size_t capacity) {
    if (capacity == 0 || capacity > max_capacity) {
      throw error_exception(error{error_code::invalid_argument, "bounded_queue: capacity must be in [1, 2^62]"});
    }
    capacity_ = std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity);
    mask_ = capacity_ - 1;
    // A ring whose byte size does not fit in size_t is memory that cannot be
    // had: refused here rather than by new[] (not every compiler checks).
    if (capacity_ > static_cast<std::size_t>(-1) / sizeof(cell)) throw std::bad_alloc();
    cells_ = std::make_unique<cell[]>(capacity_);
    for (std::size_t i = 0; i < capacity_; ++i) {
      // Before any thread can see the queue: the constructor's completion
      // publishes these (the queue is shared only after construction).
      cells_[i].sequence.store(i, std::memory_order_relaxed);
    }
  }

  /// Not copyable.
  bounded_queue(const bounded_queue&) = delete;
  /// Not copyable.
  bounded_queue& operator=(const bounded_queue&) = delete;

  /// Jobs still queued are destroyed (not run, not cancelled). Requires that
  /// no other member is running.
  ~bounded_queue() {
    // relaxed: the caller guarantees no concurrent member call. The cells of
    // positions [head, tail) that were written hold a job.
    const std::size_t head = head_.load(std::memory_order_relaxed);
    const std::size_t tail = tail_.load(std::memory_order_relaxed) & ~closed_bit;
    for (std::size_t position = head; position != tail; ++position) {
      cell& c = cells_[position & mask_];
      if (c.sequence.load(std::memory_order_relaxed) == position + 1) c.job.destroy();
    }
  }

  /// Appends `job`. Fails with `invalid_argument` (empty job), `pool_stopped`
  /// (closed), `queue_full` or `resource_exhausted` (a large job's box could
  /// not be allocated); on failure `job` still holds its callable.
  [[nodiscard]] result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "bounded_queue: empty job");
    if (!slot::prepare(job)) return out_of_memory();
    std::size_t position = 0;
    if (auto claimed = claim_push(1, position); !claimed) {
      slot::unprepare(job);
      return claimed;
    }
    cell& target = cells_[position & mask_];
    target.job.put(std::move(job));
    // release: publishes the job; pairs with the acquire load in claim_pop().
    target.sequence.store(position + 1, std::memory_order_release);
    return {};
  }

  /// Appends every job of `jobs` in order, all or none: the batch claims
  /// `jobs.size()` consecutive positions with one CAS, or fails without
  /// touching any job (`invalid_argument` for an empty job anywhere in the
  /// batch or a batch above capacity(), which could never fit, `pool_stopped`,
  /// `queue_full` when the free room is smaller than the batch, or
  /// `resource_exhausted` when a large job's box cannot be allocated).
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& job : jobs) {
      if (!job) return make_error(error_code::invalid_argument, "bounded_queue: empty job in batch");
    }
    if (jobs.empty()) {  // nothing to claim; refused after close() as every other push
      if (is_closed()) return make_error(error_code::pool_stopped, "bounded_queue: queue is closed");
      return {};
    }
    // Never room for it: a mistake, not a moment's fullness (queue_full
    // invited a retry that could never succeed).
    if (jobs.size() > capacity_) return above_capacity(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (!slot::prepare(jobs[i])) {
        for (std::size_t j = 0; j < i; ++j) slot::unprepare(jobs[j]);
        return out_of_memory();
      }
    }
    std::size_t first = 0;
    if (auto claimed = claim_push(jobs.size(), first); !claimed) {
      for (auto& job : jobs) slot::unprepare(job);
      return claimed;
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      cell& target = cells_[(first + i) & mask_];
      target.job.put(std::move(jobs[i]));
      // release: publishes the job; pairs with the acquire load in claim_pop().
      target.sequence.store(first + i + 1, std::memory_order_release);
    }
    return {};
  }

  /// Moves the oldest job into `out`; false when empty (see the contract).
  [[nodiscard]] bool try_pop(job_function& out) {
    job_function* destination = &out;
    return pop_into(std::span<job_function>(destination, 1)) == 1;
  }

  /// Moves up to `out.size()` of the oldest jobs into `out`, in order, with
  /// one CAS on `head_`; returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) { return pop_into(out); }

  /// Refuses further pushes. Idempotent; jobs already queued stay poppable.
  void close() noexcept {
    // acq_rel RMW on the same atomic the producers CAS: every claim is either
    // before this in tail_'s modification order (and completes) or sees the
    // flag and fails. Pairs with the acquire in is_closed() and claim_pop().
    tail_.fetch_or(closed_bit, std::memory_order_acq_rel);
  }

  /// True once close() has been called: every push fails with `pool_stopped`.
  [[nodiscard]] bool is_closed() const noexcept {
    return (tail_.load(std::memory_order_acquire) & closed_bit) != 0;  // pairs with close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    // relaxed: snapshots, not synchronisation points. The two loads are not
    // taken at one instant, so the difference is clamped.
    const std::size_t head = head_.load(std::memory_order_relaxed);
    const std::size_t tail = tail_.load(std::memory_order_relaxed) & ~closed_bit;
    if (tail <= head) return 0;
    return tail - head > capacity_ ? capacity_ : tail - head;
  }
  /// True when size_approx() is 0; approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// True only when `n` more jobs did not fit at some moment during the call
  /// (never a false "full": the tail is read before the head, and the head
  /// only grows, so the size read can only be too small). A push may still
  /// be refused when this says false.
  [[nodiscard]] bool certainly_full_for(std::size_t n) const noexcept {
    // The order of the two loads is what matters: the acquire on the tail
    // keeps the (relaxed) head load after it.
    const std::size_t tail = tail_.load(std::memory_order_acquire) & ~closed_bit;
    const std::size_t head = head_.load(std::memory_order_relaxed);
    return tail >= head && n > capacity_ - std::min(tail - head, capacity_);
  }

  /// The capacity after rounding up (see the header comment).
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  static constexpr std::size_t closed_bit = detail::ring_closed_bit;

  using slot = detail::packed_slot<5>;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): `job` is raw words, written before it is published
  struct cell {
    std::atomic<std::size_t> sequence{0};
    slot job;  // a job while sequence == position + 1; nothing otherwise
  };
  static_assert(sizeof(cell) == 48);
  static_assert(slot::inline_bytes == inline_job_bytes);

  // Out of line: the message's code stays out of push_batch()'s loop
  // (inlined, it cost the batch rows 6-10%).
  THREAD_SYSTEM_NOINLINE result<void> above_capacity(std::size_t batch) const noexcept {
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return "bounded_queue: a batch of " + std::to_string(batch) + " jobs is above the capacity of " +
             std::to_string(capacity_);
    });
  }

  // Never throws: out of memory for the message too, the error keeps only its code.
  static result<void> out_of_memory() noexcept {
    return make_error_nothrow(error_code::resource_exhausted,
                              [] { return "bounded_queue: cannot allocate the box of a large job"; });
  }

  // Claims `count` consecutive positions for a producer; on success `first`
  // is the first of them (detail/vyukov_ring.hpp).
  result<void> claim_push(std::size_t count, std::size_t& first) {
    switch (detail::claim_positions(
        tail_, count,
        [this](std::size_t position) -> std::atomic<std::size_t>& { return cells_[position & mask_].sequence; },
        first)) {
      case detail::ring_claim::ok:
        return {};
      case detail::ring_claim::full:
        return make_error(error_code::queue_full, "bounded_queue: queue is full");
      case detail::ring_claim::closed:
        break;
    }
    return make_error(error_code::pool_stopped, "bounded_queue: queue is closed");
  }

  std::size_t pop_into(std::span<job_function> out) {
    if (out.empty()) return 0;
    std::size_t head = head_.load(std::memory_order_relaxed);  // a guess validated below
    for (;;) {
      std::size_t ready = 0;
      bool stale = false;
      const std::size_t limit = out.size() < capacity_ ? out.size() : capacity_;
      while (ready < limit) {
        // acquire: pairs with the producer's release store that published
        // the job in this cell.
        const std::size_t sequence = cells_[(head + ready) & mask_].sequence.load(std::memory_order_acquire);
        const std::ptrdiff_t lag = detail::ring_difference(sequence, head + ready + 1);
        if (lag < 0) break;  // not written yet (or empty)
        if (lag > 0) {
          stale = true;  // another consumer took this position
          break;
        }
        ++ready;
      }
      if (stale && ready == 0) {
        head = head_.load(std::memory_order_relaxed);  // a fresh guess
        continue;
      }
      if (ready == 0) {
        if (!wait_for_claimed_push(head)) return 0;
        head = head_.load(std::memory_order_relaxed);  // retry from the current head
        continue;
      }
      // A ready cell can only be emptied by the consumer that moves head_
      // past it, so the prefix seen ready stays ready until this CAS. relaxed:
      // the sequences carry the data.
      THREAD_SYSTEM_CHAOS_POINT();
      if (!head_.compare_exchange_weak(head, head + ready, std::memory_order_relaxed, std::memory_order_relaxed)) {
        continue;
      }
      for (std::size_t i = 0; i < ready; ++i) {
        cell& source = cells_[(head + i) & mask_];
        source.job.take(out[i]);
        // release: our move-out happens-before the next lap's producer write;
        // pairs with the acquire load in claim_push().
        source.sequence.store(head + i + capacity_, std::memory_order_release);
      }
      return ready;
    }
  }

  // The cell at `head` holds no job yet. Returns false when the queue is
  // empty (or open: an open queue reports empty rather than wait for a
  // producer in the middle of its push); true after yielding once when the
  // queue is closed and a producer has claimed `head` but not written it.
  bool wait_for_claimed_push(std::size_t head) {
    // acquire: pairs with close(); coherence on tail_ also shows every claim
    // made before close(), since a claim after it is impossible.
    const std::size_t tail = tail_.load(std::memory_order_acquire);
    if ((tail & closed_bit) == 0) return false;
    if (detail::ring_difference(tail & ~closed_bit, head) <= 0) return false;
    std::this_thread::yield();
    return true;
  }

  // Producers and consumers write different indices; on one cache line every
  // push would invalidate the consumers' copy of head_ and vice versa (false
  // sharing). 64 bytes is the line size of the x86-64 and common ARM cores
  // targeted (std::hardware_destructive_interference_size is avoided: GCC
  // warns that its value may differ between compilations).
  alignas(64) std::atomic<std::size_t> tail_{0};  // next position to push; top bit = closed
  alignas(64) std::atomic<std::size_t> head_{0};  // next position to pop
  alignas(64) std::unique_ptr<cell[]> cells_;
  std::size_t capacity_ = 0;
  std::size_t mask_ = 0;
};

static_assert(job_queue_model<bounded_queue>);

}  // namespace thread_system
