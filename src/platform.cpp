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
#if defined(__GLIBC__)
#include <dlfcn.h>
#include <link.h>
#endif
#if defined(__linux__)
#include <fcntl.h>
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

namespace {
// What the thread library keeps at the top of a thread's stack besides the
// stack proper, which a requested stack size must also cover. glibc places
// the program's static thread-local storage (every thread_local of the
// executable and of the libraries loaded at start-up, plus a surplus) and
// its thread descriptor inside the size given to pthread_attr_setstacksize,
// so a thread asked for 64 KiB in a program with 50 000 bytes of
// thread_local data ran on about 14 KiB. glibc says how much: its
// __pthread_get_minstack(attr) is PTHREAD_STACK_MIN plus that (a page and
// the static TLS), the figure glibc itself refuses sizes below. Looked up,
// not linked: it is not a public symbol. Elsewhere (musl adds the TLS to
// the size; macOS keeps it apart) nothing is taken from the stack.
#if defined(__GLIBC__)
// A statically linked program has no symbol to look up: there the reserve
// is the static TLS of the loaded modules (each PT_TLS segment, rounded up
// to its alignment and with room to align it) plus 8 KiB for glibc's
// surplus (about 2.2 KiB), its thread descriptor (about 2.3 KiB) and the
// page __pthread_get_minstack counts: an estimate from above.
int add_static_tls(dl_phdr_info* info, std::size_t /*size*/, void* total) noexcept {
  auto* sum = static_cast<std::size_t*>(total);
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_TLS) continue;
    const std::size_t align = segment.p_align > 0 ? static_cast<std::size_t>(segment.p_align) : 1;
    *sum += round_up(static_cast<std::size_t>(segment.p_memsz), align) + align;
  }
  return 0;
}
#endif

std::size_t stack_top_reserve() noexcept {
#if defined(__GLIBC__)
  using minstack_fn = std::size_t (*)(const pthread_attr_t*);
  static const std::size_t reserve = [] {
    // The cast turns dlsym's object pointer into the function it names
    // (POSIX guarantees the conversion).
    const auto fn = reinterpret_cast<minstack_fn>(::dlsym(RTLD_DEFAULT, "__pthread_get_minstack"));
    if (fn == nullptr) {
      std::size_t tls = 0;
      (void)::dl_iterate_phdr(&add_static_tls, &tls);
      return tls + std::size_t{8} * 1024;
    }
    pthread_attr_t attr;
    if (::pthread_attr_init(&attr) != 0) return std::size_t{0};
    const std::size_t minstack = fn(&attr);
    (void)::pthread_attr_destroy(&attr);
    const auto bare = static_cast<std::size_t>(PTHREAD_STACK_MIN);
    return minstack > bare ? minstack - bare : std::size_t{0};
  }();
  return reserve;
#else
  return 0;
#endif
}
}  // namespace

std::size_t os_thread::min_stack_size() noexcept {
  const long m = ::sysconf(_SC_THREAD_STACK_MIN);
  const std::size_t platform = m > 0 ? static_cast<std::size_t>(m) : static_cast<std::size_t>(PTHREAD_STACK_MIN);
  // The library's own floor: its code on a thread it starts needs more than
  // the platform's bare minimum (16 KiB on Linux x86-64). A pool worker's
  // default error report writes to stderr, and glibc formats output to an
  // unbuffered stream through an 8 KiB buffer on the stack: with 16 KiB the
  // report of a failing job overflowed it (SIGSEGV). The floor is usable
  // stack: what the thread library keeps in the stack's top comes on top.
  return round_up(std::max(platform, library_min_stack + stack_top_reserve()), page_size());
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

std::size_t os_thread::usable_stack_size(std::size_t requested) noexcept {
  const std::size_t size = effective_stack_size(requested);
  const std::size_t reserve = stack_top_reserve();
  return size > reserve ? size - reserve : 0;
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
std::size_t os_thread::usable_stack_size(std::size_t requested) noexcept { return requested; }
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

int highest_cpu_number(std::string_view cpu_list) noexcept {
  int last = -1;
  int value = -1;
  for (const char c : cpu_list) {
    if (c >= '0' && c <= '9') {
      if (value > (1 << 24)) return -1;  // not a CPU number: not a CPU list
      value = (value < 0 ? 0 : value) * 10 + (c - '0');
    } else {
      if (value >= 0) last = std::max(last, value);
      value = -1;
    }
  }
  return std::max(last, value);
}

#if defined(__linux__)
namespace {
// The highest CPU number the kernel may ever have, or -1 when it does not
// say. Not the CPU count: numbers may have gaps.
int highest_possible_cpu() noexcept {
  const int fd = ::open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::array<char, 512> text{};
  const ssize_t n = ::read(fd, text.data(), text.size());
  (void)::close(fd);
  if (n <= 0) return -1;
  return highest_cpu_number(std::string_view(text.data(), static_cast<std::size_t>(n)));
}

// A CPU mask for CPUs 0..bits-1: a cpu_set_t up to CPU_SETSIZE (1024),
// allocated (CPU_ALLOC) beyond. ok() is false when that allocation failed.
class cpu_mask {
 public:
  explicit cpu_mask(std::size_t bits) noexcept
      : set_(bits <= CPU_SETSIZE ? &local_ : CPU_ALLOC(bits)),
        size_(bits <= CPU_SETSIZE ? sizeof local_ : CPU_ALLOC_SIZE(bits)) {
    if (set_ != nullptr) CPU_ZERO_S(size_, set_);
  }
  cpu_mask(const cpu_mask&) = delete;
  cpu_mask& operator=(const cpu_mask&) = delete;
  ~cpu_mask() {
    if (set_ != &local_ && set_ != nullptr) CPU_FREE(set_);
  }
  [[nodiscard]] bool ok() const noexcept { return set_ != nullptr; }
  void add(int cpu) noexcept { CPU_SET_S(static_cast<std::size_t>(cpu), size_, set_); }
  [[nodiscard]] bool has(int cpu) const noexcept { return CPU_ISSET_S(static_cast<std::size_t>(cpu), size_, set_); }
  [[nodiscard]] int get(int os_tid) noexcept { return ::sched_getaffinity(os_tid, size_, set_); }
  [[nodiscard]] int set(int os_tid) const noexcept { return ::sched_setaffinity(os_tid, size_, set_); }

 private:
  cpu_set_t local_{};
  cpu_set_t* set_;
  std::size_t size_;
};
}  // namespace
#endif

result<void> set_thread_affinity(int os_tid, std::span<const int> cpus) noexcept {
#if defined(__linux__)
  if (cpus.empty())
    return make_error_nothrow(error_code::invalid_argument, [&] { return "set_affinity: empty CPU list"; });
  // CPU numbers may have gaps (possible CPUs "0-3,8-11"): the check is
  // against the highest number, and CPUs that exist but are offline or
  // outside the process's cpuset are found by the read-back below.
  const int highest = highest_possible_cpu();
  int largest = 0;
  for (int cpu : cpus) {
    if (cpu < 0 || (highest >= 0 && cpu > highest) || (highest < 0 && cpu >= CPU_SETSIZE)) {
      return make_error_nothrow(error_code::invalid_argument, [&] {
        return "set_affinity: CPU " + std::to_string(cpu) + " does not exist (" +
               (highest >= 0 ? "the highest CPU number here is " + std::to_string(highest)
                             : "CPU numbers here run from 0 to " + std::to_string(CPU_SETSIZE - 1)) +
               ")";
      });
    }
    largest = std::max(largest, cpu);
  }
  // Masks as wide as the kernel's (one narrower than its CPU count is
  // refused by sched_getaffinity), and at least a cpu_set_t.
  const auto bits = static_cast<std::size_t>(std::max({largest, highest, CPU_SETSIZE - 1})) + 1;
  cpu_mask set(bits);
  cpu_mask before(bits);
  cpu_mask granted(bits);
  if (!set.ok() || !before.ok() || !granted.ok()) {
    return make_error_nothrow(error_code::resource_exhausted, [] { return "set_affinity: out of memory"; });
  }
  for (int cpu : cpus) set.add(cpu);
  // The kernel pins the thread to the CPUs of the list it may use (online,
  // in the process's cpuset) and drops the others without a word when at
  // least one is left. All or nothing here: the mask is read back, and a
  // list the kernel narrowed is refused with the mask put back as it was.
  const bool have_before = before.get(os_tid) == 0;
  if (set.set(os_tid) != 0) {
    const int e = errno;
    return make_error_nothrow(e == EINVAL ? error_code::invalid_argument : error_code::not_supported, [&] {
      return std::string(
                 "set_affinity: sched_setaffinity failed (no CPU of the list is online and allowed to this "
                 "process, or the thread is gone): ") +
             errno_text(e);
    });
  }
  if (granted.get(os_tid) != 0) {
    const int e = errno;
    if (e == ESRCH) return {};  // the thread has just ended
    return make_error_nothrow(error_code::not_supported, [&] {
      return "set_affinity: the thread's CPUs could not be read back to check them (" + errno_text(e) +
             "); the new list may be in effect, narrowed by the kernel";
    });
  }
  for (int cpu : cpus) {
    if (granted.has(cpu)) continue;
    // Put back as it was read (the CPUs the thread could run on then).
    const bool restored = have_before && before.set(os_tid) == 0;
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return "set_affinity: CPU " + std::to_string(cpu) + " is offline or not allowed to this process (cpuset); " +
             (restored ? "the thread's affinity is unchanged"
                       : "the thread's earlier CPUs could not be put back: it runs on the rest of the list");
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
