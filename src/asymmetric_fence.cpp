// detail/asymmetric_fence.hpp: membarrier(2) registration and the heavy side.
#include "thread_system/detail/asymmetric_fence.hpp"

#include <atomic>
#include <mutex>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

// membarrier(2) is usable where the system call exists (__NR_membarrier, a
// macro of <sys/syscall.h>). The MEMBARRIER_CMD_* names of
// <linux/membarrier.h> are enumerators, not macros (testing them with
// defined() would compile the fast path out everywhere), and kernel headers
// before Linux 4.14 lack the expedited ones; their values are fixed by the
// kernel's ABI, so they are spelt out here.
#if defined(__linux__) && defined(__NR_membarrier) && !defined(THREAD_SYSTEM_TSAN)
#define THREAD_SYSTEM_HAVE_MEMBARRIER 1
namespace {
constexpr int membarrier_cmd_query = 0;
constexpr int membarrier_cmd_private_expedited = 1 << 3;
constexpr int membarrier_cmd_register_private_expedited = 1 << 4;
// Set when a membarrier failed after registration; never cleared.
std::atomic<bool> membarrier_failed{false};
}  // namespace
#endif

namespace thread_system::detail {

void asymmetric_fence_init() noexcept {
#if defined(THREAD_SYSTEM_HAVE_MEMBARRIER)
  static std::once_flag once;
  try {
    std::call_once(once, [] {
      const long supported = ::syscall(__NR_membarrier, membarrier_cmd_query, 0, 0);
      if (supported < 0 || (supported & membarrier_cmd_private_expedited) == 0) return;
      if (::syscall(__NR_membarrier, membarrier_cmd_register_private_expedited, 0, 0) != 0) return;
      // relaxed: read by the light sides of threads created (or handed a pool
      // or logger) after the constructor that called this returned.
      asymmetric_fence_cheap.store(true, std::memory_order_relaxed);
    });
  } catch (...) {  // NOLINT(bugprone-empty-catch): call_once failing leaves the full-fence fallback
  }
#endif
}

bool asymmetric_fence_heavy() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
#if defined(THREAD_SYSTEM_HAVE_MEMBARRIER)
  // relaxed: see asymmetric_fence_init().
  if (asymmetric_fence_cheap.load(std::memory_order_relaxed)) {
    // Registered, so it fails only if something (a seccomp filter installed
    // later) forbids it; the light sides rely on it, so the caller is told.
    // relaxed: a sticky flag; each caller also sees its own failure directly.
    if (membarrier_failed.load(std::memory_order_relaxed)) return false;
    if (::syscall(__NR_membarrier, membarrier_cmd_private_expedited, 0, 0) != 0) {
      membarrier_failed.store(true, std::memory_order_relaxed);
      return false;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
#elif defined(THREAD_SYSTEM_TSAN)
  seq_cst_fence();
#endif
  return true;
}

}  // namespace thread_system::detail
