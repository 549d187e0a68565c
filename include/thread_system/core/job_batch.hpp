// A range of callables as a batch of jobs: the concept the pools'
// enqueue_batch(range) overloads are constrained with, and the conversion
// they share.
//
// Contract:
//   * callable_range<R>: std::ranges::begin/end work on an R lvalue and its
//     elements, decayed, are callables `f()`.
//   * detail::fill_job_batch(r, batch) appends the elements to the empty
//     vector `batch` as job_functions, in order, moving them only
//     where they are the batch's to take: out of a container passed as an
//     rvalue (std::move(v)), and where iterating gives temporaries or rvalue
//     references (a transform view, std::views::as_rvalue, move
//     iterators). Elements of an lvalue range, and of a view onto elements
//     that live elsewhere (v | std::views::take(n), std::views::all(v)), are
//     copied: the caller's container is left as it was. A sized range is
//     reserved once. Throws std::bad_alloc, also for a size beyond what a
//     vector can hold (the pools turn it into a resource_exhausted error;
//     what was appended before stays in `batch`);
//     an element that wraps nothing (an empty std::function, a null
//     pointer) becomes an empty job_function, which the pools refuse with
//     invalid_argument.
//   * detail::offer_job_batch(r, push) hands that batch to `push` and, when
//     `push` refuses it (or the conversion or `push` throws), moves every
//     callable it moved out of an element of `r` back into that element:
//     a refused batch is left with the caller, as a refused job_function
//     is (a retry of `enqueue_batch(std::move(v))` finds `v` as it was).
//     A contiguous range of job_functions the batch may take (a
//     std::vector<job_function> passed as an rvalue) is offered in place,
//     without a copy: `push` moves a job only once it accepts the batch.
//     Not given back: elements of a range that cannot be walked twice (an
//     input range), and callables whose type cannot be put back (a move
//     constructor that may throw and no move assignment).
//
// Only <iterator> is needed (it declares std::ranges::begin/end/size), not
// <ranges>: this header is part of every pool header.
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/error.hpp"
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

/// Whether fill_job_batch() may move the elements out of a range passed as
/// `R&&` (see the contract): iterating gives temporaries or rvalue
/// references, or R is a container (not a view) passed as an rvalue.
template <typename R>
inline constexpr bool moves_elements_v = !std::is_lvalue_reference_v<range_element_t<R>> ||
                                         (!std::is_lvalue_reference_v<R> && !std::ranges::view<std::remove_cvref_t<R>>);

/// Appends the callables of `callables` to `batch` (empty) as job_functions,
/// in order (moved or copied: moves_elements_v). Throws std::bad_alloc;
/// what was appended before an exception stays in `batch`.
template <callable_range R>
void fill_job_batch(R&& callables, std::vector<job_function>& batch) {
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
}

/// Whether offer_job_batch() offers the elements of `R&&` in place: a
/// contiguous, sized range of job_functions it may move from.
template <typename R>
inline constexpr bool offers_in_place_v =
    moves_elements_v<R> && std::is_same_v<range_element_t<R>, job_function&> &&
    std::contiguous_iterator<decltype(std::ranges::begin(std::declval<R&>()))> && sized_callable_range<R>;

/// Whether the callables fill_job_batch() moves out of the elements of `R&&`
/// can be given back: elements it moved from (lvalue or rvalue references
/// to non-const objects), in a range that can be walked a second time.
template <typename R>
inline constexpr bool gives_back_v = moves_elements_v<R> && std::is_reference_v<range_element_t<R>> &&
                                     !std::is_const_v<std::remove_reference_t<range_element_t<R>>> &&
                                     std::forward_iterator<decltype(std::ranges::begin(std::declval<R&>()))>;

/// Puts `held`, the callable that was moved out of `element`, back into it.
template <typename E>
void put_back(E& element, E& held) {
  if constexpr (std::is_nothrow_move_constructible_v<E>) {
    // Rebuilt in place: a lambda has no move assignment.
    std::destroy_at(std::addressof(element));
    std::construct_at(std::addressof(element), std::move(held));
  } else if constexpr (std::is_move_assignable_v<E>) {
    element = std::move(held);
  } else {
    (void)element;  // cannot be put back (see the contract)
    (void)held;
  }
}

/// Moves the callables of the first batch.size() jobs back into the
/// elements of `callables` they were moved out of (see the contract).
template <callable_range R>
void give_back(R& callables, std::span<job_function> batch) {
  if constexpr (gives_back_v<R>) {
    using element = std::remove_cvref_t<range_element_t<R>>;
    std::size_t i = 0;
    for (auto&& c : callables) {
      if (i == batch.size()) break;
      job_function& fn = batch[i++];
      if constexpr (std::is_same_v<element, job_function>) {
        c = std::move(fn);
      } else if constexpr (job_callable<element>) {
        // Empty when the element wrapped nothing (an empty std::function):
        // then there is nothing to give back.
        if (element* held = fn.get_if<element>()) put_back(c, *held);
      }
    }
  } else {
    (void)callables;  // nothing to give back (see the contract)
    (void)batch;
  }
}

/// Hands the callables of `callables` to `push` (a
/// `result<void>(std::span<job_function>)`) as one batch, and gives them
/// back when it refuses (see the contract).
template <callable_range R, typename Push>
[[nodiscard]] result<void> offer_job_batch(R&& callables, Push&& push) {
  if constexpr (offers_in_place_v<R>) {
    const auto size = static_cast<std::size_t>(std::ranges::size(callables));
    return push(std::span<job_function>(std::to_address(std::ranges::begin(callables)), size));
  } else {
    std::vector<job_function> batch;
    result<void> r;
    try {
      fill_job_batch(std::forward<R>(callables), batch);
      r = push(std::span<job_function>(batch));
    } catch (...) {
      // The conversion ran out of memory part-way (a callable boxed on the
      // heap), or the push threw: what was moved goes back.
      give_back(callables, batch);
      throw;
    }
    if (!r) give_back(callables, batch);
    return r;
  }
}

}  // namespace detail
}  // namespace thread_system
