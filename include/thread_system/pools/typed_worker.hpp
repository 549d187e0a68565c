// The parts of a typed pool that a user builds before the pool: the
// job_type concept (what a typed pool can be keyed by) and
// typed_thread_worker_t (a worker and the types it serves). The pool is in
// typed_thread_pool.hpp; the seed-style typed jobs (typed_job_t,
// callback_typed_job_t) in compat/typed_job.hpp.
//
//   auto w = std::make_unique<typed_thread_worker_t<job_types>>();
//   w->set_responsibilities({job_types::RealTime});   // a specialist
//   pool->add_worker(std::move(w));
//
// Contract
//   * A worker with no responsibilities is universal: it serves every type.
//   * Responsibilities are fixed once the worker is added to a pool (or
//     made by one, as resize() does): set_responsibilities() then returns
//     `already_started` and changes nothing. That holds for any pool: a
//     plain thread_pool takes a typed worker as a thread_worker (it has no
//     types, so the worker runs every job), and its responsibilities are
//     fixed all the same.
//
// Threading: a worker's responsibilities may be read from any thread once it
// is in a pool; set_responsibilities() before that, from one thread.
#pragma once

#include <initializer_list>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/pools/thread_worker.hpp"

namespace thread_system {

/// Types a typed pool can be keyed by.
template <typename T>
concept job_type = std::is_enum_v<T> || std::is_integral_v<T>;

template <typename T>
class typed_thread_pool_t;

// compat/typed_job.hpp: the seed-style typed jobs.
template <job_type T>
class typed_job_t;

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
    if (belongs_to_pool()) {  // set by the pool that took the worker, typed or not
      return make_error(error_code::already_started,
                        "typed_thread_worker: responsibilities are fixed once the worker is added to a pool");
    }
    responsibilities_ = std::move(types);
    return {};
  }
  /// As set_responsibilities(std::vector<T>); `resource_exhausted` when
  /// the list cannot be copied (out of memory), nothing changed.
  result<void> set_responsibilities(std::initializer_list<T> types) {
    std::vector<T> copy;
    try {
      copy.assign(types.begin(), types.end());
    } catch (const std::bad_alloc&) {
      return make_error(error_code::resource_exhausted, "typed_thread_worker: out of memory for its responsibilities");
    }
    return set_responsibilities(std::move(copy));
  }

  /// The types this worker serves (empty: all).
  [[nodiscard]] const std::vector<T>& get_responsibilities() const noexcept { return responsibilities_; }
  /// True when the worker serves every type (no responsibilities set).
  [[nodiscard]] bool is_universal() const noexcept { return responsibilities_.empty(); }

 private:
  template <typename U>
  friend class typed_thread_pool_t;

  std::vector<T> responsibilities_;
};

}  // namespace thread_system
