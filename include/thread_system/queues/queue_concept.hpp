// job_queue_model: the interface every job queue of Thread System provides,
// so that pools and tests can be written once for all of them.
//
// Contract a model must honour (the concept checks the signatures; the
// typed tests in tests/queues/queue_concept_test.cpp check the behaviour):
//   * try_push(job_function&&) -> result<void>
//       Appends the job. An empty job fails with `invalid_argument`; a closed
//       queue fails with `pool_stopped`; a bounded queue at capacity fails
//       with `queue_full`. On failure the caller's job still holds its
//       callable (it is not consumed).
//   * try_pop(job_function&) -> bool
//       Moves the oldest available job into the argument; false when empty.
//       A job the argument already held is destroyed, never while the queue
//       holds a lock (its destructor may use the queue).
//   * push_batch(std::span<job_function>) -> result<void>
//       All or none: either every job is accepted (and moved from), or none
//       is and the call fails like try_push would.
//   * pop_batch(std::span<job_function>) -> std::size_t
//       Moves up to `out.size()` jobs into `out`, oldest first; returns how many.
//       Jobs `out` already held may be destroyed, never while the queue
//       holds a lock (the mutex queues destroy its leading non-empty
//       elements before taking their lock, and fill no element past them
//       that still holds a job).
//     A job's own callable, though, is moved (relocated: its move
//     constructor, then its destructor on the moved-from object) into and
//     out of a mutex queue's storage while that queue's lock is held, when
//     it is stored inline and is not trivially copyable: that move
//     constructor and destructor must not call into the same queue
//     (job_queue, two_lock_job_queue, sharded_queue's shards, the adaptive
//     queues' mutex side; they would wait for the lock their own thread
//     holds). A job's body, its cancel hook and the destructor of a job the
//     queue hands back or discards run outside every lock.
//   * size_approx() -> std::size_t
//       Approximate number of queued jobs: a snapshot that may be stale by the
//       time it returns, and may lag in-flight pushes and pops.
//   * close()
//       Idempotent. Once close() has returned, every push fails with
//       `pool_stopped`; jobs already accepted stay poppable until drained.
//   * is_closed() -> bool
//       True once close() has taken effect.
//   * Any number of threads may call any member concurrently; jobs pushed by
//     one thread are popped in the order that thread pushed them; a
//     successful push happens-before the pop that returns the job.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"

namespace thread_system {

template <typename Q>
concept job_queue_model =
    requires(Q& queue, const Q& const_queue, job_function&& job, job_function& out, std::span<job_function> jobs) {
      { queue.try_push(std::move(job)) } -> std::same_as<result<void>>;
      { queue.try_pop(out) } -> std::same_as<bool>;
      { queue.push_batch(jobs) } -> std::same_as<result<void>>;
      { queue.pop_batch(jobs) } -> std::same_as<std::size_t>;
      { const_queue.size_approx() } -> std::convertible_to<std::size_t>;
      queue.close();
      { const_queue.is_closed() } -> std::same_as<bool>;
    };

}  // namespace thread_system
