// std::function, std::reference_wrapper / std::ref and detail::invoke (the
// semantics of std::invoke), without the rest of <functional>. In C++20 mode
// libstdc++'s <functional> also includes <unordered_map>, <vector>, <array>
// and the algorithms (for std::boyer_moore_searcher and friends): about a
// tenth of a second of every translation unit that includes a pool header,
// on a 2-core machine (`-fsyntax-only`, GCC 12), for parts no header of this
// library uses. libstdc++'s <bits/std_function.h> (which includes
// <bits/refwrap.h> and <bits/invoke.h>) holds exactly the part used here;
// other standard libraries get <functional>. std::invoke itself is defined
// in <functional>, so the headers call detail::invoke, which is std::invoke
// (or libstdc++'s std::__invoke, the function std::invoke forwards to).
// Code that uses other parts of <functional> includes it itself, as the
// standard asks of it anyway.
#pragma once

#include <type_traits>
#include <utility>
#include <version>  // defines __GLIBCXX__ for the test below

#if defined(__GLIBCXX__) && __has_include(<bits/std_function.h>) && __has_include(<bits/invoke.h>) && \
    __has_include(<bits/refwrap.h>)
#include <bits/invoke.h>        // IWYU pragma: export
#include <bits/refwrap.h>       // IWYU pragma: export
#include <bits/std_function.h>  // IWYU pragma: export
#define THREAD_SYSTEM_DETAIL_STD_INVOKE_IMPL std::__invoke
#else
#include <functional>  // IWYU pragma: export
#define THREAD_SYSTEM_DETAIL_STD_INVOKE_IMPL std::invoke
#endif

namespace thread_system::detail {

/// std::invoke(f, args...): calls a callable, or a pointer to member on an
/// object, a reference_wrapper or a pointer. Not viable (substitution
/// failure) when `f` cannot be called with `args`, as std::invoke.
template <typename F, typename... Args>
constexpr std::invoke_result_t<F, Args...> invoke(F&& f,
                                                  Args&&... args) noexcept(std::is_nothrow_invocable_v<F, Args...>) {
  return THREAD_SYSTEM_DETAIL_STD_INVOKE_IMPL(std::forward<F>(f), std::forward<Args>(args)...);
}

}  // namespace thread_system::detail

#undef THREAD_SYSTEM_DETAIL_STD_INVOKE_IMPL
