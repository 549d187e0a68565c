// The library's one monotonic time source: steady_clock in nanoseconds
// since its epoch, as an integer. Every deadline, latency stamp, busy-time
// total and aging check in the library reads it, so their values compare
// with each other. steady_clock never goes backwards, so differences of two
// readings on any threads are non-negative when the readings are ordered.
#pragma once

#include <cstdint>

#include "thread_system/detail/chrono.hpp"

namespace thread_system::detail {

/// Nanoseconds on std::chrono::steady_clock (non-zero on every real clock).
[[nodiscard]] inline std::uint64_t steady_now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// The same reading as a signed count, for deadline arithmetic that may go
/// below zero (time left until a deadline).
[[nodiscard]] inline std::int64_t steady_now_ns_signed() noexcept { return static_cast<std::int64_t>(steady_now_ns()); }

}  // namespace thread_system::detail
