// The seed guides' lock-free pool names, over the one scheduler core.
//
//   auto pool = std::make_shared<lockfree_thread_pool>("MyLockfreePool");
//   std::vector<std::unique_ptr<lockfree_thread_worker>> workers;
//   for (int i = 0; i < 8; ++i) {
//     auto w = std::make_unique<lockfree_thread_worker>();
//     w->set_batch_processing(true, 32);
//     workers.push_back(std::move(w));
//   }
//   pool->enqueue_batch(std::move(workers));
//   pool->start();
//
// Contract:
//   * lockfree_thread_pool is a thread_pool whose injector is the lock-free
//     queue (pool_queue::lockfree) on every construction path. Its
//     constructors: (name = "lockfree_thread_pool") and (name, options),
//     seed style (no workers, not started); (worker_count, options),
//     concise (workers started). `options.queue` is replaced by lockfree;
//     every other option is kept. Everything else is thread_pool's
//     contract.
//   * typed_lockfree_thread_pool_t<T> is likewise a typed_thread_pool_t<T>
//     whose per-type queues are lock-free (`typed_pool_options::queue` set
//     to lockfree; set_queue() can still change it before the first job):
//     (name, options = {}) seed style, (universal_workers, options) concise.
//   * Neither base class has a virtual destructor: hold these pools by
//     their own type, by std::shared_ptr (which deletes the type it was
//     made with), or by reference; do not delete one through a pointer to
//     its base.
//   * The workers need nothing special: lockfree_thread_worker is
//     thread_worker, typed_lockfree_thread_worker_t<T> is
//     typed_thread_worker_t<T>.
//   * typed_thread_pool_module::all_types() lists job_types in priority
//     order; lockfree_mpmc_queue is lockfree_queue.
//
// The seed jobs (compat/job.hpp, compat/typed_job.hpp) come with this header.
// docs/SEED_COMPATIBILITY.md maps every seed name to ours, and lists what
// the guides show that no compiler accepts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "thread_system/compat/job.hpp"
#include "thread_system/compat/typed_job.hpp"
#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/queues/lockfree_queue.hpp"

namespace thread_system {

namespace detail {
// The options with the lock-free injector. The copy (a name, an error
// handler) may need memory: out of memory, error_exception{resource_exhausted}
// as the pools' constructors throw, never std::bad_alloc.
inline pool_options with_lockfree_queue(const pool_options& o) {
  return throw_if_out_of_memory([&] {
    pool_options copy = o;
    copy.queue = pool_queue::lockfree;
    return copy;
  });
}
inline pool_options with_lockfree_queue(pool_options&& o) {
  o.queue = pool_queue::lockfree;
  return std::move(o);
}
template <typename T>
typed_pool_options<T> with_lockfree_queue(typed_pool_options<T>&& o) {
  o.queue = pool_queue::lockfree;
  return std::move(o);
}
}  // namespace detail

/// A thread_pool on the lock-free injector (see the header comment).
class lockfree_thread_pool : public thread_pool {
 public:
  /// Seed style: named, no workers, not started.
  explicit lockfree_thread_pool(std::string name = "lockfree_thread_pool")
      : thread_pool(std::move(name), detail::with_lockfree_queue({})) {}
  /// Seed style with options (their `queue` replaced by lockfree).
  lockfree_thread_pool(std::string name, const pool_options& options)
      : thread_pool(std::move(name), detail::with_lockfree_queue(options)) {}
  /// Concise: `worker_count` workers, started (as thread_pool's; 0 is
  /// refused with error_exception{invalid_argument} as there).
  explicit lockfree_thread_pool(std::size_t worker_count, pool_options options = {})
      : thread_pool(worker_count, detail::with_lockfree_queue(std::move(options))) {}
};

/// The seed's worker of a lock-free pool: a thread_worker.
using lockfree_thread_worker = thread_worker;

/// A typed_thread_pool_t<T> whose per-type queues are lock-free (see the header comment).
template <job_type T>
class typed_lockfree_thread_pool_t : public typed_thread_pool_t<T> {
 public:
  /// Seed style: named, no workers, not started.
  explicit typed_lockfree_thread_pool_t(std::string name = "typed_lockfree_thread_pool",
                                        typed_pool_options<T> options = {})
      : typed_thread_pool_t<T>(std::move(name), detail::with_lockfree_queue(std::move(options))) {}
  /// Concise: `universal_workers` universal workers, started (as
  /// typed_thread_pool_t's).
  explicit typed_lockfree_thread_pool_t(std::size_t universal_workers, typed_pool_options<T> options = {})
      : typed_thread_pool_t<T>(universal_workers, detail::with_lockfree_queue(std::move(options))) {}
};

/// The seed's worker of a typed lock-free pool: a typed_thread_worker_t<T>.
template <job_type T>
using typed_lockfree_thread_worker_t = typed_thread_worker_t<T>;

/// The seed's names for the default job types.
using typed_lockfree_thread_pool = typed_lockfree_thread_pool_t<job_types>;
using typed_lockfree_thread_worker = typed_lockfree_thread_worker_t<job_types>;

/// The seed's name of the lock-free MPMC job queue.
using lockfree_mpmc_queue = lockfree_queue;

/// The seed's typed-pool namespace, for the helpers its examples qualify with it.
namespace typed_thread_pool_module {
/// Every job_types value, highest priority first (a universal worker's responsibilities).
inline std::vector<job_types> all_types() { return {job_types::RealTime, job_types::Batch, job_types::Background}; }
}  // namespace typed_thread_pool_module

}  // namespace thread_system
