// Chaos build: random yields injected at the library's atomic points, so
// interleavings that are rare on an idle machine happen within seconds.
//
// Enabled by the CMake option THREAD_SYSTEM_CHAOS (the `chaos` preset).
// The seed comes from THREAD_SYSTEM_CHAOS_SEED or, when unset, from the
// clock; it is printed once to stderr. Each thread's sequence of yield
// decisions is a function of the seed and the order in which threads first
// reach a chaos point, so re-running with the printed seed replays the same
// decisions (the OS scheduler still adds its own nondeterminism).
//
// In normal builds THREAD_SYSTEM_CHAOS_POINT() expands to nothing.
#pragma once

#if defined(THREAD_SYSTEM_CHAOS)

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "thread_system/detail/chrono.hpp"

namespace thread_system::detail {

inline std::uint64_t chaos_seed() noexcept {
  static const std::uint64_t seed = [] {
    std::uint64_t s = 0;
    if (const char* env = std::getenv("THREAD_SYSTEM_CHAOS_SEED")) {
      s = std::strtoull(env, nullptr, 10);
    } else {
      s = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    std::fprintf(stderr, "thread_system chaos build: seed %llu (replay with THREAD_SYSTEM_CHAOS_SEED=%llu)\n",
                 static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

inline void chaos_point() noexcept {
  static std::atomic<std::uint64_t> next_thread{0};
  thread_local std::uint64_t state = [] {
    // relaxed: only a distinct number per thread is needed.
    const std::uint64_t index = next_thread.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t s = chaos_seed() ^ ((index + 1) * 0x9E3779B97F4A7C15ULL);
    return s == 0 ? 1 : s;
  }();
  // xorshift64
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  if ((state & 7U) == 0) std::this_thread::yield();  // one point in eight
}

}  // namespace thread_system::detail

#define THREAD_SYSTEM_CHAOS_POINT() ::thread_system::detail::chaos_point()

#else

#define THREAD_SYSTEM_CHAOS_POINT() static_cast<void>(0)

#endif
