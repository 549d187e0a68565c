// spawn: starts a task in a job of a pool and returns (fire and forget; part
// of the coroutine API of coro/task.hpp, which includes this header).
//
//   spawn(pool, log_later(pool)).value();
//   spawn(typed_pool, job_types::Background, token, refresh(typed_pool)).value();
//
// Contract:
//   * spawn(pool[, token], t) starts `t` in a job of `pool` and returns; the
//     frame is freed when it finishes. An exception escaping `t` is reported
//     like a failing job: the pool's error handler and its `failed` counter
//     (it counts on the resumption in which the task finished when that was
//     one of `pool`'s; otherwise as one more job of `pool` that fails; a pool
//     that no longer accepts jobs only calls its error handler). A task may
//     outlive `pool` (it went on to another pool): once `pool` is destroyed
//     its failure is counted and reported by the pool whose resumption it
//     finished in, and is lost only when it finished outside every pool's
//     resumption (its last resumer was a plain thread). A refused start
//     returns the pool's error and destroys the task unrun.
//   * The spawned task's frame belongs to the pool's plumbing: it is freed
//     when the task finishes, or when its resumption is discarded unrun
//     (stop(cancel_pending), backpressure::drop_oldest) and the chain is
//     abandoned (docs/COROUTINES.md).
//
// Thread-safety: spawn() may be called from any thread, like enqueue().
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/coro/task.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system {
namespace detail {

// Keeps the pool registered under `key` (pool_front::spawn_key()) from
// being destroyed while it lives (the pool's destructor waits for it); false
// when that pool is gone or going. For a spawned task that fails outside its
// pool (src/spawn_registry.cpp). A destructor of that pool run on the pin's
// own thread - inside a call made under the pin, whose code dropped the
// pool's last owner - does not wait for it (it would wait for itself): the
// pin is released then, and reads false from that point on.
class spawn_pin {
 public:
  explicit spawn_pin(std::uint64_t key) noexcept;
  ~spawn_pin();
  spawn_pin(const spawn_pin&) = delete;
  spawn_pin& operator=(const spawn_pin&) = delete;
  explicit operator bool() const noexcept { return pinned_; }

 private:
  friend struct spawn_pins_of_this_thread;
  std::uint64_t key_;
  bool pinned_ = false;
  spawn_pin* outer_ = nullptr;  // the pin this thread held before (a stack per thread)
};

// The root of a spawned task: frees it when it finishes or is abandoned.
class spawn_root final : public coro_waiter {
 public:
  spawn_root(task<void> t, cancellation_token token, resume_target target, std::uint64_t pool_key) noexcept
      : task_(std::move(t)), token_(std::move(token)), target_(target), pool_key_(pool_key) {}

  static void* operator new(std::size_t n) { return recycled_allocate(n); }
  static void operator delete(void* p, std::size_t n) noexcept { recycled_free(p, n); }

  // Pushes the first resumption; on refusal the caller deletes this.
  result<void> start() noexcept {
    task_promise<void>& p = task_access<void>::promise(task_);
    p.waiter = this;
    p.set_chain(token_.can_be_cancelled() ? &token_ : nullptr, false);
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
    const std::uint64_t pool_key = pool_key_;
    forget_token();
    delete this;  // frees the finished frame
    if (failure) deliver(failure, target, pool_key);
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
    resume_target target;
    [[noreturn]] void operator()() const { std::rethrow_exception(failure); }
    void cancel() noexcept { target.report(failure); }
  };

  static void deliver(const std::exception_ptr& failure, const resume_target& target, std::uint64_t pool_key) noexcept {
    if (t_current_target != nullptr && t_current_target->pool == target.pool) {
      t_pending_failure = failure;  // the running resumption of this pool rethrows it
      return;
    }
    if (spawn_pin pin(pool_key); pin) {  // the pool exists until the pin goes
      try {
        if (target.push_job(job_function(failure_job{failure, target}))) return;
      } catch (...) {  // std::bad_alloc: as a refusal
      }
      // Refused (stopped): the error handler still hears of it - unless the
      // push itself destroyed the pool (a job it dropped held the last
      // owner), which released the pin.
      if (pin) {
        target.report(failure);
        return;
      }
    }
    // The pool is gone: the resumption of another pool running here, if
    // any, rethrows it (that pool counts and reports it).
    if (t_current_target != nullptr) t_pending_failure = failure;
  }

  task<void> task_;
  cancellation_token token_;
  resume_target target_;
  std::uint64_t pool_key_;
};

// `pool` is where the task's failure is reported (its key); `target` pushes into it.
template <typename Pool>
result<void> spawn_on(Pool& pool, resume_target target, cancellation_token token, task<void> t) {
  if (!t.startable()) return make_error(error_code::invalid_argument, "spawn() of an empty or already awaited task");
  result<std::uint64_t> key = coro_access::spawn_key(pool);
  if (!key) return unexpected_error{std::move(key).error()};
  spawn_root* root = nullptr;
  try {
    root = new spawn_root(std::move(t), std::move(token), target, *key);
  } catch (const std::bad_alloc&) {
    return make_error_nothrow(error_code::resource_exhausted, [] { return "no memory to spawn the task"; });
  }
  result<void> r = root->start();
  if (!r) delete root;  // never started: destroys the task
  return r;
}

}  // namespace detail

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

}  // namespace thread_system
