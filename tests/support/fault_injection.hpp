// Allocation-fault injection for the fault-sweep binaries: replaces the
// global allocation functions (every form, each paired with free()) so that
// a test can make one chosen allocation fail, or every allocation of one
// thread. Include it in exactly one translation unit of a test binary: the
// replacements are ordinary (non-inline) definitions.
//
//   fault::arm(k);      // the k-th allocation from now (any thread) throws std::bad_alloc
//   fault::disarm();    // returns how many allocations were counted since arm()
//   fault::tl_fail_all  // set by a thread for itself: all its allocations fail
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace fault {
// Armed: allocations are counted; the one whose number equals fail_at
// throws. All relaxed: a count shared by every thread, no data published.
inline std::atomic<bool> armed{false};
inline std::atomic<std::uint64_t> count{0};
inline std::atomic<std::uint64_t> fail_at{0};
// Set by a thread for itself: every allocation it makes fails while set.
inline thread_local bool tl_fail_all = false;

// Count allocations from now; the k-th fails (k = 0: none fails).
inline void arm(std::uint64_t k) noexcept {
  count.store(0, std::memory_order_relaxed);
  fail_at.store(k, std::memory_order_relaxed);
  armed.store(true, std::memory_order_relaxed);
}

// Stop counting; returns the number of allocations since arm().
inline std::uint64_t disarm() noexcept {
  armed.store(false, std::memory_order_relaxed);
  return count.load(std::memory_order_relaxed);
}

inline bool should_fail() noexcept {
  if (tl_fail_all) return true;
  if (!armed.load(std::memory_order_relaxed)) return false;
  const std::uint64_t n = count.fetch_add(1, std::memory_order_relaxed) + 1;
  return n == fail_at.load(std::memory_order_relaxed);
}

inline void* allocate(std::size_t n) {
  if (should_fail()) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

inline void* allocate_aligned(std::size_t n, std::align_val_t al) {
  if (should_fail()) throw std::bad_alloc();
  const auto a = static_cast<std::size_t>(al);
  const std::size_t rounded = (n + a - 1) / a * a;
  if (void* p = std::aligned_alloc(a, rounded == 0 ? a : rounded)) return p;
  throw std::bad_alloc();
}

inline void* allocate_nothrow(std::size_t n) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}

inline void* allocate_aligned_nothrow(std::size_t n, std::align_val_t al) noexcept {
  try {
    return allocate_aligned(n, al);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace fault

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) { return fault::allocate(n); }
void* operator new[](std::size_t n) { return fault::allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return fault::allocate_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return fault::allocate_aligned(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return fault::allocate_nothrow(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return fault::allocate_nothrow(n); }
// The aligned nothrow forms too (a pool's task_group slots): every form a
// program may call is replaced, so each allocation is counted (and may be
// failed) and pairs with the free() below.
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return fault::allocate_aligned_nothrow(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return fault::allocate_aligned_nothrow(n, a);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
