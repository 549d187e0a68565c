// Atomic helpers: a sequentially consistent fence that ThreadSanitizer
// understands, and the add of a counter that has one writer.
//
// TSan does not model std::atomic_thread_fence, so under TSan the same
// ordering is obtained with a seq_cst read-modify-write of one shared word:
// all such RMWs are totally ordered and each synchronises with the previous
// one, which gives the store->load ordering the fence-based Dekker patterns
// in this library rely on. Slower, equally correct; used only under TSan.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__SANITIZE_THREAD__)
#define THREAD_SYSTEM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define THREAD_SYSTEM_TSAN 1
#endif
#endif

namespace thread_system::detail {

#if defined(THREAD_SYSTEM_TSAN)
inline std::atomic<std::uint32_t> tsan_fence_word{0};
#endif

inline void seq_cst_fence() noexcept {
#if defined(THREAD_SYSTEM_TSAN)
  (void)tsan_fence_word.fetch_add(0, std::memory_order_seq_cst);  // pairs with every other seq_cst_fence()
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Adds `n` to a counter only the calling thread writes (readers may load it
// at any time): a load and a store, not a locked read-modify-write. `order`
// is the store's (release when a reader's acquire load must see what the
// writer did before).
inline void single_writer_add(std::atomic<std::uint64_t>& counter, std::uint64_t n,
                              std::memory_order order = std::memory_order_relaxed) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, order);
}

}  // namespace thread_system::detail
