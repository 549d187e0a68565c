// The jobs behind submit() and a token's enqueue(): the library's own job
// wrappers, used by thread_pool and typed_thread_pool_t. Not an API of its
// own (everything is in namespace detail); the pools' headers state the
// contracts these implement:
//   * submitted_job completes a future<R> with the callable's value or
//     exception, or with error_exception{cancelled} (saying why) when the
//     pool discards the job unrun; the callable and its bound arguments are
//     destroyed before the future is completed.
//   * token_job does not run a job whose token was cancelled before it
//     started (it reports job_outcome::cancelled), and makes the token
//     this_job::token() while the job runs.
// (A seed `job` becomes a job_function in compat/job.hpp.)
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/functional.hpp"
#include "thread_system/pools/this_job.hpp"
#include "thread_system/scheduler/future.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system::detail {

/// error_exception{cancelled} made when the library loaded, for a job
/// cancelled when there is no memory to say why (src/pool_core_accounting.cpp).
[[nodiscard]] const std::exception_ptr& cancelled_without_memory() noexcept;

/// error_exception{cancelled} saying `why`; with no memory for the reason,
/// cancelled_without_memory().
[[nodiscard]] inline std::exception_ptr cancelled_error(const char* why) noexcept {
  try {
    return std::make_exception_ptr(error_exception(error{error_code::cancelled, why}));
  } catch (...) {
    return cancelled_without_memory();
  }
}

// The job behind submit(): runs the callable and completes the future; on
// cancellation completes it with a `cancelled` error. Destroyed without
// either (which no pool does: every accepted job is run or cancelled), it
// completes the future with `cancelled` too, as std::promise breaks its
// promise: a future never waits for a job that no longer exists.
template <typename R, typename Fn>
struct submitted_job {
  std::shared_ptr<future_state<R>> state;
  // Destroyed before the future is completed, so a thread that sees the
  // result ready also knows the callable and its bound arguments are gone.
  // Empty once the job ran or was cancelled.
  std::optional<Fn> fn;

  submitted_job(std::shared_ptr<future_state<R>> shared, Fn&& f) : state(std::move(shared)), fn(std::move(f)) {}
  // Leaves `state` null: the moved-from job completes nothing.
  submitted_job(submitted_job&&) noexcept(std::is_nothrow_move_constructible_v<Fn>) = default;
  submitted_job& operator=(submitted_job&&) = delete;
  submitted_job(const submitted_job&) = delete;
  submitted_job& operator=(const submitted_job&) = delete;
  ~submitted_job() {
    if (state && fn) cancel_because("job destroyed without running");
  }

  job_outcome run_and_report() {
    try {
      if constexpr (std::is_void_v<R>) {
        detail::invoke(*fn);
        fn.reset();
        state->set_value();
      } else {
        R value = detail::invoke(*fn);  // an lvalue reference for R = T& (future<T&>)
        fn.reset();
        state->set_value(std::forward<R>(value));
      }
      return job_outcome::succeeded;
    } catch (...) {
      fn.reset();
      state->set_exception(std::current_exception());
      return job_outcome::failed_reported;
    }
  }

  void cancel() noexcept { cancel_because("job discarded by stop(stop_mode::cancel_pending)"); }

  // Completes the future with a `cancelled` error saying why.
  void cancel_because(const char* why) noexcept {
    fn.reset();
    state->set_exception(cancelled_error(why));
  }
};

// A job with a cancellation token: if the token is cancelled before the job
// starts it does not run (a submit() future completes with `cancelled`) and
// the pool counts it as cancelled. While it runs, this_job::token() is its
// token.
template <typename Fn>
struct token_job {
  cancellation_token token;
  Fn fn;

  job_outcome run_and_report() {
    if (token.is_cancelled()) {
      discard("job cancelled by its token before it started");
      return job_outcome::cancelled;
    }
    const this_job::detail::token_scope current(&token);
    if constexpr (has_report_hook<Fn>) {
      return fn.run_and_report();
    } else {
      detail::invoke_job(fn);
      return job_outcome::succeeded;
    }
  }
  void cancel() noexcept { discard("job discarded by stop(stop_mode::cancel_pending)"); }
  void cancel_because(const char* why) noexcept { discard(why); }

 private:
  void discard(const char* why) noexcept {
    if constexpr (has_cancel_reason_hook<Fn>) {
      fn.cancel_because(why);
    } else if constexpr (has_cancel_hook<Fn>) {
      (void)why;
      fn.cancel();
    } else {
      (void)why;
    }
  }
};

// Throws error_exception{invalid_argument} for an empty callable (a null
// function pointer, an empty std::function): submit()'s first refusal.
template <typename F>
void refuse_empty_submission(const F& f) {
  if (is_empty_callable(f)) throw error_exception(error{error_code::invalid_argument, "submit: null callable"});
}

// A submitted call: the future and the (typed) job that completes it.
// Throws error_exception{invalid_argument} for a null callable.
template <typename F, typename... Args>
auto make_submitted_job(F&& f, Args&&... args) {
  using R = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;
  refuse_empty_submission(f);
  auto bound = [fn = std::decay_t<F>(std::forward<F>(f)),
                ... bound_args = std::decay_t<Args>(std::forward<Args>(args))]() mutable -> R {
    return detail::invoke(std::move(fn), std::move(bound_args)...);
  };
  auto shared_state = std::make_shared<future_state<R>>();
  future<R> result_future(shared_state);
  using job_type = submitted_job<R, decltype(bound)>;
  return std::pair<future<R>, job_type>(std::move(result_future), job_type{std::move(shared_state), std::move(bound)});
}

// The future and the job_function of a submitted call.
template <typename F, typename... Args>
auto make_submission(F&& f, Args&&... args) {
  auto [result_future, job] = make_submitted_job(std::forward<F>(f), std::forward<Args>(args)...);
  return std::pair(std::move(result_future), job_function(std::move(job)));
}

// make_submission() whose job carries `token`.
template <typename F, typename... Args>
auto make_cancellable_submission(cancellation_token token, F&& f, Args&&... args) {
  auto [result_future, job] = make_submitted_job(std::forward<F>(f), std::forward<Args>(args)...);
  using job_type = decltype(job);
  return std::pair(std::move(result_future), job_function(token_job<job_type>{std::move(token), std::move(job)}));
}

// A callable as a job that carries `token`.
template <typename F>
job_function make_cancellable_job(cancellation_token token, F&& f) {
  using D = std::decay_t<F>;
  if (is_empty_callable(f)) return job_function{};
  return job_function(token_job<D>{std::move(token), D(std::forward<F>(f))});
}

}  // namespace thread_system::detail
