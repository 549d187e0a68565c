// Recycling allocator for small blocks that one thread allocates and another
// frees: coroutine frames (task<T>'s and spawn()'s promises) and the nodes a
// task_group's creating thread hands to the pool's workers.
//
// Blocks up to `max_recycled_size` bytes are rounded up to a multiple of 64
// and kept, once freed, on a free list of their size class instead of being
// returned to the system: a steady state of blocks allocated and freed calls
// no malloc. Each thread keeps a private list per class (no
// synchronisation); a list that grows past `thread_cache_limit` hands a batch
// of half that many to a shared level (one mutex acquisition per batch), and
// a thread whose list is empty takes a batch from there before it allocates.
// A block freed on another thread than the one that allocated it (the common
// case: a task started on one thread finishes on a worker; a worker runs and
// frees a task_group's job) travels back this way. A batch moves between the
// levels as one chain, so the thread that takes it reads one block under
// the mutex, not every block of the batch (each of which was last written by
// the thread that freed it). The shared level keeps at most `shared_limit`
// blocks per class; beyond that, batches go back to the system, so a burst (a
// million-deep chain of awaits) does not pin its peak memory for ever. A
// thread that exits hands its lists to the shared level. Larger blocks use
// operator new and operator delete.
//
// Alignment: every block is aligned to __STDCPP_DEFAULT_NEW_ALIGNMENT__;
// recycled_new() takes over-aligned types to aligned operator new instead.
//
// Out of memory: recycled_allocate(n) throws std::bad_alloc (as the default
// coroutine frame allocation does); the std::nothrow overload and
// recycled_new() return null. Nothing is lost: a block the system cannot
// give is not taken from anywhere else.
//
// Thread-safety: every function may be called from any thread; a block may
// be freed on any thread.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace thread_system::detail {

/// Blocks larger than this (bytes) are not recycled.
inline constexpr std::size_t max_recycled_size = 1024;
/// Blocks one thread keeps per size class before it shares a batch.
inline constexpr std::size_t thread_cache_limit = 64;
/// Blocks the shared level keeps per size class.
inline constexpr std::size_t shared_limit = 4096;

/// A block of at least `n` bytes, aligned to __STDCPP_DEFAULT_NEW_ALIGNMENT__.
/// Throws std::bad_alloc.
[[nodiscard]] void* recycled_allocate(std::size_t n);
/// The same, or null when there is no memory.
[[nodiscard]] void* recycled_allocate(std::size_t n, const std::nothrow_t&) noexcept;
/// Frees a block from recycled_allocate(n) (the same `n`; null is ignored).
void recycled_free(void* p, std::size_t n) noexcept;

/// Frees memory of a T from recycled_new(), its object already destroyed.
template <typename T>
void recycled_free_of(void* p) noexcept {
  if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    ::operator delete(p, std::align_val_t{alignof(T)});
  } else {
    recycled_free(p, sizeof(T));
  }
}

/// A T constructed in a recycled block (an over-aligned T in memory from
/// aligned operator new), or null when there is no memory. What T's
/// constructor throws leaves here, with the block freed.
template <typename T, typename... Args>
[[nodiscard]] T* recycled_new(Args&&... args) {
  void* p = nullptr;
  if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    p = ::operator new(sizeof(T), std::align_val_t{alignof(T)}, std::nothrow);
  } else {
    p = recycled_allocate(sizeof(T), std::nothrow);
  }
  if (p == nullptr) return nullptr;
  try {
    return ::new (p) T(std::forward<Args>(args)...);
  } catch (...) {
    recycled_free_of<T>(p);
    throw;
  }
}

/// Destroys a T from recycled_new() and frees its block (on any thread).
template <typename T>
void recycled_delete(T* p) noexcept {
  p->~T();
  recycled_free_of<T>(static_cast<void*>(p));
}

}  // namespace thread_system::detail
