// wait_group: wait for a dynamic number of pieces of work (Go's
// sync.WaitGroup): add(n) before starting work, done() when a piece ends,
// wait() until the count is zero.
//
//   wait_group wg;
//   for (auto& item : items) {
//     (void)wg.add(1);
//     if (!pool.enqueue([&wg, &item] { process(item); (void)wg.done(); })) {
//       (void)wg.done();  // refused: that piece will not come
//     }
//   }
//   wg.wait();  // on a pool worker this runs other jobs meanwhile
//
// Contract:
//   * add(), done(), count() may be called from any thread. wait(),
//     wait_for() and wait_until() may be called by any number of threads.
//   * Everything a thread did before its done() is visible to a thread after
//     its wait() returns (done() is a release, wait() an acquire on the count).
//   * An add() that raises the count from zero must happen-before the wait()
//     meant to cover it (call add() before handing out the work, not inside
//     it); otherwise wait() may return before that work begins.
//   * done() more often than add(): the count never goes negative; done()
//     returns invalid_argument and changes nothing. add() beyond 2^31 - 1
//     pending pieces returns invalid_argument; the constructor throws
//     error_exception{invalid_argument} for such an initial count.
//   * The group counts done() calls, not jobs: a job that never runs never
//     calls its done(). A pool refuses a job visibly (check enqueue()'s
//     result, as above), but a job it accepted and then discards unrun
//     (stop(stop_mode::cancel_pending), backpressure::drop_oldest) leaves
//     the count up and wait() waiting. Where jobs may be discarded, call
//     done() from the job's destructor (a guard among its captures, whose
//     destructor a discard runs too), or use task_group, which counts a
//     discarded job as finished and reports it (cancelled).
//   * On one of a thread_pool's workers, wait() helps: it runs other jobs of
//     that pool until the count is zero, so a job may enqueue children and
//     wait for them even in a pool with one worker (past half the worker's
//     stack only that worker's own jobs; see sync/helping_wait.hpp for that
//     and for waits on a later step of another job, which helping can
//     deadlock). Elsewhere it sleeps on
//     a futex (no spinning). A helping wait_for()/wait_until() checks its
//     deadline between the jobs it runs, as future's does
//     (scheduler/future.hpp): it may return late by the one job it was
//     running, or by a pause() of the pool while it held a job not started.
//     The jobs it runs run nested inside the waiting code, on its thread,
//     with the locks it holds held: see helping_wait.hpp, *Locks*.
//   * The group may be reused once the count is zero and every wait() of
//     the round has returned (Go's sync.WaitGroup rule): a waiter that was
//     asleep when the count reached zero checks it again when it wakes, and
//     an add() of the next round that came first keeps it waiting for that
//     round too. The group may be destroyed as soon as wait() returns in
//     every waiter, even if the last done() has not returned yet: done()'s
//     last access to the object is its atomic decrement (the futex wake
//     only names the address).
//
// Standard primitives that already serve, re-exported here so that
// `thread_system::latch` etc. name them: std::latch (a one-shot count known
// up front), std::barrier (phases of a fixed set of threads),
// std::counting_semaphore / std::binary_semaphore (bounded resources).
// Their waits block the calling thread: on a pool worker prefer wait_group
// or task_group, whose waits help.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <latch>
#include <limits>
#include <semaphore>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/sync/helping_wait.hpp"

namespace thread_system {

using std::barrier;
using std::binary_semaphore;
using std::counting_semaphore;
using std::latch;

/// Waits for a dynamic number of pieces of work, like Go's sync.WaitGroup; a wait on a pool worker helps run other
/// jobs (see the header comment).
class wait_group {
 public:
  /// Largest count the group can hold.
  static constexpr std::uint32_t max_count = 0x7fff'ffffU;

  /// A group with a count of zero.
  wait_group() = default;
  /// Starts with `initial` pending pieces. Throws error_exception{invalid_argument}
  /// beyond max_count (a negative int converted, say: a count that never
  /// reaches zero, or one that wraps).
  explicit wait_group(std::uint32_t initial) : pending_(checked_initial(initial)) {}
  /// Not copyable.
  wait_group(const wait_group&) = delete;
  /// Not copyable.
  wait_group& operator=(const wait_group&) = delete;

  /// Adds `n` pending pieces. invalid_argument when the count would exceed
  /// max_count (nothing is added then).
  result<void> add(std::uint32_t n = 1) noexcept {
    // relaxed: add() publishes nothing; the work it announces is handed over
    // (and ordered) by whatever starts it.
    std::uint32_t v = pending_.word().load(std::memory_order_relaxed);
    for (;;) {
      if (n > max_count - (v & count_mask)) {
        // nothrow: add() is noexcept, and the refusal must survive a failed allocation.
        return make_error_nothrow(error_code::invalid_argument,
                                  [] { return "wait_group::add: count would exceed max_count"; });
      }
      if (pending_.word().compare_exchange_weak(v, v + n, std::memory_order_relaxed, std::memory_order_relaxed))
        return {};
    }
  }

  /// Marks one piece finished. invalid_argument (and no change) when the
  /// count is already zero.
  result<void> done() noexcept {
    std::uint32_t v = pending_.word().load(std::memory_order_relaxed);
    for (;;) {
      const std::uint32_t c = v & count_mask;
      if (c == 0) {
        // nothrow: as in add().
        return make_error_nothrow(error_code::invalid_argument,
                                  [] { return "wait_group::done: called more often than add()"; });
      }
      // Reaching zero also clears the sleeper bit: the sleepers are woken below.
      const std::uint32_t next = c == 1 ? 0 : v - 1;
      // release: this thread's work happens-before a waiter's acquire load
      // that sees the lower count (acq_rel so that chains of done() carry
      // every earlier piece's writes to the waiter through the RMW order).
      if (pending_.word().compare_exchange_weak(v, next, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        if (c == 1 && (v & sleeper_bit) != 0) detail::futex_wake(pending_.word(), detail::futex_wake_all);
        return {};
      }
    }
  }

  /// Pending pieces now (a snapshot).
  [[nodiscard]] std::uint32_t count() const noexcept {
    return pending_.count();  // acquire: pairs with done()
  }

  /// Blocks (or helps, on a pool worker) until the count is zero.
  void wait() noexcept { (void)wait_impl(0); }

  /// Like wait(), for at most `timeout`. Returns true when the count reached
  /// zero, false on timeout.
  /// Zero, negative and NaN timeouts only check the count; one too long to
  /// represent (nanoseconds::max(), +infinity) waits without a deadline.
  template <typename Rep, typename Period>
  [[nodiscard]] bool wait_for(std::chrono::duration<Rep, Period> timeout) noexcept {
    const std::int64_t now = detail::steady_now_ns_signed();
    const std::int64_t deadline = detail::deadline_ns_after(timeout, now);
    if (deadline == now) return count() == 0;
    return wait_impl(deadline);  // 0: none
  }

  /// Like wait(), until `deadline` (by `Clock`). Returns true when the count reached zero, false when the deadline
  /// passed first; a deadline already past only checks the count, one more than ~100 years away waits without a
  /// deadline (any duration type: time_point<steady_clock, hours>::max() does not overflow).
  template <typename Clock, typename Duration>
  [[nodiscard]] bool wait_until(std::chrono::time_point<Clock, Duration> deadline) noexcept {
    const std::int64_t remaining = detail::ns_until(deadline, Clock::now());
    if (remaining <= 0) return count() == 0;
    if (remaining == std::numeric_limits<std::int64_t>::max()) return wait_impl(0);
    const std::int64_t now = detail::steady_now_ns_signed();
    // Saturate: a far deadline must not overflow into the past.
    const std::int64_t limit = std::numeric_limits<std::int64_t>::max() - now;
    return wait_impl(now + (remaining < limit ? remaining : limit));
  }

 private:
  static constexpr std::uint32_t sleeper_bit = detail::pending_count::sleeper_bit;
  static constexpr std::uint32_t count_mask = detail::pending_count::count_mask;
  static_assert(count_mask == max_count);

  static std::uint32_t checked_initial(std::uint32_t initial) {
    if (initial > max_count) {
      throw error_exception(error{error_code::invalid_argument, "wait_group: initial count beyond max_count"});
    }
    return initial;
  }

  // deadline_ns: steady clock in nanoseconds, 0 = none. The one helping
  // wait (sync/helping_wait.hpp) on the shared count-and-sleeper word.
  bool wait_impl(std::int64_t deadline_ns) noexcept {
    // noexcept: a helped job's exception is caught by the pool that runs it.
    return pending_.wait(deadline_ns);
  }

  detail::pending_count pending_;  // low 31 bits: count; top bit: a thread sleeps on it
};

}  // namespace thread_system
