// Spin-wait helpers: the pause instruction for spin loops and how long an
// idle thread keeps polling (yielding its CPU) before it sleeps. Used by the
// spin lock, the helping wait and the worker loop.
#pragma once

#include <cstdint>

namespace thread_system::detail {

/// How long a helping wait with nothing to help (future.hpp) keeps polling,
/// yielding the CPU between polls, before it sleeps, and the default of
/// pool_options::idle_wait, the same for an idle worker. See pool_core.cpp
/// for the reasons.
inline constexpr std::int64_t idle_yield_ns = 100'000;

/// Pause instruction for spin loops.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace thread_system::detail
