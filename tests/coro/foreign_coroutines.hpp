// Coroutine types that are not a task<T> ("foreign" coroutines), for the
// tests of what the library's awaitables do with them.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

namespace thread_system::coro_test {

// Starts at once and frees its frame at its end; an exception that leaves
// its body terminates (a test catches what it expects inside).
struct eager_coroutine {
  struct promise_type {
    eager_coroutine get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

// Its promise rethrows from unhandled_exception(): an exception in its body
// leaves resume() to whoever resumed it, and the coroutine stays suspended
// at its final point. It starts at once; the returned object owns the frame
// and destroys it (the test keeps it until the coroutine has finished or
// failed).

class rethrowing_coroutine {
 public:
  struct promise_type {
    rethrowing_coroutine get_return_object() noexcept {
      return rethrowing_coroutine(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    static std::suspend_never initial_suspend() noexcept { return {}; }
    static std::suspend_always final_suspend() noexcept { return {}; }
    static void return_void() noexcept {}
    [[noreturn]] static void unhandled_exception() { throw; }
  };

  rethrowing_coroutine(rethrowing_coroutine&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  rethrowing_coroutine(const rethrowing_coroutine&) = delete;
  rethrowing_coroutine& operator=(const rethrowing_coroutine&) = delete;
  rethrowing_coroutine& operator=(rethrowing_coroutine&&) = delete;
  ~rethrowing_coroutine() {
    if (h_) h_.destroy();
  }
  /// Finished, or failed (suspended at its final point).
  [[nodiscard]] bool done() const noexcept { return h_.done(); }

 private:
  explicit rethrowing_coroutine(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
  std::coroutine_handle<promise_type> h_;
};

}  // namespace thread_system::coro_test
