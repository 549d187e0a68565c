// The parts of a typed pool that a user builds before the pool: the
// job_type concept (what a typed pool can be keyed by), typed_thread_worker_t
// (a worker and the types it serves) and the seed-style typed jobs,
// typed_job_t and callback_typed_job_t. The pool is in typed_thread_pool.hpp.
//
//   auto w = std::make_unique<typed_thread_worker_t<job_types>>();
//   w->set_responsibilities({job_types::RealTime});   // a specialist
//   pool->add_worker(std::move(w));
//
// Contract
//   * A worker with no responsibilities is universal: it serves every type.
//   * Responsibilities are fixed once the worker is added to a pool (or
//     made by one, as resize() does): set_responsibilities() then returns
//     `already_started` and changes nothing.
//   * A typed job's type() picks the queue it goes to; a callback_typed_job_t
//     built from an empty callback is not runnable() and a pool refuses it
//     with `invalid_argument`.
//
// Threading: a worker's responsibilities may be read from any thread once it
// is in a pool; set_responsibilities() before that, from one thread.
#pragma once

#include <atomic>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job.hpp"
#include "thread_system/pools/thread_worker.hpp"

namespace thread_system {

/// Types a typed pool can be keyed by.
template <typename T>
concept job_type = std::is_enum_v<T> || std::is_integral_v<T>;

template <typename T>
class typed_thread_pool_t;

namespace detail {
template <typename T>
using job_type_value_t =
    typename std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>, std::type_identity<T>>::type;
}  // namespace detail

/// A worker of a typed pool. Its responsibilities are the job types it
/// serves; none means every type (a universal worker).
template <job_type T>
class typed_thread_worker_t : public thread_worker {
 public:
  /// A worker serving `responsibilities` (empty: every type), optionally named as for thread_worker.
  explicit typed_thread_worker_t(std::vector<T> responsibilities = {}, std::string name = {})
      : thread_worker(std::move(name)), responsibilities_(std::move(responsibilities)) {}
  /// A universal worker named `name` (as for thread_worker).
  explicit typed_thread_worker_t(std::string name) : thread_worker(std::move(name)) {}

  /// Sets the types this worker serves (empty: all). Only before the worker
  /// is added to a pool; afterwards `already_started`.
  result<void> set_responsibilities(std::vector<T> types) {
    if (attached_.load(std::memory_order_acquire)) {  // pairs with the release in the pool's add_worker
      return make_error(error_code::already_started,
                        "typed_thread_worker: responsibilities are fixed once the worker is added to a pool");
    }
    responsibilities_ = std::move(types);
    return {};
  }
  /// As set_responsibilities(std::vector<T>).
  result<void> set_responsibilities(std::initializer_list<T> types) {
    return set_responsibilities(std::vector<T>(types));
  }

  /// The types this worker serves (empty: all).
  [[nodiscard]] const std::vector<T>& get_responsibilities() const noexcept { return responsibilities_; }
  /// True when the worker serves every type (no responsibilities set).
  [[nodiscard]] bool is_universal() const noexcept { return responsibilities_.empty(); }

 private:
  template <typename U>
  friend class typed_thread_pool_t;

  std::vector<T> responsibilities_;
  std::atomic<bool> attached_{false};
};

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

}  // namespace thread_system
