#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <system_error>
#include <thread>

#include "thread_system/detail/os_thread.hpp"
#include "thread_system/detail/thread_attributes.hpp"

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#include <unistd.h>
#include <cerrno>
#include <climits>
#include <cstring>
#define THREAD_SYSTEM_POSIX_THREADS 1
#endif
#if defined(__linux__)
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#endif

namespace thread_system::detail {

namespace {
// The text of an errno value. std::strerror may share a static buffer
// between threads; the generic category's message() is thread-safe.
std::string errno_text(int e) { return std::generic_category().message(e); }
}  // namespace

// ---- os_thread ---------------------------------------------------------------

namespace {
// Starts left before they fail (tests only); -1: no limit.
std::atomic<std::int64_t> g_thread_start_budget{-1};

// True when the testing budget says this start must fail.
bool start_refused_for_testing() noexcept {
  // relaxed: a test knob; the test sets it before starting threads.
  std::int64_t left = g_thread_start_budget.load(std::memory_order_relaxed);
  while (left >= 0) {
    if (left == 0) return true;
    // relaxed: as above; the CAS only keeps concurrent starts counted exactly.
    if (g_thread_start_budget.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return false;
  }
  return false;
}

std::size_t page_size() noexcept {
#if defined(THREAD_SYSTEM_POSIX_THREADS)
  const long p = ::sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<std::size_t>(p) : 4096;
#else
  return 4096;
#endif
}

std::size_t round_up(std::size_t n, std::size_t to) noexcept {
  const std::size_t r = n % to;
  if (r == 0) return n;
  return n > static_cast<std::size_t>(-1) - (to - r) ? n - r : n + (to - r);
}
}  // namespace

namespace testing {
void set_thread_start_budget(std::int64_t successes) noexcept {
  g_thread_start_budget.store(successes < 0 ? -1 : successes, std::memory_order_relaxed);  // a test knob
}
}  // namespace testing

#if defined(THREAD_SYSTEM_POSIX_THREADS)
namespace {
// What a started thread and its os_thread share: the body, and which of the
// two lets go of it last - that one frees it. The thread only runs the body
// and lets go; after join() the joining thread frees it. So a thread whose
// body allocated nothing frees nothing either: with glibc a thread's first
// free(), like its first malloc(), gives it a malloc arena of its own (a
// page or more of resident memory, kept after the thread ends).
struct thread_block {
  thread_block() = default;
  thread_block(const thread_block&) = delete;
  thread_block& operator=(const thread_block&) = delete;
  virtual ~thread_block() = default;
  std::unique_ptr<os_thread::entry> body;
  std::atomic<int> holders{2};  // the thread, and the os_thread until join() or detach()
};

void let_go(thread_block* b) noexcept {
  // acq_rel: the thread's release orders everything it did with the body
  // before the other holder's acquire and delete.
  if (b->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b;
}

extern "C" void* os_thread_trampoline(void* arg) {
  auto* b = static_cast<thread_block*>(arg);
  b->body->run();  // noexcept: an escaping exception terminates, as with std::thread
  let_go(b);
  return nullptr;
}
}  // namespace

struct os_thread::native final : thread_block {
  pthread_t id{};
};

std::size_t os_thread::min_stack_size() noexcept {
  const long m = ::sysconf(_SC_THREAD_STACK_MIN);
  const std::size_t platform = m > 0 ? static_cast<std::size_t>(m) : static_cast<std::size_t>(PTHREAD_STACK_MIN);
  // The library's own floor: its code on a thread it starts needs more than
  // the platform's bare minimum (16 KiB on Linux x86-64). A pool worker's
  // default error report writes to stderr, and glibc formats output to an
  // unbuffered stream through an 8 KiB buffer on the stack: with 16 KiB the
  // report of a failing job overflowed it (SIGSEGV).
  return round_up(std::max(platform, library_min_stack), page_size());
}

std::size_t os_thread::effective_stack_size(std::size_t requested) noexcept {
  if (requested == 0) {
    pthread_attr_t attr;
    std::size_t size = 0;
    if (::pthread_attr_init(&attr) == 0) {
      (void)::pthread_attr_getstacksize(&attr, &size);
      (void)::pthread_attr_destroy(&attr);
    }
    return size;
  }
  const std::size_t least = min_stack_size();
  return round_up(requested < least ? least : requested, page_size());
}

result<os_thread> os_thread::start_entry(std::unique_ptr<entry> e, std::size_t stack_size) noexcept {
  if (start_refused_for_testing()) {
    return make_error(error_code::resource_exhausted, "out of threads");  // short: allocates nothing
  }
  // Rounding a larger size up to pages could wrap, too; rounding one just
  // below the limit can pass it.
  if (larger_than_any_mapping(stack_size)) {
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return "cannot start a thread: a stack of " + std::to_string(stack_size) + " bytes is larger than any mapping";
    });
  }
  native* h = nullptr;
  try {
    h = new native;
  } catch (...) {
    return out_of_memory();
  }
  h->body = std::move(e);
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) != 0) {
    delete h;
    return out_of_memory();
  }
  int rc = 0;
  if (stack_size != 0) rc = ::pthread_attr_setstacksize(&attr, effective_stack_size(stack_size));
  if (rc == 0) rc = ::pthread_create(&h->id, &attr, &os_thread_trampoline, static_cast<thread_block*>(h));
  (void)::pthread_attr_destroy(&attr);
  if (rc != 0) {
    delete h;
    return make_error_nothrow(rc == EINVAL ? error_code::invalid_argument : error_code::resource_exhausted, [&] {
      return std::string("cannot start a thread: ") + errno_text(rc) +
             (stack_size != 0 ? " (stack size " + std::to_string(effective_stack_size(stack_size)) + " bytes)" : "");
    });
  }
  return os_thread(h);
}

void os_thread::join() noexcept {
  (void)::pthread_join(handle_->id, nullptr);
  let_go(handle_);  // the thread has let go: frees the body here
  handle_ = nullptr;
}

void os_thread::detach() noexcept {
  (void)::pthread_detach(handle_->id);
  let_go(handle_);  // whichever of the two is last frees the body
  handle_ = nullptr;
}

std::uintptr_t os_thread::current_stack_low() noexcept {
#if defined(__linux__)
  pthread_attr_t attr;
  if (::pthread_getattr_np(::pthread_self(), &attr) != 0) return 0;
  void* low = nullptr;
  std::size_t size = 0;
  const int rc = ::pthread_attr_getstack(&attr, &low, &size);
  (void)::pthread_attr_destroy(&attr);
  return rc == 0 ? reinterpret_cast<std::uintptr_t>(low) : 0;
#else
  return 0;
#endif
}

bool os_thread::is_current() const noexcept {
  return handle_ != nullptr && ::pthread_equal(handle_->id, ::pthread_self()) != 0;
}

os_thread::native_handle_type os_thread::native_handle() const noexcept { return handle_->id; }
#else
struct os_thread::native {
  std::thread t;
};

std::size_t os_thread::min_stack_size() noexcept { return 0; }
std::size_t os_thread::effective_stack_size(std::size_t requested) noexcept { return requested; }
std::uintptr_t os_thread::current_stack_low() noexcept { return 0; }

result<os_thread> os_thread::start_entry(std::unique_ptr<entry> e, std::size_t stack_size) noexcept {
  if (stack_size != 0) {
    return make_error(error_code::not_supported, "thread stack sizes are not supported on this platform");
  }
  if (start_refused_for_testing()) return make_error(error_code::resource_exhausted, "out of threads");
  native* h = nullptr;
  try {
    h = new native;
    h->t = std::thread([body = std::move(e)] { body->run(); });
  } catch (...) {
    delete h;
    return make_error(error_code::resource_exhausted, "out of threads");
  }
  return os_thread(h);
}

void os_thread::join() noexcept {
  handle_->t.join();
  delete handle_;
  handle_ = nullptr;
}

void os_thread::detach() noexcept {
  handle_->t.detach();
  delete handle_;
  handle_ = nullptr;
}

bool os_thread::is_current() const noexcept {
  return handle_ != nullptr && handle_->t.get_id() == std::this_thread::get_id();
}

os_thread::native_handle_type os_thread::native_handle() const noexcept { return handle_->t.native_handle(); }
#endif

result<os_thread> os_thread::out_of_memory() noexcept {
  return make_error(error_code::resource_exhausted, "out of memory");  // short: allocates nothing
}

// ---- thread naming, affinity, nice -------------------------------------------

std::size_t utf8_prefix_length(std::string_view name, std::size_t limit) noexcept {
  if (name.size() <= limit) return name.size();
  std::size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0U) == 0x80U) --n;
  return n;
}

std::size_t shortened_thread_name(std::string_view name, std::size_t limit, std::span<char> out) noexcept {
  limit = std::min(limit, out.size());
  // A NUL would end the name for the OS there (a pool named "a\0b" gave
  // every worker the name "a"): it is written as '?'.
  auto copy = [&out](std::string_view part, std::size_t at) {
    for (std::size_t i = 0; i < part.size(); ++i) out[at + i] = part[i] == '\0' ? '?' : part[i];
    return at + part.size();
  };
  if (name.size() > limit) {
    // A worker's index: "-" and digits at the end.
    std::size_t digits = 0;
    while (digits < name.size() && name[name.size() - 1 - digits] >= '0' && name[name.size() - 1 - digits] <= '9')
      ++digits;
    const std::size_t suffix = digits + 1;
    if (digits > 0 && suffix < name.size() && name[name.size() - suffix] == '-' && suffix < limit) {
      std::string_view base = name.substr(0, name.size() - suffix);
      base = base.substr(0, utf8_prefix_length(base, limit - suffix));
      while (!base.empty() && (base.back() == '-' || base.back() == '_' || base.back() == '.' || base.back() == ' '))
        base.remove_suffix(1);
      if (!base.empty()) return copy(name.substr(name.size() - suffix), copy(base, 0));
    }
  }
  return copy(name.substr(0, utf8_prefix_length(name, limit)), 0);
}

result<void> set_current_thread_name(std::string_view name) noexcept {
#if defined(__linux__) || defined(__APPLE__)
#if defined(__linux__)
  constexpr std::size_t limit = 15;  // the kernel's TASK_COMM_LEN less the terminator
#else
  constexpr std::size_t limit = 63;  // MAXTHREADNAMESIZE less the terminator
#endif
  std::array<char, limit + 1> buf{};
  const std::size_t n = shortened_thread_name(name, limit, std::span<char>(buf.data(), limit));
  buf[n] = '\0';
#if defined(__linux__)
  const int rc = ::pthread_setname_np(::pthread_self(), buf.data());
#else
  const int rc = ::pthread_setname_np(buf.data());
#endif
  if (rc != 0) return make_error(error_code::not_supported, "pthread_setname_np failed");
  return {};
#else
  (void)name;
  return make_error(error_code::not_supported, "thread names are not supported on this platform");
#endif
}

unsigned hardware_threads() noexcept {
  static const unsigned count = std::thread::hardware_concurrency();  // thread-safe initialisation, once
  return count;
}

int current_os_thread_id() noexcept {
#if defined(__linux__)
  return static_cast<int>(::syscall(SYS_gettid));
#else
  return 0;
#endif
}

result<void> set_thread_affinity(int os_tid, std::span<const int> cpus) noexcept {
#if defined(__linux__)
  if (cpus.empty())
    return make_error_nothrow(error_code::invalid_argument, [&] { return "set_affinity: empty CPU list"; });
  const long online = ::sysconf(_SC_NPROCESSORS_CONF);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE || (online > 0 && cpu >= online)) {
      return make_error_nothrow(error_code::invalid_argument, [&] {
        return "set_affinity: CPU " + std::to_string(cpu) + " does not exist (this machine has " +
               std::to_string(online) + ")";
      });
    }
    CPU_SET(cpu, &set);
  }
  // The kernel pins the thread to the CPUs of the list it may use (online,
  // in the process's cpuset) and drops the others without a word when at
  // least one is left. All or nothing here: the mask is read back, and a
  // list the kernel narrowed is refused with the mask put back as it was.
  cpu_set_t before;
  CPU_ZERO(&before);
  const bool have_before = ::sched_getaffinity(os_tid, sizeof before, &before) == 0;
  if (::sched_setaffinity(os_tid, sizeof set, &set) != 0) {
    const int e = errno;
    return make_error_nothrow(e == EINVAL ? error_code::invalid_argument : error_code::not_supported, [&] {
      return std::string(
                 "set_affinity: sched_setaffinity failed (no CPU of the list is online and allowed to this "
                 "process, or the thread is gone): ") +
             errno_text(e);
    });
  }
  cpu_set_t granted;
  CPU_ZERO(&granted);
  if (::sched_getaffinity(os_tid, sizeof granted, &granted) != 0) return {};  // the thread has just ended
  for (int cpu : cpus) {
    if (CPU_ISSET(cpu, &granted)) continue;
    if (have_before) (void)::sched_setaffinity(os_tid, sizeof before, &before);
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return "set_affinity: CPU " + std::to_string(cpu) +
             " is offline or not allowed to this process (cpuset); the thread's affinity is unchanged";
    });
  }
  return {};
#else
  (void)os_tid;
  (void)cpus;
  return make_error_nothrow(error_code::not_supported,
                            [&] { return "set_affinity: CPU affinity is not supported on this platform"; });
#endif
}

result<void> set_thread_nice(int os_tid, int nice) noexcept {
#if defined(__linux__)
  if (nice < -20 || nice > 19) {
    return make_error_nothrow(error_code::invalid_argument,
                              [&] { return "set_nice: " + std::to_string(nice) + " is outside -20..19"; });
  }
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(os_tid), nice) != 0) {
    const int e = errno;
    return make_error_nothrow(error_code::not_supported,
                              [&] { return std::string("set_nice: setpriority failed: ") + errno_text(e); });
  }
  return {};
#else
  (void)os_tid;
  (void)nice;
  return make_error_nothrow(error_code::not_supported,
                            [&] { return "set_nice: per-thread nice levels are not supported on this platform"; });
#endif
}

}  // namespace thread_system::detail
