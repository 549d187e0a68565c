// Minimal wait/wake on a 32-bit atomic word. On Linux this is the futex
// system call directly (predictable cost, no hidden spinning); elsewhere it
// falls back to C++20 std::atomic::wait/notify.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>
#if !defined(__linux__)
#include <thread>
#include "thread_system/detail/chrono.hpp"
#endif

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace thread_system::detail {

/// Blocks while `word == expected` (may return spuriously).
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  // The kernel compares the word with `expected` atomically with going to
  // sleep, so a wake between our check and this call is never lost.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word.wait(expected, std::memory_order_acquire);  // pairs with the release in the waker's store
#endif
}

/// Wakes up to `count` threads blocked in futex_wait on `word`.
inline void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
#if defined(__linux__)
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
#else
  if (count == 1) {
    word.notify_one();
  } else {
    word.notify_all();
  }
#endif
}

inline constexpr int futex_wake_all = INT_MAX;

/// Blocks while `word == expected`, for at most `timeout_ns` (may return
/// early or spuriously; the caller re-checks its condition and the clock).
inline void futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::int64_t timeout_ns) noexcept {
  if (timeout_ns <= 0) return;
#if defined(__linux__)
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
#else
  // No portable timed atomic wait in C++20: poll with short sleeps.
  (void)word;
  (void)expected;
  std::this_thread::sleep_for(std::chrono::nanoseconds(timeout_ns < 100'000 ? timeout_ns : 100'000));
#endif
}

}  // namespace thread_system::detail
