// Recycling allocator for small blocks freed on other threads: see
// include/thread_system/detail/recycling_allocator.hpp. The design is the
// classic thread-cache + central free list of size classes (as in TCMalloc:
// Ghemawat and Menage, "TCMalloc: Thread-Caching Malloc"), reduced to what
// these blocks need: fixed 64-byte classes, batch moves between the two
// levels, each batch moved as one chain (TCMalloc's transfer cache moves
// batches whole in the same way).
#include "thread_system/detail/recycling_allocator.hpp"

#include <array>
#include <cstddef>
#include <mutex>
#include <new>

// Under AddressSanitizer a cached block is poisoned, so a use after free of a
// block is reported even though the memory is recycled rather than freed.
#if defined(__SANITIZE_ADDRESS__)
#define THREAD_SYSTEM_RECYCLING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define THREAD_SYSTEM_RECYCLING_ASAN 1
#endif
#endif
#if defined(THREAD_SYSTEM_RECYCLING_ASAN)
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
constexpr std::size_t batch_size = thread_cache_limit / 2;

struct free_block {
  free_block* next;
};

// The first block of a batch on the shared level: the batch's blocks are
// linked by `next` as on a thread's list; `next_batch` links the level's
// batches of one class. Under AddressSanitizer its two extra words stay
// readable while it heads a batch.
struct batch_head {
  free_block* next;
  batch_head* next_batch;
  std::size_t count;
};
static_assert(sizeof(batch_head) <= granule);

// A thread's free list of one size class (`bytes` per block). Under
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

// The shared level: per class a stack of batches, one mutex for all classes
// (taken once per batch). Never destroyed, so threads that exit during
// static destruction can still hand their blocks back.
struct shared_lists {
  std::mutex mutex;
  std::array<batch_head*, class_count> batches{};
  std::array<std::size_t, class_count> counts{};  // blocks per class

  // Takes the first min(n, from.count) blocks of `from` (a thread's list)
  // as one batch: kept if the class has room for all of it, else given
  // back to the system. The walk to the batch's end reads blocks this
  // thread freed last (in its cache), outside the mutex.
  void give(size_class_list& from, std::size_t c, std::size_t n) noexcept {
    if (n > from.count) n = from.count;
    if (n == 0) return;
    free_block* const first = from.head;
    free_block* last = first;
    for (std::size_t i = 1; i < n; ++i) last = last->next;
    from.head = last->next;
    from.count -= n;
    last->next = nullptr;
    auto* const batch = reinterpret_cast<batch_head*>(first);
    THREAD_SYSTEM_UNPOISON(&batch->next_batch, sizeof(batch_head) - sizeof(free_block));
    batch->count = n;
    {
      std::lock_guard lock(mutex);
      if (counts[c] + n <= shared_limit) {
        batch->next_batch = batches[c];
        batches[c] = batch;
        counts[c] += n;
        return;
      }
    }
    for (free_block* b = first; b != nullptr;) {
      free_block* const next = b->next;
      ::operator delete(b);
      b = next;
    }
  }
  // Makes the newest batch of class `c`, if any, the list `to` (empty).
  void take(size_class_list& to, std::size_t c) noexcept {
    batch_head* batch = nullptr;
    {
      std::lock_guard lock(mutex);
      batch = batches[c];
      if (batch == nullptr) return;
      batches[c] = batch->next_batch;
      counts[c] -= batch->count;
    }
    to.head = reinterpret_cast<free_block*>(batch);
    to.count = batch->count;
    THREAD_SYSTEM_POISON(&batch->next_batch, sizeof(batch_head) - sizeof(free_block));
  }
};

shared_lists& shared() noexcept {
  // In static storage, constructed once and intentionally never destroyed
  // (see above); no allocation, so it cannot fail.
  alignas(shared_lists) static unsigned char storage[sizeof(shared_lists)];
  static shared_lists* const s = ::new (static_cast<void*>(storage)) shared_lists;
  return *s;
}

// Set once this thread's cache is destroyed: blocks freed later in the
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

// A block of class `c` from this thread's list or the shared level, or null.
void* recycled_block(std::size_t c) noexcept {
  thread_cache* const tc = cache();
  if (tc == nullptr) return nullptr;
  size_class_list& list = tc->lists[c];
  if (list.head == nullptr) shared().take(list, c);
  return list.head != nullptr ? list.pop(class_bytes(c)) : nullptr;
}

}  // namespace

void* recycled_allocate(std::size_t n, const std::nothrow_t&) noexcept {
  if (n == 0 || n > max_recycled_size) return ::operator new(n, std::nothrow);
  const std::size_t c = class_of(n);
  if (void* p = recycled_block(c)) return p;
  return ::operator new(class_bytes(c), std::nothrow);
}

void* recycled_allocate(std::size_t n) {
  if (void* p = recycled_allocate(n, std::nothrow)) return p;
  throw std::bad_alloc();
}

void recycled_free(void* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  if (n == 0 || n > max_recycled_size) {
    ::operator delete(p);
    return;
  }
  const std::size_t c = class_of(n);
  thread_cache* const tc = cache();
  if (tc == nullptr) {
    size_class_list one;
    one.push(static_cast<free_block*>(p), class_bytes(c));
    shared().give(one, c, 1);
    return;
  }
  size_class_list& list = tc->lists[c];
  list.push(static_cast<free_block*>(p), class_bytes(c));
  if (list.count > thread_cache_limit) shared().give(list, c, batch_size);
}

}  // namespace thread_system::detail
