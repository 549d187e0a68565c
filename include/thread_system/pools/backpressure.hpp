// backpressure: a bound on the jobs waiting in a pool, and what a submission
// does when the bound is reached.
//
//   thread_system::pool_options o;
//   o.backpressure = thread_system::backpressure::block_for(1000, 50ms);
//   thread_system::thread_pool pool{4, o};
//   auto r = pool.enqueue(job);   // waits up to 50 ms for room, then `timeout`
//
// What is bounded: jobs submitted from outside the pool's workers that have
// been accepted and have not started yet ("queued"). The bound is exact: at
// no moment are more than `capacity` such jobs queued (a job a worker has
// taken but holds for a paused pool has not started: it keeps its room).
// Jobs that a running job submits from one of the pool's own workers, one
// at a time or as a batch, are not bounded (blocking a worker on its own
// pool could deadlock it; refusing it would fail work the pool itself
// runs): in a thread_pool they go to that worker's deque, in a typed pool
// to their type's queue.
//
// Policies when the pool is full:
//   * block          wait until a job starts (room frees) or the pool stops
//                    (`pool_stopped`).
//   * block_for(t)   as block, but give up after t with `timeout`.
//   * reject         fail at once with `queue_full`.
//   * caller_runs    run the job on the submitting thread, now, before the
//                    call returns (counted in pool_statistics::caller_ran;
//                    a failure goes to the error handler / the future).
//   * drop_oldest    cancel the oldest queued job - its future completes
//                    with `cancelled`, and it is counted in
//                    pool_statistics::dropped - and queue the new one. In
//                    a typed pool the victim is the oldest job of the
//                    lowest-priority type that has queued jobs. When the
//                    queue holds none, the victim is a job a worker has
//                    taken from it but not started (one of a batch waiting
//                    on that worker's deque, e.g. in a paused pool; in a
//                    typed pool from the lowest-priority kind the workers'
//                    deques hold), never one a thread_pool's job submitted
//                    from its worker. Only
//                    when every unit of room is held by a job a worker has
//                    in hand (at most one per worker: about to start, or
//                    held by a paused pool) does the submission wait, as
//                    block does, for one of them to start or for stop().
//                    One job is dropped for each one queued: when the
//                    oldest holds no room (a job a worker submitted, which
//                    a typed pool queues with the others), the new job
//                    takes its place without room either. The victim's
//                    room is free before its own code (cancel hook,
//                    destructor, a coroutine awaiting it) runs on the
//                    submitting thread, so that code may submit to the pool;
//                    wait_idle() and stop() there throw invalid_argument
//                    (the victim is not finished until that code returns).
// Fork-join pieces from outside the pool's workers (task_group::run(), the
// halves of parallel_for and parallel_reduce) are bounded like any job but
// never wait for room, evict a job or run through caller_runs, whatever the
// policy: a full pool refuses such a piece at once, and the caller runs it
// itself (task_group.hpp, parallel_for.hpp), since waiting for room in a
// pool it could do without would only stall it.
// A batch larger than the capacity is refused with `invalid_argument` (it
// could never fit). Producers blocked by block/block_for wake as soon as a
// job starts (a batch's producer once there is room for the whole batch; a
// single job's producer is not kept waiting behind it), and with
// `pool_stopped` when stop() is called (from then on a full pool refuses
// instead of blocking).
#pragma once

#include <cstddef>

#include "thread_system/detail/chrono.hpp"

namespace thread_system {

/// A bound on the jobs queued in a pool and what a submission does when it is reached (see the header comment).
struct backpressure {
  /// What a submission to a full pool does: wait for room, wait up to `timeout` (then fail with `timeout`), fail
  /// at once with `queue_full`, run the job on the submitting thread, or cancel the oldest queued job.
  enum class policy { block, block_for, reject, caller_runs, drop_oldest };

  /// 0: unbounded (no backpressure; the default).
  std::size_t capacity = 0;
  /// What a submission does when `capacity` jobs are queued. Default: block.
  policy on_full = policy::block;
  /// For block_for.
  std::chrono::nanoseconds timeout{0};

  /// No bound (the default).
  [[nodiscard]] static backpressure unbounded() noexcept { return {}; }
  /// At most `capacity` queued jobs; a submission to a full pool waits for room (or `pool_stopped`).
  [[nodiscard]] static backpressure block(std::size_t capacity) noexcept { return {capacity, policy::block, {}}; }
  /// At most `capacity` queued jobs; a submission to a full pool waits up to `timeout` for room, then fails with
  /// `timeout`.
  [[nodiscard]] static backpressure block_for(std::size_t capacity, std::chrono::nanoseconds timeout) noexcept {
    return {capacity, policy::block_for, timeout};
  }
  /// At most `capacity` queued jobs; a submission to a full pool fails at once with `queue_full`.
  [[nodiscard]] static backpressure reject(std::size_t capacity) noexcept { return {capacity, policy::reject, {}}; }
  /// At most `capacity` queued jobs; a submission to a full pool runs the job on the submitting thread.
  [[nodiscard]] static backpressure caller_runs(std::size_t capacity) noexcept {
    return {capacity, policy::caller_runs, {}};
  }
  /// At most `capacity` queued jobs; a submission to a full pool cancels the oldest queued job and queues the new one.
  [[nodiscard]] static backpressure drop_oldest(std::size_t capacity) noexcept {
    return {capacity, policy::drop_oldest, {}};
  }
};

/// The policy's name ("block", "block_for", ...).
[[nodiscard]] constexpr const char* to_string(backpressure::policy p) noexcept {
  switch (p) {
    case backpressure::policy::block:
      return "block";
    case backpressure::policy::block_for:
      return "block_for";
    case backpressure::policy::reject:
      return "reject";
    case backpressure::policy::caller_runs:
      return "caller_runs";
    case backpressure::policy::drop_oldest:
      return "drop_oldest";
  }
  return "unknown";
}

}  // namespace thread_system
