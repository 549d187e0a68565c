// Helpers shared by the coroutine tests (tests/coro/*_test.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "thread_system/coro/task.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system::coro_test {

// Where this call's frame is: a mark of the stack's depth (it grows down).
[[gnu::noinline]] inline std::uintptr_t stack_depth_mark() noexcept {
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}
// A task that finishes at once with the depth it ran at.
inline task<std::uintptr_t> marked() { co_return stack_depth_mark(); }

// The span of stack depths a test's marks fell in.
struct depth_span {
  std::uintptr_t lowest = UINTPTR_MAX;
  std::uintptr_t highest = 0;
  void note(std::uintptr_t at) noexcept {
    lowest = std::min(lowest, at);
    highest = std::max(highest, at);
  }
  [[nodiscard]] std::uintptr_t width() const noexcept { return highest - lowest; }
};

// Counts live frames of a test's tasks through a local's lifetime.
struct frame_probe {
  std::atomic<int>* live;
  // relaxed: read after stop()/sync_wait()/a join, which order it.
  explicit frame_probe(std::atomic<int>* l) : live(l) { live->fetch_add(1, std::memory_order_relaxed); }
  frame_probe(const frame_probe&) = delete;
  frame_probe& operator=(const frame_probe&) = delete;
  ~frame_probe() { live->fetch_sub(1, std::memory_order_relaxed); }
};

// The messages of the failures a pool's error handler received.
class failure_log {
 public:
  void attach(thread_pool& pool) {
    pool.set_error_handler([this](const std::exception_ptr& e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::lock_guard lock(mutex_);
        messages_.emplace_back(ex.what());
      }
    });
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

inline task<int> value_of(int v) { co_return v; }

inline task<int> on_pool(thread_pool& pool, int v) {
  co_await pool.schedule();
  co_return v;
}

inline task<void> throws_after_schedule(thread_pool& pool) {
  co_await pool.schedule();
  throw std::runtime_error("boom");
}

}  // namespace thread_system::coro_test
