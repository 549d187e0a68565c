// pool_queue: the one enum that names a job queue implementation — which
// injector a pool uses (pool_options::queue, typed_pool_options::queue) and
// how an adaptive_job_queue chooses its queue.
//
//   pool_options opt;
//   opt.queue = pool_queue::lockfree;                  // modern spelling
//   adaptive_job_queue q{queue_strategy::FORCE_MUTEX};  // the seed's spelling
//
// The seed's `queue_strategy` is this enum under another name, and its
// enumerators are aliases: ADAPTIVE == adaptive, FORCE_MUTEX == mutex,
// FORCE_LOCKFREE == lockfree. An adaptive_job_queue takes adaptive, mutex or
// lockfree; any other kind makes its constructor throw
// error_exception{invalid_argument}.
//
// As a pool's injector, `bounded` is the one kind with a fixed capacity
// (pool_options::initial_queue_capacity, rounded up to a power of two): a
// submission from outside the pool's workers into a full queue is refused
// with `queue_full` at once, as seed note 004 has it (also, briefly, while
// a worker is taking the oldest job: see bounded_queue.hpp). Jobs a worker
// submits go to its own deque and are not bounded - except while that
// worker is out of memory, when they go through the queue. The pool's own
// pushes from outside its workers are submissions like any other: a timer's
// run refused by a full queue is counted as refused (timer_statistics), and
// a coroutine's wake-up after sleep_for() abandons the task, as with
// backpressure's `reject`. For a bound with a waiting policy (block, run on
// the caller, drop the oldest) use pool_options::backpressure with another
// kind; the two together make the constructor throw invalid_argument. A
// typed pool takes every kind but `bounded`.
#pragma once

namespace thread_system {

/// Which job queue: the injector of a pool, or the mode of an adaptive_job_queue.
enum class pool_queue {
  mutex,     ///< Spin-locked segments (the pools' default): a pool's injector is a two_lock_job_queue (a lock for each
             ///< end); a stand-alone adaptive_job_queue's mutex side is a job_queue (one lock).
  lockfree,  ///< lockfree_queue: fetch-and-add array segments with hazard pointers.
  adaptive,  ///< Switches between the two above by measured contention: a pool's injector is a
             ///< two_lock_adaptive_job_queue (its mutex side the pool's two-lock queue), a stand-alone queue an
             ///< adaptive_job_queue.
  sharded,   ///< sharded_queue: per-producer shards.
  bounded,   ///< bounded_queue: Vyukov's fixed ring; a push into a full queue is refused with `queue_full`.

  // The seed's names (adaptive_job_queue's queue_strategy):
  ADAPTIVE = adaptive,        ///< Seed name of adaptive.
  FORCE_MUTEX = mutex,        ///< Seed name of mutex.
  FORCE_LOCKFREE = lockfree,  ///< Seed name of lockfree.
};

/// The seed's name for pool_queue (as `queue_strategy::ADAPTIVE` etc.).
using queue_strategy = pool_queue;

/// True for the five kinds above (a value cast from another number is not one).
[[nodiscard]] constexpr bool is_known(pool_queue q) noexcept {
  switch (q) {
    case pool_queue::mutex:
    case pool_queue::lockfree:
    case pool_queue::adaptive:
    case pool_queue::sharded:
    case pool_queue::bounded:
      return true;
  }
  return false;
}

/// "mutex", "lockfree", "adaptive", "sharded", "bounded" (the seed aliases print as the kind they alias).
[[nodiscard]] constexpr const char* to_string(pool_queue q) noexcept {
  switch (q) {
    case pool_queue::mutex:
      return "mutex";
    case pool_queue::lockfree:
      return "lockfree";
    case pool_queue::adaptive:
      return "adaptive";
    case pool_queue::sharded:
      return "sharded";
    case pool_queue::bounded:
      return "bounded";
  }
  return "unknown";
}

}  // namespace thread_system
