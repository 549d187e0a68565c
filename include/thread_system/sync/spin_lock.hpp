// spin_lock: a test-and-test-and-set lock with bounded exponential backoff,
// for critical sections of a few dozen instructions (moving a job in or out
// of a ring). Satisfies Lockable, so std::lock_guard / std::unique_lock work.
//
// Why not std::mutex there: glibc's default mutex sleeps in the kernel at
// the first sign of contention, so two threads taking turns on a tiny
// critical section pay a futex round trip (~1-2 us here) where a brief spin
// costs tens of nanoseconds. After a bounded spin the lock yields the CPU,
// so a preempted holder on an oversubscribed machine gets to run.
//
// Contract: unlock() by the thread that locked. Everything written inside
// the critical section is visible to the next thread that locks (acquire on
// lock, release on unlock). Not recursive, not fair.
#pragma once

#include <atomic>
#include <thread>
#include "thread_system/detail/chaos.hpp"
#include "thread_system/detail/config.hpp"

#include "thread_system/detail/spin.hpp"

namespace thread_system {

/// A test-and-test-and-set lock with bounded exponential backoff, then yielding; Lockable, not recursive, not fair.
class spin_lock {
 public:
  /// An unlocked lock.
  spin_lock() = default;
  /// Not copyable.
  spin_lock(const spin_lock&) = delete;
  /// Not copyable.
  spin_lock& operator=(const spin_lock&) = delete;

  /// Takes the lock, spinning (then yielding) while another thread holds it.
  THREAD_SYSTEM_ALWAYS_INLINE void lock() noexcept {
    // acquire: pairs with the release in unlock(); the critical section
    // sees everything the previous holder wrote.
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }

  /// lock(); if the lock was held by another thread at the first attempt,
  /// also calls `on_contended()` once the lock is taken (in the critical
  /// section). That path is out of line, so the uncontended one stays the
  /// few instructions of lock(), whatever `on_contended` does.
  template <typename F>
  THREAD_SYSTEM_ALWAYS_INLINE void lock_then_if_contended(F on_contended) noexcept {
    // acquire: as in lock().
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_contended_then(on_contended);
  }

  /// Takes the lock if it is free; true when taken. Never waits.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool try_lock() noexcept {
    // relaxed pre-check avoids taking the cache line exclusively when held;
    // acquire on success pairs with unlock().
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }

  /// Releases the lock. Only the thread that locked may call it.
  THREAD_SYSTEM_ALWAYS_INLINE void unlock() noexcept {
    locked_.store(false, std::memory_order_release);  // pairs with the acquire in lock()/try_lock()
  }

 private:
  template <typename F>
  THREAD_SYSTEM_NOINLINE void lock_contended_then(F on_contended) noexcept {
    lock_contended();
    on_contended();
  }

  // Out of line: the uncontended path above stays a few instructions.
  THREAD_SYSTEM_NOINLINE void lock_contended() noexcept {
    unsigned backoff = 1;
    for (;;) {
      // Spin on a plain load (the line stays shared) until it looks free.
      while (locked_.load(std::memory_order_relaxed)) {  // a hint; the exchange below decides
        if (backoff <= max_pause_rounds) {
          for (unsigned i = 0; i < backoff; ++i) detail::cpu_relax();
          backoff *= 2;
        } else {
          std::this_thread::yield();  // the holder may be preempted: let it run
        }
      }
      THREAD_SYSTEM_CHAOS_POINT();
      if (!locked_.exchange(true, std::memory_order_acquire)) return;  // pairs with unlock()
    }
  }

  static constexpr unsigned max_pause_rounds = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace thread_system
