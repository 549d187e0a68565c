// Compiler hints shared by the library's headers.
#pragma once

// Forces inlining of a small function on a hot path where the compiler's
// inlining budget would otherwise leave a call (e.g. the body of a critical
// section reached through a larger caller). A hint only: no behaviour
// depends on it.
#if defined(__GNUC__) || defined(__clang__)
#define THREAD_SYSTEM_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define THREAD_SYSTEM_ALWAYS_INLINE inline
#endif

// Keeps a slow path out of line, so the fast path it is split from stays
// small enough to inline. A hint only, like THREAD_SYSTEM_ALWAYS_INLINE.
#if defined(__GNUC__) || defined(__clang__)
#define THREAD_SYSTEM_NOINLINE [[gnu::noinline]]
#else
#define THREAD_SYSTEM_NOINLINE
#endif

// std::stop_token / std::stop_source / std::stop_callback (and std::jthread):
// C++20, but behind -fexperimental-library in libc++ up to 19. The library
// compiles its std::stop_token interop only where the standard library
// provides it (the feature-test macro __cpp_lib_jthread covers both), and
// is complete without it. Override with -DTHREAD_SYSTEM_HAS_STOP_TOKEN=0/1.
#if !defined(THREAD_SYSTEM_HAS_STOP_TOKEN)
#if __has_include(<version>)
#include <version>
#endif
#if defined(__cpp_lib_jthread) && __cpp_lib_jthread >= 201911L
#define THREAD_SYSTEM_HAS_STOP_TOKEN 1
#else
#define THREAD_SYSTEM_HAS_STOP_TOKEN 0
#endif
#endif
