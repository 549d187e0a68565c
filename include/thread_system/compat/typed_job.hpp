// Seed-compatible typed jobs (the seed guides' `typed_job_t` and
// `callback_typed_job_t`, with `typed_job` / `callback_typed_job` for the
// default job_types): a seed `job` (compat/job.hpp) that also carries the
// type a typed pool routes it by. Part of the seed-style layer (compat/).
//
//   auto j = std::make_unique<callback_typed_job>([]() -> result_void { return {}; }, job_types::RealTime);
//   pool->enqueue(std::move(j));                    // a typed_thread_pool_t<job_types>
//
// Contract
//   * type() is the type given at construction; typed_thread_pool_t::enqueue
//     routes the job to that type's queue, as enqueue(type, job) would.
//   * Everything else is compat/job.hpp's contract: an error result from
//     do_work() counts the job as failed with `job_failed`; a
//     callback_typed_job_t built from an empty callback is not runnable()
//     and a pool refuses it with `invalid_argument`.
//
// Thread-safety: a job is run by exactly one worker, once.
#pragma once

#include <string>
#include <utility>

#include "thread_system/compat/job.hpp"
#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/typed_worker.hpp"

namespace thread_system {

/// Seed-style job with a type: `do_work()` as for `job`.
template <job_type T>
class typed_job_t : public job {
 public:
  /// A job of `type`, named `name`.
  explicit typed_job_t(T type, std::string name = "typed_job") : job(std::move(name)), type_(type) {}
  /// The type the job was created with; it picks the queue the job goes to.
  [[nodiscard]] T type() const noexcept { return type_; }

 private:
  T type_;
};

/// A typed job that runs a callback returning `result<void>` or `void`.
template <job_type T>
class callback_typed_job_t final : public typed_job_t<T> {
 public:
  /// Wraps `callback` as a job of `type`. An empty std::function or a null pointer gives a job that is not
  /// runnable() and is refused at enqueue.
  template <thread_system::runnable F>
    requires not_same_as<F, callback_typed_job_t>
  callback_typed_job_t(F&& callback, T type, std::string name = "callback_typed_job")
      : typed_job_t<T>(type, name), inner_(std::forward<F>(callback), std::move(name)) {}

  /// Runs the callback; an `invalid_argument` error if there is none.
  [[nodiscard]] result<void> do_work() override { return inner_.do_work(); }
  /// False when constructed from an empty callback.
  [[nodiscard]] bool has_callback() const noexcept { return inner_.has_callback(); }
  /// Same as has_callback().
  [[nodiscard]] bool runnable() const noexcept override { return inner_.has_callback(); }

 private:
  callback_job inner_;
};

/// The seed's names for typed jobs of the default job types.
using typed_job = typed_job_t<job_types>;
using callback_typed_job = callback_typed_job_t<job_types>;

}  // namespace thread_system
