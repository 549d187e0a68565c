// C++20 coroutines on the pools: task<T>, sync_wait, spawn, when_all,
// cancellation_point.
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
//     has not finished destroys its frame (it must not be running then).
//   * Awaiting a task resumes the awaiter, when the task finishes, on the
//     thread that finished it, by symmetric transfer: a chain of a million
//     nested awaits uses constant stack. co_await rethrows the task's
//     exception. Only an rvalue task is awaitable, once.
//   * A coroutine runs on a pool only between `co_await pool.schedule()` (or
//     a sleep, or a future completed by a pool's job) and its next
//     suspension; each such stretch is one job of the pool (a *resumption*),
//     counted like any job. See coro/coro_base.hpp for refusals and for what
//     stop(cancel_pending) does to a suspended task (it is *abandoned*:
//     destroyed, and its awaiter sees `cancelled`).
//   * sync_wait(t[, token]) starts `t` on the calling thread and blocks that
//     thread (helping, on a pool worker) until it finishes: returns its value
//     or rethrows its exception; error_exception{cancelled} when abandoned.
//   * spawn(pool[, token], t) starts `t` in a job of `pool` and returns; the
//     frame is freed when it finishes. An exception escaping `t` is reported
//     like a failing job: the pool's error handler and its `failed` counter
//     (it counts on the resumption in which the task finished when that was
//     one of `pool`'s; otherwise as one more job of `pool` that fails; a pool
//     that no longer accepts jobs only calls its error handler). A refused
//     start returns the pool's error and destroys the task unrun.
//   * when_all(tasks...) / when_all(vector<task<T>>) runs the children in
//     parallel: awaited on a pool worker, every child but the first is pushed
//     to that pool and the first runs on this thread; elsewhere they start
//     one after another on this thread, each until its first suspension.
//     The awaiter resumes once all have finished, with their results in
//     order (a tuple; void children give std::monostate; a vector for the
//     range form); if any failed, the first failure in order is rethrown
//     after all finished. A child abandoned abandons the when_all once the
//     others have finished.
//   * co_await cancellation_point() throws error_exception{cancelled} when
//     the chain's token (spawn/sync_wait's `token`) is cancelled; inside a
//     task this_job::token() and this_job::is_cancelled() see that token.
//   * Frames come from a recycling allocator (coro/frame_allocator.hpp): a
//     steady state of tasks starting and finishing calls no malloc. Out of
//     memory, the call creating a task throws std::bad_alloc; spawn()
//     returns resource_exhausted instead.
//
// Thread-safety: a task is one object owned by one thread at a time; the
// plumbing hands a suspended coroutine between threads through the pools'
// queues (release/acquire), so everything before a suspension is visible
// after the resumption.
#pragma once

#include <array>
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/coro/frame_allocator.hpp"
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
  static void* operator new(std::size_t n) { return coro_frame_allocate(n); }
  static void operator delete(void* p, std::size_t n) noexcept { coro_frame_free(p, n); }

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
      if (!task_->frame_) throw error_exception(error{error_code::invalid_argument, "co_await on an empty task"});
      return false;
    }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
      promise_type& child = task_->promise();
      child.continuation = parent;
      if constexpr (std::is_base_of_v<detail::promise_base, P>) {
        child.parent = &parent.promise();
        child.owner = &task_->frame_;
        child.token = parent.promise().token;
      } else {
        child.waiter = this;  // a foreign coroutine: told by on_abandon()
      }
      return detail::transfer(parent, task_->frame_);
    }
    T await_resume() {
      if (abandoned_) detail::throw_abandoned();
      return task_->promise().take();
    }

   private:
    std::coroutine_handle<> on_complete() noexcept override { return std::noop_coroutine(); }  // not used
    void on_abandon() noexcept override {
      abandoned_ = true;
      detail::resume_loop(task_->promise().continuation);
    }

    task* task_;
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
using when_all_value_t = std::conditional_t<
    std::is_void_v<T>, std::monostate,
    std::conditional_t<std::is_reference_v<T>, std::reference_wrapper<std::remove_reference_t<T>>, T>>;

template <typename T>
when_all_value_t<T> take_for_when_all(task_promise<T>& p) {
  if constexpr (std::is_void_v<T>) {
    p.take();
    return {};
  } else if constexpr (std::is_reference_v<T>) {
    return std::ref(p.take());
  } else {
    return p.take();
  }
}

// The counting part of when_all (not a template).
class when_all_core {
 public:
  when_all_core() = default;
  when_all_core(const when_all_core&) = delete;
  when_all_core& operator=(const when_all_core&) = delete;

 protected:
  class slot final : public coro_waiter {
   public:
    slot() noexcept = default;
    explicit slot(when_all_core* core) noexcept : core_(core) {}
    std::coroutine_handle<> on_complete() noexcept override { return core_->child_done(); }
    void on_abandon() noexcept override {
      // relaxed: published by the acq_rel decrement in child_done().
      core_->abandoned_.store(true, std::memory_order_relaxed);
      // The last child then abandons the parent instead of returning it.
      (void)core_->child_done();
    }

   private:
    when_all_core* core_ = nullptr;
  };

  // Starts the children (frames[i] with promises[i] waiting on slots[i]);
  // returns the one to run on this thread.
  template <typename P>
  std::coroutine_handle<> start(std::coroutine_handle<P> parent, std::size_t n, auto&& child_frame,
                                auto&& child_promise, slot* slots) {
    parent_ = parent;
    const cancellation_token* token = token_of(parent);
    if constexpr (std::is_base_of_v<promise_base, P>) parent_promise_ = &parent.promise();
    // relaxed: the children are started after this, through the pool's
    // hand-off or on this thread.
    remaining_.store(n, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      promise_base& cp = child_promise(i);
      cp.waiter = &slots[i];
      cp.token = token;
    }
    const std::coroutine_handle<> first = child_frame(0);
    const resume_target* target = t_current_target;
    for (std::size_t i = 1; i < n; ++i) {
      if (target != nullptr) {
        result<void> pushed =
            target->push_job(job_function(resume_job{child_frame(i), &child_promise(i), nullptr, *target}));
        if (pushed) continue;
      }
      // Not on a pool, or the pool refused: start it here (it runs until it
      // first suspends). The first child has not started, so the parent
      // cannot be resumed yet.
      resume_scope scope(token, target);
      resume_loop(child_frame(i));
    }
    return transfer(parent, first);
  }

  [[nodiscard]] bool parent_abandoned() const noexcept { return foreign_abandoned_; }

 private:
  std::coroutine_handle<> child_done() noexcept {
    // acq_rel: the last child sees every child's result (and abandoned_).
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return std::noop_coroutine();
    if (!abandoned_.load(std::memory_order_relaxed)) return parent_;
    if (parent_promise_ != nullptr) {
      abandon(parent_promise_);  // destroys this object: nothing after
    } else {
      foreign_abandoned_ = true;
      resume_loop(parent_);
    }
    return std::noop_coroutine();
  }

  std::atomic<std::size_t> remaining_{0};
  std::atomic<bool> abandoned_{false};
  std::coroutine_handle<> parent_;
  promise_base* parent_promise_ = nullptr;
  bool foreign_abandoned_ = false;
};

template <typename... Ts>
class when_all_awaitable final : when_all_core {
 public:
  explicit when_all_awaitable(task<Ts>... tasks) : tasks_(std::move(tasks)...) {
    std::apply(
        [](const auto&... t) {
          if ((!t.valid() || ...))
            throw error_exception(error{error_code::invalid_argument, "when_all() of an empty task"});
        },
        tasks_);
  }
  [[nodiscard]] static bool await_ready() noexcept { return sizeof...(Ts) == 0; }
  template <typename P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
    for (std::size_t i = 0; i < sizeof...(Ts); ++i) slots_[i] = slot(this);
    std::array<std::coroutine_handle<>, sizeof...(Ts)> frames;
    std::array<promise_base*, sizeof...(Ts)> promises;
    std::size_t i = 0;
    std::apply(
        [&](const auto&... t) {
          ((frames[i] = task_access<typename std::remove_cvref_t<decltype(t)>::value_type>::frame(t),
            promises[i] = &task_access<typename std::remove_cvref_t<decltype(t)>::value_type>::promise(t), ++i),
           ...);
        },
        tasks_);
    return start(
        parent, sizeof...(Ts), [&](std::size_t k) { return frames[k]; },
        [&](std::size_t k) -> promise_base& { return *promises[k]; }, slots_.data());
  }
  std::tuple<when_all_value_t<Ts>...> await_resume() {
    if (parent_abandoned()) throw_abandoned();
    std::apply([](const auto&... t) { (rethrow(t), ...); }, tasks_);
    return std::apply(
        [](const auto&... t) {
          return std::tuple<when_all_value_t<Ts>...>(
              take_for_when_all(task_access<typename std::remove_cvref_t<decltype(t)>::value_type>::promise(t))...);
        },
        tasks_);
  }

 private:
  template <typename T>
  static void rethrow(const task<T>& t) {
    task_access<T>::promise(t).rethrow_if_failed();
  }

  std::tuple<task<Ts>...> tasks_;
  std::array<slot, sizeof...(Ts)> slots_{};
};

template <typename T>
class when_all_range_awaitable final : when_all_core {
 public:
  explicit when_all_range_awaitable(std::vector<task<T>> tasks) : tasks_(std::move(tasks)), slots_(tasks_.size()) {
    for (const auto& t : tasks_) {
      if (!t.valid()) throw error_exception(error{error_code::invalid_argument, "when_all() of an empty task"});
    }
  }
  [[nodiscard]] bool await_ready() const noexcept { return tasks_.empty(); }
  template <typename P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
    for (auto& s : slots_) s = slot(this);
    return start(
        parent, tasks_.size(), [&](std::size_t k) { return task_access<T>::frame(tasks_[k]); },
        [&](std::size_t k) -> promise_base& { return task_access<T>::promise(tasks_[k]); }, slots_.data());
  }
  auto await_resume() {
    if (parent_abandoned()) throw_abandoned();
    for (const auto& t : tasks_) task_access<T>::promise(t).rethrow_if_failed();
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      std::vector<when_all_value_t<T>> out;
      out.reserve(tasks_.size());
      for (auto& t : tasks_) out.push_back(take_for_when_all(task_access<T>::promise(t)));
      return out;
    }
  }

 private:
  std::vector<task<T>> tasks_;
  std::vector<slot> slots_;
};

// The root of a spawned task: frees it when it finishes or is abandoned.
class spawn_root final : public coro_waiter {
 public:
  using report_fn = void (*)(void* pool, const std::exception_ptr& e) noexcept;

  spawn_root(task<void> t, cancellation_token token, resume_target target, report_fn report) noexcept
      : task_(std::move(t)), token_(std::move(token)), target_(target), report_(report) {}

  static void* operator new(std::size_t n) { return coro_frame_allocate(n); }
  static void operator delete(void* p, std::size_t n) noexcept { coro_frame_free(p, n); }

  // Pushes the first resumption; on refusal the caller deletes this.
  result<void> start() noexcept {
    task_promise<void>& p = task_access<void>::promise(task_);
    p.waiter = this;
    p.token = token_.can_be_cancelled() ? &token_ : nullptr;
    try {
      return target_.push_job(job_function(resume_job{task_access<void>::frame(task_), &p, nullptr, target_}));
    } catch (...) {
      return make_error_nothrow(error_code::resource_exhausted, [] { return "no memory to spawn the task"; });
    }
  }

 private:
  std::coroutine_handle<> on_complete() noexcept override {
    std::exception_ptr failure = task_access<void>::promise(task_).exception();
    const resume_target target = target_;
    const report_fn report = report_;
    forget_token();
    delete this;  // frees the finished frame
    if (failure) deliver(failure, target, report);
    return std::noop_coroutine();
  }
  void on_abandon() noexcept override {
    forget_token();
    delete this;
  }

  // The running resumption's this_job token may be ours: it goes with us.
  void forget_token() const noexcept {
    if (this_job::detail::current_token == &token_) this_job::detail::current_token = nullptr;
  }

  // A job that rethrows a spawned task's failure in its pool; discarded
  // unrun, it still reports the failure (to the error handler).
  struct failure_job {
    std::exception_ptr failure;
    void* pool;
    report_fn report;
    void operator()() const { std::rethrow_exception(failure); }
    void cancel() noexcept { report(pool, failure); }
  };

  static void deliver(const std::exception_ptr& failure, const resume_target& target, report_fn report) noexcept {
    if (t_current_target != nullptr && t_current_target->pool == target.pool) {
      t_pending_failure = failure;  // the running resumption of this pool rethrows it
      return;
    }
    if (target.push_job(job_function(failure_job{failure, target.pool, report}))) return;
    report(target.pool, failure);  // refused (stopped): the error handler still hears of it
  }

  task<void> task_;
  cancellation_token token_;
  resume_target target_;
  report_fn report_;
};

// `Pool` is named for its failure report; the target pushes into it.
template <typename Pool>
result<void> spawn_on(Pool& /*pool*/, resume_target target, cancellation_token token, task<void> t) {
  if (!t.valid()) return make_error(error_code::invalid_argument, "spawn() of an empty task");
  spawn_root* root = nullptr;
  try {
    root = new spawn_root(std::move(t), std::move(token), target, [](void* p, const std::exception_ptr& e) noexcept {
      coro_access::report_failure(*static_cast<Pool*>(p), e);
    });
  } catch (const std::bad_alloc&) {
    return make_error_nothrow(error_code::resource_exhausted, [] { return "no memory to spawn the task"; });
  }
  result<void> r = root->start();
  if (!r) delete root;  // never started: destroys the task
  return r;
}

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
    resume_scope scope(token_, nullptr);
    resume_loop(handle_);
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
  if (!t.valid()) throw error_exception(error{error_code::invalid_argument, "sync_wait() of an empty task"});
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
  p.token = token.can_be_cancelled() ? &token : nullptr;
  {
    detail::resume_scope scope(p.token, nullptr);
    detail::resume_loop(detail::task_access<T>::frame(t));
  }
  r.done.wait(0);
  if (r.abandoned) detail::throw_abandoned();
  return p.take();
}

/// Awaits every task in parallel; the results in order (see the header).
template <typename... Ts>
[[nodiscard]] detail::when_all_awaitable<Ts...> when_all(task<Ts>... tasks) {
  return detail::when_all_awaitable<Ts...>(std::move(tasks)...);
}

/// Awaits every task of `tasks` in parallel; a vector of results in order
/// (nothing for task<void>).
template <typename T>
[[nodiscard]] detail::when_all_range_awaitable<T> when_all(std::vector<task<T>> tasks) {
  return detail::when_all_range_awaitable<T>(std::move(tasks));
}

/// `co_await std::move(f)` (or `co_await pool.submit(...)`): suspends until
/// the future is ready, without blocking a thread, and resumes on the thread
/// that completed it (see scheduler/future.hpp); returns get()'s result.
/// Throws std::future_error(no_state) for an invalid future.
template <typename T>
[[nodiscard]] detail::future_awaiter<T> operator co_await(future<T>&& f) noexcept {
  return detail::future_awaiter<T>(std::move(f));
}

/// A pool that coroutines run on (thread_pool; typed pools need a job type).
template <typename Pool>
concept coroutine_pool = requires(Pool& pool) { detail::coro_access::target(pool); };
/// A typed pool: coroutines run on it with a job type.
template <typename Pool, typename Type>
concept typed_coroutine_pool = requires(Pool& pool, Type type) { detail::coro_access::target(pool, type); };

/// Starts `t` in a job of `pool` and returns (see the header): the pool's
/// refusal, invalid_argument for an empty task, resource_exhausted without
/// memory. Nothing is started on an error.
template <coroutine_pool Pool>
result<void> spawn(Pool& pool, task<void> t) {
  return detail::spawn_on(pool, detail::coro_access::target(pool), {}, std::move(t));
}
/// spawn() with a token: this_job::token() inside the task, cancellation_point() and sleeps see it.
template <coroutine_pool Pool>
result<void> spawn(Pool& pool, cancellation_token token, task<void> t) {
  return detail::spawn_on(pool, detail::coro_access::target(pool), std::move(token), std::move(t));
}
/// spawn() on a typed pool: the task's resumptions are jobs of `type`.
template <typename Pool, typename Type>
  requires typed_coroutine_pool<Pool, Type>
result<void> spawn(Pool& pool, Type type, task<void> t) {
  return detail::spawn_on(pool, detail::coro_access::target(pool, type), {}, std::move(t));
}
/// spawn() on a typed pool with a token.
template <typename Pool, typename Type>
  requires typed_coroutine_pool<Pool, Type>
result<void> spawn(Pool& pool, Type type, cancellation_token token, task<void> t) {
  return detail::spawn_on(pool, detail::coro_access::target(pool, type), std::move(token), std::move(t));
}

/// `co_await cancellation_point();` throws error_exception{cancelled} when
/// the awaiting task's token is cancelled; otherwise continues at once.
[[nodiscard]] inline detail::cancellation_point_awaiter cancellation_point() noexcept { return {}; }

}  // namespace thread_system
