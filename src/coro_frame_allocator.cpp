// Recycling allocator for coroutine frames: see
// include/thread_system/coro/frame_allocator.hpp. The design is the classic
// thread-cache + central free list of size classes (as in TCMalloc:
// Ghemawat and Menage, "TCMalloc: Thread-Caching Malloc"), reduced to what
// frames need: fixed 64-byte classes, batch moves between the two levels.
#include "thread_system/coro/frame_allocator.hpp"

#include <array>
#include <cstddef>
#include <mutex>
#include <new>

// Under AddressSanitizer a cached block is poisoned, so a use after free of a
// frame is reported even though the memory is recycled rather than freed.
#if defined(__SANITIZE_ADDRESS__)
#define THREAD_SYSTEM_FRAME_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define THREAD_SYSTEM_FRAME_ASAN 1
#endif
#endif
#if defined(THREAD_SYSTEM_FRAME_ASAN)
#include <sanitizer/asan_interface.h>
#define THREAD_SYSTEM_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define THREAD_SYSTEM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define THREAD_SYSTEM_POISON(p, n) (static_cast<void>(p), static_cast<void>(n))
#define THREAD_SYSTEM_UNPOISON(p, n) (static_cast<void>(p), static_cast<void>(n))
#endif

namespace thread_system::detail {
namespace {

constexpr std::size_t granule = 64;
constexpr std::size_t class_count = max_recycled_size / granule;
constexpr std::size_t batch = thread_cache_limit / 2;

struct free_block {
  free_block* next;
};

// A free list of one size class (`bytes` per block). Under
// AddressSanitizer a cached block is poisoned past its link (the link stays
// readable, so LeakSanitizer follows the list and does not call the cache a
// leak).
struct size_class_list {
  free_block* head = nullptr;
  std::size_t count = 0;

  void push(free_block* b, std::size_t bytes) noexcept {
    b->next = head;
    THREAD_SYSTEM_POISON(b + 1, bytes - sizeof(free_block));
    head = b;
    ++count;
  }
  free_block* pop(std::size_t bytes) noexcept {
    free_block* b = head;
    THREAD_SYSTEM_UNPOISON(b + 1, bytes - sizeof(free_block));
    head = b->next;
    --count;
    return b;
  }
};

std::size_t class_of(std::size_t n) noexcept { return (n + granule - 1) / granule - 1; }
std::size_t class_bytes(std::size_t c) noexcept { return (c + 1) * granule; }

// The shared level: one mutex for all classes (it is taken once per batch).
// Never destroyed, so threads that exit during static destruction can still
// hand their frames back.
struct shared_lists {
  std::mutex mutex;
  std::array<size_class_list, class_count> lists{};

  // Takes `n` blocks from `from` (a thread's list) and keeps what fits; the
  // rest goes back to the system.
  void give(size_class_list& from, std::size_t c, std::size_t n) noexcept {
    free_block* overflow = nullptr;
    {
      std::lock_guard lock(mutex);
      for (std::size_t i = 0; i < n && from.head != nullptr; ++i) {
        free_block* b = from.pop(class_bytes(c));
        if (lists[c].count < shared_limit) {
          lists[c].push(b, class_bytes(c));
        } else {
          b->next = overflow;
          overflow = b;
        }
      }
    }
    while (overflow != nullptr) {
      free_block* next = overflow->next;
      ::operator delete(overflow);
      overflow = next;
    }
  }
  // Moves up to `n` blocks of class `c` into `to`.
  void take(size_class_list& to, std::size_t c, std::size_t n) noexcept {
    std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < n && lists[c].head != nullptr; ++i)
      to.push(lists[c].pop(class_bytes(c)), class_bytes(c));
  }
};

shared_lists& shared() noexcept {
  // In static storage, constructed once and intentionally never destroyed
  // (see above); no allocation, so it cannot fail.
  alignas(shared_lists) static unsigned char storage[sizeof(shared_lists)];
  static shared_lists* const s = ::new (static_cast<void*>(storage)) shared_lists;
  return *s;
}

// Set once this thread's cache is destroyed: frames freed later in the
// thread's exit (another thread_local's destructor) bypass it.
thread_local bool t_cache_gone = false;  // trivially destructible: valid to the end

struct thread_cache {
  std::array<size_class_list, class_count> lists{};
  thread_cache() = default;
  thread_cache(const thread_cache&) = delete;
  thread_cache& operator=(const thread_cache&) = delete;
  ~thread_cache() {
    t_cache_gone = true;
    for (std::size_t c = 0; c < class_count; ++c) shared().give(lists[c], c, lists[c].count);
  }
};

// This thread's cache, or null once it is gone.
thread_cache* cache() noexcept {
  if (t_cache_gone) return nullptr;
  thread_local thread_cache tc;
  return &tc;
}

}  // namespace

void* coro_frame_allocate(std::size_t n) {
  if (n == 0 || n > max_recycled_size) return ::operator new(n);
  const std::size_t c = class_of(n);
  if (thread_cache* tc = cache()) {
    size_class_list& list = tc->lists[c];
    if (list.head == nullptr) shared().take(list, c, batch);
    if (list.head != nullptr) return list.pop(class_bytes(c));
  }
  return ::operator new(class_bytes(c));
}

void coro_frame_free(void* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  if (n == 0 || n > max_recycled_size) {
    ::operator delete(p);
    return;
  }
  const std::size_t c = class_of(n);
  thread_cache* tc = cache();
  if (tc == nullptr) {
    size_class_list one;
    one.push(static_cast<free_block*>(p), class_bytes(c));
    shared().give(one, c, 1);
    return;
  }
  size_class_list& list = tc->lists[c];
  list.push(static_cast<free_block*>(p), class_bytes(c));
  if (list.count > thread_cache_limit) shared().give(list, c, batch);
}

}  // namespace thread_system::detail
