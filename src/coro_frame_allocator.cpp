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

namespace thread_system::detail {
namespace {

constexpr std::size_t granule = 64;
constexpr std::size_t class_count = max_recycled_size / granule;
constexpr std::size_t batch = thread_cache_limit / 2;

struct free_block {
  free_block* next;
};

struct size_class_list {
  free_block* head = nullptr;
  std::size_t count = 0;

  void push(free_block* b) noexcept {
    b->next = head;
    head = b;
    ++count;
  }
  free_block* pop() noexcept {
    free_block* b = head;
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
        free_block* b = from.pop();
        if (lists[c].count < shared_limit) {
          lists[c].push(b);
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
    for (std::size_t i = 0; i < n && lists[c].head != nullptr; ++i) to.push(lists[c].pop());
  }
};

shared_lists& shared() noexcept {
  static auto* s = new shared_lists;  // intentionally never destroyed (see above)
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
    if (list.head != nullptr) return list.pop();
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
    one.push(static_cast<free_block*>(p));
    shared().give(one, c, 1);
    return;
  }
  size_class_list& list = tc->lists[c];
  list.push(static_cast<free_block*>(p));
  if (list.count > thread_cache_limit) shared().give(list, c, batch);
}

}  // namespace thread_system::detail
