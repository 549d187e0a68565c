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

#include "../support/test_support.hpp"
#include "thread_system/detail/spin.hpp"

namespace ts = thread_system;

namespace {

// Spins (yielding now and then, for a loaded machine) until `word` reads `value`.
void wait_for(const std::atomic<std::uint64_t>& word, std::uint64_t value) {
  for (unsigned spins = 0; word.load(std::memory_order_acquire) != value; ++spins) {  // pairs with the release stores
    if (spins % 64 == 63) {
      std::this_thread::yield();
    } else {
      ts::detail::cpu_relax();
    }
  }
}

TEST(SeqCstFence, StoreBufferingNeverLetsBothThreadsMissTheOtherStore) {
  std::atomic<int> x{0};
  std::atomic<int> y{0};
  std::atomic<std::uint64_t> go{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<int> other_saw{0};
  std::atomic<bool> quit{false};
  std::thread other([&] {
    for (std::uint64_t round = 1;; ++round) {
      wait_for(go, round);
      if (quit.load(std::memory_order_relaxed)) return;  // ordered by the acquire of `go`
      y.store(1, std::memory_order_relaxed);
      ts::detail::seq_cst_fence();
      other_saw.store(x.load(std::memory_order_relaxed), std::memory_order_relaxed);
      done.store(round, std::memory_order_release);  // pairs with wait_for() below: the round's loads are done
    }
  });
  ts::test::round_budget budget(ts::test::scaled(200'000), 1'000, std::chrono::seconds(1));
  std::size_t both_missed = 0;
  std::uint64_t round = 1;
  for (std::size_t i = 0; budget.next(i); ++i, ++round) {
    // relaxed: the other thread is waiting for `go`, whose release publishes these.
    x.store(0, std::memory_order_relaxed);
    y.store(0, std::memory_order_relaxed);
    go.store(round, std::memory_order_release);                        // pairs with the other thread's wait_for()
    for (std::size_t d = 0; d < i % 16; ++d) ts::detail::cpu_relax();  // vary which thread goes first
    x.store(1, std::memory_order_relaxed);
    ts::detail::seq_cst_fence();
    const int this_saw = y.load(std::memory_order_relaxed);
    wait_for(done, round);
    if (this_saw == 0 && other_saw.load(std::memory_order_relaxed) == 0) ++both_missed;
  }
  quit.store(true, std::memory_order_relaxed);  // published by the release of `go`
  go.store(round, std::memory_order_release);
  other.join();
  EXPECT_EQ(both_missed, 0U) << "of " << budget.ran() << " rounds";
  EXPECT_GT(budget.ran(), 0U);
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
