// A range of callables as a batch of jobs: the concept the pools'
// enqueue_batch(range) overloads are constrained with, and the conversion
// they share.
//
// Contract:
//   * callable_range<R>: std::ranges::begin/end work on an R lvalue and its
//     elements, decayed, are callables `f()`.
//   * detail::to_job_batch(r) moves the elements out of an rvalue range and
//     copies them from an lvalue one, in order; a sized range is reserved
//     once. Throws std::bad_alloc (the pools turn it into a
//     resource_exhausted error); an element that wraps nothing (an empty
//     std::function, a null pointer) becomes an empty job_function, which
//     the pools refuse with invalid_argument.
//
// Only <iterator> is needed (it declares std::ranges::begin/end/size), not
// <ranges>: this header is part of every pool header.
#pragma once

#include <iterator>
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

/// The callables of `callables` as job_functions, in order (moved out of an
/// rvalue range, copied from an lvalue one). Throws std::bad_alloc.
template <callable_range R>
[[nodiscard]] std::vector<job_function> to_job_batch(R&& callables) {
  std::vector<job_function> batch;
  if constexpr (sized_callable_range<R>) batch.reserve(static_cast<std::size_t>(std::ranges::size(callables)));
  for (auto&& c : callables) {
    if constexpr (std::is_rvalue_reference_v<R&&>) {
      batch.emplace_back(std::move(c));
    } else {
      batch.emplace_back(c);
    }
  }
  return batch;
}

}  // namespace detail
}  // namespace thread_system
