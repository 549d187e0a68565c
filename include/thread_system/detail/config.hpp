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
