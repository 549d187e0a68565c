// The injector: the queue through which jobs submitted from outside the
// pool's workers enter it. A pool picks its kind at construction
// (pool_options::queue); the worker loop is the same for every kind. This
// header holds the interface only; the implementations over each queue
// are in src/injector.cpp, so the pool headers include no queue.
//
// Accounting contract (what idle detection and stop() rely on):
//   * accepted() counts every job a push accepted. The count becomes visible
//     no later than the job itself: a thread that has observed a popped
//     job's completion through a release/acquire chain reads an accepted()
//     that includes it.
//   * After close() and wait_for_pushes() return, accepted() is exact and
//     final: every later push fails with pool_stopped and is not counted.
//   * After close(), once is_closed() has been observed, a pop that finds
//     nothing means every accepted job has already been popped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/queues/queue_kind.hpp"

namespace thread_system {

namespace detail {

/// The tag byte of a job_function, shared by the scheduler core and its
/// injector, stated once here:
///   * bit 7 (`holds_room`) is the core's: the job holds room in a pool with
///     backpressure and gives it back when it leaves the queue;
///   * bits 0..6 are the injector's kind: 0 for an untyped job; a typed
///     injector stores rank + 1 (rank < 64).
/// The most workers a pool has. The core numbers its workers 0..max_workers-1
/// and calls the thread that runs what stop() drains worker max_workers
/// (injector::prepare_worker(), injector::note_done()).
inline constexpr std::size_t max_workers = 256;

namespace job_tag {
inline constexpr std::uint8_t holds_room = 0x80;
inline constexpr std::uint8_t kind_bits = 0x7f;
/// The kind bits of `tag` (0: untyped).
[[nodiscard]] constexpr std::uint8_t kind(std::uint8_t tag) noexcept {
  return static_cast<std::uint8_t>(tag & kind_bits);
}
/// `tag` with its kind bits set to rank + 1 and the core's bit kept.
[[nodiscard]] constexpr std::uint8_t with_rank(std::uint8_t tag, std::size_t rank) noexcept {
  return static_cast<std::uint8_t>(static_cast<std::size_t>(tag & holds_room) | (rank + 1));
}
/// The rank a typed injector stored in `tag` (its kind must not be 0).
[[nodiscard]] constexpr unsigned rank(std::uint8_t tag) noexcept { return kind(tag) - 1u; }
/// `tag` without the core's bit.
[[nodiscard]] constexpr std::uint8_t without_room(std::uint8_t tag) noexcept {
  return static_cast<std::uint8_t>(tag & ~holds_room);
}
}  // namespace job_tag

class injector {
 public:
  virtual ~injector() = default;
  [[nodiscard]] virtual result<void> push(job_function&& fn) = 0;
  [[nodiscard]] virtual result<void> push_batch(std::span<job_function> fns) = 0;
  /// push() that also tells the pool whether to wake a worker. `wake` is
  /// set false only when the push exactly found an earlier job not yet taken
  /// (the mutex queue: the count of queued jobs its push replaced, in which a
  /// job a worker has taken but not yet subtracted still counts - that worker
  /// looks at the queue again after its own subtraction; the lock-free queue: an
  /// earlier index of the job's segment still unclaimed when the job was
  /// published; the adaptive queue: either, in the queue the job went into): the push that made the queue non-empty
  /// woke a worker (or will, once it publishes), and a worker that takes jobs and leaves some behind wakes another
  /// (pool_core::find_and_run: for the kinds pending_mask() still names), so these jobs are covered. An injector
  /// with several kinds answers for the job's own kind (typed_injector: its kind's queue); the default always wakes.
  [[nodiscard]] virtual result<void> push_and_check(job_function&& fn, bool& wake) {
    wake = true;
    return push(std::move(fn));
  }
  /// Pops at most max(1, backlog / consumers) jobs, at most out.size(). The
  /// backlog is the queue's own estimate: exact for the mutex, sharded and
  /// bounded kinds; the lock-free queue (and the adaptive one while on its
  /// lock-free side) counts a whole segment for one that follows the head
  /// segment (it cannot read that segment's count without protecting it),
  /// so its share may be larger.
  [[nodiscard]] virtual std::size_t pop_share(std::span<job_function> out, std::size_t consumers) = 0;
  [[nodiscard]] virtual bool empty_approx() const noexcept = 0;
  [[nodiscard]] virtual std::size_t size_approx() const noexcept = 0;
  /// The most jobs the queue can hold (a fixed ring: pool_queue::bounded), or 0
  /// when it grows as needed.
  [[nodiscard]] virtual std::size_t capacity() const noexcept { return 0; }
  virtual void close() = 0;
  [[nodiscard]] virtual bool is_closed() const noexcept = 0;
  [[nodiscard]] virtual std::uint64_t accepted() const noexcept = 0;
  /// After close(): returns once no push that could still succeed is running.
  virtual void wait_for_pushes() const noexcept {}

  // ---- worker-aware access (typed pools) ----------------------------------
  // A worker serves the job kinds in its responsibility mask (bit r = the
  // kind of rank r; all bits = everything). Plain injectors hold one kind and
  // ignore the mask.

  /// pop_share() restricted to the kinds in `mask`.
  [[nodiscard]] virtual std::size_t pop_for(std::uint64_t mask, std::span<job_function> out, std::size_t consumers) {
    (void)mask;
    return pop_share(out, consumers);
  }
  /// True when a job of a kind in `mask` may be waiting (approximate, like empty_approx()).
  [[nodiscard]] virtual bool has_work_for(std::uint64_t mask) const noexcept {
    (void)mask;
    return !empty_approx();
  }
  /// The kinds that may have jobs waiting (bit per rank; all bits for a plain injector).
  [[nodiscard]] virtual std::uint64_t pending_mask() const noexcept { return empty_approx() ? 0 : ~std::uint64_t{0}; }
  /// Pops the job backpressure::drop_oldest discards to make room (the
  /// oldest queued job; a typed injector picks its lowest-priority kind).
  [[nodiscard]] virtual std::size_t pop_victim(std::span<job_function> out) { return pop_share(out.first(1), 1); }
  /// Completed switches between the adaptive injector's two queues (statistics; 0 for every other kind).
  [[nodiscard]] virtual std::uint64_t queue_switches() const noexcept { return 0; }
  /// Called for a job carrying `tag` that a stop discarded (typed pools count it per kind).
  virtual void note_cancelled(std::uint8_t tag) noexcept { (void)tag; }
  /// Called for a sampled job of `tag` that waited `wait_ns` before it started.
  virtual void note_wait(std::uint8_t tag, std::uint64_t wait_ns) noexcept {
    (void)tag;
    (void)wait_ns;
  }
  /// Called once for worker `worker` (0..max_workers) before its thread runs
  /// a job, under the pool's lifecycle lock: what note_done() needs for it
  /// is allocated here (may throw std::bad_alloc; the worker does not start).
  virtual void prepare_worker(std::size_t worker) { (void)worker; }
  /// Called by worker `worker` (its own thread, after prepare_worker()) for
  /// every job of `tag` (kind bits non-zero) it ran to completion or that
  /// failed (`failed`); not for cancelled jobs (note_cancelled()).
  virtual void note_done(std::size_t worker, std::uint8_t tag, bool failed) noexcept {
    (void)worker;
    (void)tag;
    (void)failed;
  }
  /// Called on the submitting thread (any thread, concurrently) for a job of
  /// `tag` (kind bits non-zero) that backpressure::caller_runs ran there
  /// instead of queueing it, with what its run returned: the injector never
  /// saw it, yet it was accepted and ran (or was cancelled by its token).
  virtual void note_ran_on_caller(std::uint8_t tag, job_outcome outcome) noexcept {
    (void)tag;
    (void)outcome;
  }
  /// Called on the submitting thread before caller_runs runs a job of `tag`
  /// (kind bits non-zero) there, so that note_ran_on_caller() can count it
  /// (a typed injector makes the kind's queue and counters on first use).
  /// False once closed; may throw std::bad_alloc (the job is then refused,
  /// unrun).
  [[nodiscard]] virtual bool prepare_caller_run(std::uint8_t tag) {
    (void)tag;
    return true;
  }
};

/// The injector of kind `kind` (defined in src/injector.cpp, so that only
/// that file includes the queue implementations). `initial_capacity` sizes
/// the mutex queue's segments (any value; clamped, see job_segments.hpp) and
/// the bounded queue's ring (fixed). Throws std::bad_alloc, and
/// error_exception{invalid_argument} for a bounded queue of capacity 0 or
/// above 2^62.
[[nodiscard]] std::unique_ptr<injector> make_injector(pool_queue kind, std::size_t initial_capacity);

}  // namespace detail
}  // namespace thread_system
