// future<T>: the result of thread_pool::submit().
//
// It has std::future's interface (get, wait, wait_for, wait_until, valid;
// get() rethrows the job's exception) with one difference that matters in a
// thread pool: a wait called on one of a pool's worker threads *helps* — it
// runs other jobs of that pool until the awaited result is ready, instead of
// blocking the worker. So a job may submit a child and wait for it even in a
// pool with a single worker.
//
// Helping has two costs a caller should know:
//   * wait_for / wait_until on a worker check the deadline between helped
//     jobs, not during one: they may return later than the deadline by the
//     run time of the one job they were helping with when it passed - and,
//     if pause() lands after they took that job but before it started, by
//     the pause too: a paused pool starts no job (not even a helper's), so
//     the helper holds the job until resume() or stop().
//   * A helping wait runs other jobs on this thread's stack, one at a time
//     (it takes single jobs, never batches, so it allocates nothing and
//     cannot fail for lack of memory, but for a worker's first helping
//     wait's lookup of its stack's bounds); a deep chain of nested helping
//     waits uses stack like nested calls do, and past half the stack only
//     the worker's own jobs are run (sync/helping_wait.hpp, which also says
//     which waits between jobs helping can deadlock). Those jobs run with the locks the
//     waiting code holds held: hold none across get()/wait() that another
//     job of the pool may take (sync/helping_wait.hpp, *Locks*).
//
// A job discarded by stop(stop_mode::cancel_pending) completes its future
// with an `error_exception` whose code is `cancelled`; so does a job
// destroyed without running (as a destroyed std::promise breaks its
// future), so no future waits for a job that is gone.
//
// Coroutines (with coro/task.hpp, which defines the operator):
// `T v = co_await std::move(f);` (or `co_await pool.submit(...)`) suspends until the result is ready without blocking a
// thread, then resumes the coroutine on the thread that completed the future (the worker that ran the job; for a
// discarded job, the thread that discarded it) and returns the value or rethrows as get() does. A ready future does not
// suspend.
//
// A job returning an lvalue reference gives a future<T&> (as std::async
// gives std::future<T&>): get() returns the reference the job returned, so
// what it refers to must outlive the job's callable, which is destroyed
// before the future is ready. A job returning an rvalue reference is not
// submittable (core/concepts.hpp): return by value.
//
// Threading: one future is used by one thread at a time (like std::future);
// the producing job runs on another. Everything the job did happens-before
// the return of a wait that observes the result ready.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/sync/helping_wait.hpp"

namespace thread_system {

namespace detail {

// Completion flag with a futex-friendly word: 0 = pending, 1 = ready,
// 2 = pending and a thread sleeps on it.
class completion {
 public:
  [[nodiscard]] bool ready() const noexcept {
    return word_.load(std::memory_order_acquire) == 1;  // pairs with the release exchange in set()
  }

  void set() noexcept {
    // release: publishes the stored value/exception to the acquire in ready().
    if (word_.exchange(1, std::memory_order_acq_rel) == 2) futex_wake(word_, futex_wake_all);
  }

  /// Waits until ready or `deadline_ns` (steady clock, 0 = none) passes,
  /// helping the current pool when on a worker (sync/helping_wait.hpp).
  /// Returns ready().
  bool wait(std::int64_t deadline_ns) noexcept {
    // noexcept: a helped job's exception is caught by the pool that runs it.
    return helping_wait([this] { return ready(); }, [this](std::int64_t limit) { sleep_on_flag(limit); }, deadline_ns);
  }

 private:
  // Sleeps until set() or for at most `limit_ns` (-1: until set()).
  void sleep_on_flag(std::int64_t limit_ns) noexcept {
    std::uint32_t expected = 0;
    // acquire on failure: we may have seen `1`, and then read the value.
    if (!word_.compare_exchange_strong(expected, 2, std::memory_order_acq_rel, std::memory_order_acquire) &&
        expected == 1) {
      return;
    }
    if (limit_ns < 0) {
      futex_wait(word_, 2);
    } else {
      futex_wait_for(word_, 2, limit_ns);
    }
  }

  std::atomic<std::uint32_t> word_{0};
};

// A coroutine waiting for a future (operator co_await).
class future_waiter {
 public:
  virtual void ready() noexcept = 0;

 protected:
  future_waiter() = default;
  future_waiter(const future_waiter&) = default;
  future_waiter& operator=(const future_waiter&) = default;
  ~future_waiter() = default;
};

// Marks a future_state as completed for attach().
inline future_waiter* future_completed_marker() noexcept {
  struct marker final : future_waiter {
    void ready() noexcept override {}
  };
  static marker m;
  return &m;
}

// What a future_state<T> stores: the value, a pointer for an lvalue
// reference (future<T&>, as std::future<T&>), a byte for void.
template <typename T>
using future_storage_t =
    std::conditional_t<std::is_void_v<T>, char,
                       std::conditional_t<std::is_lvalue_reference_v<T>, std::remove_reference_t<T>*, T>>;

template <typename T>
struct future_state {
  static_assert(!std::is_rvalue_reference_v<T>, "a future cannot hold an rvalue reference (return by value)");
  completion done;
  std::optional<future_storage_t<T>> value;
  std::exception_ptr exception;
  // null, a suspended coroutine's waiter, or the completed marker.
  std::atomic<future_waiter*> waiter{nullptr};

  template <typename... V>
  void set_value(V&&... v) {
    if constexpr (std::is_void_v<T>) {
      value.emplace('\0');
    } else if constexpr (std::is_lvalue_reference_v<T>) {
      static_assert(sizeof...(V) == 1);
      value.emplace(std::addressof(v)...);
    } else {
      value.emplace(std::forward<V>(v)...);
    }
    done.set();
    notify_waiter();
  }
  void set_exception(std::exception_ptr e) noexcept {
    exception = std::move(e);
    done.set();
    notify_waiter();
  }
  // Registers `w` to be resumed on completion; false if already complete.
  bool attach(future_waiter* w) noexcept {
    future_waiter* expected = nullptr;
    // acq_rel: release publishes the coroutine's state to the completer
    // (which acquires in notify_waiter()); acquire on failure pairs with
    // notify_waiter()'s release, so the result is visible.
    return waiter.compare_exchange_strong(expected, w, std::memory_order_acq_rel, std::memory_order_acquire);
  }

 private:
  void notify_waiter() noexcept {
    // acq_rel: pairs with attach().
    future_waiter* w = waiter.exchange(future_completed_marker(), std::memory_order_acq_rel);
    if (w != nullptr) w->ready();
  }
};

template <typename T>
struct future_access;  // the coroutine support's view (coro/task.hpp)
}  // namespace detail

/// The result of thread_pool::submit(): std::future's interface, but a wait on a pool worker helps run other jobs
/// (see the header comment).
template <typename T>
class future {
 public:
  /// An invalid future (valid() is false).
  future() noexcept = default;
  /// A future completed through `state`, which the submitted job shares (made by the pools).
  explicit future(std::shared_ptr<detail::future_state<T>> state) noexcept : state_(std::move(state)) {}
  /// Takes over the other future's result; that future becomes invalid.
  future(future&&) noexcept = default;
  /// Takes over the other future's result (dropping this one's); that future becomes invalid.
  future& operator=(future&&) noexcept = default;
  /// Not copyable.
  future(const future&) = delete;
  /// Not copyable.
  future& operator=(const future&) = delete;

  /// True until get() has been called or the future moved from (never for a default-constructed one).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

  /// True when the result is available (does not wait).
  [[nodiscard]] bool is_ready() const noexcept { return state_ && state_->done.ready(); }

  /// Waits (helping, on a worker) until the result is ready.
  void wait() const {
    check_valid();
    state_->done.wait(0);
  }

  /// Waits (helping, on a worker) until the result is ready or `d` has passed: `ready` or `timeout`. A zero,
  /// negative or NaN `d` only checks; one too long to represent waits without a deadline. Throws
  /// std::future_error(no_state) on an invalid future.
  template <typename Rep, typename Period>
  std::future_status wait_for(const std::chrono::duration<Rep, Period>& d) const {
    check_valid();
    // Zero, negative and NaN durations only report readiness; one too long
    // to represent waits without a deadline (detail/duration.hpp).
    const std::int64_t deadline = detail::deadline_ns_after(d, detail::steady_now_ns_signed());  // 0: none
    return state_->done.wait(deadline) ? std::future_status::ready : std::future_status::timeout;
  }

  /// wait_for() the time left until `t` (by `Clock`); a `t` more than 100 years away waits without a deadline.
  template <typename Clock, typename Duration>
  std::future_status wait_until(const std::chrono::time_point<Clock, Duration>& t) const {
    // Any duration type without overflow (detail::ns_until()).
    const std::int64_t left = detail::ns_until(t, Clock::now());
    if (left == std::numeric_limits<std::int64_t>::max()) {
      wait();
      return std::future_status::ready;
    }
    return wait_for(std::chrono::nanoseconds(left));  // <= 0: only a check
  }

  /// Waits, then returns the value (or rethrows the job's exception). The
  /// future is invalid afterwards.
  T get() {
    check_valid();
    state_->done.wait(0);
    auto state = std::move(state_);
    if (state->exception) std::rethrow_exception(state->exception);
    if constexpr (std::is_lvalue_reference_v<T>) {
      return **state->value;
    } else if constexpr (!std::is_void_v<T>) {
      return std::move(*state->value);
    }
  }

 private:
  template <typename>
  friend struct detail::future_access;

  void check_valid() const {
    if (!state_) throw std::future_error(std::future_errc::no_state);
  }

  std::shared_ptr<detail::future_state<T>> state_;
};

}  // namespace thread_system
