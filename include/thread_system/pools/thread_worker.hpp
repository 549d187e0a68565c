// thread_worker: one worker thread of a pool, as its user sees it.
//
// Seed-style code creates workers and hands them to a pool:
//
//   std::vector<std::unique_ptr<thread_worker>> workers;
//   for (int i = 0; i < 4; ++i) workers.push_back(std::make_unique<thread_worker>());
//   pool->enqueue_batch(std::move(workers));
//   pool->start();
//
// A thread_worker is a handle: its name, its injector-batch setting and its
// statistics. The scheduler's own per-worker state (deque, LIFO slot, node
// cache, histograms) lives behind it, private to the library, so the worker
// loop never goes through the handle.
//
// The pool owns its workers; pointers from `thread_pool::get_workers()` stay
// valid until the pool is destroyed. get_statistics() and latency() may be
// called from any thread at any time; each counter is written only by the
// worker itself. set_injector_batch() may be called from any thread at any
// time. Constructing a worker allocates (std::bad_alloc on failure, before
// any pool sees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "thread_system/core/error.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"

namespace thread_system {

namespace detail {
class pool_core;
class pool_worker;
}  // namespace detail

/// One worker thread of a pool: a handle to its name, batch setting and statistics. Seed-style code creates
/// workers and hands them to a pool, which owns them.
class thread_worker {
 public:
  /// `name` becomes the OS thread name (Linux keeps 15 bytes: a longer name
  /// keeps its start and a trailing "-<number>", see
  /// detail::shortened_thread_name()); empty means "<pool name>-<index>".
  explicit thread_worker(std::string name = {});
  /// Not copyable.
  thread_worker(const thread_worker&) = delete;
  /// Not copyable.
  thread_worker& operator=(const thread_worker&) = delete;
  virtual ~thread_worker();  // the owning pool joins the thread first

  /// The name given at construction (empty: the pool names the thread "<pool name>-<index>").
  [[nodiscard]] const std::string& get_name() const noexcept;

  /// A snapshot of this worker's counters; callable from any thread at any time.
  [[nodiscard]] worker_statistics get_statistics() const noexcept;

  /// The most jobs a worker takes from its pool's queue per visit.
  static constexpr std::size_t max_injector_batch = 64;
  /// The batch a worker takes unless told otherwise.
  static constexpr std::size_t default_injector_batch = 16;

  /// At most `n` jobs per visit to the pool's queue (the injector): the
  /// first runs at once, the rest go onto this worker's deque, where idle
  /// workers of a thread_pool can steal them (in a typed pool workers do not
  /// steal: only this worker runs them, and it takes a batch only of the
  /// highest type it serves). A larger batch spreads one visit's cost (the
  /// queue's lock or CASes, one wake-up check) over more jobs and raises
  /// throughput of short jobs; a smaller one keeps jobs in the shared queue
  /// longer, where any worker can take them first, which shortens the wait
  /// of a job queued behind a long one. A visit never takes more than a
  /// fair share of the queue (queued jobs / workers, at least one), and a
  /// helping wait always takes one. Any thread, any time; the worker uses
  /// the new size from its next visit. `invalid_argument` for 0 or more
  /// than max_injector_batch.
  result<void> set_injector_batch(std::size_t n);
  /// The batch size set_injector_batch() set (default_injector_batch at first).
  [[nodiscard]] std::size_t injector_batch() const noexcept;

  /// Seed API: enabled, up to `batch_size` jobs per visit (clamped to
  /// 1..max_injector_batch: the seed's call is a hint and returns nothing);
  /// disabled, one job per visit. set_injector_batch() is the checked form.
  void set_batch_processing(bool enabled, std::size_t batch_size = 32) noexcept;
  /// Seed API: true when the worker takes more than one job per visit.
  [[nodiscard]] bool is_batch_processing_enabled() const noexcept { return injector_batch() > 1; }

  /// Wait and run times of the jobs this worker ran that were sampled.
  [[nodiscard]] worker_latency latency() const noexcept;

 protected:
  /// Job kinds this worker serves (bit r = rank r; typed pools). Only
  /// before the worker is started; constant afterwards.
  void set_responsibility_mask(std::uint64_t mask) noexcept;
  /// True once a pool owns this worker (added with enqueue/enqueue_batch or
  /// made by resize()); never false again. Any thread.
  [[nodiscard]] bool belongs_to_pool() const noexcept;

 private:
  friend class detail::pool_core;

  std::unique_ptr<detail::pool_worker> state_;  // never null
};

}  // namespace thread_system
