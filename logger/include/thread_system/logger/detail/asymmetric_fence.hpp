// asymmetric_fence: a store->load fence whose cost is moved off the hot side.
//
// The logger's producers and its rare events (the writer going to sleep,
// stop()) form Dekker pairs: each side stores a flag, then loads the other's.
// That needs a full fence on both sides; the producers run it on every call.
// With Linux's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) the rare side
// issues a barrier on every running thread of the process instead, and the
// hot side needs only a compiler barrier: every producer either has its store
// visible before the rare side's load, or executes its load after the barrier
// and sees the rare side's store (the same argument as folly's
// asymmetricHeavyBarrier / asymmetricLightBarrier, and the kernel's
// Documentation for membarrier(2)).
//
// Where membarrier is unavailable (another OS, an old kernel, a sandbox that
// refuses it) both sides use a full fence. Under ThreadSanitizer both sides
// use detail::seq_cst_fence(), which it models. If membarrier fails after a
// successful registration (a seccomp filter installed later forbids it),
// the process aborts with that reason: the producers' side would no longer
// be covered.
#pragma once

#include <atomic>

#include "thread_system/detail/fence.hpp"

namespace thread_system::detail {

/// True once asymmetric_fence_init() registered membarrier for the process.
/// Never goes back to false.
inline std::atomic<bool> asymmetric_fence_cheap{false};

/// Registers the process for expedited membarrier (once; idempotent, thread-safe).
void asymmetric_fence_init() noexcept;

/// The hot side: a compiler barrier when the heavy side is a membarrier, else a full fence.
inline void asymmetric_fence_light() noexcept {
#if defined(THREAD_SYSTEM_TSAN)
  seq_cst_fence();
#else
  // relaxed: the flag only flips false -> true before any logger that uses
  // it exists; reading false just costs a full fence, which is always enough.
  if (asymmetric_fence_cheap.load(std::memory_order_relaxed)) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
#endif
}

/// The rare side: a barrier on every thread of the process (or a full fence).
void asymmetric_fence_heavy() noexcept;

}  // namespace thread_system::detail
