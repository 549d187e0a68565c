// Recycling allocator for coroutine frames (task<T>'s promise uses it).
//
// Frames up to `max_recycled_size` bytes are rounded up to a multiple of 64
// and kept, once freed, on a free list of their size class instead of being
// returned to the system: a steady state of tasks starting and finishing
// calls no malloc. Each thread keeps a private list per class (no
// synchronisation); a list that grows past `thread_cache_limit` hands a batch
// to a shared list (one mutex acquisition per batch), and a thread whose list
// is empty takes a batch from there before it allocates. A frame freed on
// another thread than the one that allocated it (the common case: a task
// started on one thread finishes on a worker) travels back this way. The
// shared list keeps at most `shared_limit` frames per class; beyond that,
// frees go back to the system, so a burst (a million-deep chain of awaits)
// does not pin its peak memory for ever. Larger frames use operator new.
//
// Out of memory: allocate() throws std::bad_alloc, as the default frame
// allocation does (the call that creates the coroutine throws it).
//
// Thread-safety: both functions may be called from any thread.
#pragma once

#include <cstddef>

namespace thread_system::detail {

/// Frames larger than this (bytes) are not recycled.
inline constexpr std::size_t max_recycled_size = 1024;
/// Frames one thread keeps per size class before it shares a batch.
inline constexpr std::size_t thread_cache_limit = 64;
/// Frames the shared list keeps per size class.
inline constexpr std::size_t shared_limit = 4096;

/// A block of at least `n` bytes, aligned for any frame
/// (__STDCPP_DEFAULT_NEW_ALIGNMENT__). Throws std::bad_alloc.
[[nodiscard]] void* coro_frame_allocate(std::size_t n);
/// Frees a block from coro_frame_allocate(n) (the same `n`).
void coro_frame_free(void* p, std::size_t n) noexcept;

}  // namespace thread_system::detail
