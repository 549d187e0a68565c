// The recycling allocator of coroutine frames
// (include/thread_system/coro/frame_allocator.hpp): size classes of 64 bytes,
// a free list per thread, a shared list that frames freed on other threads
// (or left by an exiting thread) travel back through, and plain operator new
// for frames over max_recycled_size. The size classes here (961-1024 and
// 897-960 bytes) are not used by the other tests' frames.
#include "thread_system/coro/frame_allocator.hpp"

#include <gtest/gtest.h>

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

TEST(FrameAllocator, EveryBlockIsAlignedAndUsableToItsLastByte) {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n : {std::size_t{1}, std::size_t{8}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                        std::size_t{500}, d::max_recycled_size, d::max_recycled_size + 1, std::size_t{64 * 1024}}) {
    void* p = d::coro_frame_allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_for_any_frame(p)) << n;
    std::memset(p, 0xab, n);  // AddressSanitizer checks the whole block is ours
    blocks.emplace_back(p, n);
  }
  for (auto [p, n] : blocks) d::coro_frame_free(p, n);
}

// A freed frame is the next one of its size class this thread gets (any size
// that rounds up to the same multiple of 64), and no other class gets it.
TEST(FrameAllocator, AFreedFrameIsReusedWithinItsSizeClassOnly) {
  void* first = d::coro_frame_allocate(1000);  // class 961..1024
  d::coro_frame_free(first, 1000);
  void* other_class = d::coro_frame_allocate(900);  // class 897..960
  EXPECT_NE(other_class, first);
  void* same_class = d::coro_frame_allocate(970);
  EXPECT_EQ(same_class, first);
  d::coro_frame_free(same_class, 970);
  d::coro_frame_free(other_class, 900);
  d::coro_frame_free(nullptr, 1000);  // a null frame is ignored, as by operator delete
}

// Frames freed on a thread that exits are not lost with it: they go to the
// shared list, and a thread whose own list is empty takes them from there.
TEST(FrameAllocator, FramesLeftByAnExitingThreadAreReusedByAnother) {
  constexpr std::size_t n = 100;  // more than thread_cache_limit: batches go to the shared list on the way
  static_assert(n > d::thread_cache_limit);
  std::vector<void*> freed;
  std::thread producer([&] {
    for (std::size_t i = 0; i < n; ++i) freed.push_back(d::coro_frame_allocate(1000));
    for (void* p : freed) d::coro_frame_free(p, 1000);
  });
  producer.join();
  const std::set<void*> from_producer(freed.begin(), freed.end());
  ASSERT_EQ(from_producer.size(), n) << "distinct blocks";
  std::vector<void*> again;
  std::thread consumer([&] {
    for (std::size_t i = 0; i < n; ++i) again.push_back(d::coro_frame_allocate(1000));
  });
  consumer.join();
  std::size_t reused = 0;
  for (void* p : again) reused += from_producer.count(p);
  EXPECT_EQ(reused, n) << "every frame came back through the shared list";
  for (void* p : again) d::coro_frame_free(p, 1000);  // freed on this thread: the allocator allows any thread
}

}  // namespace
}  // namespace thread_system
