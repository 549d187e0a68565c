// detail/fence.hpp: seq_cst_fence() orders a store before a later load of
// another location (the store-buffering litmus test: two threads each store
// their flag, fence, then load the other's; at least one must see the other's
// store) - also in its ThreadSanitizer form, a seq_cst read-modify-write of
// one shared word. (With a compiler-only barrier in its place, about 3% of
// the rounds see both loads miss on x86-64.) single_writer_add() keeps an
// exact count that readers see grow.
#include "thread_system/detail/fence.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "../support/store_buffering.hpp"

namespace ts = thread_system;

namespace {

TEST(SeqCstFence, StoreBufferingNeverLetsBothThreadsMissTheOtherStore) {
  const auto r = ts::test::store_buffering([] { ts::detail::seq_cst_fence(); }, [] { ts::detail::seq_cst_fence(); },
                                           ts::test::scaled(200'000), std::chrono::seconds(1));
  EXPECT_EQ(r.both_missed, 0U) << "of " << r.rounds << " rounds";
  EXPECT_GT(r.rounds, 0U);
}

TEST(SingleWriterAdd, OneWriterKeepsAnExactCountThatReadersSeeGrow) {
  std::atomic<std::uint64_t> counter{0};
  std::atomic<bool> finished{false};
  constexpr std::uint64_t adds = 200'000;
  std::thread writer([&] {
    for (std::uint64_t i = 0; i < adds; ++i) ts::detail::single_writer_add(counter, 1);
    ts::detail::single_writer_add(counter, 0, std::memory_order_release);
    finished.store(true, std::memory_order_release);  // pairs with the acquire below
  });
  std::uint64_t last = 0;
  bool monotonic = true;
  while (!finished.load(std::memory_order_acquire)) {
    const std::uint64_t now = counter.load(std::memory_order_relaxed);  // a snapshot
    monotonic = monotonic && now >= last;
    last = now;
  }
  writer.join();
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(counter.load(std::memory_order_relaxed), adds);
}

}  // namespace
