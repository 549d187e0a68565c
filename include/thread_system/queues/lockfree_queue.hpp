// lockfree_queue: an unbounded, lock-free multi-producer multi-consumer FIFO
// of jobs.
//
// Algorithm: a linked list of array segments indexed by fetch-and-add, after
// the FAAArrayQueue of P. Ramalhete and A. Correia ("FAAArrayQueue",
// concurrencyfreaks, 2016; the same idea as the segments of LCRQ, A. Morrison
// and Y. Afek, PPoPP 2013). Each segment holds `segment_capacity` cells
// (fewer at the end of a batch: see push_batch below) and two counters. A producer takes a cell index with one
// fetch-and-add on the tail segment's `enq`, writes its job into the cell and publishes it with a CAS on the cell's
// state (empty -> full). A consumer takes an index with one fetch-and-add on the head segment's `deq` and exchanges the
// cell's state to `abandoned`: if it was full, the job is its own; if the producer has not written yet, the cell is
// abandoned, the producer's CAS fails and it takes another index. A fetch-and-add never fails, so contended producers
// (and consumers) do not retry each other's CASes as on a linked queue's tail: each job costs one read-modify-write on
// the shared counter and one on its own cell. A producer that finds the tail segment full links a new segment (with its
// job in the first cell) with one CAS on `next`; a consumer that finds the head segment used up moves `head_` on and
// retires it.
//
// Three refinements keep consumers from running ahead of producers, the
// weakness of a fetch-and-add queue when it is nearly empty (an index a
// consumer claims before its producer has it is abandoned, and the producer
// must take another): when at most `claim_by_cas_within` (8) indices are
// handed out and unclaimed, a consumer claims exactly the next one with a
// CAS instead; if none of those cells is published yet (every job left is
// a push in progress), it reports empty without claiming; and a consumer
// whose cell is not yet published while later ones are waits for it for a
// bounded `publish_wait_spins` (64) pauses before abandoning it.
//
// A consumer that finds its cell published takes the job with a load
// (acquire) and no read-modify-write: the index is its own, and nobody
// writes a full cell's state. A batch pop claims the run of published cells
// at the head with one CAS on `deq`.
//
// A segment followed by another before all its cells were handed out (a
// batch was linked after it) is flagged FULL by the consumer that reaches
// its end: a producer that then gets one of its indices goes on to the next
// segment, so consumers need not claim its unused cells one by one.
//
// Reclamation: hazard pointers (M. M. Michael, IEEE TPDS 2004; see
// detail/hazard_pointers.hpp), one per segment an operation uses. A segment
// goes back to the segment pool only after a scan found no hazard slot
// holding it; the pool's free list (a Treiber stack) takes segments only
// from a scan, never directly, so its CAS cannot meet an ABA (a segment a
// thread holds a hazard on cannot be recycled under it). `head_` never
// passes `tail_`: a consumer moves `tail_` on before it retires the segment
// it leaves.
//
// Memory: a segment is `segment_capacity` (128) cells of 40 bytes plus three
// cache lines of counters, 5312 bytes (fewer cells at the end of a batch:
// see push_batch below); an empty queue holds one. Reclaimed segments are
// kept for reuse up to `max_pooled_jobs` jobs' worth, so once the pool holds
// the working set, pushing and popping allocate nothing; the rest are freed.
// A reclaimed segment is reset for reuse by rewriting only the cells its
// counters say were handed out or claimed. A cell stores the job in
// job_function's packed form in 4 words (detail/packed_slot.hpp): callables of up to `inline_job_bytes` (16)
// bytes - function pointers, lambdas capturing two pointers, anything
// job_function already keeps on the heap - are stored in the cell; a larger
// callable is boxed (one extra allocation per push, freed by the pop that
// takes it).
//
// Closing and sealing. A segment's `enq` carries three flag bits above the
// index (CLOSED, SEALED, FULL). close() sets CLOSED on the last segment and links a sentinel in
// its `next` (so no segment is appended after it), then *resolves* every
// cell index handed out before: it sets the flag on every segment still in
// the queue and CASes each cell whose producer has not published yet from
// empty to abandoned. A producer whose cell was resolved retries, finds the
// flag and fails. So pushes and close are totally ordered: a push published
// before the resolution completes, every later push fails with
// `pool_stopped`. Sealing (for adaptive_job_queue) is the same with SEALED and
// a second sentinel; pushes then fail with a `sealed` status (not an error:
// the adaptive queue retries them on its other queue) and pops report
// `ended` once they reach it; unseal() removes the sentinel and the flag.
// close() overrides a seal.
//
// Contract:
//   * Any number of threads may call any member concurrently. Threads beyond
//     those already seen may allocate a hazard record (see the domain).
//     Out of memory for it, pushes are refused with `resource_exhausted`,
//     close() waits for a free record, empty_approx() falls back on
//     size_approx(), and a pop
//     (try_pop, pop_batch, pop_share) throws std::bad_alloc having taken
//     nothing (a pool's worker gives the CPU away and looks again).
//   * Lock-free: a push or pop retries only after another operation made
//     progress (claimed an index first, abandoned a cell, appended a
//     segment); no operation waits for another to finish beyond a consumer's
//     bounded wait for its cell to be published.
//   * FIFO: jobs pushed by one thread are popped in the order pushed (its
//     cells are taken in segment order, and by increasing index in one).
//   * A successful push happens-before the pop that returns its job.
//   * try_push fails with `invalid_argument` (empty job), `pool_stopped`
//     (closed) or `resource_exhausted` (out of memory); on failure the job
//     still holds its callable (it may have been relocated into a cell and
//     back, which for a job_function is not observable beyond the move).
//   * push_batch puts the whole batch into private segments and links them
//     with one CAS: all or none, and the batch is contiguous in the queue.
//     Each batch starts a segment: a pooled one when the pool has one (later
//     pushes fill the rest of it), otherwise a new one. When the batch's end
//     fills less than a segment and the pool could not keep another full
//     segment (segments allocated >= the pool's bound), the new one is
//     allocated to the size of that end (192 bytes plus 40 per job; freed,
//     not pooled, once used up), so a backlog of small batches does not
//     hold a 5 KiB segment each. A pop_batch() or pop_share() that takes
//     one job from a new segment claims the published jobs after it with
//     one CAS.
//   * close() is totally ordered with pushes (above). Pops keep returning
//     the jobs queued before; once close() has returned, a pop that returns
//     false proves the queue is empty for good (every cell index handed out
//     is either taken by a pop or was resolved).
//   * A pop returns false when it found no job to take: every index handed
//     to a producer so far was taken by some pop (one still running may yet
//     receive its job) or belongs to a push still in progress (not yet
//     published, and nothing published after it in the segment), and no
//     segment follows.
//   * try_push(job, was_empty) also reports whether an earlier job was still
//     unclaimed when this one was published (a pool wakes a worker only
//     when none was).
//   * size_approx() is pushes minus pops, summed from per-record counters
//     (no shared counter on the hot path): approximate, clamped at zero.
//   * The destructor destroys queued jobs (not run, not cancelled) exactly
//     once and frees every segment, requiring that no other member is
//     running.
//
// For adaptive_job_queue (a friend): seal()/unseal() (above); pop_checked()
// runs a caller's check after the operation holds its hazard record, and
// operation_in_progress() tells whether any operation holds one: together
// they let the adaptive queue prove that no pop which decided under an older
// state is still running (see there). cas_retries() is the queue's
// contention: failed CASes, cells abandoned under a producer, and
// fetch-and-adds that found their counter moved since the thread read it
// (the event that would have failed a CAS on a linked queue).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/chaos.hpp"
#include "thread_system/detail/hazard_pointers.hpp"
#include "thread_system/detail/packed_slot.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/queues/queue_concept.hpp"

namespace thread_system {

/// An unbounded, lock-free multi-producer multi-consumer FIFO of jobs (linked array segments indexed by
/// fetch-and-add, hazard pointers).
class lockfree_queue {
 public:
  /// Cells per segment: jobs a segment holds (a segment made for the end of a batch may hold fewer).
  static constexpr std::size_t segment_capacity = 128;

  /// Default bound on the reclaimed segments kept for reuse, in jobs' worth (64 segments).
  static constexpr std::size_t default_max_pooled_jobs = 8192;

  /// Callables up to this size are stored in the queue's cell; larger ones
  /// cost one more allocation per push (see the header comment).
  static constexpr std::size_t inline_job_bytes = 16;

  /// An empty queue that keeps reclaimed segments for reuse up to `max_pooled_jobs` jobs' worth (rounded up to
  /// whole segments); the rest are freed.
  explicit lockfree_queue(std::size_t max_pooled_jobs = default_max_pooled_jobs)
      : max_pooled_(max_pooled_jobs / segment_capacity + (max_pooled_jobs % segment_capacity != 0 ? 1 : 0)),
        domain_(&reclaim_segment, this) {
    domain_.reserve_record();  // close() waits for a record rather than fail for lack of memory
    auto* first = make_segment(segment_capacity);
    allocated_.store(1, std::memory_order_relaxed);  // before the queue is shared
    head_.store(first, std::memory_order_relaxed);   // published by the constructor's completion
    tail_.store(first, std::memory_order_relaxed);   // likewise
  }

  /// Not copyable.
  lockfree_queue(const lockfree_queue&) = delete;
  /// Not copyable.
  lockfree_queue& operator=(const lockfree_queue&) = delete;

  /// Destroys the jobs still queued (not run, not cancelled) and frees every segment. Requires that no other member
  /// is running.
  ~lockfree_queue() {
    // Quiescent: no hazard is set, so every retired segment is reclaimed
    // (into the pool or freed).
    domain_.collect();
    // relaxed below: the caller guarantees no concurrent member call.
    segment* current = head_.load(std::memory_order_relaxed);
    while (current != nullptr && !is_marker(current)) {
      // Cells below `deq` were claimed by pops (a pop that found its cell
      // published leaves it marked full; see pop_one()); a full cell above
      // it was queued and never taken.
      const auto claimed = std::min<std::uint64_t>(current->deq.load(std::memory_order_relaxed), current->capacity);
      for (std::uint64_t i = claimed; i < current->capacity; ++i) {
        if (current->cells()[i].state.load(std::memory_order_relaxed) == cell_full) current->cells()[i].job.destroy();
      }
      segment* next = current->next.load(std::memory_order_relaxed);
      free_segment(current);
      current = next;
    }
    current = pool_top_.load(std::memory_order_relaxed);
    while (current != nullptr) {
      segment* next = current->next.load(std::memory_order_relaxed);
      free_segment(current);
      current = next;
    }
  }

  /// Appends `job` (see the contract for failures).
  [[nodiscard]] result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "lockfree_queue: empty job");
    return as_result(push_one(std::move(job)));
  }

  /// try_push() that also reports, on success, whether this push found no
  /// earlier job still unclaimed: `was_empty` is set false only when a job
  /// with an earlier index in the same segment was not yet claimed by a pop
  /// when this one was published (read after publishing, seq_cst; the first
  /// cell of a segment always reports true). A pool wakes a worker only when
  /// it is true: the earlier job's own push (or the worker that claims it)
  /// covers this one (see pool_core_push.cpp and scheduler/injector.hpp).
  /// Unchanged on failure.
  [[nodiscard]] result<void> try_push(job_function&& job, bool& was_empty) {
    if (!job) return make_error(error_code::invalid_argument, "lockfree_queue: empty job");
    return as_result(push_one(std::move(job), &was_empty));
  }

  /// Appends every job of `jobs` in order, all or none: the jobs are put in
  /// private segments that are linked with one CAS.
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& job : jobs) {
      if (!job) return make_error(error_code::invalid_argument, "lockfree_queue: empty job in batch");
    }
    if (jobs.empty() && is_closed()) return as_result(link_status::closed);  // as every other push after close()
    return as_result(push_chain(jobs));
  }

  /// Moves the oldest job into `out`; false when empty.
  [[nodiscard]] bool try_pop(job_function& out) {
    detail::hazard_holder holder(domain_);
    if (pop_one(holder, out) != pop_status::taken) return false;
    holder.tally(tally_popped, 1);
    return true;
  }

  /// Moves up to `out.size()` of the oldest jobs into `out`, in order
  /// (one hazard record for the batch); returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) {
    if (out.empty()) return 0;
    detail::hazard_holder holder(domain_);
    return take_up_to(holder, out, out.size());
  }

  /// Refuses further pushes. Idempotent; jobs already queued stay poppable.
  /// Never fails: out of memory, it waits for a hazard record that another
  /// operation releases instead of allocating one.
  void close() noexcept {
    detail::hazard_holder holder(domain_, detail::hazard_holder::never_fails);
    (void)mark_end(holder, closed_flag, closed_marker());
    resolve_pending(holder, closed_flag);
    closed_.store(true, std::memory_order_release);  // pairs with the acquire in is_closed()
  }

  /// True once close() has returned: every push fails with `pool_stopped`.
  [[nodiscard]] bool is_closed() const noexcept {
    return closed_.load(std::memory_order_acquire);  // pairs with close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    // Two sums read at different moments (statistics only).
    const std::uint64_t popped = domain_.tally_sum(tally_popped);
    const std::uint64_t pushed = accepted_pushes();
    return pushed > popped ? static_cast<std::size_t>(pushed - popped) : 0;
  }
  /// True when no job is queued; approximate under concurrency. Reads the
  /// head segment's counters and, when at most 8 jobs are left, their cells
  /// (seq_cst loads, ordered with the pushes' fetch-and-adds and publishing
  /// CASes): a published job always counts; a push still in progress counts
  /// only while more than 8 are left (a pool's push wakes a worker after it
  /// publishes, so a parking worker need not wait for it). Takes a hazard
  /// record; out of memory for one, falls back on size_approx().
  [[nodiscard]] bool empty_approx() const noexcept {
    try {
      detail::hazard_holder holder(domain_);
      return backlog(holder) == 0;
    } catch (const std::bad_alloc&) {
      return size_approx() == 0;
    }
  }

  /// Pops at most max(1, backlog / consumers) jobs, at most out.size(), where
  /// the backlog is what the head segment holds unclaimed (plus a segment's
  /// worth when another follows): a worker's fair share, with one hazard
  /// record for the estimate and the pops.
  [[nodiscard]] std::size_t pop_share(std::span<job_function> out, std::size_t consumers) {
    if (out.empty()) return 0;
    detail::hazard_holder holder(domain_);
    return take_up_to(holder, out, share_limit(holder, out.size(), consumers));
  }

  /// Segments currently allocated (in the queue, pooled, retired, or held by
  /// a running operation). For tests and statistics; approximate while
  /// operations run.
  [[nodiscard]] std::size_t allocated_count() const noexcept {
    return allocated_.load(std::memory_order_relaxed);  // statistics only
  }
  /// Segments on the free list.
  [[nodiscard]] std::size_t pooled_count() const noexcept {
    return pooled_.load(std::memory_order_relaxed);  // statistics only
  }
  /// The queue's contention so far: failed CASes, cells abandoned under a
  /// producer, and fetch-and-adds that found their counter moved by another
  /// thread since this one read it. Approximate while operations run.
  [[nodiscard]] std::uint64_t cas_retries() const noexcept { return domain_.tally_sum(tally_contention); }
  /// Jobs pushed plus jobs popped so far (approximate while operations run).
  [[nodiscard]] std::uint64_t jobs_moved() const noexcept {
    // Attempts rather than accepted pushes: never decreases (a retried
    // push counts each attempt; retries are contention, and rare).
    return domain_.tally_sum(tally_push_attempts) + domain_.tally_sum(tally_popped);
  }

  /// Jobs pushed so far, counted before each job can be popped: a job that a
  /// pop returned (and everything that happened after) is included, so a
  /// thread that saw the job's completion through a release/acquire chain
  /// reads a total that counts it. A push still in progress may be counted
  /// and then taken back if it fails; after close() and then
  /// wait_for_pushes(), the total is final.
  [[nodiscard]] std::uint64_t accepted_pushes() const noexcept {
    // Failures first: each one read implies its attempt (tallied before it,
    // by the same holder) in the attempts read after (acquire loads).
    const std::uint64_t failures = domain_.tally_sum(tally_push_failures);
    const std::uint64_t attempts = domain_.tally_sum(tally_push_attempts);
    return attempts - failures;
  }

  /// Waits until every push (and pop) that was running when this was called
  /// has returned. After close(), accepted_pushes() is then final: no push
  /// can publish once close() has returned, and those that were running
  /// have taken back their counts.
  void wait_for_pushes() const noexcept { domain_.wait_for_holders(); }
  /// Segments retired and waiting for a scan.
  [[nodiscard]] std::size_t retired_count() const noexcept { return domain_.retired_count(); }
  /// Hazard records allocated (about the number of threads that used the queue at once).
  [[nodiscard]] std::size_t hazard_record_count() const noexcept { return domain_.record_count(); }

  /// Scans the retired segments of every idle hazard record now rather than
  /// at the next threshold. With no operation running, retired_count() is 0
  /// afterwards.
  void collect() { domain_.collect(); }

 private:
  template <typename>
  friend class basic_adaptive_job_queue;
  friend struct lockfree_queue_test_access;  // white-box tests: a push stopped between its index and its publication

  // White-box tests: called by resolve_pending() (seal(), close()) between
  // reading a segment's successor and protecting it, on the sealing thread.
  // Null outside those tests; a relaxed load per segment of the walk, which
  // runs once per seal or close.
  static inline std::atomic<void (*)(lockfree_queue&)> resolve_pending_hook_{nullptr};
  using slot = detail::packed_slot<4>;

  // Cell states. Producers CAS empty -> full; consumers (and a resolving
  // close or seal) end a cell's use with abandoned.
  static constexpr std::uint32_t cell_empty = 0;
  static constexpr std::uint32_t cell_full = 1;
  static constexpr std::uint32_t cell_abandoned = 2;

  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): `job` is raw words, written before it is published
  struct cell {
    std::atomic<std::uint32_t> state{cell_empty};
    slot job;
  };
  static_assert(sizeof(cell) == 40);
  static_assert(slot::inline_bytes == inline_job_bytes);

  // Flag bits of a segment's `enq`, above the index.
  static constexpr std::uint64_t closed_flag = std::uint64_t{1} << 63;
  static constexpr std::uint64_t sealed_flag = std::uint64_t{1} << 62;
  // Set by a consumer on a segment that a later one follows: its unused
  // cells will not be handed out (see pop_one()).
  static constexpr std::uint64_t full_flag = std::uint64_t{1} << 61;
  static constexpr std::uint64_t any_flag = closed_flag | sealed_flag | full_flag;
  static constexpr std::uint64_t index_mask = full_flag - 1;

  // Producers' counter, consumers' counter and the link on separate cache
  // lines, so that one side's read-modify-writes do not invalidate the
  // other's line (false sharing).
  //
  // The cells follow the segment in the same allocation (make_segment()):
  // `segment_capacity` of them, or fewer in a segment allocated for the
  // end of a batch (push_chain()).
  struct segment {
    alignas(64) std::atomic<std::uint64_t> enq{0};  // next cell for a producer, plus flags
    // Cells this segment holds; set before the segment is shared, never
    // changed. On enq's line: whoever reads one reads the other.
    const std::uint64_t capacity;
    alignas(64) std::atomic<std::uint64_t> deq{0};  // next cell for a consumer
    // The next segment, a sentinel (closed/sealed), or null on the last one.
    // Also the next free segment while on the pool.
    alignas(64) std::atomic<segment*> next{nullptr};
    // Set (seq_cst) by leave_segment() before it moves head_ past this
    // segment; reset only by reclaim_segment(). A segment can be left before
    // all of its cells were used (a flag froze its count), so this, not
    // `deq`, tells resolve_pending() whether its successor may be unlinked.
    std::atomic<bool> leaving{false};

    explicit segment(std::uint64_t cell_count) noexcept : capacity(cell_count) {}
    segment(const segment&) = delete;
    segment& operator=(const segment&) = delete;
    ~segment() = default;

    cell* cells() noexcept {
      return std::launder(reinterpret_cast<cell*>(reinterpret_cast<std::byte*>(this) + sizeof(segment)));
    }
    const cell* cells() const noexcept {
      return std::launder(reinterpret_cast<const cell*>(reinterpret_cast<const std::byte*>(this) + sizeof(segment)));
    }
  };
  static_assert(sizeof(segment) % alignof(cell) == 0);
  static_assert(std::is_trivially_destructible_v<cell>);

  // A segment of `cell_count` empty cells; throws std::bad_alloc.
  static segment* make_segment(std::uint64_t cell_count) {
    void* raw = ::operator new(sizeof(segment) + cell_count * sizeof(cell), std::align_val_t{alignof(segment)});
    auto* made = ::new (raw) segment(cell_count);
    std::byte* storage = static_cast<std::byte*>(raw) + sizeof(segment);  // where cells() finds them
    for (std::uint64_t index = 0; index < cell_count; ++index) ::new (storage + index * sizeof(cell)) cell;
    return made;
  }

  // Frees a segment made by make_segment(); its jobs must be gone (taken or
  // destroyed): cells are trivially destructible.
  static void free_segment(segment* gone) noexcept {
    gone->~segment();
    ::operator delete(static_cast<void*>(gone), std::align_val_t{alignof(segment)});
  }

  // A pop claims its index with a CAS rather than a fetch-and-add when at
  // most this many indices are handed out and not yet claimed (see pop_one()).
  static constexpr std::uint64_t claim_by_cas_within = 8;
  // How long a pop waits for the producer of its cell to publish (pauses).
  static constexpr unsigned publish_wait_spins = 64;

  // Per-record counters (detail::hazard_holder::tally()). A push counts an
  // attempt just before the CAS that would publish its job(s), and a
  // failure if that CAS failed.
  static constexpr std::size_t tally_push_attempts = 0;
  static constexpr std::size_t tally_push_failures = 1;
  static constexpr std::size_t tally_popped = 2;
  static constexpr std::size_t tally_contention = 3;

  enum class link_status { linked, sealed, closed, out_of_memory };
  enum class pop_status {
    taken,
    empty,  ///< Nothing queued; pushes may still come.
    ended,  ///< Nothing queued and a seal or close ends the queue.
  };

  static result<void> as_result(link_status status) {
    switch (status) {
      case link_status::linked:
        return {};
      case link_status::out_of_memory:
        return make_error_nothrow(error_code::resource_exhausted, [] { return "lockfree_queue: out of memory"; });
      case link_status::sealed:  // only an adaptive_job_queue seals; it never lets this through
      case link_status::closed:
        break;
    }
    return make_error(error_code::pool_stopped, "lockfree_queue: queue is closed");
  }

  // Sentinel addresses, never dereferenced: `next == closed_marker()` marks
  // the last segment of a closed queue, `sealed_marker()` of a sealed one.
  // Two aligned addresses of a static buffer, shared by every queue.
  alignas(alignof(std::max_align_t) > 64 ? alignof(std::max_align_t)
                                         : 64) static inline unsigned char sentinel_storage_[128] = {};
  static segment* closed_marker() noexcept {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): an address only, never dereferenced
    return reinterpret_cast<segment*>(&sentinel_storage_[0]);
  }
  static segment* sealed_marker() noexcept {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): an address only, never dereferenced
    return reinterpret_cast<segment*>(&sentinel_storage_[64]);
  }
  static bool is_marker(const segment* s) noexcept { return s == closed_marker() || s == sealed_marker(); }
  static link_status end_status(const segment* marker) noexcept {
    return marker == closed_marker() ? link_status::closed : link_status::sealed;
  }

  // Pushes one job. Unless it returns `linked`, `job` still holds its callable.
  // `was_empty`, when given, is set on success (see try_push()).
  link_status push_one(job_function&& job, bool* was_empty = nullptr) {
    if (!slot::prepare(job)) return link_status::out_of_memory;
    try {
      detail::hazard_holder holder(domain_);
      const link_status status = place(holder, job, was_empty);
      if (status != link_status::linked) slot::unprepare(job);  // the caller gets back what it pushed
      return status;
    } catch (const std::bad_alloc&) {  // no hazard record could be allocated
      slot::unprepare(job);
      return link_status::out_of_memory;
    }
  }

  // Puts the prepared `job` into a cell (or a new segment). Unless it
  // returns `linked`, `job` still holds its (prepared) callable.
  link_status place(detail::hazard_holder& holder, job_function& job, bool* was_empty) {
    segment* spare = nullptr;  // a segment taken for appending that lost the race; reused next time
    for (;;) {
      segment* last = holder.protect(0, tail_);
      // relaxed: a flag seen here spares the fetch-and-add (a refused push
      // then uses up no index); otherwise only compared with its result, to
      // count contention.
      const std::uint64_t seen = last->enq.load(std::memory_order_relaxed);
      std::uint64_t ticket = seen;
      if ((seen & any_flag) == 0) {
        // seq_cst: the index decides the cell; also totally ordered with the
        // flags set by close()/seal() (a read-modify-write on the same word),
        // and with the pool's sleeper check after a push (pairs with the
        // seq_cst loads of the counters in pop_one()).
        THREAD_SYSTEM_CHAOS_POINT();
        ticket = last->enq.fetch_add(1, std::memory_order_seq_cst);
        if (ticket != seen) holder.tally(tally_contention, 1);
      }
      if ((ticket & any_flag) != 0) {
        // acquire: pairs with the CAS that linked a successor or a sentinel.
        segment* next = last->next.load(std::memory_order_acquire);
        if (next != nullptr && !is_marker(next)) {
          advance_tail(last, next);  // a flagged segment that is no longer the last: go on
          continue;
        }
        release_spare(holder, spare);
        if (next != nullptr) return end_status(next);
        return (ticket & closed_flag) != 0 ? link_status::closed : link_status::sealed;
      }
      const std::uint64_t index = ticket & index_mask;
      if (index < last->capacity) {
        cell& target = last->cells()[index];
        target.job.put(std::move(job));
        std::uint32_t expected = cell_empty;
        // seq_cst (release part): publishes the job to the consumer's
        // exchange (pairs with its acquire); fails when a consumer or a
        // resolving close()/seal() abandoned the cell first.
        holder.tally(tally_push_attempts, 1);  // before the job can be popped (see accepted_pushes())
        THREAD_SYSTEM_CHAOS_POINT();
        if (target.state.compare_exchange_strong(expected, cell_full, std::memory_order_seq_cst,
                                                 std::memory_order_relaxed)) {
          release_spare(holder, spare);
          // seq_cst: after the publishing CAS in the single total order, so
          // a pop that claims an earlier index after this load sees this
          // job when it next looks (its loads are seq_cst).
          if (was_empty != nullptr) *was_empty = index == 0 || last->deq.load(std::memory_order_seq_cst) >= index;
          return link_status::linked;
        }
        target.job.take_prepared(job);  // never published: still ours
        holder.tally(tally_push_failures, 1);
        holder.tally(tally_contention, 1);
        continue;
      }
      // The segment is full: link a new one after it, with the job in its first cell.
      // acquire: pairs with the CAS that linked a successor or a sentinel.
      segment* next = last->next.load(std::memory_order_acquire);
      if (next != nullptr) {
        if (is_marker(next)) {
          release_spare(holder, spare);
          return end_status(next);
        }
        advance_tail(last, next);
        continue;
      }
      if (spare == nullptr) {
        try {
          spare = take_segment(holder);
        } catch (const std::bad_alloc&) {
          return link_status::out_of_memory;
        }
      }
      spare->cells()[0].job.put(std::move(job));
      // relaxed: private until the CAS below publishes the segment.
      spare->cells()[0].state.store(cell_full, std::memory_order_relaxed);
      spare->enq.store(1, std::memory_order_relaxed);
      // seq_cst (release part): publishes the segment and its job; pairs
      // with the acquire loads of `next`; totally ordered with the sentinel
      // CASes of close(), seal() and unseal().
      holder.tally(tally_push_attempts, 1);  // before the job can be popped (see accepted_pushes())
      THREAD_SYSTEM_CHAOS_POINT();
      if (last->next.compare_exchange_strong(next, spare, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        advance_tail(last, spare);
        if (was_empty != nullptr) *was_empty = true;  // the first cell of its segment: wake
        return link_status::linked;
      }
      // Another producer linked first (or a sentinel came): take the job back, keep the segment for the retry.
      spare->cells()[0].job.take_prepared(job);
      spare->cells()[0].state.store(cell_empty, std::memory_order_relaxed);
      spare->enq.store(0, std::memory_order_relaxed);
      holder.tally(tally_push_failures, 1);
      holder.tally(tally_contention, 1);
    }
  }

  // A segment taken for appending and not used: it came from the pool or
  // the allocator and was never published, but it goes back through a scan
  // like any other (see the ABA note in the header comment).
  static void release_spare(detail::hazard_holder& holder, segment* spare) noexcept {
    if (spare != nullptr) holder.retire(spare);
  }

  // Pushes every job of `jobs` (non-empty, all valid), all or none. Unless it
  // returns `linked`, every job still holds its callable.
  link_status push_chain(std::span<job_function> jobs) {
    if (jobs.empty()) return link_status::linked;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (!slot::prepare(jobs[i])) {
        for (std::size_t j = 0; j < i; ++j) slot::unprepare(jobs[j]);
        return link_status::out_of_memory;
      }
    }
    try {
      detail::hazard_holder holder(domain_);
      segment* first = nullptr;
      segment* last = nullptr;
      std::size_t stored = 0;
      try {
        while (stored < jobs.size()) {
          // The batch's end, when it fills less than a segment: a pooled
          // segment if there is one; else one allocated to its size once the
          // pool could not keep another full one (while it could, a full
          // segment is allocated and goes to the pool when used up, so a
          // stream of small batches stops allocating).
          const std::size_t left = jobs.size() - stored;
          // relaxed: statistics; a stale value only changes which size is allocated.
          const bool small = left < segment_capacity && allocated_.load(std::memory_order_relaxed) >= max_pooled_;
          segment* fresh = take_segment(holder, small ? left : segment_capacity);
          // relaxed: the chain is private until link_chain() publishes it.
          if (last == nullptr) {
            first = fresh;
          } else {
            last->next.store(fresh, std::memory_order_relaxed);
          }
          last = fresh;
          std::size_t index = 0;
          for (; index < fresh->capacity && stored < jobs.size(); ++index, ++stored) {
            fresh->cells()[index].job.put(std::move(jobs[stored]));
            fresh->cells()[index].state.store(cell_full, std::memory_order_relaxed);
          }
          fresh->enq.store(index, std::memory_order_relaxed);
        }
      } catch (const std::bad_alloc&) {
        give_back_chain(holder, first, jobs);
        return link_status::out_of_memory;
      }
      if (const link_status linked = link_chain(holder, first, last, jobs.size()); linked != link_status::linked) {
        give_back_chain(holder, first, jobs);
        return linked;
      }
      return link_status::linked;
    } catch (const std::bad_alloc&) {  // no hazard record could be allocated
      for (auto& job : jobs) slot::unprepare(job);
      return link_status::out_of_memory;
    }
  }

  // Links the private chain first..last after the last segment. Nothing is
  // linked unless it returns `linked`.
  link_status link_chain(detail::hazard_holder& holder, segment* first, segment* last, std::size_t count) {
    for (;;) {
      segment* end = holder.protect(0, tail_);
      // acquire: pairs with the CAS that linked a successor or a sentinel.
      segment* next = end->next.load(std::memory_order_acquire);
      if (next != nullptr) {
        if (is_marker(next)) return end_status(next);
        advance_tail(end, next);
        continue;
      }
      holder.tally(tally_push_attempts, count);  // before the jobs can be popped (see accepted_pushes())
      // seq_cst (release part): publishes the chain's jobs; same pairing as
      // the append in place().
      THREAD_SYSTEM_CHAOS_POINT();
      if (end->next.compare_exchange_strong(next, first, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        advance_tail(end, last);
        return link_status::linked;
      }
      holder.tally(tally_push_failures, count);
      holder.tally(tally_contention, 1);
    }
  }

  // Undoes a batch push that linked nothing: gives the jobs back (unboxed)
  // and retires the private segments. The chain holds the first jobs of
  // `jobs`, in order; the rest were never moved.
  static void give_back_chain(detail::hazard_holder& holder, segment* first, std::span<job_function> jobs) {
    std::size_t stored = 0;
    while (first != nullptr) {
      segment* next = first->next.load(std::memory_order_relaxed);  // private chain
      const std::uint64_t count = first->enq.load(std::memory_order_relaxed);
      for (std::uint64_t index = 0; index < count; ++index) first->cells()[index].job.take_prepared(jobs[stored++]);
      holder.retire(first);  // reset by reclaim_segment()
      first = next;
    }
    for (auto& job : jobs) slot::unprepare(job);
  }

  // Pops up to out.size() jobs like pop_batch() (consumers == 0), or one
  // consumer's share like pop_share(), but first, while holding the
  // operation's hazard record, calls `check()`; when it returns false,
  // nothing is popped and the result is empty. When the pop stops at the end
  // (empty and sealed or closed), it calls `on_ended()` before releasing the
  // record.
  template <typename Check, typename OnEnded>
  std::optional<std::size_t> pop_checked(std::span<job_function> out, std::size_t consumers, Check&& check,
                                         OnEnded&& on_ended) {
    detail::hazard_holder holder(domain_);
    if (!check()) return std::nullopt;
    const std::size_t limit = consumers == 0 || out.empty() ? out.size() : share_limit(holder, out.size(), consumers);
    return take_up_to(holder, out, limit, std::forward<OnEnded>(on_ended));
  }

  pop_status pop_one(detail::hazard_holder& holder, job_function& out) {
    for (;;) {
      segment* first = holder.protect(0, head_);
      const std::uint64_t cells = first->capacity;  // read once: fixed for the segment's life
      // seq_cst loads: with the producers' seq_cst fetch-and-add, a pop that
      // follows a push in the single total order sees its index (the pool's
      // sleep/wake protocol relies on it).
      const std::uint64_t taken = first->deq.load(std::memory_order_seq_cst);
      std::uint64_t ticket = first->enq.load(std::memory_order_seq_cst);
      std::uint64_t handed = ticket & index_mask;
      if (taken >= std::min<std::uint64_t>(handed, cells)) {
        // acquire: pairs with the CAS that linked a successor or a sentinel.
        segment* next = first->next.load(std::memory_order_acquire);
        if (next == nullptr) return pop_status::empty;
        if (is_marker(next)) {
          // The sentinel came after the flag, so this re-read sees every
          // index handed out before it.
          handed = first->enq.load(std::memory_order_seq_cst) & index_mask;
          if (taken >= std::min<std::uint64_t>(handed, cells)) return pop_status::ended;
        } else {
          // A later segment exists (a batch was linked, or this one is
          // full). Retire this one's unused cells: flagged, it hands out no
          // more indices (a producer that gets a flagged one goes on to
          // the next segment), so once every index handed out before the
          // flag is claimed, nothing more can appear here.
          if ((ticket & any_flag) == 0 && handed < cells) {
            // seq_cst: ordered with the producers' fetch-and-adds on this
            // word: an index taken before is below the count returned.
            ticket = first->enq.fetch_or(full_flag, std::memory_order_seq_cst);
            handed = ticket & index_mask;
          }
          if (taken >= std::min<std::uint64_t>(handed, cells)) {
            leave_segment(holder, first, next);
            continue;
          }
        }
        // Otherwise cells of this segment are still to be claimed.
      }
      std::uint64_t index = taken;
      if (taken < handed && handed - taken <= claim_by_cas_within) {
        // Nearly empty, and no cell left to claim is published yet: every
        // job left is a push still in progress, which will publish and then
        // (in a pool) wake a worker. Report empty rather than claim a cell
        // and wait for its producer: a waiting consumer would spin on the
        // cell's line while the producer writes it, and on an oversubscribed
        // machine take the CPU that producer needs.
        if ((ticket & any_flag) == 0 && handed <= cells && published_in(first, taken, handed) == 0 &&
            // acquire: pairs with the CAS that linked a successor or a sentinel.
            first->next.load(std::memory_order_acquire) == nullptr) {
          return pop_status::empty;
        }
        // Nearly empty: claim exactly the index seen, so that consumers
        // racing for the last jobs do not overtake the producers (an index
        // claimed before its producer comes is abandoned, and the producer
        // must retry). seq_cst: see the loads above.
        THREAD_SYSTEM_CHAOS_POINT();
        if (!first->deq.compare_exchange_strong(index, taken + 1, std::memory_order_seq_cst,
                                                std::memory_order_relaxed)) {
          holder.tally(tally_contention, 1);
          continue;
        }
      } else {
        // seq_cst: see the loads above.
        THREAD_SYSTEM_CHAOS_POINT();
        index = first->deq.fetch_add(1, std::memory_order_seq_cst);
        if (index != taken) holder.tally(tally_contention, 1);
      }
      if (index >= cells) {
        // acquire: pairs with the CAS that linked a successor or a sentinel.
        segment* next = first->next.load(std::memory_order_acquire);
        if (next == nullptr) return pop_status::empty;
        if (is_marker(next)) return pop_status::ended;
        leave_segment(holder, first, next);
        continue;
      }
      cell& source = first->cells()[index];
      // Its producer took the index and is about to publish: wait for it a
      // little before abandoning the cell (which would make the producer
      // retry). Bounded, so a preempted producer delays no one for long.
      // acquire: pairs with the producer's publishing CAS.
      std::uint32_t seen = source.state.load(std::memory_order_acquire);
      for (unsigned spin = 0; spin < publish_wait_spins && seen == cell_empty; ++spin) {
        detail::cpu_relax();
        seen = source.state.load(std::memory_order_acquire);  // as above
      }
      if (seen == cell_full) {
        // Published: the index is this pop's alone and nobody writes a full
        // cell's state (a producer's CAS and close()'s resolution both
        // expect it empty), so no read-modify-write is needed. The cell
        // stays marked full; the destructor and the segment's reset know
        // that cells below `deq` are claimed.
        source.job.take(out);
        return pop_status::taken;
      }
      // Not published yet: the exchange decides between this pop and the
      // producer. acquire: pairs with the producer's publishing CAS; seq_cst
      // so that it is ordered with the resolution of close()/seal() as well.
      THREAD_SYSTEM_CHAOS_POINT();
      const std::uint32_t was = source.state.exchange(cell_abandoned, std::memory_order_seq_cst);
      if (was == cell_full) {
        source.job.take(out);  // the cell is ours: its producer is done with it
        return pop_status::taken;
      }
      // Empty: its producer has not published yet (the cell is abandoned
      // now, and the producer takes another one), or nobody got the index
      // yet because this pop overtook the producers: contention either way.
      // Already abandoned: resolved by close()/seal(), not contention.
      if (was == cell_empty) holder.tally(tally_contention, 1);
    }
  }

  struct no_action {
    void operator()() const noexcept {}
  };

  // Pops up to `limit` jobs into `out` (limit <= out.size()) and counts them:
  // a run of published cells with one CAS (claim_published()), the rest one
  // at a time. When the pop stops at the end (empty and sealed or closed),
  // calls `on_ended()` (pop_checked()).
  template <typename OnEnded = no_action>
  std::size_t take_up_to(detail::hazard_holder& holder, std::span<job_function> out, std::size_t limit,
                         OnEnded&& on_ended = {}) {
    std::size_t count = limit > 1 ? claim_published(holder, out.first(limit)) : 0;
    bool claim_again = true;
    while (count < limit) {
      const pop_status status = pop_one(holder, out[count]);
      if (status != pop_status::taken) {
        if (status == pop_status::ended) on_ended();
        break;
      }
      ++count;
      // The pop may have left a used-up segment for the next one (after
      // small batches, each its own segment, every pop of a batch does):
      // claim the rest of that segment's published run with one CAS as
      // well. After a claim that found no run, not again in this call, so
      // that pops at lone published cells do not try for every job.
      if (claim_again && limit - count > 1) {
        const std::size_t claimed = claim_published(holder, out.subspan(count, limit - count), 1);
        count += claimed;
        claim_again = claimed != 0;
      }
    }
    holder.tally(tally_popped, count);
    return count;
  }

  // One consumer's share of the backlog, max(1, backlog / consumers), at
  // most `room` (pop_share()).
  std::size_t share_limit(detail::hazard_holder& holder, std::size_t room, std::size_t consumers) const noexcept {
    std::size_t fair = backlog(holder);
    if (consumers > 1) fair /= consumers;
    return std::clamp<std::size_t>(fair, 1, room);
  }

  // Claims, with one CAS on the head segment's `deq`, the run of published
  // cells it starts with (up to out.size(), at least `min_run`) and takes
  // their jobs: one read-modify-write on the consumers' counter for the
  // whole run instead of one per job. Returns 0, having taken nothing, when
  // there is no such run or another pop claimed first (pop_one() then goes
  // on).
  std::size_t claim_published(detail::hazard_holder& holder, std::span<job_function> out, std::uint64_t min_run = 2) {
    segment* first = holder.protect(0, head_);
    // seq_cst: as in pop_one().
    const std::uint64_t taken = first->deq.load(std::memory_order_seq_cst);
    const std::uint64_t handed =
        std::min<std::uint64_t>(first->enq.load(std::memory_order_seq_cst) & index_mask, first->capacity);
    if (taken >= handed) return 0;
    const std::uint64_t end = std::min<std::uint64_t>(handed, taken + out.size());
    std::uint64_t run = taken;
    // acquire: pairs with each producer's publishing CAS.
    while (run < end && first->cells()[run].state.load(std::memory_order_acquire) == cell_full) ++run;
    if (run - taken < min_run) return 0;
    std::uint64_t expected = taken;
    // seq_cst: as in pop_one().
    THREAD_SYSTEM_CHAOS_POINT();
    if (!first->deq.compare_exchange_strong(expected, run, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      holder.tally(tally_contention, 1);
      return 0;
    }
    // Published cells claimed by this pop alone: taken without a
    // read-modify-write, as in pop_one().
    for (std::uint64_t i = taken; i < run; ++i) first->cells()[i].job.take(out[i - taken]);
    return static_cast<std::size_t>(run - taken);
  }

  // Jobs the head segment holds unclaimed (handed out, published or not),
  // plus a full segment's worth when another segment follows: exact within
  // one segment, an estimate beyond (the next may be a smaller segment, or
  // partly taken). Leaves no hazard set.
  std::size_t backlog(detail::hazard_holder& holder) const noexcept {
    segment* first = holder.protect(0, head_);
    // seq_cst: as in pop_one().
    const std::uint64_t taken = first->deq.load(std::memory_order_seq_cst);
    const std::uint64_t handed =
        std::min<std::uint64_t>(first->enq.load(std::memory_order_seq_cst) & index_mask, first->capacity);
    auto count = static_cast<std::size_t>(taken < handed ? handed - taken : 0);
    // seq_cst: a parking worker's last look must see a segment a producer
    // appended (seq_cst CAS) before it checked for sleepers (acquire part:
    // pairs with that CAS).
    const segment* next = first->next.load(std::memory_order_seq_cst);
    if (next != nullptr && !is_marker(next)) {
      // `next` is not protected (it may be left and freed already): its
      // own capacity is not read, a full segment's is assumed.
      count += segment_capacity;
    } else if (next == nullptr && count != 0 && count <= claim_by_cas_within) {
      // Nearly empty: count only published jobs, as pop_one() takes only
      // those then.
      count = published_in(first, taken, taken + count);
    }
    holder.clear(0);
    return count;
  }

  // Cells of `first` in [from, to) whose job is published (to <= capacity).
  static std::size_t published_in(const segment* first, std::uint64_t from, std::uint64_t to) noexcept {
    std::size_t count = 0;
    for (std::uint64_t i = from; i < to; ++i) {
      // seq_cst: with the producer's seq_cst publishing CAS, either this
      // load sees the job, or the producer's check for sleepers after its
      // push (the pools' wake_worker_if_needed()) sees the parking worker
      // that read this; exactly so for the look a worker takes after its
      // membarrier (the pools' sleep_until_notified(), see
      // docs/ARCHITECTURE.md, "Parking without lost wake-ups").
      if (first->cells()[i].state.load(std::memory_order_seq_cst) == cell_full) ++count;
    }
    return count;
  }

  // Moves head_ from the used-up segment `first` to `next` and retires it.
  void leave_segment(detail::hazard_holder& holder, segment* first, segment* next) noexcept {
    // head_ never passes tail_: a producer may still find `first` in tail_
    // and protect it, which is safe only while it is not retired.
    if (tail_.load(std::memory_order_seq_cst) == first) advance_tail(first, next);
    // seq_cst: before the unlink below in the single total order, so that
    // resolve_pending(), which protects `next` and then reads this (seq_cst),
    // either sees the flag or had its protection visible before `next`
    // could be unlinked and scanned.
    first->leaving.store(true, std::memory_order_seq_cst);
    // seq_cst: the unlink that scan()'s hazard loads are ordered after (see
    // hazard_pointers.hpp).
    THREAD_SYSTEM_CHAOS_POINT();
    segment* expected = first;
    if (head_.compare_exchange_strong(expected, next, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      holder.clear(0);
      holder.retire(first);
    }
  }

  void advance_tail(segment* expected, segment* desired) noexcept {
    // seq_cst: a thread that reads `desired` from tail_ sees its initialised
    // contents (release part); leave_segment()'s read of tail_ is ordered
    // with it. Failure means someone else advanced it.
    THREAD_SYSTEM_CHAOS_POINT();
    tail_.compare_exchange_strong(expected, desired, std::memory_order_seq_cst, std::memory_order_relaxed);
  }

  // Sets `flag` on the last segment and links `marker` after it, so that no
  // segment can be appended any more. True when it holds `marker` now (or
  // already did); false when the queue is closed and `marker` is the seal.
  bool mark_end(detail::hazard_holder& holder, std::uint64_t flag, segment* marker) noexcept {
    for (;;) {
      segment* last = holder.protect(0, tail_);
      // acquire: pairs with the CAS that linked a successor or a sentinel.
      segment* next = last->next.load(std::memory_order_acquire);
      if (next == marker) return true;
      if (next == closed_marker()) return false;  // sealing a closed queue
      if (next != nullptr && next != sealed_marker()) {
        advance_tail(last, next);
        continue;
      }
      // seq_cst: ordered with every fetch-and-add on this word (indices
      // taken before see no flag; after, they see it).
      last->enq.fetch_or(flag, std::memory_order_seq_cst);
      // seq_cst: the CAS pushes use to append, so appends and the sentinel
      // are totally ordered; a closing sentinel replaces a seal.
      THREAD_SYSTEM_CHAOS_POINT();
      if (last->next.compare_exchange_strong(next, marker, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        return true;
      }
      // A producer that took its index before the flag appended a segment: flag that one too.
    }
  }

  // After mark_end(): sets `flag` on every segment still in the queue and
  // abandons every cell handed out but not yet published, so that no push
  // that took an index before can publish afterwards.
  void resolve_pending(detail::hazard_holder& holder, std::uint64_t flag) noexcept {
    segment* current = holder.protect(0, head_);
    for (;;) {
      // seq_cst: ordered with the producers' fetch-and-adds (see mark_end()).
      const std::uint64_t handed = current->enq.fetch_or(flag, std::memory_order_seq_cst) & index_mask;
      const std::uint64_t cells = std::min<std::uint64_t>(handed, current->capacity);
      for (std::uint64_t index = 0; index < cells; ++index) {
        std::uint32_t expected = cell_empty;
        // seq_cst: either the producer's publishing CAS or this one wins.
        current->cells()[index].state.compare_exchange_strong(expected, cell_abandoned, std::memory_order_seq_cst,
                                                              std::memory_order_relaxed);
      }
      // acquire: pairs with the CAS that linked a successor or a sentinel.
      segment* next = current->next.load(std::memory_order_acquire);
      if (next == nullptr || is_marker(next)) return;
      // The window in which a pop can leave `current`, then `next`, and a
      // scan reclaim `next` (white-box tests stop here: see the hook).
      THREAD_SYSTEM_CHAOS_POINT();
      // relaxed: set and cleared by a single-threaded test only.
      if (auto* hook = resolve_pending_hook_.load(std::memory_order_relaxed)) hook(*this);
      holder.set(1, next);
      // seq_cst, after the hazard above (seq_cst): while no pop has begun to
      // leave `current`, head_ has not passed it, so `next` was still linked
      // when the hazard became visible and no scan reclaims it (pairs with
      // the seq_cst store in leave_segment()). Whether `current` is used up
      // does not say that: a flagged segment is left once the cells handed
      // out before the flag are taken, however few.
      if (current->leaving.load(std::memory_order_seq_cst) ||
          current->deq.load(std::memory_order_seq_cst) >= current->capacity) {
        // Left, so possibly unlinked (and `next` with it), or used up and
        // about to be left. Help the pop that did so move head_ on (the
        // CASes fail harmlessly if `current` is no longer the head: it was
        // protected all along, so it cannot be the head again), then start
        // again from the head, which only moves forward.
        leave_segment(holder, current, next);
        current = holder.protect(0, head_);
        holder.clear(1);
        continue;
      }
      holder.set(0, next);  // `next` is protected by slot 1 meanwhile
      holder.clear(1);
      current = next;
    }
  }

  // Links the seal sentinel (see the header comment). True when sealed now
  // (or already); false when closed.
  bool seal() {
    detail::hazard_holder holder(domain_);
    if (!mark_end(holder, sealed_flag, sealed_marker())) return false;
    resolve_pending(holder, sealed_flag);
    return true;
  }

  // Removes the seal. True when open now; false when closed.
  bool unseal() {
    detail::hazard_holder holder(domain_);
    for (;;) {
      segment* last = holder.protect(0, tail_);
      // acquire: pairs with the CAS that linked a successor or a sentinel.
      segment* next = last->next.load(std::memory_order_acquire);
      if (next == closed_marker()) return false;
      if (next != nullptr && next != sealed_marker()) {
        advance_tail(last, next);
        continue;
      }
      // seq_cst: totally ordered with appends and the other sentinel CASes.
      THREAD_SYSTEM_CHAOS_POINT();
      if (next == nullptr ||
          last->next.compare_exchange_strong(next, nullptr, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        // seq_cst: ordered with the fetch-and-adds; a push that saw the flag
        // before this retried (`sealed`), as before the unseal.
        last->enq.fetch_and(~sealed_flag, std::memory_order_seq_cst);
        return true;
      }
    }
  }

  // True when some operation holds a hazard record right now. seq_cst
  // loads: with the seq_cst exchange that takes a record, a caller that
  // stored something (seq_cst) before asking either sees the operation here
  // or the operation's later seq_cst loads see that store.
  [[nodiscard]] bool operation_in_progress() const noexcept { return domain_.any_record_held(); }

  // A pooled segment, else a new one of `segment_capacity` cells (or
  // `cells_if_new`, when the caller needs fewer); throws std::bad_alloc.
  segment* take_segment(detail::hazard_holder& holder, std::uint64_t cells_if_new = segment_capacity) {
    for (;;) {
      segment* top = holder.protect(1, pool_top_);
      if (top == nullptr) break;
      // acquire: pairs with the release CAS in reclaim_segment() that pushed it.
      segment* next = top->next.load(std::memory_order_acquire);
      // acquire: takes ownership of the segment (pairs with reclaim_segment()).
      THREAD_SYSTEM_CHAOS_POINT();
      if (pool_top_.compare_exchange_weak(top, next, std::memory_order_acquire, std::memory_order_relaxed)) {
        holder.clear(1);
        top->next.store(nullptr, std::memory_order_relaxed);  // ours now
        pooled_.fetch_sub(1, std::memory_order_relaxed);      // statistics only
        return top;
      }
    }
    holder.clear(1);
    auto* fresh = make_segment(cells_if_new);            // may throw std::bad_alloc
    allocated_.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return fresh;
  }

  // Called by the hazard domain for a segment no hazard protects any more:
  // every cell was taken, abandoned or never handed out. Resets it and
  // pools or frees it.
  static void reclaim_segment(void* context, void* pointer) noexcept {
    auto* self = static_cast<lockfree_queue*>(context);
    auto* reclaimed = static_cast<segment*>(pointer);
    // Only cells below the larger of the two counters were ever written: a
    // producer writes a cell whose index it took from `enq`, a consumer one
    // from `deq`, close()/seal() cells handed out (below `enq`), and the
    // rest are still empty from the segment's last reset or allocation. A
    // segment that held a small batch (push_chain()) costs a few stores to
    // reset, not one per cell. relaxed: the segment is ours; the release
    // CAS below publishes it.
    if (reclaimed->capacity != segment_capacity) {  // made for the end of a batch: not pooled
      free_segment(reclaimed);
      self->allocated_.fetch_sub(1, std::memory_order_relaxed);  // statistics only
      return;
    }
    const std::uint64_t written =
        std::min<std::uint64_t>(std::max(reclaimed->enq.load(std::memory_order_relaxed) & index_mask,
                                         reclaimed->deq.load(std::memory_order_relaxed)),
                                segment_capacity);
    for (std::uint64_t index = 0; index < written; ++index) {
      reclaimed->cells()[index].state.store(cell_empty, std::memory_order_relaxed);
    }
    reclaimed->enq.store(0, std::memory_order_relaxed);
    reclaimed->deq.store(0, std::memory_order_relaxed);
    reclaimed->leaving.store(false, std::memory_order_relaxed);
    // relaxed: a soft limit; counted before the push so the count never
    // drops below the true size.
    if (self->pooled_.fetch_add(1, std::memory_order_relaxed) >= self->max_pooled_) {
      self->pooled_.fetch_sub(1, std::memory_order_relaxed);
      free_segment(reclaimed);
      self->allocated_.fetch_sub(1, std::memory_order_relaxed);  // statistics only
      return;
    }
    segment* top = self->pool_top_.load(std::memory_order_relaxed);  // a guess for the CAS
    do {
      reclaimed->next.store(top, std::memory_order_relaxed);  // published by the release CAS below
      // release: publishes the segment (and everything done to it before the
      // scan) to the thread that takes it; pairs with take_segment().
    } while (
        !self->pool_top_.compare_exchange_weak(top, reclaimed, std::memory_order_release, std::memory_order_relaxed));
  }

  // Producers (tail_) and consumers (head_) on separate cache lines; the
  // pool is written by both, so it gets its own line.
  alignas(64) std::atomic<segment*> tail_{nullptr};
  alignas(64) std::atomic<segment*> head_{nullptr};
  alignas(64) std::atomic<segment*> pool_top_{nullptr};
  std::atomic<std::size_t> pooled_{0};
  std::atomic<std::size_t> allocated_{0};
  alignas(64) std::atomic<bool> closed_{false};
  std::size_t max_pooled_;
  // Mutable: the const observers (empty_approx()) take a hazard record too.
  mutable detail::hazard_domain domain_;
};

static_assert(job_queue_model<lockfree_queue>);

}  // namespace thread_system
