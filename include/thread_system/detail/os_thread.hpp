// os_thread: a joinable thread with a chosen stack size, whose creation
// failures come back as errors instead of exceptions.
//
// std::thread cannot set a stack size and reports failures by throwing
// (std::system_error, or std::bad_alloc for its state). The library's
// threads (pool workers, the timer thread, thread_base) are started through
// this instead:
//
//   auto t = detail::os_thread::start([] { work(); }, 1 << 20);  // 1 MiB stack
//   if (!t) return t.error();          // resource_exhausted or invalid_argument
//   ...
//   t->join();
//
// Contract:
//   * start() runs `f` on a new thread, or returns `resource_exhausted`
//     (the OS refused the thread, or memory for it ran out) without having
//     run it. A `stack_size` no mapping can have (above PTRDIFF_MAX, also
//     once rounded up to whole pages), or one
//     the platform rejects as such, is `invalid_argument`; a size it merely
//     cannot give now (more than the address space or its limits leave) is
//     `resource_exhausted`. `stack_size` 0 means the platform default (on Linux the
//     RLIMIT_STACK soft limit, usually 8 MiB); smaller sizes are raised to
//     64 KiB of usable stack (library_min_stack) plus what the thread
//     library keeps in the stack's top (glibc: the program's static
//     thread-local storage and the thread descriptor, which it takes from
//     the size asked for), or to the platform minimum if larger; every size
//     is rounded up to whole pages. A size above that floor is passed on as
//     it is (with glibc the static TLS still comes out of it). Where threads cannot be given
//     a stack size (no POSIX threads), a non-zero size is `not_supported`.
//   * `f` must not throw: an exception escaping it terminates the process,
//     as with std::thread.
//   * join() waits for the thread; it must be called exactly once for a
//     started thread, and not from that thread. The destructor of a
//     joinable os_thread joins it (a thread is never silently detached).
//   * Everything the thread did is visible to the thread whose join()
//     returned; everything the creating thread did before start() is
//     visible to `f`.
//   * With POSIX threads, `f` (with what it captured) is destroyed by the
//     thread whose join() returns, or after detach() by whichever of the
//     thread and detach() comes last: a thread whose `f` allocates nothing
//     frees nothing either (with glibc its first free(), like its first
//     malloc(), would give it a malloc arena of its own).
//   * native_handle() is the platform's handle (pthread_t on Linux and
//     macOS) while the thread is joinable; after join() it names nothing.
//   * Not thread-safe: one os_thread object is used by one thread at a time.
//
// Testing seam: detail::testing::set_thread_start_budget(n) makes the next
// n starts succeed and every later start fail with resource_exhausted,
// until it is reset with -1 (the default: no limit). Only tests call it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/native_thread.hpp"

namespace thread_system::detail {

class os_thread {
 public:
  /// The platform's thread handle: pthread_t where threads are POSIX threads.
  using native_handle_type = native_thread_handle;

  os_thread() noexcept = default;
  os_thread(os_thread&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  os_thread& operator=(os_thread&& other) noexcept {
    if (this != &other) {
      if (joinable()) join();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  os_thread(const os_thread&) = delete;
  os_thread& operator=(const os_thread&) = delete;
  ~os_thread() {
    if (joinable()) join();
  }

  /// Starts `f` on a new thread with `stack_size` bytes of stack (0: the
  /// platform default). See the header for the errors.
  template <typename F>
  [[nodiscard]] static result<os_thread> start(F&& f, std::size_t stack_size = 0) noexcept {
    using body_t = std::decay_t<F>;
    static_assert(std::is_invocable_v<body_t&>, "os_thread::start needs a callable f()");
    struct body final : entry {
      explicit body(F&& g) : fn(std::forward<F>(g)) {}
      void run() noexcept override { fn(); }
      body_t fn;
    };
    std::unique_ptr<entry> e;
    try {
      e = std::make_unique<body>(std::forward<F>(f));
    } catch (...) {  // out of memory (or the callable's copy threw): nothing started
      return out_of_memory();
    }
    return start_entry(std::move(e), stack_size);
  }

  [[nodiscard]] bool joinable() const noexcept { return handle_ != nullptr; }
  /// Waits for the thread to finish. Precondition: joinable(), and not
  /// called from the thread itself.
  void join() noexcept;
  /// Lets the thread run on unjoined (its resources are freed when it
  /// ends); this object no longer refers to it. Precondition: joinable().
  void detach() noexcept;
  /// True when called on this thread.
  [[nodiscard]] bool is_current() const noexcept;
  /// The thread's platform handle. Precondition: joinable(); valid until join().
  [[nodiscard]] native_handle_type native_handle() const noexcept;

  /// The least stack a thread of the library gets when a size is asked
  /// for: its own code needs more than the platform's bare minimum (a
  /// worker's default error report formats on the stack).
  static constexpr std::size_t library_min_stack = std::size_t{64} * 1024;
  /// The largest stack size start() does not refuse as `invalid_argument`:
  /// no mapping is larger than PTRDIFF_MAX (pointer differences within it
  /// must be representable).
  static constexpr std::size_t max_stack_size = static_cast<std::size_t>(PTRDIFF_MAX);
  /// The least stack size a thread gets: library_min_stack plus what the
  /// thread library keeps in a stack's top (glibc: static TLS and the thread
  /// descriptor; 0 elsewhere), or the platform's minimum if larger, rounded
  /// up to whole pages.
  [[nodiscard]] static std::size_t min_stack_size() noexcept;
  /// The stack size a thread started with `requested` bytes (0: default) gets.
  [[nodiscard]] static std::size_t effective_stack_size(std::size_t requested) noexcept;
  /// What of effective_stack_size(requested) the thread's frames may use at
  /// least: the size less what the thread library keeps in the stack's top
  /// (glibc: static TLS and the thread descriptor; in a statically linked
  /// program, where glibc does not say, an estimate from above).
  /// Found without allocating (unlike current_stack_low()); a reused cached
  /// stack may be larger.
  [[nodiscard]] static std::size_t usable_stack_size(std::size_t requested) noexcept;
  /// True when `requested`, or what rounding it up to whole pages makes of
  /// it, is above max_stack_size: refused as `invalid_argument`.
  [[nodiscard]] static bool larger_than_any_mapping(std::size_t requested) noexcept {
    return requested > max_stack_size || effective_stack_size(requested) > max_stack_size;
  }
  /// The lowest address of the calling thread's stack (it grows down to
  /// there; the size asked for includes what the thread library keeps at
  /// its top, thread-local storage among it), or 0 when the platform does
  /// not say.
  [[nodiscard]] static std::uintptr_t current_stack_low() noexcept;

  // The type-erased thread body (public for the implementation's trampoline).
  struct entry {
    entry() = default;
    entry(const entry&) = delete;
    entry& operator=(const entry&) = delete;
    virtual ~entry() = default;
    virtual void run() noexcept = 0;
  };

 private:
  struct native;  // defined in src/platform.cpp
  explicit os_thread(native* h) noexcept : handle_(h) {}
  static result<os_thread> start_entry(std::unique_ptr<entry> e, std::size_t stack_size) noexcept;
  static result<os_thread> out_of_memory() noexcept;

  native* handle_ = nullptr;
};

namespace testing {
/// Tests only: the next `successes` thread starts succeed, every later one
/// fails with resource_exhausted; -1 (the default) removes the limit.
void set_thread_start_budget(std::int64_t successes) noexcept;
}  // namespace testing

}  // namespace thread_system::detail
