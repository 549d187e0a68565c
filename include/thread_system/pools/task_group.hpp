// task_group: spawn jobs on a pool and wait for all of them, without a
// future (and without an allocation) per job — the primitive for fork-join
// code such as recursive divide and conquer.
//
//   std::uint64_t fib(thread_pool& pool, int n) {
//     if (n < 2) return n;
//     std::uint64_t a = 0;
//     task_group g(pool);
//     g.run([&] { a = fib(pool, n - 1); });
//     const std::uint64_t b = fib(pool, n - 2);
//     g.wait();
//     return a + b;
//   }
//
// Contract:
//   * run() may be called from any thread, including from jobs of the group.
//     From one of the pool's workers the job goes onto that worker's deque
//     (idle workers steal it). If the pool refuses it (stopping, full, out
//     of memory), run() executes it on the calling thread, so a group never
//     loses a job and run() itself never fails.
//   * wait() returns when every job run() so far has finished; on a worker
//     it helps run other jobs meanwhile. Everything the jobs did is visible
//     after wait() returns. The first exception thrown by a job is rethrown
//     by wait() (later ones are dropped). A job the pool accepted and then
//     discarded unrun (stop(stop_mode::cancel_pending), or
//     backpressure::drop_oldest) counts as finished, and wait() throws
//     error_exception{cancelled} when no job threw.
//   * The destructor waits too (and swallows the exception if wait() was not
//     called). The group must outlive its jobs, which the waiting ensures.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include "thread_system/core/concepts.hpp"
#include "thread_system/detail/chaos.hpp"

#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/helping_wait.hpp"

namespace thread_system {

/// Runs jobs on a pool and waits for all of them (fork-join), with no future per job; see the header comment.
class task_group {
 public:
  /// A group whose jobs run on `pool`, which must outlive the group.
  explicit task_group(thread_pool& pool) noexcept : pool_(pool) {}
  /// Not copyable.
  task_group(const task_group&) = delete;
  /// Not copyable.
  task_group& operator=(const task_group&) = delete;
  /// Waits for every job run() so far; an exception of a job is dropped if wait() was not called.
  ~task_group() {
    try {
      wait();
    } catch (...) {  // the caller did not ask for it: nowhere to report it
    }
  }

  /// Runs `f` as a job of the group on the pool (on this worker's deque when called from one of its workers);
  /// if the pool refuses it, runs it on the calling thread instead. Never fails.
  template <runnable F>
  void run(F&& f) {
    // relaxed: the enqueue below publishes the job, and its finish() RMW is
    // ordered after this increment through it.
    pending_.word().fetch_add(1, std::memory_order_relaxed);
    std::optional<job_function> wrapped;
    try {
      wrapped.emplace(group_job<std::decay_t<F>>{this, std::decay_t<F>(std::forward<F>(f))});
    } catch (const std::bad_alloc&) {
      // No memory to wrap the job (a capture too large to store inline):
      // run it here, now, which needs none. f was not moved from: the
      // allocation comes before the copy.
      run_here(f);
      return;
    }
    // A refused job_function is left untouched (see thread_pool::enqueue),
    // so the group runs it here instead of losing it.
    if (auto r = pool_.enqueue(std::move(*wrapped)); !r) (*wrapped)();
  }

  /// Waits for every job run() so far; rethrows the first exception.
  void wait() {
    (void)pending_.wait(0);                         // the one helping wait (sync/helping_wait.hpp)
    pending_.clear_sleeper();                       // this group has one waiter: its owner
    if (failed_.load(std::memory_order_acquire)) {  // pairs with record()
      std::exception_ptr e = std::move(error_);
      failed_.store(false, std::memory_order_relaxed);     // only the waiter touches it now
      cancelled_.store(false, std::memory_order_relaxed);  // likewise
      std::rethrow_exception(e);
    }
    // relaxed: ordered by the acquire in wait() on the count (finish()'s release).
    if (cancelled_.load(std::memory_order_relaxed)) {
      cancelled_.store(false, std::memory_order_relaxed);  // only the waiter touches it now
      throw error_exception(error{error_code::cancelled, "task_group: a job was discarded by the pool before it ran"});
    }
  }

 private:
  // Runs `f` on this thread as a job of the group (its exception recorded
  // like any job's) and counts it finished.
  template <typename F>
  void run_here(F& f) noexcept {
    try {
      f();
    } catch (...) {
      record(std::current_exception());
    }
    finish();
  }

  // The pool job: runs the body, destroys it, and only then counts it as
  // finished, so the body's captures never outlive wait().
  template <typename D>
  struct group_job {
    task_group* group;
    std::optional<D> body;
    void operator()() {
      try {
        (*body)();
      } catch (...) {
        group->record(std::current_exception());
      }
      body.reset();
      group->finish();  // last access to the group
    }
    // The pool discarded the job (stop(stop_mode::cancel_pending), or
    // backpressure::drop_oldest): it never runs, but it still counts as
    // finished, and wait() reports it.
    void cancel() noexcept {
      // relaxed: published to the waiter by finish()'s release RMW.
      group->cancelled_.store(true, std::memory_order_relaxed);
      body.reset();
      group->finish();  // last access to the group
    }
  };

  void finish() noexcept {
    // The job's writes happen-before the waiter's acquire that sees the
    // count reach zero; this is the last access to *this (see
    // pending_count::finish()).
    THREAD_SYSTEM_CHAOS_POINT();
    pending_.finish();
  }

  void record(std::exception_ptr e) noexcept {
    bool expected = false;
    // acq_rel: exactly one job stores error_; the waiter reads it after the
    // acquire in wait() (through finish()'s release on pending_).
    if (failed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) error_ = std::move(e);
  }

  thread_pool& pool_;
  detail::pending_count pending_;  // jobs run() and not finished, and the owner's sleeper bit
  std::atomic<bool> failed_{false};
  std::atomic<bool> cancelled_{false};  // a job of the group was discarded unrun (see group_job::cancel())
  std::exception_ptr error_;
};

}  // namespace thread_system
