// The recycling allocator of coroutine frames and task_group nodes
// (include/thread_system/detail/recycling_allocator.hpp): size classes of 64
// bytes, a free list per thread, a shared level that blocks freed on other
// threads (or left by an exiting thread) travel back through in batches, and
// plain operator new for blocks over max_recycled_size. The size classes
// here (961-1024, 897-960 and 833-896 bytes) are used by no other test of
// this binary.
#include "thread_system/detail/recycling_allocator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace thread_system {
namespace {

namespace d = detail;

bool aligned_for_any_frame(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % __STDCPP_DEFAULT_NEW_ALIGNMENT__ == 0;
}

TEST(RecyclingAllocator, EveryBlockIsAlignedAndUsableToItsLastByte) {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n : {std::size_t{1}, std::size_t{8}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                        std::size_t{500}, d::max_recycled_size, d::max_recycled_size + 1, std::size_t{64 * 1024}}) {
    void* p = d::recycled_allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_for_any_frame(p)) << n;
    std::memset(p, 0xab, n);  // AddressSanitizer checks the whole block is ours
    blocks.emplace_back(p, n);
  }
  for (auto [p, n] : blocks) d::recycled_free(p, n);
}

// A freed frame is the next one of its size class this thread gets (any size
// that rounds up to the same multiple of 64), and no other class gets it.
TEST(RecyclingAllocator, AFreedFrameIsReusedWithinItsSizeClassOnly) {
  void* first = d::recycled_allocate(1000);  // class 961..1024
  d::recycled_free(first, 1000);
  void* other_class = d::recycled_allocate(900);  // class 897..960
  EXPECT_NE(other_class, first);
  void* same_class = d::recycled_allocate(970);
  EXPECT_EQ(same_class, first);
  d::recycled_free(same_class, 970);
  d::recycled_free(other_class, 900);
  d::recycled_free(nullptr, 1000);  // a null frame is ignored, as by operator delete
}

// Frames freed on a thread that exits are not lost with it: they go to the
// shared list, and a thread whose own list is empty takes them from there.
TEST(RecyclingAllocator, FramesLeftByAnExitingThreadAreReusedByAnother) {
  constexpr std::size_t n = 100;  // more than thread_cache_limit: batches go to the shared list on the way
  static_assert(n > d::thread_cache_limit);
  std::vector<void*> freed;
  std::thread producer([&] {
    for (std::size_t i = 0; i < n; ++i) freed.push_back(d::recycled_allocate(1000));
    for (void* p : freed) d::recycled_free(p, 1000);
  });
  producer.join();
  const std::set<void*> from_producer(freed.begin(), freed.end());
  ASSERT_EQ(from_producer.size(), n) << "distinct blocks";
  std::vector<void*> again;
  std::thread consumer([&] {
    for (std::size_t i = 0; i < n; ++i) again.push_back(d::recycled_allocate(1000));
  });
  consumer.join();
  std::size_t reused = 0;
  for (void* p : again) reused += from_producer.count(p);
  EXPECT_EQ(reused, n) << "every frame came back through the shared list";
  for (void* p : again) d::recycled_free(p, 1000);  // freed on this thread: the allocator allows any thread
}

// Blocks one thread allocates and another frees (a task_group's nodes, a
// task's frame) come back to the first while the second still runs: the
// freeing thread keeps at most thread_cache_limit of them and hands the rest
// over in batches. (The test above sees them only when the freeing thread
// exits.) The allocating thread takes twice as many as were freed, so that
// whatever its own list held first does not hide the batches.
TEST(RecyclingAllocator, BlocksFreedOnALiveThreadComeBackToTheAllocatingOne) {
  constexpr std::size_t n = 200;     // several batches
  constexpr std::size_t size = 850;  // class 833..896
  std::vector<void*> first(n);
  std::vector<void*> again(2 * n);
  std::atomic<int> step{0};  // 1: `freeing` freed every block; 2: round two is done
  std::thread allocating([&] {
    for (void*& p : first) p = d::recycled_allocate(size);
    std::thread freeing([&] {
      for (void* p : first) d::recycled_free(p, size);
      step.store(1, std::memory_order_release);  // pairs with the acquire loads below
      while (step.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    });
    while (step.load(std::memory_order_acquire) != 1) std::this_thread::yield();
    for (void*& p : again) p = d::recycled_allocate(size);
    step.store(2, std::memory_order_release);
    freeing.join();
    for (void* p : again) d::recycled_free(p, size);
  });
  allocating.join();
  const std::set<void*> freed(first.begin(), first.end());
  std::size_t reused = 0;
  for (void* p : again) reused += freed.count(p);
  EXPECT_GE(reused, n - d::thread_cache_limit) << "blocks freed on a live thread came back";
}

}  // namespace
}  // namespace thread_system
