// event_count: park a thread until "something may have changed", without
// lost wake-ups and without a mutex on the notifying side.
//
// Protocol (the waiter re-checks its condition between prepare and commit):
//
//   // waiter                                 // notifier
//   auto key = ec.prepare_wait();             make_condition_true();
//   if (condition()) { ec.cancel_wait(); }    ec.notify_one();   // or notify_all()
//   else             { ec.commit_wait(key); }
//
// Guarantee: if the notifier makes the condition true and then calls
// notify_*(), a waiter that checked the condition after prepare_wait() and
// found it false is woken (or does not sleep). Anything the notifier wrote
// before notify_*() is visible to a waiter that returns from commit_wait()
// because of that notification *provided the condition itself is published
// with release/acquire* (the event count orders the check, not your data).
// Wake-ups can be spurious: always re-check the condition.
//
// Cost: notify_*() with no waiter is one seq_cst fence and one load; no
// system call. The algorithm is the classic "eventcount" (Vyukov; also used
// by folly and Eigen); here the epoch and the waiter count are separate
// 32-bit words so that the epoch can be a futex.
//
// Destruction is safe once no thread is inside any member function.
#pragma once

#include <atomic>
#include <cstdint>

#include "thread_system/detail/chaos.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/fence.hpp"
#include "thread_system/detail/futex.hpp"

namespace thread_system {

/// Parks a thread until "something may have changed", without lost wake-ups and with no mutex on the notifying
/// side (see the header comment for the protocol).
class event_count {
 public:
  /// The epoch a waiter read in prepare_wait(), handed to commit_wait().
  using key_type = std::uint32_t;

  /// An event count with no waiter.
  event_count() = default;
  /// Not copyable.
  event_count(const event_count&) = delete;
  /// Not copyable.
  event_count& operator=(const event_count&) = delete;

  /// Announces the intent to wait; returns the key for commit_wait().
  [[nodiscard]] key_type prepare_wait() noexcept {
    // seq_cst RMW: totally ordered against the notifier's seq_cst fence, so
    // either the notifier sees this waiter or our later condition check sees
    // the notifier's write (the Dekker pattern).
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    THREAD_SYSTEM_CHAOS_POINT();
    const key_type key = epoch_.load(std::memory_order_seq_cst);
    // The caller's condition check must not be reordered before the
    // increment above; a full fence keeps it after (pairs with notify's fence).
    detail::seq_cst_fence();
    return key;
  }

  /// The condition turned out true: do not wait after all.
  void cancel_wait() noexcept {
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // only a hint for notifiers; no data published
  }

  /// Sleeps until a notification newer than `key` (or spuriously).
  void commit_wait(key_type key) noexcept {
    // acquire: pairs with the release increment in notify_*().
    THREAD_SYSTEM_CHAOS_POINT();
    while (epoch_.load(std::memory_order_acquire) == key) {
      detail::futex_wait(epoch_, key);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // only a hint for notifiers
  }

  /// commit_wait() that gives up at `deadline` (steady_clock). Returns false
  /// when the deadline passed without a notification newer than `key`.
  bool commit_wait_until(key_type key, std::chrono::steady_clock::time_point deadline) noexcept {
    THREAD_SYSTEM_CHAOS_POINT();
    bool notified = true;
    // acquire: pairs with the release increment in notify_*().
    while (epoch_.load(std::memory_order_acquire) == key) {
      // Compared before subtracting: a deadline far in the past (time_point::min())
      // would make the difference overflow into a long wait.
      const auto now = std::chrono::steady_clock::now();
      if (deadline <= now) {
        notified = false;
        break;
      }
      const auto left = deadline - now;  // positive and at most max() - now: no overflow
      detail::futex_wait_for(epoch_, key, std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // only a hint for notifiers
    return notified;
  }

  /// Wakes one waiter (all waiters that have not yet slept also return).
  void notify_one() noexcept {
    detail::seq_cst_fence();
    notify_after_fence(1);
  }
  /// Wakes every waiter.
  void notify_all() noexcept {
    detail::seq_cst_fence();
    notify_after_fence(detail::futex_wake_all);
  }
  /// notify_one() for a caller that has itself just called
  /// detail::seq_cst_fence() after making its condition true (saves a second
  /// fence when the caller needed one anyway to read other state).
  void notify_one_after_fence() noexcept { notify_after_fence(1); }

  /// Number of threads between prepare_wait() and the end of commit/cancel.
  [[nodiscard]] std::uint32_t waiters() const noexcept {
    return waiters_.load(std::memory_order_relaxed);  // statistics only
  }

 private:
  // Precondition: a detail::seq_cst_fence() executed after the caller made
  // its condition true. That fence orders the condition write before the
  // waiter-count read below (pairs with the fence in prepare_wait()).
  void notify_after_fence(int count) noexcept {
    THREAD_SYSTEM_CHAOS_POINT();
    if (waiters_.load(std::memory_order_relaxed) == 0) return;  // ordered by the preceding fence
    // release: pairs with the acquire load in commit_wait().
    epoch_.fetch_add(1, std::memory_order_release);
    detail::futex_wake(epoch_, count);
  }

  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace thread_system
