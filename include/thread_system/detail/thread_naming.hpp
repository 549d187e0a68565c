// Platform helpers for worker threads (implemented in src/platform.cpp).
#pragma once

#include <string_view>

#include "thread_system/core/error.hpp"

namespace thread_system::detail {

/// Names the calling thread for the OS (visible in top, gdb, perf). Linux
/// keeps at most 15 bytes; longer names are truncated, not refused.
result<void> set_current_thread_name(std::string_view name) noexcept;

/// Pause instruction for spin loops.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace thread_system::detail
