// The named constraints of the public API: the pools' enqueue / submit and
// their typed forms, task_group::run, callback jobs, cancellation callbacks
// and service factories are constrained by these, so an error names the
// concept that failed instead of a trait expression. (parallel_for and
// parallel_reduce use std::invocable; timer functions, which may take a
// timer_tick, are checked by a static_assert in timer_queue.)
//
//   runnable<F>               f() can run as a job: a decayed copy of F is
//                             invocable with no arguments (a returned error
//                             fails the job, any other value is ignored:
//                             core/job_function.hpp).
//   submittable<F, Args...>   f(args...) can run as a submitted job: a decayed
//                             F invocable with decayed Args (submit() returns
//                             a future of its result), not returning an
//                             rvalue reference (a future holds a value or an
//                             lvalue reference, as std::future does).
//   nullable_callable<F>      F can be empty (a function or member pointer, a
//                             std::function, anything that compares with
//                             nullptr): the library checks it (with
//                             detail::is_empty_callable, which never compares
//                             a function named directly) and refuses an
//                             empty one with invalid_argument.
//   factory_of<F, I>          a decayed F invocable with no arguments returns
//                             something convertible to std::shared_ptr<I>
//                             (service_registry).
//   converts_to_each<To, From...>  every From converts to To.
//   has_to_string<T>          to_string(t) is found for a T (typed pools name
//                             their job types with it).
//   trivially_copyable<T>     T can be copied with memcpy (work_stealing_deque).
//   not_same_as<T, Self>      T, without cv/ref, is not Self (keeps a
//                             forwarding constructor from hiding the copy).
#pragma once

#include <concepts>
#include <memory>
#include <type_traits>

namespace thread_system {

/// f() can run as a job (a decayed copy of F invocable with no arguments).
template <typename F>
concept runnable = std::is_invocable_v<std::decay_t<F>&>;

/// f(args...) can run as a submitted job (decayed F and Args, as std::async copies them): its result is
/// what a future can hold, a value or an lvalue reference.
template <typename F, typename... Args>
concept submittable = std::is_invocable_v<std::decay_t<F>, std::decay_t<Args>...> &&
                      !std::is_rvalue_reference_v<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>>;

/// F can be empty and is compared with nullptr before it is accepted.
template <typename F>
concept nullable_callable = std::is_pointer_v<std::decay_t<F>> || std::is_member_pointer_v<std::decay_t<F>> ||
                            requires(const std::decay_t<F>& f) { f == nullptr; };

namespace detail {

/// True when `f` is empty: a null function or member pointer, an empty
/// std::function, anything else of a nullable_callable type equal to
/// nullptr. A function named directly (`pool.enqueue(my_function)`, F a
/// function type bound by reference) is never empty and is not compared:
/// comparing a reference to a function with nullptr is always false, and
/// GCC warns about it (-Wnonnull-compare), which -Werror turns into an
/// error in the caller's build.
template <typename F>
[[nodiscard]] constexpr bool is_empty_callable([[maybe_unused]] const F& f) noexcept {
  if constexpr (!std::is_function_v<F> && nullable_callable<F>) {
    return f == nullptr;
  } else {
    return false;
  }
}

}  // namespace detail

/// A factory of I: f() returns something convertible to std::shared_ptr<I>.
template <typename F, typename I>
concept factory_of = std::is_convertible_v<std::invoke_result_t<std::decay_t<F>&>, std::shared_ptr<I>>;

/// Every From converts to To.
template <typename To, typename... From>
concept converts_to_each = (std::is_convertible_v<const From&, To> && ...);

/// to_string(t) names a T (found by argument-dependent lookup).
template <typename T>
concept has_to_string = requires(const T& t) { to_string(t); };

/// T can be copied with memcpy (a work_stealing_deque element).
template <typename T>
concept trivially_copyable = std::is_trivially_copyable_v<T>;

/// A type other than Self (excluding the copy/move constructors from a forwarding constructor).
template <typename T, typename Self>
concept not_same_as = !std::is_same_v<std::remove_cvref_t<T>, Self>;

}  // namespace thread_system
