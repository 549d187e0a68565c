// C++20 coroutines on the pools: task<T>, sync_wait, co_await on a future,
// cancellation_point. Including this header gives the whole coroutine API:
// when_all() (coro/when_all.hpp) and spawn() (coro/spawn.hpp) come with it.
//
//   task<int> answer(thread_pool& pool) {
//     co_await pool.schedule();                       // now on a worker
//     co_await pool.sleep_for(std::chrono::milliseconds(5));
//     auto [a, b] = co_await when_all(half(pool), half(pool));
//     co_return a + b;
//   }
//   int v = sync_wait(answer(pool));                  // blocks this thread only
//   spawn(pool, log_later(pool)).value();             // fire and forget
//
// Contract:
//   * task<T> (T may be void or a reference) is lazy: calling the coroutine
//     allocates its frame and runs nothing; it starts when awaited, passed to
//     sync_wait(), spawn() or when_all(). Move-only; destroying a task that
//     has not finished destroys its frame: it must not be running then, nor
//     suspended on something that will resume it (a sleep's timer, a
//     scheduled resumption, a future) - that resumption would find the frame
//     gone. sync_wait(), spawn() and when_all() never destroy a task while it
//     is suspended; only code that drives a task's coroutine handle itself
//     can.
//   * Awaiting a task resumes the awaiter, when the task finishes, on the
//     thread that finished it, by symmetric transfer: a chain of a million
//     nested awaits uses constant stack. A coroutine of another type that
//     awaits a task starts it inside its co_await; when the task finishes
//     there without suspending, the awaiter goes on from the co_await at
//     the depth it had (a loop of such awaits uses constant stack at every
//     optimisation level), else it is resumed on the thread that finishes
//     the task. co_await rethrows the task's
//     exception. Only an rvalue task is awaitable, once: a task that has
//     been started (awaited, by co_await, sync_wait(), spawn() or
//     when_all()) - whether it has finished (is_ready()) or is still in
//     flight - is refused like an empty one by all four (error_exception /
//     result{invalid_argument}), never resumed again. (Like any object, one
//     task must not be awaited from two threads at once.)
//   * A coroutine runs on a pool only between `co_await pool.schedule()` (or
//     a sleep, or a future completed by a pool's job) and its next
//     suspension; each such stretch is one job of the pool (a *resumption*),
//     counted like any job. See coro/coro_base.hpp for refusals and for what
//     stop(cancel_pending) does to a suspended task (it is *abandoned*:
//     destroyed, and its awaiter sees `cancelled`).
//   * sync_wait(t[, token]) starts `t` on the calling thread and blocks that
//     thread (helping, on a pool worker) until it finishes: returns its value
//     or rethrows its exception; error_exception{cancelled} when abandoned.
//   * co_await cancellation_point() throws error_exception{cancelled} when
//     the chain's token (spawn/sync_wait's `token`) is cancelled; inside a
//     task this_job::token() and this_job::is_cancelled() see that token.
//   * Frames come from a recycling allocator (detail/recycling_allocator.hpp): a
//     steady state of tasks starting and finishing calls no malloc. Out of
//     memory, the call creating a task throws std::bad_alloc; spawn()
//     returns resource_exhausted instead, and when_all(vector) throws
//     error_exception{resource_exhausted} (coro/when_all.hpp).
//
// Thread-safety: a task is one object owned by one thread at a time; the
// plumbing hands a suspended coroutine between threads through the pools'
// queues (release/acquire), so everything before a suspension is visible
// after the resumption.
#pragma once

#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/detail/recycling_allocator.hpp"
#include "thread_system/scheduler/future.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system {

template <typename T = void>
class task;

namespace detail {
template <typename T>
struct task_access;

// Resumes whoever waits for the finished task (symmetric transfer).
struct final_awaiter {
  [[nodiscard]] static bool await_ready() noexcept { return false; }
  template <typename P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
    promise_base& p = h.promise();
    if (p.continuation) return transfer(h, p.continuation);
    if (p.waiter != nullptr) return transfer(h, p.waiter->on_complete());  // may free the frame: `h` is only compared
    return std::noop_coroutine();
  }
  static void await_resume() noexcept {}
};

class task_promise_common : public promise_base {
 public:
  static void* operator new(std::size_t n) { return recycled_allocate(n); }
  static void operator delete(void* p, std::size_t n) noexcept { recycled_free(p, n); }

  [[nodiscard]] static std::suspend_always initial_suspend() noexcept { return {}; }
  [[nodiscard]] static final_awaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { exception_ = std::current_exception(); }

  [[nodiscard]] const std::exception_ptr& exception() const noexcept { return exception_; }
  void rethrow_if_failed() const {
    if (exception_) std::rethrow_exception(exception_);
  }

 private:
  std::exception_ptr exception_;
};

template <typename T>
class task_promise final : public task_promise_common {
 public:
  task<T> get_return_object() noexcept;
  template <typename U = T>
    requires std::constructible_from<T, U&&>
  void return_value(U&& v) {
    value_.emplace(std::forward<U>(v));
  }
  T take() {
    rethrow_if_failed();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

template <typename T>
class task_promise<T&> final : public task_promise_common {
 public:
  task<T&> get_return_object() noexcept;
  void return_value(T& v) noexcept { value_ = std::addressof(v); }
  T& take() {
    rethrow_if_failed();
    return *value_;
  }

 private:
  T* value_ = nullptr;
};

template <>
class task_promise<void> final : public task_promise_common {
 public:
  task<void> get_return_object() noexcept;
  static void return_void() noexcept {}
  void take() const { rethrow_if_failed(); }
};

[[noreturn]] inline void throw_abandoned() {
  throw error_exception(
      error{error_code::cancelled, "the task was abandoned: a pool discarded one of its resumptions"});
}

}  // namespace detail

/// A lazily started coroutine producing a `T` (see the header comment).
template <typename T>
class [[nodiscard]] task {
 public:
  /// The coroutine machinery's promise (what makes a function returning task<T> a coroutine).
  using promise_type = detail::task_promise<T>;
  /// What co_await on the task gives.
  using value_type = T;

  /// An empty task (valid() is false).
  task() noexcept = default;
  /// Takes over `o`'s coroutine; `o` becomes empty.
  task(task&& o) noexcept : frame_(std::exchange(o.frame_, {})) {}
  /// Destroys this task's coroutine (if any), then takes over `o`'s.
  task& operator=(task&& o) noexcept {
    if (this != &o) {
      reset();
      frame_ = std::exchange(o.frame_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() { reset(); }

  /// True while this task owns a coroutine.
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(frame_); }
  /// True when the coroutine has finished (its result is ready).
  [[nodiscard]] bool is_ready() const noexcept { return frame_ && frame_.done(); }
  /// Not empty and never started: what co_await, sync_wait(), spawn() and
  /// when_all() accept (a started task, finished or in flight, was awaited
  /// once already; starting it again would resume its frame twice).
  /// A finished task was started, so started() covers it; it reads only
  /// what the starting thread wrote before the start (done() would read the
  /// frame's resume point, which the thread running a task in flight writes).
  [[nodiscard]] bool startable() const noexcept { return frame_ && !promise().started(); }

  /// Starts the task and resumes the awaiter with its result (see the header).
  auto operator co_await() && noexcept { return awaiter{*this}; }

 private:
  template <typename>
  friend class detail::task_promise;
  template <typename U>
  friend struct detail::task_access;

  explicit task(std::coroutine_handle<promise_type> h) noexcept : frame_(h) {}

  [[nodiscard]] promise_type& promise() const noexcept {
    return std::coroutine_handle<promise_type>::from_address(frame_.address()).promise();
  }
  void reset() noexcept {
    if (frame_) std::exchange(frame_, {}).destroy();
  }

  class awaiter final : public detail::coro_waiter {
   public:
    explicit awaiter(task& t) noexcept : task_(&t) {}
    [[nodiscard]] bool await_ready() const {
      if (!task_->startable()) {
        throw error_exception(error{error_code::invalid_argument, "co_await on an empty or already awaited task"});
      }
      return false;
    }
    // A task<T> awaiting: symmetric transfer to the child.
    template <detail::library_promise P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
      promise_type& child = task_->promise();
      child.continuation = parent;
      child.parent = &parent.promise();
      child.owner = &task_->frame_;
      child.join_chain(parent.promise());
      return detail::transfer(parent, task_->frame_);
    }
    // A coroutine of another type: the child starts here, in a resume loop
    // of its own (whatever drives the awaiter), and when it finishes before
    // that loop ends the awaiter goes on from this co_await at the depth it
    // had (false: not suspended) - no transfer back into it, whose stack
    // would grow with each such await of a loop wherever the compiler does
    // not make symmetric transfer a tail call. Otherwise whoever finishes or
    // abandons the child later resumes the awaiter.
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> parent) noexcept {
      promise_type& child = task_->promise();
      child.waiter = this;  // on_complete() / on_abandon() decide who resumes `parent`
      child.set_chain(nullptr, true);
      parent_ = parent;
      // relaxed: nothing else sees the awaiter before the child runs, below.
      state_.store(starting, std::memory_order_relaxed);
      detail::resume_loop_reporting(task_->frame_, nullptr);
      int seen = starting;
      // Success (release): a later on_complete()/on_abandon() on another
      // thread resumes `parent`, whose suspension is complete from here; no
      // member is touched after it. Failure (acquire): pairs with their
      // exchange - the child's outcome is visible to await_resume().
      return state_.compare_exchange_strong(seen, suspended, std::memory_order_release, std::memory_order_acquire);
    }
    T await_resume() {
      if (abandoned_) detail::throw_abandoned();
      return task_->promise().take();
    }

   private:
    enum : int { starting, suspended, done };

    // The child finished (value or exception stored), for a foreign awaiter.
    std::coroutine_handle<> on_complete() noexcept override {
      const std::coroutine_handle<> parent = parent_;  // before the exchange: the awaiter may go after it
      // acq_rel: release publishes the child's outcome to await_suspend()'s
      // failed CAS; acquire pairs with its successful one.
      if (state_.exchange(done, std::memory_order_acq_rel) == starting) {
        return std::noop_coroutine();  // await_suspend() is still running: it goes on with `parent`
      }
      return parent;
    }
    void on_abandon() noexcept override {
      abandoned_ = true;
      // The suspended frame is the waiter's to drop: destroyed here (on the
      // discarding thread), so the task is no longer startable() and a
      // second co_await / sync_wait of it is refused, never resumed.
      task_->reset();
      const std::coroutine_handle<> parent = parent_;  // before the exchange, as in on_complete()
      // acq_rel: as in on_complete() (abandoned_ and the reset are published).
      if (state_.exchange(done, std::memory_order_acq_rel) == starting) return;  // await_suspend() goes on
      detail::resume_loop_reporting(parent, nullptr);
    }

    task* task_;
    std::coroutine_handle<> parent_;  // a foreign awaiter
    std::atomic<int> state_{starting};
    bool abandoned_ = false;
  };

  std::coroutine_handle<> frame_;
};

namespace detail {
template <typename T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}
template <typename T>
task<T&> task_promise<T&>::get_return_object() noexcept {
  return task<T&>(std::coroutine_handle<task_promise>::from_promise(*this));
}
inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise>::from_promise(*this));
}

// What sync_wait, spawn and when_all need of a task.
template <typename T>
struct task_access {
  static std::coroutine_handle<> frame(const task<T>& t) noexcept { return t.frame_; }
  static task_promise<T>& promise(const task<T>& t) noexcept { return t.promise(); }
};

template <typename T>
struct future_access {
  static void check_valid(const future<T>& f) { f.check_valid(); }
  static bool attach(const future<T>& f, future_waiter* w) noexcept { return f.state_->attach(w); }
};

// The awaitable of `co_await std::move(a_future)`.
template <typename T>
class future_awaiter final : future_waiter {
 public:
  explicit future_awaiter(future<T>&& f) noexcept : future_(std::move(f)) {}
  [[nodiscard]] bool await_ready() const {
    future_access<T>::check_valid(future_);
    return future_.is_ready();
  }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    handle_ = h;
    token_ = token_of(h);
    return future_access<T>::attach(future_, this);  // false: completed meanwhile, continue
  }
  T await_resume() { return future_.get(); }

 private:
  void ready() noexcept override {
    const resume_target* const completing = t_current_target;  // a failure of a foreign awaiter goes there
    resume_scope scope(token_, nullptr);
    resume_loop_reporting(handle_, completing);
  }

  future<T> future_;
  std::coroutine_handle<> handle_;
  const cancellation_token* token_ = nullptr;
};

// The awaitable of cancellation_point().
struct cancellation_point_awaiter {
  bool cancelled = false;
  [[nodiscard]] static bool await_ready() noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    const cancellation_token* t = token_of(h);
    cancelled = t != nullptr ? t->is_cancelled() : this_job::is_cancelled();
    return false;  // never suspends
  }
  void await_resume() const {
    if (cancelled) throw error_exception(error{error_code::cancelled, "the task's token was cancelled"});
  }
};

}  // namespace detail

/// Runs `t` to completion, blocking only the calling thread (helping, on a
/// pool worker); returns its value or rethrows its exception. `token` is the
/// chain's token (this_job::token() inside it). Throws
/// error_exception{invalid_argument} for an empty task, {cancelled} when a
/// pool abandoned it.
template <typename T>
T sync_wait(task<T> t, cancellation_token token = {}) {
  if (!t.startable()) {
    throw error_exception(error{error_code::invalid_argument, "sync_wait() of an empty or already awaited task"});
  }
  struct root final : detail::coro_waiter {
    detail::completion done;
    bool abandoned = false;
    std::coroutine_handle<> on_complete() noexcept override {
      done.set();  // release: the result is published to the waiting thread
      return std::noop_coroutine();
    }
    void on_abandon() noexcept override {
      abandoned = true;
      done.set();
    }
  } r;
  auto& p = detail::task_access<T>::promise(t);
  p.waiter = &r;
  p.set_chain(token.can_be_cancelled() ? &token : nullptr, false);
  {
    detail::resume_scope scope(p.token(), nullptr);
    detail::resume_loop(detail::task_access<T>::frame(t));
  }
  r.done.wait(0);
  if (r.abandoned) detail::throw_abandoned();
  return p.take();
}

/// `co_await std::move(f)` (or `co_await pool.submit(...)`): suspends until
/// the future is ready, without blocking a thread, and resumes on the thread
/// that completed it (see scheduler/future.hpp); returns get()'s result.
/// Throws std::future_error(no_state) for an invalid future.
template <typename T>
[[nodiscard]] detail::future_awaiter<T> operator co_await(future<T>&& f) noexcept {
  return detail::future_awaiter<T>(std::move(f));
}

/// `co_await cancellation_point();` throws error_exception{cancelled} when
/// the awaiting task's token is cancelled; otherwise continues at once.
[[nodiscard]] inline detail::cancellation_point_awaiter cancellation_point() noexcept { return {}; }

}  // namespace thread_system

// The rest of the coroutine API (each of these includes this header).
#include "thread_system/coro/spawn.hpp"     // IWYU pragma: export
#include "thread_system/coro/when_all.hpp"  // IWYU pragma: export
