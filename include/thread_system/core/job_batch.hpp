// A range of callables as a batch of jobs: the concept the pools'
// enqueue_batch(range) overloads are constrained with, and the conversion
// they share.
//
// Contract:
//   * callable_range<R>: std::ranges::begin/end work on an R lvalue and its
//     elements, decayed, are callables `f()`.
//   * detail::to_job_batch(r) takes the elements in order, moving them only
//     where they are the batch's to take: out of a container passed as an
//     rvalue (std::move(v)), and where iterating gives temporaries or rvalue
//     references (a transform view, std::views::as_rvalue, move
//     iterators). Elements of an lvalue range, and of a view onto elements
//     that live elsewhere (v | std::views::take(n), std::views::all(v)), are
//     copied: the caller's container is left as it was. A sized range is
//     reserved once. Throws std::bad_alloc, also for a size beyond what a
//     vector can hold (the pools turn it into a resource_exhausted error);
//     an element that wraps nothing (an empty std::function, a null
//     pointer) becomes an empty job_function, which the pools refuse with
//     invalid_argument.
//
// Only <iterator> is needed (it declares std::ranges::begin/end/size), not
// <ranges>: this header is part of every pool header.
#pragma once

#include <cstdint>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/job_function.hpp"

namespace thread_system {

/// The element type of a range, as iterating an lvalue of it gives it.
template <typename R>
using range_element_t = std::iter_reference_t<decltype(std::ranges::begin(std::declval<R&>()))>;

/// An iterable range whose elements are callables `f()`.
template <typename R>
concept callable_range = requires(R& r) {
  std::ranges::begin(r);
  std::ranges::end(r);
} && std::is_invocable_v<std::decay_t<range_element_t<R>>&>;

/// A callable_range that knows its size up front.
template <typename R>
concept sized_callable_range = callable_range<R> && requires(R& r) { std::ranges::size(r); };

namespace detail {

/// Whether to_job_batch() may move the elements out of a range passed as
/// `R&&` (see the contract): iterating gives temporaries or rvalue
/// references, or R is a container (not a view) passed as an rvalue.
template <typename R>
inline constexpr bool moves_elements_v = !std::is_lvalue_reference_v<range_element_t<R>> ||
                                         (!std::is_lvalue_reference_v<R> && !std::ranges::view<std::remove_cvref_t<R>>);

/// The callables of `callables` as job_functions, in order (moved or copied:
/// moves_elements_v). Throws std::bad_alloc.
template <callable_range R>
[[nodiscard]] std::vector<job_function> to_job_batch(R&& callables) {
  std::vector<job_function> batch;
  if constexpr (sized_callable_range<R>) {
    const auto size = std::ranges::size(callables);
    // (reserve() would throw std::length_error, which no pool turns into a result.)
    if (static_cast<std::uintmax_t>(size) > batch.max_size()) throw std::bad_alloc();
    batch.reserve(static_cast<std::size_t>(size));
  }
  for (auto&& c : callables) {
    if constexpr (moves_elements_v<R>) {
      batch.emplace_back(std::move(c));
    } else {
      batch.emplace_back(c);
    }
  }
  return batch;
}

}  // namespace detail
}  // namespace thread_system
