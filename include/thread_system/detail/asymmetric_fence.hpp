// asymmetric_fence: a store->load fence whose cost is moved off the hot side.
//
// Dekker pairs where one side is frequent and the other rare: the pools'
// pushers (every job pushed, then a look at the parked workers) against a
// worker going to sleep (it announces itself, then looks for work once
// more); the logger's producers against its writer going to sleep and
// stop(). Each side stores, then loads what the other stored, which needs a
// full fence on both sides. With Linux's
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) the rare side issues a
// barrier on every running thread of the process instead, and the hot side
// needs only a compiler barrier: every hot-side thread either has its store
// visible before the rare side's load, or executes its load after the
// barrier and sees the rare side's store (the same argument as folly's
// asymmetricHeavyBarrier / asymmetricLightBarrier, and the kernel's
// documentation of membarrier(2)). A thread not running at that moment
// passed a full barrier when it was switched out.
//
// Cost of the rare side: one system call that interrupts every CPU then
// running a thread of this process. Measured on a 2-vCPU VM: 0.2 us while
// no other thread of the process runs, 9-12 us while one does, and about
// 7 us taken from each interrupted thread (docs/PERFORMANCE.md, "Fork-join
// (#20): the wake-up check's fence moved to the worker going to sleep").
//
// Where membarrier is unavailable (another OS, an old kernel, a sandbox that
// refuses it) both sides use a full fence. Under ThreadSanitizer both sides
// use detail::seq_cst_fence(), which it models. If membarrier fails after a
// successful registration (a seccomp filter installed later forbids it),
// asymmetric_fence_heavy() returns false from then on: the hot side may
// have skipped its fence, so the caller must not rely on the pair (the
// pools' workers and the logger's writer then sleep at most 1 ms at a time;
// the logger's stop() aborts with the reason).
#pragma once

#include <atomic>

#include "thread_system/detail/fence.hpp"

namespace thread_system::detail {

/// True once asymmetric_fence_init() registered membarrier for the process.
/// Never goes back to false.
inline std::atomic<bool> asymmetric_fence_cheap{false};

/// Registers the process for expedited membarrier (once; idempotent, thread-safe). Call it before starting any
/// thread that runs the heavy side (a pool's or logger's constructor does, before its workers or writer exist): a
/// light side that reads the flag set must find every heavy side running the barrier, and a heavy side started
/// after this call sees the flag set (the thread's creation orders it). A light side that read the flag clear
/// used a full fence, which pairs with either form of the heavy side.
void asymmetric_fence_init() noexcept;

/// The hot side: a compiler barrier when the heavy side is a membarrier, else a full fence.
inline void asymmetric_fence_light() noexcept {
#if defined(THREAD_SYSTEM_TSAN)
  seq_cst_fence();
#else
  // relaxed: the flag only flips false -> true inside asymmetric_fence_init(),
  // before any thread that runs the heavy side is started (the thread's
  // creation publishes it to that thread); reading false just costs a full
  // fence, which is always enough.
  if (asymmetric_fence_cheap.load(std::memory_order_relaxed)) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
#endif
}

/// The rare side: a barrier on every running thread of the process (or a full fence where membarrier is not
/// registered). Returns false if membarrier failed after registration: the pair no longer holds (see the header).
[[nodiscard]] bool asymmetric_fence_heavy() noexcept;

}  // namespace thread_system::detail
