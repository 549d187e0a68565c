// detail/asymmetric_fence.hpp: where the kernel offers membarrier(2), the
// logger's producers pay only a compiler barrier (asymmetric_fence_cheap is
// set by asymmetric_fence_init()); and either way a light side and a heavy
// side form a store->load fence pair: in the store-buffering litmus test
// (each thread stores its flag, runs its side of the fence, loads the
// other's flag) at least one thread sees the other's store.
#include "thread_system/logger/detail/asymmetric_fence.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "support/test_support.hpp"
#include "thread_system/detail/spin.hpp"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

TEST(AsymmetricFence, UsesMembarrierWhereTheKernelOffersIt) {
#if !defined(__linux__) || !defined(__NR_membarrier)
  GTEST_SKIP() << "no membarrier(2) on this platform: both sides are full fences";
#elif defined(THREAD_SYSTEM_TSAN)
  GTEST_SKIP() << "under ThreadSanitizer both sides are seq_cst fences (which it models)";
#else
  // MEMBARRIER_CMD_QUERY (0) and MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3): fixed by the kernel's ABI.
  const long supported = ::syscall(__NR_membarrier, 0, 0, 0);
  if (supported < 0 || (supported & (1 << 3)) == 0) {
    GTEST_SKIP() << "this kernel does not offer MEMBARRIER_CMD_PRIVATE_EXPEDITED";
  }
  ts::detail::asymmetric_fence_init();
  // relaxed: set by this thread's own call above.
  EXPECT_TRUE(ts::detail::asymmetric_fence_cheap.load(std::memory_order_relaxed))
      << "membarrier is available, yet the producers' side still runs a full fence";
  ts::detail::asymmetric_fence_heavy();  // registered: must not fail (it would abort)
#endif
}

TEST(AsymmetricFence, TheLightAndHeavySidesNeverLetBothThreadsMissTheOtherStore) {
  ts::detail::asymmetric_fence_init();  // as the logger does before any producer runs
  std::atomic<int> x{0};
  std::atomic<int> y{0};
  std::atomic<std::uint64_t> go{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<int> heavy_saw{0};
  std::atomic<bool> quit{false};
  std::thread heavy_side([&] {
    for (std::uint64_t round = 1;; ++round) {
      wait_for(go, round);
      if (quit.load(std::memory_order_relaxed)) return;  // ordered by the acquire of `go`
      y.store(1, std::memory_order_relaxed);
      ts::detail::asymmetric_fence_heavy();
      heavy_saw.store(x.load(std::memory_order_relaxed), std::memory_order_relaxed);
      done.store(round, std::memory_order_release);  // pairs with wait_for() below: the round's loads are done
    }
  });
  // A membarrier is a system call that interrupts every running thread of
  // the process: a few microseconds, so fewer rounds than fence_test's.
  ts::test::round_budget budget(ts::test::scaled(50'000), 1'000, std::chrono::seconds(1));
  std::size_t both_missed = 0;
  std::uint64_t round = 1;
  for (std::size_t i = 0; budget.next(i); ++i, ++round) {
    // relaxed: the other thread is waiting for `go`, whose release publishes these.
    x.store(0, std::memory_order_relaxed);
    y.store(0, std::memory_order_relaxed);
    go.store(round, std::memory_order_release);                        // pairs with the other thread's wait_for()
    for (std::size_t d = 0; d < i % 16; ++d) ts::detail::cpu_relax();  // vary which thread goes first
    x.store(1, std::memory_order_relaxed);
    ts::detail::asymmetric_fence_light();
    const int light_saw = y.load(std::memory_order_relaxed);
    wait_for(done, round);
    if (light_saw == 0 && heavy_saw.load(std::memory_order_relaxed) == 0) ++both_missed;
  }
  quit.store(true, std::memory_order_relaxed);  // published by the release of `go`
  go.store(round, std::memory_order_release);
  heavy_side.join();
  EXPECT_EQ(both_missed, 0U) << "of " << budget.ran() << " rounds";
  EXPECT_GT(budget.ran(), 0U);
}

}  // namespace
