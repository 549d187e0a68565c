// work_stealing_deque: the Chase-Lev deque. One owner thread pushes and pops
// at the bottom (LIFO); any number of thieves steal from the top (FIFO).
//
// Algorithm: D. Chase and Y. Lev, "Dynamic Circular Work-Stealing Deque",
// SPAA 2005; memory orderings after N. M. Le, A. Pop, A. Cohen and
// F. Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak Memory
// Models", PPoPP 2013 (their Fig. 1).
//
// Where this departs from Le et al.: their standalone fences (release in
// push, seq_cst in take and steal) are expressed here as orderings on the
// neighbouring accesses — a release store of `bottom_` in push, seq_cst
// store/loads around the take/steal race. ThreadSanitizer does not model
// fences and would report false races otherwise; on x86-64 the generated
// code costs the same (one locked instruction where the fence was).
//
// Elements must be trivially copyable (the pool stores pointers); slots are
// std::atomic<T> read with relaxed order, as in the paper. The ring grows by
// doubling when full; old rings are kept until the deque is destroyed because
// a thief may still be reading one.
//
// Contract: push() and pop() only from the owner thread; steal() and
// steal_if() (a steal of the oldest element only if a predicate accepts it)
// from any thread; size_approx() from any thread. A value pushed by the
// owner happens-before its use by the thread that pops or steals it.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#include "thread_system/core/concepts.hpp"
#include "thread_system/detail/chaos.hpp"

namespace thread_system {

/// Outcome of steal(): a tri-state, so a thief can tell "nothing there"
/// from "lost a race, try again".
enum class steal_status : unsigned char { success, empty, lost_race };

/// What steal() returns: a status and, on success, the stolen element.
template <typename T>
struct steal_result {
  /// success, empty or lost_race.
  steal_status status = steal_status::empty;
  /// The stolen element when `status` is success; `T{}` otherwise.
  T value{};
  /// True when `status` is success.
  explicit operator bool() const noexcept { return status == steal_status::success; }
};

/// The Chase-Lev deque: one owner thread pushes and pops at the bottom (LIFO); any thread steals from the top (FIFO).
template <trivially_copyable T>
class work_stealing_deque {
 public:
  /// The largest ring: the indices are signed 64-bit and a ring's size is a power of two.
  static constexpr std::size_t max_capacity = std::size_t{1} << 62;

  /// An empty deque whose ring holds `initial_capacity` rounded up to a power of two (at least 2). Throws
  /// std::bad_alloc when that ring cannot be allocated, which includes any capacity above max_capacity.
  explicit work_stealing_deque(std::size_t initial_capacity = 256) {
    if (initial_capacity > max_capacity) throw std::bad_alloc();
    newest_ = std::make_unique<ring>(std::bit_ceil(initial_capacity < 2 ? std::size_t{2} : initial_capacity));
    ring_.store(newest_.get(), std::memory_order_relaxed);  // before any other thread sees the deque
  }
  /// Not copyable.
  work_stealing_deque(const work_stealing_deque&) = delete;
  /// Not copyable.
  work_stealing_deque& operator=(const work_stealing_deque&) = delete;

  /// Owner only. Makes room for `n` more pushes without allocation; false
  /// (nothing changed) when the bigger ring cannot be allocated.
  [[nodiscard]] bool reserve(std::size_t n) noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);  // only the owner writes bottom_
    const std::int64_t t = top_.load(std::memory_order_acquire);     // pairs with the thieves' CAS on top_
    ring* r = ring_.load(std::memory_order_relaxed);                 // only the owner replaces the ring
    const auto queued = static_cast<std::size_t>(b - t);
    if (n > max_capacity - queued) return false;  // no ring can hold that many
    try {
      while (queued + n > r->mask + 1) r = grow(r, t, b);
    } catch (...) {  // std::bad_alloc
      return false;
    }
    return true;
  }

  /// Owner only. Pushes possible now without allocation.
  [[nodiscard]] std::size_t room() const noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);  // only the owner writes bottom_
    const std::int64_t t = top_.load(std::memory_order_relaxed);     // a lower bound on the room: t only grows
    const ring* r = ring_.load(std::memory_order_relaxed);           // only the owner replaces the ring
    return r->mask + 1 - static_cast<std::size_t>(b - t);
  }

  /// Owner only. Grows the ring when full; throws std::bad_alloc (nothing
  /// pushed) when it cannot, so a push after a successful reserve() never
  /// fails.
  void push(T value) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);  // only the owner writes bottom_
    const std::int64_t t = top_.load(std::memory_order_acquire);     // pairs with the thieves' CAS on top_
    ring* r = ring_.load(std::memory_order_relaxed);                 // only the owner replaces the ring
    if (b - t > static_cast<std::int64_t>(r->mask)) r = grow(r, t, b);
    r->put(b, value);
    // release: publishes the slot (and everything the owner wrote before
    // push) to a thief that reads bottom_ with acquire.
    THREAD_SYSTEM_CHAOS_POINT();
    bottom_.store(b + 1, std::memory_order_release);
  }

  /// Owner only. The newest element, or nothing when empty (then `out` is
  /// left as it was, also when a thief took the last element first).
  [[nodiscard]] bool pop(T& out) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;  // only the owner writes bottom_
    ring* r = ring_.load(std::memory_order_relaxed);
    // seq_cst store then seq_cst load of top_: the store must be visible to
    // thieves before we read top_ (the fence of Le et al.'s take()).
    bottom_.store(b, std::memory_order_seq_cst);
    THREAD_SYSTEM_CHAOS_POINT();
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {                                        // empty: restore
      bottom_.store(b + 1, std::memory_order_relaxed);  // only the owner writes bottom_; thieves saw t > b
      return false;
    }
    if (t == b) {
      // Last element: race the thieves for it with a CAS on top_.
      THREAD_SYSTEM_CHAOS_POINT();
      const bool won = top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                                    std::memory_order_relaxed);  // pairs with steal()'s CAS
      bottom_.store(b + 1, std::memory_order_relaxed);                           // deque is empty either way
      if (!won) return false;
    }
    // Read after the race: slot b is ours now (thieves only read, and only
    // below top_), and the common path reads it once, into `out`.
    out = r->get(b);
    return true;
  }

  /// Any thread. The oldest element, `empty`, or `lost_race` when another
  /// thread took it first (worth retrying).
  [[nodiscard]] steal_result<T> steal() {
    return steal_if([](const T&) noexcept { return true; });
  }

  /// Any thread. steal() of the oldest element only if `accept(element)`
  /// is true; a refused element gives `empty` (nothing for this caller).
  /// `accept` sees the element before it is taken, while another thread may
  /// take it (and, for a pointer, reuse what it points to): it may look
  /// only at the element's own value (or at atomics). When the steal
  /// succeeds, the element `accept` saw is the one taken.
  template <typename Accept>
  [[nodiscard]] steal_result<T> steal_if(Accept&& accept) {
    THREAD_SYSTEM_CHAOS_POINT();
    std::int64_t t = top_.load(std::memory_order_seq_cst);  // seq_cst: ordered with pop()'s store of bottom_
    THREAD_SYSTEM_CHAOS_POINT();
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);  // acquire part pairs with push()'s release
    if (t >= b) return {steal_status::empty, T{}};
    ring* r = ring_.load(std::memory_order_acquire);  // pairs with the release in grow()
    const T value = r->get(t);
    // The slot at index t changes only after top_ has moved past t (the
    // owner's last-element pop and every steal move it), so a CAS below
    // that succeeds proves `value` was the element at t all along.
    if (!accept(value)) return {steal_status::empty, T{}};
    THREAD_SYSTEM_CHAOS_POINT();
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {  // pairs with pop()'s and other thieves' CAS
      return {steal_status::lost_race, T{}};
    }
    return {steal_status::success, value};
  }

  /// Elements in the deque; approximate under concurrency (never negative).
  [[nodiscard]] std::size_t size_approx() const noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);  // a snapshot, not a synchronisation point
    const std::int64_t t = top_.load(std::memory_order_relaxed);     // a snapshot
    return b > t ? static_cast<std::size_t>(b - t) : 0;
  }
  /// True when size_approx() is 0; approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// Current ring capacity (owner thread, or when quiescent).
  [[nodiscard]] std::size_t capacity() const noexcept {
    return ring_.load(std::memory_order_relaxed)->mask + 1;  // owner-only use
  }

 private:
  struct ring {
    explicit ring(std::size_t capacity) : mask(capacity - 1), slots(new std::atomic<T>[capacity]) {}
    // Slots are relaxed: the bottom_/top_ protocol orders them (as in the paper).
    void put(std::int64_t i, T v) noexcept {
      slots[static_cast<std::size_t>(i) & mask].store(v, std::memory_order_relaxed);
    }
    T get(std::int64_t i) const noexcept {
      return slots[static_cast<std::size_t>(i) & mask].load(std::memory_order_relaxed);
    }
    std::size_t mask;
    std::unique_ptr<std::atomic<T>[]> slots;
    // The ring this one replaced, kept alive (a thief may still read it)
    // until the deque is destroyed. A list through the rings rather than a
    // vector beside them: growing allocates only the new ring, and an idle
    // deque costs one ring (no reserved list; at most ~60 links).
    std::unique_ptr<ring> older;
  };

  ring* grow(ring* old, std::int64_t t, std::int64_t b) {
    if (old->mask + 1 >= max_capacity) throw std::bad_alloc();  // the next size would not be a valid ring
    auto bigger = std::make_unique<ring>((old->mask + 1) * 2);
    for (std::int64_t i = t; i < b; ++i) bigger->put(i, old->get(i));
    ring* raw = bigger.get();
    bigger->older = std::move(newest_);           // old rings stay alive: thieves may still read them
    newest_ = std::move(bigger);                  // nothing above throws once the ring is allocated
    ring_.store(raw, std::memory_order_release);  // pairs with the acquire in steal()
    return raw;
  }

  // top_ is written by thieves, bottom_ by the owner: separate cache lines so
  // the owner's pushes do not invalidate the thieves' view of top_ and back.
  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  alignas(64) std::atomic<ring*> ring_{nullptr};
  std::unique_ptr<ring> newest_;  // owner-only; owns every ring through ring::older
};

}  // namespace thread_system
