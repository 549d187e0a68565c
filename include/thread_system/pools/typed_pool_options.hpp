// typed_pool_options: the settings of a typed_thread_pool_t (both
// constructors); job_type_statistics, what get_type_statistics() gives per
// type; and detail::job_type_ranks, the pool's map from a type to its
// priority rank (0 = highest):
//   * with `priority_order`, a type's place in it (highest first); a type
//     listed twice makes the pool's constructor throw `invalid_argument`,
//     and a type not listed is refused with `invalid_argument`;
//   * without, the type's underlying value (for an enum without explicit
//     values that is declaration order), which must be in [0, 63]; another
//     value is refused with `invalid_argument`.
//
//   typed_pool_options<job_types> opt;
//   opt.priority_order = {job_types::RealTime, job_types::Batch, job_types::Background};
//   opt.aging_bound = std::chrono::milliseconds(50);
//   typed_thread_pool_t<job_types> pool{4, opt};
//
// Every field has a default that gives a working pool; the constructor
// checks them (README's refusal table says what it refuses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/diagnostics/latency_histogram.hpp"
#include "thread_system/pools/backpressure.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/typed_worker.hpp"
#include "thread_system/queues/queue_kind.hpp"

namespace thread_system {

/// Settings of a typed_thread_pool_t.
template <job_type T>
struct typed_pool_options {
  /// Pool name: in error messages, and worker threads are named "<name>-<index>".
  std::string name = "typed_thread_pool";
  /// Highest priority first, each type once; empty: by underlying value (see the header).
  std::vector<T> priority_order{};
  /// The queue each type gets (adaptive by default); any kind but `bounded`
  /// (the constructor throws invalid_argument: bound a typed pool with `backpressure`).
  pool_queue queue = pool_queue::adaptive;
  /// 0: strict priority. Otherwise the aging bound (see the header); negative:
  /// the constructor throws invalid_argument.
  std::chrono::nanoseconds aging_bound{0};
  /// As pool_options::latency_sample_every.
  std::uint32_t latency_sample_every = 32;
  /// As pool_options::backpressure: the bound covers all types together.
  thread_system::backpressure backpressure{};
  /// Null: one stderr line per failed fire-and-forget job.
  error_handler on_error{};
  /// As pool_options::worker_stack_size.
  std::size_t worker_stack_size = 0;
  /// As pool_options::idle_wait.
  std::chrono::nanoseconds idle_wait{detail::idle_yield_ns};
};

/// Per-type statistics of a typed pool (only types that have been used).
struct job_type_statistics {
  /// The type's name as typed_thread_pool_t::type_name() gives it.
  std::string type_name;
  std::size_t rank = 0;         ///< 0 = highest priority.
  std::uint64_t accepted = 0;   ///< Jobs accepted.
  std::uint64_t executed = 0;   ///< Jobs run (including failed ones).
  std::uint64_t failed = 0;     ///< Jobs that threw or reported an error.
  std::uint64_t cancelled = 0;  ///< Jobs discarded by stop(cancel_pending) or their token.
  std::uint64_t waiting = 0;    ///< Jobs queued now (approximate).
  histogram_snapshot wait;      ///< Sampled enqueue -> start times, ns.
};

namespace detail {

/// The priority ranks of a typed pool's job types (see the header).
template <job_type T>
class job_type_ranks {
 public:
  static constexpr std::size_t max_ranks = 64;

  /// Throws error_exception{invalid_argument} for more than 64 types or a
  /// type listed twice.
  explicit job_type_ranks(std::vector<T> order) : order_(std::move(order)) {
    if (order_.size() > max_ranks) {
      throw error_exception(error{error_code::invalid_argument, "typed_thread_pool: at most 64 job types"});
    }
    for (std::size_t i = 0; i < order_.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (order_[j] == order_[i]) {
          throw error_exception(
              error{error_code::invalid_argument,
                    "typed_thread_pool: job type " + type_name(order_[i]) + " appears twice in priority_order"});
        }
      }
    }
  }

  /// The rank of `type`, or `invalid_argument` naming `pool`.
  [[nodiscard]] result<std::size_t> rank_of(T type, const std::string& pool) const {
    const std::size_t rank = rank_or_none(type);
    if (rank != max_ranks) return rank;
    return no_rank(
        type, pool,
        order_.empty() ? " has no rank in [0, 63]; give a priority_order" : " is not in the pool's priority order");
  }

  /// The rank of `type`, or max_ranks if it has none (every enqueue asks;
  /// rank_of() builds the refusal).
  [[nodiscard]] std::size_t rank_or_none(T type) const noexcept {
    if (!order_.empty()) {
      for (std::size_t i = 0; i < order_.size(); ++i) {
        if (order_[i] == type) return i;
      }
      return max_ranks;
    }
    using U = job_type_value_t<T>;
    const auto v = static_cast<U>(type);
    bool in_range = static_cast<std::uint64_t>(v) < max_ranks;
    if constexpr (std::is_signed_v<U>) in_range = in_range && v >= 0;
    return in_range ? static_cast<std::size_t>(v) : max_ranks;
  }

  /// The ranks of `types` as a bit mask (bit r = rank r); all bits for none
  /// (a universal worker). `invalid_argument` as rank_of().
  [[nodiscard]] result<std::uint64_t> mask_of(const std::vector<T>& types, const std::string& pool) const {
    if (types.empty()) return ~std::uint64_t{0};
    std::uint64_t mask = 0;
    for (T t : types) {
      auto rank = rank_of(t, pool);
      if (!rank) return unexpected_error{std::move(rank).error()};
      mask |= std::uint64_t{1} << *rank;
    }
    return mask;
  }

  /// The ranks a type can have: 0..63 without a priority order, one per
  /// listed type with one.
  [[nodiscard]] std::uint64_t valid_mask() const noexcept {
    return order_.empty() || order_.size() == max_ranks ? ~std::uint64_t{0} : (std::uint64_t{1} << order_.size()) - 1;
  }

  /// The name of the type of rank `rank` ("rank <n>" for a rank no type has).
  [[nodiscard]] std::string name_of_rank(std::size_t rank) const {
    if (rank >= max_ranks || (!order_.empty() && rank >= order_.size())) return "rank " + std::to_string(rank);
    return type_name(order_.empty() ? static_cast<T>(rank) : order_[rank]);
  }

  /// "RealTime", or "type <n>" for a type without to_string().
  [[nodiscard]] static std::string type_name(T type) {
    if constexpr (has_to_string<T>) {
      return std::string(to_string(type));
    } else {
      return "type " + std::to_string(static_cast<long long>(static_cast<job_type_value_t<T>>(type)));
    }
  }

 private:
  THREAD_SYSTEM_NOINLINE static unexpected_error no_rank(T type, const std::string& pool, const char* why) {
    return make_error_nothrow(error_code::invalid_argument,
                              [&] { return "typed_thread_pool '" + pool + "': job type " + type_name(type) + why; });
  }

  std::vector<T> order_;
};

}  // namespace detail
}  // namespace thread_system
