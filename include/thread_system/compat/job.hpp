// Seed-compatible job model (the seed guides' `job` and `callback_job`): an
// abstract `job` whose `do_work()` returns a `result<void>`, and
// `callback_job`, which wraps a lambda. Part of the seed-style layer
// (compat/): a pool runs a seed job through the modern API, as the
// job_function that job::to_job_function() makes of it.
//
//   auto j = std::make_unique<callback_job>([]() -> result_void { return {}; });
//   pool->enqueue(std::move(j));
//
// A job whose `do_work()` returns an error is counted as failed and its error
// reaches the pool's error handler as an `error_exception` with code
// `job_failed` (the message keeps the job's own text). An exception thrown by
// `do_work()` reaches the handler unchanged. A job with nothing to run (a
// callback_job built from an empty std::function or a null pointer:
// runnable() is false) is refused at enqueue with `invalid_argument`, as is
// a null job; a refused job is destroyed without running.
//
// Thread-safety: a job is run by exactly one worker, once; it needs no
// internal synchronisation of its own.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/functional.hpp"

namespace thread_system {

/// Base of seed-style jobs: subclasses implement do_work(); a pool runs the job once, on one worker.
class job {
 public:
  /// A job named `name` (the name appears in error messages).
  explicit job(std::string name = "job") : name_(std::move(name)) {}
  virtual ~job() = default;
  job(const job&) = delete;
  job& operator=(const job&) = delete;

  /// The work. Return `{}` on success or an error to report failure.
  [[nodiscard]] virtual result<void> do_work() = 0;

  /// False when the job has nothing to run; pools refuse such a job with
  /// `invalid_argument` instead of failing it later.
  [[nodiscard]] virtual bool runnable() const noexcept { return true; }

  /// The name given at construction.
  [[nodiscard]] const std::string& get_name() const noexcept { return name_; }

  /// The seed job as a modern job: a job_function that runs `do_work()` once
  /// and throws `error_exception{job_failed}` (the job's name and error text)
  /// when it returns an error, so the pool counts it as failed and passes it
  /// to its error handler. `invalid_argument`, naming `caller`, for a null or
  /// not runnable() job (which is destroyed); allocates nothing otherwise.
  [[nodiscard]] static result<job_function> to_job_function(std::unique_ptr<job> j, std::string_view caller);

 private:
  std::string name_;
};

namespace detail {

// The job_function behind job::to_job_function().
struct seed_job_adapter {
  std::unique_ptr<job> owned;
  void operator()() const {
    auto r = owned->do_work();
    if (!r) {
      // The message through make_error_nothrow(): out of memory the error
      // keeps its code (job_failed, an empty message) rather than turning
      // into std::bad_alloc on its way to the error handler.
      throw error_exception(make_error_nothrow(error_code::job_failed, [&] {
                              return owned->get_name() + ": " + r.error().to_string();
                            }).value);
    }
  }
};

}  // namespace detail

inline result<job_function> job::to_job_function(std::unique_ptr<job> j, std::string_view caller) {
  // The messages through make_error_nothrow: out of memory, the refusal
  // keeps its code (an empty message) instead of throwing std::bad_alloc.
  if (!j)
    return make_error_nothrow(error_code::invalid_argument, [caller] { return std::string(caller) + ": null job"; });
  if (!j->runnable()) {
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return std::string(caller) + ": job '" + j->get_name() + "' has nothing to run (an empty callback)";
    });
  }
  return job_function(detail::seed_job_adapter{std::move(j)});  // fits job_function's inline storage
}

/// A job that runs a callback. The callback may return `void`, or an error
/// that do_work() returns (and a pool reports): a `result<T>` holding one
/// (any T, also const or a reference), an `unexpected_error` (what
/// make_error() returns) or an `error` whose code is not `ok`. Any other
/// returned value, and a result's value, is discarded. Move-only callbacks
/// are accepted.
class callback_job final : public job {
 public:
  /// Wraps `callback` (see the class comment). An empty std::function, an empty job_function or a null
  /// pointer gives a job that is not runnable() and is refused at enqueue.
  template <thread_system::runnable F, typename D = std::decay_t<F>>
    requires not_same_as<F, callback_job>
  explicit callback_job(F&& callback, std::string name = "callback_job") : job(std::move(name)) {
    if (detail::is_empty_callable(callback)) return;  // empty std::function / null pointer: refused at enqueue
    // What it returned as result<void> (a void callback's: success).
    auto call = [](D& f) -> result<void> {
      if constexpr (std::is_void_v<std::invoke_result_t<D&>>) {
        detail::invoke(f);
        return {};
      } else {
        return detail::returned_outcome(detail::invoke(f));
      }
    };
    if constexpr (std::is_copy_constructible_v<D>) {
      callback_ = [cb = D(std::forward<F>(callback)), call]() mutable { return call(cb); };
    } else {  // move-only: held through a shared_ptr, as std::function needs a copyable target
      callback_ = [cb = std::make_shared<D>(std::forward<F>(callback)), call] { return call(*cb); };
    }
  }

  /// Runs the callback; an `invalid_argument` error if there is none (out of
  /// memory for its message, the error carries only its code).
  [[nodiscard]] result<void> do_work() override {
    if (!callback_) {
      return make_error_nothrow(error_code::invalid_argument,
                                [this] { return "callback_job '" + get_name() + "' has no callback"; });
    }
    return callback_();
  }

  /// False when constructed from an empty callback.
  [[nodiscard]] bool has_callback() const noexcept { return static_cast<bool>(callback_); }
  /// Same as has_callback().
  [[nodiscard]] bool runnable() const noexcept override { return has_callback(); }

 private:
  std::function<result<void>()> callback_;
};

}  // namespace thread_system
